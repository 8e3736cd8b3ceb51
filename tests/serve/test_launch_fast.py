"""The launcher against real stand-in processes (tests/serve/fake_server.py): readiness, the live log scan,
fail-fast, timeouts, a server killed mid-way, Ctrl-C, and the process group always gone (checked in /proc)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sparkdoctor.recipes.model import Recipe
from sparkdoctor.serve import LaunchError, launch, match_line
from sparkdoctor.serve.binding import rebind
from sparkdoctor.serve.groups import members, terminate

FAKE = Path(__file__).resolve().parent / "fake_server.py"


@dataclass
class FakeEntry:
    id: str
    symptoms: list[str] = field(default_factory=list)


ENTRIES = [FakeEntry("fake-entry", ["FAKE-SYMPTOM-42"]), FakeEntry("other-entry", ["never printed"])]


def fake(mode: str, **kw) -> Recipe:
    return Recipe(name=f"fake-{mode}", source_path="test", format="sparkdoctor",
                  argv=[sys.executable, str(FAKE), mode, "--host", "0.0.0.0", "--port", "8000"], **kw)


def gone(pgid: int) -> bool:
    return members(pgid) == []


# ---- pure parts --------------------------------------------------------------------------------------------------
def test_match_line_ignores_colour_codes_and_reports_one_hit_per_entry():
    split = match_line("\x1b[1;31mERROR\x1b[0m RuntimeError: FAKE-SYMPTOM-\x1b[0m42", ENTRIES)
    assert [h.line for h in split] == ["ERROR RuntimeError: FAKE-SYMPTOM-42"]  # colour inside the symptom too
    hits = match_line("\x1b[31mERROR\x1b[0m FAKE-SYMPTOM-42 and FAKE-SYMPTOM-42\n", ENTRIES)
    assert [(h.entry_id, h.symptom, h.line) for h in hits] == [("fake-entry", "FAKE-SYMPTOM-42", "ERROR FAKE-SYMPTOM-42 and FAKE-SYMPTOM-42")]
    assert match_line("all good", ENTRIES) == []


@pytest.mark.parametrize("argv, expected", [
    (["vllm", "serve", "m"], ["vllm", "serve", "m", "--host", "127.0.0.1", "--port", "5"]),
    (["vllm", "serve", "m", "--port", "8000", "--host", "0.0.0.0"], ["vllm", "serve", "m", "--port", "5", "--host", "127.0.0.1"]),
    (["vllm", "--host=0.0.0.0", "--port=1", "x"], ["vllm", "--host=127.0.0.1", "--port=5", "x"]),
    (["srv", "--port", "1", "--port", "2"], ["srv", "--port", "5", "--port", "5", "--host", "127.0.0.1"]),
])
def test_rebind_replaces_or_adds_host_and_port(argv, expected):
    assert rebind(argv, "127.0.0.1", 5) == expected


# ---- real processes ----------------------------------------------------------------------------------------------
def test_ready_server_is_served_then_its_whole_group_is_gone(tmp_path):
    with launch(fake("ready", served_model_name="fake"), run_dir=tmp_path, matrix=ENTRIES, ready_timeout=30) as s:
        assert s.base_url.startswith("http://127.0.0.1:") and s.ready_path == "/health"
        assert s.argv[-4:] == ["--host", "127.0.0.1", "--port", str(s.port)]
        assert len(members(s.pgid)) == 3  # the supervisor (the group's leader), the server and its worker child
        assert s.pid != s.pgid and s.pid in members(s.pgid)  # pid: the server itself, under the supervisor
        s.check_alive()
        pgid = s.pgid
    assert gone(pgid) and s.teardown.clean and s.teardown.signals == ["SIGTERM"]
    log = s.log_path.read_text()
    assert "fake server ready starting" in log and "teardown: process group" in log
    assert (tmp_path / "launch.json").exists()


def test_readiness_falls_back_to_v1_models(tmp_path):
    with launch(fake("models"), run_dir=tmp_path, matrix=[], ready_timeout=30) as s:
        assert s.ready_path == "/v1/models"
    assert gone(s.pgid)


def test_startup_failure_is_explained_by_the_symptom_it_printed(tmp_path):
    with pytest.raises(LaunchError) as err:
        with launch(fake("symptom"), run_dir=tmp_path, matrix=ENTRIES, ready_timeout=30):
            pytest.fail("the server died; launch must not yield it")
    e = err.value
    msg = str(e)
    assert "exited with status 3" in msg and "before it was ready" in msg
    assert "known problems in its log: fake-entry" in msg and "last log line: fake server giving up" in msg
    assert "\n" not in msg
    assert [h.entry_id for h in e.findings] == ["fake-entry"]
    assert "FAKE-SYMPTOM-42" in e.findings[0].line and "\x1b" not in e.findings[0].line
    assert any("FAKE-SYMPTOM-42" in line for line in e.log_tail) and e.teardown.clean


def test_never_ready_times_out_and_a_child_ignoring_sigterm_is_killed(tmp_path):
    t0 = time.monotonic()
    with pytest.raises(LaunchError) as err:
        with launch(fake("never"), run_dir=tmp_path, matrix=ENTRIES, ready_timeout=3, grace=1.5):
            pass
    e = err.value
    assert "not ready after 3s" in str(e) and "no known problem matched" in str(e)
    assert e.teardown.signals == ["SIGTERM", "SIGKILL after 1.5s"] and e.teardown.clean
    assert gone(e.teardown.pgid)
    assert time.monotonic() - t0 < 120  # its 3 s + 1.5 s, not the fake's 600 s; room for a loaded machine (it was 20)


def test_a_readiness_path_that_is_the_fallback_is_named_once(tmp_path):
    """A recipe whose readiness_path is /v1/models (a server without /health) that never got ready was said to have
    left "GET /v1/models and /v1/models" unanswered."""
    with pytest.raises(LaunchError) as err:
        with launch(fake("never", readiness_path="/v1/models"), run_dir=tmp_path, matrix=ENTRIES, ready_timeout=1, grace=0.5):
            pass
    assert "(GET /v1/models never answered 200)" in str(err.value), str(err.value)


def test_server_killed_mid_way_is_a_clear_error(tmp_path):
    with pytest.raises(LaunchError) as err:
        with launch(fake("ready"), run_dir=tmp_path, matrix=[], ready_timeout=30) as s:
            os.kill(s.pid, signal.SIGKILL)
            deadline = time.monotonic() + 60  # a safety net: a loaded machine may be slow to let it die
            while s.alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            s.check_alive()
    msg = str(err.value)
    assert "was killed by SIGKILL" in msg and "while it was serving" in msg
    assert gone(s.pgid)  # its worker child went down with the group


def test_ctrl_c_inside_the_block_still_tears_the_group_down(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with launch(fake("ready"), run_dir=tmp_path, matrix=[], ready_timeout=30) as s:
            raise KeyboardInterrupt
    assert gone(s.pgid) and s.teardown.clean


def test_container_recipe_runs_locally_with_local_and_a_missing_runtime_is_one_line(tmp_path):
    with pytest.raises(LaunchError, match=r"^fake-ready: --runtime sparkdoctor-no-such-cli: no such program on PATH$"):
        with launch(fake("ready", container="vllm-node"), run_dir=tmp_path, matrix=[], ready_timeout=30,
                    runtime="sparkdoctor-no-such-cli"):
            pass
    with launch(fake("ready", container="vllm-node"), run_dir=tmp_path, matrix=[], ready_timeout=30, local=True) as s:
        assert s.ready_path
    assert gone(s.pgid)


def test_a_command_that_is_not_there(tmp_path):
    r = Recipe(name="missing", source_path="t", format="sparkdoctor", argv=["sparkdoctor-no-such-server", "serve"])
    with pytest.raises(LaunchError, match=r"missing: sparkdoctor-no-such-server could not start: No such file"):
        with launch(r, run_dir=tmp_path, matrix=[], ready_timeout=5):
            pass


def test_a_command_missing_from_the_python_environment_names_where_it_was_looked_for(tmp_path):
    """`bench tiny-cpu --python VENV/bin/python` on a venv without vLLM said only `vllm could not start: No such file
    or directory`: which file, and where? The line names the environment's bin/ and PATH, where it was looked for."""
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    python = venv_bin / "python"
    python.symlink_to(sys.executable)
    r = Recipe(name="missing", source_path="t", format="sparkdoctor", argv=["sparkdoctor-no-such-server", "serve"])
    with pytest.raises(LaunchError) as caught:
        with launch(r, run_dir=tmp_path, matrix=[], ready_timeout=5, python=python):
            pass
    line = str(caught.value)
    assert line.startswith("missing: sparkdoctor-no-such-server could not start: No such file"), line
    assert f"no `sparkdoctor-no-such-server` in {venv_bin} (the --python environment) nor on PATH" in line, line
    assert "\n" not in line


def test_terminate_reports_a_group_that_was_already_gone():
    report = terminate(2**22 + 12345)
    assert report.clean and report.signals == [] and "nothing left" in report.describe()


DRIVER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from sparkdoctor import proc
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.serve import launch
proc.install_signal_handlers()  # as sparkdoctor's entry point does: SIGTERM unwinds like Ctrl-C
r = Recipe(name="fake", source_path="t", format="sparkdoctor", argv=[sys.executable, {fake!r}, "ready"])
with launch(r, run_dir=Path({run_dir!r}), matrix=[], ready_timeout=30) as s:
    print(s.pgid, flush=True)
    time.sleep(120)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_sparkdoctor_takes_the_server_group_down(tmp_path, sig):
    import subprocess

    repo = str(Path(__file__).resolve().parent.parent.parent)
    script = DRIVER.format(repo=repo, fake=str(FAKE), run_dir=str(tmp_path))
    # SIGINT as a terminal leaves it: a CI job started in the background inherits it ignored, and
    # sparkdoctor rightly keeps a signal its parent ignores ignored (then this driver would never stop).
    driver = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        pgid = int(driver.stdout.readline())
        assert members(pgid), "the server group should be up while the driver waits"
        driver.send_signal(sig)
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert gone(pgid)
    assert "teardown: process group" in (tmp_path / "server.log").read_text()


def test_an_unwritable_run_dir_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(LaunchError, match=r"fake-ready: cannot write the server log .*file/run/server.log"):
        with launch(fake("ready"), run_dir=blocker / "run", matrix=[], ready_timeout=5):
            pass


def test_by_default_the_shipped_matrix_symptoms_are_scanned():
    from sparkdoctor.serve import symptom_entries

    entries = symptom_entries(None)
    assert entries and all(e.symptoms for e in entries)
    ptxas = next(e for e in entries if e.id == "cutedsl-450-libs-base-mma")
    line = f"\x1b[31mERROR\x1b[0m ptxas fatal: {ptxas.symptoms[0]} (sm_121a)"
    assert "cutedsl-450-libs-base-mma" in {h.entry_id for h in match_line(line, entries)}


def test_a_daemon_the_server_started_outside_its_group_does_not_hang_the_teardown(tmp_path):
    """A server that starts a daemon in a session of its own (setsid: Ray's processes, a compile cache server)
    which keeps the server's stdout and stderr: the teardown closed those pipes under the log threads still
    blocked reading them, and that close waits for the read, forever; `bench` hung, deaf to SIGTERM."""
    import threading

    pidfile = tmp_path / "daemon.pid"
    # the pid is written whole and renamed into place, and the server is not torn down before it is there: the
    # daemon starts beside the server, and a busy machine may run the server's teardown before the daemon's echo
    script = (f"(setsid sh -c 'echo $$ > {pidfile}.part; mv {pidfile}.part {pidfile}; exec sleep 600' &) ; "
              f"exec {sys.executable} {FAKE} ready \"$@\"")
    recipe = Recipe(name="fake-daemon", source_path="test", format="sparkdoctor",
                    argv=["sh", "-c", script, "sh", "--host", "0.0.0.0", "--port", "8000"])
    outcome: dict = {}

    def serve() -> None:
        with launch(recipe, run_dir=tmp_path, matrix=[], ready_timeout=30) as s:
            outcome["pgid"] = s.pgid
            until = time.monotonic() + 60  # a safety net: the daemon writes its pid at once
            while not pidfile.exists() and time.monotonic() < until:
                time.sleep(0.05)
        outcome["teardown"] = s.teardown

    thread = threading.Thread(target=serve, daemon=True)
    try:
        thread.start()
        thread.join(120)  # a safety net for a hang, not a verdict on time (the teardown takes seconds)
        assert not thread.is_alive(), "the teardown is still waiting for the daemon's pipes"
        assert outcome["teardown"].clean and gone(outcome["pgid"])
        # and the daemon went too (serve/reaper.py; tests/serve/test_teardown_reaps_daemons.py)
        assert int(pidfile.read_text()) in [e.pid for e in outcome["teardown"].escaped]
    finally:
        if pidfile.exists():  # only if the daemon is still there: the teardown took it down, and its pid may be reused
            with contextlib.suppress(OSError):
                if Path(f"/proc/{int(pidfile.read_text())}/cmdline").read_bytes() == b"sleep\x00600\x00":
                    os.kill(int(pidfile.read_text()), signal.SIGKILL)


def _venv_with_a_server_script(where: Path, long_form: bool) -> Path:
    """A real venv (`python -m venv`) whose bin/ holds a console script as pip writes it, that runs the fake server."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    python = where / "bin" / "python"
    body = f"import runpy, sys\nsys.argv[0] = {str(FAKE)!r}\nrunpy.run_path({str(FAKE)!r}, run_name='__main__')\n"
    first = f"#!/bin/sh\n'''exec' {python} \"$0\" \"$@\"\n' '''\n" if long_form else f"#!{python}\n"
    script = where / "bin" / "fake-serve"
    script.write_text(first + body)
    script.chmod(0o755)
    return python


@pytest.mark.parametrize("how", ["copied", "moved", "copied-long-path-form"])
def test_a_copied_or_moved_venv_serves_with_its_own_interpreter(tmp_path, how):
    """A venv copied (`cp -a`) or moved keeps its scripts' first line naming the old place's python: `bench --python
    NEW/bin/python` must run NEW's interpreter (whose packages the run is stored with), never the old one's."""
    old = tmp_path / "old"
    _venv_with_a_server_script(old, long_form=how.endswith("long-path-form"))
    new = tmp_path / "new"
    shutil.copytree(old, new, symlinks=True)
    if how == "moved":
        shutil.rmtree(old)
    recipe = Recipe(name="venv-script", source_path="t", format="sparkdoctor",
                    argv=["fake-serve", "ready", "--host", "0.0.0.0", "--port", "8000"])
    with launch(recipe, run_dir=tmp_path / "run", matrix=[], ready_timeout=30, python=new / "bin" / "python") as s:
        ran = Path(f"/proc/{s.pid}/cmdline").read_bytes().split(b"\0")
        assert ran[:2] == [os.fsencode(new / "bin" / "python"), os.fsencode(new / "bin" / "fake-serve")], ran
    assert gone(s.pgid)


def test_a_venv_script_of_its_own_venv_runs_as_it_is(tmp_path):
    python = _venv_with_a_server_script(tmp_path / "v", long_form=False)
    recipe = Recipe(name="venv-script", source_path="t", format="sparkdoctor", argv=["fake-serve", "ready"])
    with launch(recipe, run_dir=tmp_path / "run", matrix=[], ready_timeout=30, python=python) as s:
        assert s.argv[0] == str(python.parent / "fake-serve")
    assert gone(s.pgid)


def test_a_port_another_program_took_after_it_was_chosen_is_not_taken_for_the_server(tmp_path, monkeypatch):
    """free_port() picks a port nothing listens on, and the server binds it seconds later: in between, another program
    (here: a stand-in answering every GET with 200; in the suite, another test's server) can take it. Its 200 made
    the launch 'ready', and bench then measured a server that was not its own (a CI run: "ready after 8.6s" while
    vLLM was still parsing its arguments, then "cannot connect" once the other server was gone)."""
    import http.server
    import importlib
    import threading

    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    foreign = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=foreign.serve_forever, daemon=True).start()
    launcher = importlib.import_module("sparkdoctor.serve.launch")  # the package's `launch` is the function
    monkeypatch.setattr(launcher, "free_port", lambda: foreign.server_address[1])
    try:
        with pytest.raises(LaunchError) as err:
            with launch(fake("ready"), run_dir=tmp_path, matrix=[], ready_timeout=60):
                pytest.fail("another program's 200 was taken for the launched server's readiness")
    finally:
        foreign.shutdown()
    assert "before it was ready" in str(err.value)
    # the error quotes the last line of the log: on a busy machine that is the note below, or the server's other
    # stream (its two pipes are read by two threads), so its bind error is looked for in the log
    log = err.value.log_path.read_text()
    assert "Address already in use" in log and "answers, but not from this server's processes" in log


def test_the_chosen_port_is_one_no_other_programs_bind_0_or_connection_is_handed(tmp_path):
    """The port is chosen below the kernel's ephemeral range: a port the kernel picked for the launch (bind to port 0)
    was handed again to another test's server, or to an outgoing connection, before the server bound it, and the
    launch failed with "Address already in use" (the race above, which CI's parallel workers made real)."""
    import socket

    from sparkdoctor.serve import binding

    low = binding._ephemeral_low()
    assert low is not None and low - binding.FIRST_PORT >= binding.TRIES  # Linux's default range is 32768-60999
    taken = []
    try:
        for _ in range(50):
            port = binding.free_port()
            assert binding.FIRST_PORT <= port < min(low, binding.END_PORT)  # below Kubernetes' NodePorts too
            sock = socket.socket()
            sock.bind(("127.0.0.1", port))  # free when it was chosen; held now, so the next choice is another port
            taken.append(sock)
        assert len({s.getsockname()[1] for s in taken}) == 50
    finally:
        for sock in taken:
            sock.close()


def test_a_port_something_listens_on_at_another_address_is_passed_over(monkeypatch):
    """bind() to 127.0.0.1 succeeds beside a listener on 127.0.0.2 (or ::1) at the same port, and a client of
    `localhost` may reach that one: a port with a listener at any address is not chosen."""
    import random
    import socket

    from sparkdoctor.serve import binding

    other = socket.socket()
    other.bind(("127.0.0.2", 0))
    other.listen()
    try:
        busy = other.getsockname()[1]
        spare = socket.socket()
        spare.bind(("127.0.0.1", 0))
        free = spare.getsockname()[1]
        spare.close()
        monkeypatch.setattr(binding, "_ephemeral_low", lambda: 65000)
        monkeypatch.setattr(binding, "FIRST_PORT", 1024)
        monkeypatch.setattr(binding, "END_PORT", 65000)
        monkeypatch.setattr(random, "sample", lambda _range, _k: [busy, free])
        assert binding.free_port() == free
    finally:
        other.close()


def test_where_the_ephemeral_range_leaves_no_room_or_cannot_be_read_the_kernel_chooses(tmp_path, monkeypatch):
    from sparkdoctor.serve import binding

    real = binding._ephemeral_low
    kernel = real()
    assert kernel is not None
    for text, low in (("1024\t65535\n", 1024), ("", None), ("garbage", None)):
        (tmp_path / "range").write_text(text)
        assert real(str(tmp_path / "range")) == low
        monkeypatch.setattr(binding, "_ephemeral_low", lambda: real(str(tmp_path / "range")))
        assert binding.free_port() >= kernel  # bind to port 0: the kernel's own range
