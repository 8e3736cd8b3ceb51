"""A launched server listens on 127.0.0.1 only, or it is not measured.

The launcher puts `--host 127.0.0.1` on the command, but a command that ignores it (a wrapper that binds its own
address, a server whose host option has another name) listened on every interface, and bench measured it as if it
were private. Now readiness also reads /proc/net/tcp*: a listener of the server's processes on its port at an
address other than loopback fails the launch in one line, and its group is taken down. The tests never bind outside
127.0.0.1: the addresses are read from a made-up /proc, or the real loopback listener is judged as a wide one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sparkdoctor.recipes.model import Recipe
from sparkdoctor.serve import LaunchError, binding, launch
from sparkdoctor.serve.groups import members

LOCAL = "127.0.0.1"

FAKE = Path(__file__).resolve().parent / "fake_server.py"
HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"


def _row(address: str, port: int, state: str, inode: int) -> str:
    return f"   0: {address}:{port:04X} 00000000:0000 {state} 00000000:00000000 00:00000000 00000000     0        0 {inode}\n"


def _proc(tmp_path: Path, port: int) -> Path:
    root = tmp_path / "proc"
    (root / "net").mkdir(parents=True)
    (root / "net" / "tcp").write_text(HEADER + _row("00000000", port, "0A", 111) + _row("0100007F", port, "0A", 222)
                                      + _row("0100007F", port + 1, "0A", 444) + _row("00000000", port, "01", 555))
    (root / "net" / "tcp6").write_text(HEADER + _row("0" * 32, port, "0A", 333)
                                       + _row("00000000000000000000000001000000", port, "0A", 666))
    for pid, inode in ((10, 111), (11, 222), (12, 333), (13, 666), (14, 444)):
        (root / str(pid) / "fd").mkdir(parents=True)
        (root / str(pid) / "fd" / "3").symlink_to(f"socket:[{inode}]")
    return root


def test_only_listeners_of_the_servers_processes_at_other_addresses_than_loopback_count(tmp_path):
    root = _proc(tmp_path, 24000)
    assert binding.wide_listeners([10, 11, 12, 13, 14], root) == [("0.0.0.0", 24000), ("::", 24000)]
    assert binding.wide_listeners([11, 13, 14], root) == []  # 127.0.0.1, ::1, and another port's on 127.0.0.1
    assert binding.wide_listeners([99], root) == []  # a wide listener of another program is not this server's
    assert binding.exposed(24000, [11, 13, 14], root) is None
    assert binding.listening_inodes(24000, root) == {111, 222, 333, 666}


def test_a_side_port_of_the_servers_processes_beyond_loopback_counts_and_loopback_side_ports_do_not(tmp_path):
    """The rule is 127.0.0.1 only, for every port the server's processes listen on: a metrics or Ray port on 0.0.0.0
    answers other machines as much as the served one. Side ports on loopback (vLLM's engine core opens a dozen) pass."""
    root = _proc(tmp_path, 24000)
    with (root / "net" / "tcp").open("a") as fh:
        fh.write(_row("00000000", 8265, "0A", 777) + _row("0100007F", 41619, "0A", 888))
    for pid, inode in ((15, 777), (16, 888)):
        (root / str(pid) / "fd").mkdir(parents=True)
        (root / str(pid) / "fd" / "4").symlink_to(f"socket:[{inode}]")
    assert binding.wide_listeners([11, 15, 16], root) == [("0.0.0.0", 8265)]
    said = binding.exposed(24000, [11, 15, 16], root)
    assert said is not None and "also listens on 0.0.0.0 port 8265" in said and "not on 127.0.0.1 only" in said
    assert "ignored --host" not in said  # the served port is on 127.0.0.1: the side port is what to fix
    assert binding.exposed(24000, [11, 16], root) is None  # a side port on 127.0.0.1 is allowed
    both = binding.exposed(24000, [10, 15], root)
    assert both is not None and both.startswith("the server listens on 0.0.0.0 port 24000; it also listens on 0.0.0.0 "
                                                "port 8265") and "ignored --host 127.0.0.1" in both


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_server_listening_beyond_loopback_is_not_measured_and_its_group_is_gone(tmp_path, monkeypatch):
    monkeypatch.setattr(binding, "_loopback", lambda address: False)  # its real 127.0.0.1 listener, judged as 0.0.0.0
    recipe = Recipe(name="wide", source_path="test", format="sparkdoctor",
                    argv=[sys.executable, str(FAKE), "ready", "--host", "0.0.0.0", "--port", "8000"])
    with pytest.raises(LaunchError) as raised:
        with launch(recipe, run_dir=tmp_path, matrix=[], ready_timeout=60, grace=5):
            pytest.fail("a server that listens beyond loopback must never be handed over")
    message = str(raised.value)
    assert "listens on 127.0.0.1 port" in message and "ignored --host 127.0.0.1" in message and "\n" not in message
    assert raised.value.teardown is not None and members(raised.value.teardown.pgid) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_server_that_left_its_group_is_still_known_as_the_servers_listener(tmp_path):
    """A server that calls setsid itself leaves the supervisor's group: its 200 was taken for another program's (the
    port 'answers, but not from this server's processes') until the ready timeout. It is the recorded server."""
    leave = f"import os, sys; os.setsid(); os.execv(sys.executable, [sys.executable, {str(FAKE)!r}, *sys.argv[1:]])"
    recipe = Recipe(name="setsid", source_path="test", format="sparkdoctor",
                    argv=[sys.executable, "-c", leave, "ready", "--host", "0.0.0.0", "--port", "8000"])
    with launch(recipe, run_dir=tmp_path, matrix=[], ready_timeout=30, grace=1) as server:
        assert members(server.pgid) and server.pid not in members(server.pgid)  # it did leave the group
    assert server.teardown is not None and server.teardown.clean
    assert server.pid in [e.pid for e in server.teardown.escaped]  # and it was stopped all the same (its worker too)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("own_session", [False, True])
def test_a_server_whose_worker_listens_beyond_loopback_on_a_side_port_is_not_measured(tmp_path, monkeypatch, own_session):
    """Its worker child's real side listener on 127.0.0.1, judged as 0.0.0.0 (no test binds beyond loopback); the
    served port stays 127.0.0.1. Before, only the served port was looked at and this server was measured. A worker in
    a session of its own (a daemon: out of the process group) is still the server's: under its supervisor."""
    if own_session:
        monkeypatch.setenv("FAKE_SERVER_SIDE_SETSID", "1")
    side = binding.free_port()
    real = binding.all_listeners

    def judged(root: Path = Path("/proc")) -> dict[int, tuple[str, int]]:
        return {inode: ("0.0.0.0" if at == side else address, at) for inode, (address, at) in real(root).items()}

    monkeypatch.setattr(binding, "all_listeners", judged)
    monkeypatch.setenv("FAKE_SERVER_SIDE_PORT", str(side))
    recipe = Recipe(name="side", source_path="test", format="sparkdoctor", argv=[sys.executable, str(FAKE), "ready"])
    with pytest.raises(LaunchError) as raised:
        with launch(recipe, run_dir=tmp_path, matrix=[], ready_timeout=60, grace=5):
            pytest.fail("a server with a side port beyond loopback must never be handed over")
    message = str(raised.value)
    assert f"also listens on 0.0.0.0 port {side}" in message and "not measured" in message and "\n" not in message
    assert raised.value.teardown is not None and raised.value.teardown.clean and members(raised.value.teardown.pgid) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_server_whose_worker_listens_on_a_loopback_side_port_is_measured(tmp_path, monkeypatch):
    side = binding.free_port()
    monkeypatch.setenv("FAKE_SERVER_SIDE_PORT", str(side))
    recipe = Recipe(name="side-lo", source_path="test", format="sparkdoctor", argv=[sys.executable, str(FAKE), "ready"])
    with launch(recipe, run_dir=tmp_path, matrix=[], ready_timeout=60, grace=5) as server:
        assert (LOCAL, side) in [where for inode, where in binding.all_listeners().items()
                                 if any(binding.holds(pid, {inode}) for pid in members(server.pgid))]
    assert server.teardown is not None and server.teardown.clean


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_server_listening_beyond_loopback_is_stopped_before_it_ever_answers(tmp_path, monkeypatch):
    """A server binds its port long before it answers (vLLM: before it loads the model). The addresses were looked at
    only once it answered 200, so one that ignored --host sat on every interface for its whole start (up to
    --ready-timeout), and one that never got ready was never told to be exposed at all."""
    monkeypatch.setattr(binding, "_loopback", lambda address: False)  # its real 127.0.0.1 listener, judged as 0.0.0.0
    listen = ("import socket, sys, time; s = socket.socket(); "
              "s.bind((sys.argv[sys.argv.index('--host') + 1], int(sys.argv[sys.argv.index('--port') + 1]))); "
              "s.listen(8); print('bound, loading', flush=True); time.sleep(600)")
    recipe = Recipe(name="loading", source_path="test", format="sparkdoctor",
                    argv=[sys.executable, "-c", listen, "--host", "0.0.0.0", "--port", "8000"])
    with pytest.raises(LaunchError) as raised:
        with launch(recipe, run_dir=tmp_path, matrix=[], ready_timeout=30, grace=5):
            pytest.fail("a server that never answers is never handed over")
    message = str(raised.value)
    assert "listens on 127.0.0.1 port" in message and "not measured" in message and "not ready" not in message
    assert raised.value.teardown is not None and members(raised.value.teardown.pgid) == []
