"""`diff`, `fix --history` and `recipe check` on a narrow terminal (COLUMNS=40): diff and fix printed plain lines
wider than the terminal (it wrapped them mid-word), recipe check drew 160 columns on a pipe even with COLUMNS set.
Now they are drawn like the other wide views (Sink.wide): the terminal's width, COLUMNS on a pipe when set."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest

import sparkdoctor.views.diff
import sparkdoctor.views.fix
import sparkdoctor.views.recipe_check  # noqa: F401 (each view is registered by the module that defines it)
from sparkdoctor import emit
from sparkdoctor.conclusions.recipe_check import RecipeCheck
from sparkdoctor.diff import compare
from sparkdoctor.diff.document import DiffDocument
from sparkdoctor.facts import Facts
from sparkdoctor.fix.documents import HistoryDocument
from sparkdoctor.fix.pipeline import JournalRow
from sparkdoctor.result import Format, Result
from tests.gb10 import gb10_facts

FACTS = Path(__file__).parent / "data" / "facts"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\]8;[^\x1b]*\x1b\\")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def documents() -> list[Result[object]]:
    a, b = gb10_facts(), Facts.load(FACTS / "nogpu-clean.json")
    diff = DiffDocument.of(compare(a, b), ("/a/long/folder/name/of/a/snapshot.json", "b.json"), (a, b))
    rows = [JournalRow("20261201T080000Z-1234", "applied", "2026-12-01T08:00:00Z", "/opt/venvs/serving/bin/python3",
                       ["cutlass-dsl-cu13-clean-reinstall", "drop-enforce-eager"], 123456)]
    check = {"recipe": {"name": "qwen3 fp8 tp2", "format": "sparkdoctor", "path": "/r/recipes/qwen3.toml"},
             "target": "/opt/venvs/serving/bin/python3", "vllm": {"version": "0.11.0"},
             "model": {"ref": "org/model-name", "hybrid": False, "max_model_len": 1024},
             "findings": [{"severity": "error", "id": "flag-unknown:--enable-prefix-caching",
                           "title": "vLLM 0.11.0 does not know --enable-prefix-caching: `vllm serve` would refuse",
                           "evidence": ["--enable-prefix-caching is in no add_argument call under /opt/venvs/x/vllm"],
                           "remedy": "Remove --enable-prefix-caching or replace it with what vLLM 0.11.0 calls it"}]}
    return [Result("diff", "diff", diff), Result("fix", "fix", HistoryDocument(rows)),
            Result("recipe check", "recipe-check", RecipeCheck(check))]


@pytest.mark.parametrize("stdout", [Terminal, io.StringIO], ids=["terminal", "pipe"])
def test_diff_fix_history_and_recipe_check_fit_forty_columns(stdout, monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setattr(sys, "stdout", stdout())
    for result in documents():
        text = ANSI.sub("", emit.render(result, Format.console))
        wide = [line for line in text.splitlines() if len(line) > 40]
        assert len(text.splitlines()) > 1 and not wide, (result.command, wide[:3])
