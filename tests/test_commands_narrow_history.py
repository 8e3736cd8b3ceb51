"""Commands copied whole from fleet check, bench and history, and `history RUN_ID` / `history --compare A B` at a narrow
terminal.

Before: fleet's `do:` lines were wrapped as prose at the width COLUMNS says (`docker rm -f` on one line, the container
on the next), history's delete and bench's A/B lines said their `sparkdoctor ...` command inside a sentence that the
terminal wrapped, and at 50 or 60 columns `history RUN_ID` drew its ten-column table with each cell cut to a letter
and an ellipsis and `history --compare` split a figure's name over two rows of its table. Now each command is on a
line of its own, whole at any width, and a table too narrow to hold its words is drawn as items, a cell a line
(`head: value`), wrapped under the item."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from tests.fleet.test_fleet_memory_fit import (  # noqa: F401  (qwen3_8b: a fixture)
    LEAKED,
    healthy,
    meminfo,
    qwen3_8b,
    strained,
)
from tests.memory.conftest import write_recipe
from tests.pty_terminal import at_terminal

REPO = Path(__file__).resolve().parents[1]
FACTS = REPO / "tests" / "data" / "facts"
WIDTHS = (50, 80, 200)
BOXES = re.compile("[┃│┏┓┗┛┡┩━─]")


def whole(text: str, command: str) -> bool:
    return any(line.strip() == command for line in text.splitlines())


def page_cache(tmp: Path) -> Path:
    """gb10-healthy with 60 GiB available, 50 GiB of it clean page cache: the launch fits only once that is dropped."""
    root = healthy(tmp, "page-cache")
    meminfo(root, 60, cached_gib=50)
    return root


@pytest.fixture(scope="module")
def fleet_runs(tmp_path_factory, qwen3_8b):  # noqa: F811
    """`fleet check --hosts local --recipe R` at each width (fleet's console is drawn as wide as COLUMNS says, on a
    pipe too) on a node whose leaked container holds 30 GiB, and on one whose free memory is page cache."""
    tmp = tmp_path_factory.mktemp("fleet")
    recipe = write_recipe(tmp, qwen3_8b, "--max-model-len", "32768", "--gpu-memory-utilization", "0.7")
    roots = {"leaked": strained(tmp), "cache": page_cache(tmp)}
    runs = {}
    for (kind, root), width in ((kr, w) for kr in roots.items() for w in WIDTHS):
        env = {**os.environ, "SPARKDOCTOR_HOST_ROOT": str(root), "COLUMNS": str(width)}
        runs[kind, width] = subprocess.run([sys.executable, "-m", "sparkdoctor", "fleet", "check", "--hosts", "local",
                                            "--recipe", str(recipe)], capture_output=True, text=True, timeout=300, env=env)
    return runs


@pytest.mark.parametrize("width", WIDTHS)
def test_fleet_checks_do_line_prints_its_command_whole(fleet_runs, width):
    done = fleet_runs["leaked", width]
    assert done.returncode == 1, done.stdout + done.stderr
    command = f"docker rm -f {LEAKED[:12]}"
    assert whole(done.stdout, command), done.stdout
    lines = done.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == command)
    before = " ".join(line.strip() for line in lines[at - 3:at])
    assert "do: if container" in before and "remove it:" in before, done.stdout  # the prose before it, still said
    assert "(or podman)" in lines[at + 1], done.stdout  # and after it


@pytest.mark.parametrize("width", WIDTHS)
def test_fleet_checks_page_cache_remedy_prints_its_command_whole(fleet_runs, width):
    """A piped command is found only quoted (views/commands.py): the memory verdict's remedies now quote theirs."""
    done = fleet_runs["cache", width]
    assert done.returncode == 1, done.stdout + done.stderr
    assert whole(done.stdout, "sync; echo 3 | sudo tee /proc/sys/vm/drop_caches"), done.stdout
    assert "clean page cache the kernel must give back" in " ".join(done.stdout.split()), done.stdout


@pytest.fixture(scope="module")
def ledger(tmp_path_factory) -> Path:
    """Two A/Bs (runs 1-2 and 3-4), the second measured on an older torch: four runs, two toolchains."""
    from sparkdoctor.ledger import Ledger
    from tests.rerun.ledgerdata import add_ab, older, write_recipe

    tmp = tmp_path_factory.mktemp("ledger")
    facts = json.loads((FACTS / "nogpu-clean.json").read_text())
    with Ledger(tmp / "l.sqlite") as led:
        paths = {"A": write_recipe(tmp, "one-seq-long-recipe-name"), "B": write_recipe(tmp, "default")}
        add_ab(led, paths, facts, {"A": [40.0, 41.0, 40.5], "B": [100.0, 99.0, 101.0]}, "x")
        add_ab(led, paths, older(facts, torch="2.7.0+cu126"), {"A": [38.0, 39.0, 38.5], "B": [90.0, 91.0, 92.0]}, "y")
    return tmp / "l.sqlite"


def history(ledger: Path, columns: int, *args: str):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    return at_terminal([sys.executable, "-m", "sparkdoctor", "history", "--ledger", str(ledger), *args], columns,
                       dict(env, TERM="xterm", PYTHONPATH=str(REPO)), cwd=str(ledger.parent))


def readable(lines: list[str], columns: int) -> None:
    """Every line fits, no table is drawn squeezed, and no cell is cut to an ellipsis."""
    assert max(len(line) for line in lines) <= columns, [line for line in lines if len(line) > columns]
    assert not any(BOXES.search(line) for line in lines), "\n".join(lines)
    assert not any("…" in line for line in lines), "\n".join(lines)


@pytest.mark.parametrize("columns", [50, 60])
def test_history_of_one_run_at_a_narrow_terminal_is_a_value_a_line(ledger, columns):
    seen = history(ledger, columns, "1")
    assert seen.code == 0, seen.text
    readable(seen.lines, columns)
    lines = [line.strip() for line in seen.lines]
    assert "conc: 1" in lines, seen.text
    for value in ("requests: -", "decode tok/s/stream (client median): -", "bursts: -"):
        assert value in lines, seen.text  # a cell a line, its head named, never split


@pytest.mark.parametrize("columns", [50, 60])
def test_history_compare_at_a_narrow_terminal_is_a_value_a_line(ledger, columns):
    seen = history(ledger, columns, "--compare", "1", "--compare", "3")
    assert seen.code == 0, seen.text
    readable(seen.lines, columns)
    lines = [line.strip() for line in seen.lines]
    for value in ("run 1: 40.00", "run 3: 38.00", "b/a: 0.950", "figure: decode tok/s/stream (headline)"):
        assert value in lines, seen.text
    torch = next(i for i, line in enumerate(lines) if line == "what: packages.torch")
    assert lines[torch + 1].startswith("run 1: ['2.13") and lines[torch + 2].startswith("run 3: ['2.7.0+cu126'"), seen.text


def test_history_at_a_wide_terminal_keeps_its_tables(ledger):
    seen = history(ledger, 200, "--compare", "1", "--compare", "3")
    assert seen.code == 0 and "┃ conc ┃" in seen.text and "packages.torch" in seen.text, seen.text


@pytest.mark.parametrize("width", WIDTHS)
def test_history_delete_prints_its_commands_whole(ledger, width):
    seen = history(ledger, width, "--delete", "2")
    assert seen.code == 0, seen.text
    text = "\n".join(seen.lines)
    assert whole(text, "sparkdoctor history --delete 2 --yes"), seen.text
    assert "nothing changed:" in text and "removes it" in text, seen.text


@pytest.mark.parametrize("width", WIDTHS)
def test_bench_ab_lines_print_their_commands_whole(width):
    from sparkdoctor.views.bench import render_comparison

    ratio = {"ratio": 1.0, "ci_low": 0.9, "ci_high": 1.1, "method": "bootstrap-rounds", "verdict": "no difference", "pairs": 1}
    comp = {"a": "a", "b": "b", "order": ["A", "B"], "verdict": "no difference", "runs": [1, 2], "load": {},
            "correctness": {"wrong": ["B"]}, "levels": [{"concurrency": 1, "a": [1.0], "b": [1.0], "ratio": ratio, "noise": {}}]}
    console = Console(width=width, no_color=True)
    with console.capture() as out:
        render_comparison(console, comp)
    assert whole(out.get(), "sparkdoctor history RUN_ID"), out.get()
    assert whole(out.get(), "sparkdoctor bench RECIPE --calibrate"), out.get()
