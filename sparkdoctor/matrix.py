"""Load, validate and evaluate the matrix: the cited knowledge of what is broken and what is good.

Every matrix/*.toml file holds one component's `[[entry]]` (known problems) and `[[stack]]`
(known-good stacks). An entry's `when` table is a conjunction of conditions over Facts. Evaluation is
three-valued: a condition is True, False, or None when the fact it needs is unknown, so an entry
either matches, is clear, or could not be evaluated; "unknown" is never reported as "clear".
"""

from __future__ import annotations

import fnmatch
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from sparkdoctor.arch import describe_source, settle
from sparkdoctor.facts import Facts

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SEVERITIES = ("info", "warn", "error")
ACTIONS = ("fix", "configure", "rebench", "monitor")
ID_RE = re.compile(r"^[a-z0-9][a-z0-9.-]*[a-z0-9]$")


class MatrixError(ValueError):
    """A malformed matrix file; the message names the file, the entry and the field."""


@dataclass
class Entry:
    id: str
    title: str
    severity: str
    action: str
    summary: str
    remedy: str
    when: dict[str, Any]
    refs: list[str]
    component: str
    file: str
    symptoms: list[str] = field(default_factory=list)
    verified_by: dict[str, Any] | None = None
    fix: str | None = None
    withdrawn: str | None = None
    verify: dict[str, Any] | None = None  # affected/fixed installs for `matrix verify`


@dataclass
class Stack:
    id: str
    title: str
    packages: dict[str, str]
    refs: list[str]
    component: str
    file: str
    env: dict[str, str] = field(default_factory=dict)
    driver: str | None = None
    notes: str = ""


@dataclass
class Matrix:
    entries: list[Entry]
    stacks: list[Stack]
    files: list[str]

    def get(self, entry_id: str) -> Entry | None:
        return next((e for e in self.entries if e.id == entry_id), None)


# ---- evaluation ---------------------------------------------------------------------------------

Tri = bool | None  # True / False / None = unknown


@dataclass
class Check:
    """One condition's outcome and the evidence for it, in words a person reads."""

    key: str
    result: Tri
    evidence: str


@dataclass
class Evaluation:
    entry: Entry
    outcome: str  # "match" | "clear" | "unknown" | "withdrawn"
    checks: list[Check]

    @property
    def evidence(self) -> list[str]:
        return [c.evidence for c in self.checks if c.result]

    @property
    def unknowns(self) -> list[str]:
        return [c.evidence for c in self.checks if c.result is None]


def evaluate(entry: Entry, facts: Facts) -> Evaluation:
    if entry.withdrawn:
        return Evaluation(entry, "withdrawn", [])
    checks: list[Check] = []
    for key, spec in entry.when.items():
        checks.extend(CONDITIONS[key].evaluate(spec, facts))
    if any(c.result is False for c in checks):
        outcome = "clear"
    elif any(c.result is None for c in checks):
        outcome = "unknown"
    else:
        outcome = "match"
    return Evaluation(entry, outcome, checks)


def evaluate_all(matrix: Matrix, facts: Facts) -> list[Evaluation]:
    return [evaluate(e, facts) for e in matrix.entries]


# ---- conditions ---------------------------------------------------------------------------------
# Each condition: a validator for its TOML value (returns an error string or None) and an evaluator
# returning Checks. Adding a condition means adding one entry to CONDITIONS.


@dataclass(frozen=True)
class Condition:
    validate: Callable[[Any], str | None]
    evaluate: Callable[[Any, Facts], list[Check]]
    doc: str


def _spec(text: str) -> SpecifierSet:
    return SpecifierSet("" if text.strip() == "*" else text, prereleases=True)


def _version_in(version: str | None, spec: str) -> Tri:
    if version is None:
        return None
    try:
        return Version(version) in _spec(spec)
    except InvalidVersion:
        return None


version_in = _version_in


def _v_spec(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a PEP 440 specifier string such as \">=4.5.0,<4.6\" (or \"*\")"
    try:
        _spec(value)
    except InvalidSpecifier:
        return f"invalid PEP 440 specifier {value!r}"
    return None


def _v_str_list(value: Any) -> str | None:
    if isinstance(value, str):
        return None
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return None
    return "must be a string or a non-empty list of strings"


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _v_spec_table(value: Any) -> str | None:
    if not isinstance(value, dict) or not value:
        return "must be a table of package = \"specifier\""
    for name, spec in value.items():
        err = _v_spec(spec)
        if err:
            return f"{name}: {err}"
    return None


# gpu_arch -------------------------------------------------------------------------------------
def _eval_gpu_arch(value: Any, facts: Facts) -> list[Check]:
    wanted = _as_list(value)
    settled = settle(facts.arch)  # no arch known: the GB10 one, assumed (sparkdoctor.arch)
    arch = settled["value"]
    ok = arch in wanted
    source = describe_source(settled)
    return [Check("gpu_arch", ok, f"GPU arch {arch} ({source}){'' if ok else ' not'} in {', '.join(wanted)}")]


# packages ---------------------------------------------------------------------------------------
def _eval_packages(value: dict[str, str], facts: Facts) -> list[Check]:
    out = []
    for name, spec in value.items():
        if facts.packages is None:
            out.append(Check("packages", None, f"installed packages unknown (entry needs {name} {spec})"))
            continue
        pkg = facts.package(name)
        if pkg is None:
            out.append(Check("packages", False, f"{name} not installed"))
            continue
        ok = _version_in(pkg.get("version"), spec)
        shown = "any version" if spec.strip() == "*" else spec
        word = {True: "matches", False: "does not match", None: "cannot be compared with"}[ok]
        out.append(Check("packages", ok, f"{name} {pkg.get('version')} installed ({word} {shown})"))
    return out


def _eval_not_installed(value: Any, facts: Facts) -> list[Check]:
    out = []
    for name in _as_list(value):
        if facts.packages is None:
            out.append(Check("not_installed", None, f"installed packages unknown (entry needs {name} absent)"))
        else:
            pkg = facts.package(name)
            out.append(Check("not_installed", pkg is None, f"{name} {'not installed' if pkg is None else pkg.get('version') + ' installed'}"))
    return out


# driver / CUDA ----------------------------------------------------------------------------------
def _eval_driver_field(fieldname: str, label: str) -> Callable[[Any, Facts], list[Check]]:
    def ev(value: str, facts: Facts) -> list[Check]:
        key = "driver" if fieldname == "version" else "cuda_driver"
        if facts.driver is None:
            return [Check(key, None, f"{label} unknown (entry needs {value})")]
        if facts.driver.get(fieldname) is None:  # {} = looked, and no NVIDIA driver is there
            return [Check(key, False, f"no NVIDIA driver found (entry needs {label} {value})")]
        got = facts.driver[fieldname]
        ok = _version_in(got, value)
        return [Check(key, ok, f"{label} {got} ({'matches' if ok else 'does not match'} {value})")]

    return ev


def _v_torch_cuda(value: Any) -> str | None:
    return None if value == "none" else _v_spec(value)


def _eval_torch_cuda(value: str, facts: Facts) -> list[Check]:
    """A specifier on the CUDA version torch was built for; "none" matches a CPU-only build."""
    if facts.packages is None:
        return [Check("torch_cuda", None, "torch build unknown")]
    torch = facts.package("torch")
    if torch is None:
        return [Check("torch_cuda", False, "torch not installed")]
    cuda = torch.get("cuda")
    if cuda is None and torch.get("build_error"):  # version.py missing or unreadable: not a CPU build
        return [Check("torch_cuda", None, f"torch {torch.get('version')} build unknown: {torch['build_error']}")]
    if cuda is None:
        return [Check("torch_cuda", value == "none", f"torch {torch.get('version')} is a CPU-only build")]
    if value == "none":
        return [Check("torch_cuda", False, f"torch {torch.get('version')} is built for CUDA {cuda}")]
    ok = _version_in(cuda, value)
    return [Check("torch_cuda", ok, f"torch {torch.get('version')} built for CUDA {cuda} ({'matches' if ok else 'does not match'} {value})")]


# cutlass-dsl build ------------------------------------------------------------------------------
def _eval_cutedsl_build(value: Any, facts: Facts) -> list[Check]:
    wanted = _as_list(value)
    if facts.cutedsl is None:
        return [Check("cutedsl_build", None, "cutlass-dsl active build unknown")]
    build = facts.cutedsl.get("active_build")
    if build is None:
        return [Check("cutedsl_build", False, "nvidia-cutlass-dsl not installed")]
    if build == "unknown":
        return [Check("cutedsl_build", None, f"cutlass-dsl active build could not be told ({facts.cutedsl.get('evidence', '')})")]
    ok = build in wanted
    return [Check("cutedsl_build", ok, f"cutlass-dsl active build is {build} ({facts.cutedsl.get('evidence', 'RECORD hash')})")]


# env --------------------------------------------------------------------------------------------
def _v_env(value: Any) -> str | None:
    if not isinstance(value, dict) or not value:
        return "must be a table of NAME = true (set) | false (unset) | \"value\" (equals) | [\"a\", \"b\"] (one of)"
    for name, rule in value.items():
        if not (isinstance(rule, (bool, str)) or (isinstance(rule, list) and rule and all(isinstance(x, str) for x in rule))):
            return f"{name}: must be true, false, a string or a list of strings"
    return None


def _eval_env(value: dict[str, Any], facts: Facts) -> list[Check]:
    out = []
    for name, rule in value.items():
        if facts.env is None:
            out.append(Check("env", None, f"environment unknown (entry looks at {name})"))
            continue
        got = facts.env.get(name)
        if rule is True:
            out.append(Check("env", got is not None, f"{name}={got}" if got is not None else f"{name} is not set"))
        elif rule is False:
            out.append(Check("env", got is None, f"{name} is not set" if got is None else f"{name}={got} is set"))
        else:
            options = _as_list(rule)
            ok = got is not None and got in options
            shown = f"{name}={got}" if got is not None else f"{name} is not set"
            out.append(Check("env", ok, f"{shown} ({'one of' if ok else 'not one of'} {', '.join(options)})"))
    return out


def _v_regex_table(value: Any) -> str | None:
    if not isinstance(value, dict) or not value:
        return "must be a table of NAME = \"regular expression\""
    for name, rx in value.items():
        if not isinstance(rx, str):
            return f"{name}: must be a regular expression string"
        try:
            re.compile(rx)
        except re.error as exc:
            return f"{name}: bad regular expression: {exc}"
    return None


def _eval_env_matches(value: dict[str, str], facts: Facts) -> list[Check]:
    out = []
    for name, rx in value.items():
        if facts.env is None:
            out.append(Check("env_matches", None, f"environment unknown (entry looks at {name})"))
            continue
        got = facts.env.get(name)
        ok = got is not None and re.search(rx, got) is not None
        shown = f"{name}={got}" if got is not None else f"{name} is not set"
        out.append(Check("env_matches", ok, f"{shown} ({'matches' if ok else 'does not match'} /{rx}/)"))
    return out


# modified files ---------------------------------------------------------------------------------
def _v_modified(value: Any) -> str | None:
    if not isinstance(value, dict) or not value:
        return "must be a table of package = [\"glob\", ...] (\"*\" for any file)"
    for name, globs in value.items():
        err = _v_str_list(globs)
        if err:
            return f"{name}: {err}"
    return None


def _eval_modified(value: dict[str, Any], facts: Facts) -> list[Check]:
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
        hits = [f for f in pkg.get("files_modified") or [] if any(fnmatch.fnmatch(f, g) for g in _as_list(globs))]
        shown = ", ".join(hits[:5]) + (f" and {len(hits) - 5} more" if len(hits) > 5 else "")
        out.append(Check("modified", bool(hits), f"{name} files differ from its RECORD: {shown}" if hits else f"{name}: no matching file modified"))
    return out


# ptxas / toolkits -------------------------------------------------------------------------------
_PTXAS_KEYS = {"source": str, "used_by": str, "version": str, "sm_121a": bool}


def _v_ptxas(value: Any) -> str | None:
    if not isinstance(value, dict) or not value:
        return "must be a table with some of: source, used_by, version (specifier), sm_121a (bool)"
    for k, v in value.items():
        if k not in _PTXAS_KEYS:
            return f"unknown key {k!r} (known: {', '.join(_PTXAS_KEYS)})"
        if not isinstance(v, _PTXAS_KEYS[k]):
            return f"{k}: must be a {_PTXAS_KEYS[k].__name__}"
    if "version" in value:
        return _v_spec(value["version"])
    return None


def _eval_ptxas(value: dict[str, Any], facts: Facts) -> list[Check]:
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
        if "version" in value and not _version_in(t.get("version"), value["version"]):
            continue
        if "sm_121a" in value and t.get("sm_121a") is not value["sm_121a"]:
            continue
        return [Check("ptxas", True, f"ptxas {t.get('version')} at {t.get('path')} ({t.get('source')}) matches {want}")]
    return [Check("ptxas", False, f"no ptxas matches {want}")]


# constraints / pins -----------------------------------------------------------------------------
def _eval_constraints(value: dict[str, str], facts: Facts) -> list[Check]:
    out = []
    for name, spec in value.items():
        if facts.constraints is None:
            out.append(Check("constraints", None, f"pins unknown (entry looks for a pin of {name})"))
            continue
        hit = None
        for c in facts.constraints:
            if canonicalize_name(c.get("name", "")) != canonicalize_name(name):
                continue
            if spec.strip() == "*":
                hit = c
                break
            pinned = _pinned_version(c.get("specifier", ""))
            if pinned and _version_in(pinned, spec):
                hit = c
                break
        if hit:
            out.append(Check("constraints", True, f"{hit.get('requirement')} pinned in {hit.get('file')}"))
        else:
            out.append(Check("constraints", False, f"no pin of {name} {spec}"))
    return out


def _pinned_version(specifier: str) -> str | None:
    m = re.fullmatch(r"\s*===?\s*([^,\s*]+)\s*", specifier or "")
    return m.group(1) if m else None


# probe results (kernels, capabilities) ----------------------------------------------------------
def _v_scalar_table(value: Any) -> str | None:
    if not isinstance(value, dict) or not value:
        return "must be a table of id = value"
    for k, v in value.items():
        if not isinstance(v, (str, bool, int, list)):
            return f"{k}: must be a string, boolean, integer or list"
    return None


def _eval_kernels(value: dict[str, Any], facts: Facts) -> list[Check]:
    out = []
    for probe_id, want in value.items():
        result = (facts.kernels or {}).get(probe_id)
        if facts.kernels is None or result is None:
            out.append(Check("kernels", None, f"probe {probe_id} did not run"))
            continue
        status = result.get("status") if isinstance(result, dict) else result
        options = want if isinstance(want, list) else [want]
        ok = status in options
        detail = result.get("detail", "") if isinstance(result, dict) else ""
        out.append(Check("kernels", ok, f"probe {probe_id}: {status}{': ' + detail if detail else ''}"))
    return out


def _eval_capabilities(value: dict[str, Any], facts: Facts) -> list[Check]:
    out = []
    for cap, want in value.items():
        caps = facts.capabilities
        if caps is None or cap not in caps:
            out.append(Check("capabilities", None, f"{cap} unknown"))
            continue
        got = caps[cap]
        if isinstance(got, dict):  # {"value": ..., "evidence": "..."}
            got, where = got.get("value"), got.get("evidence", "")
        else:
            where = ""
        options = want if isinstance(want, list) else [want]
        ok = got is not None and got in options
        if got is None:
            out.append(Check("capabilities", None, f"{cap} unknown"))
        else:
            out.append(Check("capabilities", ok, f"{cap} = {got!r}{' (' + where + ')' if where else ''}"))
    return out


def _eval_host_machine(value: Any, facts: Facts) -> list[Check]:
    if facts.host is None:
        return [Check("host_machine", None, "host machine unknown")]
    got = facts.host.get("machine")
    ok = got in _as_list(value)
    return [Check("host_machine", ok, f"host machine {got}")]


CONDITIONS: dict[str, Condition] = {
    "gpu_arch": Condition(_v_str_list, _eval_gpu_arch, "GPU arch (detected or --arch) is one of these"),
    "packages": Condition(_v_spec_table, _eval_packages, "each package installed with a version in its specifier"),
    "not_installed": Condition(_v_str_list, _eval_not_installed, "none of these packages installed"),
    "driver": Condition(_v_spec, _eval_driver_field("version", "NVIDIA driver"), "driver version in range"),
    "cuda_driver": Condition(_v_spec, _eval_driver_field("cuda", "driver CUDA version"), "CUDA version the driver supports in range"),
    "torch_cuda": Condition(_v_torch_cuda, _eval_torch_cuda, "CUDA version torch was built for in range (\"none\": a CPU-only build)"),
    "cutedsl_build": Condition(_v_str_list, _eval_cutedsl_build, "the cutlass-dsl library build on disk"),
    "env": Condition(_v_env, _eval_env, "env vars set / unset / equal / one of"),
    "env_matches": Condition(_v_regex_table, _eval_env_matches, "env var set and matches a regular expression"),
    "modified": Condition(_v_modified, _eval_modified, "files of a package differ from its RECORD"),
    "ptxas": Condition(_v_ptxas, _eval_ptxas, "some ptxas matches source / used_by / version / sm_121a support"),
    "constraints": Condition(_v_spec_table, _eval_constraints, "a pin of the package exists in a constraints file"),
    "kernels": Condition(_v_scalar_table, _eval_kernels, "kernel / CuTe DSL probe status"),
    "capabilities": Condition(_v_scalar_table, _eval_capabilities, "static capability read from installed files"),
    "host_machine": Condition(_v_str_list, _eval_host_machine, "host CPU architecture"),
}


# ---- loading ------------------------------------------------------------------------------------

_ENTRY_REQUIRED = {"id": str, "title": str, "severity": str, "action": str, "summary": str, "remedy": str, "when": dict, "refs": list}
_ENTRY_OPTIONAL = {"symptoms": list, "verified_by": dict, "fix": str, "withdrawn": str, "verify": dict}
_STACK_REQUIRED = {"id": str, "title": str, "packages": dict, "refs": list}
_STACK_OPTIONAL = {"env": dict, "driver": str, "notes": str}


def load_file(path: Path) -> tuple[list[Entry], list[Stack]]:
    where = str(path)
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except OSError as exc:
        raise MatrixError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError(f"{where}: not valid TOML: {exc}") from None
    component = doc.get("component")
    if not isinstance(component, str) or not component:
        raise MatrixError(f"{where}: top-level field 'component' (a string) is missing")
    unknown_top = set(doc) - {"component", "entry", "stack", "schema"}
    if unknown_top:
        raise MatrixError(f"{where}: unknown top-level field(s): {', '.join(sorted(unknown_top))}")
    entries = [_entry(raw, i, component, where) for i, raw in enumerate(_table_list(doc, "entry", where))]
    stacks = [_stack(raw, i, component, where) for i, raw in enumerate(_table_list(doc, "stack", where))]
    return entries, stacks


def _table_list(doc: dict, key: str, where: str) -> list[dict]:
    value = doc.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise MatrixError(f"{where}: '{key}' must be an array of tables ([[{key}]])")
    return value


def _check_fields(raw: dict, required: dict, optional: dict, label: str) -> None:
    for name, typ in required.items():
        if name not in raw:
            raise MatrixError(f"{label}: required field '{name}' is missing")
        if not isinstance(raw[name], typ):
            raise MatrixError(f"{label}: field '{name}' must be a {typ.__name__}")
    for name, typ in optional.items():
        if name in raw and not isinstance(raw[name], typ):
            raise MatrixError(f"{label}: field '{name}' must be a {typ.__name__}")
    unknown = set(raw) - set(required) - set(optional)
    if unknown:
        raise MatrixError(f"{label}: unknown field(s): {', '.join(sorted(unknown))}")


def _check_refs(refs: list, label: str) -> None:
    if not refs:
        raise MatrixError(f"{label}: field 'refs' needs at least one citation")
    for ref in refs:
        if not isinstance(ref, str) or not re.match(r"^https?://\S+$", ref):
            raise MatrixError(f"{label}: field 'refs' has {ref!r}, which is not a URL")


def _entry(raw: dict, index: int, component: str, where: str) -> Entry:
    label = f"{where}: entry {raw.get('id', '#' + str(index + 1))!s}"
    _check_fields(raw, _ENTRY_REQUIRED, _ENTRY_OPTIONAL, label)
    if not ID_RE.match(raw["id"]):
        raise MatrixError(f"{label}: field 'id' must be lowercase letters, digits, '.' and '-'")
    if raw["severity"] not in SEVERITIES:
        raise MatrixError(f"{label}: field 'severity' must be one of {', '.join(SEVERITIES)}, not {raw['severity']!r}")
    if raw["action"] not in ACTIONS:
        raise MatrixError(f"{label}: field 'action' must be one of {', '.join(ACTIONS)}, not {raw['action']!r}")
    if not raw["when"]:
        raise MatrixError(f"{label}: field 'when' needs at least one condition")
    for key, value in raw["when"].items():
        cond = CONDITIONS.get(key)
        if cond is None:
            raise MatrixError(f"{label}: field 'when.{key}' is not a known condition (known: {', '.join(CONDITIONS)})")
        err = cond.validate(value)
        if err:
            raise MatrixError(f"{label}: field 'when.{key}' {err}")
    _check_refs(raw["refs"], label)
    if not all(isinstance(s, str) for s in raw.get("symptoms", [])):
        raise MatrixError(f"{label}: field 'symptoms' must be a list of strings")
    vb = raw.get("verified_by")
    if vb is not None and (not isinstance(vb.get("probe"), str) or vb.get("expect") not in (None, "ok", "fail", "refused", "crash", "error")):
        raise MatrixError(f"{label}: field 'verified_by' needs probe = \"id\" and expect = ok | fail | refused | crash | error")
    return Entry(
        id=raw["id"],
        title=_prose(raw["title"]),
        severity=raw["severity"],
        action=raw["action"],
        summary=_prose(raw["summary"]),
        remedy=_prose(raw["remedy"]),
        when=raw["when"],
        refs=raw["refs"],
        component=component,
        file=where,
        symptoms=raw.get("symptoms", []),
        verified_by=vb,
        fix=raw.get("fix"),
        withdrawn=raw.get("withdrawn"),
        verify=raw.get("verify"),
    )


def _prose(text: str) -> str:
    """TOML multi-line strings wrap where the author's editor did; renderers wrap for the reader."""
    return " ".join(text.split())


def _stack(raw: dict, index: int, component: str, where: str) -> Stack:
    label = f"{where}: stack {raw.get('id', '#' + str(index + 1))!s}"
    _check_fields(raw, _STACK_REQUIRED, _STACK_OPTIONAL, label)
    err = _v_spec_table(raw["packages"])
    if err:
        raise MatrixError(f"{label}: field 'packages' {err}")
    _check_refs(raw["refs"], label)
    return Stack(
        id=raw["id"],
        title=raw["title"],
        packages=raw["packages"],
        refs=raw["refs"],
        component=component,
        file=where,
        env=raw.get("env", {}),
        driver=raw.get("driver"),
        notes=raw.get("notes", ""),
    )


def load(path: Path | None = None) -> Matrix:
    """Load a matrix folder (default: the bundled one) or a single file; ids must be unique."""
    from sparkdoctor.locations import data_dir

    root = Path(path) if path else data_dir("matrix")
    if not root.exists():
        raise MatrixError(f"{root}: no such matrix file or folder")
    files = sorted(root.glob("*.toml")) if root.is_dir() else [root]
    if not files:
        raise MatrixError(f"{root}: no *.toml matrix files")
    entries: list[Entry] = []
    stacks: list[Stack] = []
    seen: dict[str, str] = {}
    for f in files:
        e, s = load_file(f)
        for item in [*e, *s]:
            if item.id in seen:
                raise MatrixError(f"{f}: id {item.id!r} is already used in {seen[item.id]}")
            seen[item.id] = str(f)
        entries += e
        stacks += s
    return Matrix(entries, stacks, [str(f) for f in files])
