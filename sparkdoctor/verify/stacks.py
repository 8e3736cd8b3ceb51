"""`matrix verify --stacks`: can pip install each known-good stack on a DGX Spark? A real dry-run
resolution (`pip install --dry-run --report`) for linux aarch64 (manylinux 2.17-2.39, Ubuntu 24.04's
glibc), binary wheels only, the stack's Python (field `python`, default 3.12), with the machine's pip
configuration left out (PIP_CONFIG_FILE=/dev/null: a local constraint file must not decide what the
registry can install). A stack marked `image_only` (with the reason) is not resolved: it is only ever
run as the image it names, and nothing offers it as a pip target.

Verdicts: resolves (with the versions pip would install) / image-only / contradicted (pip cannot
install it and it is not marked image_only: its one-line reason) / error (pip could not run, or the package index
did not answer: then pip saw no release, which says nothing about the stack).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import takewhile
from pathlib import Path

from sparkdoctor import proc
from sparkdoctor.inputs import json_answer
from sparkdoctor.matrix import Stack
from sparkdoctor.unreachable import index_unreachable
from sparkdoctor.verify import venvs
from sparkdoctor.verify.venvs import bounded_pip, pip_error

RESOLVE_TIMEOUT = 600.0
DEFAULT_PYTHON = "3.12"
PLATFORMS = [f"manylinux_2_{g}_aarch64" for g in range(39, 16, -1)] + ["manylinux2014_aarch64", "linux_aarch64"]


@dataclass
class StackResult:
    id: str
    python: str
    verdict: str  # resolves | image-only | contradicted | error
    why: str
    resolved: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "python": self.python, "verdict": self.verdict, "why": self.why, "resolved": self.resolved}


def requirements(stack: Stack) -> list[str]:
    return [name if spec.strip() in ("", "*") else f"{name}{spec}" for name, spec in stack.packages.items()]


def dry_run_argv(reqs: list[str], python: str, report: Path) -> list[str]:
    argv = [*bounded_pip(sys.executable, venvs.INSTALL_MEMORY), "--disable-pip-version-check", "--no-input", "install", "--dry-run",
            "--ignore-installed", "--report", str(report), "--only-binary", ":all:", "--python-version", python, "--implementation", "cp",
            # pip before 23.1 takes platform options only with --target (nothing is installed: --dry-run)
            "--target", str(report.parent / "target")]
    argv += [arg for plat in PLATFORMS for arg in ("--platform", plat)]
    return [*argv, "--", *reqs]  # a requirement is never read as an option (a stack key such as --log=PATH)


def resolve(stack: Stack) -> StackResult:
    python = stack.python or DEFAULT_PYTHON
    if stack.image_only:
        return StackResult(stack.id, python, "image-only", f"marked image_only: {stack.image_only}")
    with tempfile.TemporaryDirectory(prefix="sparkdoctor-stack-") as tmp:
        report = Path(tmp) / "report.json"
        env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "TMPDIR": tmp}  # a wheel pip downloads for its metadata: here
        result = proc.run(dry_run_argv(requirements(stack), python, report), timeout=RESOLVE_TIMEOUT, env=env)
        if result.ok and report.is_file():
            try:
                doc = json_answer(report.read_text(encoding="utf-8"))
                got = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in doc.get("install", [])}  # type: ignore[attr-defined]
            except (ValueError, KeyError, TypeError) as exc:
                return StackResult(stack.id, python, "error", f"pip's report did not parse: {exc}")
            picked = ", ".join(f"{n} {got[n]}" for n in sorted(got) if n in {k.lower() for k in stack.packages})
            return StackResult(stack.id, python, "resolves", f"pip resolves {len(got)} distributions for linux aarch64, CPython {python}: {picked}", got)
        if result.timed_out or result.start_error or result.signal or "MemoryError" in (result.stderr or ""):
            return StackResult(stack.id, python, "error", pip_error(result))  # stopped: no verdict on the stack
        why = conflict(result)
        unreachable = index_unreachable(f"{result.stderr}\n{result.stdout}")
        if unreachable and not why.startswith("conflict:"):  # no release seen is no release missing
            return StackResult(stack.id, python, "error", f"the package index did not answer: {unreachable[:300]}")
        return StackResult(stack.id, python, "contradicted",
                           f"pip cannot install it for linux aarch64, CPython {python}: {why} (mark it image_only, with the reason, or fix its pins)")


def conflict(result: proc.ProcResult) -> str:
    """pip's reason in one line: the lines under "The conflict is caused by:" when it printed them."""
    lines = (result.stderr or "").splitlines() + (result.stdout or "").splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("The conflict is caused by"):
            cause = [x.strip() for x in takewhile(str.strip, lines[i + 1 :])]
            if cause:
                more = f"; ... ({len(cause) - 4} more)" if len(cause) > 4 else ""
                return "conflict: " + "; ".join(cause[:4]) + more
    return pip_error(result)


def resolve_stacks(stacks: list[Stack], log: Callable[[str], None] | None = None) -> list[StackResult]:
    out = []
    for s in stacks:
        if log:
            log(f"resolving {s.id}")
        out.append(resolve(s))
    return out
