"""rerun end to end, fast: real launches of a real streaming server process (patched_server.py on top of
tests/bench/sse_server.py), a real toolchain change (a VLLM_* env var in the Facts fingerprint that the
server obeys), the real ledger. Recorded with the "patch" on, the compiled arm is no faster; with it gone,
rerun finds the conclusion stale, re-measures, and reports the flip; --fail-on flipped exits 1.

The effect is 10x (a token every 40 ms eager, every 4 ms compiled), all of it sleep: a loaded machine adds a few
ms of scheduling to both arms, which leaves it far above the 2x the assertions need (at 12 ms against 3 ms, load 3
once turned the flip into no verdict)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).resolve().parent / "patched_server.py"
MATRIX = '''component = "test"

[[entry]]
id = "test-patch-turns-compile-off"
title = "The local patch turns compile off"
severity = "warn"
action = "rebench"
summary = "While VLLM_SDTEST_PATCH is set, compile is the eager path."
remedy = "Unset it and re-benchmark without --enforce-eager."
justifies = ["--enforce-eager"]
when.env = { VLLM_SDTEST_PATCH = true }
refs = ["https://example.org/patch"]
'''


def _recipe(folder: Path, name: str, compiled: bool) -> Path:
    argv = [sys.executable, str(SERVER), "--host", "0.0.0.0", "--port", "8000", "--delay", "0.04", "--fast", "0.004"]
    argv += [] if compiled else ["--enforce-eager"]
    extra = "" if compiled else 'workarounds = [{ flag = "--enforce-eager", because = "test-patch-turns-compile-off" }]\n'
    path = folder / f"{name}.toml"
    path.write_text(f'schema = 1\nname = "{name}"\nmodel = "tiny"\nserved_model_name = "tiny"\ncommand = {json.dumps(argv)}\n'
                    f'readiness_path = "/v1/models"\n{extra}[env]\nPYTHONPATH = "{REPO}"\n'
                    "[workload]\nmax_tokens = 16\nconcurrency = [1]\nrounds = 3\nwarmup = 1\n")
    return path


def _run(tmp_path, *args, patch: bool):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "VLLM_SDTEST_PATCH")}
    env.update(PYTHONPATH=str(REPO), COLUMNS="200", SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"))
    if patch:
        env["VLLM_SDTEST_PATCH"] = "1"
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.alone  # its verdicts compare real token timings
def test_rerun_after_the_patch_is_gone_reports_the_flip_and_the_stale_workaround(tmp_path):
    eager, compiled = _recipe(tmp_path, "eager", False), _recipe(tmp_path, "compiled", True)
    (tmp_path / "m.toml").write_text(MATRIX)
    ledger, matrix = tmp_path / "l.sqlite", tmp_path / "m.toml"
    # the patch is on: a workaround that is needed, and an A/B that finds compile no faster
    check = _run(tmp_path, "recipe", "check", eager, "--matrix", matrix, "--format", "json", patch=True)
    assert not [f for f in json.loads(check.stdout)["findings"] if f["kind"] == "workaround"], check.stdout
    # --allow-load-difference: this test proves the flip machinery, not the load rule (tests/bench has that); other
    # jobs on the machine made the arms' loads differ and the conclusion went unrecorded
    ab = _run(tmp_path, "bench", eager, "--vs", compiled, "--pairs", "1", "--min-effect", "0.3", "--conclude", "compile-vs-eager",
              "--allow-load-difference", "--ledger", ledger, "--format", "json", patch=True)
    assert ab.returncode == 0, ab.stderr
    doc = json.loads(ab.stdout)
    assert doc["verdict"] == "no difference" and doc["conclusion"]["name"] == "compile-vs-eager"
    assert _run(tmp_path, "rerun", "--dry-run", "--matrix", matrix, "--ledger", ledger, "--format", "json",
                patch=True).stdout.count('"state": "fresh"') == 1
    # the patch is gone: stale, with what changed; the workaround's reason is clear
    plan = json.loads(_run(tmp_path, "rerun", "--dry-run", "--matrix", matrix, "--ledger", ledger, "--format", "json",
                           patch=False).stdout)
    (item,) = plan["conclusions"]
    assert item["state"] == "stale" and [c["text"] for c in item["changes"]] == ["env VLLM_SDTEST_PATCH unset (was 1)"]
    (w,) = plan["workarounds"]
    assert w["workaround"] == "--enforce-eager" and w["status"] == "stale"
    assert w["measured_by"] == {"conclusion": "compile-vs-eager", "with": "A", "without": "B"}
    console = _run(tmp_path, "rerun", "--dry-run", "--matrix", matrix, "--ledger", ledger, patch=False).stdout
    assert "changed: env VLLM_SDTEST_PATCH unset (was 1)" in console and "workaround --enforce-eager in eager" in console
    # re-measured: flipped, old and new side by side, the workaround's cost; CI gate exits 1
    done = _run(tmp_path, "rerun", "--fail-on", "flipped", "--allow-load-difference", "--matrix", matrix, "--ledger", ledger,
                "--format", "json", patch=False)
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    (res,) = out["results"]
    print("rerun ratios (B/A, old then new):", res["levels"][0]["old"].get("ratio"), res["levels"][0]["new"].get("ratio"))
    assert res["outcome"] == "flipped" and res["old"]["verdict"] == "no difference" and res["new"]["verdict"] == "faster"
    assert res["levels"][0]["new"]["ratio"] > 2 and res["new"]["previous_id"] == doc["conclusion"]["id"]
    assert res["changes"][0]["text"] == "env VLLM_SDTEST_PATCH unset (was 1)"
    (cost,) = out["workarounds"]
    assert cost["cost"][0]["without_over_with"] > 2 and cost["advice"].startswith("remove --enforce-eager")
    assert not res["regression"]
    listing = json.loads(_run(tmp_path, "conclusions", "--ledger", ledger, "--format", "json", patch=False).stdout)
    assert listing["conclusions"][0]["status"] == "flipped"
    assert _run(tmp_path, "rerun", "--fail-on", "flipped", "--ledger", ledger, "--matrix", matrix, patch=False).returncode == 0


def test_the_slow_tests_patch_helper_never_writes_through_a_hard_link(tmp_path):
    """tests/rerun/test_rerun_vllm.py patches vllm/__init__.py of a venv whose files uv may hard-link from its
    cache: the helper must leave the other link (the cache, every other venv) as it was."""
    from tests.rerun.test_rerun_vllm import replace_file

    shared = tmp_path / "cache" / "__init__.py"
    shared.parent.mkdir()
    shared.write_bytes(b"original\n")
    venv_file = tmp_path / "__init__.py"
    os.link(shared, venv_file)
    assert venv_file.stat().st_nlink == 2
    replace_file(venv_file, b"patched\n")
    assert venv_file.read_bytes() == b"patched\n" and venv_file.stat().st_nlink == 1
    assert shared.read_bytes() == b"original\n" and shared.stat().st_nlink == 1


def test_a_target_that_cannot_be_probed_now_makes_its_conclusions_stale_never_fresh(tmp_path):
    """A conclusion's target whose interpreter now crashes (a broken upgrade) was probed as "nothing installed": on a
    venv with nothing tracked that is the fingerprint it was measured on, so `conclusions` said fresh. Its toolchain is
    unknown now: the arm says why, as for a target that is gone (stale, and rerun cannot re-measure it)."""
    from sparkdoctor.conclusions.model import ConclusionError
    from sparkdoctor.conclusions.toolchain import Toolchains

    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nkill -SEGV $$\n")
    python.chmod(0o755)
    with pytest.raises(ConclusionError, match="could not be probed: .*SIGSEGV"):
        Toolchains().facts(str(python))
    assert Toolchains().facts(sys.executable).packages  # a real interpreter: its Facts


def test_an_output_file_that_cannot_be_written_is_refused_before_anything_is_read_or_measured(tmp_path):
    """`rerun -o FILE` in a folder that does not exist re-measured every stale conclusion (a server launch per arm),
    stored the runs, and only then failed on FILE. It is judged first, as `fix` and `bench` judge it: here before even
    the (missing) ledger is opened, exit 2 and not the ledger's 5."""
    out = _run(tmp_path, "rerun", "--ledger", tmp_path / "none.sqlite", "-o", tmp_path / "no-such-folder" / "r.json", patch=False)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "its folder" in out.stderr and "does not exist" in out.stderr and len(out.stderr.strip().splitlines()) == 1
