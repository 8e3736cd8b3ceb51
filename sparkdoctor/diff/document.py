"""The diff's document: the comparison and the two snapshots, as a program reads it (JSON, `diff_version` 1). It says
what could not be compared, so silence never reads as agreement; sparkdoctor/views/diff.py draws it for people."""

from __future__ import annotations

from dataclasses import dataclass

from sparkdoctor.diff.compare import Comparison
from sparkdoctor.exitcodes import EXIT_DIFF_RISKY, EXIT_DIFF_SAFE
from sparkdoctor.facts import Facts

DIFF_VERSION = 1


@dataclass(frozen=True)
class Side:
    """One snapshot as the diff names it."""

    file: str
    taken_at: str | None
    fingerprint: str
    target: object  # as the snapshot holds it (an interpreter path, a container name, ...)

    @classmethod
    def of(cls, name: str, facts: Facts) -> Side:
        target = facts.target if isinstance(facts.target, dict) else {}
        found = target.get("python") or target.get("container") or target.get("name") or target.get("kind")
        return cls(name, facts.taken_at, facts.fingerprint(), found)

    def to_json(self) -> dict[str, object]:
        return {"file": self.file, "taken_at": self.taken_at, "fingerprint": self.fingerprint, "target": self.target}


@dataclass
class DiffDocument:
    comparison: Comparison
    a: Side
    b: Side

    @classmethod
    def of(cls, comparison: Comparison, names: tuple[str, str], facts: tuple[Facts, Facts]) -> DiffDocument:
        return cls(comparison, Side.of(names[0], facts[0]), Side.of(names[1], facts[1]))

    @property
    def verdict(self) -> str:
        """risky | benign (differences, none risky) | same."""
        if self.comparison.risky:
            return "risky"
        return "benign" if self.comparison.differences else "same"

    @property
    def exit_code(self) -> int:
        return EXIT_DIFF_RISKY if self.comparison.risky else EXIT_DIFF_SAFE

    def to_json(self) -> dict[str, object]:
        c = self.comparison
        return {
            "diff_version": DIFF_VERSION,
            "a": self.a.to_json(),
            "b": self.b.to_json(),
            "verdict": self.verdict,
            "risky": len(c.risky),
            "benign": len(c.benign),
            "differences": [d.to_dict() for d in c.differences],
            "not_compared": c.not_compared,
        }
