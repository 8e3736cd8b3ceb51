"""The matrix engine on its own: tiny matrix files in tmp_path, the GB10 Facts builder for inputs.

Each condition is checked three ways (true, false, unknown because its fact was not observed),
loading errors must name the file, the entry and the field, and version specifiers must treat
local builds (+cu130) and pre-releases the way pip does.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from sparkdoctor import matrix
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
    "driver": ('when.driver = ">=580,<590"', {}, {"driver": {"version": "590.48.01", "cuda": "13.1"}}, {"driver": None}),
    "cuda_driver": ('when.cuda_driver = ">=13.0"', {}, {"driver": {"cuda": "12.8"}}, {"driver": None}),
    "torch_cuda": ('when.torch_cuda = ">=13.0"', {}, {"torch_cuda": "12.8"}, {"packages": None}),
    "cutedsl_build": ('when.cutedsl_build = "libs-cu13"', {}, {"cutedsl_build": "libs-base"}, {"cutedsl": None}),
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
