"""A node is user input: one node answering odd JSON shapes is that node's problem (one line, exit 3), never
an internal error that ends the whole `fleet check`.

The nodes are this machine: `ssh` on PATH is a shim that runs the remote command line here (the transport's
own argv, unchanged), and each node's "python" runs the real probes in a bare serving venv, then rewrites one
field of the node probe's answer as a hostile node would.
"""

from __future__ import annotations

import functools
import json
import os
import sys

import pytest

from tests.fleet.nodes import serving_venv
from tests.inproc import invoke

ODD_ANSWERS = {  # node name -> (field of the node probe's answer, what the node says instead)
    "errors-int": ("errors", 5),
    "links-int": ("links", 5),
    "time-huge": ("time", 10**400),
    "gpu-index-list": ("gpus", [{"index": [0], "name": "NVIDIA GB10", "cc": "12.1"}]),
    "boot-id-object": ("node", {"hostname": "spark", "boot_id": {"id": 1}}),
    # nested 900 deep: parsed, then Python's recursion in Facts.to_dict ended the whole fleet check (internal error, exit 2)
    "host-deep": ("host", {"kernel": "6.17.0", "extra": functools.reduce(lambda v, _: [v], range(900), "x")}),
    "fabric-deep": ("fabric", {"netdevs": functools.reduce(lambda v, _: {"a": v}, range(900), {})}),
    # 25,000 variables: as many risky drift rows, drawn one by one (50,000 took 28 s of CPU on the console)
    "env-wide": ("env", {f"NCCL_X{i}": "v" for i in range(25_000)}),
}

TAMPER = """#!{python}
import json, os, subprocess, sys
key, value = json.loads({case!r})
done = subprocess.run([{real!r}, *sys.argv[1:]], stdin=sys.stdin, capture_output=True, text=True)
lines = done.stdout.strip().splitlines()
whole = json.loads(lines[-1])
for part in whole["sparkdoctor_multi"]:
    out = (part.get("stdout") or "").strip().splitlines()
    answer = json.loads(out[-1]) if out and out[-1].startswith("{{") else {{}}
    if answer.get("probe") == "fleet_node":
        answer[key] = value
        part["stdout"] = json.dumps(answer) + "\\n"
sys.stdout.write(json.dumps(whole) + "\\n")
"""


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    root = tmp_path_factory.mktemp("odd-nodes")
    real = serving_venv(root, "serving", "a")
    shim = root / "bin" / "ssh"
    shim.parent.mkdir()
    shim.write_text('#!/bin/sh\nfor last; do :; done\nexec /bin/sh -c "$last"\n')  # `ssh [options] HOST COMMAND`
    shim.chmod(0o755)
    rows = [("fine", real)]
    for name, case in ODD_ANSWERS.items():
        script = root / f"python-{name}"
        script.write_text(TAMPER.format(python=sys.executable, case=json.dumps(case), real=str(real)))
        script.chmod(0o755)
        rows.append((name, script))
    inventory = root / "fleet.toml"
    inventory.write_text("".join(f'[[node]]\nhost = "{host}"\npython = "{python}"\n' for host, python in rows))
    return inventory, shim.parent


def test_each_node_with_an_odd_answer_is_reported_alone_and_the_rest_judged(nodes, monkeypatch):
    inventory, shim_dir = nodes
    monkeypatch.setenv("PATH", f"{shim_dir}:{os.environ['PATH']}")
    code, stdout, error = invoke("fleet", "check", "--inventory", inventory, "--arch", "sm_121a", "--node-timeout", "120",
                                 "--format", "json", cpu_seconds=60)
    assert code == 3, error
    doc = json.loads(stdout)
    by_name = {n["name"]: n for n in doc["nodes"]}
    assert by_name["fine"]["ok"] and by_name["fine"]["findings"] is not None
    for name in ODD_ANSWERS:
        problem = by_name[name]["problem"]
        assert not by_name[name]["ok"] and "wrong shape" in problem and "\n" not in problem, (name, problem)
    assert "'errors'" in by_name["errors-int"]["problem"] and "'time'" in by_name["time-huge"]["problem"]
    assert "gpus[0].index" in by_name["gpu-index-list"]["problem"]
    assert "boot_id" in by_name["boot-id-object"]["problem"]
    assert "'host': nested deeper than 32" in by_name["host-deep"]["problem"]
    assert "'fabric': nested deeper than 32" in by_name["fabric-deep"]["problem"]
    assert "'env': a list or object of 25,000 entries (at most 20,000)" in by_name["env-wide"]["problem"]


def test_a_node_that_hangs_names_the_flag_that_bounds_it(tmp_path):
    """--node-timeout, not check's --timeout (fleet check has none): the message names what the user can raise."""
    from sparkdoctor.fleet.node import collect_node
    from sparkdoctor.fleet.transport import Node, SshTransport

    config = tmp_path / "ssh_config"
    config.write_text("Host slow\n  ProxyCommand sleep 30\n")
    outcome = collect_node(SshTransport(str(config)), Node("slow"), 1.0)
    assert not outcome.ok and "timed out" in str(outcome.problem)
    assert "--node-timeout" in str(outcome.problem) and "--timeout)" not in str(outcome.problem)


NODE_CLOCK = """#!{python}
import subprocess, sys
done = subprocess.run([{real!r}, *sys.argv[1:]], stdin=sys.stdin, capture_output=True, text=True)
line = done.stdout.strip().splitlines()[-1]
sys.stdout.write(line.replace('"time": ', '"time": {value}, "was": ') + "\\n")
"""


@pytest.mark.parametrize("value", ["NaN", "-Infinity", "1e999"])
def test_a_node_clock_that_is_no_number_is_unknown_and_the_json_stays_strict(nodes, tmp_path, monkeypatch, value):
    """The batch's own line carries the node's clock (facts.fleet.clock_skew_s): NaN or Infinity there went into the
    node's facts (instead of the node probe's own
    clock), and `fleet check --format json` printed `"clock_skew_s": NaN`, which strict JSON readers refuse."""
    from sparkdoctor.fleet.node import collect_node
    from sparkdoctor.fleet.transport import Node, SshTransport

    inventory, shim_dir = nodes
    real = next(line.split('"')[1] for line in inventory.read_text().splitlines() if line.startswith("python"))
    python = tmp_path / "python-clock"
    python.write_text(NODE_CLOCK.format(python=sys.executable, real=real, value=value))
    python.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim_dir}:{os.environ['PATH']}")
    outcome = collect_node(SshTransport(), Node("clock", python=str(python)), 120.0, "sm_121a")
    assert outcome.ok, outcome.problem
    assert outcome.facts is not None and outcome.facts.fleet is not None
    skew = outcome.facts.fleet["clock_skew_s"]  # the node probe's own clock then, a number its answer's shape checked
    assert isinstance(skew, float) and abs(skew) < 60, skew
    json.dumps(outcome.facts.to_dict(), allow_nan=False)


def test_a_node_answering_arrays_thousands_deep_is_said_to_print_no_json(nodes, tmp_path, monkeypatch):
    """json.loads raises RecursionError there, which is no ValueError: the node's line was Python's own words
    ("RecursionError: maximum recursion depth exceeded while decoding a JSON array from a unicode string")."""
    from sparkdoctor.fleet.node import collect_node
    from sparkdoctor.fleet.transport import Node, SshTransport

    python = tmp_path / "python-deep"
    python.write_text("#!/bin/sh\ncat >/dev/null\nexec python3 -c 'print(\"[\" * 100000)'\n")
    python.chmod(0o755)
    monkeypatch.setenv("PATH", f"{nodes[1]}:{os.environ['PATH']}")
    outcome = collect_node(SshTransport(), Node("deep", python=str(python)), 60.0, "sm_121a")
    assert not outcome.ok and str(outcome.problem).startswith("printed no JSON: [[["), outcome.problem
    assert "Recursion" not in str(outcome.problem)


def test_a_node_answering_a_number_too_long_to_read_is_said_so_not_to_print_no_json(nodes, tmp_path, monkeypatch):
    """An integer of more than 4,300 digits is JSON, but json.loads raises ValueError on it (int()'s digit limit), not
    JSONDecodeError: the node's line was "printed no JSON: {"x": 99999...", which says nothing of why."""
    from sparkdoctor.fleet.node import collect_node
    from sparkdoctor.fleet.transport import Node, SshTransport

    python = tmp_path / "python-long"
    python.write_text("#!/bin/sh\ncat >/dev/null\nexec python3 -c 'print(\"{\\\"x\\\": \" + \"9\" * 5000 + \"}\")'\n")
    python.chmod(0o755)
    monkeypatch.setenv("PATH", f"{nodes[1]}:{os.environ['PATH']}")
    outcome = collect_node(SshTransport(), Node("long", python=str(python)), 60.0, "sm_121a")
    assert not outcome.ok and outcome.problem == ("printed JSON that has a number too long to read (more digits than "
                                                  "Python reads as an integer)"), outcome.problem


PROBE_FAILS = """#!{python}
import json, subprocess, sys
done = subprocess.run([{real!r}, *sys.argv[1:]], stdin=sys.stdin, capture_output=True, text=True)
whole = json.loads(done.stdout.strip().splitlines()[-1])
for part in whole["sparkdoctor_multi"]:
    if '"fleet_node"' not in part["stdout"]:
        part.update(returncode=1, stdout="", stderr="boom")
sys.stdout.write(json.dumps(whole) + "\\n")
"""


def test_a_probe_that_failed_on_the_node_is_not_said_to_be_ssh(nodes, tmp_path, monkeypatch):
    """ssh ran and the node answered; one probe of the batch exited 1 there. Its line read "ssh exited 1: boom", which
    sends a user to their ssh setup; the node's line now names the probe on the node."""
    from sparkdoctor.fleet.node import collect_node
    from sparkdoctor.fleet.transport import Node, SshTransport

    inventory, shim_dir = nodes
    real = next(line.split('"')[1] for line in inventory.read_text().splitlines() if line.startswith("python"))
    python = tmp_path / "python-fails"
    python.write_text(PROBE_FAILS.format(python=sys.executable, real=real))
    python.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim_dir}:{os.environ['PATH']}")
    outcome = collect_node(SshTransport(), Node("fails", python=str(python)), 120.0, "sm_121a")
    assert outcome.facts is not None and outcome.facts.packages is None
    [target] = [e["error"] for e in outcome.facts.errors if e["collector"] == "target"]
    assert "the probe on the node exited 1: boom" in target and "ssh exited" not in target, target


def test_an_interpreter_that_fails_on_the_node_is_not_said_to_be_ssh(nodes, tmp_path, monkeypatch):
    """The node's interpreter exited 1 before the batch answered: the line read "ssh exited 1: boom", though ssh ran
    and only passed the node's status on (ssh's own failures are 255)."""
    from sparkdoctor.fleet.node import collect_node
    from sparkdoctor.fleet.transport import Node, SshTransport

    _, shim_dir = nodes
    python = tmp_path / "python-broken"
    python.write_text("#!/bin/sh\ncat >/dev/null\necho boom >&2\nexit 1\n")
    python.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim_dir}:{os.environ['PATH']}")
    outcome = collect_node(SshTransport(), Node("broken", python=str(python)), 60.0, "sm_121a")
    assert outcome.problem == "the node's interpreter exited 1: boom", outcome.problem


PART_TAMPER = """#!{python}
import json, subprocess, sys
done = subprocess.run([{real!r}, *sys.argv[1:]], stdin=sys.stdin, capture_output=True, text=True)
whole = json.loads(done.stdout.strip().splitlines()[-1])
for part in whole["sparkdoctor_multi"]:
    answer = json.loads(part["stdout"].strip().splitlines()[-1])
    if {marker!r} in answer:
        answer[{field!r}] = "@@"
        part["stdout"] = json.dumps(answer).replace('"@@"', {value!r}) + "\\n"
sys.stdout.write(json.dumps(whole) + "\\n")
"""
DEEP_OBJECTS = '{"a": ' * 500 + "1" + "}" * 500  # within json's limit, past Python's for a walk that recurses


@pytest.mark.parametrize(("marker", "field", "value", "collector", "said"), [
    # run_collectors wrote the answer into Facts with a recursive walk: RecursionError ended it with the rest of the
    # collectors unmerged; the node was judged on half its facts, or its line was Python's own words
    ("capabilities", "capabilities", DEEP_OBJECTS, "capabilities", "nested too deeply"),
    ("target", "cutedsl", DEEP_OBJECTS, "target", "nested too deeply"),
    # "TypeError: 'int' object is not iterable"
    ("target", "errors", "5", "target", "field 'errors' is no list"),
    ("target", "unlisted", "true", "target", "field 'unlisted' is no list"),
])
def test_a_check_probe_answering_an_odd_shape_on_a_node_is_that_collectors_error(nodes, tmp_path, monkeypatch, marker,
                                                                                  field, value, collector, said):
    from sparkdoctor.fleet.node import collect_node
    from sparkdoctor.fleet.transport import Node, SshTransport

    inventory, shim_dir = nodes
    real = next(line.split('"')[1] for line in inventory.read_text().splitlines() if line.startswith("python"))
    python = tmp_path / "python-odd"
    python.write_text(PART_TAMPER.format(python=sys.executable, real=real, marker=marker, field=field, value=value))
    python.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim_dir}:{os.environ['PATH']}")
    outcome = collect_node(SshTransport(), Node("odd", python=str(python)), 120.0, "sm_121a")
    assert outcome.ok and outcome.facts is not None, outcome.problem
    errors = {e["collector"]: e["error"] for e in outcome.facts.errors}
    assert said in errors.get(collector, "") and "Error" not in errors[collector], errors
    assert outcome.facts.fleet is not None and outcome.facts.fleet.get("hostname")  # the rest was merged and judged


def test_a_node_answering_more_than_is_read_is_said_to_be_cut_not_to_print_no_json(nodes, tmp_path, monkeypatch):
    """Past the bytes read of a command's output (proc's head and tail) the middle is dropped, and the JSON with it:
    the node's line was "printed no JSON: yyyyyyyy...", the answer's tail, which says nothing of why."""
    from sparkdoctor.fleet.node import collect_node
    from sparkdoctor.fleet.transport import Node, SshTransport
    from sparkdoctor.pipes import HEAD_BYTES, TAIL_BYTES

    python = tmp_path / "python-big"
    python.write_text("#!/bin/sh\ncat >/dev/null\n"
                      f"exec python3 -c 'print(\"{{\\\"pad\\\": \\\"\" + \"y\" * {HEAD_BYTES + TAIL_BYTES + (1 << 20)} + \"\\\"}}\")'\n")
    python.chmod(0o755)
    monkeypatch.setenv("PATH", f"{nodes[1]}:{os.environ['PATH']}")
    outcome = collect_node(SshTransport(), Node("big", python=str(python)), 60.0, "sm_121a")
    assert not outcome.ok and "\n" not in str(outcome.problem) and len(str(outcome.problem)) <= 300, outcome.problem
    assert str(outcome.problem).startswith("printed more than is read of it (1,0"), outcome.problem
    assert str(outcome.problem).endswith("bytes in its middle were dropped): no JSON is left to read"), outcome.problem


def _target_error_of_a_node_whose_batch_says(part: str, nodes, tmp_path, monkeypatch) -> str:
    """The target collector's error for a node whose batch records its failing probe with `part.update(PART)`."""
    from sparkdoctor.fleet.node import collect_node
    from sparkdoctor.fleet.transport import Node, SshTransport

    python = tmp_path / "python-says"
    python.write_text(PROBE_FAILS.format(python=sys.executable, real=next(
        line.split('"')[1] for line in nodes[0].read_text().splitlines() if line.startswith("python"))).replace(
        'part.update(returncode=1, stdout="", stderr="boom")', f"part.update({part})"))
    python.chmod(0o755)
    monkeypatch.setenv("PATH", f"{nodes[1]}:{os.environ['PATH']}")
    outcome = collect_node(SshTransport(), Node("says", python=str(python)), 120.0, "sm_121a")
    assert outcome.facts is not None, outcome.problem
    [target] = [e["error"] for e in outcome.facts.errors if e["collector"] == "target"]
    return target


def test_a_start_error_the_batch_reports_for_a_probe_is_one_short_line(nodes, tmp_path, monkeypatch):
    """The batch's record of each probe carries the node's own words for a probe that could not start: a node that says
    300,000 characters over two lines there put all of them, line break and all, in the node's facts and its JSON."""
    target = _target_error_of_a_node_whose_batch_says('returncode=None, start_error="x" * 300000 + "\\nnext"', nodes, tmp_path, monkeypatch)
    assert "could not start: xxx" in target and len(target) < 500 and "\n" not in target, (len(target), target[-80:])


def test_a_status_the_batch_reports_that_is_no_number_is_said_so(nodes, tmp_path, monkeypatch):
    """A probe's status in the batch's record that is no integer (`true`, a string) read `exited True` / `exited None`."""
    target = _target_error_of_a_node_whose_batch_says('returncode=True, stdout="", stderr=""', nodes, tmp_path, monkeypatch)
    assert "a status that is no number: True" in target and "exited" not in target, target
