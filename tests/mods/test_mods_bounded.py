"""Attacks on what `mods check` reads (issue 40, item 10): a FIFO in a mod folder (an internal error before) and a
sparse file of 64 GB a script leaves in the site copy (hashed whole before). Each is one line or stood for by its
size, in bounded time (hang_guard turns a hang into a failure)."""

from __future__ import annotations

import os

import pytest

from sparkdoctor.mods.judge import judge_mod
from sparkdoctor.mods.model import ModError
from sparkdoctor.mods.sandbox import _digest
from sparkdoctor.mods.trees import MAX_FILE, SiteTree
from tests.hostile import hang_guard

GUARD_S = 20


def test_a_fifo_in_a_mod_folder_is_one_line_not_an_internal_error(tmp_path, sandbox_tools):
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "toy.py").write_text("x = 1\n")
    mod = tmp_path / "mod"
    mod.mkdir()
    (mod / "run.sh").write_text("#!/bin/bash\nsed -i s/1/2/ vllm/toy.py\n")
    os.mkfifo(mod / "pipe")
    with hang_guard(GUARD_S), pytest.raises(ModError, match="pipe: not a regular file, folder or link"):
        judge_mod(mod, SiteTree([site], str(site)))


def test_a_huge_sparse_file_in_the_site_copy_is_never_read(tmp_path):
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "toy.py").write_text("x = 1\n")
    with open(tmp_path / "vllm" / "big.bin", "wb") as fh:
        fh.truncate(MAX_FILE + 1)
    os.mkfifo(tmp_path / "vllm" / "made-by-the-script")
    with hang_guard(GUARD_S):
        got = _digest(tmp_path)
    assert got["vllm/big.bin"] == f"over {MAX_FILE} bytes: {MAX_FILE + 1} bytes, not read"
    assert got["vllm/made-by-the-script"].startswith("unreadable: is a FIFO")
    assert len(got["vllm/toy.py"]) == 64


def test_a_script_that_leaves_a_64_gb_sparse_file_is_judged_in_bounded_time(tmp_path, sandbox_tools):
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "toy.py").write_text("x = 1\n")
    mod = tmp_path / "mod"
    mod.mkdir()
    (mod / "run.sh").write_text("#!/bin/bash\nP=/usr/local/lib/python3.12/dist-packages\n"
                                "sed -i s/1/2/ $P/vllm/toy.py\ntruncate -s 64G $P/vllm/toy.py.bin\n")
    with hang_guard(60):
        result = judge_mod(mod, SiteTree([site], str(site)))
    details = {f.path: f.detail for f in result.files}
    assert details.get("vllm/toy.py") == "changed by the script" and details.get("vllm/toy.py.bin") == "created by the script", details
