"""Host health per fleet node: the node probe (probes/fleet_node/fleetnode_hostmem.py) sends /proc/meminfo and PSI
as text and the kernel log's memory lines, and fleet/node.py reads them exactly as `check` reads this machine's,
on the fixture host roots (tests/data/hostroots) and on kernel logs that /dev/kmsg does not give."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.collect.host_health import observe
from sparkdoctor.facts import Facts
from sparkdoctor.fleet.bundle import bundle
from sparkdoctor.fleet.node import apply_node
from tests.fleet.hostmem_probe import load_hostmem

ROOTS = Path(__file__).resolve().parents[1] / "data" / "hostroots"
LOGS = Path(__file__).resolve().parents[1] / "data" / "memory" / "logs"


def node_answer(root: Path) -> dict:
    """The bundled node probe, run as ssh and Ray run it (the script on stdin), on a fixture root."""
    import json

    done = subprocess.run([sys.executable, "-B", "-"], input=bundle("fleet_node"), capture_output=True, text=True,
                          timeout=120, env={**os.environ, "SPARKDOCTOR_HOST_ROOT": str(root)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def applied(raw: dict) -> dict:
    facts = Facts(target={"node": "spark-1"})
    apply_node(facts, raw, 0.0, None)
    return facts.host_health or {}


@pytest.mark.parametrize("tree", ["gb10-strained", "gb10-healthy"])
def test_a_node_reads_memory_pressure_and_the_kernel_log_as_check_does(tree):
    health = applied(node_answer(ROOTS / tree))
    local = observe(ROOTS / tree, live=False)  # what `check` reads on that box
    for key in ("memory", "pressure", "kernel"):
        assert health[key] == local[key], key
    assert health["kernel_source"] == "/dev/kmsg"
    if tree == "gb10-strained":  # the driver out of memory, the box's OOM killer and a hung task, as on that box
        assert health["kernel"]["nvrm_no_memory"] == 1 and health["kernel"]["oom_kills"] == 1
        assert health["kernel"]["hung_tasks"] == 1 and health["memory"]["reclaimable_kib"] > 0


def test_a_node_tells_unified_memory_from_its_pci_bus_as_check_does(tmp_path):
    """A GB10 on the node's PCI bus makes its memory unified; the same box without one (a discrete GPU, a builder) is
    not; a node whose bus cannot be listed is unknown. The node's reading equals `check`'s on the same tree."""
    import shutil

    tree = tmp_path / "node"
    shutil.copytree(ROOTS / "gb10-strained", tree, symlinks=True)
    for change, want in ((None, True), ("sys/bus/pci/devices/000f:01:00.0", False), ("sys/bus", None)):
        if change:
            (shutil.rmtree if (tree / change).is_dir() and not (tree / change).is_symlink() else os.unlink)(tree / change)
        health = applied(node_answer(tree))
        assert health["memory"]["unified"] is want == observe(tree)["memory"]["unified"], change
    from sparkdoctor.facts_shapes import ShapeError
    from sparkdoctor.fleet.node import check_answer

    with pytest.raises(ShapeError, match="pci_ids"):  # a node is user input: ids of another shape are refused by name
        check_answer({"pci_ids": ["10de:2e12", 7]})


def _hostmem():
    return load_hostmem()


def test_the_probe_filters_with_the_words_the_parser_filters_with():
    from sparkdoctor.collect import kernel_log

    assert _hostmem().WORDS == kernel_log._WORDS


def test_without_kmsg_the_current_boot_of_kern_log_is_read_and_without_any_log_the_entries_are_unknown(tmp_path):
    probe = _hostmem()
    root = tmp_path / "node"
    (root / "var" / "log").mkdir(parents=True)
    earlier = "Nov 27 09:00:00 spark-1 kernel: [    0.000000] Linux version 6.11.0-1016-nvidia\n" + \
              "Nov 27 10:00:00 spark-1 kernel: [ 3600.1] Out of memory: Killed process 777 (python3) total-vm:1kB\n"
    now = "Nov 28 08:00:00 spark-1 kernel: [    0.000000] Linux version 6.11.0-1016-nvidia\n" + "".join(
        f"Nov 28 09:00:00 spark-1 kernel: {line}\n" for line in (LOGS / "nvrm-no-memory.dmesg").read_text().splitlines())
    (root / "var" / "log" / "kern.log").write_text(earlier + now)
    log = probe.kernel_log(str(root))
    assert log["source"] == "/var/log/kern.log" and log["refused"][0].startswith("/dev/kmsg: ")
    assert not any("Killed process 777" in line for line in log["lines"])  # the boot before this one
    health = applied({"kernel_log": log})
    assert health["kernel"] == {"nvrm_no_memory": 2, "xids": 0, "oom_kills": 0, "oom_kills_cgroup": 0, "hung_tasks": 0}

    bare = tmp_path / "bare"
    bare.mkdir()
    nothing = probe.kernel_log(str(bare))
    assert nothing["source"] is None and [r.split(":")[0] for r in nothing["refused"]] == ["/dev/kmsg", "/var/log/kern.log"]
    unknown = applied({"kernel_log": nothing})
    assert unknown["kernel"] is None and any("kernel log not readable on the node" in e for e in unknown["errors"])
    assert applied({})["kernel"] is None and applied({})["errors"] == []  # an older probe: nothing said, nothing known


def test_a_live_node_without_root_says_which_logs_refused(tmp_path):
    """On this machine's own root: /dev/kmsg, dmesg, the journal and kern.log are tried in that order, each
    bounded; whichever answers is the source, and every one refused before it is named."""
    log = _hostmem().kernel_log("/")
    order = ["/dev/kmsg", "dmesg", "journalctl -k", "/var/log/kern.log"]
    tried = [r.split(": ")[0] for r in log["refused"]]
    assert tried == order[:len(tried)]
    assert log["source"] is None or log["source"] == order[len(tried)]
