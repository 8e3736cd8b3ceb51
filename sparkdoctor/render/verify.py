"""`sparkdoctor matrix verify` output: the versioned JSON document, or the console view with each
environment's result under its entry's verdict."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rich.markup import escape

if TYPE_CHECKING:
    from rich.console import Console

    from sparkdoctor.verify.runner import Result

VERDICTS = ("confirmed", "contradicted", "error")
_STYLE = {"confirmed": "green", "contradicted": "bold red", "error": "yellow"}


def _summary(results: list[Result]) -> dict[str, int]:
    return {v: sum(1 for r in results if r.verdict == v) for v in VERDICTS}


def verify_json(results: list[Result], seconds: float) -> str:
    return json.dumps({"schema": 1, "results": [r.to_dict() for r in results], "summary": _summary(results), "seconds": round(seconds, 1)}, indent=2)


def render_verify(results: list[Result], console: Console, seconds: float) -> None:
    for r in results:
        console.print(f"[{_STYLE[r.verdict]}]{r.verdict.upper():<12}[/] [bold]{escape(r.id)}[/]  probe {escape(r.probe)} expects {escape(r.expect)}", soft_wrap=True)
        for run in r.runs:
            mark = "ok " if (run.status == r.expect) == (run.role == "affected") else "!! "
            console.print(f"    {mark}{run.role:<8} {escape(run.env.label)} @ {run.env.arch}: {escape(run.status)} ({run.seconds:.1f}s)", soft_wrap=True)
            console.print(f"             {escape(run.detail)}", soft_wrap=True)
        if r.verdict != "confirmed":
            console.print(f"    {escape(r.why)}", soft_wrap=True)
    counts = ", ".join(f"{n} {v}" for v, n in _summary(results).items())
    console.print(f"{len(results)} entr{'y' if len(results) == 1 else 'ies'} verified in {seconds:.0f}s: {counts}")
