"""A COMPLETE marker that is not UTF-8 (a disk error, a hand edit) is a damaged journal in one line, never an
internal error (found by tests/test_fuzz_inputs.py::test_journal_files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkdoctor.fix import journal as jr
from sparkdoctor.fix.interface import FixError
from sparkdoctor.fix.pipeline import prune

REAL = Path(__file__).resolve().parents[1] / "data" / "journals" / "uv-apply.json"  # written by `fix --yes`


@pytest.mark.parametrize("marker", [b"\xff\xfe\n", b"\xed\xa0\x80" + b"0" * 61 + b"\n"])
def test_a_complete_marker_that_is_not_utf8_is_a_damaged_journal(tmp_path, marker):
    folder = tmp_path / "20261126-130950-509260"
    folder.mkdir()
    (folder / "journal.json").write_bytes(REAL.read_bytes())
    (folder / jr.COMPLETE).write_bytes(marker)
    with pytest.raises(FixError, match="does not match its COMPLETE marker") as info:
        jr.load(str(folder))
    assert "\n" not in str(info.value)


def test_prune_reports_the_status_a_journal_had_not_half_written(tmp_path):
    """`fix --prune` said `removed ID  (half-written)` of every journal it removed, an applied or rolled-back one
    too: the status was read after the folder was gone. It is the status the journal had."""
    body = REAL.read_bytes()
    folder = jr.journals_dir() / "20261126-130950-509260"
    folder.mkdir(parents=True)
    (folder / "journal.json").write_bytes(body)
    (folder / jr.COMPLETE).write_bytes((jr.sha256_bytes(body) + "\n").encode())
    for marker in (jr.APPLYING, jr.APPLIED, jr.ROLLING_BACK, jr.ROLLED_BACK):
        (folder / marker).write_text("{}\n")
    assert [j.status() for j in jr.history()] == ["rolled back"]
    pruned = prune(0, None)
    assert not folder.exists() and pruned.removed == [{"journal": folder.name, "status": "rolled back"}]


def test_an_interrupt_while_the_journal_is_written_leaves_no_half_journal():
    """Ctrl-C during `fix --yes` while the journal was being written (before anything changed) left a folder that
    `fix --history` listed as a half-written journal; a failure to write it removed it already. Now both do."""
    header = {"installer": "pip", "target": {"python": "/x/bin/python"}, "plan": {}}

    def interrupted(name: str) -> None:
        if name == "journal-dists":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        jr.create(header, [], {}, lambda folder: {}, interrupted)
    assert jr.history() == [] and list(jr.journals_dir().iterdir()) == []


def test_ctrl_c_during_an_apply_is_named_as_such_not_by_a_bare_signal_number(tmp_path):
    """Ctrl-C mid-apply is rolled back (exit 5), and the output said `FAILED: Interrupted: 2`: the exception's class and
    the signal's number. It says `FAILED: interrupted (SIGINT)`. Held at the step boundary (SIGSTOP) and sent SIGINT
    there, so the interrupt lands in the apply on any machine; an env-file-only plan needs no index."""
    import os
    import signal
    import subprocess
    import sys
    import time

    data = Path(__file__).resolve().parent / "data"
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    env_file = tmp_path / "vllm.env"
    env_file.write_text("A=1\nVLLM_NVFP4_GEMM_BACKEND=marlin\n")
    env = {**os.environ, "SPARKDOCTOR_FIX_STOP_AT": "apply:step-1", "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    p = subprocess.Popen([sys.executable, "-m", "sparkdoctor", "fix", "--python", str(venv), "--matrix", str(data / "matrix"),
                          "--fixes", str(data / "fixes"), "--no-kernels", "--env-file", str(env_file), "--yes"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        for _ in range(6000):  # until it holds itself at the boundary (or ends)
            if p.poll() is not None or open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "T":
                break
            time.sleep(0.05)
        os.kill(p.pid, signal.SIGINT)
        os.kill(p.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=300)
    finally:
        p.kill()
    assert p.returncode == 5, (out, err)
    assert "FAILED: interrupted (SIGINT)" in out and "Rolled back: nothing changed" in out, out
    assert env_file.read_text() == "A=1\nVLLM_NVFP4_GEMM_BACKEND=marlin\n"
