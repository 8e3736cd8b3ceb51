"""`check` as a CI gate: what each outcome tells a pipeline besides its exit code (the review of 2026-11-30).

Each defect's test failed on the code before its fix (docs/evidence/revgate-2026-11-30.md has the table): an
unprobeable target (exit 3) was a SARIF log of a successful run with no result, a JSON document whose `errors` was
empty and nothing on stderr; `--save-facts` or `--constraints` beside `--facts` did nothing and the verdict's exit
code came back; oversized config and matrix files were read whole; a target's odd answers were internal errors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from tests.test_render import FACTS_DIR, write_matrix

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "tests" / "data" / "sarif" / "sarif-schema-2.1.0.json"
UNPROBED = FACTS_DIR / "unprobed.json"  # its packages could not be read: a probe of env.py that timed out


@pytest.fixture
def run(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARKDOCTOR_", "FORCE_COLOR", "NO_COLOR"))}
    user_config = tmp_path / "empty.toml"
    user_config.write_text("")
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_CONFIG=str(user_config), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"),
               SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"))
    work = tmp_path / "cwd"
    work.mkdir()

    def call(*args: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], cwd=work, env=env,
                              capture_output=True, text=True, timeout=120)

    return call


@pytest.fixture
def matrix(tmp_path) -> Path:
    return write_matrix(tmp_path / "matrix")


def test_unprobeable_json_names_why_in_errors_and_on_stderr(run, matrix):
    p = run("check", "--facts", UNPROBED, "--matrix", matrix, "--format", "json")
    assert p.returncode == 3, p.stderr
    doc = json.loads(p.stdout)
    assert doc["exit_code"] == 3 and doc["summary"]["verdict"] == "unprobeable"
    assert [(e["code"], e["exit_code"]) for e in doc["errors"]] == [("target", 3)], doc["errors"]
    assert "timed out after 20 s" in doc["errors"][0]["message"]
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sparkdoctor: warning: the target could not be probed (exit 3): "), p.stderr
    assert "timed out after 20 s" in lines[0]


def test_unprobeable_sarif_is_no_successful_analysis(run, matrix):
    """A log of a run that could not look at the target must not read as a clean analysis (code scanning would take
    its empty results as every alert fixed)."""
    p = run("check", "--facts", UNPROBED, "--matrix", matrix, "--format", "sarif")
    assert p.returncode == 3, p.stderr
    log = json.loads(p.stdout)
    jsonschema.validate(log, json.loads(SCHEMA.read_text()))
    invocation = log["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 3
    notes = invocation["toolExecutionNotifications"]
    assert notes[0]["level"] == "error" and "timed out after 20 s" in notes[0]["message"]["text"]


def test_a_probed_target_is_still_a_successful_analysis(run, matrix):
    p = run("check", "--facts", FACTS_DIR / "nogpu-clean.json", "--matrix", matrix, "--format", "sarif")
    assert p.returncode == 0, p.stderr
    invocation = json.loads(p.stdout)["runs"][0]["invocations"][0]
    assert invocation == {"executionSuccessful": True, "exitCode": 0}
    assert p.stderr == ""


@pytest.mark.parametrize("option", ["--save-facts", "--constraints"])
def test_an_option_a_snapshot_cannot_honour_is_refused_not_ignored(run, matrix, tmp_path, option):
    """--save-facts wrote nothing and exited 0 (a later step that read the file found none); --constraints was not
    read at all (a pin it holds was never judged, and the gate passed)."""
    named = tmp_path / "named.txt"
    if option == "--constraints":
        named.write_text("nvidia-cutlass-dsl==4.4.2\n")
    p = run("check", "--facts", FACTS_DIR / "nogpu-clean.json", "--matrix", matrix, option, named, "--format", "json")
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert json.loads(p.stdout)["errors"][0]["code"] == "usage"
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and option in lines[0] and "--facts" in lines[0], p.stderr
    assert named.exists() == (option == "--constraints")


def test_runtime_without_a_container_is_refused_not_ignored(run, matrix):
    """--runtime names the CLI of --container; alone it was accepted and did nothing."""
    p = run("check", "--facts", FACTS_DIR / "nogpu-clean.json", "--matrix", matrix, "--runtime", "podman",
            "--format", "json")
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert json.loads(p.stdout)["errors"][0]["code"] == "usage"
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and "--runtime" in lines[0] and "--container" in lines[0], p.stderr


def test_unknown_ids_in_a_config_are_a_bounded_warning(run, matrix, tmp_path):
    """100,000 ids no entry has were 100,000 lines on stderr (a 5 MB id, a 5 MB line): a file from a pull request's
    checkout could bury the CI log. (A config is read to 1 MiB now: 40,000 ids and a 300 kB one fit in it.)"""
    config = tmp_path / "many.toml"
    config.write_text("[check]\nignore = [" + ",".join(f'"no-such-{i}"' for i in range(40_000)) + f', "{"x" * 300_000}"]\n')
    assert config.stat().st_size < 1 << 20
    p = run("check", "--facts", FACTS_DIR / "nogpu-clean.json", "--matrix", matrix, "--config", config, "--ignore", "nope")
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 7 and all(len(line) < 1_000 for line in lines), (len(lines), max(map(len, lines)))
    assert "'nope'" in p.stderr and "no-such-0" in p.stderr and "39,996 more ids" in lines[-1]


@pytest.mark.parametrize("option", ["--config", "--matrix"])
def test_a_huge_toml_file_is_refused_before_it_is_read(run, tmp_path, option):
    """A 1 GiB sparse config or matrix file was read whole: 2 GB of memory and 6 s of CPU before 'not valid TOML'.
    A snapshot already stopped at its size."""
    import resource

    huge = tmp_path / "huge.toml"
    with huge.open("wb") as f:
        f.truncate(1 << 30)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = run("check", "--facts", FACTS_DIR / "nogpu-clean.json", option, huge, "--format", "json")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.splitlines()) == 1 and "larger than" in p.stderr, p.stderr
    assert (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime) < 3, "read the whole file"


def test_a_line_break_from_the_box_cannot_open_a_code_fence_in_markdown(run, tmp_path):
    """An env value (or path) with a line break put '```' at the start of a line of the evidence list: a code fence
    that swallowed the rest of the pasted report (remedies, kernel probes) up to the snapshot's fence."""
    facts = json.loads((FACTS_DIR / "nogpu-clean.json").read_text())
    facts["packages"]["nvidia-cutlass-dsl"] = {"name": "nvidia-cutlass-dsl", "version": "4.5.0", "location": "/x"}
    facts["env"] = {**(facts.get("env") or {}), "CUTE_DSL_ARCH": "sm_120a\n```\n# not a heading"}
    snapshot = tmp_path / "facts.json"
    snapshot.write_text(json.dumps(facts))
    p = run("check", "--facts", snapshot, "--arch", "sm_121a", "--format", "markdown")
    assert p.returncode == 1, p.stderr
    assert "cutedsl-arch-mismatch" in p.stdout
    fences = [line for line in p.stdout.splitlines() if line.startswith(("```", "~~~", "#"))]
    assert [f for f in fences if f.startswith(("```", "~~~"))] == ["````json", "````"], fences
    assert "# not a heading" not in fences


def test_a_huge_ignore_reason_is_clipped_on_stderr(run, matrix, tmp_path):
    """The line that names what a config ignored carried each reason whole: a 5 MB reason, a 5 MB line (a config is
    read to 1 MiB now: a 1 MB reason still fits)."""
    config = tmp_path / "reason.toml"
    config.write_text(f'[check]\nignore = [{{ id = "cutedsl-libs-base-mma", reason = "{"r" * 1_000_000}" }}]\n')
    p = run("check", "--facts", FACTS_DIR / "gb10-broken.json", "--matrix", matrix, "--config", config)
    assert p.returncode == 0, p.stderr[:300]
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and "ignored 1: cutedsl-libs-base-mma (rrr" in lines[0], p.stderr[:300]
    assert len(lines[0]) < 1_000, len(lines[0])


def test_sarif_from_a_deleted_working_folder_is_a_log_not_an_internal_error(run, tmp_path):
    """The log's SRCROOT is the working folder: a step whose folder was removed under it got exit 2, "internal error:
    FileNotFoundError", where every other format gave the verdict."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKDOCTOR_")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_CONFIG=str(tmp_path / "none.toml"), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "c"))
    (tmp_path / "none.toml").write_text("")
    gone = tmp_path / "gone"
    gone.mkdir()
    script = 'cd "$1" && rmdir "$1" && shift && exec "$@"'
    p = subprocess.run(["sh", "-c", script, "sh", str(gone), sys.executable, "-m", "sparkdoctor", "check", "--facts",
                        str(FACTS_DIR / "gb10-broken.json"), "--format", "sarif"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 1, p.stderr
    log = json.loads(p.stdout)
    jsonschema.validate(log, json.loads(SCHEMA.read_text()))
    assert log["runs"][0]["results"] and "originalUriBaseIds" not in log["runs"][0]


@pytest.mark.parametrize("payload", [
    {"packages": {"nvidia-cutlass-dsl": {"name": "nvidia-cutlass-dsl", "version": "4.5.0", "integrity": 5,
                                         "files_modified": [1, {"a": 2}]}}},
    {"packages": {"vllm": {"name": "vllm", "version": ["0.22.0"]}}},
    {"packages": {}, "target": "a string", "host": 7, "env": {"CUTE_DSL_ARCH": 5}},
])
def test_a_target_answering_json_of_the_wrong_shape_is_unprobeable(run, matrix, tmp_path, payload):
    """An interpreter that exits 0 with a JSON object of the wrong shape (a .pth line can print one last): the first
    payload was exit 2, "internal error: TypeError: '<' not supported between instances of 'dict' and 'int'"."""
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(payload)}\nEOF\n")
    python.chmod(0o755)
    for fmt in ("json", "sarif"):
        p = run("check", "--python", python, "--no-kernels", "--matrix", matrix, "--arch", "sm_121a", "--format", fmt)
        assert p.returncode == 3, (fmt, p.stderr)
        assert "internal error" not in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
        assert "probe target_env printed" in p.stderr, p.stderr
        if fmt == "sarif":  # the notification is the stderr line's reason: one line, control characters escaped
            text = json.loads(p.stdout)["runs"][0]["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"]
            assert text.isprintable() and "probe target_env printed" in text, text


@pytest.mark.parametrize("package", ["vllm", "nvidia-cutlass-dsl", "torch", "flashinfer-python"])
def test_a_version_of_thousands_of_digits_from_a_live_target_is_judged_not_an_internal_error(package):
    """A venv whose vllm METADATA says `Version: 1.<5,000 nines>` (the live probe reports it as read): check exited
    2, "internal error: ValueError: Exceeds the limit (4300 digits) for integer string conversion", where the
    matrix's freshness compared it with the version it is tracked through (and for nvidia-cutlass-dsl, where the
    family's versions were compared)."""
    from sparkdoctor.findings import build_report
    from sparkdoctor.matrix import load
    from tests.gb10 import gb10_facts

    facts = gb10_facts()
    facts.packages[package] = {**(facts.packages.get(package) or {"name": package}), "version": "1." + "9" * 5000}
    report = build_report(facts, load(None))
    assert report.exit_code() in (0, 1)
    json.dumps(report.to_dict())
