"""Match server log lines against the matrix's known symptoms, as the lines arrive.

Every matrix entry may list `symptoms`: strings a broken stack prints (a ptxas error, a Python
exception message). The launcher matches each line of a starting server's log as it arrives, so a
known failure is named the moment it is printed. The matching itself is the one `sparkdoctor
explain` uses (sparkdoctor.matrix.symptoms: exact, then tolerant of colour, paths and numbers), so a
line means the same entry wherever it is read; this module only shapes its answer into a Hit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sparkdoctor.matrix import load
from sparkdoctor.matrix.model import Matrix
from sparkdoctor.matrix.symptoms import HasSymptoms, line_hits, strip_ansi

MAX_LINE = 2000  # characters of a matched line kept in a hit


@dataclass(frozen=True)
class Hit:
    """One symptom of one matrix entry, seen in one log line."""

    entry_id: str
    symptom: str
    line: str

    def to_dict(self) -> dict[str, str]:
        return {"entry_id": self.entry_id, "symptom": self.symptom, "line": self.line}


def match_line(line: str, entries: Iterable[HasSymptoms]) -> list[Hit]:
    """Every entry whose symptom occurs in `line` (colour codes ignored); at most one hit per entry."""
    line = line.rstrip("\r\n")
    shown = strip_ansi(line).strip()[:MAX_LINE]
    return [Hit(entry.id, symptom, shown) for entry, symptom, _ in line_hits(line, entries)]


def symptom_entries(matrix: Matrix | Sequence[HasSymptoms] | None) -> list[HasSymptoms]:
    """The matrix entries that list symptoms: a Matrix, a list of entries, or None (the shipped matrix)."""
    if matrix is None:
        matrix = load()
    entries = matrix.entries if isinstance(matrix, Matrix) else matrix
    return [e for e in entries if e.symptoms and not getattr(e, "withdrawn", None)]
