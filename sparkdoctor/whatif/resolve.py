"""Resolve a proposed upgrade with the target's own installer, without installing anything:
`pip install --dry-run --report` run by sparkdoctor's pip for the target interpreter (`--python`,
pip >= 22.3) or by the target's own pip, with every constraint file the target's Facts found."""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from sparkdoctor import proc
from sparkdoctor.errors import SparkdoctorError

RESOLVE_TIMEOUT = 600.0


class ResolveError(SparkdoctorError, RuntimeError):
    """The upgrade cannot be resolved (conflict, no such version, no registry); one line (exit 2)."""

    code = "whatif-resolve"


@dataclass(frozen=True)
class Change:
    name: str  # canonical
    old: str | None  # None: a new install
    new: str
    url: str | None = None
    sha256: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "from": self.old, "to": self.new, "url": self.url, "sha256": self.sha256}


def dry_run_argv(python: str, specs: list[str], constraints: list[str], report: Path) -> list[str]:
    from sparkdoctor.verify.venvs import own_pip

    pip = [sys.executable, "-m", "pip", "--python", python] if own_pip() else [python, "-m", "pip"]
    argv = [*pip, "--disable-pip-version-check", "--no-input", "install", "--dry-run", "--report", str(report)]
    for c in constraints:
        argv += ["-c", c]
    return argv + specs


def constraint_files(facts: Any) -> list[str]:
    files = []
    for row in facts.constraints or []:
        f = row.get("file") if isinstance(row, dict) else None
        if f and f not in files and Path(f).is_file():
            files.append(f)
    return files


def resolve_upgrade(python: str, specs: list[str], facts: Any) -> list[Change]:
    """The distributions the upgrade would install or change, from pip's own dry run."""
    from sparkdoctor.verify.stacks import conflict

    with tempfile.TemporaryDirectory(prefix="sparkdoctor-whatif-") as tmp:
        report = Path(tmp) / "report.json"
        result = proc.run(dry_run_argv(python, specs, constraint_files(facts), report), timeout=RESOLVE_TIMEOUT)
        if not result.ok or not report.is_file():
            if result.timed_out or result.start_error or result.signal:
                raise ResolveError(f"pip's dry run did not finish: {result.describe_failure()}")
            raise ResolveError(f"{' '.join(specs)} cannot be resolved in {python}: {conflict(result)}")
        try:
            doc = json.loads(report.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ResolveError(f"pip's --report did not parse: {exc}") from None
    changes = []
    for item in doc.get("install", []):
        meta = item.get("metadata") or {}
        name = canonicalize_name(str(meta.get("name", "")))
        if not name:
            continue
        info = item.get("download_info") or {}
        hashes = (info.get("archive_info") or {}).get("hashes") or {}
        old = (facts.package(name) or {}).get("version")
        new = str(meta.get("version"))
        if old != new:
            changes.append(Change(name, old, new, info.get("url"), hashes.get("sha256")))
    return sorted(changes, key=lambda c: c.name)
