"""The command contract end to end: a closed pipe never changes the verdict, and `--format json` always
writes a JSON document that carries the exit code, on success and on failure."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.test_cli import snap


def _piped(run, args: str, reader: str = "head -1") -> tuple[str, str]:
    p = subprocess.run(f"{sys.executable} -m sparkdoctor {args} | {reader}; echo \"rc=${{PIPESTATUS[0]}}\"",
                       shell=True, executable="/bin/bash", cwd=run.cwd, env=run.env, capture_output=True, text=True, timeout=60)
    return p.stdout, p.stderr


def test_check_of_a_passing_snapshot_piped_to_head_exits_0(run, matrix):
    p = run("check", "--facts", snap("nogpu-clean"), "--matrix", matrix)
    assert p.returncode == 0, p.stderr  # the snapshot passes: the exit code is the pipe's to change, if anything
    out, err = _piped(run, f"check --facts {snap('nogpu-clean')} --matrix {matrix} -v")
    assert out.startswith("sparkdoctor ") and out.strip().endswith("rc=0"), out
    assert err == "", err


def test_console_documents_piped_to_a_reader_that_leaves_keep_their_exit_code(run, matrix):
    # rich's own broken-pipe handling exits 1: every console document is written once, by emit
    for args, code in ((f"matrix list --matrix {matrix}", 0), (f"matrix show {snap('x').stem} --matrix {matrix}", 2),
                       (f"check --facts {snap('gb10-broken')} --matrix {matrix} -v", 1)):
        out, err = _piped(run, args, "true")
        assert out.strip().endswith(f"rc={code}"), (args, out, err)


def test_json_failure_is_a_json_document_with_the_exit_code(run, matrix, tmp_path):
    p = run("check", "--facts", tmp_path / "missing.json", "--matrix", matrix, "--format", "json")
    assert p.returncode == 2
    doc = json.loads(p.stdout)
    assert doc["exit_code"] == 2 and doc["kind"] == "error" and doc["command"] == "check"
    assert doc["errors"][0]["code"] == "snapshot" and "missing.json" in doc["errors"][0]["message"]
    assert p.stderr.count("\n") == 1 and "missing.json" in p.stderr  # the one line on stderr stays
    # a usage error click finds before any option is processed is answered in JSON too
    p = run("check", "--format=json", "--no-such-option")
    assert p.returncode == 2 and json.loads(p.stdout)["errors"][0]["code"] == "usage"


def test_json_success_keeps_every_key_and_gains_the_header(run, matrix):
    p = run("check", "--facts", snap("gb10-broken"), "--matrix", matrix, "--format", "json")
    doc = json.loads(p.stdout)
    assert p.returncode == doc["exit_code"] == 1
    assert list(doc)[:6] == ["sparkdoctor", "envelope", "command", "kind", "exit_code", "errors"]
    for key in ("schema", "tool", "fingerprint", "fail_on", "summary", "findings", "unknown", "unverified", "ignored",
                "stacks", "facts"):
        assert key in doc, key
