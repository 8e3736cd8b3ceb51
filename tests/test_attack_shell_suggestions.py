"""A target's package metadata is the target's to write: a version of `0.9.0';touch PWNED;'` went into the pip command
check's remedy and fix's note tell the user to run, inside hand-made single quotes (check, whatif) or none (fix). Pasted
into a shell, either ran the version's second command. Now each such command puts the requirement in quotes a POSIX
shell reads back as the one word it was: the paste runs pip (here a stand-in that prints its arguments), nothing else.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor import requires
from sparkdoctor.text import shell_word
from tests import inproc

HOSTILE = ["0.9.0';touch PWNED;'", "0.9.0;touch PWNED", "0.9.0 $(touch PWNED)", "0.9.0`touch PWNED`", "1'\"'\"'"]


def _target(tmp_path: Path, version: str) -> Path:
    """A venv (`python3 -m venv --without-pip`) holding a vllm .dist-info with no RECORD and `version` in its METADATA."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    info = next(venv.glob("lib/python*/site-packages")) / "vllm-0.9.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n\n")
    return venv


def _pasted(command: str, folder: Path) -> list[str]:
    """What `command` (a `pip install ...` line as shown) does when pasted into sh in `folder`, pip being a stand-in
    that prints each argument it gets on a line of its own."""
    words = command.split("pip install ", 1)[1]
    done = subprocess.run(["sh", "-c", f"printf '%s\\n' {words}"], cwd=folder, capture_output=True, text=True, timeout=30)
    assert not (folder / "PWNED").exists(), f"pasting {command!r} ran a second command"
    return done.stdout.splitlines()


@pytest.mark.parametrize("version", HOSTILE)
def test_shell_word_is_one_word_for_sh(tmp_path, version):
    assert _pasted(f"pip install {shell_word('vllm==' + version)}", tmp_path) == [f"vllm=={version}"]


def test_checks_remedy_for_a_hostile_version_is_one_word_when_pasted(tmp_path):
    version = HOSTILE[0]
    venv = _target(tmp_path, version)
    ran = inproc.run("check", "--python", venv / "bin" / "python", "--no-kernels", "--format", "json")
    remedy = {f["id"]: f for f in json.loads(ran.stdout)["findings"]}["no-record-vllm"]["remedy"]
    command = re.search(r"`(python -m pip install [^`]*)`", remedy)
    assert command is not None, remedy
    assert _pasted(command.group(1), tmp_path) == ["--ignore-installed", "--no-deps", f"vllm=={version}"]


def test_fixs_note_for_a_hostile_version_is_one_word_when_pasted(tmp_path):
    version = HOSTILE[1]
    venv = _target(tmp_path, version)
    ran = inproc.run("fix", "--python", venv / "bin" / "python", "--no-kernels")
    note = next((line for line in ran.stdout.splitlines() if "has no RECORD" in line), None)
    assert note is not None, ran.stdout + ran.stderr
    assert _pasted(note.split("write it again first: ", 1)[1], tmp_path) == ["--ignore-installed", "--no-deps",
                                                                           f"vllm=={version}"]


def test_the_other_remedies_built_from_metadata_quote_the_same_way(tmp_path):
    version = HOSTILE[0]
    gone = requires.Incomplete(name="triton", version=version, missing=["triton/__init__.py"], checked=1)
    command = re.search(r"`(python -m pip install --force-reinstall [^`]*)`", gone.remedy)
    assert command is not None and _pasted(command.group(1), tmp_path)[-1] == f"triton=={version}"
    assert shell_word("x==1") == "'x==1'"  # an ordinary version is shown as before
