"""Conditions on what pip installed in the target: versions, absences, torch's CUDA build, files
that differ from their RECORD, and pins in constraints files."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping

from packaging.version import Version

from sparkdoctor.facts import Facts
from sparkdoctor.flashinfer_kernels import STATUSES, state
from sparkdoctor.matrix.conditions.shapes import as_list, v_str_list, v_table
from sparkdoctor.matrix.model import Check
from sparkdoctor.matrix.versions import shown, spec_problem, version_in
from sparkdoctor.names import canonicalize_name

_WORD = {True: "matches", False: "does not match", None: "cannot be compared with"}


def eval_packages(value: dict[str, str], facts: Facts) -> list[Check]:
    out = []
    for name, spec in value.items():
        if facts.packages is None:
            out.append(Check("packages", None, f"installed packages unknown (entry needs {name} {spec})"))
            continue
        pkg = facts.package(name)
        if pkg is None:
            out.append(Check("packages", None, _unlisted(facts, name, f"{name} {spec}")) if facts.unlisted(name)
                       else Check("packages", False, f"{name} not installed"))
            continue
        version = pkg.get("version")
        ok = version_in(version, spec)
        wanted = "any version" if spec.strip() == "*" else spec
        if version is None:
            out.append(Check("packages", None, f"{name} installed, version unknown (entry needs {wanted})"))
            continue
        word = "not a valid version, so it cannot be compared with" if ok is None else _WORD[ok]
        out.append(Check("packages", ok, f"{name} {shown(version)} installed ({word} {wanted})"))
    return out


def eval_not_installed(value: object, facts: Facts) -> list[Check]:
    out = []
    for name in as_list(value):
        if facts.packages is None:
            out.append(Check("not_installed", None, f"installed packages unknown (entry needs {name} absent)"))
        else:
            pkg = facts.package(name)
            said = "not installed" if pkg is None else f"{shown(pkg.get('version'))} installed"
            out.append(Check("not_installed", None, _unlisted(facts, name, f"{name} absent")) if facts.unlisted(name)
                       else Check("not_installed", pkg is None, f"{name} {said}"))
    return out


def _unlisted(facts: Facts, name: str, needs: str) -> str:
    """Why a condition on a package that imports with no metadata (no-metadata-*) cannot be judged."""
    version = (facts.unlisted(name) or {}).get("version")
    return (f"{name} imports with no metadata (its files say {shown(version) if version else 'no version'}; pip lists "
            f"nothing), entry needs {needs}")


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except ValueError:  # InvalidVersion, or int() past the digit limit (a METADATA's 5,000-digit version)
        return a == b


def eval_mixed_versions(value: object, facts: Facts) -> list[Check]:
    """A family of distributions released together (the name and every `name-*`) installed at different
    versions: what pip leaves after `pip install name==OLD` over a newer family (it warns "X requires Y==V,
    but you have Y W" and installs anyway)."""
    out = []
    for family in as_list(value):
        if facts.packages is None:
            out.append(Check("mixed_versions", None, f"installed packages unknown (entry needs the {family} family)"))
            continue
        fam = canonicalize_name(family)
        members = sorted((canonicalize_name(n), str(p.get("version"))) for n, p in facts.packages.items()
                         if (canonicalize_name(n) == fam or canonicalize_name(n).startswith(fam + "-")) and p.get("version"))
        listed = ", ".join(f"{n} {shown(v)}" for n, v in members)
        if not members:
            out.append(Check("mixed_versions", False, f"no {family} distribution installed"))
        elif all(_same_version(v, members[0][1]) for _, v in members):
            out.append(Check("mixed_versions", False, f"the {family} family is at one version: {listed}"))
        else:
            out.append(Check("mixed_versions", True, f"the {family} family is at different versions: {listed}"))
    return out


def v_torch_cuda(value: object) -> str | None:
    return None if value == "none" else spec_problem(value)


def eval_torch_cuda(value: str, facts: Facts) -> list[Check]:
    """A specifier on the CUDA version torch was built for; "none" matches a CPU-only build."""
    if facts.packages is None:
        return [Check("torch_cuda", None, "torch build unknown")]
    torch = facts.package("torch")
    if torch is None:
        return [Check("torch_cuda", False, "torch not installed")]
    version = shown(torch.get("version"))
    cuda = torch.get("cuda")
    if cuda is None and torch.get("build_error"):  # version.py missing or unreadable: not a CPU build
        return [Check("torch_cuda", None, f"torch {version} build unknown: {shown(torch['build_error'])}")]
    if cuda is None:
        return [Check("torch_cuda", value == "none", f"torch {version} is a CPU-only build")]
    if value == "none":
        return [Check("torch_cuda", False, f"torch {version} is built for CUDA {shown(cuda)}")]
    ok = version_in(cuda, value)
    return [Check("torch_cuda", ok, f"torch {version} built for CUDA {shown(cuda)} ({_WORD[ok]} {value})")]


def v_modified(value: object) -> str | None:
    return v_table(value, 'package = ["glob", ...] ("*" for any file)', lambda _, globs: v_str_list(globs))


def eval_modified(value: Mapping[str, object], facts: Facts) -> list[Check]:
    out = []
    for name, globs in value.items():
        if facts.packages is None:
            out.append(Check("modified", None, f"installed packages unknown (entry looks at {name} files)"))
            continue
        pkg = facts.package(name)
        if pkg is None:
            out.append(Check("modified", False, f"{name} not installed"))
            continue
        if pkg.get("integrity") in ("unchecked", None):
            out.append(Check("modified", None, f"{name} files were not checked"))
            continue
        hits = [f for f in pkg.get("files_modified") or [] if any(fnmatch.fnmatch(f, g) for g in as_list(globs))]
        listed = ", ".join(hits[:5]) + (f" and {len(hits) - 5} more" if len(hits) > 5 else "")
        out.append(Check("modified", bool(hits), f"{name} files differ from its RECORD: {listed}" if hits else f"{name}: no matching file modified"))
    return out


def eval_constraints(value: dict[str, str], facts: Facts) -> list[Check]:
    out = []
    for name, spec in value.items():
        if facts.constraints is None:
            out.append(Check("constraints", None, f"pins unknown (entry looks for a pin of {name})"))
            continue
        hit = next((c for c in facts.constraints if canonicalize_name(c.get("name", "")) == canonicalize_name(name)
                    and (spec.strip() == "*" or _pinned_in(c.get("specifier", ""), spec))), None)
        if hit:
            out.append(Check("constraints", True, f"{hit.get('requirement')} pinned in {hit.get('file')}"))
        else:
            out.append(Check("constraints", False, f"no pin of {name} {spec}"))
    return out


def _pinned_in(specifier: str, spec: str) -> bool:
    """Whether a constraint pins one version (== or ===) and that version is in `spec`."""
    m = re.fullmatch(r"\s*===?\s*([^,\s*]+)\s*", specifier or "")
    return m is not None and bool(version_in(m.group(1), spec))


def v_flashinfer_kernels(value: object) -> str | None:
    items = value if isinstance(value, list) else [value]
    if not items or any(v not in STATUSES for v in items):
        return f"must be one or a list of {', '.join(STATUSES)}"
    return None


def eval_flashinfer_kernels(value: object, facts: Facts) -> list[Check]:
    """`flashinfer_kernels = ["missing", ...]`: FlashInfer's precompiled kernels (`vllm download-kernels`) are in one
    of these states for the installed FlashInfer and the target's arch (sparkdoctor/flashinfer_kernels.py)."""

    wanted = value if isinstance(value, list) else [value]
    found = state(facts)
    if found is None:
        return [Check("flashinfer_kernels", None, "FlashInfer's kernel wheels unknown (no package list)")]
    return [Check("flashinfer_kernels", found["status"] in wanted, f"FlashInfer kernels {found['status']}: {found['detail']}")]
