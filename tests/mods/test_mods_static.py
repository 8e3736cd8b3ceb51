"""The mods gate on small trees made here: every verdict of a diff, bad diffs, and the CLI's contract.

The trees are toy packages written by the test (`vllm/toy.py`), so every case is exact and fast; the
real releases are in test_mods_releases.py."""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.mods.judge import judge_mod
from sparkdoctor.mods.model import ModError, Verdict
from sparkdoctor.mods.trees import SiteTree, parse_release, site_relative

BEFORE = "".join(f"line {i}\n" for i in range(1, 40)).replace("line 20\n", "    splits = 4\n")
AFTER = BEFORE.replace("    splits = 4\n", "    splits = max(4, n)\n")


def make_diff(before: str, after: str, rel: str = "vllm/toy.py", prefix: str = "a/") -> str:
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"{prefix}{rel}",
                                        f"{prefix.replace('a', 'b')}{rel}"))


def site(tmp_path: Path, text: str, name: str = "site") -> SiteTree:
    root = tmp_path / name
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "toy.py").write_text(text)
    return SiteTree([root], str(root))


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture(autouse=True)
def _tools(sandbox_tools):
    pass


def test_a_diff_that_applies(tmp_path):
    result = judge_mod(write(tmp_path, "m.patch", make_diff(BEFORE, AFTER)), site(tmp_path, BEFORE))
    assert result.verdict is Verdict.APPLIES
    assert result.files[0].path == "vllm/toy.py" and "cleanly" in result.files[0].detail


def test_a_diff_at_an_offset_applies_and_says_where(tmp_path):
    moved = "extra\n" * 5 + BEFORE
    result = judge_mod(write(tmp_path, "m.patch", make_diff(BEFORE, AFTER)), site(tmp_path, moved))
    assert result.verdict is Verdict.APPLIES
    assert "offset 5" in result.files[0].detail


def test_a_diff_already_in_the_file(tmp_path):
    result = judge_mod(write(tmp_path, "m.patch", make_diff(BEFORE, AFTER)), site(tmp_path, AFTER))
    assert result.verdict is Verdict.ALREADY_APPLIED


def test_superseded_when_its_lines_are_upstream_in_other_context(tmp_path):
    # upstream took the same line, but rewrote the lines around it: the diff neither applies nor reverses
    upstream = AFTER.replace("line 18\nline 19\n", "rewritten 18\nrewritten 19\n").replace("line 21\nline 22\n", "new 21\nnew 22\n")
    result = judge_mod(write(tmp_path, "m.patch", make_diff(BEFORE, AFTER)), site(tmp_path, upstream))
    assert result.verdict is Verdict.SUPERSEDED
    line = upstream.splitlines().index("    splits = max(4, n)") + 1
    assert result.files[0].lines == (line, line)
    assert f"lines {line}-{line}" in result.files[0].detail


def test_fails_and_names_the_line_that_is_gone(tmp_path):
    upstream = BEFORE.replace("    splits = 4\n", "    splits = compute_splits(n)\n")
    result = judge_mod(write(tmp_path, "m.patch", make_diff(BEFORE, AFTER)), site(tmp_path, upstream))
    assert result.verdict is Verdict.FAILS
    assert "`splits = 4` is nowhere in the file" in result.files[0].detail


def test_fails_and_shows_where_the_context_diverged(tmp_path):
    # the line the mod replaces was changed upstream (and the old wording survives elsewhere in the file)
    upstream = BEFORE.replace("    splits = 4\n", "    splits = 8\n").replace("line 5\n", "    splits = 4\n")
    result = judge_mod(write(tmp_path, "m.patch", make_diff(BEFORE, AFTER)), site(tmp_path, upstream))
    assert result.verdict is Verdict.FAILS
    assert "the file matches up to line 19, then has `splits = 8` where the mod expects `splits = 4`" in result.files[0].detail


def test_a_missing_file_fails_and_a_new_file_applies(tmp_path):
    tree = site(tmp_path, BEFORE)
    other = make_diff(BEFORE, AFTER, rel="vllm/elsewhere.py")
    assert judge_mod(write(tmp_path, "a.patch", other), tree).verdict is Verdict.FAILS
    created = "".join(difflib.unified_diff([], ["x = 1\n"], "/dev/null", "b/vllm/new.py"))
    assert judge_mod(write(tmp_path, "b.patch", created), tree).verdict is Verdict.APPLIES


@pytest.mark.parametrize("text", ["this is not a diff\n", "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n garbage\n", ""])
def test_a_malformed_diff_is_one_failing_line(tmp_path, text):
    result = judge_mod(write(tmp_path, "bad.patch", text), site(tmp_path, BEFORE))
    assert result.verdict is Verdict.FAILS
    assert "\n" not in result.detail


def test_paths_as_the_run_scripts_write_them():
    assert site_relative("usr/local/lib/python3.12/dist-packages/vllm/x.py") == "vllm/x.py"
    assert site_relative("a/vllm/x.py") == "vllm/x.py"
    assert site_relative("/opt/venv/lib/python3.12/site-packages/flashinfer/y.py") == "flashinfer/y.py"


def test_a_tree_never_reads_outside_itself(tmp_path):
    tree = site(tmp_path, BEFORE)
    (tmp_path / "secret.py").write_text("x")
    assert tree.read("../secret.py") is None
    assert tree.read("/etc/passwd") is None


def test_a_fifo_is_refused_not_opened(tmp_path):
    import os

    tree = site(tmp_path, BEFORE)
    os.mkfifo(tmp_path / "site" / "vllm" / "fifo.py")
    with pytest.raises(ModError, match="not a regular file"):
        tree.read("vllm/fifo.py")


@pytest.mark.parametrize("spec", ["vllm", "vllm>=0.3", "vllm==0.3.*", "not a spec!"])
def test_a_release_is_named_exactly(spec):
    with pytest.raises(ModError, match="--release"):
        parse_release(spec)


# ---- the command -----------------------------------------------------------------------------------------------
REPO = Path(__file__).resolve().parents[2]


def sd(*args: str) -> subprocess.CompletedProcess:
    """The real command in a process of its own: its exit code, stdout and stderr as a user sees them."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_cli_exit_codes_and_json(tmp_path):
    tree = site(tmp_path, BEFORE)
    good = write(tmp_path, "good.patch", make_diff(BEFORE, AFTER))
    bad = write(tmp_path, "bad.patch", make_diff(BEFORE.replace("    splits = 4", "other"), "x\n"))
    ok = sd("mods", "check", str(good), "--site", str(tree.dirs[0]), "-f", "json")
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["kind"] == "mods" and doc["counts"] == {"applies": 1} and doc["exit_code"] == 0
    failed = sd("mods", "check", str(good), str(bad), "--site", str(tree.dirs[0]))
    assert failed.returncode == 1
    assert "a mod fails" in failed.stdout


@pytest.mark.parametrize("given", ["missing", "a-file", "dangling-link"])
def test_a_site_that_is_no_folder_is_bad_input_never_a_failing_mod(tmp_path, given):
    """`--site ./unpacked/site-packages` mistyped (or naming a file) judged every mod against nothing: "fails ... is not
    in /nonexistent", exit 1, "a mod fails: the launch would break" about a mod that applies. Bad input: one line,
    exit 2, JSON on stdout, no mod judged."""
    tree = site(tmp_path, BEFORE)
    good = write(tmp_path, "good.patch", make_diff(BEFORE, AFTER))
    where = tmp_path / given
    if given == "a-file":
        where.write_text("x\n")
    elif given == "dangling-link":
        where.symlink_to(tmp_path / "gone")
    for sites in ([where], [tree.dirs[0], where]):
        done = sd("mods", "check", str(good), *(a for s in sites for a in ("--site", str(s))), "-f", "json")
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (done.returncode, done.stdout, done.stderr)
        assert f"--site {where}: " in done.stderr and "not a folder" in done.stderr, done.stderr
        assert json.loads(done.stdout)["errors"][0]["exit_code"] == 2


def test_a_mod_name_with_a_line_break_cannot_print_a_verdict_line_of_its_own(tmp_path):
    """A mod folder or file named `x\\n  applies  ok.patch` printed its line break raw: the console showed an
    `applies` line no mod had. A name is one line: its line break is printed escaped, as an ESC already was."""
    tree = site(tmp_path, BEFORE)
    name = "bad\n  applies         forged.patch"
    mod = write(tmp_path, name, make_diff(BEFORE.replace("    splits = 4", "other"), "x\n"))
    done = sd("mods", "check", str(mod), "--site", str(tree.dirs[0]))
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert not [line for line in lines if line.lstrip().startswith("applies")], done.stdout
    assert any("bad\\n  applies" in line for line in lines), done.stdout


def test_cli_strict_fails_on_superseded(tmp_path):
    tree = site(tmp_path, AFTER.replace("line 19\n", "rewritten 19\n").replace("line 21\n", "new 21\n"))
    mod = write(tmp_path, "m.patch", make_diff(BEFORE, AFTER))
    assert sd("mods", "check", str(mod), "--site", str(tree.dirs[0])).returncode == 0
    assert sd("mods", "check", str(mod), "--site", str(tree.dirs[0]), "--strict").returncode == 1


@pytest.mark.parametrize("argv, words", [
    (["--release", "vllm"], "NAME==VERSION"),
    (["--site", "x", "--release", "vllm==0.1"], "exclude each other"),
    (["--timeout", "0"], "--timeout"),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, argv, words):
    mod = write(tmp_path, "m.patch", make_diff(BEFORE, AFTER))
    done = sd("mods", "check", str(mod), *argv)
    assert done.returncode == 2, done.stderr
    assert words in done.stderr and done.stderr.count("\n") == 1 and not done.stdout


def test_cli_python_takes_a_venv_folder_and_no_interpreter_is_exit_3(tmp_path):
    """`--python` as `check --python` takes it: a venv's folder is its bin/python (it was "could not start:
    Permission denied", exit 2), and no interpreter there is exit 3, the README's "target not probeable" (was 2)."""
    mod = write(tmp_path, "m.patch", make_diff(BEFORE, AFTER))  # patches a file this venv does not have
    done = sd("mods", "check", str(mod), "--python", sys.prefix, "-f", "json")
    assert done.returncode == 1 and json.loads(done.stdout)["counts"] == {"fails": 1}, done.stdout + done.stderr
    done = sd("mods", "check", str(mod), "--python", "/nonexistent/python")
    assert done.returncode == 3 and "--python /nonexistent/python: no such interpreter" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and not done.stdout


def test_cli_a_path_that_is_not_a_mod(tmp_path):
    tree = site(tmp_path, BEFORE)
    odd = write(tmp_path, "notes.txt", "hello")
    for path in (odd, tmp_path / "missing.patch"):
        done = sd("mods", "check", str(path), "--site", str(tree.dirs[0]))
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
