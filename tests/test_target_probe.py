"""The head start: the target probe launched before the CLI framework is imported."""

import sys
import time

import pytest

from sparkdoctor.targets import early
from sparkdoctor.targets import probe as target_probe


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)


@pytest.mark.parametrize(
    "argv",
    [
        ["sparkdoctor"],
        ["sparkdoctor", "matrix", "list"],
        ["sparkdoctor", "check", "--facts", "snap.json"],
        ["sparkdoctor", "check", "--facts=snap.json"],
        ["sparkdoctor", "check", "--help"],
        ["sparkdoctor", "check", "--container", "c1"],
        ["sparkdoctor", "check", "--python", "/no/such/python"],  # the CLI reports this properly
        ["sparkdoctor", "check", "--python", "python3"],  # a name on PATH: resolved after parsing
    ],
)
def test_no_head_start_where_it_would_be_wasted_or_wrong(argv):
    assert early.plain_check_target(argv) is None
    early.start(argv)
    assert early.RAW == {}


def test_head_start_reads_python_and_cache_mode():
    assert early.plain_check_target(["sparkdoctor", "check", "--python", sys.executable, "--no-kernels"]) == (sys.executable, True)
    assert early.plain_check_target(["sparkdoctor", "check", f"--python={sys.executable}", "--no-cache"]) == (sys.executable, False)
    early.start(["sparkdoctor", "check", f"--python={sys.executable}", "--no-cache"])
    try:
        assert set(early.RAW) == {early.TARGET, early.GPU}
        argv = early.RAW[early.TARGET][0].argv
        assert "--no-cache" in argv and argv[argv.index("--capabilities") + 1] == "-", "no capabilities cache either"
    finally:
        early.drop()
    assert early.RAW == {}


def test_the_early_children_are_exactly_the_ones_the_ordinary_path_starts():
    """The same command lines, so `check` takes them instead of starting its own."""
    from sparkdoctor.collect import gpu
    from sparkdoctor.targets import choose
    from sparkdoctor.targets.local import resolve_python_target

    early.start(["sparkdoctor", "check", "--python", sys.executable])
    raw = {name: running for name, (running, _) in early.RAW.items()}
    probe = choose.start_target_probe(resolve_python_target(sys.executable), no_cache=False)
    gpu.prestart()
    try:
        assert probe.capabilities and probe.running.inner.inner is raw[early.TARGET]
        assert gpu._early is raw[early.GPU]
        assert early.RAW == {}
    finally:
        probe.running.cancel()
        gpu.take_early("gpu"), gpu.take_early("health")


@pytest.mark.parametrize("xdg", [None, "", "  ", "/tmp/xdg-cache"])
def test_the_early_cache_folder_is_the_one_sparkdoctor_uses(monkeypatch, xdg):
    from sparkdoctor.locations import cache_dir, data_dir

    monkeypatch.delenv("SPARKDOCTOR_CACHE_DIR")
    if xdg is None:
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    assert early.default_cache_dir() == str(cache_dir())
    monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", "/somewhere/else")
    assert early.default_cache_dir() == str(cache_dir())
    assert early.probe_script("target_env") == str(data_dir("probes") / "target_env" / "__main__.py")


def test_a_head_start_for_another_target_is_discarded(tmp_path):
    """What typer parsed wins: a head start for another interpreter is cancelled, never used."""
    import json
    import os
    import subprocess

    from tests.test_cli import REPO

    decoy = tmp_path / "decoy-python"  # answers any probe with a package no real target has
    decoy.write_text('#!/bin/sh\nsleep 1\necho \'{"packages": {"from-the-wrong-target": {"name": "x", "version": "1"}}}\'\n')
    decoy.chmod(0o755)
    code = (
        "import sys; from sparkdoctor.targets import early\n"
        f"early.start(['sparkdoctor', 'check', '--python', {str(decoy)!r}])\n"
        "assert early.RAW\n"
        "sys.argv = ['sparkdoctor', 'check', '--python', sys.executable, '--no-kernels', '--format', 'json']\n"
        "from sparkdoctor.cli import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    doc = json.loads(done.stdout)
    assert doc["facts"]["target"]["python"] == sys.executable
    assert "from-the-wrong-target" not in doc["facts"]["packages"]
    assert "pytest" in doc["facts"]["packages"]


def test_the_target_probe_answers_for_the_capabilities_probe_too(tmp_path):
    """For a local check one target interpreter runs both probes; both collectors read that one result,
    and the capabilities are exactly what the capabilities probe reads on its own."""
    from pathlib import Path

    from sparkdoctor.collect import Context, capabilities, targetenv
    from sparkdoctor.facts import Facts
    from sparkdoctor.locations import cache_dir
    from sparkdoctor.targets.local import resolve_python_target

    target = resolve_python_target(sys.executable)

    def ctx():
        return Context(target=target, facts=Facts(), cache_dir=Path(cache_dir()), use_cache=True)

    alone = capabilities.run(ctx())
    shared = ctx()
    probe = target_probe.prestart(target, cache_dir(), use_cache=True, capabilities=True)
    shared.scratch[targetenv.PRESTART_KEY] = shared.scratch[capabilities.PRESTART_KEY] = probe
    assert "--capabilities" in probe.running.argv
    assert capabilities.run(shared) == alone
    assert "pytest" in targetenv.run(shared)["packages"], "the target collector reads the same result"


def test_a_head_start_in_another_cache_mode_is_cancelled_not_used():
    from sparkdoctor.targets import choose
    from sparkdoctor.targets.local import resolve_python_target

    early.start(["sparkdoctor", "check", "--python", sys.executable])
    raw = early.RAW[early.TARGET][0]
    # typer parsed --no-cache after all (say): the early probe read with the cache, so it is not used
    probe = choose.start_target_probe(resolve_python_target(sys.executable), no_cache=True)
    try:
        assert probe.running.inner.inner is not raw and early.TARGET not in early.RAW
        assert raw.popen is None or raw.popen.wait(timeout=30) is not None, "cancelled"
    finally:
        probe.running.cancel()
        early.drop()


def test_one_gpu_helper_answers_the_gpu_and_the_health_collectors(tmp_path, monkeypatch):
    """The prestarted helper asks NVML/libcuda and then takes the health readings: one process, and
    a health stage that hangs costs the health readings only, named as such."""
    from sparkdoctor.collect import gpu, gpu_health

    helper = tmp_path / "gpu_query.py"
    helper.write_text(
        "import json, os, sys, time\n"
        "def say(r):\n    sys.stdout.write(json.dumps(r) + '\\n'); sys.stdout.flush()\n"
        "open(sys.argv[0] + '.runs', 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        "say({'stage': 'nvml', 'start': True}); say({'stage': 'nvml', 'missing': 'no NVML here'})\n"
        "say({'stage': 'libcuda', 'start': True}); say({'stage': 'libcuda', 'encoded': 13000})\n"
        "if '--with-health' in sys.argv:\n"
        "    say({'stage': 'health', 'start': True})\n"
        "    if os.environ.get('FAKE_HEALTH') == 'HANG':\n        open(sys.argv[0] + '.hangs', 'w').close(); time.sleep(60)\n"
        "    say({'stage': 'health', 'missing': 'NVML not available'})\n"
    )
    monkeypatch.setattr(gpu, "HELPER", helper)
    monkeypatch.setattr(gpu_health, "HELPER", helper)
    # the helper's limit is wall-clock from its start: one that answers at once must not time out on a loaded machine
    monkeypatch.setattr(gpu, "EARLY_TIMEOUT", 600.0)

    gpu.prestart()
    libs = gpu.query_libraries()
    assert libs.libcuda == "13.0" and libs.problems == [] and isinstance(libs.nvml, gpu.Missing)
    assert gpu_health.read() == ([], None)
    assert (tmp_path / "gpu_query.py.runs").read_text().splitlines() == ["--with-health"], "one process for both"

    monkeypatch.setenv("FAKE_HEALTH", "HANG")
    monkeypatch.setattr(gpu, "EARLY_TIMEOUT", 3.0)
    gpu.prestart()
    # The 3 s count from the helper's start, the GPU stages' answers included: the helper is let reach its hang first,
    # so a loaded machine's slow start cannot cut the GPU stages (their lines wait in the pipe, read at the kill)
    hangs = tmp_path / "gpu_query.py.hangs"
    for _ in range(60_000):  # a bound on a broken helper only (10 minutes), never reached by one that answers
        if hangs.exists():
            break
        time.sleep(0.01)
    libs = gpu.query_libraries()
    assert libs.libcuda == "13.0" and libs.problems == [], "the GPU stages had answered before the hang"
    gpus, problem = gpu_health.read()
    assert gpus is None and problem.startswith("NVML health readings: the GPU query helper: no answer within")


@pytest.mark.parametrize("answer, outcome", [
    ('{"packages": {}, "capabilities_probe": {"error": "OSError: boom"}}', "own probe"),
    ('{"packages": {}}', "own probe"),
    ("not json at all", "error"),
])
def test_the_capabilities_collector_when_the_target_probe_could_not_answer_for_it(tmp_path, answer, outcome):
    """Its capabilities part failed inside an answering probe: the collector runs the capabilities probe
    itself. The target probe did not answer at all: that is this collector's one error line too, and no
    late process is started (a run past its budget must not leave one behind)."""
    from pathlib import Path

    from sparkdoctor import proc
    from sparkdoctor.collect import CollectorError, Context, capabilities
    from sparkdoctor.facts import Facts
    from sparkdoctor.locations import cache_dir
    from sparkdoctor.targets.local import resolve_python_target

    target = resolve_python_target(sys.executable)
    ctx = Context(target=target, facts=Facts(), cache_dir=Path(cache_dir()), use_cache=True)
    fake = proc.start(["/bin/sh", "-c", f"echo '{answer}'"])
    ctx.scratch[capabilities.PRESTART_KEY] = target_probe.Prestarted(target_probe.Shared(fake), None, True)
    if outcome == "error":
        with pytest.raises(CollectorError, match="printed no JSON"):
            capabilities.run(ctx)
    else:
        alone = capabilities.run(Context(target=target, facts=Facts(), cache_dir=Path(cache_dir()), use_cache=True))
        assert capabilities.run(ctx) == alone, "read by the capabilities probe on its own"


def test_a_virtual_env_that_is_gone_is_exit_3_not_sparkdoctors_own_venv(tmp_path, monkeypatch):
    """A shell whose venv was deleted still sets $VIRTUAL_ENV: check judged sparkdoctor's own venv instead (the header
    said "chosen by current interpreter"), so a CI gate passed on the wrong environment. It is one line, exit 3, and
    no head start is made for it."""
    import json
    import os
    import subprocess

    gone = tmp_path / "deleted-venv"
    monkeypatch.setenv("VIRTUAL_ENV", str(gone))
    assert early.plain_check_target(["sparkdoctor", "check"]) is None
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--no-kernels", "--format", "json"],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ), cwd=tmp_path)
    assert done.returncode == 3, (done.returncode, done.stderr)
    assert json.loads(done.stdout)["errors"][0]["type"] == "TargetError"
    assert done.stderr.count("\n") == 1 and f"$VIRTUAL_ENV {gone}: no bin/python there" in done.stderr
