"""`fleet check --measure` leaves nothing running on a node: every measurement command runs under the node's own
`timeout -k GRACE SECONDS` (coreutils), so a stuck ib_write_bw server or mpirun is stopped on the node itself when
its time is up, not only the local ssh that started it; a node without `timeout` is said in one line."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
from pathlib import Path

import pytest

from sparkdoctor.fleet import measure
from sparkdoctor.fleet.measure import measure_links
from sparkdoctor.fleet.transport import Node, SshTransport
from tests.fleet.fabric_trees import Spark, pair
from tests.fleet.test_fabric import read
from tests.fleet.test_fabric_measure import (
    DATA,
    LocalTransport,
    _gate,
    _named,
    stand_in,
)


class PathSsh(SshTransport):
    """The real ssh to the test's sshd; the node's login shell runs each command with PATH = `path` (the node's
    tools: stand-ins, and /usr/bin where the node has coreutils)."""

    def __init__(self, config: str, path: str):
        super().__init__(config)
        self.path = path

    def argv(self, node: Node, remote: list[str]) -> list[str]:
        return [*self.prefix(node), f"PATH={shlex.quote(self.path)}; export PATH; {shlex.join(remote)}"]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


SETPGID = "import os, sys; os.setpgid(0, 0); os.execvp(sys.argv[1], sys.argv[1:])"


def _stuck_tools(folder: Path, pids: Path) -> None:
    """ib_write_bw and mpirun that hang (a server no client reaches; ranks that never start), each writing its pid;
    mpirun first starts a child in a process group of its own, as Open MPI starts its ssh children."""
    folder.mkdir(parents=True, exist_ok=True)
    child = f"{shlex.quote(sys.executable)} -c {shlex.quote(SETPGID)} sleep 120 &\necho $! >> '{pids}'\n"
    for name, first in (("ib_write_bw", ""), ("mpirun", child)):
        script = folder / name
        script.write_text(f"#!/bin/sh\n{first}echo $$ >> '{pids}'\nexec sleep 120\n")
        script.chmod(0o755)


def _two_nodes(tmp_path: Path, hosts: tuple[str, str]):
    named = _named(read(tmp_path / "trees", pair()))
    renamed = dict(zip(("spark-1", "spark-2"), hosts, strict=True))  # the ssh hosts of the test's sshd
    return [(renamed[name], facts) for name, facts in named]


@pytest.mark.slow
def test_a_measurement_over_ssh_leaves_no_process_on_the_node_after_its_time(sshd, tmp_path, monkeypatch):
    """ib_write_bw's server and client and mpirun hang on the node: each is gone from the node when measure_links
    returns, stopped there by `timeout`, and so is mpirun's child in a process group of its own, killed with the
    command's session (before: ssh was killed here, and the node's processes kept running, a server holding its port
    for the next run)."""
    monkeypatch.setattr(measure, "IB_TIMEOUT", 2.0)
    monkeypatch.setattr(measure, "ALLREDUCE_TIMEOUT", 2.0)
    monkeypatch.setattr(measure, "GRACE", 1)
    monkeypatch.setattr(measure, "SERVER_HEAD_START", 0.0)
    pids = tmp_path / "pids"
    _stuck_tools(tmp_path / "bin", pids)
    named = _two_nodes(tmp_path, ("fleet-0", "fleet-1"))
    transport = PathSsh(str(sshd.config), f"{tmp_path / 'bin'}:/usr/bin:/bin")
    try:
        measured = measure_links(transport, [Node(n) for n, _ in named], named)
        started = [int(p) for p in pids.read_text().split()]
        assert len(started) == 4, started  # the server, the client, mpirun and its child
        left = [p for p in started if _alive(p)]
        assert left == [], f"processes of the measurement still running on the node: {left}"
    finally:
        for pid in [int(p) for p in pids.read_text().split()] if pids.exists() else []:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert [(m.tool, m.status) for m in measured] == [("ib_write_bw", "failed"), ("all_reduce_perf", "failed")]
    assert measured[0].detail == "ib_write_bw ran past its 2 s limit on fleet-1 and was stopped there (timeout)"
    assert measured[1].detail == "mpirun ran past its 2 s limit on fleet-0 and was stopped there (timeout)"
    assert measured[0].setting.startswith("ib_write_bw ")  # the tool's own command line, as a user runs it


@pytest.mark.slow
def test_a_node_without_timeout_or_setsid_is_named_and_nothing_is_started_there(sshd, tmp_path, monkeypatch):
    """A node whose shell finds no `timeout` (or no `setsid`): one line saying so, naming the node; the tool itself
    never ran."""
    monkeypatch.setattr(measure, "SERVER_HEAD_START", 0.0)
    pids = tmp_path / "pids"
    _stuck_tools(tmp_path / "bin", pids)
    base = tmp_path / "base"  # sh and setsid, no coreutils
    base.mkdir()
    for tool in ("sh", "setsid"):
        (base / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    named = _two_nodes(tmp_path, ("fleet-0", "fleet-1"))
    for path, missing in ((f"{tmp_path / 'bin'}:{base}", "`timeout` (coreutils)"), (str(tmp_path / "bin"), "`setsid` (util-linux)")):
        measured = measure_links(PathSsh(str(sshd.config), path), [Node(n) for n, _ in named], named)
        assert not pids.exists()
        assert [(m.tool, m.status) for m in measured] == [("ib_write_bw", "absent"), ("all_reduce_perf", "absent")]
        assert f"{missing} is not installed on fleet-1" in measured[0].detail, measured[0].detail
        assert f"{missing} is not installed on fleet-0" in measured[1].detail, measured[1].detail


def test_every_measurement_command_runs_under_the_nodes_timeout(tmp_path, monkeypatch):
    """The command lines handed to the transport: `setsid -w sh -c SWEEP sh GRACE SECONDS tool ...` (the tool under
    `timeout -k GRACE SECONDS`, in a session of its own that is swept when it ends), SECONDS the measurement's own
    limit (or what the run's deadline leaves), the local limit longer by the grace and ssh's connect time."""
    monkeypatch.setattr(measure, "SERVER_HEAD_START", 0.0)
    calls: list[tuple[list[str], float]] = []

    class Recording(LocalTransport):
        def command(self, node, argv, timeout):
            calls.append((list(argv), timeout))  # before the stand-in strips the wrapper off what it records
            return super().command(node, argv, timeout)

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    named = _named(read(tmp_path / "trees", pair()))
    measure_links(Recording(bin_dir), [Node(n) for n, _ in named], named)
    wrapper = ["setsid", "-w", "sh", "-c", measure.SWEEP, "sh", str(measure.GRACE)]
    assert [argv[:9] for argv, _ in calls] == [[*wrapper, "30", "ib_write_bw"]] * 2 + [[*wrapper, "180", "mpirun"]]
    assert all(limit > float(argv[7]) + measure.GRACE for argv, limit in calls)


def test_a_local_node_without_timeout_is_said_in_one_line(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    named = _named(read(tmp_path / "trees", pair()))
    measured = measure_links(LocalTransport(bin_dir, coreutils=False), [Node(n) for n, _ in named], named)
    assert [m.status for m in measured] == ["absent", "absent"]
    assert all("`timeout` (coreutils) is not installed on " in m.detail for m in measured), measured


def test_mpirun_naming_a_host_that_does_not_resolve_is_one_line_naming_it_and_blocks(tmp_path, monkeypatch):
    """Three nodes, spark-3 with no address on the fabric: mpirun's -H names it by its ssh name, which node 0 cannot
    resolve. Open MPI 4.1.4's real output (tests/data/fabric/mpirun_unresolved.txt, exit 255) ends in a banner of
    dashes: the measurement said "mpirun exited 255: -----...". Now one line naming the host and the node that could not
    resolve it, and the launch is refused (measure-failed)."""
    monkeypatch.setattr(measure, "SERVER_HEAD_START", 0.0)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in(bin_dir, "ib_write_bw", "ib_write_bw_healthy.txt")
    (bin_dir / "mpirun").write_text(f"#!/bin/sh\n/bin/cat '{DATA / 'mpirun_unresolved.txt'}' >&2\nexit 255\n")
    (bin_dir / "mpirun").chmod(0o755)
    named = _named(read(tmp_path / "trees", [*pair(), Spark("spark-3")]))
    transport = LocalTransport(bin_dir)
    measured = measure_links(transport, [Node(n) for n, _ in named], named)
    [mpirun] = [argv for _, argv in transport.calls if argv[0] == "mpirun"]
    assert mpirun[mpirun.index("-H") + 1].endswith(",spark-3:1")
    [ar] = [m for m in measured if m.tool == "all_reduce_perf"]
    assert ar.status == "failed" and "\n" not in ar.detail
    assert ar.detail.startswith("mpirun on spark-1 cannot start a rank on host spark-3: the name does not resolve on "
                                "spark-1"), ar.detail
    result = _gate(named, measured)
    assert result.exit_code() == 1
    [found] = [f for f in result.fabric if f.rule == "measure-failed"]
    assert found.node == "spark-1" and "host spark-3" in found.detail
