"""Text from data prints as written: rich markup in a ledger's names and labels, a recipe's, a matrix file's or a
registry's is never parsed by the console views (sparkdoctor/views/).

A recipe named `qwen3-[/]` stopped `sparkdoctor history` with "internal error: MarkupError: closing tag '[/]'",
`qwen3 [fp8] tp2` printed as `qwen3  tp2`, `[bold]x[/]` printed a bold x, and a conclusion whose arm label held
`[/]` stopped `sparkdoctor conclusions`. history and conclusions run end to end here (the real CLI on a real ledger
written through the ledger's own API); the other views are drawn from their documents as the CLI draws them.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from sparkdoctor.bench import BENCH_VERSION, ab
from sparkdoctor.ledger import Ledger, RunRecord
from sparkdoctor.sink import escaping

NAMES = ("qwen3-[/]", "qwen3 [fp8] tp2", "[bold]x[/]")
"""A closing tag with nothing open (rich raises), a word in brackets (rich drops it as a style), a style (rich applies it)."""


def sparkdoctor(*args: object) -> subprocess.CompletedProcess[str]:
    """The real CLI, as a person's shell starts it; stdout a pipe (the console view at its pipe width)."""
    env = dict(os.environ, COLUMNS="200")
    env.pop("SPARKDOCTOR_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=300)


def no_internal_error(done: subprocess.CompletedProcess[str]) -> None:
    said = done.stdout + done.stderr
    assert "internal error" not in said and "MarkupError" not in said, said


def drawn(draw: Callable[[Console], None]) -> str:
    """What a view draws on a console made the way a Sink makes one (control characters escaped), plain, wide."""
    console = escaping(Console(file=io.StringIO(), width=300, no_color=True, force_terminal=False))
    with console.capture() as out:
        draw(console)
    return out.get()


def _run(name: str, vllm: str, **more: object) -> RunRecord:
    return RunRecord(recipe={"name": name, "argv": ["vllm", "serve", "m"], "env": {}, "model": "m"},
                     base_url="http://127.0.0.1:1/[fp8]", model=name, server={"kind": "vllm", "version": "0.1 [dev]"},
                     facts={"schema": 1, "packages": {"vllm": {"name": "vllm", "version": vllm}}},
                     fingerprint="f" * 16, bench_version=1, tool_version="0 [dev]", workload={"max_tokens": 8},
                     summary={"levels": [], "headline": {"decode_tps_per_stream": 100.0, "concurrency": 1,
                                                         "source": "client [median]"}},
                     findings=[{"id": "[red]log-id[/]", "title": "a title [fp8] [/]"}],
                     samples=[(1, 0, i, {"ok": True, "output_tokens": 8}) for i in range(3)], **more)  # type: ignore[arg-type]


def test_history_lists_shows_and_compares_runs_whose_names_hold_markup(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    with Ledger(ledger) as led:
        ids = [led.add_run(_run(name, version)) for name, version in zip(NAMES, ("0.11 [fp8]", "0.12 [/]", "[b]0.13"), strict=True)]

    listed = sparkdoctor("history", "--ledger", ledger)
    no_internal_error(listed)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split("│")[1].strip(): line for line in listed.stdout.splitlines() if line.startswith("│")}
    for run_id, name in zip(ids, NAMES, strict=True):
        assert f"│ {name} " in rows[str(run_id)], listed.stdout  # the recipe column
        assert rows[str(run_id)].count(f" {name} ") == 2, listed.stdout  # and the model column

    for run_id, name in zip(ids, NAMES, strict=True):
        shown = sparkdoctor("history", run_id, "--ledger", ledger)
        no_internal_error(shown)
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert lines[0].endswith("(bench version 1, sparkdoctor 0 [dev])"), shown.stdout
        assert f"bench {name}: model {name} on vllm 0.1 [dev] at http://127.0.0.1:1/[fp8]" in lines, shown.stdout
        assert "headline: 100.0 tok/s decode per stream at concurrency 1, from the client [median]" in lines
        assert "log finding: [red]log-id[/]: a title [fp8] [/]" in lines
        assert any(line.startswith("client medians [bootstrap 95% CI], server means") for line in lines), shown.stdout

    compared = sparkdoctor("history", "--compare", ids[0], "--compare", ids[1], "--ledger", ledger)
    no_internal_error(compared)
    assert compared.returncode == 0, compared.stderr
    assert "'0.11 [fp8]'" in compared.stdout and "'0.12 [/]'" in compared.stdout, compared.stdout


def _conclusion_ledger(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """One stored A/B whose arms are labelled with markup, and the conclusion `conc [/] [fp8]` recorded from it."""
    from sparkdoctor.bench.run import resolved_recipe
    from sparkdoctor.conclusions import store
    from sparkdoctor.conclusions.model import Arm
    from sparkdoctor.recipes import load
    from tests.rerun.ledgerdata import write_recipe

    paths = {"A": write_recipe(tmp_path, "a"), "B": write_recipe(tmp_path, "b")}
    labels = {"A": "qwen3 [fp8] tp2", "B": "[bold]x[/] qwen3-[/]"}
    facts = {"schema": 1, "packages": {"vllm": {"name": "vllm", "version": "0.11 [fp8]"}}}
    tps = {"A": [40.0, 41.0, 40.5], "B": [100.0, 99.0, 101.0]}
    ledger = tmp_path / "ledger.sqlite"
    with Ledger(ledger) as led:
        cid = led.begin_comparison(labels["A"], labels["B"])
        summaries = {}
        for arm in ("A", "B"):
            summaries[arm] = {"levels": [{"concurrency": 1, "round_output_tps": tps[arm],
                                          "headline": {"decode_tps_per_stream": tps[arm][0]}}],
                              "headline": {"decode_tps_per_stream": tps[arm][0]}}
            led.add_run(RunRecord(recipe=resolved_recipe(load(str(paths[arm]))), base_url="http://127.0.0.1:1", model="m",
                                  server={"kind": "vllm"}, facts=facts, fingerprint="f" * 16, bench_version=BENCH_VERSION,
                                  tool_version="test", workload={"max_tokens": 8, "concurrency": [1], "rounds": 3},
                                  summary=summaries[arm], comparison_id=cid, arm=arm))
        levels = ab.compare([summaries["A"]], [summaries["B"]], 0.02)
        doc = {"comparison_id": cid, "a": labels["A"], "b": labels["B"], "levels": levels, "verdict": ab.overall(levels),
               "metric": ab.METRIC, "min_effect": 0.02}
        led.finish_comparison(cid, "complete", doc)
        store.record(led, "conc [/] [fp8]", doc, {arm: Arm(str(paths[arm]), labels[arm]) for arm in "AB"}, None)
    return ledger, labels


def test_conclusions_and_the_rerun_plan_print_names_and_arm_labels_with_markup_as_written(tmp_path: Path) -> None:
    ledger, labels = _conclusion_ledger(tmp_path)
    as_json = sparkdoctor("conclusions", "--ledger", ledger, "--format", "json")
    assert json.loads(as_json.stdout)["conclusions"][0]["conclusion"]["name"] == "conc [/] [fp8]", as_json.stdout
    for verb in (["conclusions"], ["rerun", "--dry-run"]):
        done = sparkdoctor(*verb, "--ledger", ledger)
        no_internal_error(done)
        assert done.returncode == as_json.returncode, done.stdout + done.stderr  # exits as usual
        head = done.stdout.splitlines()[0]
        assert head.split("  ")[1:3] == ["conc [/] [fp8]", f"{labels['B']} is faster than {labels['A']}: 2.47x (95% CI 2.41-2.52)"], head
        assert "    changed: vllm 0.11 [fp8] removed" in done.stdout.splitlines(), done.stdout


def test_rerun_results_and_recipe_check_views_print_what_they_were_given() -> None:
    from sparkdoctor.views.conclusions import recipe_check, results

    stmt = {"statement": "[bold]x[/] is faster than a [fp8]", "runs": {"A": [1], "B": ["[/]"]}, "fingerprints": {"A": "[fp8]"}}
    ratio = {"ratio": 2.0, "ci_low": 1.9, "ci_high": 2.1, "verdict": "[fp8]"}
    doc = {"ledger": "l.sqlite", "conclusions": [], "failed": ["conc [/]"],
           "results": [{"name": "conc [/] [fp8]", "outcome": "holds", "old": stmt, "new": stmt, "load_differ": "[bold]busy[/]",
                        "wrong": ["[B]"], "levels": [{"concurrency": 1, "old": ratio, "new": ratio, "outcome": "[holds]"}],
                        "arm_changes": {"[b]": [{"concurrency": 1, "old_median": 1.0, "new_median": 2.0, "ratio": ratio,
                                                 "regression": False}]},
                        "changes": [{"text": "vllm [fp8] -> [/]"}]}],
           "workarounds": [{"workaround": "--enforce-eager [x]", "label": "qwen3-[/]", "advice": "drop [it]", "source": "[src]",
                            "cost": [{"concurrency": 1, "without_over_with": 1.5, "ci_low": 1.4, "ci_high": 1.6, "method": "[m]"}]}]}
    out = drawn(lambda console: results(console, doc)).splitlines()
    assert out[0] == "holds  conc [/] [fp8]", out
    assert "    was: [bold]x[/] is faster than a [fp8]  (runs A [1] B ['[/]'], fingerprint [fp8])" in out
    assert "    c=1: B/A old 2.00x [1.90, 2.10] [fp8]  new 2.00x [1.90, 2.10] [fp8]  -> [holds]" in out
    assert "    broken: the answers of arm [B] are wrong now (docs/correctness.md): no speed verdict stands on them" in out
    assert "    not called a flip: [bold]busy[/] (rerun on a quiet machine, or --allow-load-difference)" in out
    assert "    arm [b] c=1: 1.0 -> 2.0 tok/s (new/old 2.00x [1.90, 2.10] [fp8])" in out
    assert "    because: vllm [fp8] -> [/]" in out
    assert "stale  workaround --enforce-eager [x] in qwen3-[/]: drop [it]" in out
    assert "    c=1: without/with 1.50x (95% CI 1.40-1.60, [m]), from [src]" in out
    assert out[-1] == "failing: conc [/]", out

    check = {"recipe": {"name": "qwen3 [fp8] tp2", "format": "sparkdoctor", "path": "/r/[/].toml"}, "target": "[b]py",
             "vllm": {"version": "0.11 [dev]"}, "model": {"ref": "org/m [fp8]", "hybrid": False, "max_model_len": 1024},
             "findings": [{"severity": "warn", "id": "[red]flag[/]", "title": "a [fp8] title", "evidence": ["--x [/]"],
                           "remedy": "drop [bold]it[/]"}]}
    out = drawn(lambda console: recipe_check(console, check)).splitlines()
    assert out[:2] == ["recipe qwen3 [fp8] tp2 (sparkdoctor, /r/[/].toml) against [b]py (vLLM 0.11 [dev])",
                       "model org/m [fp8]: no Mamba / linear-attention layers, longest --max-model-len 1024"], out
    assert out[2:] == ["warn  [red]flag[/]  a [fp8] title", "    evidence: --x [/]", "    remedy: drop [bold]it[/]"], out


def test_the_ab_calibration_and_reproduce_views_print_labels_and_keys_as_written() -> None:
    from sparkdoctor.views.bench import (
        render_calibration,
        render_comparison,
        render_reproduce,
    )

    ratio = {"ratio": 1.0, "ci_low": 0.9, "ci_high": 1.1, "method": "boot[strap]", "verdict": "no difference", "pairs": 3}
    comp = {"a": "qwen3 [fp8] tp2", "b": "[bold]x[/]", "order": ["A", "B"], "verdict": "[/]", "runs": [1, 2], "load": {},
            "correctness": {"wrong": ["[b]"]},
            "levels": [{"concurrency": 1, "a": [1.0], "b": [1.0], "ratio": ratio,
                        "noise": {"mde": 0.1, "launch_cv": 0.02, "from": "calibration [3]", "df": 2, "mde_for_pairs": {"[n]": 0.05}},
                        "calibration_skipped": {"comparison_id": "[c]", "why": "another [toolchain]"}}],
            "calibration": [{"concurrency": 1, "launch_cv": 0.02, "mde": {"[k]": 0.1}}]}
    out = drawn(lambda console: (render_comparison(console, comp), render_calibration(console, comp)))
    lines = out.splitlines()
    assert "A/B A = qwen3 [fp8] tp2  vs  B = [bold]x[/]; order A B (a server restart per arm)" in lines, out
    assert any("boot[strap]" in line for line in lines), out
    assert "conc 1: calibration [c] not used: another [toolchain]; its noise is not this A/B's" in lines
    assert any(line.startswith("conc 1: launch-to-launch noise 2.0% (from calibration [3], 3 pairs);") and
               line.endswith("with [n] pairs 5%") for line in lines), out
    assert any(line.startswith("wrong answers from arm [b]: ") for line in lines), out
    assert "verdict: [/] (B/A of output tok/s)" in lines
    assert any(line.startswith("conc 1: launch-to-launch noise 2.0%; smallest effect detected (80% power): [k] pairs 10%")
               for line in lines), out

    doc = {"cell": "cell [fp8]", "config_hash": {"there": "[a]", "here": "[/]"}, "same_config": False, "notes": ["n [x]"],
           "headline": {"concurrency": 1, "a": 1.0, "b": 2.0},
           "numbers": [{"concurrency": 1, "figure": "tok/s [client]", "a": 1.0, "b": 2.0, "ratio": 2.0}],
           "differences": [{"group": "[toolchain]", "key": "packages.vllm", "there": "0.11 [fp8]", "here": "[/]"}],
           "likely_causes": ["[toolchain]"]}
    out = drawn(lambda console: render_reproduce(console, doc))
    lines = out.splitlines()
    assert lines[0] == "reproducing cell [fp8]: config [a] there, [/] here (another configuration)", out
    assert "note: n [x]" in lines and "tok/s [client]" in out
    assert "what differs (likely causes: [toolchain])" in out and "0.11 [fp8]" in out and "│ [/]" in out, out


def test_matrix_track_and_verify_views_print_the_registry_and_matrix_text_as_written() -> None:
    from sparkdoctor.verify.bounds import BoundResult
    from sparkdoctor.verify.stacks import StackResult
    from sparkdoctor.views.track import render_track
    from sparkdoctor.views.verify import (
        render_bisect,
        render_bounds,
        render_latest,
        render_stacks,
    )

    d = {"proposals": [{"entry": "[e]", "file": "m.toml", "field": "when", "from": "<0.11 [x]", "to": "[/]", "because": "the [fp8] wheel"}],
         "applied": ["[bold]a[/]"], "not_applied": ["[n]"], "pin_conflicts": [{"why": "torch [cu13]"}],
         "packages": [{"package": "torch", "tracked": "2.9 [cu13]", "releases": ["2.10 [cu13]"], "note": "[/]", "backports": []},
                      {"package": "vllm", "tracked": "0.11", "releases": [], "note": "[red]down[/]", "error": True}],
         "entries": [{"id": "[e]", "package": "torch", "spec": "<2.10 [x]", "verdict": "holds", "why": "the [fp8] files"}],
         "summary": {"holds": 1}, "untracked": []}
    lines = drawn(lambda console: render_track(d, console, verbose=True)).splitlines()
    assert lines[:5] == ["propose: [e]: when: <0.11 [x] -> [/] (the [fp8] wheel)", "applied: [bold]a[/]", "not applied: [n]",
                         "conflict: torch [cu13]", "torch: tracked through 2.9 [cu13], new: 2.10 [cu13] ([/])"], lines
    assert lines[5] == "vllm: tracked through 0.11, could not be listed: [red]down[/]", lines
    assert any("torch <2.10 [x]" in line and "the [fp8] files" in line and "[e]" in line for line in lines), lines
    assert lines[-1] == "1 holds; 0 bounds with no file check; 1 package(s) could not be listed from the registry: vllm", lines

    out = drawn(lambda console: render_bounds([BoundResult("[e]", "torch", "<2.10 [x]", "holds", "[/] read")], console))
    assert "│ [e]" in out and "torch <2.10 [x]" in out and "[/] read" in out, out
    out = drawn(lambda console: render_stacks([StackResult("[s]", "3.12 [x]", "resolves", "pip [/] said")], console))
    assert "│ [s]" in out and "3.12 [x]" in out and "pip [/] said" in out, out
    out = drawn(lambda console: render_latest([{"id": "[e]", "verdict": "holds", "why": "[/] why"}], console))
    assert out.splitlines()[0] == "HOLDS            [e]  [/] why", out
    found = {"id": "[e]", "verdict": "[v]", "why": "[/]", "runs": [{"version": "1.0 [x]", "error": None, "checks": []}]}
    assert drawn(lambda console: render_bisect(found, console)).splitlines() == ["[V]          [e]  [/]", "    1.0 [x]: claim holds"]


def test_matrix_show_prints_a_stack_s_packages_and_an_entry_s_refs_as_written() -> None:
    from sparkdoctor import matrix
    from sparkdoctor.views.matrix import show_item

    m = matrix.load()
    stack = dataclasses.replace(m.stacks[0], packages={"torch": "==2.9.0 [cu13]", "[bold]x[/]": "[/]"})
    out = drawn(lambda console: show_item(stack, console))
    assert "==2.9.0 [cu13]" in out and "[bold]x[/]  [/]" in out, out
    # a ref was made a style string ("link URL"): a URL with a word after a space did not parse
    entry = dataclasses.replace(m.entries[0], refs=["https://example.com/a not [fp8]"])
    out = drawn(lambda console: show_item(entry, console))
    assert "https://example.com/a not [fp8]" in out, out
