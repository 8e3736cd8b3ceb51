"""The diff as a person reads it (console, risky first) and as a program reads it (JSON,
`diff_version` 1). Both say what could not be compared, so silence never reads as agreement."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkdoctor.diff.compare import Comparison
from sparkdoctor.diff.rules import RISKY
from sparkdoctor.exitcodes import EXIT_DIFF_RISKY, EXIT_DIFF_SAFE
from sparkdoctor.facts import Facts

if TYPE_CHECKING:
    from rich.console import Console

    from sparkdoctor.result import Result
    from sparkdoctor.sink import Sink

DIFF_VERSION = 1


def overall(comparison: Comparison) -> str:
    """risky | benign (differences, none risky) | same."""
    if comparison.risky:
        return "risky"
    return "benign" if comparison.differences else "same"


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
    """What `sparkdoctor diff` hands its renderers: the comparison and the two snapshots it compared."""

    comparison: Comparison
    a: Side
    b: Side

    @classmethod
    def of(cls, comparison: Comparison, names: tuple[str, str], facts: tuple[Facts, Facts]) -> DiffDocument:
        return cls(comparison, Side.of(names[0], facts[0]), Side.of(names[1], facts[1]))

    @property
    def verdict(self) -> str:
        return overall(self.comparison)

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


def diff_json(comparison: Comparison, names: tuple[str, str], facts: tuple[Facts, Facts]) -> str:
    return json.dumps(DiffDocument.of(comparison, names, facts).to_json(), indent=2, ensure_ascii=False)


def render_console(comparison: Comparison, names: tuple[str, str], facts: tuple[Facts, Facts], console: Console) -> None:
    draw(DiffDocument.of(comparison, names, facts), console)


def draw(doc: DiffDocument, console: Console) -> None:
    from rich.markup import escape

    comparison = doc.comparison
    for label, side in (("A", doc.a), ("B", doc.b)):
        console.print(f"{label}  {escape(side.file)}  ({escape(str(side.target))}, taken {escape(str(side.taken_at))}, "
                      f"fingerprint {side.fingerprint})")
    console.print()
    ordered = comparison.risky + comparison.benign
    for d in ordered:
        mark, style = ("✖ risky ", "bold red") if d.verdict == RISKY else ("· benign", "dim")
        va = "(absent)" if d.a is None else d.a
        vb = "(absent)" if d.b is None else d.b
        console.print(f"[{style}]{mark}[/]  {escape(d.area)}  [bold]{escape(d.key)}[/]  {escape(va)} → {escape(vb)}")
        console.print(f"           [dim]{escape(d.why)}[/]")
    for item in comparison.not_compared:
        console.print(f"[yellow]? unknown[/]  {escape(item['area'])}: {escape(item['why'])}, not compared")
    if ordered or comparison.not_compared:
        console.print()
    verdict = overall(comparison)
    line = {
        "risky": f"[bold red]{len(comparison.risky)} risky[/], {len(comparison.benign)} benign: "
                 "these two must not serve one multi-node run as they are (exit 1)",
        "benign": f"0 risky, {len(comparison.benign)} benign: safe to run together (exit 0)",
        "same": "no differences in what both snapshots observed (exit 0)",
    }[verdict]
    if comparison.not_compared:
        line += f"; {len(comparison.not_compared)} field(s) observed on one side only"
    console.print(line)


# ---- views (sparkdoctor/views.py): (Result, Sink) -> the whole document -----------------------------------
def diff_view_json(result: Result, sink: Sink) -> dict[str, object]:
    document: DiffDocument = result.data
    return document.to_json()


def diff_view_console(result: Result, sink: Sink) -> str:
    return sink.capture(lambda console: draw(result.data, console), soft_wrap=True, highlight=False)
