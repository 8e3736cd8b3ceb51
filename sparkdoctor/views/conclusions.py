"""`conclusions`' view, and the console drawing rerun and recipe check share (rich, drawn from the JSON document)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from sparkdoctor.conclusions.documents import ConclusionsDocument
from sparkdoctor.result import Format
from sparkdoctor.views import View
from sparkdoctor.views.commands import split_commands
from sparkdoctor.views.fitted import grid, hanging, with_commands
from sparkdoctor.views.terminal_text import escaped as _e

STYLE = {"fresh": "green", "stale": "yellow", "flipped": "bold red", "broken": "red", "incomparable": "magenta",
         "holds": "green", "changed": "yellow", "not re-run": "red", "needed": "green", "unknown": "dim",
         "error": "red", "warn": "yellow", "info": "dim"}


def _ratio(r: dict[str, Any] | None) -> str:
    if not r:
        return "-"
    return f"{r['ratio']:.2f}x [{r['ci_low']:.2f}, {r['ci_high']:.2f}] {_e(r['verdict'])}"


def _tag(word: str) -> str:
    return f"[{STYLE.get(word, 'bold')}]{_e(word)}[/]"


def conclusions(console: Console, doc: dict[str, Any]) -> None:
    items = doc["conclusions"]
    if not items:
        console.print(f"No conclusions in {_e(doc['ledger'])}. Record one: sparkdoctor bench A --vs B --conclude NAME")
        return
    for item in items:
        c = item["conclusion"]
        console.print(f"{_tag(item['status'])}  [bold]{_e(c['name'])}[/]  {_e(c['statement'])}", highlight=False)
        console.print(f"    evidence: comparison {_e(c['comparison_id'])}, runs A {_e(c['runs']['A'])} B {_e(c['runs']['B'])}, "
                      f"fingerprints A {_e(c['fingerprints']['A'])} B {_e(c['fingerprints']['B'])}, recorded {_e(c['created_at'])}",
                      highlight=False)
        if c.get("previous"):
            p = c["previous"]
            console.print(f"    rerun of #{_e(p['id'])} ({_e(p['created_at'])}): was \"{_e(p['statement'])}\" -> {_e(c['outcome'])}",
                          highlight=False)
        for change in item["changes"]:
            console.print(f"    changed: {_e(change['text'])}", highlight=False)
        for reason in item["reasons"]:
            console.print(f"    {_e(reason)}", highlight=False)
        _notes(console, item.get("notes") or [], "    ")


def _notes(console: Console, notes: list[str], indent: str) -> None:
    for note in notes:
        console.print(f"{indent}note: {_e(note)}", highlight=False)


def plan(console: Console, doc: dict[str, Any]) -> None:
    conclusions(console, doc)
    stale = [i for i in doc["conclusions"] if i["state"] == "stale"]
    ws = doc["workarounds"]
    for w in ws:
        by = w.get("measured_by")
        how = f"measured by conclusion {_e(by['conclusion'])}" if by else "an A/B with and without it"
        if w.get("kind") == "mod":
            how = "not measured (sparkdoctor never applies mods): drop it from the recipe"
        console.print(f"{_tag('stale')}  workaround {_e(w['workaround'])} in {_e(w['label'])} ({_e(w['recipe'])})", highlight=False)
        for r in w["reasons"]:
            console.print(f"    {_e(r['entry'])}: {_e(r['outcome'])}: {_e(', '.join(r['evidence']))}", highlight=False)
        console.print(f"    {'rerun: ' if w.get('kind') == 'mod' else 'rerun will measure it: '}{how}", highlight=False)
    todo = sum(1 for i in stale if i["rerunnable"])
    console.print(f"\n{len(stale)} stale conclusion(s) ({todo} re-runnable), {len(ws)} stale workaround(s). "
                  + ("Run `sparkdoctor rerun` to re-measure." if doc.get("dry_run") and (todo or ws) else ""), highlight=False)


def results(console: Console, doc: dict[str, Any]) -> None:
    for item in doc["conclusions"]:  # once each, before what re-measuring it found
        _notes(console, [f"conclusion {item['conclusion']['name']}: {n}" for n in item.get("notes") or []], "")
    broken = [i for i in doc["conclusions"] if i["state"] == "broken"]  # as stored: never re-run (conclusions says why)
    for item in broken:
        console.print(f"{_tag('broken')}  [bold]{_e(item['conclusion']['name'])}[/]  not re-run: "
                      f"{_e('; '.join(item['reasons']) or 'its stored row cannot be read')}", highlight=False)
    if not doc["results"] and not doc["workarounds"]:
        fresh = sum(1 for i in doc["conclusions"] if i["state"] == "fresh")
        said = f", {len(broken)} broken (above)" if broken else ""
        console.print(f"Nothing to re-measure in {_e(doc['ledger'])}: no stale conclusion or workaround "
                      f"({len(doc['conclusions'])} conclusion(s), {fresh} fresh{said}).", highlight=False)
        if doc.get("failed"):
            console.print(f"[bold red]failing: {_e(', '.join(doc['failed']))}[/]")
        return
    for res in doc["results"]:
        console.print(f"{_tag(res['outcome'])}  [bold]{_e(res['name'])}[/]", highlight=False)
        if res["outcome"] == "not re-run":
            for reason in res["reasons"]:
                console.print(f"    {_e(reason)}", highlight=False)
            continue
        old, new = res["old"], res["new"]
        console.print(f"    was: {_e(old['statement'])}  (runs A {_e(old['runs']['A'])} B {_e(old['runs']['B'])}, "
                      f"fingerprint {_e(old['fingerprints']['A'])})", highlight=False)
        console.print(f"    now: {_e(new['statement'])}  (runs A {_e(new['runs']['A'])} B {_e(new['runs']['B'])}, "
                      f"fingerprint {_e(new['fingerprints']['A'])})", highlight=False)
        for lvl in res["levels"]:
            console.print(f"    c={_e(lvl['concurrency'])}: B/A old {_ratio(lvl['old'])}  new {_ratio(lvl['new'])}  -> {_e(lvl['outcome'])}",
                          highlight=False)
        if res.get("wrong"):
            console.print(f"    broken: the answers of arm {_e(' and '.join(res['wrong']))} are wrong now "
                          "(docs/correctness.md): no speed verdict stands on them", highlight=False)
        if res.get("load_differ"):
            console.print(f"    not called a flip: {_e(res['load_differ'])} (rerun on a quiet machine, or --allow-load-difference)",
                          highlight=False)
        for arm, rows in res["arm_changes"].items():
            for row in rows:
                flag = "  REGRESSION" if row["regression"] else ""
                console.print(f"    arm {_e(arm)} c={_e(row['concurrency'])}: {row['old_median']:.1f} -> {row['new_median']:.1f} tok/s "
                              f"(new/old {_ratio(row['ratio'])}){flag}", highlight=False)
        for change in res["changes"]:
            console.print(f"    because: {_e(change['text'])}", highlight=False)
    for w in doc["workarounds"]:
        console.print(f"{_tag('stale')}  workaround {_e(w['workaround'])} in {_e(w['label'])}: {_e(w['advice'])}", highlight=False)
        for row in w.get("cost") or []:
            console.print(f"    c={_e(row['concurrency'])}: without/with {row['without_over_with']:.2f}x "
                          f"(95% CI {row['ci_low']:.2f}-{row['ci_high']:.2f}, {_e(row['method'])}), from {_e(w.get('source'))}",
                          highlight=False)
    if doc.get("failed"):
        console.print(f"[bold red]failing: {_e(', '.join(doc['failed']))}[/]")


def recipe_check(console: Console, doc: dict[str, Any], fitted: bool = False) -> None:
    """A recipe's findings, one line each (a pipe, a file), or `fitted` to a terminal: a finding's title wrapped under
    its title, its evidence and remedy under their text (sparkdoctor/views/fitted.py)."""
    r = doc["recipe"]
    vllm = doc.get("vllm") or {}
    console.print(f"recipe {_e(r['name'])} ({_e(r['format'])}, {_e(r['path'])}) against {_e(doc['target'])} "
                  f"(vLLM {_e(vllm.get('version', 'not installed'))})", highlight=False)
    model = doc.get("model") or {}
    if model.get("ref"):
        if model.get("error"):
            console.print(f"model: {_e(model['error'])}", highlight=False)
        else:
            kind = (f"hybrid ({_e(model.get('linear_layers') or 0)} linear-attention, {_e(model.get('mamba_layers') or 0)} Mamba layers)"
                    if model.get("hybrid") else "no Mamba / linear-attention layers")
            console.print(f"model {_e(model['ref'])}: {kind}, longest --max-model-len {_e(model.get('max_model_len'))}", highlight=False)
    if not doc["findings"]:
        console.print("[green]no findings[/]")
    for f in doc["findings"]:
        head, remedy = f"[bold]{_e(f['id'])}[/]  {_e(f['title'])}", Text(str(f["remedy"]))
        if fitted:
            hanging(console, Text.from_markup(_tag(f["severity"])), Text.from_markup(head))
            pieces = split_commands(str(f["remedy"]))
            if not any(is_command for _, is_command in pieces):  # else each command whole on a line of its own
                console.print(grid([*((Text("    evidence:"), Text(str(e))) for e in f["evidence"]), (Text("    remedy:"), remedy)], gap=1))
                continue
            if f["evidence"]:
                console.print(grid([(Text("    evidence:"), Text(str(e))) for e in f["evidence"]], gap=1))
            with_commands(console, 0, Text("    remedy:"), [(Text(p), c) for p, c in pieces], len("    evidence:"), gap=1)
            continue
        console.print(f"{_tag(f['severity'])}  {head}", highlight=False)
        for e in f["evidence"]:
            console.print(f"    evidence: {_e(e)}", highlight=False)
        console.print(f"    remedy: {_e(f['remedy'])}", highlight=False)
    for warning in r.get("warnings") or []:  # what reading the recipe found (a shell line, placeholders kept, ...)
        console.print(f"[yellow]warning:[/] {_e(warning)}", highlight=False)


VIEW = View(ConclusionsDocument, {
    Format.console: lambda result, sink: sink.wide(lambda console: conclusions(console, result.data.to_json())),
    Format.json: lambda result, sink: result.data.to_json()})
