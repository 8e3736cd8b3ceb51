"""Validate a whole journal.json before anything is done from it: every field a rollback reads has
the type it must have, every copy it names lies inside the journal. A damaged journal is refused
whole, in one line naming the field, BEFORE the first step (never half-executed).

Format history (pyperf's way: old journals are read, never rewritten):
  1  the first format: wheels {name: file | None}
  2  adds wheel_files {file: {size, sha256}} (the saved wheels are verified before a rollback
     destroys anything) and outside {file, sha256} (the size and mtime of every RECORD-listed file of
     every dist the plan does not touch, in a file of its own beside journal.json)
"""

from __future__ import annotations

from typing import Any

from sparkdoctor.fix.interface import JournalError, StepKind
from sparkdoctor.fix.model import Plan

READS = (1, 2)


class _Bad(Exception):
    pass


def _need(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise _Bad(f"field '{where}' {what}")


def _str(value: object, where: str, optional: bool = False) -> None:
    _need(isinstance(value, str) or (optional and value is None), where, "must be a string" + (" or null" if optional else ""))


def _int(value: object, where: str, optional: bool = False) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    _need(ok or (optional and value is None), where, "must be a non-negative integer" + (" or null" if optional else ""))


def _rel(value: Any, where: str) -> None:
    """A copy's path: inside the journal folder, never absolute, never up."""
    _str(value, where)
    _need(not value.startswith("/") and ".." not in value.split("/") and value.split("/")[0] in ("copies", "wheels"),
          where, f"is {value!r}: not a path inside the journal")


def _dict(value: Any, where: str) -> dict:
    _need(isinstance(value, dict), where, "must be an object")
    return value


def _list(value: Any, where: str) -> list:
    _need(isinstance(value, list), where, "must be a list")
    return value


def _check(data: Any) -> None:
    data = _dict(data, "(top)")
    version = data.get("journal_version")
    _need(type(version) is int and version in READS, "journal_version", f"is {version!r}; this sparkdoctor reads {', '.join(map(str, READS))} (upgrade sparkdoctor)")
    _str(data.get("id"), "id")
    _str(data.get("installer"), "installer")
    target = _dict(data.get("target"), "target")
    _str(target.get("python"), "target.python")
    _str(target.get("kind", "python"), "target.kind")

    plan = _dict(data.get("plan"), "plan")
    raw_steps = plan.get("steps")
    for i, raw in enumerate(raw_steps if isinstance(raw_steps, list) else []):
        op = raw.get("op") if isinstance(raw, dict) else None
        _need(op in StepKind.values(), f"plan.steps[{i}].op", f"is {op!r}")
    try:
        parsed = Plan.from_dict(plan)
    except (TypeError, ValueError, AttributeError) as exc:
        raise _Bad(f"field 'plan' is not a plan: {exc}") from None
    for i, s in enumerate(parsed.steps):
        for name in ("names", "requirements", "constraints"):
            _need(isinstance(getattr(s, name), list) and all(isinstance(x, str) for x in getattr(s, name)),
                  f"plan.steps[{i}].{name}", "must be a list of strings")
        if s.op is StepKind.edit:
            _str(s.path, f"plan.steps[{i}].path")
            _str(s.new_text, f"plan.steps[{i}].new_text")
            _need(s.side in ("target", "host"), f"plan.steps[{i}].side", f"is {s.side!r}")
    _need(isinstance(plan.get("touched", []), list), "plan.touched", "must be a list")
    for i, p in enumerate(_list(data.get("packages_before"), "packages_before")):
        _str(_dict(p, f"packages_before[{i}]").get("name"), f"packages_before[{i}].name")
        _str(p.get("version"), f"packages_before[{i}].version")
    for k, v in _dict(data.get("touched_before"), "touched_before").items():
        _str(v, f"touched_before.{k}")
    for k, v in _dict(data.get("hashes_before"), "hashes_before").items():
        _str(v, f"hashes_before[{k!r}]", optional=True)
    for i, row in enumerate(_list(data.get("files"), "files")):
        where = f"files[{i}]"
        _str(_dict(row, where).get("path"), where + ".path")
        _need(row.get("side", "target") in ("target", "host"), where + ".side", f"is {row.get('side')!r}")
        _need(isinstance(row.get("existed"), bool), where + ".existed", "must be true or false")
        if row["existed"]:
            _rel(row.get("copy"), where + ".copy")
            _str(row.get("sha256"), where + ".sha256")
        _int(row.get("mode"), where + ".mode", optional=True)
    for name, rows in _dict(data.get("dist_files"), "dist_files").items():
        for i, row in enumerate(_list(rows, f"dist_files.{name}")):
            where = f"dist_files.{name}[{i}]"
            _str(_dict(row, where).get("path"), where + ".path")
            if row.get("copy") is not None:
                _rel(row["copy"], where + ".copy")
            _int(row.get("mode"), where + ".mode", optional=True)
    for name, fname in _dict(data.get("wheels"), "wheels").items():
        _str(fname, f"wheels.{name}", optional=True)
        _need(fname is None or ("/" not in fname and fname not in ("", ".", "..")), f"wheels.{name}", f"is {fname!r}: not a file name")
    if version >= 2:
        for fname, row in _dict(data.get("wheel_files"), "wheel_files").items():
            _int(_dict(row, f"wheel_files.{fname}").get("size"), f"wheel_files.{fname}.size")
            _str(row.get("sha256"), f"wheel_files.{fname}.sha256")
        outside = data.get("outside")
        if outside is not None:
            _str(_dict(outside, "outside").get("file"), "outside.file")
            _str(outside.get("sha256"), "outside.sha256")


def validate(data: Any, where: str) -> dict[str, object]:
    """data, if every field a rollback reads is well formed; else JournalError naming the field."""
    try:
        _check(data)
    except _Bad as exc:
        raise JournalError(f"{where}: {exc}: the journal is damaged; nothing was done from it") from None
    return data
