"""`check --format sarif` and `recipe check --format sarif` (issue 28, item 1), validated against the official
SARIF 2.1.0 JSON schema: tests/data/sarif/sarif-schema-2.1.0.json is the OASIS Standard's schema with errata 01,
oasis-tcs/sarif-spec at commit e0583813964ec43cea53b6b531b402866095ed1f, file sarif-2.1/schema/sarif-schema-2.1.0.json
(its id: https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json).

One rule per evaluated matrix entry, one result per finding, each located in the file that shows it (a
constraints file's line, a hand-modified file, the recipe's line) or on the stated artifact, and fingerprints
that stay put when lines move and differ between findings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from sparkdoctor.conclusions import recipe_check
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import load as load_matrix
from sparkdoctor.recipes import load as load_recipe
from sparkdoctor.views.sarif import render_recipe_sarif, render_sarif
from tests.gb10 import gb10_facts, ptxas
from tests.rerun.recipe_values import (  # noqa: F401
    dense_config,
    model_folder,
    no_hub_cache,
    recipe_file,
)

REPO = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((REPO / "tests" / "data" / "sarif" / "sarif-schema-2.1.0.json").read_text())
BROKEN = REPO / "tests" / "data" / "facts" / "gb10-broken.json"
MATRIX = load_matrix(None)


def valid(text: str) -> dict:
    doc = json.loads(text)
    validator = jsonschema.validators.validator_for(SCHEMA)(SCHEMA)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    assert errors == [], [f"{list(e.path)}: {e.message[:200]}" for e in errors[:5]]
    return doc


def cli(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_CACHE_DIR=str(cwd / "cache"), SPARKDOCTOR_STATE_DIR=str(cwd / "state"))
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], check=False, cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_schema_rejects_a_broken_log_so_validation_can_fail():
    with pytest.raises(AssertionError):
        valid(json.dumps({"version": "2.1.0", "runs": [{"tool": {"driver": {}}, "results": [{"level": "fatal"}]}]}))


def test_check_sarif_from_a_snapshot_is_valid_with_a_rule_per_entry_and_a_result_per_finding(tmp_path):
    p = cli("check", "--facts", BROKEN, "--format", "sarif", cwd=tmp_path)
    assert p.returncode == 1, p.stderr  # findings: the exit code is check's, whatever the format
    doc = valid(p.stdout)
    run = doc["runs"][0]
    report = build_report(__import__("sparkdoctor.facts", fromlist=["Facts"]).Facts.load(BROKEN), MATRIX)
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert len(rules) == len(set(rules)) and set(rules) >= {ev.entry.id for ev in report.evaluations}
    assert sorted(r["ruleId"] for r in run["results"]) == sorted(f.id for f in report.findings)
    assert run["invocations"][0]["exitCode"] == 1
    by_id = {r["ruleId"]: r for r in run["results"]}
    assert by_id["triton-ptxas-no-sm121a"]["level"] == "error" and by_id["cutedsl-arch-unset"]["level"] == "note"
    modified = by_id["vllm-hand-modified"]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert modified.endswith("/site-packages/vllm/model_executor/layers/quantization/utils/nvfp4_emulation_utils.py")
    assert by_id["cutedsl-wheel-collision"]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        "file:///opt/vllm/constraints.txt"
    rule = next(r for r in run["tool"]["driver"]["rules"] if r["id"] == "triton-ptxas-no-sm121a")
    entry = MATRIX.get("triton-ptxas-no-sm121a")
    assert rule["help"]["text"].startswith(entry.remedy) and rule["properties"]["evidence-level"] == entry.evidence
    assert rule["helpUri"] == next(r for r in entry.refs if r.startswith("http"))
    again = valid(cli("check", "--facts", BROKEN, "--format", "sarif", cwd=tmp_path).stdout)["runs"][0]["results"]
    assert [r["partialFingerprints"] for r in again] == [r["partialFingerprints"] for r in run["results"]]
    prints = [r["partialFingerprints"]["sparkdoctor/v1"] for r in run["results"]]
    assert len(set(prints)) == len(prints)


def triton_facts():
    """triton 3.5.1 with its bundled ptxas 12.8 (no sm_121a): triton-ptxas-no-sm121a fires."""
    facts = gb10_facts(packages={"triton": "3.5.1"})
    facts.toolkits = [ptxas("13.0.88", "system", path="/usr/local/cuda/bin/ptxas"),
                      ptxas("12.8.93", "triton", path="/v/lib/python3.12/site-packages/triton/backends/nvidia/bin/ptxas",
                            used_by=["triton"])]
    return facts


def test_a_constraints_pin_is_located_at_its_line_relative_to_the_checkout_and_keeps_its_fingerprint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "constraints.txt").write_text("# pins\n\ntriton==3.5.1\n")

    def result(line: int) -> dict:
        facts = triton_facts()
        facts.constraints = [{"file": str(tmp_path / "constraints.txt"), "line": line, "source": "PIP_CONSTRAINT",
                              "requirement": "triton==3.5.1", "name": "triton", "specifier": "==3.5.1"}]
        run = valid(render_sarif(build_report(facts, MATRIX)))["runs"][0]
        return next(r for r in run["results"] if r["ruleId"] == "triton-ptxas-no-sm121a")

    at3, at5 = result(3), result(5)
    loc = at3["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "constraints.txt", "uriBaseId": "SRCROOT"} and loc["region"] == {"startLine": 3}
    assert at5["locations"][0]["physicalLocation"]["region"] == {"startLine": 5}
    assert at3["partialFingerprints"] == at5["partialFingerprints"]  # a line that moves is the same finding


def test_a_finding_with_no_file_sits_on_the_stated_artifact(tmp_path):
    facts = triton_facts()
    facts.constraints = []
    run = valid(render_sarif(build_report(facts, MATRIX)))["runs"][0]
    r = next(r for r in run["results"] if r["ruleId"] == "triton-ptxas-no-sm121a")
    assert r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == Path(facts.target["python"]).as_uri()
    assert run["properties"]["target"] == facts.target["python"]


@pytest.mark.parametrize("fmt", ["sparkdoctor", "eugr-v1", "sparkrun-v2"])
def test_recipe_sarif_points_at_the_recipe_line_that_sets_the_value(tmp_path, fmt, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = model_folder(tmp_path, "dense", dense_config())
    path = recipe_file(tmp_path, fmt, str(folder), ["--gpu-memory-utilization", "0.95", "--max-model-len", "32768",
                                                    "--no-such-flag", "1"], env={"VLLM_NO_SUCH_VAR": "1"})
    recipe = load_recipe(str(path), {})
    facts = gb10_facts(capabilities={"vllm.env.VLLM_NO_SUCH_VAR": {"value": "unknown", "evidence": "vllm/envs.py"}})
    flags = {"vllm": {"version": "0.22.0", "root": "/x/vllm"}, "flags": ["--gpu-memory-utilization", "--max-model-len"]}
    findings = recipe_check.check(recipe, MATRIX, facts, flags)
    doc = recipe_check.document(recipe, findings, facts, flags, "error")
    run = valid(render_recipe_sarif(doc, MATRIX))["runs"][0]
    lines = path.read_text().splitlines()
    by_rule = {r["ruleId"]: r for r in run["results"]}
    assert {"flag-unknown", "env-unknown", "vllm-gpu-mem-util-above-uma-headroom"} <= set(by_rule)
    for rule_id, needle in (("flag-unknown", "--no-such-flag"), ("env-unknown", "VLLM_NO_SUCH_VAR"),
                            ("vllm-gpu-mem-util-above-uma-headroom", "--gpu-memory-utilization")):
        loc = by_rule[rule_id]["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"] == {"uri": path.name, "uriBaseId": "SRCROOT"}
        assert needle in lines[loc["region"]["startLine"] - 1], (rule_id, loc)
    assert by_rule["flag-unknown"]["properties"]["subject"] == "--no-such-flag"
    assert run["invocations"][0]["exitCode"] == 1  # an unknown flag is an error at --fail-on error
    rules = {r["id"] for r in run["tool"]["driver"]["rules"]}
    assert {e.id for e in MATRIX.entries if not e.withdrawn} <= rules and "flag-unknown" in rules


def test_recipe_check_command_writes_sarif(tmp_path):
    folder = model_folder(tmp_path, "dense", dense_config())
    path = recipe_file(tmp_path, "sparkdoctor", str(folder), ["--gpu-memory-utilization", "0.95"])
    p = cli("recipe", "check", path, "--python", sys.executable, "--format", "sarif", "--fail-on", "warn", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    results = valid(p.stdout)["runs"][0]["results"]
    r = next(r for r in results if r["ruleId"] == "vllm-gpu-mem-util-above-uma-headroom")
    assert r["level"] == "warning" and r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "r.toml"
