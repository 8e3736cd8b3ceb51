"""The N-way comparison, the fleet verdicts and the gate's exit code, on realistic GB10 Facts (tests/gb10.py);
the inventory and the command's usage errors; Ray never imported on check's path."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor import matrix
from sparkdoctor.findings import build_report
from sparkdoctor.fleet import FleetResult
from sparkdoctor.fleet.compare import Drift, compare_nodes, settle, unpaired_links
from sparkdoctor.fleet.inventory import InventoryError, load_inventory, parse_hosts
from sparkdoctor.fleet.node import NodeOutcome
from sparkdoctor.fleet.transport import Node
from tests.gb10 import gb10_facts


def fleet_facts(name: str, loaded: str = "aaaa", conf: dict | None = None, free_gib: float = 100.0, **changes):
    facts = gb10_facts(**changes)
    facts.host_health = {**(facts.host_health or {}), "memory": {"total_kib": 128 << 20, "available_kib": int(free_gib * (1 << 20))}}
    facts.fleet = {"node": name, "nccl": {"loaded": {"version": "2.28.9+cuda13.0", "build_id": loaded, "source": "pip"}},
                   "nccl_conf": [{"path": "/etc/nccl.conf", "settings": conf}] if conf else [],
                   "cma": {"total_kib": 65536}, "driver_flavour": "open", "roce_v2_gid_index": {"enp1s0f0np0": 3}}
    return facts


def labels(drifts) -> dict[str, Drift]:
    return {d.label: d for d in drifts}


def test_majority_and_odd_node_over_four_nodes():
    named = [("s1", fleet_facts("s1")), ("s2", fleet_facts("s2", loaded="bbbb")), ("s3", fleet_facts("s3")),
             ("s4", fleet_facts("s4", packages={"vllm": "0.23.0"}))]
    found = labels(compare_nodes(named))
    nccl = found["nccl: loaded library"]
    assert nccl.verdict == "risky" and nccl.odd == ["s2"] and "build aaaa" in nccl.majority
    vllm = found["packages: vllm"]
    assert vllm.verdict == "risky" and vllm.odd == ["s4"] and vllm.majority == "0.22.0" and vllm.values["s4"] == "0.23.0"
    assert "packages: numpy" not in found and not any(d.label.startswith("kernel") for d in found.values())


def test_the_image_digest_of_a_container_node_is_compared_and_the_odd_image_named():
    """What node._container records over ssh and over Ray (container_inspect.image_facts' shape)."""
    from sparkdoctor.targets.container_inspect import image_facts

    def image(config: str) -> dict:
        record = json.dumps([{"Id": config, "Os": "linux", "Architecture": "arm64", "RootFS": {"Layers": ["sha256:" + "1" * 64]}}])
        facts = image_facts(["docker"], config, run=lambda argv, timeout: _answer(argv, record))
        return {"container": {"name": "vllm", "image": "vllm-node:latest", "image_id": config, **facts}}

    one, other = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    named = [("s1", fleet_facts("s1", **image(one))), ("s2", fleet_facts("s2", **image(other))), ("s3", fleet_facts("s3", **image(one)))]
    found = labels(compare_nodes(named))
    fingerprint = found["container: fingerprint"]
    assert fingerprint.verdict == "risky" and fingerprint.odd == ["s2"]
    digest = found["container: config_digest"]
    assert digest.values == {"s1": one, "s2": other, "s3": one} and digest.odd == ["s2"]


def test_an_image_id_a_nodes_cli_answers_is_never_an_option_of_its_inspect():
    """The image id comes from the node's `docker container inspect`: `--format=...` there was passed on as an option."""
    from sparkdoctor.targets.container_inspect import image_facts

    seen = []
    record = json.dumps([{"Id": "sha256:" + "a" * 64, "Os": "linux", "Architecture": "arm64"}])
    image_facts(["docker"], "--format={{json .}}", run=lambda argv, timeout: seen.append(argv) or _answer(argv, record))
    assert seen == [["docker", "image", "inspect", "--", "--format={{json .}}"]]


def _answer(argv, stdout):
    from sparkdoctor import proc

    assert argv[:3] == ["docker", "image", "inspect"]
    return proc.ProcResult(argv, 0, stdout, "", 0.1)


def test_kernel_drift_is_risky_in_a_fleet_and_reported_once():
    named = [("a", fleet_facts("a", host={"kernel": "6.17.0-1032-nvidia"})),
             ("b", fleet_facts("b", host={"kernel": "7.0.0-1019-nvidia"})),
             ("c", fleet_facts("c", host={"kernel": "6.17.0-1032-nvidia"}))]
    found = labels(compare_nodes(named))
    assert found["kernel: release"].verdict == "risky" and found["kernel: release"].odd == ["b"]
    assert "host: kernel" not in found


def test_two_nodes_that_disagree_have_no_majority_and_both_are_named():
    named = [("a", fleet_facts("a", conf={"NCCL_IB_USE_INLINE": "1"})), ("b", fleet_facts("b"))]
    conf = labels(compare_nodes(named))["nccl: config file"]
    assert not conf.has_majority and conf.majority is None and conf.odd == ["a", "b"]
    assert conf.values["b"] == "none" and "NCCL_IB_USE_INLINE=1" in conf.values["a"]


def test_memory_headroom_names_the_tight_node_and_small_spreads_are_not_drift():
    named = [("a", fleet_facts("a", free_gib=110)), ("b", fleet_facts("b", free_gib=95)), ("c", fleet_facts("c", free_gib=108))]
    tight = labels(compare_nodes(named))["memory: headroom"]
    assert tight.verdict == "risky" and tight.odd == ["b"]
    close = [("a", fleet_facts("a", free_gib=110)), ("b", fleet_facts("b", free_gib=105))]
    assert "memory: headroom" not in labels(compare_nodes(close))


def test_unpaired_link_is_a_port_on_a_subnet_nobody_else_has():
    def with_links(name, *links):
        facts = fleet_facts(name)
        facts.host_health["links"] = [{"name": n, "state": "up", "physical": True, "subnet": s} for n, s in links]
        return facts

    named = [("a", with_links("a", ("p0", "10.0.1.0/24"), ("p1", "10.0.3.0/24"))),
             ("b", with_links("b", ("p0", "10.0.2.0/24"), ("p1", "10.0.1.0/24"))),
             ("c", with_links("c", ("p0", "10.0.3.0/24"), ("p1", "10.0.9.0/24")))]  # c's p1 should be on 10.0.2.0/24
    assert unpaired_links(named) == {"b": ["p0"], "c": ["p1"]}


def test_matrix_judges_the_odd_node_only_and_the_gate_exit_codes():
    m = matrix.load()
    named = [("a", fleet_facts("a")), ("b", fleet_facts("b", loaded="bbbb")), ("c", fleet_facts("c"))]
    drifts = compare_nodes(named)
    for name, facts in named:
        facts.fleet.update(nodes=3, drift=[d.label for d in drifts if d.verdict == "risky"],
                           odd=[d.label for d in drifts if d.verdict == "risky" and name in d.odd], unpaired_links=[])
    reports = {name: build_report(facts, m) for name, facts in named}
    assert "multinode-nccl-build-drift" in {f.id for f in reports["b"].findings}
    assert "multinode-nccl-build-drift" not in {f.id for f in reports["a"].findings}
    outcomes = [NodeOutcome(Node(n), f) for n, f in named]
    assert FleetResult("ssh", outcomes, reports, drifts, [], 1.0, "error").exit_code() == 1
    agreeing = [d for d in drifts if d.verdict != "risky"]
    calm = {n: build_report(f, m, ignore={"multinode-nccl-build-drift"}) for n, f in named}
    assert FleetResult("ssh", outcomes, calm, agreeing, [], 1.0, "error").exit_code() == 0
    down = outcomes + [NodeOutcome(Node("d"), None, "ssh exited 255: Connection refused")]
    assert FleetResult("ssh", down, calm, agreeing, [], 1.0, "error").exit_code() == 3


def test_settle_counts_none_as_a_value():
    d = settle(Drift("packages", "ray", "risky", "", {"a": "2.60.0", "b": None, "c": "2.60.0"}))
    assert d.majority == "2.60.0" and d.odd == ["b"]


@pytest.mark.parametrize("text, problem", [
    ("a,,b", "an empty host name"),
    ("-oProxyCommand=x", "not an ssh destination"),
    # an empty user or host printed ssh's usage text as the node's problem; a host part that is an option reached
    # mpirun's host list (--measure) as it was
    ("@spark-1", "not an ssh destination"),
    ("root@", "not an ssh destination"),
    ("root@-oProxyCommand", "not an ssh destination"),
    ("a,a", "named twice"),
    ("root@spark-1:2222", "whole text up as a host name; give the host .* its port in your ssh config"),
    ("spark-1:22", "whole text up as a host name"),
    ("[::1]:22", "whole text up as a host name"),
    ("root@[10.0.0.1]", "whole text up as a host name"),
    ("ssh://root@spark-1:2222", "ssh:// address is not taken here"),
])
def test_hosts_refused_with_one_line(text, problem):
    with pytest.raises(InventoryError, match=problem):
        parse_hosts(text, None, None, "docker")


def test_a_host_with_a_port_is_refused_where_it_is_written_not_left_to_fail_on_every_run():
    """ssh takes no `host:port` (nor `[address]`): such a node used to be sent to ssh and fail each run with "Could not
    resolve hostname spark-1:2222" (exit 3, the gate closed for a typo). A bare IPv6 address is a destination; a
    container name ending in a line break is not a name (`$` matched before it)."""
    assert [n.name for n in parse_hosts("::1,fe80::1%eth0,root@2001:db8::1,spark-1", None, None, "docker")] == [
        "::1", "fe80::1%eth0", "root@2001:db8::1", "spark-1"]
    with pytest.raises(InventoryError, match="not a container name"):
        parse_hosts("spark-1", None, "vllm\n", "docker")


def test_inventory_files(tmp_path):
    toml = tmp_path / "fleet.toml"
    toml.write_text('[defaults]\npython = "/opt/venv/bin/python"\n[[node]]\nhost = "s1"\n[[node]]\nhost = "s2"\ncontainer = "vllm"\n')
    nodes = load_inventory(toml, None, None, "docker")
    assert [(n.name, n.python, n.container) for n in nodes] == [("s1", "/opt/venv/bin/python", None), ("s2", "/opt/venv/bin/python", "vllm")]
    plain = tmp_path / "hosts"
    plain.write_text("# the pair\nspark-1\nspark-2  # the worker\n")
    assert [n.name for n in load_inventory(plain, None, None, "docker")] == ["spark-1", "spark-2"]
    toml.write_text('[[node]]\nhost = "s1"\nport = 22\n')
    with pytest.raises(InventoryError, match=r"node\[0\]\.port: unknown key"):
        load_inventory(toml, None, None, "docker")


def test_an_inventory_that_is_not_a_regular_file_is_refused_without_waiting(tmp_path):
    """A FIFO nobody writes to used to block `fleet check --inventory` forever; a pipe with a writer (a shell's
    <(...)) is still read."""
    fifo = tmp_path / "hosts.fifo"
    os.mkfifo(fifo)
    with pytest.raises(InventoryError, match=r"--inventory .*hosts\.fifo: is a FIFO with no writer"):
        load_inventory(fifo, None, None, "docker")
    read, write = os.pipe()
    os.write(write, b"spark-1\nspark-2\n")
    os.close(write)
    try:
        assert [n.name for n in load_inventory(Path(f"/dev/fd/{read}"), None, None, "docker")] == ["spark-1", "spark-2"]
    finally:
        os.close(read)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "sparkdoctor", "fleet", "check", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, words", [
    ((), "give exactly one of --ray"),
    (("--hosts", "a", "--ray", "auto"), "got --ray and --hosts"),
    (("--hosts", "a", "--format", "xml"), "--format xml"),
    (("--hosts", "a", "--node-timeout", "0"), "--node-timeout"),
    (("--hosts", "a,-x"), "not an ssh destination"),
    (("--hosts", "a", "--ssh-config", "/dev/null"), "--ssh-config /dev/null: not a regular file"),  # was "no such file"
    (("--hosts", "a", "--ssh-config", "/nonexistent/c"), "--ssh-config /nonexistent/c: no such file"),
])
def test_usage_errors_are_one_line_and_exit_2(args, words):
    done = run_cli(*args)
    assert done.returncode == 2 and words in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_check_and_the_fleet_modules_never_import_ray(tmp_path):
    snapshot = tmp_path / "facts.json"
    gb10_facts().save(snapshot)
    code = ("import sys; from sparkdoctor.cli import main; import sparkdoctor.fleet, sparkdoctor.fleet.node, "
            "sparkdoctor.views.fleet, sparkdoctor.commands.fleet\n"
            f"sys.argv = ['sparkdoctor', 'check', '--facts', {str(snapshot)!r}, '--format', 'json', '-o', {str(tmp_path / 'r.json')!r}]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\nprint(json.dumps(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.'))))")
    done = subprocess.run([sys.executable, "-c", "import json\n" + code], capture_output=True, text=True, timeout=120)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [], done.stderr


def test_ray_not_installed_is_a_usage_error_naming_the_extra():
    code = ("import sys; sys.modules['ray'] = None\n"
            "from sparkdoctor.cli import main\n"
            "sys.argv = ['sparkdoctor', 'fleet', 'check', '--ray', 'auto']\n"
            "main()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "sparkdoctor-gb10[fleet]" in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_a_ray_address_nothing_answers_is_one_line_and_exit_3():
    from tests.ports import refused_port

    with refused_port() as port:  # held, never listening: no other test's server can take it meanwhile
        done = run_cli("--ray", f"127.0.0.1:{port}")
    assert done.returncode == 3 and "cannot reach the cluster's GCS" in done.stderr and done.stderr.count("\n") == 1, done.stderr


def _cpu_limited(seconds: int):
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))


def test_a_ray_address_that_takes_tcp_but_is_no_gcs_ends_at_node_timeout():
    """A listener that accepts and says nothing: ray.init used to retry for many minutes past --node-timeout."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        port = listener.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "sparkdoctor", "fleet", "check", "--ray", f"127.0.0.1:{port}",
                               "--node-timeout", "5"], capture_output=True, text=True, timeout=590,  # a kill, no verdict
                              preexec_fn=_cpu_limited(60))
    assert done.returncode == 3, done.stderr
    assert "no Ray cluster answered within 5 s (--node-timeout)" in done.stderr and done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize("address", ["127.0.0.1:-1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:0"])
def test_a_ray_address_whose_port_is_no_port_is_a_usage_error(address):
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "fleet", "check", "--ray", address, "--node-timeout", "5"],
                          capture_output=True, text=True, timeout=590, preexec_fn=_cpu_limited(60))
    assert done.returncode == 2 and "the port must be a number from 1 to 65535" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize("address", ["a" * 300, "\x1b[31mspark:6379", "spark:6379; rm -rf /", "spark\udcff:6379",
                                     "spark:６３７９", "spark-1"])
def test_a_ray_address_that_is_no_address_is_one_line_before_ray_is_imported(address, monkeypatch):
    from sparkdoctor.fleet import FleetError, FleetOptions, _connect

    monkeypatch.setitem(sys.modules, "ray", None)  # refused before Ray is asked: no import, no ray.init
    with pytest.raises(FleetError, match="not a Ray address") as info:
        _connect(FleetOptions(ray_address=address))
    assert info.value.exit_code == 2 and "\n" not in str(info.value) and "\x1b" not in str(info.value)


def test_the_console_lists_at_most_max_shown_differences_and_says_how_many_more():
    """Every risky difference was drawn, one rich line each: a node with 50,000 odd env variables took 28 s of CPU
    to draw. The console stops at MAX_SHOWN and counts the rest; the JSON keeps them all."""
    from rich.console import Console

    from sparkdoctor.views.fleet import MAX_SHOWN, fleet_dict, render_console

    named = [("a", gb10_facts()), ("b", gb10_facts())]
    reports = {n: build_report(f, matrix.load()) for n, f in named}
    drifts = [settle(Drift("env", f"NCCL_X{i}", "risky", "must match", {"a": None, "b": "v"}))
              for i in range(MAX_SHOWN + 50)]
    outcomes = [NodeOutcome(Node(n), f) for n, f in named]
    result = FleetResult("ssh", outcomes, reports, drifts, [], 1.0, "error")
    console = Console(width=200, record=True, file=io.StringIO())
    render_console(result, console)
    text = console.export_text()
    assert text.count("risky   env") == MAX_SHOWN
    assert f"... and 50 more difference(s) ({MAX_SHOWN + 50:,} risky in all): --format json lists every one" in text
    assert len(fleet_dict(result)["differences"]) == MAX_SHOWN + 50


def test_a_node_whose_target_probe_failed_is_not_a_risky_difference_of_absent_values():
    """Its Facts.target holds only how it was reached (fleet/target.py's describe()): compared as it was, every key the
    target probe would have read was "(absent)" on that node, risky rows naming it beside its real line (its serving
    stack could not be probed, exit 3), wherever it stood in the inventory."""
    for order in (("a", "b", "c"), ("c", "a", "b")):
        named = [(n, gb10_facts()) for n in order]
        for name, facts in named:
            facts.target = {**(facts.target or {}), "kind": "ssh", "chosen_by": "fleet", "node": name}
        [unprobed] = [f for n, f in named if n == "c"]
        unprobed.packages, unprobed.target = None, {"kind": "ssh", "python": "x", "chosen_by": "fleet", "node": "c"}
        drifts = compare_nodes(named)
        assert not [d for d in drifts if d.area == "target" and "c" in d.values], [d.to_dict() for d in drifts]
        assert not [d for d in drifts if d.verdict == "risky"], [d.to_dict() for d in drifts]
        [node] = [d for d in drifts if d.key == "node"]  # the probed ones are still compared
        assert set(node.values) == {"a", "b"}


def test_a_ray_node_at_the_unspecified_address_is_said_so():
    """`ray start --head --node-ip-address=0.0.0.0`: its GCS and raylet listened on every interface, the node was named
    0.0.0.0, and fleet check said nothing of it (GO on one node)."""
    from sparkdoctor.fleet import unspecified_addresses
    from sparkdoctor.fleet.transport import Node

    nodes = [Node("10.0.0.1", ray_node_id="a"), Node("0.0.0.0", ray_node_id="b"), Node("::#0123abcd", ray_node_id="c"),
             Node("127.0.0.1", ray_node_id="d")]
    notes = unspecified_addresses(nodes)
    assert [n.split(" has")[0] for n in notes] == ["Ray node 0.0.0.0", "Ray node ::#0123abcd"]
    assert "listens on every interface" in notes[0] and "--node-ip-address" in notes[0]
