"""A real GPU box: `sparkdoctor check --save-facts` run on an H100 (sm_90), kept as evidence.

The snapshot was taken by the lead on the lent H100 machine (tests/data/h100/check-console.txt is the
console report of the same run). Evaluating it here exercises the exact code path of a live box.
"""

import json
import subprocess
import sys
from pathlib import Path

from sparkdoctor.facts import Facts
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import load

SNAPSHOT = Path(__file__).parent / "data" / "h100" / "check-facts.json"


def test_real_gpu_facts_are_complete_and_detected():
    facts = Facts.load(SNAPSHOT)
    assert facts.arch == {"value": "sm_90a", "source": "detected"}
    gpu = facts.gpus[0]
    assert gpu["name"].startswith("NVIDIA H100") and gpu["cc"] == "9.0" and gpu["unified"] is False
    assert facts.driver["source"] == "nvml" and facts.driver["version"].startswith("580.")
    assert facts.driver["cuda"] == facts.driver["libcuda"] == "13.0"  # NVML and libcuda agree
    assert facts.errors == [], "nothing failed on a healthy GPU box"
    assert facts.package("torch")["cuda"] == "13.0"
    assert {t["source"] for t in facts.toolkits} >= {"system", "triton"}


def test_run_and_verify_machinery_proved_on_sm90():
    kernels = Facts.load(SNAPSHOT).kernels
    fp8 = kernels["fp8-mma-sm90"]
    assert fp8["status"] == "ok"
    ran = [r for r in fp8["runs"] if r.get("ran")]
    assert ran and all(r["verified"] for r in ran)
    # the FP4 probes need SM12x: compiled, never claimed as run on an H100
    for pid in ("e2m1-cvt", "fp4-mma", "nvfp4-mma", "mxf4-mma"):
        assert all(r.get("ran") in (None, False) for r in kernels[pid]["runs"])
        assert "not run" in kernels[pid]["detail"]


def test_snapshot_evaluates_like_a_live_box():
    facts = Facts.load(SNAPSHOT)
    report = build_report(facts, load())
    assert report.exit_code() == 0
    assert not [f for f in report.findings if f.severity == "error"]


def test_cli_on_the_snapshot_as_if_gb10():
    done = subprocess.run(
        [sys.executable, "-m", "sparkdoctor", "check", "--facts", str(SNAPSHOT), "--arch", "sm_121a", "--format", "json"],
        capture_output=True, text=True, timeout=60,
    )
    doc = json.loads(done.stdout)
    assert doc["facts"]["arch"] == {"value": "sm_121a", "source": "given", "detected": "sm_90a"}
    assert done.returncode == doc["exit_code"]
