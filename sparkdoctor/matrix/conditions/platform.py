"""Conditions on the machine under the Python environment: the GPU arch, the NVIDIA driver and the
CUDA version it supports, the host CPU, the ptxas installations and the cutlass-dsl build on disk."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sparkdoctor.arch import describe_source, real_arch_problem, settle
from sparkdoctor.facts import Facts
from sparkdoctor.matrix.conditions.shapes import as_list, v_str_list
from sparkdoctor.matrix.model import Check
from sparkdoctor.matrix.versions import shown, spec_problem, version_in


def v_arch_list(value: object) -> str | None:
    err = v_str_list(value)
    if err:
        return err
    for arch in as_list(value):
        problem = real_arch_problem(arch)
        if problem:
            return f"{arch!r}: {problem}"
    return None


def eval_gpu_arch(value: object, facts: Facts) -> list[Check]:
    wanted = as_list(value)
    settled = settle(facts.arch)  # no arch known: the GB10 one, assumed (sparkdoctor.arch)
    arch = settled["value"]
    ok = arch in wanted
    source = describe_source(settled)
    return [Check("gpu_arch", ok, f"GPU arch {arch} ({source}){'' if ok else ' not'} in {', '.join(wanted)}")]


def eval_driver_field(fieldname: str, label: str) -> Callable[[Any, Facts], list[Check]]:
    def ev(value: str, facts: Facts) -> list[Check]:
        key = "driver" if fieldname == "version" else "cuda_driver"
        if facts.driver is None:
            return [Check(key, None, f"{label} unknown (entry needs {value})")]
        if facts.driver.get(fieldname) is None:  # {} = looked, and no NVIDIA driver is there
            return [Check(key, False, f"no NVIDIA driver found (entry needs {label} {value})")]
        got = facts.driver[fieldname]
        ok = version_in(got, value)
        word = {True: "matches", False: "does not match", None: "not a valid version, so it cannot be compared with"}[ok]
        return [Check(key, ok, f"{label} {shown(got)} ({word} {value})")]

    return ev


def eval_host_machine(value: object, facts: Facts) -> list[Check]:
    if facts.host is None:
        return [Check("host_machine", None, "host machine unknown")]
    got = facts.host.get("machine")
    ok = got in as_list(value)
    return [Check("host_machine", ok, f"host machine {got}")]


def eval_cutedsl_build(value: object, facts: Facts) -> list[Check]:
    wanted = as_list(value)
    if facts.cutedsl is None:
        return [Check("cutedsl_build", None, "cutlass-dsl active build unknown")]
    build = facts.cutedsl.get("active_build")
    if build is None:
        return [Check("cutedsl_build", False, "nvidia-cutlass-dsl not installed")]
    if build == "unknown":
        return [Check("cutedsl_build", None, f"cutlass-dsl active build could not be told ({facts.cutedsl.get('evidence', '')})")]
    ok = build in wanted
    return [Check("cutedsl_build", ok, f"cutlass-dsl active build is {build} ({facts.cutedsl.get('evidence', 'RECORD hash')})")]


_PTXAS_KEYS = {"source": str, "used_by": str, "version": str, "sm_121a": bool}


def v_ptxas(value: object) -> str | None:
    if not isinstance(value, dict) or not value:
        return "must be a table with some of: source, used_by, version (specifier), sm_121a (bool)"
    for k, v in value.items():
        if k not in _PTXAS_KEYS:
            return f"unknown key {k!r} (known: {', '.join(_PTXAS_KEYS)})"
        if not isinstance(v, _PTXAS_KEYS[k]):
            return f"{k}: must be a {_PTXAS_KEYS[k].__name__}"
    if "version" in value:
        return spec_problem(value["version"])
    return None


def eval_ptxas(value: dict[str, Any], facts: Facts) -> list[Check]:
    if facts.toolkits is None:
        return [Check("ptxas", None, "ptxas installations unknown")]
    want = ", ".join(f"{k}={v}" for k, v in value.items())
    for t in facts.toolkits:
        if t.get("tool") != "ptxas":
            continue
        if "source" in value and t.get("source") != value["source"]:
            continue
        if "used_by" in value and value["used_by"] not in (t.get("used_by") or []):
            continue
        if "version" in value and not version_in(t.get("version"), value["version"]):
            continue
        if "sm_121a" in value and t.get("sm_121a") is not value["sm_121a"]:
            continue
        return [Check("ptxas", True, f"ptxas {shown(t.get('version'))} at {t.get('path')} ({t.get('source')}) matches {want}")]
    if "used_by" in value and facts.unlisted(str(value["used_by"])):  # its ptxas is found through its RECORD
        return [Check("ptxas", None, f"{value['used_by']} imports with no metadata: its ptxas is not known ({want})")]
    return [Check("ptxas", False, f"no ptxas matches {want}")]
