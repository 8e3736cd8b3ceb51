"""A third-party matrix (`--matrix FILE/DIR`, `matrix validate PATH`) aimed at the reader: a file too large to hold,
and one whose long prose made `matrix show` draw for minutes. Each is refused in one line naming the file, by its
size, before a byte of it is read; a bundled-size file reads as before."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkdoctor.inputs import read_toml
from sparkdoctor.matrix.loader import MAX_TOML_BYTES, load
from sparkdoctor.matrix.model import MatrixError

ROOT = Path(__file__).resolve().parents[1]

ENTRY = '''component = "x"
[[entry]]
id = "big"
title = "t"
severity = "warn"
action = "monitor"
summary = "{summary}"
remedy = "r"
refs = ["https://example.com/1"]
when.gpu_arch = ["sm_121a"]
'''


def test_a_sparse_matrix_file_is_refused_by_its_size_before_a_byte_is_read(tmp_path):
    """A 3 GB sparse `a.toml` took 6.3 GB of memory and 14 s of CPU before tomllib said "not valid TOML"."""
    folder = tmp_path / "matrix"
    folder.mkdir()
    with open(folder / "a.toml", "wb") as f:
        f.truncate(3 * 1024**3)
    started = time.process_time()
    with pytest.raises(MatrixError, match=r"a\.toml: cannot read: larger than 1 MiB"):
        load(folder)
    assert time.process_time() - started < 1.0  # reading it took 14 s of CPU


def test_a_matrix_file_over_the_limit_is_one_line_and_exit_2_for_matrix_show(tmp_path):
    """An 8 MB summary passed validation and `matrix show` spent 42 s of CPU drawing it (quadratic: 2 MB 3.3 s,
    4 MB 11.7 s); now the file is refused by its size, in one line, exit 2."""
    path = tmp_path / "a.toml"
    path.write_text(ENTRY.format(summary="A" * (8 * 1024 * 1024)), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "show", "big", "--matrix", str(path)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "a.toml: cannot read: larger than 1 MiB" in lines[0], done.stderr


def test_a_file_within_the_limit_reads_as_before(tmp_path):
    """The limit leaves room: the largest bundled matrix file is 68 KB, a 900 KB summary still loads."""
    largest = max((ROOT / "matrix").glob("*.toml"), key=lambda p: p.stat().st_size)
    assert largest.stat().st_size * 8 < MAX_TOML_BYTES
    path = tmp_path / "a.toml"
    path.write_text(ENTRY.format(summary="A" * 900_000), encoding="utf-8")
    assert read_toml(path, MAX_TOML_BYTES, MatrixError)["entry"][0]["id"] == "big"
    assert load(path).entries[0].summary == "A" * 900_000


def test_the_patterns_of_a_matrix_share_one_time_budget(tmp_path):
    """Each `env_matches` pattern was bounded (0.25 s), their sum was not: 1,000 entries whose `(x|x)+y` ran out
    their time kept `check --facts` busy for 138 s of CPU until it was killed. Now one evaluation's patterns share
    2 s; the entries past it are unknown at once, said, never clear."""
    from sparkdoctor.matrix import evaluate_all
    from sparkdoctor.patterns import BUDGET_SECONDS
    from tests.gb10 import gb10_facts

    entries = "".join(ENTRY.split("\n", 1)[1].format(summary="s").replace('id = "big"', f'id = "bt{i}"').replace(
        'when.gpu_arch = ["sm_121a"]', f'when.env_matches = {{ SLOW = "(x|x)+y{i}" }}') for i in range(40))
    path = tmp_path / "a.toml"
    path.write_text('component = "x"\n' + entries, encoding="utf-8")
    matrix = load(path)
    facts = gb10_facts()
    facts.env = {**(facts.env or {}), "SLOW": "x" * 40}
    started = time.process_time()
    evaluations = evaluate_all(matrix, facts)
    assert time.process_time() - started < 2 * BUDGET_SECONDS  # each alone: 40 x 0.25 s = 10 s before
    assert [e.outcome for e in evaluations] == ["unknown"] * 40
    assert all("could not be matched" in e.checks[0].evidence for e in evaluations), evaluations[-1].checks


def test_the_remedy_check_across_entries_shares_one_time_budget(tmp_path):
    """`matrix validate` holds every entry's remedy against every other entry's env_matches: 10 entries that
    recommend SLOW=x...x and say `(x|x)+y` on SLOW breaks took 22 s of CPU (one 0.25 s timeout per pair)."""
    from sparkdoctor.matrix.consistency import remedy_conflicts
    from sparkdoctor.patterns import BUDGET_SECONDS

    entry = ENTRY.split("\n", 1)[1].format(summary="s").replace('severity = "warn"', 'severity = "error"').replace(
        'when.gpu_arch = ["sm_121a"]', f'justifies = ["SLOW={"x" * 40}"]\nwhen.env_matches = {{ SLOW = "(x|x)+y" }}')
    path = tmp_path / "a.toml"
    path.write_text('component = "x"\n' + "".join(entry.replace('id = "big"', f'id = "rc{i}"') for i in range(10)),
                    encoding="utf-8")
    matrix = load(path)
    started = time.process_time()
    assert remedy_conflicts(matrix) == []  # a pattern that could not be matched is no conflict, as before
    assert time.process_time() - started < 2 * BUDGET_SECONDS


def _many(tmp_path: Path, count: int, justifies: str) -> Path:
    entry = ENTRY.split("\n", 1)[1].format(summary="s").replace('severity = "warn"', 'severity = "error"')
    entries = [entry.replace('id = "big"', f'id = "e{i}"').replace(
        'when.gpu_arch = ["sm_121a"]', f'justifies = ["{justifies.format(i % 7)}"]\nwhen.env = {{ A{i % 7} = true }}')
        for i in range(count)]
    path = tmp_path / f"many-{count}.toml"
    path.write_text('component = "x"\n' + "".join(entries), encoding="utf-8")
    return path


def test_remedy_conflicts_are_listed_to_a_limit_and_found_without_trying_every_pair(tmp_path):
    """4,500 entries (660 KB) that each recommend what others say breaks: `matrix validate` took 30 s of CPU and
    1.9 GB to print 2.9 million lines; 4,500 that conflict with nothing took 12.5 s (every pair was tried)."""
    from sparkdoctor.matrix.consistency import MAX_CONFLICTS, remedy_conflicts

    conflicting, quiet = load(_many(tmp_path, 3000, "A{}")), load(_many(tmp_path, 3000, "ZZ{}"))
    started = time.process_time()
    found = remedy_conflicts(conflicting)
    assert len(found) == MAX_CONFLICTS + 1 and found[-1].startswith("... and more: stopped after 100")
    assert "entry e0: its remedy recommends A0, which entry e7 (error)" in found[0]
    assert remedy_conflicts(quiet) == []
    assert time.process_time() - started < 1.5  # before: about 14 s and 6 s


def test_matrix_validate_counts_the_problems_it_lists_not_the_line_that_says_there_are_more(tmp_path):
    """The "... and more: stopped after 100" line was counted: "101 problems across entries" for 100 listed, and it
    was one of the JSON document's `problems`."""
    import json

    import sparkdoctor.views.matrix  # noqa: F401 (registers the view)
    from sparkdoctor.commands.matrix import MatrixCommand, run_validate
    from sparkdoctor.emit import render
    from sparkdoctor.result import Format

    result = run_validate(MatrixCommand(matrix=_many(tmp_path, 200, "A{}")))
    doc = json.loads(render(result, Format.json))
    assert len(doc["problems"]) == 100 and not any(p.startswith("... and more") for p in doc["problems"])
    assert doc["unlisted"].startswith("... and more: stopped after 100") and doc["valid"] is False
    lines = render(result, Format.console).splitlines()
    assert lines[-2].startswith("... and more: stopped after 100") and sum(line.startswith("problem: ") for line in lines) == 100
    assert lines[-1] == "100 problems across entries listed, and more", lines[-1]
