"""The matrix engine on its own: tiny matrix files in tmp_path, the GB10 Facts builder for inputs.

Each condition is checked three ways (true, false, unknown because its fact was not observed),
loading errors must name the file, the entry and the field, and version specifiers must treat
local builds (+cu130) and pre-releases the way pip does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sparkdoctor import matrix
from tests.container.host_fixtures import hh
from tests.gb10 import gb10_facts, pin, ptxas

REF = "https://github.com/NVIDIA/cutlass/issues/3227"


def entry_toml(entry_id: str, when: str, *, severity: str = "error", refs: str = f'["{REF}"]', extra: str = "") -> str:
    return textwrap.dedent(
        f"""
        [[entry]]
        id = "{entry_id}"
        title = "t"
        severity = "{severity}"
        action = "fix"
        summary = "s"
        remedy = "r"
        refs = {refs}
        """
    ) + when.strip() + "\n" + extra


def write(folder: Path, name: str, body: str, component: str = "test") -> Path:
    path = folder / name
    path.write_text(f'component = "{component}"\n' + body, encoding="utf-8")
    return path


def one_entry(tmp_path: Path, when: str, extra: str = "") -> matrix.Entry:
    write(tmp_path, "t.toml", entry_toml("probe-entry", when, extra=extra))
    return matrix.load(tmp_path).entries[0]


def outcome(entry: matrix.Entry, **changes) -> str:
    return matrix.evaluate(entry, gb10_facts(**changes)).outcome


# ---- each condition: true / false / unknown -----------------------------------------------------
# condition -> (when line, changes that make it true, ... false, ... unknown)
CONDITION_CASES = {
    # an unread arch is never unknown: it is the GB10's, assumed (sparkdoctor.arch), so None here
    "gpu_arch": ('when.gpu_arch = ["sm_121a"]', {}, {"arch": "sm_100a"}, None),
    "packages": ('when.packages = { "vllm" = ">=0.22,<0.23" }', {}, {"packages": {"vllm": "0.20.2"}}, {"packages": None}),
    "not_installed": (
        'when.not_installed = "nvidia-cutlass-dsl-libs-cu13"',
        {"packages": {"nvidia-cutlass-dsl-libs-cu13": None}},
        {},
        {"packages": None},
    ),
    "mixed_versions": (  # `pip install nvidia-cutlass-dsl==4.5.0` over 4.8.1 leaves libs-core and libs-cu12 behind
        'when.mixed_versions = ["nvidia-cutlass-dsl"]',
        {"packages": {"nvidia-cutlass-dsl": "4.5.0", "nvidia-cutlass-dsl-libs-base": "4.5.0", "nvidia-cutlass-dsl-libs-core": "4.8.1"}},
        {},  # the baseline's family is at one version (4.5.2)
        {"packages": None},
    ),
    "driver": ('when.driver = ">=580,<590"', {}, {"driver": {"version": "590.48.01", "cuda": "13.1"}}, {"driver": None}),
    "cuda_driver": ('when.cuda_driver = ">=13.0"', {}, {"driver": {"cuda": "12.8"}}, {"driver": None}),
    "torch_cuda": ('when.torch_cuda = ">=13.0"', {}, {"torch_cuda": "12.8"}, {"packages": None}),
    "cutedsl_build": ('when.cutedsl_build = "libs-cu13"', {}, {"cutedsl_build": "libs-base"}, {"cutedsl": None}),
    # FlashInfer's kernel wheels (`vllm download-kernels`): judged for the arch; no package list is unknown
    "flashinfer_kernels": (
        'when.flashinfer_kernels = ["missing", "no-arch"]',
        {"flashinfer_kernels": {"flashinfer": "0.7.0.post1", "torch_cuda": "13.0", "jit_cache_wanted": True,
                                "cubin": {"version": "0.7.0.post1", "matches": True},
                                "jit_cache": {"version": "0.7.0.post1+cu130", "matches": True, "requires": ["sm100a"]},
                                "providers": [{"arch": "sm100a", "version": "0.7.0.post1+cu130", "matches": True}]}},
        {"flashinfer_kernels": {"flashinfer": "0.7.0.post1", "torch_cuda": "13.0", "jit_cache_wanted": True,
                                "cubin": {"version": "0.7.0.post1", "matches": True},
                                "jit_cache": {"version": "0.7.0.post1+cu130", "matches": True, "requires": ["sm120f"]},
                                "providers": [{"arch": "sm120f", "version": "0.7.0.post1+cu130", "matches": True}]}},
        {"flashinfer_kernels": None, "packages": None},
    ),
    "env": ('when.env = { CUTE_DSL_ARCH = "sm_121a" }', {}, {"env": {"CUTE_DSL_ARCH": "sm_120a"}}, {"env": None}),
    "env_matches": (
        'when.env_matches = { TORCH_CUDA_ARCH_LIST = "12\\\\.1a" }',
        {},
        {"env": {"TORCH_CUDA_ARCH_LIST": "12.0"}},
        {"env": None},
    ),
    "modified": (
        'when.modified = { "vllm" = ["vllm/envs.py"] }',
        {"modified": {"vllm": ["vllm/envs.py"]}},
        {},
        {"packages": {"vllm": {"name": "vllm", "version": "0.22.0", "integrity": "unchecked"}}},
    ),
    "ptxas": (
        'when.ptxas = { used_by = "triton", sm_121a = false }',
        {"toolkits": [ptxas("13.0.88", "system"), ptxas("12.8.93", "triton", used_by=["triton"])]},
        {},
        {"toolkits": None},
    ),
    "constraints": (
        'when.constraints = { "nvidia-cutlass-dsl" = "<4.5" }',
        {"constraints": [pin("nvidia-cutlass-dsl==4.4.2")]},
        {"constraints": [pin("nvidia-cutlass-dsl==4.5.2")]},
        {"constraints": None},
    ),
    "kernels": (
        'when.kernels = { "cutedsl-nvfp4-mma" = "fail" }',
        {"kernels": {"cutedsl-nvfp4-mma": {"status": "fail", "detail": "ptxas error"}}},
        {},
        {"kernels": {"cutedsl-nvfp4-mma": None}},
    ),
    "capabilities": (
        'when.capabilities = { "vllm.b12x_linear_auto" = false }',
        {},
        {"capabilities": {"vllm.b12x_linear_auto": True}},
        {"capabilities": {"vllm.b12x_linear_auto": None}},
    ),
    "host_machine": ('when.host_machine = "aarch64"', {}, {"host": {"machine": "x86_64"}}, {"host": None}),
    "host_health": ('when.host_health = { "pressure.some_avg10" = ">=10" }', hh("gb10-strained"), {}, {"host_health": None}),
    # multi-node signals of `fleet check`: one box (no Facts.fleet) is False, never unknown; a node count it could not read is
    # a recipe's values: only `recipe check` fills Facts.recipe; without one the condition cannot be judged
    "serving": (
        'when.serving = { "--gpu-memory-utilization" = ">0.85" }',
        {"recipe": {"argv": ["vllm", "serve", "m", "--gpu-memory-utilization", "0.95"]}},
        {"recipe": {"argv": ["vllm", "serve", "m", "--gpu-memory-utilization=0.8"]}},
        {"recipe": None},
    ),
    # a fleet's signals: only `fleet check` fills Facts.fleet; on one box (None) the condition is false, not unknown
    "fleet": (
        "when.fleet = { multi_node = true, cma_zero = true }",
        {"fleet": {"node": "s2", "nodes": 2, "cma": {"total_kib": 0}}},
        {"fleet": {"node": "s2", "nodes": 2, "cma": {"total_kib": 65536}}},
        {"fleet": {"node": "s2", "nodes": 2, "cma": None}},
    ),
}


def test_every_condition_has_a_case():
    assert set(CONDITION_CASES) == set(matrix.CONDITIONS)


@pytest.mark.parametrize("condition", sorted(CONDITION_CASES))
def test_condition_is_true_false_and_unknown(tmp_path, condition):
    when, true_changes, false_changes, unknown_changes = CONDITION_CASES[condition]
    entry = one_entry(tmp_path, when)
    assert outcome(entry, **true_changes) == "match"
    assert outcome(entry, **false_changes) == "clear"
    if unknown_changes is None:
        return
    result = matrix.evaluate(entry, gb10_facts(**unknown_changes))
    assert result.outcome == "unknown", [c.evidence for c in result.checks]
    assert result.unknowns, "an unknown outcome must say what could not be observed"


def test_missing_and_absent_facts_are_not_the_same(tmp_path):
    arch = one_entry(tmp_path, 'when.gpu_arch = ["sm_121a"]')
    # no GPU and no --arch: a GB10 tool evaluates the GB10 it is built for, and says it assumed so
    assert outcome(arch, arch={"value": None, "source": "none"}) == "match"
    assert outcome(arch, arch={"value": "sm_90a", "source": "detected"}) == "clear"
    driver = one_entry(tmp_path, 'when.driver = ">=580"')
    assert outcome(driver, driver={"version": None, "cuda": None}) == "clear"  # looked: no NVIDIA driver
    torch = one_entry(tmp_path, 'when.torch_cuda = ">=12.8"')
    assert outcome(torch, torch_cuda=None) == "clear"  # a CPU build has no CUDA
    cpu = one_entry(tmp_path, 'when.torch_cuda = "none"')
    assert outcome(cpu, torch_cuda=None) == "match"
    assert outcome(cpu) == "clear"  # the baseline's torch is a cu130 build
    build = one_entry(tmp_path, 'when.cutedsl_build = "libs-cu13"')
    assert outcome(build, cutedsl={"active_build": "unknown", "evidence": "no RECORD matched"}) == "unknown"
    caps = one_entry(tmp_path, 'when.capabilities = { "vllm.env.VLLM_NVFP4_GEMM_BACKEND" = "unknown" }')
    assert outcome(caps) == "unknown"  # never read: the variable is not set in the baseline


@pytest.mark.parametrize("argv, engine", [
    (["python3", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "2"], "SGLang"),
    (["/opt/venv/bin/sglang", "serve", "--model-path", "m"], "SGLang"),
    (["trtllm-serve", "m", "--tp_size", "2"], "TensorRT-LLM"),
    (["vllm", "serve", "/models/sglang", "--gpu-memory-utilization", "0.95"], None),  # a model named so is still vLLM
    # eugr/spark-vllm-docker recipes/flux2-dev-torchao-nvfp4.yaml (074472cf): a diffusers server started by uvicorn
    (["uvicorn", "server:app", "--host", "0.0.0.0", "--port", "8000"], "uvicorn"),
    (["python3", "-m", "llama_cpp.server", "--model", "m.gguf"], "llama_cpp.server"),
    (["/usr/local/bin/llama-server", "-m", "m.gguf", "--port", "8000"], "llama-server"),
    (["numactl", "--interleave=all", "vllm", "serve", "m"], None),  # a launcher's flag before vLLM's own command
    (["export", "PATH=/x;", "exec", "/usr/local/bin/vllm", "serve", "m"], None),
    (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], None),
])
def test_serving_judges_vllm_flags_only_on_a_vllm_launch(tmp_path, argv, engine):
    """An SGLang recipe leaves --gpu-memory-utilization unset, which vLLM would default to 0.9: that default says nothing
    about SGLang (found on the SGLang 0.5.23 healthy box, tests/test_healthy_stacks.py)."""
    entry = one_entry(tmp_path, 'when.serving = { "--gpu-memory-utilization" = { test = ">0.85", unset = 0.9 } }')
    result = matrix.evaluate(entry, gb10_facts(recipe={"argv": argv}))
    if engine is None:
        assert result.outcome == "match"
    else:
        assert result.outcome == "clear" and f"the recipe runs {engine}, not `vllm serve`" in result.checks[-1].evidence


def test_env_rules_set_unset_and_one_of(tmp_path):
    set_rule = one_entry(tmp_path, "when.env = { TRITON_OVERRIDE_ARCH = true }")
    assert outcome(set_rule, env={"TRITON_OVERRIDE_ARCH": "sm120"}) == "match"
    assert outcome(set_rule) == "clear"
    unset_rule = one_entry(tmp_path, "when.env = { CUTE_DSL_ARCH = false }")
    assert outcome(unset_rule, env={"CUTE_DSL_ARCH": None}) == "match"
    assert outcome(unset_rule) == "clear"
    one_of = one_entry(tmp_path, 'when.env = { VLLM_NVFP4_GEMM_BACKEND = ["marlin", "cutlass"] }')
    assert outcome(one_of, env={"VLLM_NVFP4_GEMM_BACKEND": "cutlass"}) == "match"
    assert outcome(one_of, env={"VLLM_NVFP4_GEMM_BACKEND": "flashinfer-b12x"}) == "clear"


def test_env_value_rules_read_the_installed_releases_default(tmp_path):
    """A value rule on an unset variable is judged at the default the installed release uses (the
    capability probe reads it from vllm/envs.py), never at a default copied into the entry."""
    rule = one_entry(tmp_path, 'when.env = { VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS = "1" }')
    on, off = "env_default.VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", {"value": "0", "evidence": "vllm/envs.py:1655: default '0'"}
    hit = matrix.evaluate(rule, gb10_facts())  # vLLM 0.22.0: default "1"
    assert hit.outcome == "match"
    assert "is not set: the installed release defaults it to '1' (vllm/envs.py:1954" in hit.evidence[0]
    assert outcome(rule, capabilities={on: off}) == "clear"  # a release whose default is "0" (0.19.x)
    assert outcome(rule, env={"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0"}) == "clear"  # set wins over the default
    assert outcome(rule, capabilities={on: off}, env={"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "1"}) == "match"
    assert outcome(rule, capabilities={on: None}) == "clear"  # nothing installed reads it: unset is unset
    assert outcome(rule, capabilities={on: {"value": None, "evidence": "not a literal"}}) == "unknown"
    no_default = one_entry(tmp_path, 'when.env = { VLLM_MARLIN_INPUT_DTYPE = "fp8" }')
    assert outcome(no_default) == "clear"  # default False: unset stays unset
    # set / unset rules stay literal: "true" means the variable is really set
    literal = one_entry(tmp_path, "when.env = { VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS = true }")
    assert outcome(literal) == "clear"


def test_modified_globs_and_star(tmp_path):
    glob = one_entry(tmp_path, 'when.modified = { "nvidia-cutlass-dsl-libs-cu13" = ["*/cute/nvgpu/warp/mma.py"] }')
    edited = {"nvidia-cutlass-dsl-libs-cu13": ["nvidia_cutlass_dsl/python_packages/cutlass/cute/nvgpu/warp/mma.py"]}
    assert outcome(glob, modified=edited) == "match"
    assert outcome(glob, modified={"nvidia-cutlass-dsl-libs-cu13": ["nvidia_cutlass_dsl/python_packages/cutlass/cute/arch.py"]}) == "clear"
    star = one_entry(tmp_path, 'when.modified = { "vllm" = "*" }')
    assert outcome(star, modified={"vllm": ["vllm/envs.py"]}) == "match"
    assert outcome(star, packages={"vllm": None}) == "clear"


def test_conditions_combine_false_wins_over_unknown(tmp_path):
    entry = one_entry(tmp_path, 'when.driver = ">=580"\nwhen.packages = { "vllm" = "<0.19" }')
    # vllm 0.22.0 rules the entry out even though the driver is unknown
    assert outcome(entry, driver=None) == "clear"
    assert outcome(entry, driver=None, packages={"vllm": "0.18.0"}) == "unknown"
    assert outcome(entry, packages={"vllm": "0.18.0"}) == "match"


# ---- versions ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "installed", "expected"),
    [
        ("==2.13.0", "2.13.0+cu130", "match"),  # a local build is the release it was built from
        (">=2.13", "2.13.0+cu130", "match"),
        ("==2.13.0+cu130", "2.13.0+cpu", "clear"),
        (">=0.22.1rc1,<0.23", "0.22.1rc1", "match"),  # pre-releases are compared, not skipped
        (">=0.22.1rc1,<0.23", "0.22.1rc1.dev292+g1234abc", "clear"),  # dev builds come before the rc
        (">=0.22.1rc1,<0.23", "0.23.0", "clear"),
        ("<0.23", "0.23.0rc1", "clear"),  # a pre-release of the bound is not below it
        (">=0.6.11,<0.6.12", "0.6.11.post2", "match"),
        ("==0.6.11", "0.6.11.post2", "clear"),
        ("*", "0.0.1", "match"),
    ],
)
def test_package_specifiers(tmp_path, spec, installed, expected):
    entry = one_entry(tmp_path, f'when.packages = {{ "vllm" = "{spec}" }}')
    assert outcome(entry, packages={"vllm": installed}) == expected


def test_unparsable_installed_version_is_unknown(tmp_path):
    entry = one_entry(tmp_path, 'when.packages = { "vllm" = ">=0.22" }')
    assert outcome(entry, packages={"vllm": "main-3b30e6150"}) == "unknown"


def test_constraint_pins_compare_by_pinned_version(tmp_path):
    entry = one_entry(tmp_path, 'when.constraints = { "nvidia-cutlass-dsl" = "<4.5.0" }')
    assert outcome(entry, constraints=[pin("nvidia_cutlass_dsl==4.4.2", file="/etc/c.txt")]) == "match"  # names normalised
    assert outcome(entry, constraints=[pin("nvidia-cutlass-dsl>=4.4")]) == "clear"  # a range is not a pin
    assert outcome(entry, constraints=[]) == "clear"
    any_pin = one_entry(tmp_path, 'when.constraints = { "nvidia-cutlass-dsl" = "*" }')
    assert outcome(any_pin, constraints=[pin("nvidia-cutlass-dsl>=4.4")]) == "match"


# ---- withdrawn entries ---------------------------------------------------------------------------
def test_withdrawn_entry_is_never_a_finding(tmp_path):
    entry = one_entry(tmp_path, 'when.gpu_arch = ["sm_121a"]', extra='withdrawn = "duplicate of cutedsl-wheel-collision"\n')
    result = matrix.evaluate(entry, gb10_facts())
    assert result.outcome == "withdrawn" and not result.checks


# ---- loading errors name the file, the entry and the field ---------------------------------------
def load_error(folder: Path) -> str:
    with pytest.raises(matrix.MatrixError) as info:
        matrix.load(folder)
    return str(info.value)


@pytest.mark.parametrize(
    ("body", "field_words"),
    [
        (entry_toml("bad-severity", 'when.gpu_arch = ["sm_121a"]', severity="fatal"), ["severity", "fatal"]),
        (entry_toml("bad-condition", 'when.gpu_archs = ["sm_121a"]'), ["when.gpu_archs", "not a known condition"]),
        (entry_toml("bad-spec", 'when.packages = { "vllm" = "=>0.22" }'), ["when.packages", "vllm", "specifier"]),
        (entry_toml("bad-regex", 'when.env_matches = { CUTE_DSL_ARCH = "sm_(121" }'), ["when.env_matches", "CUTE_DSL_ARCH"]),
        (entry_toml("no-refs", 'when.gpu_arch = ["sm_121a"]', refs="[]"), ["refs"]),
        (entry_toml("bad-ref", 'when.gpu_arch = ["sm_121a"]', refs='["NVIDIA/cutlass#3227"]'), ["refs", "not a URL"]),
        (entry_toml("bad-probe", 'when.gpu_arch = ["sm_121a"]', extra='verified_by = { probe = "x", expect = "maybe" }\n'), ["verified_by"]),
        (entry_toml("empty-when", "when = {}"), ["when"]),
    ],
)
def test_bad_entry_names_file_entry_and_field(tmp_path, body, field_words):
    path = write(tmp_path, "broken.toml", body)
    message = load_error(tmp_path)
    entry_id = body.split('id = "')[1].split('"')[0]
    assert str(path) in message and entry_id in message, message
    for word in field_words:
        assert word in message, message


def test_missing_required_field_is_named(tmp_path):
    body = entry_toml("no-remedy", 'when.gpu_arch = ["sm_121a"]').replace('remedy = "r"\n', "")
    write(tmp_path, "a.toml", body)
    message = load_error(tmp_path)
    assert "no-remedy" in message and "'remedy'" in message


def test_duplicate_id_across_files_names_both(tmp_path):
    first = write(tmp_path, "a.toml", entry_toml("same-id", 'when.gpu_arch = ["sm_121a"]'))
    second = write(tmp_path, "b.toml", entry_toml("same-id", 'when.driver = ">=580"'), component="other")
    message = load_error(tmp_path)
    assert str(first) in message and str(second) in message and "same-id" in message


def test_not_toml_names_the_file(tmp_path):
    (tmp_path / "a.toml").write_text('component = "x"\n[[entry]\nid = ', encoding="utf-8")
    message = load_error(tmp_path)
    assert str(tmp_path / "a.toml") in message and "not valid TOML" in message


def test_missing_component_names_the_file(tmp_path):
    (tmp_path / "a.toml").write_text(entry_toml("x-y", 'when.gpu_arch = ["sm_121a"]'), encoding="utf-8")
    message = load_error(tmp_path)
    assert str(tmp_path / "a.toml") in message and "component" in message


def test_bad_stack_specifier_is_named(tmp_path):
    write(tmp_path, "s.toml", f'[[stack]]\nid = "s-1"\ntitle = "t"\npackages = {{ "vllm" = "=>0.22" }}\nrefs = ["{REF}"]\n')
    message = load_error(tmp_path)
    assert "s-1" in message and "packages" in message and "vllm" in message


def test_single_file_and_folder_load_the_same(tmp_path):
    path = write(tmp_path, "a.toml", entry_toml("one-entry", 'when.gpu_arch = ["sm_121a"]'))
    assert [e.id for e in matrix.load(path).entries] == [e.id for e in matrix.load(tmp_path).entries] == ["one-entry"]
    assert matrix.load(path).entries[0].component == "test"


# ---- one validation for every command (issue 6) ----------------------------------------------------
STACK = f'[[stack]]\nid = "good-stack"\ntitle = "t"\npackages = {{ "vllm" = ">=0.22" }}\nrefs = ["{REF}"]\n'


@pytest.mark.parametrize(
    ("body", "words"),
    [
        # what `matrix validate` used to add on top of load: check --matrix took these
        (entry_toml("no-such-probe", 'when.gpu_arch = ["sm_121a"]', extra='verified_by = { probe = "e2m1-cvtx", expect = "fail" }\n'),
         ["verified_by.probe", "'e2m1-cvtx', which is no probe"]),
        (entry_toml("bad-verify", 'when.gpu_arch = ["sm_121a"]', extra='verified_by = { probe = "e2m1-cvt", expect = "fail" }\nverify.affected = []\n'),
         ["verify.affected", "at least one environment"]),
        (entry_toml("verify-no-probe", 'when.gpu_arch = ["sm_121a"]', extra='verify.affected = [["nvidia-cutlass-dsl==1"]]\n'), ["verified_by"]),
        (entry_toml("verify-arch", 'when.gpu_arch = ["sm_121a"]', extra='verified_by = { probe = "e2m1-cvt", expect = "fail" }\nverify = { arch = "sm_999", affected = [["nvidia-cutlass-dsl==1"]] }\n'),
         ["verify.arch", "sm_999"]),
        # stacks: the driver specifier, the id and the env were never looked at
        (STACK.replace('refs =', 'driver = "=>580"\nrefs ='), ["stack good-stack", "driver", "=>580"]),
        (STACK.replace('id = "good-stack"', 'id = "Bad Stack"'), ["stack 'Bad Stack'", "field 'id'"]),
        (STACK.replace('refs =', 'env = { CUTE_DSL_ARCH = 121 }\nrefs ='), ["stack good-stack", "env", "CUTE_DSL_ARCH"]),
        # an id or a ref with a trailing newline passed the `$` anchor
        (entry_toml("x", 'when.gpu_arch = ["sm_121a"]').replace('id = "x"', 'id = "trailing-newline\\n"'), ["'trailing-newline\\n'", "field 'id'"]),
        (entry_toml("ref-newline", 'when.gpu_arch = ["sm_121a"]', refs=f'["{REF}\\n"]'), ["refs", "not a URL"]),
        # gpu_arch names real arches, and a specifier's numbers must be comparable
        (entry_toml("bad-arch", 'when.gpu_arch = ["sm_999a"]'), ["when.gpu_arch", "sm_999a"]),
        (entry_toml("huge-spec", f'when.packages = {{ "vllm" = ">={"9" * 5000}" }}'), ["when.packages", "vllm", "characters"]),
        (entry_toml("nested-quantifier", 'when.env_matches = { CUTE_DSL_ARCH = "^(sm_1+)+$" }'), ["when.env_matches", "CUTE_DSL_ARCH", "nested quantifier"]),
        # Python only warns about a set that a future Python reads as set operations: refused, not a raw FutureWarning
        (entry_toml("nested-set", 'when.env_matches = { CUTE_DSL_ARCH = "[[a]" }'), ["when.env_matches", "CUTE_DSL_ARCH", "nested set", "future Python"]),
    ],
)
def test_load_refuses_what_validate_refuses(tmp_path, body, words):
    path = write(tmp_path, "m.toml", body)
    message = load_error(tmp_path)
    assert str(path) in message and "\n" not in message and len(message) < 1000, message
    for word in words:
        assert word in message, message


@pytest.mark.parametrize(
    ("schema", "ok"),
    [("", True), ("schema = 1\n", True), ("schema = 99\n", False), ('schema = "1"\n', False), ("schema = 1.0\n", False)],
)
def test_schema_version_is_checked(tmp_path, schema, ok):
    (tmp_path / "m.toml").write_text(schema + 'component = "t"\n' + entry_toml("one-entry", 'when.gpu_arch = ["sm_121a"]'))
    if ok:
        assert [e.id for e in matrix.load(tmp_path).entries] == ["one-entry"]
    else:
        message = load_error(tmp_path)
        assert "schema" in message and str(tmp_path / "m.toml") in message


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b'component = "t\xff"\n', ["not UTF-8"]),
        (b'component = "t"\nx = ' + b"[" * 100_000 + b"]" * 100_000 + b"\n", ["nested too deeply"]),
        (b'component = "t"\nx = ' + b"{a=" * 5_000 + b"1" + b"}" * 5_000 + b"\n", ["nested too deeply"]),
    ],
)
def test_unreadable_toml_is_one_line_naming_the_file(tmp_path, data, words):
    (tmp_path / "m.toml").write_bytes(data)
    message = load_error(tmp_path)
    assert message.startswith(str(tmp_path / "m.toml")) and "\n" not in message, message
    for word in words:
        assert word in message, message


def test_bundled_matrix_passes_the_one_validation():
    m = matrix.load()
    assert m.entries and m.stacks


# ---- evaluation never hangs or crashes on what a box reports (issue 6) -----------------------------
HUGE = "1" * 5000  # past Python's 4,300-digit int() limit: packaging raised ValueError


@pytest.mark.parametrize(
    ("when", "changes"),
    [
        ('when.packages = { "vllm" = ">=0.22" }', {"packages": {"vllm": HUGE}}),
        ('when.driver = ">=580"', {"driver": {"version": HUGE, "cuda": "13.0"}}),
        ('when.cuda_driver = ">=13.0"', {"driver": {"version": "580.95.05", "cuda": HUGE}}),
        ('when.torch_cuda = ">=13.0"', {"torch_cuda": HUGE}),
        ('when.constraints = { "nvidia-cutlass-dsl" = "<4.5" }', {"constraints": [pin(f"nvidia-cutlass-dsl=={HUGE}")]}),
    ],
)
def test_versions_past_the_digit_limit_are_not_comparable(tmp_path, when, changes):
    entry = one_entry(tmp_path, when)
    result = matrix.evaluate(entry, gb10_facts(**changes))
    assert result.outcome in ("unknown", "clear"), result.outcome
    assert all(len(c.evidence) < 300 for c in result.checks), [c.evidence for c in result.checks]


def test_huge_package_version_says_why_it_is_unknown(tmp_path):
    entry = one_entry(tmp_path, 'when.packages = { "vllm" = ">=0.22" }')
    result = matrix.evaluate(entry, gb10_facts(packages={"vllm": HUGE}))
    assert result.outcome == "unknown"
    (line,) = result.unknowns
    assert "not a valid version" in line and "5000 characters" in line, line


def test_ptxas_with_a_huge_version_does_not_crash(tmp_path):
    entry = one_entry(tmp_path, 'when.ptxas = { version = ">=13.0" }')
    assert outcome(entry, toolkits=[{**ptxas("13.0.88", "system"), "version": HUGE}]) == "clear"


CATASTROPHIC = r"""
import sys, time
sys.path.insert(0, {repo!r})
from pathlib import Path
from sparkdoctor import matrix
from tests.gb10 import gb10_facts
entry = matrix.load(Path({path!r})).entries[0]
started = time.process_time()
result = matrix.evaluate(entry, gb10_facts(env={{"X": "a" * 5000 + "!"}}))
print(result.outcome, round(time.process_time() - started, 2), result.unknowns)
"""


def test_a_backtracking_pattern_is_bounded_in_time(tmp_path):
    # no nested quantifier, so validation lets it through, yet it backtracks exponentially; the bound is on the CPU
    # time the evaluation spends (a loaded machine stretches wall time, not the work)
    path = write(tmp_path, "m.toml", entry_toml("slow-regex", r'when.env_matches = { X = "^(a|aa)+$" }'))
    repo = str(Path(__file__).resolve().parent.parent)
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", CATASTROPHIC.format(repo=repo, path=str(path))], capture_output=True, text=True, timeout=600)  # a safety net
    assert done.returncode == 0, done.stderr
    outcome_, seconds, unknowns = done.stdout.split(" ", 2)
    assert outcome_ == "unknown" and float(seconds) < 3, done.stdout
    assert "could not be matched" in unknowns


def test_env_matches_still_supports_lookahead(tmp_path):
    entry = one_entry(tmp_path, 'when.env_matches = { CUTE_DSL_ARCH = "^(?!sm_121a$)" }')
    assert outcome(entry, env={"CUTE_DSL_ARCH": "sm_120f"}) == "match"
    assert outcome(entry) == "clear"  # the baseline sets sm_121a


def test_check_validate_and_verify_refuse_a_matrix_with_one_message(tmp_path):
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parent.parent
    write(tmp_path, "m.toml", entry_toml("no-such-probe", 'when.gpu_arch = ["sm_121a"]', extra='verified_by = { probe = "e2m1-cvtx", expect = "fail" }\n'))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKDOCTOR_")}
    env.update(PYTHONPATH=str(repo), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"), XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    snapshot = str(repo / "tests" / "data" / "facts" / "nogpu-clean.json")
    errors = set()
    for args in (["check", "--facts", snapshot, "--matrix", str(tmp_path)], ["matrix", "validate", str(tmp_path)], ["matrix", "verify", "--matrix", str(tmp_path)]):
        done = subprocess.run([sys.executable, "-m", "sparkdoctor", *args], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        errors.add(done.stderr)
    (message,) = errors
    assert message.count("\n") == 1 and "'e2m1-cvtx', which is no probe" in message


def test_patterns_without_repetition_cost_no_regex_import(tmp_path):
    # check's budget: the bundled patterns (no repetition) are matched by re, linear there
    import subprocess
    import sys

    code = (
        "import sys; from sparkdoctor import matrix; from tests.gb10 import gb10_facts; "
        "m = matrix.load(); matrix.evaluate_all(m, gb10_facts(env={'CUTE_DSL_ARCH': 'sm_120f', 'TORCH_CUDA_ARCH_LIST': '12.1a'})); "
        "print('regex' in sys.modules)"
    )
    repo = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=repo)
    assert done.stdout.strip() == "False", done.stderr


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (entry_toml("key-newline", 'when."gpu\\narch" = ["sm_121a"]'), ["when.gpu\\narch"]),
        (entry_toml("pkg-newline", 'when.packages = { "vl\\nlm" = "=>1" }'), ["vl\\nlm"]),
        (entry_toml("arch-newline", 'when.gpu_arch = ["sm_121a\\n"]'), ["when.gpu_arch", "sm_121a\\n"]),
        (entry_toml("verify-arch-newline", 'when.gpu_arch = ["sm_121a"]',
                    extra='verified_by = { probe = "e2m1-cvt", expect = "fail" }\nverify = { arch = "sm_121a\\n", affected = [["nvidia-cutlass-dsl==1"]] }\n'),
         ["verify.arch"]),
    ],
)
def test_newlines_from_a_file_never_break_the_error_line(tmp_path, body, words):
    write(tmp_path, "m.toml", body)
    message = load_error(tmp_path)
    assert "\n" not in message and "\r" not in message, message
    for word in words:
        assert word in message, message


def test_probe_ids_are_the_ones_the_kernels_module_loads():
    from sparkdoctor.kernels import load_probes
    from sparkdoctor.vocab import CUTEDSL_KERNELS as KERNELS

    assert matrix.known_probes() == {p.id for p in load_probes()} | set(KERNELS)


def test_loading_the_matrix_does_not_import_the_kernels_module():
    # `check --no-kernels` and `--facts` must not pay for sparkdoctor.kernels to validate probe names
    import subprocess
    import sys

    code = "import sys; from sparkdoctor import matrix; matrix.load(); print('sparkdoctor.kernels' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parent.parent)
    assert done.stdout.strip() == "False", done.stderr


def test_a_pattern_python_only_warns_about_is_refused_even_after_re_cached_it():
    """re.compile warns once per pattern and then serves it from its cache, silently: the check must not depend on
    whether something in this process compiled the pattern before."""
    import re
    import warnings

    from sparkdoctor.patterns import regex_error

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        re.compile("[a&&b]")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and nothing leaks out as a warning
        assert "future Python" in regex_error("[a&&b]") and "future Python" in regex_error("[a&&b]")
        assert regex_error(r"[\[a]") is None and regex_error("(") == "missing ), unterminated subpattern at position 0"


def test_matrix_validate_prints_one_line_and_no_python_warning_for_a_nested_set(tmp_path):
    path = write(tmp_path, "m.toml", entry_toml("nested-set", 'when.env_matches = { CUTE_DSL_ARCH = "x[[a]" }'))
    p = subprocess.run([sys.executable, "-W", "default", "-m", "sparkdoctor", "matrix", "validate", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and not p.stdout
    assert p.stderr.count("\n") == 1 and "Warning" not in p.stderr and "nested set" in p.stderr, p.stderr


def test_recipe_check_of_a_real_recipe_that_runs_no_vllm_judges_no_vllm_default(tmp_path):
    """eugr's FLUX.2 recipe (tests/data/recipes/eugr-flux2-dev-torchao-nvfp4.yaml) was told to lower a
    --gpu-memory-utilization its uvicorn server does not have."""
    import json

    recipe = Path(__file__).parent / "data" / "recipes" / "eugr-flux2-dev-torchao-nvfp4.yaml"
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "recipe", "check", str(recipe), "--python", sys.executable,
                        "-f", "json"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "SPARKDOCTOR_CACHE_DIR": str(tmp_path)})
    findings = json.loads(p.stdout)["findings"]
    assert not [f["id"] for f in findings if str(f["id"]).startswith(("vllm-", "unjudged:vllm-"))], findings
