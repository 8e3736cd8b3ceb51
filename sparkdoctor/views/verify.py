"""`sparkdoctor matrix verify` output: the versioned JSON document, or the console view with each
environment's (or released version's) result under its entry's verdict; `--bisect` and `--latest`
views too."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sparkdoctor.describe import plural
from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink
from sparkdoctor.verify.bounds import BoundResult, side_counts
from sparkdoctor.verify.files import FileResult
from sparkdoctor.verify.modes import Bisection, Bounds, EntryChecks, Latest, Stacks
from sparkdoctor.verify.runner import Result as InstallResult
from sparkdoctor.verify.stacks import StackResult
from sparkdoctor.views import View

VERDICTS = ("confirmed", "contradicted", "error")
_STYLE = {"confirmed": "green", "contradicted": "bold red", "error": "yellow", "agrees": "green", "found": "cyan",
          "differs": "bold red", "holds": "green", "fixed": "cyan", "fixed-upstream": "yellow", "regression": "bold red",
          "range-must-grow": "bold red"}


def render_verify(results: list[InstallResult | FileResult], console: Console, seconds: float) -> None:
    for r in results:
        if isinstance(r, FileResult):
            _render_files(r, console)
        else:
            _render_installs(r, console)
        if r.verdict != "confirmed":
            console.print(f"    {escape(r.why)}", soft_wrap=True)
    counts = ", ".join(f"{sum(1 for r in results if r.verdict == v)} {v}" for v in VERDICTS)
    console.print(f"{plural(len(results), 'entry')} verified in {seconds:.0f}s: {counts}")


def _render_installs(r: InstallResult, console: Console) -> None:
    console.print(f"[{_STYLE[r.verdict]}]{r.verdict.upper():<12}[/] [bold]{escape(r.id)}[/]  probe {escape(r.probe)} expects {escape(r.expect)}", soft_wrap=True)
    for run in r.runs:
        mark = "ok " if (run.status == r.expect) == (run.role == "affected") else "!! "
        console.print(f"    {mark}{run.role:<8} {escape(run.env.label)} @ {escape(run.env.arch)}: {escape(run.status)} ({run.seconds:.1f}s)", soft_wrap=True)
        console.print(f"             {escape(run.detail)}", soft_wrap=True)


def _render_files(r: FileResult, console: Console) -> None:
    console.print(f"[{_STYLE[r.verdict]}]{r.verdict.upper():<12}[/] [bold]{escape(r.id)}[/]  released files of {escape(r.package)}", soft_wrap=True)
    for run in r.runs:
        mark = "!! " if run.wrong() else "ok "
        held = sum(1 for _, ok in run.results if ok)
        state = escape(run.error) if run.error else f"{held}/{len(run.results)} checks hold"
        console.print(f"    {mark}{run.role:<8} {escape(run.version)}: {state}", soft_wrap=True)
        for line in run.evidence:  # what was read, e.g. the cubin archs cuobjdump listed
            console.print(f"             {escape(line)}", soft_wrap=True)


def render_bisect(found: dict[str, Any], console: Console) -> None:
    verdict = found["verdict"]
    console.print(f"[{_STYLE.get(verdict, 'none')}]{escape(verdict.upper()):<12}[/] [bold]{escape(found['id'])}[/]  {escape(found['why'])}", soft_wrap=True)
    for run in found.get("runs", []):
        held = all(c["holds"] for c in run["checks"]) and not run["error"]
        console.print(f"    {escape(run['version'])}: {escape(run['error']) if run['error'] else ('claim holds' if held else 'claim does not hold')}", soft_wrap=True)


def render_latest(results: list[dict[str, Any]], console: Console) -> None:
    for r in results:
        verdict = r["verdict"]
        console.print(f"[{_STYLE.get(verdict, 'none')}]{escape(verdict.upper()):<16}[/] [bold]{escape(r['id'])}[/]  {escape(r['why'])}", soft_wrap=True)
    counts = Counter(r["verdict"] for r in results)
    console.print(f"{plural(len(results), 'entry')} against their newest release: " + escape(", ".join(f"{n} {v}" for v, n in sorted(counts.items()))))


def render_bounds(results: list[BoundResult], console: Console) -> None:
    table = Table("entry", "bound", "verdict", "why")
    for r in results:
        where = " (constraint)" if r.source == "constraints" else ""
        table.add_row(escape(r.id), escape(f"{r.package} {r.spec}{where}"), escape(r.verdict), escape(r.why))
    console.print(table)
    counts = Counter(r.verdict for r in results)
    sides = side_counts(results)
    share = f" ({round(100 * sides['bracketed'] / sides['sides'])}%)" if sides["sides"] else ""
    console.print(f"{len(results)} bounds: " + escape(", ".join(f"{n} {v}" for v, n in counts.items()))
                  + f"; {sides['bracketed']} of {sides['sides']} bounded sides bracketed{share}")


def render_stacks(results: list[StackResult], console: Console) -> None:
    table = Table("stack", "python", "verdict", "why")
    for r in results:
        table.add_row(escape(r.id), escape(r.python), escape(r.verdict), escape(r.why))
    console.print(table)


# ---- the views of `matrix verify`'s modes (sparkdoctor.verify.modes): (Result, Sink) -> the whole document --------
def _json(result: Result[EntryChecks | Bisection | Latest | Bounds | Stacks], sink: Sink) -> dict[str, object]:
    return result.data.to_json()


def _checks_console(result: Result[EntryChecks], sink: Sink) -> str:
    checks = result.data
    if not checks.results:
        return "no matrix entry has a verify table or a files table\n"
    return sink.capture(lambda console: render_verify(checks.results, console, checks.seconds))


def _bounds_console(result: Result[Bounds], sink: Sink) -> str:
    data = result.data

    def show(console: Console) -> None:
        render_bounds(data.results, console)
        console.print(f"read {data.bytes_read / 1e6:.1f} MB from the registry in {data.requests} requests, {data.seconds:.1f} s")

    return sink.capture(show)


VIEW = View(EntryChecks, {Format.console: _checks_console, Format.json: _json})
View(Bisection, {Format.console: lambda result, sink: sink.capture(lambda console: render_bisect(result.data.found, console)),
                 Format.json: _json})
View(Latest, {Format.console: lambda result, sink: sink.capture(lambda console: render_latest(result.data.results, console)),
              Format.json: _json})
View(Bounds, {Format.console: _bounds_console, Format.json: _json})
View(Stacks, {Format.console: lambda result, sink: sink.capture(lambda console: render_stacks(result.data.results, console)),
              Format.json: _json})
