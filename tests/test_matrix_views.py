"""`matrix list` and `matrix show` read on an 80-column terminal (and narrower): a title column a
few characters wide, verify tables printed as Python lists and URLs folded mid-way were all
shipped once. The bundled matrix is the fixture: it is what people read."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from sparkdoctor import matrix
from sparkdoctor.views.matrix import list_matrix, show_item

MATRIX = matrix.load()


def rendered(fn, item, width: int) -> str:
    buf = io.StringIO()
    fn(item, console=Console(file=buf, width=width, no_color=True))
    return buf.getvalue()


@pytest.mark.parametrize("width", [80, 100])
def test_list_reads_at_terminal_widths(width):
    out = rendered(list_matrix, MATRIX, width)
    lines = out.splitlines()
    items = len(MATRIX.entries) + len(MATRIX.stacks)
    assert len(lines) < 4 * items, f"{len(lines)} lines for {items} items"
    flat = " ".join(out.split())
    for e in MATRIX.entries:
        if not e.withdrawn:
            assert " ".join(e.title.split()) in flat, e.id
        row = next(line for line in lines if line.startswith(e.id + " "))
        assert ("withdrawn" if e.withdrawn else e.severity) in row and e.component in row, row
    assert all(len(line.rstrip()) <= width for line in lines if not line.startswith(tuple(e.id for e in MATRIX.entries)))


def test_list_uses_a_title_column_when_wide():
    out = rendered(list_matrix, MATRIX, 200)
    e = MATRIX.entries[0]
    assert any(line.startswith(e.id) and e.title in line for line in out.splitlines())


def test_show_prints_verify_tables_as_install_steps():
    e = MATRIX.get("cutedsl-wheel-collision")
    assert e is not None and e.verify
    out = rendered(show_item, e, 100)
    assert "[[" not in out and "{'steps'" not in out and "['" not in out
    assert "pip install nvidia-cutlass-dsl[cu13]==4.5.0" in out
    assert "pip install --force-reinstall --no-deps" in out
    assert "(the probe must give fail)" in out and "(the probe must not give fail)" in out


@pytest.mark.parametrize("width", [40, 60, 80])
def test_urls_are_never_broken(width):
    for item in [*MATRIX.entries, *MATRIX.stacks]:
        lines = rendered(show_item, item, width).splitlines()
        for url in item.refs:
            assert any(url in line for line in lines), (item.id, url, width)
