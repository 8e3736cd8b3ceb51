"""`whatif`'s view: the answer as a person reads it (console: what changes, the findings introduced, fixed, unchanged and
that cannot be told, the recipe's, the conclusions that would go stale, the CuTe DSL and PTX probes) and as a program reads it
(the `whatif` JSON document, WhatIf.to_json)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkdoctor.result import Format
from sparkdoctor.views import View, drawn
from sparkdoctor.whatif.judge import WhatIf

if TYPE_CHECKING:
    from rich.console import Console

    from sparkdoctor.whatif.ptx import PtxComparison


def _say(console: Console, text: str) -> None:
    """One line as written: titles, versions and tool output hold brackets (`[cu13]`) that are not rich markup."""
    console.print(text, markup=False, highlight=False)


def render_console(result: WhatIf, console: Console) -> None:
    _say(console, f"whatif {' '.join(result.specs)} · target {result.target or '(snapshot)'} · "
                  f"resolved by {result.installer or 'the target installer'} (dry run, wheels only)")
    if not result.changes:
        _say(console, f"nothing would change: {' '.join(result.specs)} is already satisfied")
    for c in result.changes:
        _say(console, f"  {c.name}: {c.old or '(new)'} -> {c.new}")
    for line in result.pip_warnings:
        _say(console, f"pip warns: {line}")
    if result.pip_warnings:
        _say(console, "  (pip would install anyway and leave the packages it names at versions that do not fit each other: a mixed family)")
    for label, rows in (("introduced", result.introduced), ("fixed", result.fixed), ("unchanged", result.unchanged)):
        for f in rows:
            _say(console, f"{label:>10}  [{f.severity}] {f.id}: {f.title}")
            if label == "introduced" and f.remedy:
                _say(console, f"{'':>12}what to do: {f.remedy}")
    for f in result.cannot_tell:
        _say(console, f"cannot tell  [{f.severity}] {f.id}: unknown after the upgrade ({'; '.join(f.unknown or [])})")
    _recipe(result, console)
    for s in result.stale or []:
        what = "; ".join(str(c.get("text") or c.get("what")) for c in s.changes[:3])
        _say(console, f"would become stale: conclusion {s.conclusion} ({what}): plan `sparkdoctor rerun {s.conclusion}` after the upgrade")
    _probe(result, console)
    for note in result.notes:
        console.print(f"note: {note}", style="dim", markup=False, highlight=False)
    _say(console, f"{len(result.introduced)} introduced, {len(result.fixed)} fixed, {len(result.unchanged)} unchanged, "
                  f"{len(result.cannot_tell)} cannot tell · matrix: {result.matrix}")


def _recipe(result: WhatIf, console: Console) -> None:
    r = result.recipe
    if r is None:
        return
    for label, rows in (("introduced", r.introduced), ("fixed", r.fixed), ("unchanged", r.unchanged)):
        for row in rows:
            _say(console, f"recipe {r.name}: {label} [{row.severity}] {row.id}: {row.title}")
            if label != "fixed" and row.remedy:
                _say(console, f"{'':>12}what to do: {row.remedy}")
    _say(console, f"recipe {r.name}: {len(r.introduced)} introduced, {len(r.fixed)} fixed, {len(r.unchanged)} unchanged")
    if r.mods is None:
        return
    for words, found in (("the upgrade breaks or makes stale", r.mods.introduced), ("the upgrade settles", r.mods.fixed)):
        for f in found:
            _say(console, f"mods: {words} [{f['severity']}] {f['id']}: {f['title']}")


def _probe(result: WhatIf, console: Console) -> None:
    p = result.probe
    if p is None:
        return
    for when, run in (("today", p.today), ("after", p.after)):
        if run is None:
            continue
        for k in run.kernels:
            _say(console, f"probe {when:>5}  {k.kernel} for {p.arch}: {k.verdict} ({k.detail})")
        if run.error:
            _say(console, f"probe {when:>5}  {run.error}")
    if p.note:
        _say(console, f"probe  {p.note}")
    _ptx(p.ptx, console)


def _ptx(ptx: PtxComparison | None, console: Console) -> None:
    if ptx is None:
        return
    for when, rows in (("today", ptx.today), ("after", ptx.after)):
        for row in rows or []:
            which = f"{row.dist} {row.version or '(none)'}" + (f" {row.member} (ptxas {row.ptxas_version})" if row.member else "")
            if row.error or row.note:
                _say(console, f"ptx {when:>5}  {which}: {row.error or row.note}")
            for k in row.kernels or []:
                _say(console, f"ptx {when:>5}  {k.probe} for {k.arch} by {which}: {k.verdict} ({k.detail})")
    if ptx.note:
        _say(console, f"ptx  {ptx.note}")


VIEW = View(WhatIf, {Format.console: drawn(render_console), Format.json: lambda result, sink: result.data.to_json()})
