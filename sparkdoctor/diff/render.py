"""The diff as a person reads it (console, risky first) and as a program reads it (JSON,
`diff_version` 1). Both say what could not be compared, so silence never reads as agreement."""

from __future__ import annotations

import json
from typing import Any

from sparkdoctor.diff.compare import Comparison
from sparkdoctor.diff.rules import RISKY
from sparkdoctor.facts import Facts

DIFF_VERSION = 1


def overall(comparison: Comparison) -> str:
    """risky | benign (differences, none risky) | same."""
    if comparison.risky:
        return "risky"
    return "benign" if comparison.differences else "same"


def _side(name: str, facts: Facts) -> dict[str, Any]:
    target = facts.target if isinstance(facts.target, dict) else {}
    return {"file": name, "taken_at": facts.taken_at, "fingerprint": facts.fingerprint(),
            "target": target.get("python") or target.get("container") or target.get("name") or target.get("kind")}


def diff_json(comparison: Comparison, names: tuple[str, str], facts: tuple[Facts, Facts]) -> str:
    doc = {
        "diff_version": DIFF_VERSION,
        "a": _side(names[0], facts[0]),
        "b": _side(names[1], facts[1]),
        "verdict": overall(comparison),
        "risky": len(comparison.risky),
        "benign": len(comparison.benign),
        "differences": [d.to_dict() for d in comparison.differences],
        "not_compared": comparison.not_compared,
    }
    return json.dumps(doc, indent=2, ensure_ascii=False)


def render_console(comparison: Comparison, names: tuple[str, str], facts: tuple[Facts, Facts], console) -> None:
    from rich.markup import escape

    a, b = (_side(n, f) for n, f in zip(names, facts, strict=False))
    console.print(f"A  {escape(a['file'])}  ({escape(str(a['target']))}, taken {escape(str(a['taken_at']))}, fingerprint {a['fingerprint']})")
    console.print(f"B  {escape(b['file'])}  ({escape(str(b['target']))}, taken {escape(str(b['taken_at']))}, fingerprint {b['fingerprint']})")
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
