"""Only what the plan names is touched: every RECORD-listed file of every dist the plan does NOT
touch is stat'ed before the apply (size, mtime) and again after it and after a rollback.

What changed outside the plan is put back where it can be: a `__pycache__` file (pip and uv list
them in RECORD without a hash; an installer may delete or rewrite one) is compiled again from its
source, which gives the same size and the same bytes for the same interpreter. Any other file that
changed outside the plan cannot be restored from the journal (it holds no copy of it): it is named,
and the apply is undone.
"""

from __future__ import annotations

from pathlib import Path

from sparkdoctor.fix.interface import FixError
from sparkdoctor.target.local import Target, TargetError, parse_json_probe

SCRIPT = Path(__file__).with_name("target_stat.py")
TIMEOUT = 300.0


def _run(target: Target, args: list[str]) -> dict:
    try:
        return parse_json_probe(target, SCRIPT, target.run_script(SCRIPT, args, TIMEOUT))
    except TargetError as exc:
        raise FixError(f"cannot read the files outside the plan: {exc}") from None


def snapshot(target: Target, skip: list[str]) -> dict[str, list[int] | None]:
    """path -> [size, mtime_ns] (None: listed but missing) of every dist's files but the skipped dists'."""
    data = _run(target, ["stat", *[a for n in skip for a in ("--skip", n)]]).get("stat")
    if not isinstance(data, dict):
        raise FixError("cannot read the files outside the plan: the target's answer has no 'stat'")
    return data


def _is_pyc(path: str) -> bool:
    return path.endswith(".pyc") and "/__pycache__/" in path


def changed(before: dict[str, list[int] | None], now: dict[str, list[int] | None]) -> list[str]:
    """Files there before that are gone or another size now; a non-.pyc file rewritten (mtime) too.
    A file that appeared (a .pyc written by an import) is not a loss and is left alone."""
    out = []
    for path, was in before.items():
        if was is None:
            continue
        got = now.get(path)
        if got is None or got[0] != was[0] or (not _is_pyc(path) and got[1] != was[1]):
            out.append(path)
    return sorted(out)


def restore(target: Target, before: dict[str, list[int] | None], skip: list[str]) -> tuple[list[str], list[str]]:
    """Put back what changed outside the plan where that can be done; (restored, not restorable)."""
    diff = changed(before, snapshot(target, skip))
    pycs = [p for p in diff if _is_pyc(p)]
    restored: list[str] = []
    if pycs:
        done = _run(target, ["compile", *pycs])
        restored = [p for p in done.get("compiled") or [] if isinstance(p, str)]
        diff = changed(before, snapshot(target, skip))
    return restored, diff
