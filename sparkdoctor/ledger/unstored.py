"""A measured run the ledger could not take (another process held it past the wait, the disk filled), or one
`history --delete RUN_ID --yes` removes, kept as one JSON file so that its numbers are not lost;
`sparkdoctor history --import FILE` stores it (again).

The file is sparkdoctor's own (state_dir()/unstored-runs/, readable by its owner only), but it is read back as
any input is: bounded, and every field checked for its type, so a damaged or edited file is one line, never a
half-stored run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

from sparkdoctor import files, inputs
from sparkdoctor.ledger.store import RunRecord, levels_problem
from sparkdoctor.locations import state_dir

KIND = "sparkdoctor-unstored-run"
VERSION = 1
MAX_BYTES = 256 * inputs.MiB  # a run's samples are a few MB; a larger file is not one of these

_OBJECTS = ("recipe", "server", "facts", "workload", "summary")
_TEXTS = ("base_url", "model", "fingerprint", "tool_version", "created_at")


class UnreadableRun(ValueError):
    """The file is not a run this module kept; the message is one line saying why (with the path)."""


def folder() -> Path:
    return state_dir() / "unstored-runs"


def deleted_folder() -> Path:
    """Where `history --delete RUN_ID --yes` keeps a run before it removes it from the ledger (the same format)."""
    return state_dir() / "deleted-runs"


def keep(record: RunRecord, where: Path | None = None) -> Path:
    """Write `record` to a new file in `where` (default folder()) and return its path; OSError (files.OutputError)
    when it cannot."""
    created = record.created_at or datetime.now(timezone.utc).isoformat(timespec="seconds")
    body = {"kind": KIND, "version": VERSION, **asdict(record), "samples": [list(s) for s in record.samples],
            "created_at": created}
    where = where or folder()
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    stem = f"run-{created.replace(':', '').replace('+0000', 'Z')}-{os.getpid()}"
    path, n = where / f"{stem}.json", 1
    while path.exists():  # another run of the same second kept by a process of the same pid: never written over
        path, n = where / f"{stem}-{n}.json", n + 1
    files.write_text(path, json.dumps(body, sort_keys=True, default=str))
    os.chmod(path, 0o600)  # the facts name the user's paths and environment
    return path


def load(path: Path) -> RunRecord:
    """The run a file of keep() holds; UnreadableRun (one line) when the file is not one."""
    try:
        data = json.loads(inputs.read_text(path, MAX_BYTES))
    except OSError as exc:
        raise UnreadableRun(f"{path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise UnreadableRun(f"{path}: not JSON ({' '.join(str(exc).split())[:80]})") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise UnreadableRun(f"{path}: not a run kept by `sparkdoctor bench` (no \"kind\": \"{KIND}\")")
    if data.get("version") != VERSION:
        raise UnreadableRun(f"{path}: version {str(data.get('version'))[:20]}; this sparkdoctor reads version {VERSION}")
    problem = _problem(data)
    if problem:
        raise UnreadableRun(f"{path}: {problem}")
    fields = {k: v for k, v in data.items() if k not in ("kind", "version")}
    fields["samples"] = [tuple(s) for s in data["samples"]]
    return RunRecord(**fields)


def belongs(record: RunRecord, comparison: Mapping[str, object] | None) -> bool:
    """Whether `comparison` (Ledger.comparison()) can be the A/B the kept arm was measured in: its label for the arm
    names the run's recipe (bench labels an arm by its recipe's name, "name (path)" when both arms share one) and it
    began before the run was measured. An id alone is not enough: another ledger's A/B 1 is not this ledger's."""
    if comparison is None or record.arm not in ("A", "B"):
        return False
    label, name = comparison.get("a" if record.arm == "A" else "b"), record.recipe.get("name")
    if not (isinstance(label, str) and isinstance(name, str) and (label == name or label.startswith(f"{name} ("))):
        return False
    try:
        return datetime.fromisoformat(str(comparison.get("created_at"))) <= datetime.fromisoformat(str(record.created_at))
    except (TypeError, ValueError):  # a time without its zone against one with it, or not a time
        return False


def _problem(data: dict[str, object]) -> str | None:
    """What is wrong with a kept run's fields, or None."""
    want = {*_OBJECTS, *_TEXTS, "bench_version", "findings", "samples", "comparison_id", "arm", "memory"}
    if set(data) - {"kind", "version"} != want:
        odd = sorted(set(data) - want - {"kind", "version"}) or sorted(want - set(data))
        return f"fields {', '.join(map(str, odd))[:120]} are not a kept run's"
    bad = [k for k in _OBJECTS if not isinstance(data[k], dict)] + [k for k in _TEXTS if not isinstance(data[k], str)]
    if type(data["bench_version"]) is not int:
        bad.append("bench_version")
    if not isinstance(data["findings"], list) or not all(isinstance(f, dict) for f in data["findings"]):
        bad.append("findings")
    samples = data["samples"]
    if not isinstance(samples, list) or not all(
            isinstance(s, list) and len(s) == 4 and all(type(n) is int for n in s[:3]) and isinstance(s[3], dict) for s in samples):
        bad.append("samples")
    if data["comparison_id"] is not None and type(data["comparison_id"]) is not int:
        bad.append("comparison_id")
    if data["arm"] not in (None, "A", "B"):
        bad.append("arm")
    if data["memory"] is not None and not isinstance(data["memory"], dict):
        bad.append("memory")
    if bad:
        return f"{', '.join(bad)} not as a kept run writes {'it' if len(bad) == 1 else 'them'}"
    try:
        datetime.fromisoformat(str(data["created_at"]))
    except ValueError:
        return "created_at is not a time"
    summary = data["summary"]
    return levels_problem(summary) if isinstance(summary, dict) else None
