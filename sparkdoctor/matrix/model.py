"""What the matrix is made of: entries (known problems), stacks (known-good sets) and the judgement.

Plain data, no behaviour: the conditions (sparkdoctor.matrix.conditions), the loader and the
evaluator all import from here and from nothing above them, so the imports run one way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sparkdoctor.errors import InputError, OneLine
from sparkdoctor.vocab import Action, Evidence, Severity

SEVERITIES = Severity.values()  # ("info", "warn", "error"): the words of sparkdoctor.vocab.Severity
ACTIONS = Action.values()  # ("fix", "configure", "rebench", "monitor")
# How an entry knows what it claims, strongest first: a probe here reproduces it and its verify table
# proves it on real installs; its bounds and symptom strings were checked mechanically against the
# released files (its `files` table); a cited report only.
EVIDENCE_LEVELS = Evidence.values()  # ("reproduced", "checked", "reported")
# An id is a stable name: lowercase words joined by '-' or '.'. Matched with fullmatch (a `$`
# anchor would let "an-id\n" through).
ID_RE = re.compile(r"[a-z0-9][a-z0-9.-]*[a-z0-9]")


class MatrixError(OneLine, InputError, ValueError):
    """A malformed matrix file; the message names the file, the entry and the field, in one line."""

    code = "matrix"


def refuse_unknown_keys(table: dict[str, object], known: set[str], where: str) -> None:
    """MatrixError naming `where` and the keys of `table` that are not `known`."""
    unknown = set(table) - known
    if unknown:
        raise MatrixError(f"{where} has unknown key(s): {', '.join(sorted(map(str, unknown)))}")


@dataclass
class Entry:
    id: str
    title: str
    severity: str
    action: str
    summary: str
    remedy: str
    when: dict[str, Any]
    refs: list[str]
    component: str
    file: str
    symptoms: list[str] = field(default_factory=list)
    verified_by: dict[str, Any] | None = None
    fix: str | None = None
    withdrawn: str | None = None
    verify: dict[str, Any] | None = None  # affected/fixed installs for `matrix verify`
    evidence: str = "reported"  # one of EVIDENCE_LEVELS
    files: dict[str, Any] | list[dict[str, Any]] | None = None  # checks over released wheels, one table or one per package (sparkdoctor.matrix.file_checks)
    last_verified: dict[str, Any] | None = None  # {date = "YYYY-MM-DD", versions = "..."}
    # Serving flags / env vars this problem is a reason to carry ("--enforce-eager", "NAME=value", "NAME"):
    # a recipe carrying one is judged against this entry even without a `because` annotation.
    justifies: list[str] = field(default_factory=list)
    # Probes besides verified_by's whose `expect` outcome this entry accounts for (the same guard
    # refusing a bigger kernel): a matched entry explains them too, so none is "no known cause".
    explains_probes: list[str] = field(default_factory=list)
    # Why no released file can decide this entry's version bounds (a runtime hang, an image's
    # contents): `matrix verify --bounds` reports it; such an entry cannot be `checked`.
    unbracketable: str | None = None
    # Why `check` does not list this entry although its conditions hold (a fact of the platform with
    # nothing to change, kept for `explain` and `matrix show`): evaluate_all leaves it out.
    reference_only: str | None = None
    # Settings (flags, NAME=value) that select the code path this entry says breaks: a remedy elsewhere
    # that recommends one in an overlapping range is refused by `matrix validate` (matrix.consistency).
    selected_by: list[str] = field(default_factory=list)
    # When the breakage was first reported publicly and when the matrix got it (YYYY-MM-DD): the delay
    # docs/matrix-knowledge.md states.
    reported: str | None = None
    added: str | None = None
    # Where the remedy was shown to work (a thread comment, a release, a measurement), as a symptom is traced
    remedy_shown: str | None = None


@dataclass
class Stack:
    id: str
    title: str
    packages: dict[str, str]
    refs: list[str]
    component: str
    file: str
    env: dict[str, str] = field(default_factory=dict)
    driver: str | None = None
    notes: str = ""
    python: str | None = None  # the CPython the stack runs (its pip resolution is for it; default 3.12)
    # Why the stack exists only as an image (pip cannot install its pins): never offered as a pip target.
    image_only: str | None = None


@dataclass
class Matrix:
    entries: list[Entry]
    stacks: list[Stack]
    files: list[str]
    tracking: Any = None  # sparkdoctor.matrix.tracking.Tracking: tracked-through versions, lockstep families
    source: str = "bundled"  # which matrix this is: "bundled", "installed ...", or the path given
    fallback: str = ""  # why the matrix `matrix update` installed is not in use (it does not load, is gone, or unreadable)

    def notes(self) -> list[str]:
        """What a command says on stderr about the matrix it used: that the installed one is not in use, and why."""
        return [f"the installed matrix is not in use: judged by the {self.source}"] if self.fallback else []

    def get(self, entry_id: str) -> Entry | None:
        return next((e for e in self.entries if e.id == entry_id), None)

    def packages(self) -> set[str]:
        """The distributions an entry's `when.packages` names (as written; the matrix writes them canonical)."""
        return {str(name) for e in self.entries if isinstance(e.when.get("packages"), dict) for name in e.when["packages"]}


@dataclass
class Check:
    """One condition's outcome and the evidence for it, in words a person reads."""

    key: str
    result: bool | None  # None = unknown
    evidence: str


@dataclass
class Evaluation:
    entry: Entry
    outcome: str  # "match" | "clear" | "unknown" | "withdrawn"
    checks: list[Check]

    @property
    def evidence(self) -> list[str]:
        return [c.evidence for c in self.checks if c.result]

    @property
    def unknowns(self) -> list[str]:
        return [c.evidence for c in self.checks if c.result is None]
