"""The views of `matrix track` (console, JSON, markdown) and `matrix update`."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Column, Table

from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink
from sparkdoctor.track.answer import TrackAnswer
from sparkdoctor.track.run import NEEDS_EDIT
from sparkdoctor.track.transitions import probe_lines
from sparkdoctor.track.update import Updated
from sparkdoctor.views import View
from sparkdoctor.views.terminal_text import escaped as _e


def _update_console(result: Result[Updated], sink: Sink) -> str:
    done = result.data.document
    return "".join([f"{done['message']}\n", *(f"  {line}\n" for line in done.get("diff", []))])


def _releases(r: list[str], left_out: object) -> str:
    """The new releases read, named; a list the release cap cut (MAX_RELEASES) by its ends only."""
    return f"the newest {len(r)}, {r[0]} to {r[-1]}" if left_out else ", ".join(r) or "none"


def _md(text: object) -> str:
    """Free text in the markdown (a note, a why): registry answers reach it (an error's URL, a server's content type or
    reason phrase), and it is a pull request's body. On one line, `|` kept inside its cell, and no HTML tag, link or
    image made of it: `<`, `[` and `]` escaped (shown as written)."""
    text = " ".join(str(text).split())
    for ch in ("\\", "|", "<", "[", "]"):
        text = text.replace(ch, "\\" + ch)
    return text


def _said(backports: list[str], yanked: list[str], builds: dict[str, list[str]] | None = None, more: dict[str, int] | None = None) -> str:
    """What a package's new releases are beside their versions: backports of an older line, yanked ones (PEP 592),
    the local builds an index lists a release in (2.15.0: +cu126, +cu130)."""
    older = more or {}
    listed = [f"{v} ({', '.join('+' + b.partition('+')[2] for b in bs)}{f' and {older[v]:,} older' if older.get(v) else ''})"
              for v, bs in (builds or {}).items()]
    return "".join(f"; {what}: {', '.join(versions)}" for versions, what in ((backports, "uploaded after the tracked release"),
                                                                             (yanked, "yanked (pip installs one only when pinned ==)"),
                                                                             (listed, "local builds"))
                   if versions)


def _table(head: tuple[str, ...], rows: list[tuple[object, ...]]) -> list[str]:
    return [f"| {' | '.join(head)} |", "|" + "---|" * len(head), *(f"| {' | '.join(map(str, row))} |" for row in rows)]


def track_markdown(d: dict[str, Any]) -> str:
    out = [f"# matrix track, {d['taken_at']}", "",
           f"Matrix: {d['matrix']}. Wheels read for {d['platform']}, CPython {d['python']} (another platform's wheel only where "
           "a release has none for it, said per release).", "", "## Packages", ""]
    said = [_said(p.get("backports", []), p.get("yanked", []), p.get("builds"), p.get("builds_more")) for p in d["packages"]]
    out += _table(("package", "tracked through", "read through", "new releases", "note"), [
        (p["package"], p["tracked"], p["through"] or "newest", _releases(p["releases"], p.get("left_out")) + (f" ({s.lstrip('; ')})" if s else ""),
         _md(p["note"])) for p, s in zip(d["packages"], said, strict=True)])
    out += ["", "## Entries", "", *_table(("entry", "reads", "bound", "verdict", "why"),
                                          [(e["id"], e["package"], e["spec"] or "-", e["verdict"], _md(e["why"])) for e in d["entries"]])]
    if d["proposals"]:
        out += ["", "## Proposed edits (not applied)", "", *_table(("where", "field", "from", "to", "because"), [
            (p.get("entry", p["file"]), p["field"], p["from"], p["to"], _md(p["because"])) for p in d["proposals"]])]
    if d.get("applied") or d.get("not_applied"):
        out += ["", "## Written into the matrix (--apply)", ""] + [f"- {_md(a)}" for a in d.get("applied", [])]
        out += [f"- not applied: {_md(a)}" for a in d.get("not_applied", [])]
    if d.get("pin_conflicts"):
        out += ["", "## Pins pip cannot install together (extras included)", ""] + [f"- {_md(c['why'])}" for c in d["pin_conflicts"]]
    if d.get("probe"):
        out += ["", "## Probes (--probe)", "", *(f"- {_md(line)}" for line in probe_lines(d["probe"]))]
    if d["untracked"]:
        out += ["", "## Bounds on tracked packages that no file check follows", "", *_table(("entry", "bound", "why"), [
            (u["id"], f"{u['package']} {u['spec']}", _md(u["why"])) for u in d["untracked"]])]
    summary = ", ".join(f"{n} {v}" for v, n in d["summary"].items() if n)
    cut = "".join(f" {p['left_out']:,} older new release(s) of {p['package']} left out, not checked." for p in d["packages"] if p.get("left_out"))
    out += ["", f"Summary: {summary or 'no entry with a file check on a tracked package'}; {len(d['untracked'])} bounds not followed.{cut}"]
    return "\n".join(out) + "\n"


def render_track(d: dict[str, Any], console: Console, verbose: bool = False) -> None:
    """Proposals first, then the entries that need an edit; with `verbose`, every package and entry."""
    for p in d["proposals"]:
        console.print(f"propose: {_e(p.get('entry', p['file']))}: {_e(p['field'])}: {_e(p['from'])} -> {_e(p['to'])} ({_e(p['because'])})",
                      soft_wrap=True)
    for line in d.get("applied", []):
        console.print(f"applied: {_e(line)}", soft_wrap=True)
    for line in d.get("not_applied", []):
        console.print(f"not applied: {_e(line)}", soft_wrap=True)
    for c in d.get("pin_conflicts", []):
        console.print(f"conflict: {_e(c['why'])}", soft_wrap=True)
    if d.get("probe"):
        for line in probe_lines(d["probe"]):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    for p in d["packages"]:
        backports = _said(p.get("backports", []), p.get("yanked", []), p.get("builds"), p.get("builds_more"))
        if p.get("error"):  # the registry did not list it: nothing is known to be new, or not
            console.print(f"{_e(p['package'])}: tracked through {_e(p['tracked'])}, could not be listed: {_e(p['note'])}", soft_wrap=True)
        elif verbose or p["releases"] or p["note"]:
            note = f" ({p['note']})" if p["note"] else ""
            console.print(f"{_e(p['package'])}: tracked through {_e(p['tracked'])}, new: "
                          f"{_e(_releases(p['releases'], p.get('left_out')) + backports + note)}",
                          soft_wrap=True)
    shown = [e for e in d["entries"] if verbose or e["verdict"] in NEEDS_EDIT]
    if shown:
        table = Table(*(Column(col, overflow="fold") for col in ("entry", "bound", "verdict", "why")), show_lines=False)
        for e in shown:
            table.add_row(_e(e["id"]), _e(f"{e['package']} {e['spec'] or ''}"), _e(e["verdict"]), _e(e["why"]))
        console.print(table)
    hidden = len(d["entries"]) - len(shown)
    tail = f" ({hidden} entries with nothing to change not shown: -v lists them)" if hidden else ""
    unlisted = [p["package"] for p in d["packages"] if p.get("error")]
    failed = f"; {len(unlisted)} package(s) could not be listed from the registry: {', '.join(unlisted)}" if unlisted else ""
    failed += "".join(f"; {p['left_out']:,} older new release(s) of {p['package']} left out, not checked" for p in d["packages"] if p.get("left_out"))
    console.print(_e(", ".join(f"{n} {v}" for v, n in d["summary"].items() if n)) + f"; {len(d['untracked'])} bounds with no file "
                  f"check{_e(failed)}{tail}")


TRACK = View(TrackAnswer, {
    Format.console: lambda result, sink: sink.capture(
        lambda console: render_track(result.data.document, console, result.verbose)),
    Format.json: lambda result, sink: result.data.to_json(),
    Format.markdown: lambda result, sink: track_markdown(result.data.document)})
UPDATE = View(Updated, {Format.console: _update_console, Format.json: lambda result, sink: result.data.document})
