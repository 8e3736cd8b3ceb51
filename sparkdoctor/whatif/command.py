"""What `sparkdoctor whatif` does once its options are parsed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sparkdoctor.cli_support import Fatal
from sparkdoctor.exitcodes import EXIT_FINDINGS, EXIT_OK


def run_whatif(specs: list[str], python: str | None, facts_file: Path | None, matrix_path: Path | None, arch: str | None,
               fail_on: str, read: bool, fmt: str) -> int:
    from sparkdoctor.check import CheckOptions, apply_arch_override, collect_facts
    from sparkdoctor.check_target import resolve_target
    from sparkdoctor.facts import Facts, FactsError
    from sparkdoctor.matrix import MatrixError, load
    from sparkdoctor.whatif import ResolveError, compare, hypothetical_facts, resolve_upgrade

    try:
        matrix = load(matrix_path)
    except MatrixError as exc:
        raise Fatal(str(exc)) from None
    target = resolve_target(python, None, None)
    interpreter = str((target.describe() or {}).get("python") or python or sys.executable)
    if facts_file is not None:
        try:
            today = Facts.load(facts_file)
        except FactsError as exc:
            raise Fatal(str(exc)) from None
    else:
        today = collect_facts(target, CheckOptions(arch=arch, kernels=False))
    today = apply_arch_override(today, arch)
    try:
        changes = resolve_upgrade(interpreter, specs, today)
    except ResolveError as exc:
        raise Fatal(str(exc)) from None
    notes: list[str] = []
    reader = None
    if read:
        from sparkdoctor.released import Reader

        machine = str((today.host or {}).get("machine") or "aarch64")
        platform = "linux-x86_64" if machine in ("x86_64", "amd64") else "linux-aarch64"
        target_py = ".".join(str((today.target or {}).get("version") or "3.12").split(".")[:2])
        reader = Reader(platform, target_py)  # the wheels the target itself would install
    try:
        predicted = hypothetical_facts(today, changes, reader, notes)
    finally:
        if reader is not None:
            reader.close()
    result = compare(today, predicted, matrix, specs, changes, notes)
    if fmt == "json":
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
    else:
        _render(result)
    return EXIT_FINDINGS if result.gate(fail_on) else EXIT_OK


def _render(result) -> None:
    from rich.console import Console

    console = Console()
    if not result.changes:
        console.print(f"nothing would change: {' '.join(result.specs)} is already satisfied")
    for c in result.changes:
        console.print(f"  {c.name}: {c.old or '(new)'} -> {c.new}")
    for label, rows in (("introduced", result.introduced), ("fixed", result.fixed), ("unchanged", result.unchanged)):
        for f in rows:
            console.print(f"{label:>10}  [{f['severity']}] {f['id']}: {f['title']}")
    for f in result.cannot_tell:
        console.print(f"cannot tell  [{f['severity']}] {f['id']}: unknown after the upgrade ({'; '.join(f['unknown'])})")
    for note in result.notes:
        console.print(f"[dim]note: {note}[/]")
    console.print(f"{len(result.introduced)} introduced, {len(result.fixed)} fixed, {len(result.unchanged)} unchanged, "
                  f"{len(result.cannot_tell)} cannot tell · matrix: {result.matrix}")
