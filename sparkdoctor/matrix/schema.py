"""The schema of one `[[entry]]` and one `[[stack]]`: every field checked, errors that name the
file, the entry and the field in one line. The loader calls this for every command that reads a
matrix, so `check --matrix`, `matrix validate` and `matrix verify` accept exactly the same files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sparkdoctor.matrix.conditions import CONDITIONS
from sparkdoctor.matrix.file_checks import parse_files_tables
from sparkdoctor.matrix.model import (
    ACTIONS,
    EVIDENCE_LEVELS,
    ID_RE,
    SEVERITIES,
    Entry,
    MatrixError,
    Stack,
)
from sparkdoctor.matrix.verify_table import parse_verify_table
from sparkdoctor.matrix.versions import shown, spec_problem
from sparkdoctor.names import name_problem

_ENTRY_REQUIRED = {"id": str, "title": str, "severity": str, "action": str, "summary": str, "remedy": str, "when": dict, "refs": list}
_ENTRY_OPTIONAL = {"symptoms": list, "verified_by": dict, "fix": str, "withdrawn": str, "verify": dict,
                   "evidence": str, "files": (dict, list), "last_verified": dict, "justifies": list,
                   "explains_probes": list, "unbracketable": str, "reference_only": str, "selected_by": list,
                   "reported": str, "added": str, "remedy_shown": str}
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_STACK_REQUIRED = {"id": str, "title": str, "packages": dict, "refs": list}
_STACK_OPTIONAL = {"env": dict, "driver": str, "notes": str, "python": str, "image_only": str}
PROBE_OUTCOMES = ("ok", "fail", "refused", "crash", "error")
# An http(s) URL of RFC 3986's characters only: a ref is drawn inside `<...>` (markdown, SARIF help), so `<`, `>`,
# quotes, spaces and control characters would end the link and start markup (`>[x](javascript:...)`, raw HTML).
_URL_CHARS = r"A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%"
_URL = re.compile(rf"https?://[A-Za-z0-9][{_URL_CHARS}]*")
_NOT_URL_CHAR = re.compile(rf"[^{_URL_CHARS}]")
# What `justifies` may name: a serving flag (--name), or an env var (NAME, or NAME=value for one value).
JUSTIFIES_RE = re.compile(r"--[a-z0-9][a-z0-9-]*|[A-Z_][A-Z0-9_]*(=\S+)?")


def label_of(kind: str, raw: dict, index: int, where: str) -> str:
    """'FILE: entry ID' for messages; an id that is not a clean one is quoted, never printed raw."""
    ident = raw.get("id")
    shown = ident if isinstance(ident, str) and ID_RE.fullmatch(ident) else (repr(ident)[:80] if ident is not None else f"#{index + 1}")
    return f"{where}: {kind} {shown}"


def _check_fields(raw: dict, required: dict, optional: dict, label: str) -> None:
    for name, typ in required.items():
        if name not in raw:
            raise MatrixError(f"{label}: required field '{name}' is missing")
        if not isinstance(raw[name], typ):
            raise MatrixError(f"{label}: field '{name}' must be a {typ.__name__}")
    for name, typ in optional.items():
        if name in raw and not isinstance(raw[name], typ):
            kind = " or ".join(t.__name__ for t in typ) if isinstance(typ, tuple) else typ.__name__
            raise MatrixError(f"{label}: field '{name}' must be a {kind}")
    unknown = set(raw) - set(required) - set(optional)
    if unknown:
        raise MatrixError(f"{label}: unknown field(s): {', '.join(sorted(map(repr, unknown)))}")


def _check_id(ident: str, label: str) -> None:
    if not ID_RE.fullmatch(ident):
        raise MatrixError(f"{label}: field 'id' must be lowercase letters, digits, '.' and '-' (no spaces or line breaks)")


def _check_refs(refs: list, label: str) -> None:
    if not refs:
        raise MatrixError(f"{label}: field 'refs' needs at least one citation")
    for ref in refs:
        if not isinstance(ref, str) or not _URL.fullmatch(ref):
            raise MatrixError(f"{label}: field 'refs' has {shown(ref)!r}, which is not a URL{_url_problem(ref)}")


def _url_problem(ref: object) -> str:
    """Where a string that starts like a URL stops being one ("" for anything else)."""
    start = re.match(r"https?://", ref) if isinstance(ref, str) else None
    if start is None or not isinstance(ref, str):
        return ""
    bad = _NOT_URL_CHAR.search(ref, start.end())
    return "" if bad is None else f": character {bad.group()!r} at {bad.start() + 1} (percent-encode it)"


def _check_verified_by(vb: Mapping[str, object] | None, probes: frozenset[str], label: str) -> None:
    if vb is None:
        return
    unknown = set(vb) - {"probe", "expect"}
    if unknown or not isinstance(vb.get("probe"), str) or vb.get("expect") not in (None, *PROBE_OUTCOMES):
        raise MatrixError(f"{label}: field 'verified_by' needs probe = \"id\" and expect = {' | '.join(PROBE_OUTCOMES)}")
    if vb["probe"] not in probes:
        raise MatrixError(f"{label}: field 'verified_by.probe' names {vb['probe']!r}, which is no probe (known: {', '.join(sorted(probes))})")


def entry_from(raw: dict, index: int, component: str, where: str, probes: frozenset[str]) -> Entry:
    label = label_of("entry", raw, index, where)
    _check_fields(raw, _ENTRY_REQUIRED, _ENTRY_OPTIONAL, label)
    _check_id(raw["id"], label)
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
    for name in ("justifies", "selected_by"):
        bad = next((j for j in raw.get(name, []) if not isinstance(j, str) or not JUSTIFIES_RE.fullmatch(j)), None)
        if bad is not None:
            raise MatrixError(f"{label}: field '{name}' has {bad!r}: give a flag (--enforce-eager) or an env var (NAME or NAME=value)")
    for name in ("reported", "added"):
        if name in raw and not _DATE.fullmatch(raw[name]):
            raise MatrixError(f"{label}: field '{name}' must be a date YYYY-MM-DD, not {raw[name]!r}")
    vb = raw.get("verified_by")
    _check_verified_by(vb, probes, label)
    _check_explains_probes(raw.get("explains_probes", []), vb, probes, label)
    if raw.get("verify") is not None:
        if not vb or not vb.get("expect"):
            raise MatrixError(f"{label}: field 'verified_by' needs probe and expect for verify")
        parse_verify_table(raw["verify"], label)
    if raw.get("files") is not None:
        parse_files_tables(raw["files"], label)
    evidence = _check_evidence(raw, label)
    _check_unbracketable(raw, evidence, label)
    _check_last_verified(raw.get("last_verified"), label)
    # the optional ones left out keep Entry's defaults
    fields = {name: raw[name] for name in ("id", "severity", "action", "when", "refs", "fix", "withdrawn", "verify", "files",
                                           "last_verified", "reported", "added") if name in raw}
    fields.update({name: _prose(raw[name]) for name in ("title", "summary", "remedy")})
    fields.update({name: _prose(raw[name]) if raw.get(name) else None for name in ("unbracketable", "reference_only", "remedy_shown")})
    fields.update({name: list(raw.get(name, [])) for name in ("symptoms", "justifies", "explains_probes", "selected_by")})
    return Entry(**fields, component=component, file=where, verified_by=vb, evidence=evidence)


def _check_unbracketable(raw: dict, evidence: str, label: str) -> None:
    """`unbracketable` says why no released file decides the entry's version bounds: it needs a bound
    to be about, and an entry that says so cannot claim `checked`."""
    why = raw.get("unbracketable")
    if why is None:
        return
    if not why.strip():
        raise MatrixError(f"{label}: field 'unbracketable' must say why no released file decides the bound")
    bounds = {**(raw["when"].get("packages") or {}), **(raw["when"].get("constraints") or {})}
    if not any(isinstance(v, str) and v.strip() != "*" for v in bounds.values()):
        raise MatrixError(f"{label}: field 'unbracketable' explains a version bound, but the entry has none")
    if evidence == "checked":
        raise MatrixError(f"{label}: field 'unbracketable' says the bound cannot be bracketed, so evidence cannot be \"checked\"")


def _check_explains_probes(names: list, vb: Mapping[str, object] | None, probes: frozenset[str], label: str) -> None:
    """Other probes whose outcome (the verified_by expect) this entry accounts for, e.g. the realistic
    tile probe that the same arch guard refuses: they must be probes, and there must be an expect."""
    if not names:
        return
    if not vb or not vb.get("expect"):
        raise MatrixError(f"{label}: field 'explains_probes' needs verified_by with an expect (the outcome it accounts for)")
    for name in names:
        if not isinstance(name, str) or name not in probes:
            raise MatrixError(f"{label}: field 'explains_probes' names {name!r}, which is no probe (known: {', '.join(sorted(probes))})")


def _check_evidence(raw: dict, label: str) -> str:
    """The evidence level, refused when the entry lacks what the level claims: `reproduced` needs a
    probe (verified_by) and a verify table that proves it on real installs, `checked` needs checks
    over the released files (a `files` table) or a verify table. Left out, an entry is `reported`."""
    level = raw.get("evidence", "reported")
    if level not in EVIDENCE_LEVELS:
        raise MatrixError(f"{label}: field 'evidence' must be one of {', '.join(EVIDENCE_LEVELS)}, not {level!r}")
    if level == "reproduced" and not (raw.get("verify") and raw.get("verified_by")):
        raise MatrixError(f"{label}: field 'evidence' is 'reproduced' but the entry has no verify table and verified_by probe that reproduce it")
    if level == "checked" and not (raw.get("files") or raw.get("verify")):
        raise MatrixError(f"{label}: field 'evidence' is 'checked' but the entry has no check (a 'files' table over the released wheels)")
    return level


def _check_last_verified(value: dict | None, label: str) -> None:
    if value is None:
        return
    unknown = set(value) - {"date", "versions"}
    date = value.get("date")
    if unknown or not isinstance(date, str) or not _DATE.fullmatch(date) or not isinstance(value.get("versions", ""), str):
        raise MatrixError(f"{label}: field 'last_verified' needs date = \"YYYY-MM-DD\" and versions = \"what it was verified against\"")


def _prose(text: str) -> str:
    """TOML multi-line strings wrap where the author's editor did; renderers wrap for the reader."""
    return " ".join(text.split())


def stack_from(raw: dict, index: int, component: str, where: str) -> Stack:
    label = label_of("stack", raw, index, where)
    _check_fields(raw, _STACK_REQUIRED, _STACK_OPTIONAL, label)
    _check_id(raw["id"], label)
    for name, spec in raw["packages"].items():
        err = name_problem(name) or spec_problem(spec)  # a key becomes a pip argument: never an option
        if err:
            raise MatrixError(f"{label}: field 'packages' {name}: {err}")
    if not raw["packages"]:
        raise MatrixError(f"{label}: field 'packages' must be a table of package = \"specifier\"")
    if "driver" in raw:
        err = spec_problem(raw["driver"])
        if err:
            raise MatrixError(f"{label}: field 'driver' {err}")
    if "env" in raw:
        bad = next((k for k, v in raw["env"].items() if not isinstance(v, str)), None)
        if bad is not None:
            raise MatrixError(f"{label}: field 'env' {bad}: must be a string (the value the stack sets)")
    if "python" in raw and not re.fullmatch(r"3\.\d+", raw["python"]):
        raise MatrixError(f"{label}: field 'python' must be a CPython version such as \"3.12\"")
    if "image_only" in raw and not raw["image_only"].strip():
        raise MatrixError(f"{label}: field 'image_only' must say why the stack exists only as an image (which image)")
    _check_refs(raw["refs"], label)
    fields = {name: raw[name] for name in ("id", "title", "packages", "refs", "driver", "python", "image_only", "env", "notes")
              if name in raw}  # the optional ones left out keep Stack's defaults
    return Stack(**fields, component=component, file=where)
