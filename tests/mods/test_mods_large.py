"""Mods too large to be mods, as a cloned recipe repository may hold them: a diff of 3,000 file sections (29 s of
patch runs before) or 5,000 hunks, a folder whose diffs together pass that, and a folder of diffs of 32 MiB each
(all read and kept at once: 12 of 21 MiB held 551 MB and took 23 s). Each is said in one verdict or one line, and
no GNU patch runs for it."""

from __future__ import annotations

import time

import pytest

from sparkdoctor.mods.diffs import MAX_FILES, MAX_HUNKS, judge_diff_text
from sparkdoctor.mods.judge import MAX_MOD_BYTES, judge_mod
from sparkdoctor.mods.model import ModError, Verdict
from tests.mods.test_mods_static import AFTER, BEFORE, make_diff, site

CPU_BOUND_S = 10.0


@pytest.fixture(autouse=True)
def _tools(sandbox_tools):
    pass


def test_a_diff_of_more_file_sections_than_a_mod_has_is_not_run_section_by_section(tmp_path, patch_runs):
    one = make_diff(BEFORE, AFTER)
    started = time.process_time()
    files = judge_diff_text(one * (MAX_FILES + 1), site(tmp_path, BEFORE), "many.patch")
    assert time.process_time() - started < CPU_BOUND_S
    assert [f.verdict for f in files] == [Verdict.CANNOT_TELL], files[:3]
    assert f"it edits {MAX_FILES + 1} file(s)" in files[0].detail and patch_runs == []


def test_a_diff_of_more_hunks_than_a_mod_has_is_not_run(tmp_path, patch_runs):
    hunks = "".join(f"@@ -{i},1 +{i},1 @@\n-line {i}\n+line {i}!\n" for i in range(1, MAX_HUNKS + 2))
    files = judge_diff_text("--- a/vllm/toy.py\n+++ b/vllm/toy.py\n" + hunks, site(tmp_path, BEFORE), "hunks.patch")
    assert [f.verdict for f in files] == [Verdict.CANNOT_TELL] and patch_runs == [], files
    assert f"in {MAX_HUNKS + 1} hunk(s)" in files[0].detail


def test_a_folders_diffs_share_one_budget(tmp_path, patch_runs):
    """Each diff under the bound, together over it: the ones past it are not run."""
    mod = tmp_path / "mod"
    mod.mkdir()
    half = make_diff(BEFORE, AFTER) * (MAX_FILES // 2 + 1)
    (mod / "a.patch").write_text(half)
    (mod / "b.patch").write_text(half)
    result = judge_mod(mod, site(tmp_path, BEFORE))
    by_source = {f.source: f.verdict for f in result.files}
    assert by_source == {"a.patch": Verdict.APPLIES, "b.patch": Verdict.CANNOT_TELL}, by_source
    assert len(patch_runs) == MAX_FILES // 2 + 1


def test_a_folder_whose_diffs_pass_the_size_of_a_mod_is_one_line_and_not_read(tmp_path, monkeypatch):
    mod = tmp_path / "mod"
    mod.mkdir()
    pad = "# " + "x" * 1000 + "\n"
    for name in ("a.patch", "b.patch"):
        (mod / name).write_text(make_diff(BEFORE, AFTER) + pad * (MAX_MOD_BYTES // 2 // len(pad) + 1))
    from sparkdoctor.mods import judge

    read: list[object] = []
    real = judge.read_regular
    monkeypatch.setattr(judge, "read_regular", lambda path: read.append(path) or real(path))
    with pytest.raises(ModError, match=f"more than {MAX_MOD_BYTES >> 20} MiB together"):
        judge_mod(mod, site(tmp_path, BEFORE))
    assert read == []


def test_a_community_sized_folder_is_judged_as_before(tmp_path):
    mod = tmp_path / "mod"
    mod.mkdir()
    (mod / "fix.patch").write_text(make_diff(BEFORE, AFTER))
    (mod / "run.sh").write_text("#!/bin/bash\nset -e\npatch -p1 -d /usr/local/lib/python3.12/dist-packages < fix.patch\n")
    result = judge_mod(mod, site(tmp_path, BEFORE))
    assert result.verdict is Verdict.APPLIES, result


def test_a_script_naming_a_file_too_large_to_edit_is_that_mods_verdict(tmp_path, patch_runs):
    """A diff naming a target file over 32 MiB is that file's `cannot-tell`; a script naming one stopped the whole
    run (exit 2), and the mods after it were never judged."""
    from sparkdoctor.mods.trees import MAX_FILE
    from tests.mods.test_mods_scripts import EUGR_SITE

    tree = site(tmp_path, BEFORE)
    with open(tree.dirs[0] / "vllm" / "huge.py", "wb") as fh:
        fh.truncate(MAX_FILE + 1)
    script = tmp_path / "fix.sh"
    script.write_text(f"sed -i s/4/5/ {EUGR_SITE}/vllm/toy.py {EUGR_SITE}/vllm/huge.py\n")
    result = judge_mod(script, tree)
    assert result.verdict is Verdict.CANNOT_TELL, result
    assert result.detail.startswith("it names vllm/huge.py, which in ") and "not run" in result.detail, result.detail


@pytest.mark.parametrize("named", ["files", "sites"])
def test_a_script_naming_more_than_a_mod_names_is_not_run(tmp_path, named, monkeypatch):
    """20,000 file names in a script's comment were each read from the target (20 s against a release), and 5,000
    site folders passed bwrap's argument limit: the mod "failed" with bwrap's message."""
    from sparkdoctor.mods import sandbox

    names = (" ".join(f"vllm/m{i}.py" for i in range(sandbox.MAX_NAMED_FILES + 1)) if named == "files"
             else " ".join(f"/s{i}/site-packages" for i in range(sandbox.MAX_NAMED_SITES + 1)))
    script = tmp_path / "fix.sh"
    script.write_text(f"# {names}\nsed -i s/4/5/ /usr/local/lib/python3.12/dist-packages/vllm/toy.py\n")
    tree = site(tmp_path, BEFORE)
    reads: list[str] = []
    real = tree.read
    monkeypatch.setattr(tree, "read", lambda rel: reads.append(rel) or real(rel))
    result = judge_mod(script, tree)
    assert result.verdict is Verdict.CANNOT_TELL and result.detail.endswith("at most; not run"), result
    assert reads == []


def test_a_folder_of_links_and_folders_is_bounded_like_one_of_files(tmp_path, monkeypatch):
    """200 files was the bound, and links (dangling, or to folders) and folders are no files: 150,000 dangling links
    were walked and copied into the scratch folder (36 s)."""
    from sparkdoctor.mods import sandbox
    from sparkdoctor.mods.judge import MAX_MOD_ENTRIES

    mod = tmp_path / "mod"
    mod.mkdir()
    (mod / "run.sh").write_text("#!/bin/bash\nsed -i s/4/5/ /usr/local/lib/python3.12/dist-packages/vllm/toy.py\n")
    for i in range(MAX_MOD_ENTRIES + 1):
        (mod / f"l{i}").symlink_to(f"/nonexistent/{i}")
    copied: list[object] = []
    monkeypatch.setattr(sandbox, "_copy_mod", lambda *a: copied.append(a))
    with pytest.raises(ModError, match="more than 1000 files, folders and links"):
        judge_mod(mod, site(tmp_path, BEFORE))
    assert copied == []


def test_a_file_name_longer_than_a_path_is_that_files_verdict(tmp_path):
    """A header naming `vllm/vllm/.../x.py` (10,000 components) stopped the run (exit 2, "File name too long", the
    70 KB name in one error line), and one of 1,000,000 components ran past 10 minutes resolving it."""
    from tests.mods.test_mods_static import write

    name = "a/" + "vllm/" * 10_000 + "x.py"
    diff = write(tmp_path, "long.patch", f"--- {name}\n+++ {name}\n@@ -1 +1 @@\n-x = 1\n+x = 2\n")
    started = time.process_time()
    result = judge_mod(diff, site(tmp_path, BEFORE))
    assert time.process_time() - started < CPU_BOUND_S
    assert result.verdict is Verdict.FAILS and len(result.detail) < 600, result.detail[:600]
    assert "longer than a path can be" in result.detail


def test_a_script_naming_a_file_longer_than_a_path_never_looks_it_up(tmp_path, monkeypatch):
    from sparkdoctor.mods.sandbox import referenced_files

    assert referenced_files(["vllm/" + "a/" * 3000 + "x.py", "vllm/" + "b" * 300 + ".py", "vllm/ok.py"]) == ["vllm/ok.py"]
