"""`check --python` pointed at an interpreter that holds none of the serving stack (a bare `python3 -m venv`, the
wrong venv named in a CI gate) printed "✓ no known problem matches this box" and "PASS (exit 0)": nothing of what
serves was judged, and nothing said so. It is a warning of the engine's own now, `no-serving-stack`, which `--strict`
fails on; a target holding any one of torch, triton, vllm, flashinfer-python or nvidia-cutlass-dsl gets none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.facts import Facts
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import load
from tests.test_sarif import valid
from tests.test_targetenv import write_dist

ID = "no-serving-stack"
REMEDY = "point --python at the venv that serves (e.g. sparkdoctor check --python ~/vllm-venv/bin/python)"


def sd(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "SPARKDOCTOR_CACHE_DIR": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=cwd)


@pytest.fixture(scope="module")
def bare(tmp_path_factory) -> Path:
    """`python3 -m venv bare`, nothing installed in it."""
    root = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300)
    return root / "bin" / "python"


@pytest.fixture(scope="module")
def one_of_the_stack(tmp_path_factory) -> Path:
    """A venv holding triton 3.9.0 (its package folder, METADATA and RECORD), nothing else of the stack."""
    root = tmp_path_factory.mktemp("triton") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=300)
    site = next(root.glob("lib/python3*/site-packages"))
    (site / "triton").mkdir()
    (site / "triton" / "__init__.py").write_text("__version__ = '3.9.0'\n")
    write_dist(site, "triton", "3.9.0", "Metadata-Version: 2.1\nName: triton\nVersion: 3.9.0\n",
               ["triton/__init__.py,,", "triton-3.9.0.dist-info/METADATA,,", "triton-3.9.0.dist-info/RECORD,,"])
    return root / "bin" / "python"


def test_a_bare_venv_is_a_warning_on_the_console_never_a_ticked_pass(bare, tmp_path):
    done = sd("check", "--python", bare, "--no-kernels", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = " ".join(done.stdout.split())
    assert "no known problem matches this box" not in out
    assert f"1 warning ▲ {ID} target · configure · reproduced" in out, done.stdout
    assert "no serving-stack package is installed in this interpreter" in out
    # the remedy's command on a line of its own, whole, and no `)` left alone on the next
    lines = [" ".join(x.split()) for x in done.stdout.splitlines()]
    at = lines.index("what to do point --python at the venv that serves, e.g.")
    assert lines[at + 1] == "sparkdoctor check --python ~/vllm-venv/bin/python" and lines[at + 2] == "", done.stdout
    assert "0 errors, 1 warning, 0 info" in out and out.endswith("fail-on error → PASS (exit 0)")


def test_a_bare_venv_in_json_and_sarif_and_strict_fails_on_it(bare, tmp_path):
    done = sd("check", "--python", bare, "--no-kernels", "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    [finding] = [f for f in doc["findings"] if f["id"] == ID]
    assert (finding["severity"], finding["action"], finding["component"]) == ("warn", "configure", "target")
    assert finding["remedy"] == REMEDY
    assert "only the host, driver and kernel probes were judged" in finding["summary"]
    assert finding["evidence"] == [f"{bare}: torch, triton, vllm, flashinfer-python, nvidia-cutlass-dsl not installed"]
    assert doc["summary"]["warn"] >= 1 and doc["summary"]["verdict"] == "pass" and doc["exit_code"] == 0

    strict = sd("check", "--python", bare, "--no-kernels", "--strict", "--format", "json", cwd=tmp_path)
    assert strict.returncode == 1, strict.stderr
    assert json.loads(strict.stdout)["summary"]["verdict"] == "fail"

    sarif = valid(sd("check", "--python", bare, "--no-kernels", "--format", "sarif", cwd=tmp_path).stdout)
    [result] = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == ID]
    assert result["level"] == "warning" and REMEDY in result["message"]["text"]
    assert ID in {rule["id"] for rule in sarif["runs"][0]["tool"]["driver"]["rules"]}


def test_it_is_ignored_like_any_engine_id_and_matrix_show_names_it_as_one(bare, tmp_path):
    done = sd("check", "--python", bare, "--no-kernels", "--strict", "--ignore", ID, "--format", "json", cwd=tmp_path)
    assert done.returncode == 0 and "no matrix entry has this id" not in done.stderr, done.stderr
    assert json.loads(done.stdout)["ignored"] == [ID]
    shown = sd("matrix", "show", ID, cwd=tmp_path)
    assert shown.returncode == 2 and "is a finding check makes itself" in shown.stderr, shown.stderr


def test_one_package_of_the_stack_is_enough_for_no_such_finding(one_of_the_stack, tmp_path):
    done = sd("check", "--python", one_of_the_stack, "--no-kernels", "--format", "json", cwd=tmp_path)
    doc = json.loads(done.stdout)
    assert doc["facts"]["packages"]["triton"]["version"] == "3.9.0", doc["facts"]["packages"]
    assert ID not in {f["id"] for f in doc["findings"]}, doc["findings"]


def test_unknown_packages_and_a_stack_package_without_metadata_are_not_an_empty_stack():
    def ids(doc: dict) -> set[str]:
        return {f.id for f in build_report(Facts.from_dict({"schema": 1, **doc}), load()).findings}

    assert ID in ids({"packages": {"six": {"name": "six", "version": "1.17.0"}}})
    assert ID not in ids({"packages": None})  # not observed: the check is unprobeable, not empty
    unlisted = {"module": "triton", "distribution": "triton", "path": "/venv/site-packages/triton", "version": "3.8.0"}
    assert ID not in ids({"packages": {}, "modules_without_metadata": [unlisted]})  # no-metadata-triton says it


def test_a_container_target_is_told_to_name_the_interpreter_in_it():
    doc = {"schema": 1, "target": {"kind": "container", "python": "/usr/bin/python3", "container": "vllm"}, "packages": {}}
    [finding] = [f for f in build_report(Facts.from_dict(doc), load()).findings if f.id == ID]
    assert finding.remedy.startswith("point --container-python at the interpreter in it that serves")
    assert finding.evidence == ["/usr/bin/python3: torch, triton, vllm, flashinfer-python, nvidia-cutlass-dsl not installed"]

