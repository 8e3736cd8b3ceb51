"""explain's inputs (issue 20, item 11): the symptom normaliser is linear in a line's length (a 40 KB line took
27 s, 250 KB over 300 s), and gives exactly what the old pattern gave; a FIFO with no writer is refused, a pipe
with one is read; the run-wide --timeout bounds the whole run. benchmarks/explain_long_lines.py measures the
speed; docs/evidence/explain-speed.md holds its numbers."""

from __future__ import annotations

import base64
import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkdoctor.matrix import load
from sparkdoctor.matrix.symptoms import _PATH, match_text, normalise
from sparkdoctor.serve.logscan import match_line

ROOT = Path(__file__).resolve().parents[1]
# The pattern before the fix (quadratic on a long run of path characters with no '/' after it): the reference
# the linear one must agree with, match for match.
OLD_PATH = re.compile(r"(?:[A-Za-z]:)?(?:\.{0,2}/)?(?:[\w.+@-]+/)+[\w.+@-]*|/[\w.+@-]+")
SYMPTOM = "RuntimeError: CUDA error: no kernel image is available for execution on the device"


@settings(max_examples=3000, deadline=None, derandomize=True, database=None)
@given(st.text(alphabet=st.sampled_from(list("aZq9:/.-_+@ \t(\u00e9\u0430")), max_size=24) | st.text(max_size=24))
def test_the_linear_path_pattern_matches_exactly_what_the_old_one_did(text):
    assert [m.span() for m in _PATH.finditer(text)] == [m.span() for m in OLD_PATH.finditer(text)]


def long_lines(n: int) -> dict[str, str]:
    return {"word": "a" * n, "json": '{"k": "' + "v" * n + '"}', "base64": base64.b64encode(os.urandom(n * 3 // 4)).decode(),
            "drives": "a:" * (n // 2), "path-then-colon": "x/" + "a" * (n // 2) + ":" + "b" * (n // 2)}


@pytest.mark.parametrize("kind", sorted(long_lines(8)))
def test_a_one_megabyte_line_is_normalised_in_well_under_a_second(kind):
    line = long_lines(1_000_000)[kind]
    started = time.process_time()  # CPU time: a busy CI machine does not make it fail
    normalise(line)
    assert time.process_time() - started < 2.0  # measured 0.05-0.25 s; quadratic was hours


def test_explain_and_the_live_log_scan_find_a_symptom_after_a_megabyte_line():
    entries = load(None).entries
    text = "x" * 1_000_000 + "\n" + SYMPTOM + "\n"
    started = time.process_time()
    found = {m.entry.id for m in match_text(text, entries)}
    assert found and time.process_time() - started < 10.0
    started = time.process_time()
    assert not match_line("q" * 1_000_000, entries) and time.process_time() - started < 5.0


def explain(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkdoctor", "explain", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, **kw)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_with_no_writer_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "server.log"
    os.mkfifo(fifo)
    p = explain(fifo)
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert "server.log: cannot read: is a FIFO with no writer" in p.stderr, p.stderr


def test_a_pipe_with_a_writer_is_read():
    """`sparkdoctor explain <(journalctl ...)`: the shell passes /dev/fd/N, a pipe with a live writer."""
    read, write = os.pipe()
    os.write(write, (SYMPTOM + "\n").encode())
    os.close(write)
    p = explain(f"/dev/fd/{read}", "-f", "json", pass_fds=(read,))
    os.close(read)
    assert p.returncode == 0 and '"match": "exact"' in p.stdout, p.stderr


@pytest.mark.parametrize("path", ["/dev/zero", "/"])
def test_devices_and_folders_are_refused(path):
    p = explain(path)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "not a regular file" in p.stderr, p.stderr


def test_explain_has_the_run_wide_time_limit(tmp_path):
    log = tmp_path / "big.log"
    log.write_text(("x" * 200 + "\n") * 20_000)
    p = explain(log, "--timeout", "0.001")
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "explain: the run's time limit ran out (--timeout 0.001 s)" in p.stderr
    assert explain(log, "--timeout", "0").returncode == 2
    assert explain(log, "--timeout", "60").returncode == 1  # no symptom in it: exit 1, in time


class _Terminal:
    """stdin at a terminal, with what a person pasted and ended with Ctrl-D."""

    def __init__(self, text: bytes) -> None:
        self.buffer = io.BytesIO(text)

    def isatty(self) -> bool:
        return True


def test_text_pasted_at_a_terminal_is_read_after_a_prompt(monkeypatch, capsys):
    # it was refused with "paste the error text and end with Ctrl-D", which the refusal left no way to do
    from sparkdoctor.commands.explain import ExplainCommand, run

    pasted = (ROOT / "tests" / "data" / "explain" / "mamba-align-assert.log").read_bytes()
    monkeypatch.setattr(sys, "stdin", _Terminal(pasted))
    result = run(ExplainCommand())
    assert result.exit_code == 0 and [m.entry.id for m in result.data.matches] == ["vllm-mamba-align-mnbt"]
    assert capsys.readouterr().err == (
        "sparkdoctor explain: paste the error text, then Ctrl-D on a line of its own (Ctrl-C stops)\n")


def test_an_error_line_given_as_the_argument_is_the_text(tmp_path):
    # `sparkdoctor explain "AssertionError: ..."` said "cannot read: No such file or directory": the help promised
    # pasted error text, and the argument was only ever a file's name
    line = (ROOT / "tests" / "data" / "explain" / "mamba-align-assert.log").read_text().splitlines()[3]
    for text in (line, line * 20, f"/etc/hostname/{line}"):  # no such file; a name too long; a file as a folder
        p = explain(text, "-f", "json")
        assert p.returncode == 0 and '"source": "the text given"' in p.stdout, p.stderr
        assert '"id": "vllm-mamba-align-mnbt"' in p.stdout
    missing = explain(tmp_path / "server.log")  # a name with no space is a file that is not there, as before
    assert missing.returncode == 2 and missing.stderr.endswith("server.log: cannot read: No such file or directory\n")


def test_an_entry_id_given_as_the_argument_says_where_that_entry_is_printed(tmp_path):
    """`sparkdoctor explain torch-cuda-below-128` (a finding's id, copied from check) said only "cannot read: No
    such file or directory"; a file of that name is still read as a log."""
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "explain", "torch-cuda-below-128"], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == "", p
    assert p.stderr == ("sparkdoctor: error: torch-cuda-below-128: no such file; it is a matrix entry's id: "
                        "`sparkdoctor matrix show torch-cuda-below-128` prints that entry (explain reads a log or "
                        "error text)\n")
    (tmp_path / "torch-cuda-below-128").write_text(SYMPTOM + "\n")
    read = subprocess.run([sys.executable, "-m", "sparkdoctor", "explain", "torch-cuda-below-128"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert read.returncode == 0 and "torch-cuda-below-128" in read.stdout, read
