"""`fleet check`'s view: the fleet gate as a person reads it (console: nodes, risky differences with the odd node named,
findings per node, the verdict) and as a program reads it (JSON, `fleet_version` 1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape as markup_escape
from rich.text import Text

from sparkdoctor.describe import clip
from sparkdoctor.fleet import FleetResult
from sparkdoctor.result import Format
from sparkdoctor.text import shown
from sparkdoctor.views import View
from sparkdoctor.views.fitted import said

if TYPE_CHECKING:
    from sparkdoctor.memory.pernode import FleetFit


def escape(text: str) -> str:
    """`text` escaped for rich's markup and its control characters spelled out (`\\x1b[2J`): node names, titles,
    process names and keys come from the nodes, where any user can name a process with a terminal's escape."""
    return markup_escape(shown(text))


FLEET_VERSION = 1
MAX_SHOWN = 200  # differences listed on the console: a node answering 100,000 env variables took minutes to draw


def fleet_dict(result: FleetResult, verbose: bool = False) -> dict[str, object]:
    nodes = []
    for outcome in result.outcomes:
        row: dict[str, object] = {"name": outcome.node.name, "ok": outcome.ok, "problem": outcome.problem,
                               "seconds": round(outcome.seconds, 3)}
        report = result.reports.get(outcome.node.name)
        if report is not None:
            doc = report.to_dict()
            row.update(verdict=report.verdict(), exit_code=doc["exit_code"], summary=doc["summary"],
                       findings=doc["findings"], unknown=doc["unknown"], facts=doc["facts"])
        nodes.append(row)
    drifts = result.drifts if verbose else result.risky
    return {
        "fleet_version": FLEET_VERSION,
        "transport": result.transport,
        "verdict": result.verdict(),
        "exit_code": result.exit_code(),
        "fail_on": result.fail_on,
        "seconds": round(result.seconds, 3),
        "nodes": nodes,
        "risky": len(result.risky),
        "benign": len(result.drifts) - len(result.risky),
        "differences": [d.to_dict() for d in drifts],
        "notes": result.notes,
        "fabric": {"topology": result.topology.to_dict() if result.topology is not None else None,
                   "findings": [f.to_dict() for f in result.fabric],
                   "measured": [m.to_dict() for m in result.measured]},
        "memory": result.memory.to_dict() if result.memory is not None else None,
    }


def render_console(result: FleetResult, console: Console, verbose: bool = False) -> None:
    answered = len(result.reports)
    console.print(f"fleet check over {escape(str(result.transport))}: {len(result.outcomes)} node(s), {answered} answered "
                  f"({result.seconds:.1f} s)")
    for outcome in result.outcomes:
        name = escape(outcome.node.name)
        if not outcome.ok:
            console.print(f"  [bold red]✖ {name}[/]  not checked: {escape(outcome.problem or 'no answer')}")
            continue
        report = result.reports[outcome.node.name]
        if not report.probed():
            why = "; ".join(f"{clip(e.get('collector'))}: {clip(e.get('error'))}" for e in report.facts.errors) or "installed packages unknown"
            console.print(f"  [bold red]✖ {name}[/]  not checked: its serving stack could not be probed: {escape(why)}")
            continue
        counts = report.counts()
        style = "bold red" if report.failing() else "green"
        console.print(f"  [{style}]● {name}[/]  {counts['error']} error, {counts['warn']} warn, {counts['info']} info "
                      f"[dim]({outcome.seconds:.1f} s)[/]")
        for finding in report.findings:
            if verbose or finding in report.failing() or finding.id.startswith("multinode-"):
                console.print(f"      {escape('[' + finding.severity + ']')} {escape(finding.id)}: {escape(finding.title)}")
    listed = result.drifts if verbose else result.risky
    shown = listed[:MAX_SHOWN]
    if shown:
        console.print()
    for d in shown:
        mark, style = ("✖ risky ", "bold red") if d.verdict == "risky" else ("· benign", "dim")
        if d.has_majority:
            odd = ", ".join(f"{n} has {_v(d.values[n])}" for n in d.odd)
            line = f"majority {_v(d.majority)}; {odd}"
        else:
            line = "no majority: " + ", ".join(f"{n} {_v(v)}" for n, v in d.values.items() if n in d.odd)
        console.print(f"[{style}]{mark}[/]  {escape(d.area)}  [bold]{escape(d.key)}[/]  {escape(line)}")
        console.print(f"           [dim]{escape(d.why)}[/]")
    if len(listed) > len(shown):
        console.print(f"... and {len(listed) - len(shown):,} more difference(s) ({len(result.risky):,} risky in all): "
                      "--format json lists every one")
    _render_fabric(result, console, verbose)
    if result.memory is not None:
        render_memory(result.memory, console, verbose)
    for note in result.notes:
        console.print(f"[yellow]note[/]  {escape(note)}")
    console.print()
    benign = len(result.drifts) - len(result.risky)
    verdict = {
        0: f"GO: the nodes agree on everything that matters ({benign} benign difference(s)) (exit 0)",
        1: f"[bold red]NO-GO[/]: {len(result.risky)} risky difference(s), "
           f"{sum(1 for r in result.reports.values() if r.failing())} node(s) with findings at or above "
           f"{escape(str(result.fail_on))}" + (f", the launch as written does not fit on {escape(', '.join(result.memory.blocking()))}"
                                  if result.memory is not None and result.memory.blocking() else "") + " (exit 1)",
        3: f"[bold red]NO-GO[/]: {len(result.down) + len(result.unprobed)} node(s) could not be checked; "
           f"{len(result.risky)} risky difference(s) among the {len(result.reports)} that answered (exit 3)",
    }[result.exit_code()]
    console.print(verdict)


def _render_fabric(result: FleetResult, console: Console, verbose: bool) -> None:
    topo = result.topology
    if topo is not None and topo.kind not in ("single", "none"):
        console.print(f"fabric: {escape(topo.kind)}, {len(topo.links)} link(s)"
                      + (f", switched subnets {escape(', '.join(topo.switches))}" if topo.switches else ""))
        for label in topo.to_dict()["links"] if verbose else []:
            console.print(f"  [dim]{escape(label)}[/]")
    for f in result.fabric:
        console.print(f"[bold red]✖ fabric[/]  [bold]{escape(f.rule)}[/]  {escape(f.line())}")
    for m in result.measured:
        value = f"{m.gbps:g} Gb/s" if m.gbps is not None else m.status
        rated = f" of {m.rated_gbps:g} rated" if m.rated_gbps else ""
        console.print(f"  measured  {escape(m.tool)}  {escape(m.link)}: {escape(value + rated)}  [dim]{escape(m.detail)}[/]")


def _v(value: object) -> str:
    return "(absent)" if value is None else str(value)


def render_memory(fit: FleetFit, console: Console, verbose: bool = False) -> None:
    """`--recipe`: the need per node, each node's verdict with what holds its memory, and the one proposal."""
    # imported here: a fleet check without --recipe loads no memory rules
    from sparkdoctor.memory.verdict import gib

    console.print(f"memory: {escape(fit.summary())}")
    for rule in fit.rules[1:] if verbose else []:
        console.print(f"  [dim]{escape(rule)}[/]")
    for name, v in fit.verdicts.items():
        mark = {"does-not-fit": "[bold red]✖", "fits-with": "[yellow]▲"}.get(v.outcome, "[green]●")
        if v.outcome == "fits":
            line = f"fits: {gib(v.share_bytes)} asked, {gib(v.usable_bytes or 0)} free; {v.full_length_seqs} full-length sequence(s) at once"
        elif v.outcome == "fits-with":
            line = f"fits only with other settings: {gib(v.share_bytes)} asked, {gib(v.usable_bytes or 0)} free; " + _flags(v.settings)
        elif v.outcome == "does-not-fit":
            line = f"does not fit: {gib(v.short_bytes)} short even at --max-num-seqs 1, {gib(v.usable_bytes or 0)} free"
        else:
            line = "unknown: " + "; ".join(v.reasons)[:300]
        console.print(f"  {mark} {escape(name)}[/]  {escape(line)}")
        for h in v.holding[:8 if verbose else 3] if v.outcome != "fits" or verbose else []:
            console.print(f"      [dim]held: {escape(h.what)}: {gib(h.bytes)}[/]")
        for remedy in [r for r in v.remedies if not r.startswith("launch with")][:2] if v.outcome != "fits" else []:
            said(console, Text("do: "), shown(remedy), indent=6)  # its command whole on a line of its own
    if fit.proposal:
        decided = "".join(f"--{k.replace('_', '-')} set by {n}; " for k, n in fit.decided_by.items())
        checked = {True: "fits on every node", False: "still short on a node", None: ""}[fit.proposal_fits]
        console.print(f"  proposal for every node: launch with {escape(_flags(fit.proposal))}  [dim]({escape(decided)}{checked})[/]")
    elif any(v.outcome == "does-not-fit" for v in fit.verdicts.values()):
        console.print("  [bold red]no setting fits on every node[/]: free memory on the node(s) above first")


def _flags(settings: Mapping[str, object]) -> str:
    return " ".join(f"--{k.replace('_', '-')} {v}" for k, v in settings.items())


VIEW = View(FleetResult, {
    Format.console: lambda result, sink: sink.capture(
        lambda console: render_console(result.data, console, result.verbose)),
    Format.json: lambda result, sink: {"kind": "fleet", **fleet_dict(result.data, result.verbose)}})
