"""What `sparkdoctor whatif` does once its options are parsed."""

from __future__ import annotations

import sys
from pathlib import Path

from sparkdoctor.exitcodes import EXIT_FINDINGS, EXIT_OK


def run_whatif(specs: list[str], python: str | None, facts_file: Path | None, matrix_path: Path | None, arch: str | None,
               fail_on: str, read: bool, fmt: str) -> int:
    from sparkdoctor.check import CheckOptions, apply_arch_override, collect_facts
    from sparkdoctor.facts import Facts
    from sparkdoctor.matrix import load
    from sparkdoctor.target.choose import resolve_target
    from sparkdoctor.whatif import compare, hypothetical_facts, resolve_upgrade

    # a MatrixError, FactsError or ResolveError ends the command with its own exit code (2)
    matrix = load(matrix_path)
    target = resolve_target(python, None, None)
    interpreter = str((target.describe() or {}).get("python") or python or sys.executable)
    if facts_file is not None:
        today = Facts.load(facts_file)
    else:
        today = collect_facts(target, CheckOptions(arch=arch, kernels=False))
    today = apply_arch_override(today, arch)
    changes = resolve_upgrade(interpreter, specs, today)
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
    code = EXIT_FINDINGS if result.gate(fail_on) else EXIT_OK
    if fmt == "json":
        from sparkdoctor.emit import emit_json

        return emit_json("whatif", "whatif", result.to_dict(), code)
    from sparkdoctor.emit import emit_console

    emit_console(lambda console: _render(result, console))
    return code


def _render(result, console) -> None:
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
