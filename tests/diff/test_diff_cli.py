"""`sparkdoctor diff`, the real command: exit 0 (nothing risky), 1 (risky), 2 (not a snapshot, one line);
strict versioned JSON; and, in the slow part, snapshots that `check --save-facts` took of real uv venvs
that differ in a serving-stack package, in a package outside it, and in an edited file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import venvs
from tests.gb10 import gb10_facts

REPO = Path(__file__).resolve().parents[2]
FACTS = REPO / "tests" / "data" / "facts"


@pytest.fixture
def run(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "SPARKDOCTOR_DEBUG")}
    user_config = tmp_path / "user-config.toml"
    user_config.write_text("")
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_CONFIG=str(user_config), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"),
               SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), COLUMNS="100")

    def call(*args: object, timeout: float = 180) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=timeout)

    return call


def one_line_error(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sparkdoctor: error: "), done.stderr
    return lines[0]


def test_risky_difference_exits_1_and_json_is_strict_and_versioned(run):
    done = run("diff", FACTS / "gb10-broken.json", FACTS / "nogpu-clean.json", "--format", "json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    assert doc["diff_version"] == 1 and doc["verdict"] == "risky" and doc["risky"] >= 1
    assert {"area": "packages", "key": "vllm", "a": "0.22.0", "b": "0.32.0", "verdict": "risky"}.items() <= next(
        d for d in doc["differences"] if d["key"] == "vllm").items()
    assert doc["risky"] + doc["benign"] == len(doc["differences"])


def test_console_lists_risky_first_and_ends_with_the_verdict(run):
    done = run("diff", FACTS / "gb10-broken.json", FACTS / "nogpu-clean.json")
    assert done.returncode == 1
    lines = done.stdout.strip().splitlines()
    marks = [line.split()[1] for line in lines if line.startswith(("✖", "·"))]
    assert marks == sorted(marks, key=lambda m: m != "risky") and "risky" in marks and "benign" in marks
    assert "must not serve one multi-node run" in lines[-1] and lines[-1].endswith("(exit 1)")


def test_same_snapshot_exits_0(run):
    done = run("diff", FACTS / "gb10-broken.json", FACTS / "gb10-broken.json")
    assert done.returncode == 0 and "no differences" in done.stdout


def test_benign_differences_only_exit_0(run, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    gb10_facts().save(a)
    gb10_facts(packages={"numpy": "2.2.6"}, env={"VLLM_HOST_IP": "10.0.0.2"}).save(b)
    done = run("diff", a, b, "--format", "json")
    assert done.returncode == 0
    doc = json.loads(done.stdout)
    assert doc["verdict"] == "benign" and doc["risky"] == 0 and doc["benign"] == 2


@pytest.mark.parametrize("content, words", [
    ("not json", "not valid JSON (line 1, column 1"),
    ('{"schema": 2}', "field 'schema' is 2; this sparkdoctor reads schema 1"),
    ("[1, 2]", "expected a JSON object at the top level"),
    ('{"schema": 1, "driver": {"version": 580}}', "field 'driver.version' should be a version string"),
])
def test_a_file_that_is_not_a_snapshot_is_one_line_naming_it_and_exit_2(run, tmp_path, content, words):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    done = run("diff", FACTS / "gb10-broken.json", bad)
    assert done.returncode == 2 and done.stdout == ""
    line = one_line_error(done)
    assert str(bad) in line and words in line


def test_missing_file_directory_and_bad_format_exit_2(run, tmp_path):
    assert "cannot read snapshot" in one_line_error(run("diff", tmp_path / "nope.json", FACTS / "gb10-broken.json"))
    assert run("diff", tmp_path, FACTS / "gb10-broken.json").returncode == 2
    done = run("diff", FACTS / "gb10-broken.json", FACTS / "gb10-broken.json", "--format", "xml")
    assert done.returncode == 2 and "--format xml: choose one of console, json" in one_line_error(done)


# ---- real snapshots of real venvs ------------------------------------------------------------------

def _venv(name: str, quack: str, six: str) -> Path:
    return venvs.uv_venv(f"diff-{name}", [["--no-deps", f"quack-kernels=={quack}", f"six=={six}"]])


def _snapshot(run, python: Path, path: Path) -> Path:
    done = run("check", "--python", python, "--no-kernels", "--save-facts", path, "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    return path


@pytest.mark.slow
def test_real_snapshots_of_real_venvs(run, tmp_path):
    base = _snapshot(run, _venv("a", "0.6.4", "1.16.0"), tmp_path / "a.json")
    upgraded = _snapshot(run, _venv("b", "0.6.5", "1.17.0"), tmp_path / "b.json")
    six_only = _snapshot(run, _venv("c", "0.6.4", "1.17.0"), tmp_path / "c.json")

    done = run("diff", base, upgraded, "--format", "json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    got = {(d["key"], d["a"], d["b"], d["verdict"]) for d in doc["differences"] if d["area"] == "packages"}
    assert got == {("quack-kernels", "0.6.4", "0.6.5", "risky"), ("six", "1.16.0", "1.17.0", "benign")}

    done = run("diff", base, six_only)
    assert done.returncode == 0, done.stdout
    assert "0 risky, " in done.stdout and "six  1.16.0 → 1.17.0" in done.stdout

    # the same versions, but a file of the serving stack edited by hand: pip cannot see it, diff does
    edited_python = venvs.create(tmp_path / "edited", [])
    subprocess.run([venvs.uv(), "pip", "install", "-q", "--python", str(edited_python), "--no-deps",
                    "quack-kernels==0.6.4", "six==1.16.0"], check=True, timeout=600, capture_output=True)
    init = next((tmp_path / "edited").glob("lib/python*/site-packages/quack/__init__.py"))
    text = init.read_text()
    init.unlink()  # uv hard-links files from its cache: a new file, never a write into the shared one
    init.write_text(text + "\n# hand mod\n")
    edited = _snapshot(run, edited_python, tmp_path / "d.json")
    doc = json.loads(run("diff", base, edited, "--format", "json").stdout)
    risky = [(d["area"], d["key"], d["b"]) for d in doc["differences"] if d["verdict"] == "risky"]
    assert ("modified files", "quack-kernels modified", "quack/__init__.py") in risky
