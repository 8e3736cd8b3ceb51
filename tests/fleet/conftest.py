"""A real Ray cluster of three nodes on this machine, shared by the session's fleet tests (starting one
takes ~20-30 s on 2 cores). Each node serves from its own venv (VIRTUAL_ENV in the raylet's environment,
which its workers inherit: the fleet task picks the serving interpreter the way `check` does), with drift:

  node 0  the baseline: NCCL build "a", cutlass-dsl libs-cu12 + libs-cu13 (cu13 active)
  node 1  another build of the same NCCL version ("b")
  node 2  only the libs-cu12 cutlass-dsl build (cu12 active), and NCCL_IB_GID_INDEX=3 in its environment

Every node, the GCS and the driver listen on 127.0.0.1, and the fixture asserts it: Ray turns a loopback
address into the machine's interface address before it connects (resolve_ip_for_localhost), unless
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, which makes its node address the loopback one; so the session sets that,
and gives every node node_ip_address=127.0.0.1. Ray also writes its "current cluster" file under
$RAY_TMPDIR/ray whatever temp_dir a node is given: the fixture points RAY_TMPDIR at a folder of its own and
creates it, so a fresh machine (no /tmp/ray) starts the cluster like a warm one. The cluster is shut down in
a finalizer, which then checks that none of its raylet and GCS processes is left.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests import keeper as keepers
from tests.container.conftest import docker_daemon, skeleton  # noqa: F401 (the suite's one dockerd, shared)
from tests.fleet.nodes import serving_venv

NODE_DRIFT = (
    dict(nccl_build="a", cutedsl_majors=(12, 13), env={}),
    dict(nccl_build="b", cutedsl_majors=(12, 13), env={}),
    dict(nccl_build="a", cutedsl_majors=(12,), env={"NCCL_IB_GID_INDEX": "3"}),
)


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None for a process gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().split(") ", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else fields


def _session_processes(marker: str, seen: dict[int, str] | None = None) -> dict[int, str]:
    """Every live process of one Ray cluster, as {pid: start time}: those carrying the cluster's temp folder in their
    command line, every process they started (Ray retitles its workers and agents `ray::IDLE`, `ray::DashboardAgent`:
    the folder is no longer in their command line), and those of `seen` still alive (a worker whose raylet is gone
    belongs to init now). A pid is the same process only while its start time is."""
    table: dict[int, list[str]] = {}
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        fields = _stat(int(entry))
        if fields is None:
            continue
        table[int(entry)] = fields
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().decode("utf-8", "replace")
        except OSError:
            continue
        if marker in cmdline or (seen or {}).get(int(entry)) == fields[19]:  # field 22 of stat: the start time
            found[int(entry)] = fields[19]
    grown = True
    while grown:  # their children, and theirs
        grown = False
        for pid, fields in table.items():
            if pid not in found and int(fields[1]) in found:
                found[pid] = fields[19]
                grown = True
    return found


def _stop_all(marker: str, seen: dict[int, str] | None = None) -> None:
    for pid in _session_processes(marker, seen):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def _listening(pids: list[int]) -> list[tuple[int, str]]:
    """(pid, local address) of every TCP socket in LISTEN state that one of `pids` holds."""
    inodes: dict[str, int] = {}
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:["):
                    inodes[link[8:-1]] = pid
        except OSError:
            continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            next(fh)
            for row in fh:
                cols = row.split()
                if cols[3] == "0A" and cols[9] in inodes:  # 0A: TCP_LISTEN
                    found.append((inodes[cols[9]], _address(cols[1].split(":")[0])))
    return found


def _address(hexaddr: str) -> str:
    raw = bytes.fromhex(hexaddr)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))  # /proc/net prints each 32-bit word host-endian
    return str(ipaddress.ip_address(words))


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _assert_loopback_only(pids: list[int]) -> None:
    sockets = _listening(pids)
    assert sockets, "found no listening socket of the test's Ray cluster: the check would pass on nothing"
    wider = [(pid, address) for pid, address in sockets if not _loopback(address)]
    assert not wider, f"the test's Ray cluster listens beyond the loopback range: {wider}"


def _wait_alive_nodes(address: str, count: int, timeout: float, marker: str) -> None:
    import ray

    ray.init(address=address, log_to_driver=False, logging_level="ERROR", configure_logging=False)
    try:
        deadline = time.monotonic() + timeout
        while sum(1 for n in ray.nodes() if n.get("Alive")) < count:
            assert time.monotonic() < deadline, f"fewer than {count} Ray nodes alive after {timeout:.0f} s"
            time.sleep(0.5)
        _assert_loopback_only([*_session_processes(marker), os.getpid()])  # the nodes, their agents, the GCS, this driver
    finally:
        ray.shutdown()


LOOPBACK_KEYS = ("RAY_TMPDIR", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")


@contextlib.contextmanager
def _loopback_ray(root: Path):
    """The environment that keeps a Ray cluster and its drivers on 127.0.0.1 and off the machine's /tmp/ray."""
    saved = {k: os.environ.get(k) for k in LOOPBACK_KEYS}
    (root / "ray").mkdir(parents=True, exist_ok=True)
    os.environ.update(RAY_TMPDIR=str(root), RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    # ray reads the variable once, at import: set the constant too, in case ray was imported already
    from ray._private import ray_constants

    was = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = was
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _docker_hosts(request) -> list[dict[str, str]]:
    """DOCKER_HOST per Ray node, when dockerd can run here: nodes 0 and 1 reach the session's dockerd, node 2 a
    second one (as every real node has its own daemon), so one container name can be two images."""
    try:
        daemon = request.getfixturevalue("docker_daemon")
        other = request.getfixturevalue("second_docker_daemon")
    except pytest.skip.Exception:
        return [{} for _ in NODE_DRIFT]
    return [{"DOCKER_HOST": d.env["DOCKER_HOST"]} for d in (daemon, daemon, other)]


@pytest.fixture(scope="session")
def second_docker_daemon():
    """Another dockerd of the suite's kind (its own socket and roots, stopped and cleaned up at the end)."""
    from tests.container.docker_daemon import session_runtime, start_daemon

    yield from session_runtime("sd-dockerd2-", start_daemon, "a second dockerd cannot run here")


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory, request):
    """(cluster address, [venv python per node, in start order])."""
    pytest.importorskip("ray", reason="ray is a test dependency (pyproject [test]); install '.[test]'")
    root = tmp_path_factory.mktemp("fleet-ray")
    venvs = [serving_venv(root, f"node{i}", d["nccl_build"], d["cutedsl_majors"]) for i, d in enumerate(NODE_DRIFT)]
    docker = _docker_hosts(request)
    envs = [{"VIRTUAL_ENV": str(p.parent.parent), **host, **d["env"]} for p, d, host in zip(venvs, NODE_DRIFT, docker, strict=False)]
    folder = Path(tempfile.mkdtemp(prefix="sdrayenv", dir="/tmp"))
    # the keeper (tests/keeper.py) kills every process of the cluster (each names a temp folder of the cluster in its
    # command line or holds its log files open there) and removes its folders once this process ends, however it ends: a teardown cut short by a second Ctrl-C or by
    # xdist's kill left the folders, and each node's dashboard and runtime-env processes outlived their raylet
    keeper, _ = keepers.start(folder)
    try:
        with _loopback_ray(folder):
            yield from _started_cluster(envs, venvs, keeper)
    finally:
        keepers.finish(keeper, [str(folder)])


def _started_cluster(envs: list[dict[str, str]], venvs: list[Path], keeper: subprocess.Popen[bytes]):
    from ray.cluster_utils import Cluster

    cluster, marker, markers = None, "", []
    for attempt in range(3):  # Ray waits a fixed 30 s for a raylet to register; a loaded box can take longer
        # the cluster's own temp folder, in every one of its command lines; short: Ray's sockets live under it
        marker = tempfile.mkdtemp(prefix="sdray", dir="/tmp")
        markers.append(marker)
        keepers.keep(keeper, marker)
        try:
            cluster = Cluster(initialize_head=True, connect=False, head_node_args={
                "num_cpus": 1, "include_dashboard": False, "env_vars": envs[0], "temp_dir": marker,
                "node_ip_address": "127.0.0.1"})
            break
        except BaseException as exc:  # Ctrl-C while the head starts too: what it started must not outlive the fixture
            _stop_all(marker)
            if "timed out during startup" not in str(exc) or attempt == 2 or not isinstance(exc, Exception):
                raise
    assert cluster is not None
    try:
        for env in envs[1:]:
            try:
                cluster.add_node(num_cpus=1, env_vars=env, node_ip_address="127.0.0.1")
            except Exception as exc:  # Ray waits a fixed 30 s for a raylet to register; a loaded box can take longer
                if "timed out during startup" not in str(exc):
                    raise
        _wait_alive_nodes(cluster.address, len(envs), timeout=180, marker=marker)
        yield cluster.address, venvs
    finally:
        seen = _session_processes(marker)  # with the workers the tests started, while their raylets are their parents
        wider = [(pid, address) for pid, address in _listening(list(seen)) if not _loopback(address)]
        cluster.shutdown()
        deadline = time.monotonic() + 120  # a safety net: Ray stops its processes in seconds, more under load
        while _session_processes(marker, seen) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _session_processes(marker, seen)
        _stop_all(marker, seen)  # a node whose start Ray gave up on is not in the cluster's list: stop it by its pid
        for folder in markers:
            shutil.rmtree(folder, ignore_errors=True)
        assert not left, f"processes of the test's Ray cluster left after shutdown: {left}"
        assert not wider, f"the test's Ray cluster (its workers) listened beyond the loopback range: {wider}"


@pytest.fixture(scope="session")
def ray_fleet(ray_cluster):
    """One fleet check of the cluster (the expensive part), shared by the assertions."""
    from sparkdoctor.fleet import FleetOptions, run

    address, venvs = ray_cluster
    result = run(FleetOptions(ray_address=address, node_timeout=90))
    by_python = {}
    for outcome in result.outcomes:
        if outcome.facts is not None:
            by_python[outcome.facts.target.get("python")] = outcome.node.name
    names = [by_python.get(str(p)) for p in venvs]  # node name per drift row of NODE_DRIFT
    return result, names


@pytest.fixture
def no_ray_env(monkeypatch):
    """No RAY_* variable a user might have set, but the two that keep the test's cluster on 127.0.0.1 and off
    /tmp/ray (_loopback_ray): without them a driver turns 127.0.0.1 into the interface address and never connects."""
    for key in list(os.environ):
        if key.startswith("RAY_") and key not in LOOPBACK_KEYS:
            monkeypatch.delenv(key)


SSH_HOSTS = [f"fleet-{i}" for i in range(8)]


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """A real sshd on 127.0.0.1 for the session; its client config names fleet-0 .. fleet-7 (all reach it),
    `stranger` (its host key unknown), `refused` (a closed port) and `hangs` (a port that never speaks)."""
    from tests.fleet.sshd import NoSshd, start_sshd

    try:
        server = start_sshd(tmp_path_factory.mktemp("fleet-sshd"), SSH_HOSTS)
    except NoSshd as exc:  # as the dockerd fixture: a root CI machine installs it; elsewhere say why
        pytest.skip(f"no sshd can run here: {exc}")
    try:
        yield server
    finally:
        server.stop()
