"""An entry's `verify` table: which installs `matrix verify` builds to prove the entry.

Part of the entry schema, so the loader checks it for every command (`check --matrix`, `matrix
validate`, `matrix verify`) and sparkdoctor.verify only reads what passed. Format:

    verified_by = { probe = "cutedsl-nvfp4-mma", expect = "fail" }
    verify.arch = "sm_121a"                                   # what the probe compiles for (default sm_121a)
    verify.affected = [["nvidia-cutlass-dsl==4.5.0"]]
    verify.fixed = [["nvidia-cutlass-dsl[cu13]==4.5.0"], ["nvidia-cutlass-dsl==4.5.1"]]

Each item of `affected` / `fixed` is one scratch environment, written as the list of `pip install`
steps that build it, run in order. A step is one requirement or a line of pip install arguments;
only the options in ALLOWED_OPTIONS pass (no index URLs, no files, no shell). An item may instead be
a table { steps = [...], arch = "sm_121" } to compile that environment's probe for another arch.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from sparkdoctor.arch import DEFAULT_ARCH, real_arch_problem
from sparkdoctor.matrix.model import MatrixError, refuse_unknown_keys

ALLOWED_OPTIONS = frozenset({"--force-reinstall", "--no-deps", "--pre", "--upgrade", "-U", "--only-binary=:all:", "--ignore-installed"})
# What a step may name: the packages that bring the compilers the verify probes run (the CuTe DSL family, the
# ptxas of the nvcc wheels). A matrix can come from someone else (`matrix update`), and an installed package's
# code runs when the probe starts (a .pth file runs at every interpreter start), so a step never names another
# package; verify installs wheels only (sparkdoctor.verify.venvs), so no build backend runs either.
PROBE_PACKAGES = re.compile(r"nvidia-cutlass-dsl(-libs-[a-z0-9]+)?|nvidia-cuda-nvcc(-cu[0-9]+)?")


@dataclass(frozen=True)
class Env:
    """One scratch environment to build: pip install steps, each an argument list."""

    steps: tuple[tuple[str, ...], ...]
    arch: str

    @property
    def label(self) -> str:
        return " ; ".join(" ".join(s) for s in self.steps)


@dataclass(frozen=True)
class VerifyTable:
    affected: list[Env]
    fixed: list[Env]


def parse_verify_table(table: object, label: str) -> VerifyTable:
    """The environments of a `verify` table; MatrixError naming `label` and the field otherwise."""
    if not isinstance(table, dict):
        raise MatrixError(f"{label}: field 'verify' must be a table")
    refuse_unknown_keys(table, {"arch", "affected", "fixed"}, f"{label}: field 'verify'")
    arch = table.get("arch", DEFAULT_ARCH)
    _check_arch(arch, f"{label}: field 'verify.arch'")
    affected = _envs(table.get("affected"), arch, f"{label}: field 'verify.affected'")
    if not affected:
        raise MatrixError(f"{label}: field 'verify.affected' needs at least one environment")
    fixed = _envs(table.get("fixed", []), arch, f"{label}: field 'verify.fixed'")
    return VerifyTable(affected, fixed)


def _check_arch(arch: object, where: str) -> None:
    problem = real_arch_problem(arch) if isinstance(arch, str) else "must be a string"
    if problem:
        raise MatrixError(f"{where} must be an arch like sm_121a: {arch!r}: {problem}")


def _envs(value: object, arch: str, label: str) -> list[Env]:
    if not isinstance(value, list):
        raise MatrixError(f"{label} must be a list of environments (each a list of pip install steps)")
    out = []
    for i, item in enumerate(value):
        where = f"{label}[{i}]"
        env_arch = arch
        if isinstance(item, dict):
            refuse_unknown_keys(item, {"steps", "arch"}, where)
            env_arch = item.get("arch", arch)
            _check_arch(env_arch, f"{where}.arch")
            item = item.get("steps")
        if not isinstance(item, list) or not item or not all(isinstance(s, str) and s.strip() for s in item):
            raise MatrixError(f"{where} must be a non-empty list of pip install steps (strings)")
        out.append(Env(tuple(parse_step(s, where) for s in item), env_arch))
    return out


def parse_step(text: str, where: str) -> tuple[str, ...]:
    """One pip install step as arguments: requirements and ALLOWED_OPTIONS only."""
    try:
        args = shlex.split(text)
    except ValueError as exc:
        raise MatrixError(f"{where}: step {text!r} cannot be split: {exc}") from None
    reqs = 0
    for arg in args:
        if arg.startswith("-"):
            if arg not in ALLOWED_OPTIONS:
                raise MatrixError(f"{where}: step {text!r} uses {arg}; allowed pip options: {', '.join(sorted(ALLOWED_OPTIONS))}")
            continue
        try:
            req = Requirement(arg)
        except InvalidRequirement as exc:
            reason = str(exc).splitlines()[0] if str(exc) else "unparsable"
            raise MatrixError(f"{where}: step {text!r}: {arg!r} is not a requirement ({reason})") from None
        if req.url:
            raise MatrixError(f"{where}: step {text!r}: URL requirements are not allowed")
        if not PROBE_PACKAGES.fullmatch(canonicalize_name(req.name)):
            raise MatrixError(f"{where}: step {text!r}: {req.name} is not a package a verify probe compiles with "
                              "(nvidia-cutlass-dsl and its libs, nvidia-cuda-nvcc(-cuNN))")
        reqs += 1
    if not reqs:
        raise MatrixError(f"{where}: step {text!r} installs nothing")
    return tuple(args)
