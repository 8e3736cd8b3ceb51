"""The machine's load with every run (bench/load.py) and the process behind a local URL (bench/behind.py), on
real processes: a CPU burner that is not sparkdoctor's child, a real HTTP server in another process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sparkdoctor.bench import ab, behind, load
from tests.ports import refused_port, start_on_a_free_port


def _burner():
    """A busy loop re-parented away from this process (the shell that started it exits): an 'other' process."""
    out = subprocess.run(["sh", "-c", f"{sys.executable} -c 'while True: pass' >/dev/null 2>&1 & echo $!"],
                         capture_output=True, text=True, timeout=30)
    return int(out.stdout.strip())


def _running(pid: int) -> None:
    """Wait until the burner is python and has had some CPU: on a busy machine its start takes a while (a wait for
    an event, bounded generously; no verdict is drawn from how long it took)."""
    for _ in range(600):
        stat = Path(f"/proc/{pid}/stat").read_text()
        name, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if name.startswith("python") and int(fields[11]) + int(fields[12]) >= 5:  # utime + stime, in ticks
            return
        time.sleep(0.1)


def test_another_process_burning_cpu_is_seen_named_and_called_busy(monkeypatch):
    monkeypatch.setattr(load, "TOP", 10_000)  # a shared CI box has other busy processes: look at all of them
    pid = _burner()
    try:
        _running(pid)
        # a 2 s window: at load 10 on 2 cores the burner's fair share is about 20 %, four times the 5 % asked
        sample = load.sample(gpus=False, window_s=2.0)
    finally:
        os.kill(pid, signal.SIGKILL)
    burner = [p for p in sample["top"] if p["pid"] == pid]
    assert burner and burner[0]["cpu_pct"] > 5 and burner[0]["name"].startswith("python"), sample["top"][:8]
    assert sample["other_cpus"] >= burner[0]["cpu_pct"] / 100 - 0.01
    assert len(sample["loadavg"]) == 3 and sample["cpus"] == os.cpu_count()
    if sample["other_cpus"] >= max(load.BUSY_MIN_CPUS, load.BUSY_SHARE * sample["cpus"]):
        assert "other processes used" in load.busy(sample)


def test_our_own_children_are_the_measurement_not_load():
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        sample = load.sample(gpus=False)
    finally:
        child.kill()
        child.wait()
    assert child.pid not in {p["pid"] for p in sample["top"]}


def _index(cpus_used, cpus=2, gpu=0.0):
    return {"other_cpus": cpus_used, "gpu_other_mib": gpu, "cpus": cpus}


def test_arms_under_clearly_different_load_are_not_called_unless_allowed():
    assert load.arms_differ([_index(0.1), _index(0.2)], [_index(0.15), _index(0.1)]) is None
    why = load.arms_differ([_index(0.1)], [_index(1.6)])
    assert why and "1.6 during B" in why
    assert load.arms_differ([_index(0, 20)], [_index(3, 20)]) is None  # 3 of 20 CPUs: under a quarter
    assert "GPU" in load.arms_differ([_index(0, gpu=0)], [_index(0, gpu=8000)])

    def run(tps, other):
        return {"levels": [{"concurrency": 1, "round_output_tps": [tps] * 3}], "load": {"index": _index(other), "busy": None}}

    a, b = [run(100, 0.0), run(101, 0.0)], [run(40, 1.8), run(41, 1.9)]
    levels = ab.compare(a, b)
    assert levels[0]["ratio"]["verdict"] == "slower"
    doc = ab.load_check(a, b, levels, allowed=False)
    assert doc["differ"] and levels[0]["ratio"]["verdict"] == ab.NOT_CALLED and ab.overall(levels) == ab.NOT_CALLED
    levels = ab.compare(a, b)
    assert ab.load_check(a, b, levels, allowed=True)["allowed"] and levels[0]["ratio"]["verdict"] == "slower"


def test_a_busy_warning_of_an_ab_names_the_arm_it_was_taken_in():
    """"warning: busy machine during a run: ..." twice under an A/B, and no way to tell which arm's number to doubt."""
    def run(busy):
        return {"levels": [{"concurrency": 1, "round_output_tps": [100.0] * 3}],
                "load": {"index": _index(1.2), "busy": busy}}

    a, b = [run("other processes used 1.2 of 2 CPUs (x)")], [run(None)]
    doc = ab.load_check(a, b, ab.compare(a, b), allowed=False)
    assert doc["busy"] == ["arm A: other processes used 1.2 of 2 CPUs (x)"], doc


def test_a_rerun_of_an_uncalled_verdict_is_inconclusive_not_a_flip():
    from sparkdoctor.conclusions.outcome import _level_outcome

    old = {"verdict": "faster", "ci_low": 1.5, "ci_high": 2.0}
    assert _level_outcome(old, {"verdict": "not called", "ci_low": 0.4, "ci_high": 0.5}) == "inconclusive"


def test_the_process_behind_a_local_port_and_its_interpreter_are_found(tmp_path):
    # listening there itself, not merely some process on a port that was free a moment ago (tests/ports.py)
    server, port = start_on_a_free_port(lambda port: subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        found = behind.serving_process(f"http://127.0.0.1:{port}")
    finally:
        server.kill()
        server.wait()
    assert found["pid"] == server.pid and found["container"] is None
    assert Path(found["python"]) == Path(sys.executable) and f"pid {server.pid}" in found["why"]


def test_a_remote_or_unserved_url_is_toolchain_unknown_with_the_reason():
    assert behind.serving_process("http://192.0.2.1:8000")["python"] is None  # TEST-NET-1: never this machine
    assert "not this machine" in behind.serving_process("http://192.0.2.1:8000")["why"]
    with refused_port() as port:
        gone = behind.serving_process(f"http://127.0.0.1:{port}")
    assert gone["python"] is None and "no process of this user listens" in gone["why"]


REPO = Path(__file__).resolve().parents[2]
SSE = REPO / "tests" / "bench" / "sse_server.py"


def _serve(argv0_env: dict[str, str], python: str) -> tuple[subprocess.Popen, int]:
    return start_on_a_free_port(lambda port: subprocess.Popen([python, str(SSE), "--port", str(port)], env=argv0_env,
                                                              cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))


def _bench(url: str, tmp_path: Path) -> dict:
    import json

    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "c"))
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "bench", "--url", url, "--rounds", "2", "--concurrency", "1",
                           "--max-tokens", "8", "--warmup", "1", "--ledger", str(tmp_path / "l.sqlite"), "--format", "json"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_bench_url_without_python_files_the_run_under_the_serving_process_or_unknown(tmp_path):
    """A server run by a venv's python (argv[0] a path): its toolchain. The same server started as a bare
    `python3` with no venv in its environment: "unknown" with the reason, never sparkdoctor's own venv."""
    server, port = _serve(dict(os.environ), sys.executable)
    try:
        doc = _bench(f"http://127.0.0.1:{port}", tmp_path)
    finally:
        server.kill()
        server.wait()
    assert doc["fingerprint"] != "unknown" and f"pid {server.pid}" in doc["target"]["found_by"]
    assert doc["load"]["before"]["cpus"] == os.cpu_count() and "index" in doc["load"]
    bare = {"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    server, port = _serve(bare, "python3" if Path(sys.executable).name != "python3" else "python")
    try:
        doc = _bench(f"http://127.0.0.1:{port}", tmp_path)
    finally:
        server.kill()
        server.wait()
    assert doc["fingerprint"] == "unknown" and doc["target"]["kind"] == "unknown"
    assert f"pid {server.pid}" in doc["target"]["why"] and "runs no Python sparkdoctor can find" in doc["target"]["why"]


def test_a_rerun_against_runs_taken_under_other_load_is_inconclusive(tmp_path):
    """The old conclusion's runs were taken on a busy machine, the new ones on a quiet one: read from the load
    each run stored in the ledger, the change is not called a flip."""
    from sparkdoctor.conclusions.rerun import _load_differs

    class Ledger:
        def __init__(self, loads):
            self.loads = loads

        def run(self, rid):
            return {"summary": {"load": {"index": self.loads[rid]} if self.loads[rid] else {}}}

    led = Ledger({1: _index(1.7), 2: _index(1.8), 3: _index(0.1), 4: _index(0.0), 5: None})
    assert "other processes used 1.8 CPUs" in _load_differs(led, [1, 2], [3, 4])
    assert _load_differs(led, [3], [4]) is None
    assert _load_differs(led, [5], [3]) is None  # a run stored before loads were kept: not judged


def test_a_changed_verdict_is_a_flip_only_when_the_new_interval_excludes_the_old_ratio():
    from sparkdoctor.conclusions.outcome import _level_outcome

    old = {"verdict": "faster", "ratio": 1.3, "ci_low": 1.1, "ci_high": 1.5}
    assert _level_outcome(old, {"verdict": "no difference", "ratio": 1.2, "ci_low": 0.95, "ci_high": 1.45}) == "inconclusive"
    assert _level_outcome(old, {"verdict": "no difference", "ratio": 1.0, "ci_low": 0.9, "ci_high": 1.1}) == "flipped"
