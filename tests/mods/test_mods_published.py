"""A mod script's output is not published: the console verdict and the JSON show only its patch and error lines,
anonymized as a bug report is. The script is hostile here: it prints a private key and tokens it carries in its own
folder (the sandbox hides the machine's, test_mods_sandbox), between lines a failing patch prints."""

from __future__ import annotations

import getpass
import json

import pytest

from sparkdoctor.mods.judge import judge_mod
from sparkdoctor.mods.model import Verdict
from sparkdoctor.mods.published import shown_lines
from tests.mods.test_mods_sandbox import tree  # noqa: F401  (a fixture)
from tests.mods.test_mods_scripts import folder
from tests.mods.test_mods_static import BEFORE, make_diff, sd

KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
       "QyNTUxOQAAACBnS3Jx8Yb2kZVqGm4t0p3XcL1FvYhN7wQeR5uUjKsP6QAAAJgAAAAAAAAA\nAAAECWJvYkBzcGFyaw==\n"
       "-----END OPENSSH PRIVATE KEY-----\n")
TOKEN = "glpat-Xy7aB3cD9eF1gH5iJ2kL"
HF = "hf_QwErTyUiOpAsDfGhJkLzXcVbNm123456"


@pytest.fixture(autouse=True)
def _tools(sandbox_tools):
    pass


def hostile(tmp_path):
    stale = make_diff(BEFORE.replace("    splits = 4", "    splits = 2"), BEFORE, prefix="a/usr/local/lib/python3.12/dist-packages/")
    return folder(tmp_path, "cat key\n"
                            f"echo 'deploy token {TOKEN}'\n"
                            f"echo \"error: push to https://{HF}@hub.corp.example.com/x failed\" >&2\n"
                            "patch -p1 -d / < fix.patch\n"
                            "echo 'cleanup: done'\n"
                            "exit 1\n", key=KEY, fix_patch=stale)


def test_only_patch_and_error_lines_are_shown_and_they_are_anonymized(tmp_path, tree):  # noqa: F811
    result = judge_mod(hostile(tmp_path), tree)
    assert result.verdict is Verdict.FAILS
    published = json.dumps(result.to_dict())
    for secret in ("PRIVATE KEY", "b3BlbnNzaC1rZXkt", "AAAECWJvYkBzcGFyaw", TOKEN, HF, "hub.corp.example.com", "cleanup"):
        assert secret not in published, secret
    assert "patching file usr/local/lib/python3.12/dist-packages/vllm/toy.py" in result.output_tail
    assert "Reversed (or previously applied) patch detected" in result.output_tail
    assert "1 out of 1 hunk ignored" in result.output_tail
    assert "error: push to https://<redacted>@<host>/x failed" in result.output_tail


def test_the_last_line_of_a_failing_script_is_not_the_verdict(tmp_path, tree):  # noqa: F811
    """`exited 1: <the last line>` showed whatever the script printed last."""
    mod = folder(tmp_path, "cat key | tail -n 2 | head -n 1\nexit 1\n", key=KEY)
    result = judge_mod(mod, tree)
    assert result.verdict is Verdict.FAILS
    assert result.detail == "run.sh exited 1: no patch or error line in its output"
    assert result.output_tail == ""


def test_the_cli_console_and_json_show_no_secret(tmp_path, tree):  # noqa: F811
    mod = hostile(tmp_path)
    for fmt in ("console", "json"):
        done = sd("mods", "check", str(mod), "--site", str(tree.dirs[0]), "-f", fmt)
        assert done.returncode == 1, done.stderr
        for secret in ("PRIVATE KEY", "AAAECWJvYkBzcGFyaw", TOKEN, HF):
            assert secret not in done.stdout + done.stderr, (fmt, secret)


def test_the_shapes_that_are_shown():
    user = getpass.getuser()
    output = "\n".join([
        "patching file vllm/toy.py", "Hunk #2 FAILED at 40.", "1 out of 2 hunks FAILED -- saving rejects to file vllm/toy.py.rej",
        "Reversed (or previously applied) patch detected!  Assume -R? [n]", "sed: -e expression #1, char 5: unterminated `s' command",
        "run.sh: line 4: foo: command not found", "Traceback (most recent call last):", '  File "fix.py", line 3, in <module>',
        "AssertionError: target text not found", f"cp: cannot stat '/home/{user}/x': No such file or directory",
        "\x1b[31merror: red\x1b[0m", "hello", "all good", "-----BEGIN OPENSSH PRIVATE KEY-----", "root:$y$j9T$abc:19000:0:99999:7:::",
    ])
    shown = shown_lines(output)
    assert shown == [
        "patching file vllm/toy.py", "Hunk #2 FAILED at 40.", "1 out of 2 hunks FAILED -- saving rejects to file vllm/toy.py.rej",
        "Reversed (or previously applied) patch detected!  Assume -R? [n]", "sed: -e expression #1, char 5: unterminated `s' command",
        "run.sh: line 4: foo: command not found", "Traceback (most recent call last):", 'File "fix.py", line 3, in <module>',
        "AssertionError: target text not found", "cp: cannot stat '/home/<user>/x': No such file or directory", "error: red",
    ]
