"""`fleet check --recipe`: one launch (a real-shaped Qwen3-8B checkpoint, headers only, TP 2) sized once here and
judged on each node's memory as its node probe read it, on fixture host roots (tests/data/hostroots plus the
/proc entries of processes and the cgroups of containers, tests/memory/hosts.py): a strained node (a leftover
server holding the GPU, a leaked container) against a healthy one is NO-GO naming it and what holds its memory,
with one proposal that fits on both; a healthy pair is GO; a bad recipe or a missing model is one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkdoctor import matrix
from sparkdoctor.fleet import FleetOptions, FleetResult, judge
from sparkdoctor.fleet.node import NodeOutcome, apply_node
from sparkdoctor.fleet.transport import Node
from sparkdoctor.memory.have import read_have
from sparkdoctor.memory.pernode import (
    judge_fleet,
    node_have,
    size_launch,
    with_settings,
)
from sparkdoctor.memory.verdict import FITS, FITS_WITH, NO_FIT
from sparkdoctor.memory.verdict import judge as judge_one
from sparkdoctor.views.fleet import fleet_dict, render_console
from tests.fleet.test_fleet_compare import fleet_facts
from tests.fleet.test_fleet_hostmem import node_answer
from tests.memory.conftest import write_recipe
from tests.memory.hosts import container, process

DATA = Path(__file__).resolve().parents[1] / "data"
TOTAL_KIB = 125_511_680
LEAKED = "5e1f0c2b9a77" + "2" * 52  # a container whose server crashed: 30 GiB held, no process on the GPU


@pytest.fixture(scope="module")
def qwen3_8b(tmp_path_factory) -> Path:
    from tests.audit import builders

    return builders.qwen3_8b(tmp_path_factory.mktemp("models") / "qwen3-8b", None)


def meminfo(root: Path, available_gib: float, cached_gib: float = 2) -> None:
    kib = {"MemTotal": TOTAL_KIB, "MemFree": int((available_gib - cached_gib) * 2**20), "MemAvailable": int(available_gib * 2**20),
           "Buffers": 0, "Cached": int(cached_gib * 2**20), "SwapTotal": 0, "SwapFree": 0, "Shmem": 0, "Dirty": 0}
    (root / "proc" / "meminfo").write_text("".join(f"{k}: {v} kB\n" for k, v in kib.items()))


def healthy(tmp: Path, name: str = "healthy") -> Path:
    """gb10-healthy: 98 GiB available, nothing on the GPU."""
    root = tmp / name
    shutil.copytree(DATA / "hostroots" / "gb10-healthy", root, symlinks=True)
    meminfo(root, 98)
    return root


def strained(tmp: Path, available_gib: float = 64) -> Path:
    """gb10-healthy with a leftover vLLM (pid 4242, 24 GiB resident) holding the GPU, a container whose server died
    (30 GiB, its one process not on the GPU) and `available_gib` left."""
    root = tmp / f"strained-{available_gib:g}"
    shutil.copytree(DATA / "hostroots" / "gb10-healthy", root, symlinks=True)
    process(root, 4242, "vllm", 24 * 2**20, {"3": "/dev/nvidiactl", "4": "/dev/nvidia0", "5": "/dev/nvidia-uvm"})
    process(root, 8800, "python3", 2 * 2**20, {"1": "/dev/null"}, f"0::/system.slice/docker-{LEAKED}.scope\n")
    container(root, LEAKED, 30 * 2**30, [8800])
    meminfo(root, available_gib)
    return root


def gate(launch, roots: dict[str, Path]) -> FleetResult:
    """The fleet judged as `fleet check --recipe` judges it: each node's answer is the bundled node probe run on its
    root (as ssh runs it), read by fleet/node.py, then compared, judged and sized."""
    named = []
    for name, root in roots.items():
        facts = fleet_facts(name)
        apply_node(facts, node_answer(root), time.time(), None)
        named.append((name, facts))
    reports, drifts, notes, topo, found = judge(named, matrix.load(), FleetOptions())
    return FleetResult("ssh", [NodeOutcome(Node(n), f) for n, f in named], reports, drifts, notes, 1.0, "error", topo,
                       found, [], judge_fleet(launch, named))


def console_text(result: FleetResult) -> str:
    from rich.console import Console

    console = Console(width=400, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    render_console(result, console)
    return console.export_text()


def test_the_node_probe_reads_who_holds_memory_as_this_machine_reads_it(tmp_path):
    root = strained(tmp_path)
    facts = fleet_facts("spark-2")
    apply_node(facts, node_answer(root), time.time(), None)
    have, here = node_have("spark-2", facts), read_have(root, ask_nvml=False)
    assert [(h.pid, h.name, h.rss_bytes, h.devices, h.container) for h in have.holders] == \
           [(h.pid, h.name, h.rss_bytes, h.devices, h.container) for h in here.holders] == \
           [(4242, "vllm", 24 * 2**30, ["/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl"], None)]
    assert have.containers == here.containers and have.containers[0].leftover
    assert (have.available_bytes, have.free_bytes, have.page_cache_bytes, have.usable_bytes) == \
           (here.available_bytes, here.free_bytes, here.page_cache_bytes, here.usable_bytes)


def test_a_strained_node_is_no_go_named_with_what_holds_its_memory_and_one_proposal_fits_both(tmp_path, qwen3_8b):
    recipe = write_recipe(tmp_path, qwen3_8b, "--max-model-len", "32768", "--tensor-parallel-size", "2",
                          "--gpu-memory-utilization", "0.7")
    launch = size_launch(str(recipe), {}, None)
    result = gate(launch, {"spark-1": healthy(tmp_path), "spark-2": strained(tmp_path)})
    fit = result.memory
    assert fit.ranks_per_node == 1 and fit.verdicts["spark-1"].outcome == FITS
    assert fit.verdicts["spark-2"].outcome == FITS_WITH and fit.blocking() == ["spark-2"]
    assert result.exit_code() == 1 and result.verdict() == "no-go"
    # one rank a node: half the weights (the headers' exact bytes / TP 2), half the KV heads (8 // 2)
    assert fit.need.part("weights") == launch.need.part("weights") // 2
    assert fit.need.kv_bytes_per_token == launch.need.kv_bytes_per_token / 2
    # the launch is one setting: spark-2's room (58.5 GiB usable of 119.7) decides it, and it fits on both nodes
    assert fit.proposal["gpu_memory_utilization"] == 0.48 and fit.decided_by == {"gpu_memory_utilization": "spark-2"}
    assert fit.proposal["max_model_len"] == 32768 and fit.proposal_fits is True
    again = with_settings(fit.need, fit.proposal)
    assert {judge_one(again, node_have(n, f)).outcome for n, f in ((o.node.name, o.facts) for o in result.outcomes)} == {FITS}
    held = [h.what for h in fit.verdicts["spark-2"].holding]
    assert held[0].startswith(f"container {LEAKED[:12]} holds memory with no process on the GPU")
    assert held[1].startswith("pid 4242 (vllm) holds /dev/nvidia-uvm")

    doc = json.loads(json.dumps(fleet_dict(result)))
    assert doc["verdict"] == "no-go" and doc["memory"]["blocking"] == ["spark-2"]
    nodes = {n["node"]: n for n in doc["memory"]["nodes"]}
    assert nodes["spark-2"]["outcome"] == "fits-with" and nodes["spark-2"]["severity"] == "warn"
    assert nodes["spark-2"]["have"]["containers"][0]["leftover"] is True
    assert doc["memory"]["proposal"] == fit.proposal and doc["memory"]["tensor_parallel_size"] == 2
    text = " ".join(console_text(result).split())
    assert "▲ spark-2 fits only with other settings" in text and f"held: container {LEAKED[:12]}" in text
    assert "proposal for every node: launch with --gpu-memory-utilization 0.48 --max-model-len 32768" in text
    assert "--gpu-memory-utilization set by spark-2" in text and "the launch as written does not fit on spark-2 (exit 1)" in text


def test_a_node_where_nothing_fits_says_by_how_much_and_no_proposal_is_made(tmp_path, qwen3_8b):
    recipe = write_recipe(tmp_path, qwen3_8b, "--max-model-len", "32768", "--tensor-parallel-size", "2",
                          "--gpu-memory-utilization", "0.7")
    result = gate(size_launch(str(recipe), {}, None), {"spark-1": healthy(tmp_path), "spark-2": strained(tmp_path, 10)})
    verdict = result.memory.verdicts["spark-2"]
    assert verdict.outcome == NO_FIT and verdict.short_bytes > 0 and result.memory.proposal == {}
    assert result.exit_code() == 1 and result.memory.blocking() == ["spark-2"]
    text = " ".join(console_text(result).split())
    assert "✖ spark-2 does not fit" in text and "no setting fits on every node" in text, text


def test_a_healthy_pair_is_go(tmp_path, qwen3_8b):
    recipe = write_recipe(tmp_path, qwen3_8b, "--max-model-len", "32768", "-tp", "2", "--gpu-memory-utilization", "0.7")
    result = gate(size_launch(str(recipe), {}, None), {"spark-1": healthy(tmp_path, "a"), "spark-2": healthy(tmp_path, "b")})
    assert {v.outcome for v in result.memory.verdicts.values()} == {FITS}
    assert result.memory.proposal == {} and result.exit_code() == 0 and result.verdict() == "go"
    assert fleet_dict(result)["memory"]["outcome"] == "fits"


def test_pipeline_parallel_splits_layers_and_the_mla_free_kv_heads_stay_whole_past_tp(tmp_path, qwen3_8b):
    """TP 16 over 8 KV heads: each rank still caches one head (vLLM's max(1, heads // TP)); PP 4 over 36 layers:
    9 layers a stage. 64 ranks over 2 nodes: 32 on each."""
    from sparkdoctor.memory.pernode import per_node

    recipe = write_recipe(tmp_path, qwen3_8b, "--max-model-len", "4096", "-tp", "16", "--pipeline-parallel-size=4")
    launch = size_launch(str(recipe), {}, str(qwen3_8b))
    need, ranks, rules = per_node(launch, 2)
    assert (launch.tensor_parallel, launch.pipeline_parallel, ranks) == (16, 4, 32)
    assert need.kv_bytes_per_token == pytest.approx(launch.need.kv_bytes_per_token * (1 / 8) * (9 / 36) * 32)
    assert need.part("weights") == int(launch.need.part("weights") * 32 / 64)
    assert "1 head(s) a rank" in rules[2]


def cli(*args, root: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPARKDOCTOR_HOST_ROOT": str(root)}
    return subprocess.run([sys.executable, "-m", "sparkdoctor", "fleet", "check", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_the_local_node_through_the_command(tmp_path, qwen3_8b):
    """`--hosts local`: the node probe runs here (on the fixture root), the launch is sized and judged on it."""
    recipe = write_recipe(tmp_path, qwen3_8b, "--max-model-len", "32768", "--gpu-memory-utilization", "0.7")
    done = cli("--hosts", "local", "--recipe", recipe, "--format", "json", root=strained(tmp_path))
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["transport"] == "local" and doc["verdict"] == "no-go"
    [node] = doc["memory"]["nodes"]
    assert node["node"] == "local" and node["outcome"] == "fits-with" and doc["memory"]["decided_by"]["gpu_memory_utilization"] == "local"
    go = cli("--hosts", "local", "--recipe", recipe, "--model", qwen3_8b, "--set", "served_model_name=other", root=healthy(tmp_path))
    assert go.returncode == 0, go.stdout + go.stderr
    assert "● local fits" in " ".join(go.stdout.split())


@pytest.mark.parametrize("case", ["no-recipe", "no-model", "not-vllm", "model-without-recipe", "hub-id-not-cached"])
def test_a_bad_recipe_or_model_is_one_line_before_any_node_is_reached(tmp_path, qwen3_8b, case):
    recipe = {"no-recipe": tmp_path / "nowhere.toml", "no-model": write_recipe(tmp_path, tmp_path / "gone", "-tp", "2"),
              "model-without-recipe": None}.get(case)
    if case == "hub-id-not-cached":  # the line named audit's positional MODEL, which fleet check has not
        recipe = write_recipe(tmp_path, "org/not-cached", "-tp", "2")
    if case == "not-vllm":
        recipe = tmp_path / "llama.toml"
        recipe.write_text(f'schema = 1\nname = "llama"\nmodel = "{qwen3_8b}"\ncommand = ["llama-server", "-m", "x.gguf"]\n')
    args = ["--recipe", recipe] if recipe else ["--model", qwen3_8b]
    # an address no ssh would reach: the line comes before any node is tried
    root = healthy(tmp_path)
    done = cli("--hosts", "spark-unreached.invalid", *args, "--node-timeout", "5", root=root)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and "not checked" not in done.stdout
    assert {"no-recipe": "nowhere.toml", "no-model": "gone", "not-vllm": "does not start vLLM",
            "model-without-recipe": "--recipe FILE", "hub-id-not-cached": "give --model PATH (a local folder)"}[case] in line
    if case != "model-without-recipe":
        as_json = cli("--hosts", "spark-unreached.invalid", *args, "--format", "json", root=root)
        assert as_json.returncode == 2 and json.loads(as_json.stdout)["exit_code"] == 2


@pytest.mark.parametrize("held", [{"holders": [{"pid": "4242"}]}, {"containers": [{"id": "abc"}]}, {"others": 5},
                                  {"holders": [{"pid": 1, "devices": "/dev/nvidia0"}]}])
def test_a_node_answer_with_holders_of_the_wrong_shape_is_refused_by_name(held):
    """A node is user input: its holders are checked before they are read (the node is then reported, not judged)."""
    from sparkdoctor.facts_shapes import ShapeError
    from sparkdoctor.fleet.node import check_answer

    with pytest.raises(ShapeError, match="memory_holders"):
        check_answer({"memory_holders": held})


def test_a_nodes_huge_pages_and_memory_high_are_read_as_this_machines(tmp_path, qwen3_8b):
    """A node's huge pages (set aside: in MemTotal, never available) and the memory cgroup its shell runs in (a slice's
    MemoryHigh: past it the kernel throttles the launch until it stalls) bound a launch there as they bound one here
    (memory/have.py); the node probe sent neither, so the node was judged on its MemAvailable alone."""
    from sparkdoctor.memory.have import cgroup_room

    root = healthy(tmp_path)
    with open(root / "proc" / "meminfo", "a") as fh:
        fh.write("HugePages_Total:    8192\nHugePages_Free:     6144\nHugepagesize:       2048 kB\nHugetlb:        16777216 kB\n")
    for pid in ("self", "999"):  # the probe reads its own; cgroup_room here is asked for a pid
        (root / "proc" / pid).mkdir(parents=True, exist_ok=True)
        (root / "proc" / pid / "cgroup").write_text("0::/user.slice/user-1000.slice/session-3.scope\n")
    slice_ = root / "sys" / "fs" / "cgroup" / "user.slice"
    (slice_ / "user-1000.slice" / "session-3.scope").mkdir(parents=True)
    (slice_ / "memory.max").write_text("max\n")
    (slice_ / "memory.high").write_text(f"{40 * 2**30}\n")
    (slice_ / "memory.current").write_text(f"{12 * 2**30}\n")
    (slice_ / "memory.stat").write_text(f"anon {10 * 2**30}\nfile {2 * 2**30}\nshmem 0\n")
    facts = fleet_facts("spark-1")
    apply_node(facts, node_answer(root), time.time(), None)
    have, here = node_have("spark-1", facts), read_have(root, ask_nvml=False)
    assert (have.hugetlb_bytes, have.hugetlb_free_bytes) == (here.hugetlb_bytes, here.hugetlb_free_bytes) == (16 * 2**30, 12 * 2**30)
    assert (have.limit_bytes, have.limit_used_bytes) == cgroup_room(999, root) == (40 * 2**30, 10 * 2**30)
    recipe = write_recipe(tmp_path, qwen3_8b, "--max-model-len", "32768", "--gpu-memory-utilization", "0.7")
    verdict = judge_fleet(size_launch(str(recipe), {}, None), [("spark-1", facts)]).verdicts["spark-1"]
    assert verdict.outcome == FITS_WITH and verdict.usable_bytes == 40 * 2**30 - 10 * 2**30 - 3 * 2**30 // 2
    assert any(h.what.startswith("huge pages set aside") for h in verdict.holding), verdict.holding
    # a container recipe starts in its runtime's cgroup: the shell's limit does not bind it there (as bench's preflight)
    boxed = tmp_path / "boxed.toml"
    boxed.write_text(recipe.read_text().replace("command = ", 'container = "vllm/vllm-openai:v0.33.0"\ncommand = '))
    assert judge_fleet(size_launch(str(boxed), {}, None), [("spark-1", facts)]).verdicts["spark-1"].outcome == FITS


@pytest.mark.parametrize("room", [{"bytes": "40G"}, {"bytes": 1, "used_bytes": "x"}, {"used_bytes": 1}, [1]])
def test_a_node_answer_with_a_memory_limit_of_the_wrong_shape_is_refused_by_name(room):
    from sparkdoctor.facts_shapes import ShapeError
    from sparkdoctor.fleet.node import check_answer

    with pytest.raises(ShapeError, match="memory_limit"):
        check_answer({"memory_limit": room})
