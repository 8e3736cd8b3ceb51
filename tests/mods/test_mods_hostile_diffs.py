"""Hostile diffs given to `mods check`: a diff that does not apply against a file built to make the search for
where it diverged quadratic (83 s before), a git binary patch and a 5000-digit hunk header (internal errors
before), and file names that climb out of the tree, are absolute, empty or name a folder (judged `applies`, or
the whole run stopped on `cannot read: is a directory` before). Each is one file's verdict, and the run goes on."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time

import pytest

from sparkdoctor.mods.diffs import _longest_prefix_match, judge_diff_text
from sparkdoctor.mods.judge import judge_mod
from sparkdoctor.mods.model import Verdict
from tests.mods.test_mods_static import AFTER, BEFORE, REPO, make_diff, site, write

CPU_BOUND_S = 5.0  # the old search took ~18 s of CPU on this file; the linear one takes a fraction of a second


@pytest.fixture(autouse=True)
def _tools(sandbox_tools):
    pass


# ---- 1: bounded work on a diff that does not apply -------------------------------------------------------------
def _quadratic_case(blocks: int, hunk: int) -> tuple[str, str]:
    """A file of `blocks` runs of 50 `x` lines and a `y`; a hunk of 51 `x` context lines then `y`s: every `x`
    starts a near-match, and every context line is somewhere in the file."""
    text = ("x\n" * 50 + "y\n") * blocks
    old = ["x"] * 51 + ["y"] * (hunk - 51)
    diff = (f"--- a/vllm/toy.py\n+++ b/vllm/toy.py\n@@ -1,{len(old)} +1,{len(old) + 1} @@\n"
            + "".join(f" {line}\n" for line in old) + "+added\n")
    return text, diff


def test_a_diff_that_does_not_apply_is_judged_in_bounded_cpu_time(tmp_path):
    text, diff = _quadratic_case(blocks=2000, hunk=2000)
    tree = site(tmp_path, text)
    started = time.process_time()  # this process only: GNU patch's own time is not the search's
    files = judge_diff_text(diff, tree, "slow.patch")
    spent = time.process_time() - started
    assert spent < CPU_BOUND_S, f"{spent:.1f} s of CPU to say where one hunk diverged"
    assert [f.verdict for f in files] == [Verdict.FAILS]
    assert files[0].detail == "hunk 1: the file matches up to line 50, then has `y` where the mod expects `x`"
    assert files[0].lines == (1, 51)


def test_a_diff_that_applies_runs_patch_once_per_file(tmp_path, patch_runs):
    """The reverse dry run only says "already applied" when the forward one failed: a diff of many file sections that
    all apply ran GNU patch twice for each."""
    files = judge_diff_text(make_diff(BEFORE, AFTER), site(tmp_path, BEFORE), "m.patch")
    assert [f.verdict for f in files] == [Verdict.APPLIES]
    assert len(patch_runs) == 1 and "--reverse" not in patch_runs[0], patch_runs
    patch_runs.clear()
    files = judge_diff_text(make_diff(BEFORE, AFTER), site(tmp_path, AFTER, "after"), "m.patch")
    assert [f.verdict for f in files] == [Verdict.ALREADY_APPLIED]
    assert len(patch_runs) == 2 and "--reverse" in patch_runs[1], patch_runs


def _brute_force(want: list[str], normed: list[str]) -> tuple[int | None, int]:
    """The search as it was: every start, compared forward (the first start of the longest run wins)."""
    best_start, best_len = None, 0
    for start in range(len(normed)):
        n = 0
        while n < len(want) and start + n < len(normed) and normed[start + n] == want[n]:
            n += 1
        if n > best_len:
            best_start, best_len = start, n
    return best_start, best_len


def test_the_linear_search_finds_what_trying_every_start_finds():
    rng = random.Random(7)
    for _ in range(3000):
        alphabet = "ab" if rng.random() < 0.5 else "abc"
        want = [rng.choice(alphabet) for _ in range(rng.randint(0, 9))]
        normed = [rng.choice(alphabet) for _ in range(rng.randint(0, 40))]
        assert _longest_prefix_match(want, normed) == _brute_force(want, normed), (want, normed)


def test_context_that_differs_only_in_spaces_is_a_verdict_not_an_internal_error(tmp_path):
    # every line stands, once spaces are collapsed: the search ran past the hunk's last line (IndexError before)
    result = judge_mod(write(tmp_path, "m.patch", make_diff(BEFORE, AFTER)),
                       site(tmp_path, BEFORE.replace("    splits = 4", "  splits  =  4")))
    assert result.verdict is Verdict.FAILS
    assert "with other spaces, tabs or line endings" in result.files[0].detail, result.files[0].detail


# ---- 2: what unidiff reads but the judge did not expect ----------------------------------------------------------
BINARY = ("diff --git a/vllm/toy.py b/vllm/toy.py\nindex 1..2 100644\nGIT binary patch\nliteral 0\nHcmV?d00001\n\n"
          "literal 3\nKcmZQzU|;|Z00001\n")


@pytest.mark.parametrize("present", [True, False])
def test_a_git_binary_patch_cannot_be_told(tmp_path, present):
    tree = site(tmp_path, BEFORE)
    if not present:
        (tree.dirs[0] / "vllm" / "toy.py").unlink()
    result = judge_mod(write(tmp_path, "bin.patch", BINARY), tree)
    assert result.verdict is Verdict.CANNOT_TELL
    assert result.files[0].detail == "a git binary patch: binary patches are not judged"


def test_a_hunk_header_with_a_5000_digit_number_does_not_parse(tmp_path):
    text = f"--- a/vllm/toy.py\n+++ b/vllm/toy.py\n@@ -{'9' * 5000},3 +1,3 @@\n line 1\n line 2\n line 3\n"
    result = judge_mod(write(tmp_path, "big.patch", text), site(tmp_path, BEFORE))
    assert result.verdict is Verdict.FAILS
    assert result.detail.startswith("not a unified diff patch can apply: a malformed header")
    assert "\n" not in result.detail and len(result.detail) < 300


# ---- 3: file names that name no file of the tree ------------------------------------------------------------
CHANGE = "@@ -1 +1 @@\n-line 1\n+line one\n"


@pytest.mark.parametrize("header, words", [
    ("--- /dev/null\n+++ b/../../../../tmp/x/CREATED\n@@ -0,0 +1 @@\n+hi\n", "climbs out of the tree"),
    ("--- a/vllm/../../secret.py\n+++ b/vllm/../../secret.py\n" + CHANGE, "climbs out of the tree"),
    ("diff --git a/vllm/toy.py b/../../../toy.py\nsimilarity index 100%\nrename from vllm/toy.py\n"
     "rename to ../../../toy.py\n", "climbs out of the tree"),
    ("--- /etc/passwd\n+++ /etc/passwd\n" + CHANGE, "is absolute"),
    ("--- /\n+++ /\n" + CHANGE, "is absolute"),
    ("--- a/\n+++ b/\n" + CHANGE, "names no file"),
    ("--- a/vllm\n+++ b/vllm\n" + CHANGE, "vllm in "),
])
def test_a_file_name_that_names_no_file_of_the_tree_will_not_apply(tmp_path, header, words):
    tree = site(tmp_path, BEFORE)
    (tmp_path / "secret.py").write_text("line 1\n")
    # the run goes on: the next file of the same diff is judged as ever (its git header: unidiff reads a plain
    # diff after a git rename as a target without a source)
    good = "diff --git a/vllm/toy.py b/vllm/toy.py\n" + make_diff(BEFORE, AFTER)
    result = judge_mod(write(tmp_path, "m.patch", header + good), tree)
    assert [f.verdict for f in result.files] == [Verdict.FAILS, Verdict.APPLIES], result.files
    assert result.files[0].detail.startswith("will not apply: ") and words in result.files[0].detail
    assert "\n" not in result.files[0].detail


def test_the_cli_judges_a_diff_naming_a_folder_and_goes_on_to_the_next_mod(tmp_path):
    tree = site(tmp_path, BEFORE)
    folder = write(tmp_path, "folder.patch", "--- a/vllm\n+++ b/vllm\n" + CHANGE)
    good = write(tmp_path, "good.patch", make_diff(BEFORE, AFTER))
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "mods", "check", str(folder), str(good), "--site",
                           str(tree.dirs[0]), "-f", "json"], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    import json

    doc = json.loads(done.stdout)
    assert doc["counts"] == {"fails": 1, "applies": 1}, doc["counts"]
    assert "is a directory" in doc["mods"][0]["files"][0]["detail"]


def test_a_link_out_of_a_site_folder_is_not_read_on_this_machine(tmp_path):
    """`--site` is a folder standing for an image's site folder: its links are the image's. One that left the folder
    was read on this machine, and a diff whose context did not match quoted the host file's first line (an SSH
    key's) in the verdict. It cannot be told now; a link that stays inside the folder is read as before."""
    tree = site(tmp_path, BEFORE)
    secret = tmp_path / "secret" / "id_ed25519"
    secret.parent.mkdir()
    secret.write_text("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAE\n" + BEFORE)
    toy = tree.dirs[0] / "vllm" / "toy.py"
    toy.unlink()
    toy.symlink_to(secret)
    diff = write(tmp_path, "leak.patch", make_diff(BEFORE, AFTER))
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "mods", "check", str(diff), "--site",
                           str(tree.dirs[0]), "-f", "json"], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert "b3BlbnNzaC1rZXkt" not in done.stdout + done.stderr
    [found] = json.loads(done.stdout)["mods"][0]["files"]
    assert found["verdict"] == "cannot-tell" and "link out of the site folder" in found["detail"], found
    inside = tree.dirs[0] / "vllm" / "real_toy.py"
    inside.write_text(BEFORE)
    toy.unlink()
    toy.symlink_to("real_toy.py")
    assert [f.verdict for f in judge_diff_text(make_diff(BEFORE, AFTER), tree, "ok.patch")] == [Verdict.APPLIES]
