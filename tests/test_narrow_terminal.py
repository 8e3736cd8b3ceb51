"""`diff` and `recipe check` at a narrow terminal (a real pseudo-terminal, 60 columns): every line fits, and what
rich wraps stays aligned under its column; on a pipe the lines are those of before, one per item, whatever COLUMNS
says (README, "Console output")."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pty_terminal import at_terminal

REPO = Path(__file__).resolve().parents[1]
FACTS = REPO / "tests" / "data" / "facts"
RECIPE = REPO / "recipes" / "qwen36-nvfp4-w4a4-eager.toml"
MARKS = ("✖ risky", "· benign", "? unknown")


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    config = tmp_path / "user-config.toml"
    config.write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "SPARKDOCTOR_DEBUG", "COLUMNS")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_CONFIG=str(config), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"),
               SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), TERM="xterm")
    return env


def piped(env: dict[str, str], *args: object, columns: str | None = None) -> subprocess.CompletedProcess:
    env = dict(env, **({"COLUMNS": columns} if columns else {}))
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=180)


def squeezed(text: str) -> str:
    return re.sub(r"\s", "", text)


DIFF = ("diff", FACTS / "gb10-broken.json", FACTS / "nogpu-clean.json")
LONG_PATH = "vllm/model_executor/layers/quantization/utils/nvfp4_emulation_utils.py"


@pytest.mark.parametrize("term", ["xterm", "dumb"])  # rich drew a TERM=dumb terminal 80 wide, whatever its size
def test_diff_fits_a_narrow_terminal_with_each_difference_aligned(env, tmp_path, term):
    # before: drawn with soft_wrap, one line per difference however long; the terminal broke them at column 60
    seen = at_terminal([sys.executable, "-m", "sparkdoctor", *map(str, DIFF)], 60, dict(env, TERM=term), cwd=str(tmp_path))
    assert seen.code == 1, seen.text
    lines = seen.lines
    assert max(len(line) for line in lines) <= 60, [line for line in lines if len(line) > 60]
    first, second = [i for i, line in enumerate(lines) if not line.strip()][:2]
    items = lines[first + 1:second]
    body = len("✖ risky") + 3  # where the text after a mark starts
    assert items and items[0].startswith(MARKS)
    for line in items:  # a mark, or text continued under the text column, never under the mark
        assert line.startswith(MARKS) or (line[:body].isspace() and not line[body].isspace()), line
    # folded, nothing lost: the long path's difference, and the header's fingerprints
    item = next(i for i, line in enumerate(items) if line.startswith("✖ risky") and "modified files" in line)
    following = next(i for i in range(item + 1, len(items)) if items[i].startswith(MARKS))
    assert squeezed(LONG_PATH + "→none") in squeezed("".join(items[item:following]))
    assert "e35be201e59cdef2" in squeezed("".join(lines[:first])) and "b301a1917b7cbdfc" in squeezed("".join(lines[:first]))


@pytest.mark.parametrize("columns", [None, "40"])
def test_diff_on_a_pipe_is_one_line_per_difference_whatever_columns_says(env, columns):
    done = piped(env, *DIFF, columns=columns)
    doc = json.loads(piped(env, *DIFF, "--format", "json").stdout)
    lines = done.stdout.splitlines()
    assert done.returncode == 1
    assert sum(line.startswith(MARKS[:2]) for line in lines) == len(doc["differences"])
    assert f"✖ risky   modified files  vllm modified  {LONG_PATH} → none" in lines
    assert lines[0].startswith("A  ") and lines[0].endswith("fingerprint e35be201e59cdef2)")


def test_recipe_check_fits_a_narrow_terminal_with_evidence_aligned(env, tmp_path):
    # before: rich broke the findings at column 60, each continuation at column 0 under the severity
    argv = [sys.executable, "-m", "sparkdoctor", "recipe", "check", str(RECIPE), "--python", sys.executable]
    seen = at_terminal(argv, 60, env, cwd=str(tmp_path))
    assert seen.code == 6, seen.text  # sparkdoctor's own venv has no vLLM: judged by the matrix, not a pass
    lines = [line for line in seen.lines if line.strip()]
    assert max(len(line) for line in lines) <= 60, [line for line in lines if len(line) > 60]
    start = next(i for i, line in enumerate(lines) if line.startswith("warn "))
    column = 0
    for line in lines[start:]:  # a severity or a label, or text continued under the text beside it
        if line.startswith("not a pass: "):  # the last: why there is no verdict
            break
        if line.startswith(("error  ", "warn  ", "info  ")):
            column = line.index("  ") + 2
        elif line.startswith(("    evidence: ", "    remedy: ")):
            column = len("    evidence: ")
        else:
            assert line[:column].isspace() and not line[column].isspace(), (column, line)
    text = squeezed("".join(lines[start:]))
    assert squeezed("warn workaround-stale:--enforce-eager workaround --enforce-eager is stale") in text
    assert squeezed("evidence: --max-model-len = 262144, but model /models/qwen36-35b-abliterated-nvfp4-w4a4 has no "
                    "local files") in text


def test_recipe_check_on_a_pipe_is_drawn_160_wide_whatever_columns_says(env):
    done = piped(env, "recipe", "check", RECIPE, "--python", sys.executable, columns="40")
    assert done.returncode == 6, done.stderr  # no vLLM in the target: judged by the matrix, not a pass
    line = next(line for line in done.stdout.splitlines() if "workaround-stale:--enforce-eager" in line)
    assert line == "warn  workaround-stale:--enforce-eager  workaround --enforce-eager is stale: its reason no longer holds here"


def test_a_report_piped_at_a_wide_terminal_is_80_columns_wide(env, tmp_path):
    # before: rich took the width of the terminal that stdin and stderr still were (150), not a pipe's 80
    log = tmp_path / "kern.log"
    log.write_text("[1.0] Out of memory: Killed process 42 (VLLM::EngineCor) total-vm:1kB, anon-rss:1kB, file-rss:0kB\n")
    seen = at_terminal(["sh", "-c", f"{sys.executable} -m sparkdoctor explain {log} | cat"], 150, env, cwd=str(tmp_path))
    assert seen.code == 0 and 60 < max(len(line) for line in seen.lines) <= 80, seen.text


def test_history_at_a_40_column_terminal_lists_each_run_readably(env, tmp_path):
    """Before: the nine-column table drawn into 40 columns, every cell cut to a letter and an ellipsis (`│ 2 │ … │ … │
    m │ b… │`). Now a terminal too narrow for the table gets a run an item, a cell a line (`recipe: default`), as
    `history RUN_ID` and `--compare` draw theirs; a pipe still gets the table whole, whatever COLUMNS says."""
    from sparkdoctor.ledger import Ledger
    from tests.rerun.ledgerdata import add_ab, write_recipe

    facts = json.loads((FACTS / "nogpu-clean.json").read_text())
    with Ledger(tmp_path / "l.sqlite") as led:
        add_ab(led, {"A": write_recipe(tmp_path, "one-seq-long-recipe-name"), "B": write_recipe(tmp_path, "default")},
               facts, {"A": [40.0, 41.0, 40.5], "B": [100.0, 99.0, 101.0]}, "x")
    argv = [sys.executable, "-m", "sparkdoctor", "history", "--ledger", str(tmp_path / "l.sqlite")]
    seen = at_terminal(argv, 40, env, cwd=str(tmp_path))
    assert seen.code == 0, seen.text
    assert max(len(line) for line in seen.lines) <= 40 and "…" not in seen.text, seen.text
    runs = [i for i, line in enumerate(seen.lines) if line.startswith("run: ")]
    assert len(runs) == 2, seen.text
    first = squeezed("".join(seen.lines[runs[0]:runs[1]]))
    assert all(squeezed(part) in first for part in ("recipe: default", "model: m", "decode tok/s/stream: 100.0", "A/B: 1:B")), first
    assert "recipe:one-seq-long-recipe-name" in squeezed(seen.text), seen.text
    wide = at_terminal(argv, 200, env, cwd=str(tmp_path))
    assert "┃ run ┃" in wide.text, wide.text
    piped_out = piped(env, "history", "--ledger", tmp_path / "l.sqlite", columns="40").stdout
    assert "┃ run ┃ when (UTC)" in piped_out and "one-seq-long-recipe-name" in piped_out, piped_out
