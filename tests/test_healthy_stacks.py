"""No false alarm on a healthy box: every finding today's known-good GB10 stacks get, each with why it is true there.

The boxes are tests/healthy_boxes.py (each stack's own pins on the GB10 baseline, the capabilities its released
files give). EXPECTED lists, per box, every entry that matches and the reason it holds for that box; a finding
not listed fails, and so does a listed one that no longer fires. Goal: no warning or error that is not true for
the box, and infos only where the user can act on them.
"""

from __future__ import annotations

import pytest

from sparkdoctor import matrix
from tests.healthy_boxes import STACKS, healthy_box

MATRIX = matrix.load()

# A recipe as the field runs them on a Spark: utilization within the unified-memory margin (0.7-0.85)
GOOD_FLAGS = ("--gpu-memory-utilization", "0.8")

CG_ESTIMATE = ("vllm-cg-estimate-negative",
               "true: this vLLM's CUDA-graph estimate is not clamped (capability vllm.cg_estimate_clamped False, read from "
               "gpu_model_runner.py), its envs.py turns the estimate on by default, and the recipe sizes the KV cache from it "
               "(no --kv-cache-memory-bytes); the user can act: size the cache with --kv-cache-memory-bytes")
B12X_MOE = ("vllm-b12x-moe-opt-in",
            "true and actionable: an NVFP4 MoE checkpoint on a vLLM that has the flashinfer_b12x MoE backend but keeps it out of "
            "the automatic choice on SM121 (nvfp4.py AVAILABLE_BACKENDS); the user can benchmark --moe-backend flashinfer_b12x")
SGLANG_MULTINODE = ("sglang-multinode-nccl-init-freeze",
                    "true: SGLang across two Sparks (the ConnectX-7 twin is up); the freeze at NCCL init was reported with NCCL "
                    "2.30.7, the version torch 2.14.1 (SGLang 0.5.23's pin) pins, on every SGLang image tried, with no SGLang fix "
                    "cited; the user can act: test NCCL alone over the link first (fleet check --measure) before serving")
MEM_UTIL = ("vllm-gpu-mem-util-above-uma-headroom",
            "true: the recipe leaves --gpu-memory-utilization at vLLM's default (0.9 or more), above the unified-memory margin")

# (stack, model, nodes, flags) -> {entry id: why it is true for this box}
BOXES: list[tuple[str, str | None, int, tuple[str, ...], dict[str, str]]] = [
    ("vllm-0.33.0", None, 1, (), {}),
    ("vllm-0.32.0", None, 1, (), {}),
    ("cutlass-dsl-4.8.1", None, 1, (), {}),
    ("newest-2026-12-01", None, 1, (), {}),
    ("newest-2026-12-01", "qwen3.6-35b-a3b-nvfp4", 1, GOOD_FLAGS, dict([CG_ESTIMATE, B12X_MOE])),
    ("newest-2026-12-01", "gpt-oss-120b", 2, GOOD_FLAGS, dict([CG_ESTIMATE])),
    # vLLM 0.34.0 clamps its CUDA-graph estimate at 0 (vllm/v1/worker/gpu/cudagraph_utils.py): the estimate entry is silent
    ("newest-2026-12-03", None, 1, (), {}),
    ("newest-2026-12-03", "qwen3.6-35b-a3b-nvfp4", 1, GOOD_FLAGS, dict([B12X_MOE])),
    ("newest-2026-12-03", "gpt-oss-120b", 2, GOOD_FLAGS, {}),
    ("vllm-0.33.0", "qwen3.6-35b-a3b-nvfp4", 1, GOOD_FLAGS, dict([CG_ESTIMATE, B12X_MOE])),
    ("vllm-0.33.0", "gpt-oss-120b", 1, GOOD_FLAGS, dict([CG_ESTIMATE])),
    ("vllm-0.32.0", "qwen3.6-35b-a3b-nvfp4", 1, GOOD_FLAGS, dict([CG_ESTIMATE, B12X_MOE])),
    ("vllm-0.32.0", "gpt-oss-120b", 1, GOOD_FLAGS, dict([CG_ESTIMATE])),
    ("vllm-0.33.0", "qwen3.6-35b-a3b-nvfp4", 2, GOOD_FLAGS, dict([CG_ESTIMATE, B12X_MOE])),
    ("vllm-0.33.0", "gpt-oss-120b", 2, GOOD_FLAGS, dict([CG_ESTIMATE])),
    ("vllm-0.32.0", "gpt-oss-120b", 2, GOOD_FLAGS, dict([CG_ESTIMATE])),
    # the same recipe with vLLM's default utilization: the warning is true for it
    ("vllm-0.33.0", "gpt-oss-120b", 1, (), dict([CG_ESTIMATE, MEM_UTIL])),
    # sized by bytes: the estimate no longer sizes the cache, but vLLM's startup check still reads the default 0.9
    ("vllm-0.33.0", "gpt-oss-120b", 1, ("--kv-cache-memory-bytes", "60G"), dict([MEM_UTIL])),
    ("vllm-0.33.0", "gpt-oss-120b", 1, ("--kv-cache-memory-bytes", "60G", *GOOD_FLAGS), {}),
    # SGLang 0.5.23 with its own pins: nothing on one box; vLLM's flag entries say nothing about an SGLang launch
    ("sglang-0.5.23", None, 1, (), {}),
    ("sglang-0.5.23", "qwen3.6-35b-a3b-nvfp4", 1, ("--mem-fraction-static", "0.8"), {}),
    ("sglang-0.5.23", "gpt-oss-120b", 1, (), {}),
    ("sglang-0.5.23", None, 2, (), dict([SGLANG_MULTINODE])),
    ("sglang-0.5.23", "gpt-oss-120b", 2, ("--mem-fraction-static", "0.8"), dict([SGLANG_MULTINODE])),
]


def _name(box: tuple) -> str:
    stack, model, nodes, flags, _ = box
    return f"{stack}-{model or 'no-recipe'}-{nodes}node{'-' + '-'.join(f.lstrip('-') for f in flags) if flags else ''}"


@pytest.mark.parametrize("box", BOXES, ids=[_name(b) for b in BOXES])
def test_healthy_box_gets_only_findings_true_for_it(box):
    stack, model, nodes, flags, expected = box
    results = matrix.evaluate_all(MATRIX, healthy_box(stack, model, nodes, flags))
    undecided = [r.entry.id for r in results if r.outcome == "unknown"]
    assert not undecided, f"entries left undecided on a healthy box: {undecided}"
    found = {r.entry.id: r for r in results if r.outcome == "match"}
    unexplained = {i: [c.evidence for c in r.checks] for i, r in found.items() if i not in expected}
    assert not unexplained, f"findings with no reason they are true for {_name(box)}: {unexplained}"
    assert set(expected) <= set(found), f"listed as true but not found: {set(expected) - set(found)}"
    for entry_id in found:
        entry = MATRIX.get(entry_id)
        assert entry.severity != "error", f"{entry_id}: an error on a healthy box"
        if entry.severity == "info":
            assert "actionable" in expected[entry_id] or "can act" in expected[entry_id], f"{entry_id}: an info the user cannot act on"


def test_every_stack_has_a_box_without_a_recipe():
    assert {b[0] for b in BOXES if b[1] is None} == set(STACKS)


@pytest.mark.parametrize("stack", ["vllm-0.33.0", "vllm-0.32.0"])
def test_removed_env_vars_read_from_the_release_keep_entries_silent(stack):
    """VLLM_NVFP4_GEMM_BACKEND is not in vLLM 0.32.0's or 0.33.0's envs.py: the FlashInfer FP4 GEMM entry, keyed on that
    variable being unset on a release that reads it, stays silent even on an NVFP4 recipe."""
    facts = healthy_box(stack, "qwen3.6-35b-a3b-nvfp4", 1, GOOD_FLAGS)
    assert facts.capabilities["vllm.env.VLLM_NVFP4_GEMM_BACKEND"]["value"] == "unknown"
    assert matrix.evaluate(MATRIX.get("fi-cutlass-fp4-gemm-gb10-error-internal"), facts).outcome == "clear"


def test_default_on_feature_is_judged_by_its_default():
    """VLLM_USE_DEEP_GEMM defaults to "1" in the released envs.py: an entry keyed on it being "1" holds with it unset."""
    facts = healthy_box("vllm-0.33.0")
    assert facts.capabilities["env_default.VLLM_USE_DEEP_GEMM"]["value"] == "1"
    checks = matrix.evaluate(MATRIX.get("vllm-deep-gemm-gb10"), facts).checks
    assert any(c.key == "env" and c.result is True and "defaults it to '1'" in c.evidence for c in checks)


def test_check_says_how_fresh_its_knowledge_is_and_warns_on_a_newer_release(tmp_path):
    """The report carries the matrix's tracked-through versions and date; an installed release newer than them is said."""
    import json
    import subprocess
    import sys

    from sparkdoctor.findings import build_report
    from sparkdoctor.views.console import render_console

    current = build_report(healthy_box("vllm-0.33.0"), MATRIX)
    assert current.knowledge["tracked"]["vllm"] == MATRIX.tracking.tracked["vllm"] and current.knowledge["newer"] == []
    assert current.knowledge["tracked_on"] == MATRIX.tracking.tracked_on is not None
    later = healthy_box("vllm-0.33.0")
    later.packages["vllm"] = {**later.packages["vllm"], "version": "0.99.0"}
    report = build_report(later, MATRIX)
    assert report.knowledge["newer"] == [{"package": "vllm", "installed": "0.99.0", "tracked": MATRIX.tracking.tracked["vllm"]}]
    from rich.console import Console

    console = Console(record=True, width=200)
    render_console(report, console)
    text = console.export_text()
    assert "tracked through" in text and f"vllm {MATRIX.tracking.tracked['vllm']}" in text
    assert "warning: vllm 0.99.0 is newer than the matrix has tracked" in text
    snapshot = tmp_path / "facts.json"
    snapshot.write_text(json.dumps(later.to_dict()))
    out = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--facts", str(snapshot), "--format", "json"],
                         capture_output=True, text=True, timeout=120)
    assert json.loads(out.stdout)["knowledge"]["newer"][0]["installed"] == "0.99.0"
