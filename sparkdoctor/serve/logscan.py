"""Match server log lines against the matrix's known symptoms, as the lines arrive.

Every matrix entry may list `symptoms`: exact strings a broken stack prints (a ptxas error, a Python
exception message). `check` matches them against what it collects; the launcher matches them against
each line of a starting server's log, so a known failure is named the moment it is printed. Matching is
a plain substring test on the line with terminal colour codes removed (vLLM colours its log level when
it thinks it has a terminal); it is pure and cheap, so it can run on every line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Protocol

# CSI sequences (colours, cursor moves) and the two-byte ESC forms.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
MAX_LINE = 2000  # characters of a matched line kept in a hit


class HasSymptoms(Protocol):
    id: str
    symptoms: list[str]


@dataclass(frozen=True)
class Hit:
    """One symptom of one matrix entry, seen in one log line."""

    entry_id: str
    symptom: str
    line: str

    def to_dict(self) -> dict[str, str]:
        return {"entry_id": self.entry_id, "symptom": self.symptom, "line": self.line}


def strip_ansi(line: str) -> str:
    return _ANSI.sub("", line)


def match_line(line: str, entries: Iterable[HasSymptoms]) -> list[Hit]:
    """Every (entry, symptom) whose symptom occurs in `line` (colour codes ignored); at most one hit per entry."""
    clean = strip_ansi(line).rstrip("\r\n")
    hits = []
    for entry in entries:
        for symptom in entry.symptoms or ():
            if symptom and symptom in clean:
                hits.append(Hit(entry.id, symptom, clean[:MAX_LINE]))
                break
    return hits
