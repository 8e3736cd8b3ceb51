"""The real CLI in a fresh process under faults of its environment: a signal while it starts, a reader that leaves
the help early, an ASCII file-system encoding. Each failure is one line and a documented exit code, never a
traceback; under `--format json` a document on stdout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cli import snap

REPO = Path(__file__).resolve().parents[1]

# The console entry point, with a signal sent to itself the moment typer (the CLI's framework) starts to load: the
# same place every time, where a Ctrl-C typed right after Enter lands on a busy box.
SIGNAL_WHILE_LOADING = """
import os, signal, sys

SIG = int(sys.argv[1])


class SignalAtTyper:
    def find_spec(self, name, path=None, target=None):
        if name == "typer":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), SIG)
        return None

sys.meta_path.insert(0, SignalAtTyper())
sys.argv = ["sparkdoctor", "check", "--python", sys.argv[2], "--no-kernels", "--format", "json"]
from sparkdoctor.launch import main
main()
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARKDOCTOR_DEBUG", "FORCE_COLOR", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"),
               SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"))
    return env


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_the_cli_loads_is_one_line_and_a_document(tmp_path, sig):
    """A Ctrl-C while the modules loaded printed Python's KeyboardInterrupt traceback; SIGTERM and SIGHUP ended the
    process with no line and no JSON document. Now the signal waits for the real handlers: one line, the document,
    128 + signal, as later in the run."""
    p = subprocess.run([sys.executable, "-c", SIGNAL_WHILE_LOADING, str(int(sig)), sys.executable], env=_env(tmp_path),
                       capture_output=True, text=True, timeout=120,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as from a terminal
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == 128 + sig, (p.returncode, p.stderr)
    assert p.stderr == f"sparkdoctor: error: interrupted ({sig.name}); every process it started was stopped\n", p.stderr
    doc = json.loads(p.stdout)
    assert doc["exit_code"] == 128 + sig and doc["errors"][0]["code"] == "interrupted", doc


def test_a_venv_at_a_non_ascii_path_under_an_ascii_locale_is_checked(tmp_path):
    """Under an ASCII file-system encoding (`LC_ALL=C` with UTF-8 mode off, or a Latin-1 locale), the scan for a
    copied venv decoded its scripts' first lines as UTF-8 and asked the file system about `/…/dé/v/bin`: an internal
    error (UnicodeEncodeError), exit 2, for a healthy venv. A copy of it is still seen to run the first one's python."""
    first = tmp_path / "dé" / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(first)], check=True, timeout=300, capture_output=True)
    (first / "bin" / "tool").write_text(f"#!{first}/bin/python\nprint('hi')\n")  # a console script, as pip writes it
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(first), str(copy)], check=True, timeout=60)
    env = {**_env(tmp_path), "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    for python, moved in ((first, False), (copy, True)):
        p = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--python", str(python / "bin" / "python"),
                            "--no-kernels", "--format", "json"], env=env, capture_output=True, timeout=300)
        err = p.stderr.decode("ascii", "backslashreplace")
        assert p.returncode in (0, 1) and "internal error" not in err, (p.returncode, err)
        assert json.loads(p.stdout)["kind"] == "report"
        assert ("run another interpreter" in " ".join(err.split())) is moved, err


@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_a_stdout_that_takes_part_of_the_document_is_one_line_not_a_pass(tmp_path, unbuffered):
    """Under PYTHONUNBUFFERED=1 (set by many container images and CI systems) stdout is Python's unbuffered file,
    whose text layer drops what a short write left (a disk that fills, a file-size limit): a JSON report cut at the
    limit, and exit 0. Now the document is written whole or the run ends in one line, exit 2."""
    import resource

    env = {**_env(tmp_path), "PYTHONUNBUFFERED": unbuffered}
    report = tmp_path / "report.json"
    with report.open("wb") as out:  # -B: Python keeps a .pyc cut at the limit (its own writer)
        p = subprocess.run([sys.executable, "-B", "-m", "sparkdoctor", "check", "--python", sys.executable, "--no-kernels",
                            "--format", "json"], env=env, stdout=out, stderr=subprocess.PIPE, text=True, timeout=300,
                           preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)))
    assert report.stat().st_size <= 4096  # the document is longer (~16 kB): it was cut
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stderr == "sparkdoctor: error: cannot write the report to stdout: File too large (use -o FILE)\n", p.stderr


@pytest.mark.parametrize(("args", "code"), [
    (["--help"], 0), (["check", "--help"], 0), (["matrix", "--help"], 0), (["matrix", "list", "--help"], 0),
    (["fix", "--help"], 0), (["--version"], 0), ([], 2), (["matrix"], 2), (["matrix", "list"], 0),
    (["check", "--facts", str(snap("gb10-broken")), "-f", "json"], 1),
])
def test_output_into_a_closed_pipe_ends_quietly_with_the_commands_exit_code(tmp_path, args, code):
    """`sparkdoctor --help | head -1` exited 1: typer draws help with rich, whose console answers a broken pipe with
    SystemExit(1), and click's echo (`--version`) the same. A reader that leaves early is not an error: no line on
    stderr, the exit code the command would have had (0 for help, 2 for a bare group, a report's verdict)."""
    read, write = os.pipe()
    os.close(read)  # the reader has left before the first byte: every write is EPIPE
    try:
        p = subprocess.run([sys.executable, "-m", "sparkdoctor", *args], env=_env(tmp_path), stdout=write,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert (p.returncode, p.stderr) == (code, ""), (args, p.returncode, p.stderr)
