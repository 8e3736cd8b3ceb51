"""`sparkdoctor diff` on the files a user has at hand and on hostile ones: a `check --format json` document is read
as the snapshot it carries (it was read as an empty one: every field "not observed", a fabricated time), another
sparkdoctor document is refused by name; a line break in a snapshot's key or value cannot print a line of its own;
a field of 300,000 variables is not compared (it took minutes and printed a line each), and the console lists the
first 200 differences."""

from __future__ import annotations

import io
import json

from rich.console import Console

from sparkdoctor.diff.compare import MAX_LEAVES, compare
from sparkdoctor.diff.document import DiffDocument
from sparkdoctor.facts import Facts
from sparkdoctor.views.diff import SHOWN, draw
from tests.diff.test_diff_cli import FACTS, one_line_error, run  # noqa: F401  (run: the CLI fixture)
from tests.gb10 import gb10_facts

SNAPSHOT = FACTS / "gb10-broken.json"


def _document(tmp_path, **keys: object):
    header = {
        "sparkdoctor": "0.1.0",
        "envelope": 1,
        "command": "check",
        "kind": "report",
        "exit_code": 1,
        "errors": [],
        "schema": 1,
        "fingerprint": "0" * 16,
    }
    path = tmp_path / "check.json"
    path.write_text(json.dumps({**header, **keys}))
    return path


def test_a_check_json_document_is_the_snapshot_it_carries(tmp_path, run):  # noqa: F811
    document = _document(tmp_path, facts=json.loads(SNAPSHOT.read_text()))
    assert Facts.load(document).to_dict() == Facts.load(SNAPSHOT).to_dict()
    done = run("diff", SNAPSHOT, document)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        done.stdout.strip().splitlines()[-1]
        == "no differences in what both snapshots observed (exit 0)"
    )


def test_a_document_without_a_snapshot_is_refused_by_name(tmp_path, run):  # noqa: F811
    document = _document(tmp_path, command="fleet check", nodes=[])
    done = run("diff", SNAPSHOT, document)
    assert done.returncode == 2 and done.stdout == ""
    assert (
        "check.json: a `sparkdoctor fleet check` JSON document, not one snapshot"
        in one_line_error(done)
    )
    done = run("diff", SNAPSHOT, document, "--format", "json")
    doc = json.loads(done.stdout)
    assert (
        done.returncode == 2
        and doc["kind"] == "error"
        and doc["errors"][0]["code"] == "snapshot"
    )


def _drawn(a: Facts, b: Facts) -> list[str]:
    console = Console(file=io.StringIO(), width=200, soft_wrap=True, highlight=False)
    draw(DiffDocument.of(compare(a, b), ("a.json", "b.json"), (a, b)), console)
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined]


def test_a_line_break_in_a_key_or_value_prints_no_line_of_its_own():
    forged = "0 risky, 0 benign: safe to run together (exit 0)"
    b = gb10_facts(env={f"NCCL_X\n{forged}": "1", "NCCL_DEBUG": f"INFO\r\n{forged}"})
    lines = _drawn(gb10_facts(), b)
    assert forged not in lines and lines[-1].startswith("2 risky")
    assert sum("\\n" + forged in line for line in lines) == 2


def test_a_field_too_large_to_compare_is_not_compared_and_the_rest_is():
    b = gb10_facts(
        packages={"vllm": "0.32.0"}, env={f"V{i}": "x" for i in range(MAX_LEAVES + 1)}
    )
    comparison = compare(gb10_facts(), b)
    assert {
        "area": "env",
        "why": f"over {MAX_LEAVES:,} readings in one snapshot",
    } in comparison.not_compared
    assert [d.key for d in comparison.risky] == ["vllm"]
    assert _drawn(gb10_facts(), b)[-1].endswith(
        "(exit 1); 1 field(s) not compared (listed above)"
    )


def test_the_console_lists_the_first_differences_and_counts_the_rest():
    lines = _drawn(
        gb10_facts(), gb10_facts(env={f"V{i:03}": "x" for i in range(SHOWN + 50)})
    )
    assert sum(line.startswith("· benign") for line in lines) == SHOWN
    assert "… and 50 more (--format json lists every one)" in lines


def test_output_over_a_snapshot_it_reads_is_refused(tmp_path, run):  # noqa: F811
    """`diff A B -o A` (a slip of the hand) replaced the snapshot with the console text; so did `report --facts X -o
    X`, through a link too. One line, exit 2, the snapshot as it was."""
    snapshot = tmp_path / "node1.json"
    snapshot.write_text(SNAPSHOT.read_text())
    (tmp_path / "link.json").symlink_to(snapshot)
    for args in (
        ("diff", snapshot, SNAPSHOT, "-o", "node1.json"),
        ("diff", SNAPSHOT, "link.json", "-o", snapshot),
        ("report", "--facts", "link.json", "-o", "node1.json"),
    ):
        done = run(*args)
        assert (
            done.returncode == 2
            and "the document would replace it" in one_line_error(done)
        ), args
        assert snapshot.read_text() == SNAPSHOT.read_text()
