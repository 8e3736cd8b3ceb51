"""Control characters from inputs never reach the terminal raw: an ESC sequence in a ledger's model or recipe
name (a `bench --url` server picks its model name), a snapshot's env values and host fields, a matrix file's
name, printed by each view through the real CLI, comes out escaped (`\\x1b`), never as the byte itself."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sparkdoctor.facts import Facts
from sparkdoctor.ledger import Ledger
from sparkdoctor.ledger.store import RunRecord
from sparkdoctor.matrix import load
from tests.gb10 import gb10_facts
from tests.inproc import invoke
from tests.rerun.ledgerdata import add_ab, write_recipe

EVIL = "\x1b]0;owned\x07\x1b[2J\x1b[31mRED\r\x9b"  # a window title, clear screen, colour, CR, the 8-bit CSI
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("escapes")
    (root / "empty.toml").write_text("")
    gb10_facts(env={"NCCL_DEBUG": "INFO" + EVIL}, host={"os": "DGX OS" + EVIL, "machine": "aarch64",
                                                        "kernel": "6.11.0"}).save(root / "a.json")
    gb10_facts().save(root / "b.json")
    facts = gb10_facts().to_dict()
    with Ledger(root / "runs.sqlite") as led:
        led.add_run(RunRecord(recipe={"name": "qwen" + EVIL, "argv": ["vllm", "serve"]}, base_url="http://127.0.0.1:1",
                              model="model" + EVIL, server={"kind": "vllm"}, facts=facts,
                              fingerprint=Facts.from_dict(facts, source="test").fingerprint(), bench_version=1,
                              tool_version="test", workload={"max_tokens": 8},
                              summary={"levels": [], "headline": {"decode_tps_per_stream": 40.0, "concurrency": 1,
                                                                  "source": "stream"}}))
        recipes = {}
        for arm, name in (("A", "one-seq"), ("B", "default")):
            written = write_recipe(root, name)
            recipes[arm] = written.rename(root / f"{name}{EVIL}.toml")  # the arms are named after their files
        add_ab(led, recipes, facts, {"A": [40.0, 41.0, 40.5], "B": [100.0, 99.0, 101.0]}, "default-vs-one-seq")
    matrix = root / f"cuda{EVIL}.toml"
    shutil.copy(REPO / "matrix" / "cuda-toolkit.toml", matrix)
    entry = sorted(e.id for e in load(matrix).entries)[0]
    return root, entry


def surfaces(root: Path, entry: str) -> dict[str, list[object]]:
    return {
        "history": ["history", "--ledger", root / "runs.sqlite"],
        "history RUN_ID": ["history", "1", "--ledger", root / "runs.sqlite"],
        "conclusions": ["conclusions", "--ledger", root / "runs.sqlite"],
        "diff": ["diff", root / "a.json", root / "b.json"],
        "check --facts": ["check", "--facts", root / "a.json", "-v"],
        "report --facts": ["report", "--facts", root / "a.json", "--no-redact"],
        "matrix show": ["matrix", "show", entry, "--matrix", root / f"cuda{EVIL}.toml"],
    }


@pytest.mark.parametrize("surface", list(surfaces(Path(), "")))
def test_control_characters_print_escaped(inputs, surface):
    root, entry = inputs
    code, stdout, error = invoke(*surfaces(root, entry)[surface], env={"SPARKDOCTOR_CONFIG": str(root / "empty.toml"),
                                                                       "COLUMNS": "200"})
    assert code in (0, 1), error
    bad = sorted({c for c in stdout if not c.isprintable() and c not in "\n"})
    assert not bad, f"{surface} printed raw control characters {bad}"
    assert "\\x1b" in stdout, f"{surface} did not show the hostile value at all"
