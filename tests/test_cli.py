"""The real command, end to end, in a subprocess: exit codes, formats, files, errors as one line.

Runs `python -m sparkdoctor` from a scratch folder (no stray ./sparkdoctor.toml) with the user's
config and cache pointed into tmp, against the snapshots in tests/data/facts and a matrix written
by the test.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.test_render import ENTRIES, FACTS_DIR, write_matrix

REPO = Path(__file__).resolve().parent.parent
CUTEDSL = "cutedsl-libs-base-mma"


@pytest.fixture
def run(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "SPARKDOCTOR_DEBUG")}
    user_config = tmp_path / "empty-user-config.toml"  # a named config file must exist
    user_config.write_text("")
    env.update(
        PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
        SPARKDOCTOR_CONFIG=str(user_config),
        SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"),
        SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"),
        COLUMNS="100",
    )
    work = tmp_path / "cwd"
    work.mkdir()

    def call(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], cwd=work, env=env,
                              capture_output=True, text=True, timeout=timeout)

    return call


@pytest.fixture
def matrix(tmp_path) -> Path:
    return write_matrix(tmp_path / "matrix")


def snap(name: str) -> Path:
    return FACTS_DIR / f"{name}.json"


def assert_one_line_error(p: subprocess.CompletedProcess, *needles: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("sparkdoctor: error: "), p.stderr
    assert "Traceback" not in p.stderr
    for needle in needles:
        assert needle in lines[0]
    assert p.stdout == ""


# ---- exit codes -----------------------------------------------------------------------------------


def test_clean_snapshot_exits_0(run, matrix):
    p = run("check", "--facts", snap("nogpu-clean"), "--matrix", matrix)
    assert p.returncode == 0, p.stderr
    assert "fail-on error → PASS (exit 0)" in p.stdout
    assert "\x1b[" not in p.stdout  # a pipe gets no colour codes
    assert max(len(line) for line in p.stdout.splitlines()) <= 100
    assert p.stderr == ""


def test_errors_exit_1(run, matrix):
    p = run("check", "--facts", snap("gb10-broken"), "--matrix", matrix)
    assert p.returncode == 1, p.stderr
    assert CUTEDSL in p.stdout
    assert p.stdout.strip().splitlines()[-1].endswith("fail-on error → FAIL (exit 1)")


def test_no_gpu_and_no_arch_is_judged_as_an_assumed_gb10_not_a_pass(run, matrix, tmp_path):
    # The same broken environment seen from a builder with no GPU: it used to read "clear" and exit 0.
    doc = json.loads(snap("gb10-broken").read_text())
    doc.update(gpus=[], arch={"value": None, "source": "none"})
    builder = tmp_path / "builder.json"
    builder.write_text(json.dumps(doc))
    p = run("check", "--facts", builder, "--matrix", matrix)
    assert p.returncode == 1, p.stdout
    assert CUTEDSL in p.stdout and "no known problem" not in p.stdout
    assert "sm_121a (assumed: no GPU detected; pass --arch to choose)" in p.stdout
    report = json.loads(run("check", "--facts", builder, "--matrix", matrix, "-f", "json").stdout)
    assert report["facts"]["arch"]["source"] == "assumed"
    [finding] = [f for f in report["findings"] if f["id"] == CUTEDSL]
    assert any("assumed" in line for line in finding["evidence"])


def test_warnings_fail_only_when_strict(run, tmp_path):
    warn_only = write_matrix(tmp_path / "warn-only", ["triton-ptxas-sm121a", "vllm-files-modified"])
    # Nothing in this matrix explains the snapshot's failing CuTe DSL probe: that is an error of its own.
    base = ("check", "--facts", snap("gb10-broken"), "--matrix", warn_only, "--ignore", "probe-cutedsl-nvfp4-mma")
    assert run(*base).returncode == 0
    assert run(*base, "--strict").returncode == 1
    assert run(*base, "--fail-on", "warn").returncode == 1
    assert run(*base, "--fail-on", "info").returncode == 1


def test_ignore_flag_and_config_file(run, matrix, tmp_path):
    base = ("check", "--facts", snap("gb10-broken"), "--matrix", matrix)
    p = run(*base, "--ignore", CUTEDSL)
    assert p.returncode == 0, p.stdout
    assert f"ignored: {CUTEDSL}" in p.stdout
    config = tmp_path / "sparkdoctor.toml"
    config.write_text(f'[check]\nignore = [{{ id = "{CUTEDSL}", reason = "fixed in our image build" }}]\n')
    assert run(*base, "--config", config).returncode == 0
    config.write_text(f'[check]\nignore = ["{CUTEDSL}"]\nfail_on = "warn"\n')
    assert run(*base, "--config", config).returncode == 1  # the warning now fails


def test_unprobed_target_exits_3(run, matrix):
    p = run("check", "--facts", snap("unprobed"), "--matrix", matrix)
    assert p.returncode == 3
    assert "target could not be probed (exit 3)" in p.stdout


# ---- usage and input errors: exit 2, one line, no traceback ----------------------------------------


def test_bad_format_exits_2(run, matrix):
    assert_one_line_error(run("check", "--facts", snap("gb10-broken"), "--matrix", matrix, "--format", "yaml"), "--format yaml")


def test_malformed_matrix_exits_2_naming_file_and_field(run, tmp_path):
    bad = write_matrix(tmp_path / "bad", ["driver-before-580"], stack=False)
    bad.write_text(bad.read_text().replace('severity = "error"', 'severity = "fatal"'))
    p = run("check", "--facts", snap("gb10-broken"), "--matrix", bad)
    assert_one_line_error(p, str(bad), "driver-before-580", "severity")
    not_toml = tmp_path / "broken.toml"
    not_toml.write_text("component = \n")
    assert_one_line_error(run("check", "--facts", snap("gb10-broken"), "--matrix", not_toml), str(not_toml), "not valid TOML")


def test_malformed_snapshot_exits_2(run, matrix, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": 1, "gpus": ')
    assert_one_line_error(run("check", "--facts", broken, "--matrix", matrix), str(broken), "not valid JSON")
    future = tmp_path / "future.json"
    future.write_text(json.dumps({**json.loads(snap("nogpu-clean").read_text()), "schema": 99}))
    assert_one_line_error(run("check", "--facts", future, "--matrix", matrix), "schema")
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({**json.loads(snap("nogpu-clean").read_text()), "gpus": "GB10"}))
    assert_one_line_error(run("check", "--facts", wrong, "--matrix", matrix), "gpus")
    assert_one_line_error(run("check", "--facts", tmp_path / "missing.json", "--matrix", matrix), "missing.json")


def test_facts_and_python_exclude_each_other(run, matrix):
    assert_one_line_error(run("check", "--facts", snap("nogpu-clean"), "--python", sys.executable, "--matrix", matrix), "--facts")


def test_bad_arch_and_fail_on_exit_2(run, matrix):
    base = ("check", "--facts", snap("nogpu-clean"), "--matrix", matrix)
    assert_one_line_error(run(*base, "--arch", "gb10"), "--arch 'gb10'")
    assert_one_line_error(run(*base, "--fail-on", "fatal"), "--fail-on fatal")


def test_unknown_option_is_a_one_line_usage_error(run):
    assert_one_line_error(run("check", "--no-such-option"), "--no-such-option")


def test_unwritable_output_is_a_one_line_error(run, matrix, tmp_path):
    p = run("check", "--facts", snap("nogpu-clean"), "--matrix", matrix, "--format", "json", "-o", tmp_path / "no" / "x.json")
    assert_one_line_error(p, "--output", "No such file or directory")


def test_bad_matrix_list_format_is_a_one_line_usage_error(run):
    assert_one_line_error(run("matrix", "list", "--format", "yaml"), "--format yaml")


# ---- document formats -----------------------------------------------------------------------------


def test_json_on_stdout_is_pure_and_versioned(run, matrix):
    p = run("check", "--facts", snap("gb10-broken"), "--matrix", matrix, "--format", "json")
    assert p.returncode == 1
    doc = json.loads(p.stdout)  # nothing but the document on stdout
    assert doc["schema"] == 1
    assert doc["exit_code"] == 1
    assert [f["id"] for f in doc["findings"]] == [CUTEDSL, "triton-ptxas-sm121a", "vllm-files-modified"]
    assert doc["summary"]["unknown"] == 1
    assert doc["facts"]["arch"] == {"value": "sm_121a", "source": "detected"}
    assert p.stderr == ""


def test_junit_on_stdout_parses(run, matrix):
    p = run("check", "--facts", snap("gb10-broken"), "--matrix", matrix, "--format", "junit", "--strict")
    assert p.returncode == 1
    suite = ET.fromstring(p.stdout.encode()).find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == (str(len(ENTRIES)), "2", "2")


def test_markdown_on_stdout(run, matrix):
    p = run("check", "--facts", snap("nogpu-clean"), "--matrix", matrix, "--format", "markdown")
    assert p.returncode == 0
    assert p.stdout.startswith("## sparkdoctor report")
    assert "<details>" in p.stdout


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_output_writes_a_file_and_keeps_stdout_empty(run, matrix, tmp_path, fmt):
    out = tmp_path / f"report.{fmt}"
    p = run("check", "--facts", snap("gb10-broken"), "--matrix", matrix, "--format", fmt, "--output", out)
    assert p.returncode == 1
    assert p.stdout == ""
    text = out.read_text(encoding="utf-8")
    if fmt == "json":
        assert json.loads(text)["exit_code"] == 1
    else:
        assert CUTEDSL in text and "\x1b[" not in text
    assert not list(tmp_path.glob(".report.*.tmp"))  # the atomic write left nothing behind


def test_arch_given_on_a_snapshot(run, matrix):
    p = run("check", "--facts", snap("nogpu-clean"), "--arch", "sm_121a", "--matrix", matrix, "--format", "json")
    assert p.returncode == 0
    assert json.loads(p.stdout)["facts"]["arch"] == {"value": "sm_121a", "source": "given"}
    console = run("check", "--facts", snap("nogpu-clean"), "--arch", "sm_121a", "--matrix", matrix)
    assert "sm_121a (given via --arch; no GPU detected)" in console.stdout
    # Evaluated as another GPU, the sm_121a-only error no longer applies; what was detected is kept.
    other = run("check", "--facts", snap("gb10-broken"), "--arch", "sm_120a", "--matrix", matrix, "--format", "json")
    assert other.returncode == 0
    doc = json.loads(other.stdout)
    assert doc["facts"]["arch"] == {"value": "sm_120a", "source": "given", "detected": "sm_121a"}
    assert CUTEDSL not in [f["id"] for f in doc["findings"]]


# ---- matrix commands ------------------------------------------------------------------------------


def test_matrix_list_show_validate(run, matrix):
    p = run("matrix", "list", "--matrix", matrix)
    assert p.returncode == 0 and CUTEDSL in p.stdout and "b12x-cu13" in p.stdout
    rows = json.loads(run("matrix", "list", "--matrix", matrix, "--format", "json").stdout)
    assert {r["id"] for r in rows} == {*ENTRIES, "b12x-cu13"}
    p = run("matrix", "show", CUTEDSL, "--matrix", matrix)
    assert p.returncode == 0 and "cutlass-dsl-cu13-clean-reinstall" in p.stdout
    shown = json.loads(run("matrix", "show", "b12x-cu13", "--matrix", matrix, "-f", "json").stdout)
    assert shown["kind"] == "stack" and shown["env"] == {"CUTE_DSL_ARCH": "sm_121a"}
    p = run("matrix", "validate", matrix)
    assert p.returncode == 0
    assert p.stdout.startswith(f"ok: {len(ENTRIES)} entries, 1 known-good stack")


def test_matrix_show_unknown_id_and_validate_bad_file_exit_2(run, matrix, tmp_path):
    assert_one_line_error(run("matrix", "show", "nope", "--matrix", matrix), "'nope'")
    bad = write_matrix(tmp_path / "bad", ["driver-before-580"], stack=False)
    bad.write_text(bad.read_text().replace('refs = ["https://github.com/NVIDIA/dgx-spark-playbooks"]', "refs = []"))
    assert_one_line_error(run("matrix", "validate", bad), "refs")


def test_matrix_validate_checks_probe_ids_and_verify_tables(run, tmp_path):
    bundled = REPO / "matrix"
    assert run("matrix", "validate", bundled).returncode == 0
    for name, old, new, needle in (
        ("probe", 'probe = "e2m1-cvt", expect = "fail" }', 'probe = "e2m1-cvtx", expect = "fail" }', "'e2m1-cvtx', which is no probe"),
        ("verify", 'verify.affected = [["nvidia-cuda-nvcc-cu12==12.8.93"]]', "verify.affected = []", "verify.affected"),
    ):
        folder = tmp_path / name
        folder.mkdir()
        for f in bundled.glob("*.toml"):
            (folder / f.name).write_text(f.read_text())
        triton = folder / "triton.toml"
        assert old in triton.read_text()
        triton.write_text(triton.read_text().replace(old, new))
        assert_one_line_error(run("matrix", "validate", folder), "triton.toml", "triton-ptxas-no-sm121a", needle)


# ---- live: the real collectors on this very interpreter -------------------------------------------


def _collectors_present() -> bool:
    names = ("targetenv", "gpu", "toolkits", "constraints", "capabilities")
    return all(importlib.util.find_spec(f"sparkdoctor.collect.{n}") is not None for n in names)


live = pytest.mark.skipif(not _collectors_present(), reason="the collectors (sparkdoctor.collect.targetenv, ...) are not written yet")


def _live_check(run, *extra: str) -> dict:
    p = run("check", "--no-kernels", "--format", "json", "--python", sys.executable, *extra, timeout=180)
    assert p.returncode in (0, 1), p.stderr  # never 2 (usage/internal) or 3 (unprobeable)
    doc = json.loads(p.stdout)
    assert doc["schema"] == 1 and doc["exit_code"] == p.returncode
    return doc


@live
def test_live_check_of_this_interpreter_gives_json(run, matrix):
    facts = _live_check(run, "--matrix", str(matrix))["facts"]
    assert Path(facts["target"]["python"]).resolve() == Path(sys.executable).resolve()
    assert isinstance(facts["packages"], dict)  # the target's packages were read
    assert facts["kernels"] in (None, {})  # --no-kernels compiled nothing


@live
@pytest.mark.skipif(not list((REPO / "matrix").glob("*.toml")), reason="the bundled matrix has no entries yet")
def test_live_check_against_the_bundled_matrix(run):
    doc = _live_check(run)
    assert doc["summary"]["evaluated"] > 0
