"""The condition vocabulary of an entry's `when` table: ONE registry, CONDITIONS.

Each condition is a validator for its TOML value (returns why it is wrong, or None) and an
evaluator that turns Facts into Checks (True / False / None = unknown). Adding a condition means
writing those two functions in the module of its subject (installed packages, the platform, the
environment, probe results) and adding one row below; the loader and `matrix show` read this table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkdoctor.facts import Facts
from sparkdoctor.matrix.conditions import (
    environment,
    fleet,
    host,
    installed,
    platform,
    probes,
    serving,
)
from sparkdoctor.matrix.conditions.shapes import (
    v_scalar_table,
    v_spec_table,
    v_str_list,
)
from sparkdoctor.matrix.model import Check
from sparkdoctor.matrix.versions import spec_problem


@dataclass(frozen=True)
class Condition:
    validate: Callable[[Any], str | None]
    evaluate: Callable[[Any, Facts], list[Check]]
    doc: str
    needs_recipe: bool = False  # judged on a recipe's settings: `recipe check` only, left out of plain `check`


CONDITIONS: dict[str, Condition] = {
    "gpu_arch": Condition(platform.v_arch_list, platform.eval_gpu_arch, "GPU arch (detected or --arch) is one of these"),
    "packages": Condition(v_spec_table, installed.eval_packages, "each package installed with a version in its specifier"),
    "not_installed": Condition(v_str_list, installed.eval_not_installed, "none of these packages installed"),
    "mixed_versions": Condition(v_str_list, installed.eval_mixed_versions, "the members of this family (the name and every name-*) are at different versions"),
    "driver": Condition(spec_problem, platform.eval_driver_field("version", "NVIDIA driver"), "driver version in range"),
    "cuda_driver": Condition(spec_problem, platform.eval_driver_field("cuda", "driver CUDA version"), "CUDA version the driver supports in range"),
    "torch_cuda": Condition(installed.v_torch_cuda, installed.eval_torch_cuda, "CUDA version torch was built for in range (\"none\": a CPU-only build)"),
    "flashinfer_kernels": Condition(installed.v_flashinfer_kernels, installed.eval_flashinfer_kernels, "FlashInfer's precompiled kernels (`vllm download-kernels`) for the installed FlashInfer and the arch: present, missing, mismatched, no-arch, no-flashinfer"),
    "cutedsl_build": Condition(v_str_list, platform.eval_cutedsl_build, "the cutlass-dsl library build on disk"),
    "env": Condition(environment.v_env, environment.eval_env, "env vars set / unset / equal / one of"),
    "env_matches": Condition(environment.v_regex_table, environment.eval_env_matches, "env var set and matches a regular expression"),
    "modified": Condition(installed.v_modified, installed.eval_modified, "files of a package differ from its RECORD"),
    "ptxas": Condition(platform.v_ptxas, platform.eval_ptxas, "some ptxas matches source / used_by / version / sm_121a support"),
    "constraints": Condition(v_spec_table, installed.eval_constraints, "a pin of the package exists in a constraints file"),
    "kernels": Condition(v_scalar_table, probes.eval_kernels, "kernel / CuTe DSL probe status"),
    "capabilities": Condition(v_scalar_table, probes.eval_capabilities, "static capability read from installed files"),
    "host_machine": Condition(v_str_list, platform.eval_host_machine, "host CPU architecture"),
    "host_health": Condition(host.v_host_health, host.eval_host_health, "live host readings (memory, PSI, GPU clocks/power, docker, links)"),
    "fleet": Condition(fleet.v_fleet, fleet.eval_fleet, "multi-node signals of `fleet check` (never true on one box)"),
    "serving": Condition(serving.v_serving, serving.eval_serving, "values of a recipe's serve flags and its model's config (recipe check)", True),
}
