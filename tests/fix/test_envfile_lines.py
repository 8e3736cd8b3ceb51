"""An env file's lines as the server's readers split them. docker's `--env-file` ends a line at `\\n` (Go's
bufio.ScanLines: `\\r?\\n`, a `\\r` before the `\\n` dropped) and systemd's EnvironmentFile at `\\n` or `\\r`; neither ends
one at a form feed, `\\v`, `\\x1c`-`\\x1e`, `\\x85`, `\\u2028` or `\\u2029`, as str.splitlines does. fix read the file
and edited it with splitlines: `OTHER=a<FF>VLLM_NVFP4_GEMM_BACKEND=cutlass` was judged as setting the variable (the
server gets one variable, OTHER), and the fix that removed it cut OTHER's value short. A carriage return inside a line
is read one way by docker and another by systemd: one line naming it, exit 2, before anything runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sparkdoctor.fix import edits
from sparkdoctor.fix.envfile import read_env_file
from sparkdoctor.fix.interface import FixError
from tests.fix.test_fix_refusals_first import SMALL, bare_venv

INSIDE = ["\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("ch", INSIDE, ids=[f"U+{ord(c):04X}" for c in INSIDE])
def test_a_line_break_of_python_alone_is_part_of_the_value(tmp_path, ch):
    env = tmp_path / "vllm.env"
    env.write_text(f"OTHER=a{ch}VLLM_NVFP4_GEMM_BACKEND=cutlass\nB=2\n", encoding="utf-8")
    assert read_env_file(env) == {"OTHER": f"a{ch}VLLM_NVFP4_GEMM_BACKEND=cutlass", "B": "2"}


@pytest.mark.parametrize("ch", INSIDE, ids=[f"U+{ord(c):04X}" for c in INSIDE])
def test_the_edits_keep_such_a_value_whole(ch):
    text = f"OTHER=a{ch}VLLM_NVFP4_GEMM_BACKEND=cutlass\n"
    assert edits.unset_env(text, ["VLLM_NVFP4_GEMM_BACKEND"]) == text
    assert edits.set_env(text, "VLLM_NVFP4_GEMM_BACKEND", "marlin") == text + "VLLM_NVFP4_GEMM_BACKEND=marlin\n"
    assert edits.unset_env(text + "B=1\n", ["OTHER"]) == "B=1\n"


def test_crlf_lines_are_read_as_docker_reads_them_and_edits_keep_their_ending(tmp_path):
    env = tmp_path / "vllm.env"
    env.write_bytes(b"A=1\r\nB=x y\r\nC=3\r")
    assert read_env_file(env) == {"A": "1", "B": "x y", "C": "3"}
    text = "A=1\r\nB=2\r\n"
    assert edits.set_env(text, "A", "3") == "A=3\r\nB=2\r\n"
    assert edits.unset_env(text, ["A"]) == "B=2\r\n"


def test_a_carriage_return_inside_a_line_is_refused_naming_the_line(tmp_path):
    env = tmp_path / "vllm.env"
    env.write_bytes(b"A=1\nOTHER=a\rVLLM_NVFP4_GEMM_BACKEND=cutlass\n")
    with pytest.raises(FixError, match=r"vllm.env: line 2 holds a carriage return"):
        read_env_file(env)


def sd(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *args], capture_output=True, text=True, timeout=120)


def test_fix_judges_and_edits_what_the_server_gets(tmp_path):
    python, env = bare_venv(tmp_path), tmp_path / "vllm.env"
    text = "OTHER=a\fVLLM_NVFP4_GEMM_BACKEND=cutlass\n"
    env.write_text(text, encoding="utf-8")
    res = sd("fix", "--python", str(python), *SMALL, "--env-file", str(env), "--format", "json")
    body = json.loads(res.stdout)
    assert body["plan"]["steps"] == [] and "small-env-stale" not in json.dumps(body["findings"]), res.stdout[-800:]
    assert env.read_text(encoding="utf-8") == text
    env.write_text(text.replace("\f", "\n"), encoding="utf-8")  # the same variable on a line of its own: found
    res = sd("fix", "--python", str(python), *SMALL, "--env-file", str(env), "--format", "json")
    assert json.loads(res.stdout)["plan"]["steps"][0]["new_text"] == "OTHER=a\n", res.stdout[-800:]


def test_fix_refuses_a_carriage_return_inside_a_line_before_the_check(tmp_path):
    python, env = bare_venv(tmp_path), tmp_path / "vllm.env"
    env.write_bytes(b"OTHER=a\rVLLM_NVFP4_GEMM_BACKEND=cutlass\n")
    res = sd("fix", "--python", str(python), *SMALL, "--env-file", str(env))
    errors = [ln for ln in res.stderr.strip().splitlines() if not ln.startswith("sparkdoctor fix: ")]
    assert res.returncode == 2 and len(errors) == 1, (res.returncode, res.stderr)
    assert errors[0].startswith(f"sparkdoctor: error: --env-file {env}: line 1 holds a carriage return"), errors[0]
    assert "checking the target" not in res.stderr
