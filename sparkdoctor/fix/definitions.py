"""Fix definitions: fixes/<id>.toml, one fix per file, each a list of actions from a FIXED vocabulary.

No shell strings, ever: an action names packages, requirements, a pin, an env var or a flag, and
the engine alone decides which installer call or file edit that becomes. Every field is checked
here, and a bad one is one line naming the file and the field. Which matrix entries may name which
fix is checked by the matrix loader (it reads the ids only, so matrix never imports fix).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from sparkdoctor.fix.interface import ActionKind, DefinitionError
from sparkdoctor.inputs import MiB, read_toml
from sparkdoctor.locations import data_dir

SCHEMA = 1
ID_RE = re.compile(r"[a-z0-9][a-z0-9.-]*[a-z0-9]")
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
FLAG_RE = re.compile(r"--?[A-Za-z0-9][A-Za-z0-9_.-]*")

# kind -> (required fields and types, optional fields and types)
VOCABULARY: dict[ActionKind, tuple[dict[str, type], dict[str, type]]] = {
    ActionKind.install: ({"requirements": list}, {}),
    ActionKind.uninstall: ({"packages": list}, {}),
    ActionKind.reinstall_family: ({"packages": list, "requirement": str, "version": str}, {"last": str}),
    ActionKind.restore_files: ({"packages": list}, {"last": str}),
    ActionKind.pin: ({"package": str}, {"specifier": str, "remove": bool}),
    ActionKind.set_env: ({"name": str, "value": str}, {}),
    ActionKind.unset_env: ({"names": list}, {}),
    ActionKind.add_flag: ({"flag": str}, {"value": str}),
    ActionKind.drop_flag: ({"flag": str}, {}),
}
_TOP = {"schema", "id", "title", "summary", "action"}


@dataclass
class ActionSpec:
    kind: ActionKind
    fields: dict[str, Any]


@dataclass
class FixDefinition:
    id: str
    title: str
    actions: list[ActionSpec]
    packages: set[str] = field(default_factory=set)  # every package any action may touch


def _need(cond: bool, label: str, message: str) -> None:
    if not cond:
        raise DefinitionError(f"{label}: {message}")


def _one_line(value: str) -> bool:
    """An env value an env file holds as one line, whoever reads it: no NUL and no line break of any kind (the env
    file is read back with str.splitlines, which ends a line at \\r, a form feed, \\x85 or \\u2028 as at \\n: a value
    holding one would add a variable of its own, PYTHONPATH=..., to the env the check after the apply runs with);
    a tab is kept."""
    return not any(c != "\t" and unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in value)


def _names(values: list, label: str, fld: str) -> list[str]:
    _need(bool(values) and all(isinstance(v, str) for v in values), label, f"field '{fld}' must be a non-empty list of package names")
    for v in values:
        _need(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", v) is not None, label, f"field '{fld}' has {v!r}, which is not a package name")
    return [canonicalize_name(v) for v in values]


def _requirement(text: Any, label: str, fld: str, exact: bool) -> Requirement:
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise DefinitionError(f"{label}: field '{fld}' has {text!r}: {str(exc).splitlines()[0]}") from None
    _need(req.url is None and req.marker is None, label, f"field '{fld}' has {text!r}: a URL or marker is not allowed")
    if exact:
        specs = list(req.specifier)
        _need(len(specs) == 1 and specs[0].operator == "==" and "*" not in specs[0].version, label,
              f"field '{fld}' has {text!r}: install takes exact requirements (name==version)")
    else:
        _need(not req.specifier, label, f"field '{fld}' has {text!r}: give the version in 'version', not here")
    return req


def _specifier(text: str, label: str, fld: str) -> None:
    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        raise DefinitionError(f"{label}: field '{fld}' has {text!r}, which is not a version specifier") from None
    _need(bool(text.strip()), label, f"field '{fld}' is empty")


def action_from(raw: Any, index: int, where: str) -> ActionSpec:
    label = f"{where}: action #{index + 1}"
    _need(isinstance(raw, dict), label, "must be a table ([[action]])")
    kind = raw.get("kind")
    _need(isinstance(kind, str) and kind in VOCABULARY, label, f"field 'kind' must be one of {', '.join(VOCABULARY)}, not {kind!r}")
    label = f"{where}: action #{index + 1} ({kind})"
    required, optional = VOCABULARY[kind]
    for name, typ in required.items():
        _need(name in raw, label, f"required field '{name}' is missing")
        _need(isinstance(raw[name], typ), label, f"field '{name}' must be a {typ.__name__}")
    for name, typ in optional.items():
        _need(name not in raw or isinstance(raw[name], typ), label, f"field '{name}' must be a {typ.__name__}")
    unknown = set(raw) - set(required) - set(optional) - {"kind"}
    _need(not unknown, label, f"unknown field(s): {', '.join(sorted(map(repr, unknown)))}")
    fields = {k: v for k, v in raw.items() if k != "kind"}
    if kind == "install":
        _need(bool(raw["requirements"]), label, "field 'requirements' must not be empty")
        for text in raw["requirements"]:
            _requirement(text, label, "requirements", exact=True)
    elif kind in ("uninstall", "restore-files"):
        fields["packages"] = _names(raw["packages"], label, "packages")
        if "last" in raw:
            fields["last"] = _names([raw["last"]], label, "last")[0]
            _need(fields["last"] in fields["packages"], label, "field 'last' must name one of 'packages'")
    elif kind == "reinstall-family":
        fields["packages"] = _names(raw["packages"], label, "packages")
        req = _requirement(raw["requirement"], label, "requirement", exact=False)
        _need(canonicalize_name(req.name) in fields["packages"], label, "field 'requirement' must name a package of the family")
        if raw["version"] != "installed":
            _specifier(raw["version"], label, "version")
        if "last" in raw:
            fields["last"] = _names([raw["last"]], label, "last")[0]
            _need(fields["last"] in fields["packages"], label, "field 'last' must name a package of the family")
    elif kind == "pin":
        fields["package"] = _names([raw["package"]], label, "package")[0]
        _need(("specifier" in raw) != bool(raw.get("remove")), label, "give exactly one of 'specifier' or remove = true")
        if "specifier" in raw:
            _specifier(raw["specifier"], label, "specifier")
    elif kind in ("set-env", "unset-env"):
        names = [raw["name"]] if kind == "set-env" else raw["names"]
        _need(bool(names) and all(isinstance(n, str) and ENV_NAME_RE.fullmatch(n) for n in names), label,
              f"field '{'name' if kind == 'set-env' else 'names'}' must name environment variables (letters, digits, _)")
        if kind == "set-env":
            _need(_one_line(raw["value"]), label, "field 'value' must be one line (no line break or control character)")
    elif kind in ("add-flag", "drop-flag"):
        _need(FLAG_RE.fullmatch(raw["flag"]) is not None, label, f"field 'flag' has {raw['flag']!r}, which is not a --flag")
    return ActionSpec(ActionKind(kind), fields)


def touched_packages(spec: ActionSpec) -> set[str]:
    if spec.kind is ActionKind.install:
        return {canonicalize_name(Requirement(r).name) for r in spec.fields["requirements"]}
    if spec.kind in (ActionKind.uninstall, ActionKind.restore_files, ActionKind.reinstall_family):
        return set(spec.fields["packages"])
    if spec.kind is ActionKind.pin:
        return {spec.fields["package"]}
    return set()


def load_file(path: Path) -> FixDefinition:
    where = str(path)
    doc: Any = read_toml(path, MiB, DefinitionError)  # a regular file, 1 MiB at most: a FIFO is refused, never waited on
    schema = doc.get("schema", SCHEMA)
    _need(type(schema) is int and schema == SCHEMA, where, f"field 'schema' is {schema!r}; this sparkdoctor reads fix schema {SCHEMA} (upgrade sparkdoctor for newer files)")
    unknown = set(doc) - _TOP
    _need(not unknown, where, f"unknown top-level field(s): {', '.join(sorted(map(repr, unknown)))}")
    ident = doc.get("id")
    _need(isinstance(ident, str) and ID_RE.fullmatch(ident) is not None, where, "field 'id' must be lowercase letters, digits, '.' and '-'")
    _need(ident == path.stem, where, f"field 'id' is {ident!r} but the file is named {path.name}: a fix file is named <id>.toml")
    for name in ("title", "summary"):
        _need(isinstance(doc.get(name), str) and doc[name].strip() != "", where, f"field '{name}' (a string) is missing")
    raw_actions = doc.get("action")
    _need(isinstance(raw_actions, list) and bool(raw_actions), where, "field 'action' needs at least one [[action]]")
    actions = [action_from(raw, i, where) for i, raw in enumerate(raw_actions)]
    return FixDefinition(ident, doc["title"].strip(), actions, set().union(*(touched_packages(a) for a in actions)))


def load_all(folder: Path | None = None) -> dict[str, FixDefinition]:
    root = Path(folder) if folder else data_dir("fixes")
    if not root.is_dir():
        raise DefinitionError(f"{root}: no such fixes folder")
    return {d.id: d for d in (load_file(p) for p in sorted(root.glob("*.toml")))}
