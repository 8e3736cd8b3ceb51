"""`-o FILE` naming a file the command reads replaced it with the document, exit 0: `explain server.log -o
server.log` lost the log it explained, `check --facts s.json -o s.json` the snapshot, `mods check fix.patch -o
fix.patch` the mod, `recipe check r.toml -o r.toml` the recipe, `--matrix m.toml -o m.toml` the matrix (only `report
--facts` and `diff A B` refused it). Every verb refuses it now, before anything is read or run: one line, exit 2, the
input byte for byte as it was (with -o the error document is written nowhere: docs/json.md)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SNAPSHOT = REPO / "tests" / "data" / "facts" / "nogpu-clean.json"
MATRIX = 'component = "test"\n'
RECIPE = 'schema = 1\nname = "r"\nmodel = "m"\ncommand = ["vllm", "serve", "m"]\n'
DIFF = "--- a/idna/x.py\n+++ b/idna/x.py\n@@ -1 +1 @@\n-a\n+b\n"


def _inputs(folder: Path) -> dict[str, Path]:
    files = {"log": ("server.log", "Unexpected instruction types specified for '_mma'\n"), "matrix": ("m.toml", MATRIX),
             "facts": ("s.json", SNAPSHOT.read_text()), "recipe": ("r.toml", RECIPE), "mod": ("fix.patch", DIFF)}
    made = {}
    for key, (name, text) in files.items():
        made[key] = folder / name
        made[key].write_text(text)
    (folder / "link.log").symlink_to(made["log"])
    made["link"] = folder / "link.log"
    return made


CASES = [
    ("{log}", ["explain", "{log}"]),
    ("{link}", ["explain", "{log}"]),  # a link to the input is the input
    ("{log}", ["explain", "{link}"]),
    ("{matrix}", ["explain", "{log}", "--matrix", "{matrix}"]),
    ("{facts}", ["check", "--facts", "{facts}"]),
    ("{matrix}", ["check", "--facts", "{facts}", "--matrix", "{matrix}"]),
    ("{facts}", ["whatif", "idna==3.6", "--no-read", "--facts", "{facts}"]),
    ("{recipe}", ["whatif", "idna==3.6", "--no-read", "--facts", "{facts}", "--recipe", "{recipe}"]),
    ("{mod}", ["mods", "check", "{mod}"]),
    ("{recipe}", ["recipe", "check", "{recipe}"]),
    ("{recipe}", ["recipe", "show", "{recipe}"]),
    ("{matrix}", ["rerun", "--dry-run", "--matrix", "{matrix}", "--ledger", "{folder}/none.sqlite"]),
    ("{matrix}", ["report", "--facts", "{facts}", "--matrix", "{matrix}"]),
    ("{matrix}", ["fix", "--matrix", "{matrix}"]),
    ("{recipe}", ["bench", "{recipe}"]),
    ("{matrix}", ["matrix", "track", "--matrix", "{matrix}"]),  # its -o also writes the JSON document
]


@pytest.mark.parametrize("output, argv", CASES, ids=[" ".join(a[:2]) + " -o " + o for o, a in CASES])
def test_the_document_never_replaces_a_file_the_command_reads(tmp_path, output, argv):
    made = {k: str(v) for k, v in _inputs(tmp_path).items()}
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()}
    args = [a.format(folder=tmp_path, **made) for a in argv] + ["-o", output.format(**made)]
    env = dict(os.environ, SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", *args], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, (done.returncode, done.stderr)
    assert "the document would replace it" in done.stderr, done.stderr
    assert done.stdout == ""
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir() if p.name in before}
    assert after == before
    assert not (tmp_path / "state").exists()


def test_a_new_output_file_and_an_unrelated_one_are_written_as_before(tmp_path):
    made = _inputs(tmp_path)
    (tmp_path / "old.json").write_text("{}")
    for out in ("new.json", "old.json"):
        done = subprocess.run([sys.executable, "-m", "sparkdoctor", "explain", str(made["log"]), "-o", out, "-f", "json"],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert json.loads((tmp_path / out).read_text())["command"] == "explain"


@pytest.mark.parametrize("argv", [["history", "--recipe", "{name}"], ["conclusions", "{name}"],
                                  ["rerun", "{name}", "--dry-run"]])
def test_a_text_option_equal_to_the_output_is_no_input(tmp_path, argv):
    """A recipe or conclusion name is text, not a file: `history --recipe r -o r` with a file r there was refused as
    if the document would replace the recipe (the guard compared every string option with the output)."""
    from sparkdoctor.ledger import Ledger

    Ledger(tmp_path / "l.sqlite").close()
    (tmp_path / "r").write_text("an earlier document\n")
    args = [a.format(name="r") for a in argv] + ["--ledger", str(tmp_path / "l.sqlite"), "-o", "r", "-f", "json"]
    env = dict(os.environ, SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", *args], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=env)
    assert "the document would replace it" not in done.stderr, done.stderr
    if argv[0] == "history":  # the (empty) list replaces the earlier document
        assert done.returncode == 0 and json.loads((tmp_path / "r").read_text())["command"] == "history", done.stderr
    else:  # judged as a name: the ledger has no such conclusion (and a failure is written nowhere with -o)
        assert "no conclusion named 'r'" in done.stderr, done.stderr
