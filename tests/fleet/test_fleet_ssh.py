"""`fleet check --hosts/--inventory` over a real sshd (tests/fleet/sshd.py): the probes travel over the
connection on stdin, every node from its own serving venv; an unreachable, hanging, garbage-answering or
unverifiable node is one line naming it, and the rest are still judged and compared."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.fleet.nodes import serving_venv
from tests.fleet.test_fabric_measure_bounds import _alive

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def node_venvs(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet-ssh-venvs")
    return [serving_venv(root, "n0", "a"), serving_venv(root, "n1", "a"), serving_venv(root, "n2", "b")]


def fleet(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}  # the test's key only, never an agent's
    return subprocess.run([sys.executable, "-m", "sparkdoctor", "fleet", "check", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def inventory(path, rows) -> str:
    path.write_text("".join(f'[[node]]\nhost = "{host}"\npython = "{python}"\n' for host, python in rows))
    return str(path)


def test_three_nodes_over_ssh_name_the_odd_nccl_build(sshd, node_venvs, tmp_path):
    inv = inventory(tmp_path / "fleet.toml", [(f"fleet-{i}", p) for i, p in enumerate(node_venvs)])
    done = fleet("--inventory", inv, "--ssh-config", str(sshd.config), "--format", "json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["transport"] == "ssh" and [n["ok"] for n in doc["nodes"]] == [True, True, True]
    [nccl] = [d for d in doc["differences"] if (d["area"], d["key"]) == ("nccl", "loaded library")]
    assert nccl["verdict"] == "risky" and nccl["odd"] == ["fleet-2"] and nccl["majority"].startswith("2.28.9+cuda13.0")
    node2 = next(n for n in doc["nodes"] if n["name"] == "fleet-2")
    assert "multinode-nccl-build-drift" in {f["id"] for f in node2["findings"]}
    assert node2["facts"]["target"]["python"] == str(node_venvs[2])
    assert any("are one machine" in note for note in doc["notes"])  # every alias reaches this one sshd


def test_agreeing_nodes_pass_the_gate(sshd, node_venvs):
    done = fleet("--hosts", "fleet-0,fleet-1", "--ssh-config", str(sshd.config), "--remote-python", str(node_venvs[0]))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "GO" in done.stdout and "NO-GO" not in done.stdout


def test_bad_nodes_are_one_line_each_and_the_rest_are_judged(sshd, node_venvs, tmp_path):
    garbage = tmp_path / "garbage-python"
    garbage.write_text("#!/bin/sh\ncat >/dev/null\necho 'this is not JSON'\n")
    garbage.chmod(0o755)
    rows = [("fleet-0", node_venvs[0]), ("fleet-1", node_venvs[1]), ("stranger", node_venvs[0]),
            ("refused", node_venvs[0]), ("hangs", node_venvs[0]), ("fleet-3", garbage)]
    inv = inventory(tmp_path / "bad.toml", rows)
    started = time.monotonic()
    done = fleet("--inventory", inv, "--ssh-config", str(sshd.config), "--node-timeout", "20", "--format", "json")
    took = time.monotonic() - started
    assert done.returncode == 3, done.stderr
    doc = json.loads(done.stdout)
    by_name = {n["name"]: n for n in doc["nodes"]}
    assert by_name["fleet-0"]["ok"] and by_name["fleet-1"]["ok"] and by_name["fleet-0"]["findings"] is not None
    problems = {name: by_name[name]["problem"] for name in ("stranger", "refused", "hangs", "fleet-3")}
    assert "Host key verification failed" in problems["stranger"], problems
    assert "Connection refused" in problems["refused"], problems
    assert "timed out" in problems["hangs"], problems
    assert "no JSON" in problems["fleet-3"] and "this is not JSON" in problems["fleet-3"], problems
    assert all("\n" not in p for p in problems.values())
    assert took < 150, f"the bad nodes were waited on one after another ({took:.0f} s)"
    console = fleet("--inventory", inv, "--ssh-config", str(sshd.config), "--node-timeout", "20")
    assert console.returncode == 3
    assert "✖ hangs  not checked:" in console.stdout and "Traceback" not in console.stdout + console.stderr


def test_no_ssh_option_disables_host_key_checking():
    from sparkdoctor.fleet.transport import Node, SshTransport

    argv = SshTransport("/some/config").argv(Node("spark-1"), ["python3", "-B", "-"])
    joined = " ".join(argv)
    assert "StrictHostKeyChecking" not in joined and "UserKnownHostsFile" not in joined
    assert "BatchMode=yes" in joined and argv[argv.index("-F") + 1] == "/some/config"
    assert argv[argv.index("spark-1") - 1] == "--", "the destination comes after `--`: never read as an option"


def fabric_python(folder, name: str, python, spark) -> str:
    """The node's serving interpreter behind a wrapper that gives it a login environment: the node's NCCL
    settings and SPARKDOCTOR_HOST_ROOT on a fixture Spark tree (tests/fleet/fabric_trees.py)."""
    import shlex

    from tests.fleet.fabric_trees import write

    root = write(folder / f"{name}-tree", spark)
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in {"SPARKDOCTOR_HOST_ROOT": str(root), **spark.env}.items())
    wrapper = folder / f"{name}-python"
    wrapper.write_text(f"#!/bin/sh\n{exports}exec {shlex.quote(str(python))} \"$@\"\n")
    wrapper.chmod(0o755)
    return str(wrapper)


def test_the_fabric_facts_travel_over_ssh_and_gate_the_launch(sshd, node_venvs, tmp_path):
    from tests.fleet.fabric_trees import pair

    for case, overrides, code in (("ok", {}, 0), ("twin", {"spark-2": {"env": {"NCCL_IB_HCA": "rocep1s0f1"}}}, 1)):
        sparks = pair(**overrides)
        (tmp_path / case).mkdir()
        rows = [(f"fleet-{i}", fabric_python(tmp_path / case, f"fleet-{i}", node_venvs[0], s)) for i, s in enumerate(sparks)]
        measure = ["--measure"] if case == "ok" else []
        done = fleet("--inventory", inventory(tmp_path / case / "fleet.toml", rows), "--ssh-config", str(sshd.config),
                     "--format", "json", *measure)
        doc = json.loads(done.stdout)
        failed = [m for m in doc["fabric"]["measured"] if m["status"] == "failed"]
        if failed:  # a tool installed here that fails on the fixture's devices: a measure-failed finding refuses it
            code = 1
            assert {(m["node"], m["link"]) for m in failed} == {(f["node"], f["link"]) for f in doc["fabric"]["findings"]
                                                                if f["rule"] == "measure-failed"}
        assert done.returncode == code, (done.stderr, doc["fabric"], [(n["name"], [f["id"] for f in n.get("findings") or []])
                                                                    for n in doc["nodes"]])
        assert doc["fabric"]["topology"]["kind"] == "pair"
        assert doc["fabric"]["topology"]["links"] == ["fleet-0:enp1s0f1np1 <-> fleet-1:enp1s0f1np1 (192.168.100.0/24)"]
        if measure:  # the tools run on the nodes over ssh; where they are missing (or fail on a fixture's devices) it is
            # reported: an absent tool never stops the gate, a failed one does (above)
            assert [m["tool"] for m in doc["fabric"]["measured"]] == ["ib_write_bw", "all_reduce_perf"]
            assert all(m["status"] in ("absent", "failed") and not m["slow"] for m in doc["fabric"]["measured"])
        node1 = next(n for n in doc["nodes"] if n["name"] == "fleet-1")
        assert node1["facts"]["fleet"]["fabric"]["nccl"]["NCCL_IB_HCA"]["source"] == "environment"
        if case == "twin":
            [finding] = doc["fabric"]["findings"]
            assert finding == {"rule": "hca-twin", "node": "fleet-1", "link": "roceP2p1s0f1 port 1 (enP2p1s0f1np1)",
                               "setting": "NCCL_IB_HCA=rocep1s0f1 (environment)", "detail": finding["detail"]}
            assert "multinode-fabric-hca-one-twin" in {f["id"] for f in node1["findings"]}


def test_each_node_is_judged_on_its_own_memory_and_kernel_log(sshd, node_venvs, tmp_path):
    """Two nodes over ssh, each on its own fixture box (SPARKDOCTOR_HOST_ROOT): the strained one's kernel log shows
    the driver out of memory, the OOM killer and a hung task, and little MemAvailable; the healthy one none of it.
    The host entries fire on the strained node alone, and the launch is refused for it."""
    import shlex
    from pathlib import Path

    roots = Path(__file__).resolve().parents[1] / "data" / "hostroots"
    rows = []
    for name, tree in (("fleet-0", "gb10-healthy"), ("fleet-1", "gb10-strained")):
        wrapper = tmp_path / f"{name}-python"
        wrapper.write_text(f"#!/bin/sh\nexport SPARKDOCTOR_HOST_ROOT={shlex.quote(str(roots / tree))}\n"
                           f"exec {shlex.quote(str(node_venvs[0]))} \"$@\"\n")
        wrapper.chmod(0o755)
        rows.append((name, str(wrapper)))
    done = fleet("--inventory", inventory(tmp_path / "fleet.toml", rows), "--ssh-config", str(sshd.config), "--format", "json")
    doc = json.loads(done.stdout)
    ids = {n["name"]: {f["id"] for f in n.get("findings") or []} for n in doc["nodes"]}
    memory = {"gb10-driver-out-of-unified-memory", "host-oom-killer-fired", "host-hung-tasks", "host-uma-low-available"}
    assert memory <= ids["fleet-1"], ids
    assert not memory & ids["fleet-0"], ids
    strained = next(n for n in doc["nodes"] if n["name"] == "fleet-1")
    assert strained["facts"]["host_health"]["kernel"]["nvrm_no_memory"] == 1
    assert strained["facts"]["host_health"]["kernel_source"] == "/dev/kmsg"
    assert done.returncode == 1, done.stderr  # the driver out of memory is an error: the launch is refused


def test_a_nodes_earlyoom_kills_come_back_over_ssh(sshd, node_venvs, tmp_path):
    """The node's journal of the user-space OOM killers travels in its answer over the real sshd (a `journalctl` first
    on the node's PATH stands for its journal; the node's root is this machine's, so the probe reads it)."""
    import shlex

    from tests.fleet.test_fleet_node_kernel_log import EARLYOOM, OOMD

    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "journalctl").write_text(f"#!/bin/sh\ncase \"$*\" in *SYSLOG_IDENTIFIER=earlyoom*) echo {shlex.quote(EARLYOOM)}; "
                                     f"echo {shlex.quote(OOMD)};; esac\n")
    (bin_ / "journalctl").chmod(0o755)
    wrapper = tmp_path / "fleet-0-python"
    wrapper.write_text(f"#!/bin/sh\nexport PATH={shlex.quote(str(bin_))}:\"$PATH\"\nexec {shlex.quote(str(node_venvs[0]))} \"$@\"\n")
    wrapper.chmod(0o755)
    done = fleet("--inventory", inventory(tmp_path / "fleet.toml", [("fleet-0", str(wrapper))]), "--ssh-config",
                 str(sshd.config), "--format", "json")
    [node] = json.loads(done.stdout)["nodes"]
    assert node["facts"]["host_health"]["oom_daemons"] == {"earlyoom_kills": 1, "oomd_kills": 1}, done.stderr


def test_the_launch_is_judged_on_each_nodes_memory_over_ssh(sshd, node_venvs, tmp_path):
    """`fleet check --recipe` over the real sshd: two nodes, each on its own fixture box (a leftover server and a
    leaked container on fleet-1, nothing on fleet-0). The need is sized here once (TP 2: one rank a node); each
    node's memory and holders travel in its probe's answer; fleet-1 is named with what holds its memory."""
    import shlex

    from tests.audit import builders
    from tests.fleet.test_fleet_memory_fit import LEAKED, healthy, strained
    from tests.memory.conftest import write_recipe

    model = builders.qwen3_8b(tmp_path / "qwen3-8b", None)
    recipe = write_recipe(tmp_path, model, "--max-model-len", "32768", "-tp", "2", "--gpu-memory-utilization", "0.7")
    rows = []
    for name, root in (("fleet-0", healthy(tmp_path)), ("fleet-1", strained(tmp_path))):
        wrapper = tmp_path / f"{name}-python"
        wrapper.write_text(f"#!/bin/sh\nexport SPARKDOCTOR_HOST_ROOT={shlex.quote(str(root))}\n"
                           f"exec {shlex.quote(str(node_venvs[0]))} \"$@\"\n")
        wrapper.chmod(0o755)
        rows.append((name, str(wrapper)))
    done = fleet("--inventory", inventory(tmp_path / "fleet.toml", rows), "--ssh-config", str(sshd.config),
                 "--recipe", str(recipe), "--format", "json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    memory = doc["memory"]
    assert memory["blocking"] == ["fleet-1"] and memory["ranks_per_node"] == 1
    nodes = {n["node"]: n for n in memory["nodes"]}
    assert (nodes["fleet-0"]["outcome"], nodes["fleet-1"]["outcome"]) == ("fits", "fits-with")
    held = [h["what"] for h in nodes["fleet-1"]["holding"]]
    assert held[0].startswith(f"container {LEAKED[:12]}") and held[1].startswith("pid 4242 (vllm)")
    assert memory["proposal"]["gpu_memory_utilization"] == 0.48 and memory["decided_by"] == {"gpu_memory_utilization": "fleet-1"}
    assert memory["proposal_fits"] is True


def test_an_interpreter_hung_on_the_node_is_stopped_there_after_the_nodes_time(sshd, tmp_path):
    """At --node-timeout ssh is killed here, and sshd (no pty) signals nothing: a node's interpreter that hangs before
    it reads a byte (a stalled disk, a wrapper that waits) ran on there after the run ended, one more for every run.
    The node's own `timeout` now stops it (TERM at the node's time, KILL 5 s later)."""
    from sparkdoctor.fleet.node import collect_node
    from sparkdoctor.fleet.transport import Node, SshTransport

    pids = tmp_path / "pids"
    hung = tmp_path / "hung-python"
    hung.write_text(f"#!/bin/sh\necho $$ >> '{pids}'\nexec sleep 120\n")
    hung.chmod(0o755)
    outcome = collect_node(SshTransport(str(sshd.config)), Node("fleet-0", python=str(hung)), 2.0, "sm_121a")
    assert not outcome.ok and "timed out" in str(outcome.problem), outcome.problem
    started = [int(p) for p in pids.read_text().split()]
    assert started
    _stopped_on_the_node(started, "the hung interpreter still runs on the node")


@pytest.fixture
def sshd_without_timeout(tmp_path):
    """A real sshd whose logins' PATH holds `sh` and `sleep` but no coreutils `timeout` (a bare container reached as a
    node, a minimal image): sshd's own SetEnv sets it, as a client cannot."""
    from tests.fleet.sshd import NoSshd, start_sshd

    bare = tmp_path / "bare-bin"
    bare.mkdir()
    for tool in ("sh", "sleep", "cat"):
        (bare / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    try:
        server = start_sshd(tmp_path / "sshd", ["fleet-0"], extra=f"SetEnv PATH={bare}\n")
    except NoSshd as exc:
        pytest.skip(f"no sshd can run here: {exc}")
    try:
        hidden = subprocess.run(["ssh", "-F", str(server.config), "-T", "-o", "BatchMode=yes", "fleet-0",
                                 "command -v timeout || echo no-timeout-here"], capture_output=True, text=True, timeout=60)
        assert hidden.stdout.split()[-1:] == ["no-timeout-here"], hidden  # the node really has none
        yield server
    finally:
        server.stop()


def test_without_timeout_on_the_node_a_hung_interpreter_is_still_stopped_there(sshd_without_timeout, tmp_path):
    """The node's command fell back to a plain exec where the node has no `timeout`: the hung interpreter ran on after
    the run. The fallback is a POSIX sh watchdog now: TERM to the command's process group at the node's time, KILL 5 s
    later."""
    from sparkdoctor.fleet.node import collect_node
    from sparkdoctor.fleet.transport import Node, SshTransport

    pids = tmp_path / "pids"
    hung = tmp_path / "hung-python"
    hung.write_text(f"#!/bin/sh\necho $$ >> '{pids}'\nsleep 120 &\necho $! >> '{pids}'\nexec sleep 121\n")
    hung.chmod(0o755)
    outcome = collect_node(SshTransport(str(sshd_without_timeout.config)), Node("fleet-0", python=str(hung)), 2.0, "sm_121a")
    assert not outcome.ok and "timed out" in str(outcome.problem), outcome.problem
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2  # the interpreter and a child it started
    _stopped_on_the_node(started, "the hung interpreter (or its child) still runs on the node")


def test_without_timeout_on_the_node_a_probe_still_reads_its_script_and_keeps_its_exit_status(sshd_without_timeout, tmp_path):
    from sparkdoctor.fleet.transport import Node, SshTransport

    echo = tmp_path / "echo-python"
    echo.write_text("#!/bin/sh\ncat\nexit 3\n")
    echo.chmod(0o755)
    running = SshTransport(str(sshd_without_timeout.config)).start(Node("fleet-0", python=str(echo)), "the script\n", [], 30)
    result = running.result(30)
    assert (result.returncode, result.stdout) == (3, "the script\n"), result


def _stopped_on_the_node(started: list[int], what: str) -> None:
    """The node stops them at 2 s (+5 s to KILL); 60 s is the bound of "never". Killed here whatever the outcome."""
    try:
        for _ in range(600):
            if not any(_alive(pid) for pid in started):
                break
            time.sleep(0.1)
        assert not [pid for pid in started if _alive(pid)], what
    finally:
        for pid in started:
            if _alive(pid):
                os.kill(pid, 9)
