"""Findings: probe evidence joins the matched conditions."""

from sparkdoctor.findings import build_report
from sparkdoctor.matrix import load
from tests.gb10 import gb10_facts


def _collision_facts(status: str, detail: str):
    return gb10_facts(
        packages={"nvidia-cutlass-dsl": "4.5.0", "nvidia-cutlass-dsl-libs-base": "4.5.0", "nvidia-cutlass-dsl-libs-cu13": "4.5.0"},
        cutedsl_build="libs-base",
        kernels={"cutedsl-nvfp4-mma": {"kind": "cutedsl", "status": status, "detail": detail, "runs": []}},
    )


def test_finding_cites_the_probe_that_proves_it():
    report = build_report(_collision_facts("fail", "ptxas error : Unexpected instruction types specified for '_mma'"), load())
    finding = next(f for f in report.findings if f.id == "cutedsl-wheel-collision")
    assert finding.evidence[-1] == (
        "probe cutedsl-nvfp4-mma fail: ptxas error : Unexpected instruction types specified for '_mma' → confirms this entry"
    )


def test_probe_that_disagrees_is_shown_as_such():
    report = build_report(_collision_facts("ok", "compiled"), load())
    finding = next(f for f in report.findings if f.id == "cutedsl-wheel-collision")
    assert finding.evidence[-1] == "probe cutedsl-nvfp4-mma ok: compiled → this entry expects fail"


def test_no_probe_line_when_the_probe_did_not_run():
    report = build_report(_collision_facts("skipped", "--no-kernels"), load())
    finding = next(f for f in report.findings if f.id == "cutedsl-wheel-collision")
    assert not any(e.startswith("probe ") for e in finding.evidence)
