"""`bench`'s view, and the console text history shares: bench results, history listings and comparisons (rich
tables), drawn from the JSON documents (bench/document.py: the envelope from bench.envelope, printed as is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import Console, JustifyMethod
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sparkdoctor.bench.document import (
    BenchDocument,
    ComparisonDocument,
    ReproduceDocument,
    RunDocument,
)
from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink
from sparkdoctor.text import one_line
from sparkdoctor.views import View
from sparkdoctor.views.fitted import grid, said
from sparkdoctor.views.terminal_text import escaped as _e


def _f(value: float | None, digits: int = 1, scale: float = 1.0, unit: str = "") -> str:
    return "-" if value is None else f"{value * scale:,.{digits}f}{unit}"


def _ci(est: dict[str, Any] | None, digits: int = 1, scale: float = 1.0) -> str:
    return (f"{_f(est['median'], digits, scale)} [{_f(est['ci_low'], digits, scale)}-{_f(est['ci_high'], digits, scale)}]"
            if est else "-")


def tabled(console: Console, title: str, heads: tuple[str, ...], rows: list[list[str]], justify: JustifyMethod = "left",
           fitted: bool = False, last: str = "") -> None:
    """A table of plain cells, or, `fitted` to a terminal too narrow for each cell whole beside the others (rich would
    wrap a value over rows, split it mid-word or cut it to a letter and an ellipsis), its rows as items, a cell a line
    (the first cell, then `head: value` a line, wrapped under the item). A head may wrap at its spaces. `last`: the
    last column's style. The title is on the left, every column takes `justify`."""
    words = [max(map(cell_len, head.split() or [""])) for head in heads]
    if fitted and sum(max([w, *(cell_len(row[i]) for row in rows)]) + 3 for i, w in enumerate(words)) + 1 > console.width:
        console.print(Text(title), overflow="fold")
        for row in rows:
            console.print(Text(one_line(f"{heads[0]}: {row[0]}")), overflow="fold")  # an empty cell is left out
            console.print(grid([("  ", Text(one_line(f"{h}: {c}"))) for h, c in zip(heads[1:], row[1:], strict=True) if c], gap=0))
        return
    t = Table(title=escape(title), title_justify="left")
    for i, head in enumerate(heads):
        t.add_column(_e(head), justify=justify, style=last if i == len(heads) - 1 else "")
    for row in rows:
        t.add_row(*map(_e, row))
    console.print(t)


LEVEL_HEADS = ("conc", "requests", "decode tok/s/stream (client median)", "decode tok/s/stream (server mean)", "output tok/s",
               "per-round output tok/s (median)", "TTFT ms (client median)", "TTFT ms (server mean)",
               "TPOT ms (client median)", "bursts")


def level_rows(levels: list[dict[str, Any]]) -> list[list[str]]:
    # a figure absent from a stored level was not measured (a run stored by an older sparkdoctor): `-`
    return [[str(lvl["concurrency"]), str(lvl.get("requests", "-")), _ci(c.get("decode_tps_per_stream")),
             _f(s.get("decode_tps_per_stream")), _f(c.get("output_tps_pooled")), _ci(c.get("output_tps")),
             _ci(c.get("ttft_s"), 1, 1000), _f((s.get("ttft_s") or {}).get("mean"), 1, 1000), _ci(c.get("tpot_s"), 2, 1000),
             _f(c.get("burst_share"), 0, 100, "%")]
            for lvl in levels for c, s in [(lvl.get("client") or {}, lvl.get("server") or {})]]


def render_run(console: Console, run: dict[str, Any], fitted: bool = False) -> None:
    recipe = run.get("recipe") or {}
    label = recipe.get("name") or recipe.get("url") or run.get("base_url")
    server = run.get("server") or {}
    kind = " ".join(str(x) for x in (server.get("kind"), server.get("version")) if x)  # a generic server has no version
    console.print(f"[bold]bench[/bold] {_e(label)}: model {_e(run.get('model'))} on {_e(kind)} at {_e(run.get('base_url'))}")
    if run.get("fingerprint") == "unknown":
        stored = ("the run is stored as such and kept out of conclusions" if run.get("run_id") else
                  "a run stored so is kept out of conclusions")  # --no-store: nothing is stored
        console.print(f"[yellow]toolchain unknown[/yellow]: {escape(str((run.get('target') or {}).get('why')))}; {stored}"
                      f"  (run {_e(run.get('run_id') or 'not stored')})")
    else:
        found = (run.get("target") or {}).get("found_by")
        console.print(f"toolchain fingerprint {_e(run.get('fingerprint'))}" + (f" ({_e(found)})" if found else "")
                      + f"  (run {_e(run.get('run_id') or 'not stored')})")
    _load_lines(console, run.get("load"))
    _memory_line(console, run.get("memory"))
    served = recipe.get("served")
    if isinstance(served, dict):  # --url: the server's configuration is what it says of itself (bench/served.py)
        rev = served.get("revision") or {}
        console.print(f"server configuration (as the server says it) {_e(served.get('fingerprint'))}; model revision "
                      f"{_e(rev.get('commit') or 'unknown')}" + (f" (from {_e(rev['source'])})" if rev.get("source") else ""))
        for why in served.get("unknown") or []:
            console.print(f"  [yellow]not known[/yellow]: {escape(str(why))}")
    box = run.get("container")
    if box:  # served from a container: the number belongs to that image
        console.print(f"container image {box.get('image')} ({box.get('engine')}): id {str(box.get('image_id'))[:19]}, "
                      f"content fingerprint {box.get('fingerprint') or 'unknown'}", markup=False, highlight=False)
    tabled(console, "client medians [bootstrap 95% CI], server means (/metrics); output tok/s = all output tokens / all "
           "rounds' wall time", LEVEL_HEADS, level_rows(run["levels"]), "right", fitted)
    head = run.get("headline")
    if head:  # a run stored by hand or by an older sparkdoctor may lack the concurrency or the source: `?`
        console.print(f"[bold]headline[/bold]: {_f(head.get('decode_tps_per_stream'))} tok/s decode per stream at "
                      f"concurrency {_e(head.get('concurrency', '?'))}, from the {_e(head.get('source', '?'))}")
        if "server" in str(head.get("source")):
            console.print("  why the server's figure: it times each token where it is produced; a client can only "
                          "time chunks as they arrive, and this server sends them in bursts (see the bursts column)")
    roof = run.get("roofline")
    if roof:
        if roof.get("missing"):
            console.print(f"[bold]roofline[/bold]: not shown: {escape(roof['missing'])}")
        else:
            console.print(f"[bold]{escape(roof['line'])}[/bold]")
            console.print(f"  context assumed: {escape(roof['context_note'])}; KV cache {escape(roof['kv_cache_dtype'])}; "
                          f"--dtype {escape(str(roof.get('dtype') or 'auto'))}; "
                          f"model {escape(roof['model_dir'])}")
            if roof.get("dtype_assumed"):
                console.print(f"  [yellow]--dtype assumed[/yellow]: {escape(str(roof['dtype_assumed']))}")
            if roof.get("warning"):
                console.print(f"  [yellow]{escape(roof['warning'])}[/yellow]")
    _answers_line(console, run.get("correctness"))
    for lvl in run.get("levels") or []:
        rec = lvl.get("reconcile") or {}
        if rec and not rec.get("match"):
            console.print(f"[yellow]counters disagree[/yellow] at concurrency {_e(lvl['concurrency'])}: {_e(rec['why'])}")
        if rec.get("spec_acceptance") is not None:
            console.print(f"speculative decoding at concurrency {_e(lvl['concurrency'])}: {rec['spec_acceptance']:.1%} of "
                          "draft tokens accepted in this run's window")
    for finding in run.get("findings") or []:
        console.print(f"[yellow]log finding[/yellow]: {_e(finding.get('id'))}: {_e(finding.get('title', ''))}")


ANSWER_STYLE = {"correct": "green", "reference": "green", "wrong": "bold red", "suspect": "red", "unchecked": "yellow",
                "unscored": "yellow", "indecisive": "yellow"}


def _answers_line(console: Console, checked: dict[str, Any] | None) -> None:
    """The correctness gate's verdict (bench/correctness.py) in one line, and why when it is not plainly correct."""
    if not checked:
        console.print("answers: not checked (--no-correctness)")
        return
    verdict = checked.get("verdict")
    scored = [r["mean_abs_dlogprob"] for r in checked.get("per_prompt") or [] if r.get("mean_abs_dlogprob") is not None]
    worst = max(scored, default=None)  # none scored: no difference was measured, not a difference of 0
    how = f"; largest mean |Δ logprob| {worst:.3f} (tolerance {checked.get('tolerance')})" if worst is not None else ""
    # no reference for the model (False; an older run's row has no such key): the path is where --reference stores one
    where = ("no reference yet: --reference stores one at" if checked.get("reference_expected") is False else
             "reference")
    console.print(f"[bold]answers[/bold]: [{ANSWER_STYLE.get(str(verdict), 'white')}]{_e(verdict)}[/]{escape(how)}"
                  f"  ({where} {_e(checked.get('reference'))}, {_e(checked.get('seconds'))} s, after the timed window)")
    for why in checked.get("why") or []:
        console.print(f"  {escape(str(why))}")


def _other_arm_line(console: Console, other: object) -> None:
    """An A/B without a reference: how far B's answers are from A's (bench/ab.py b_vs_a)."""
    if not isinstance(other, dict):
        return
    largest = other.get("largest_mean_abs_dlogprob")
    how = (f"; largest mean |Δ logprob| {largest:.3f} nats/token (tolerance {other.get('tolerance')})"
           if isinstance(largest, (int, float)) else "")
    style = "yellow" if other.get("verdict") == "differ" else "white"
    console.print(f"[bold]answers of B against A's[/bold] (no reference: A's greedy tokens scored on B): "
                  f"[{style}]{_e(other.get('verdict'))}[/]{escape(how)}")
    for why in other.get("why") or []:
        console.print(f"  {escape(str(why))}")


def _load_lines(console: Console, load: dict[str, Any] | None) -> None:
    if not load:
        return
    before = load.get("before") or {}
    avg = before.get("loadavg")
    console.print(f"machine load: other processes used {_f((load.get('index') or {}).get('other_cpus'), 1)} of "
                  f"{_e(before.get('cpus') or '?')} CPUs" + (f"; load average {avg[0]:.2f}" if avg else ""), highlight=False)
    if load.get("busy"):
        console.print(f"[yellow]warning: busy machine[/yellow]: {escape(load['busy'])}; a number taken now is not a "
                      "baseline for a quiet one")


def effect(mde: float) -> str:
    """A minimum detectable effect: +37% below a doubling, 2.4x from there (223880% reads as a typo)."""
    return f"{mde:.0%}" if mde < 1 else f"{1 + mde:,.1f}x"


def render_comparison(console: Console, comp: dict[str, Any], fitted: bool = False) -> None:
    console.print(f"[bold]A/B[/bold] A = {_e(comp['a'])}  vs  B = {_e(comp['b'])}; order {_e(' '.join(comp['order']))} "
                  f"(a server restart per arm)")
    rows = [[str(lvl["concurrency"]), ", ".join(_f(v) for v in lvl["a"]), ", ".join(_f(v) for v in lvl["b"]),
             f"{r['ratio']:.3f}", f"{r['ci_low']:.3f}-{r['ci_high']:.3f}", str(r["method"]), str(r["verdict"])]
            for lvl in comp["levels"] for r in [lvl["ratio"]]]
    tabled(console, "output tok/s per arm run (its tokens / its rounds' wall time); ratio B/A with 95% CI",
           ("conc", "A runs", "B runs", "B/A", "95% CI", "method", "verdict"), rows, "right", fitted, "bold")
    for lvl in comp["levels"]:
        noise = lvl.get("noise") or {}
        if lvl.get("calibration_skipped"):
            skip = lvl["calibration_skipped"]
            console.print(f"conc {_e(lvl['concurrency'])}: calibration {_e(skip['comparison_id'])} not used: "
                          f"{escape(skip['why'])}; its noise is not this A/B's")
        if noise.get("mde") is not None:
            more = ", ".join(f"{_e(k)} pairs {effect(v)}" for k, v in (noise.get("mde_for_pairs") or {}).items())
            source = f" (from {_e(noise['from'])}, {noise['df'] + 1} pairs)" if noise.get("from") else ""
            console.print(f"conc {_e(lvl['concurrency'])}: launch-to-launch noise {noise['launch_cv']:.1%}{source}; smallest "
                          f"effect these pairs detect (80% power) {effect(noise['mde'])}; with {more}")
        elif lvl["ratio"].get("pairs") == 1:
            said(console, Text(f"conc {lvl['concurrency']}: "), "one pair: the restart-to-restart noise is not measured, so "
                 "only a 1.5x difference is called and only its direction: the interval is the rounds' alone and backs no "
                 "magnitude; 3 or more pairs measure that noise, or first `sparkdoctor bench RECIPE --calibrate`")
    _other_arm_line(console, (comp.get("correctness") or {}).get("b_vs_a"))
    load = comp.get("load") or {}
    for why in load.get("busy") or []:
        where = "" if str(why).startswith("arm ") else "a run: "  # an A/B stored before the arm was named
        console.print(f"[yellow]warning: busy machine[/yellow] during {where}{escape(why)}")
    if load.get("differ"):
        if load.get("allowed"):
            console.print(f"[yellow]the arms ran under different load[/yellow] ({escape(load['differ'])}); verdict called "
                          "anyway (--allow-load-difference)")
        else:
            console.print(f"[bold]verdict[/bold]: not called: the arms ran under different load ({escape(load['differ'])}); "
                          "rerun on a quiet machine, or pass --allow-load-difference")
            return
    wrong = (comp.get("correctness") or {}).get("wrong") or []
    if wrong:
        said(console, Text("wrong answers", style="bold red"), f" from arm {' and '.join(wrong)}: its speed is not a win "
             "(bench/correctness.py); see each run with `sparkdoctor history RUN_ID`")
    words = {"faster": "B is faster than A", "slower": "B is slower than A", "mixed": "mixed: the levels disagree"}
    console.print(f"[bold]verdict[/bold]: {_e(words.get(comp['verdict'], comp['verdict']))} (B/A of output tok/s)")
    console.print(f"runs stored: {_e(', '.join(str(r) for r in comp.get('runs') or []) or 'none')}; "
                  "a difference inside the noise is reported as \"no difference\", never as a win")


def _gib(value: object) -> str:
    return f"{value / 2**30:.2f} GiB" if isinstance(value, int) else "-"


def _memory_line(console: Console, memory: dict[str, Any] | None) -> None:
    """The server's memory through the run (serve/memwatch.py), when it was sampled."""
    if not memory:
        return
    at = memory.get("high_water_at_s")
    console.print(f"server memory: high-water mark {_gib(memory.get('high_water_bytes'))} resident"
                  + (f" ({at:.0f} s after launch)" if isinstance(at, (int, float)) else "")
                  + f", MemAvailable at least {_gib(memory.get('lowest_available_bytes'))} "
                  f"({memory.get('samples_taken')} samples of {memory.get('processes')} process(es))",
                  markup=False, highlight=False)


HISTORY_HEADS = ("run", "when (UTC)", "recipe", "model", "fingerprint", "decode tok/s/stream", "source", "peak memory", "A/B")


def history_cells(r: Mapping[str, object]) -> list[str]:
    """One run's cells in `history`'s list, as HISTORY_HEADS name them (plain text: not markup)."""
    head = h if isinstance(h := r.get("headline"), dict) else {}
    tps = head.get("decode_tps_per_stream")
    source = "DAMAGED" if r.get("damaged") else str(head.get("source") or "").split(" ")[0]
    return [str(r["id"]), str(r["created_at"]), str(r.get("recipe_name") or "-"), str(r["model"]), str(r["fingerprint"]),
            _f(tps if isinstance(tps, (int, float)) else None), source, _gib(r.get("memory_high_water_bytes")),
            f"{r['comparison_id']}:{r['arm']}" if r.get("comparison_id") else ""]


def damaged(console: Console, runs: Sequence[Mapping[str, object]]) -> None:
    for r in runs:
        for why in whys if isinstance(whys := r.get("damaged"), list) else []:
            console.print(f"[red]run {_e(r['id'])} is damaged[/red]: {_e(why)}", highlight=False)


def render_compare(console: Console, cmp: dict[str, Any], fitted: bool = False) -> None:
    a, b = cmp["a"], cmp["b"]
    console.print(f"[bold]run {_e(a['id'])}[/bold] ({_e(a['created_at'])}, fingerprint {_e(a['fingerprint'])})  vs  "
                  f"[bold]run {_e(b['id'])}[/bold] ({_e(b['created_at'])}, fingerprint {_e(b['fingerprint'])})")
    for note in cmp["notes"]:
        console.print(f"[yellow]note[/yellow]: {_e(note)}")
    if cmp["toolchain"]:
        tabled(console, "what changed in the toolchain", ("what", f"run {a['id']}", f"run {b['id']}"),
               [[str(row["what"]), str(row["a"]), str(row["b"])] for row in cmp["toolchain"]], fitted=fitted)
    else:
        console.print("toolchain: same fingerprint material")
    _numbers(console, "what changed in the numbers", cmp["numbers"], (f"run {a['id']}", f"run {b['id']}", "b/a"), fitted)


def _numbers(console: Console, title: str, numbers: list[dict[str, Any]], heads: tuple[str, str, str], fitted: bool) -> None:
    """Each figure of two runs (or cells) side by side, and their ratio."""
    tabled(console, title, ("conc", "figure", *heads), [
        [str(row["concurrency"]), str(row["figure"]), _f(row["a"], 2), _f(row["b"], 2),
         f"{row['ratio']:.3f}" if row["ratio"] else "-"] for row in numbers], "right", fitted)


def render_calibration(console: Console, doc: dict[str, Any]) -> None:
    """The noise floor an A/A calibration measured, and what it lets an A/B see."""
    console.print("[bold]calibration[/bold] (the same recipe against itself): an A/A that is called a difference is a "
                  "warning sign about the machine, not a result")
    for lvl in doc.get("calibration") or []:
        if lvl["launch_cv"] is None:
            continue
        mde = lvl["mde"]
        seen = ", ".join(f"{_e(k)} pair{'s' if k != '1' else ''} {effect(v)}" for k, v in mde.items() if v is not None)
        console.print(f"conc {_e(lvl['concurrency'])}: launch-to-launch noise {lvl['launch_cv']:.1%}; smallest effect "
                      f"detected (80% power): {seen}; a one-pair A/B of this toolchain takes its interval from this "
                      "calibration (without one, only 1.5x is ever called)")


def render_reproduce(console: Console, doc: dict[str, Any], fitted: bool = False) -> None:
    """An exported cell against the run here: the numbers, then what differs key by key (the likely causes)."""
    hashes = doc["config_hash"]
    same = "the same configuration" if doc["same_config"] else "another configuration"
    console.print(f"[bold]reproducing[/bold] {_e(doc['cell'])}: config {_e(hashes['there'])} there, {_e(hashes['here'])} "
                  f"here ({same})", soft_wrap=True)
    for note in doc["notes"]:
        console.print(f"[yellow]note[/yellow]: {escape(note)}", soft_wrap=True)
    head = doc.get("headline")
    if head and head.get("a") and head.get("b") is not None:
        console.print(f"headline decode tok/s/stream at conc {_e(head['concurrency'])}: {_f(head['a'], 2)} there, "
                      f"{_f(head['b'], 2)} here ({head['b'] / head['a']:.3f}x)", soft_wrap=True)
    _numbers(console, "the numbers, there and here", doc["numbers"], ("there", "here", "here/there"), fitted)
    if not doc["differences"]:
        console.print("nothing differs between the two cells (toolchain, model, recipe, workload, load): a gap is noise "
                      "or something sparkdoctor does not see", soft_wrap=True)
        return
    tabled(console, "what differs (likely causes: " + ", ".join(doc["likely_causes"]) + ")", ("group", "key", "there", "here"),
           [[str(row[k]) for k in ("group", "key", "there", "here")] for row in doc["differences"]], fitted=fitted)


def _console(result: Result[BenchDocument], sink: Sink) -> str:
    found, document = result.data, result.data.to_json()

    def draw(console: Console) -> None:
        fitted = sink.at_terminal()  # a terminal too narrow for a table's words gets its rows as items
        if isinstance(found, RunDocument):
            render_run(console, document, fitted)
        elif isinstance(found, ComparisonDocument):
            render_comparison(console, document, fitted)
            if found.calibration is not None:
                render_calibration(console, document)
            if found.conclusion:
                console.print(f"conclusion {found.conclusion.get('name')!r} recorded: {found.conclusion.get('statement')}",
                              markup=False, highlight=False, soft_wrap=True)
        elif isinstance(found, ReproduceDocument):
            render_run(console, {**document["run"], "kind": "run"}, fitted)
            render_reproduce(console, document, fitted)

    return sink.wide(draw)


def _sarif(result: Result[BenchDocument], sink: Sink) -> str:
    """`bench --format sarif`: a run's (or each A/B arm's) memory preflight verdict and the known problems its server's
    log printed. A run that failed is written by views/sarif.failure_sarif (emit.emit_error)."""
    from sparkdoctor.bench.run import finding_records
    from sparkdoctor.views.sarif import render_findings_sarif

    doc = result.data
    run = doc.run if isinstance(doc, ReproduceDocument) else doc
    findings: list[dict[str, Any]]
    if isinstance(run, RunDocument):
        recipe, done = run.result.recipe, run.result
        findings = finding_records(done)
        category = f"bench/{recipe.get('name') or 'url'}"
        props = {"recipe": recipe.get("name"), "recipe_path": recipe.get("source_path"), "run_id": done.run_id,
                 "fingerprint": done.toolchain.fingerprint, "memory": done.memory}
    else:
        assert isinstance(doc, ComparisonDocument)
        findings = list(doc.findings)
        category = f"bench/{doc.a}-vs-{doc.b}"
        props = {"a": doc.a, "b": doc.b, "comparison_id": doc.comparison_id, "verdict": doc.verdict}
    findings += _wrong_answers(result, run)
    return render_findings_sarif(findings, category=category, properties=props, exit_code=result.exit_code) + "\n"


def _wrong_answers(result: Result[BenchDocument], run: object) -> list[dict[str, Any]]:
    """The correctness gate's failure (exit 1; 3: answers not judged against their reference) as a finding: without it
    the SARIF log of such a run had no result, a clean analysis to code scanning. None under --allow-wrong, as the
    exit code says."""
    wrong = [e for e in result.errors if e.get("code") in REMEDY]
    checked = run.result.correctness if isinstance(run, RunDocument) else None
    reasons = (checked or {}).get("why")
    why = [str(w) for w in reasons] if isinstance(reasons, list) else []
    if isinstance(run, ComparisonDocument):
        why = [f"arm {arm}: {verdict}" for arm, verdict in run.correctness.items() if arm in ("A", "B")]
    return [{"kind": "correctness", "id": str(e.get("code")), "severity": "error", "title": str(e.get("message")),
             "evidence": why[:8], "remedy": REMEDY[str(e.get("code"))]} for e in wrong]


REMEDY = {"wrong-answers": "the answers differ from the reference's (docs/correctness.md): find the change that broke "
                           "them; --allow-wrong exits 0 for the numbers alone",
          "answers-unchecked": "the answers were not judged against their reference (--reference-file, the one stored for "
                               "the model, or the one being marked; docs/correctness.md): a probe or scoring request "
                               "failed, the reference could not be read, or the server gives no log-probabilities; "
                               "--allow-wrong exits 0 for the numbers alone"}


VIEW = View(BenchDocument, {Format.console: _console, Format.json: lambda result, sink: result.data.to_json(),
                            Format.sarif: _sarif})
