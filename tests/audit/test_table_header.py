"""audit's byte table names every column: its last (the group's note: `one row per token`, `not read ...`) had an
empty header cell, so the header row ended in a blank."""

from __future__ import annotations

from rich.console import Console

from sparkdoctor.audit.roofline import AuditOptions, run_audit
from sparkdoctor.views.audit import render_console
from tests.audit import builders


def test_every_column_of_the_byte_table_has_a_name(tmp_path):
    audit = run_audit(AuditOptions(str(builders.qwen3_8b(tmp_path / "qwen3-8b", None)), gpu="gb10"))
    console = Console(width=200, record=True, color_system=None)
    with console.capture() as captured:
        render_console(audit, console)
    header = next(line for line in captured.get().splitlines() if "read/token" in line)
    cells = [cell.strip() for cell in header.split("┃")]
    assert cells == ["group", "format", "params", "stored", "read/token", "note"], header
