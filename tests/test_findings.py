"""Findings: probe evidence joins the matched conditions; a failing probe no entry explains is a
finding of its own, and one that could not run makes the verdict unverified."""

import json

import pytest

from sparkdoctor.describe import summary_line
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import load
from tests.gb10 import gb10_facts
from tests.test_render import console_text, facts_of, squash, write_matrix


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


# ---- a failing kernel probe never sits under a green PASS (issue 6) --------------------------------
# The matrices are written by the test (tests/test_render.py ENTRIES), so the bundled one can change.

UNEXPLAINED = "probe-cutedsl-nvfp4-mma"


@pytest.fixture
def warn_only(tmp_path):
    """Entries that match gb10-broken but none that explains its failing CuTe DSL probe."""
    return load(write_matrix(tmp_path / "warn-only", ["triton-ptxas-sm121a", "vllm-files-modified"]))


def test_failing_probe_no_entry_explains_is_an_error_finding(warn_only):
    report = build_report(facts_of("gb10-broken"), warn_only)
    finding = next(f for f in report.findings if f.id == UNEXPLAINED)
    assert (finding.severity, finding.component, finding.action) == ("error", "nvidia-cutlass-dsl", "report")
    assert finding.title == "kernel probe cutedsl-nvfp4-mma failed and no matrix entry explains it"
    assert finding.evidence == ["probe cutedsl-nvfp4-mma fail for sm_121a: ptxas error: Unexpected instruction types specified for '_mma'"]
    assert finding.remedy.startswith("run `sparkdoctor check -v` and report it")
    assert report.exit_code() == 1 and report.verdict() == "fail"
    doc = report.to_dict()
    assert doc["summary"]["error"] == 1 and doc["summary"]["verdict"] == "fail" and doc["exit_code"] == 1
    assert summary_line(report).endswith("fail-on error → FAIL (exit 1)")


def test_the_reported_case_no_gpu_builder_with_the_mma_failure_is_not_a_pass(tmp_path):
    # The run: no GPU, no --arch, nothing in the matrix matches, the CuTe DSL probe fails.
    facts = facts_of("nogpu-clean")
    facts.kernels["cutedsl-nvfp4-mma"] = {"kind": "cutedsl", "status": "fail", "arch": "sm_121a", "runs": [],
                                          "detail": "ptxas error: Unexpected instruction types specified for '_mma'"}
    report = build_report(facts, load(write_matrix(tmp_path / "m", ["driver-before-580"])))
    assert [f.id for f in report.findings] == [UNEXPLAINED]
    out = console_text(report)
    assert "no known problem matches this box" not in out
    assert squash(out).strip().endswith("arch assumed (no GPU detected) · fail-on error → FAIL (exit 1)")


def test_a_matched_entry_that_cites_the_probe_explains_it_even_when_ignored(tmp_path):
    matrix = load(write_matrix(tmp_path / "m"))  # cutedsl-libs-base-mma: verified_by the probe, expect fail
    assert not [f for f in build_report(facts_of("gb10-broken"), matrix).findings if f.id.startswith("probe-")]
    report = build_report(facts_of("gb10-broken"), matrix, ignore={"cutedsl-libs-base-mma"})
    assert not [f for f in report.findings if f.id.startswith("probe-")] and report.exit_code() == 0


def test_an_entry_expecting_another_outcome_does_not_explain_it(tmp_path):
    facts = facts_of("gb10-broken")
    facts.kernels["cutedsl-nvfp4-mma"].update(status="crash", detail="the CuTe DSL compiler was killed by SIGSEGV")
    report = build_report(facts, load(write_matrix(tmp_path / "m")))  # the entry that cites it expects fail
    finding = next(f for f in report.findings if f.id == UNEXPLAINED)
    assert finding.title == "kernel probe cutedsl-nvfp4-mma crashed and no matrix entry explains it"


def test_an_entry_whose_conditions_test_the_probe_explains_it(tmp_path):
    facts = facts_of("gb10-broken")
    facts.kernels["nvfp4-gemm"] = {"kind": "ptx", "status": "fail", "arch": "sm_121a", "detail": "rejected", "runs": []}
    report = build_report(facts, load(write_matrix(tmp_path / "m")))  # nvfp4-gemm-probe: when.kernels nvfp4-gemm = fail
    ids = [f.id for f in report.findings]
    assert "nvfp4-gemm-probe" in ids and "probe-nvfp4-gemm" not in ids


def test_a_probe_for_another_arch_is_not_judged(warn_only):
    facts = facts_of("gb10-broken")
    facts.kernels["cutedsl-nvfp4-mma"]["arch"] = "sm_90a"  # e.g. a snapshot re-evaluated with another --arch
    assert not [f for f in build_report(facts, warn_only).findings if f.id.startswith("probe-")]


def test_a_probe_finding_is_ignored_like_any_id(warn_only):
    report = build_report(facts_of("gb10-broken"), warn_only, ignore={UNEXPLAINED})
    assert UNEXPLAINED not in [f.id for f in report.findings]
    assert report.ignored == [UNEXPLAINED] and report.exit_code() == 0 and report.verdict() == "pass"


def test_a_probe_that_could_not_run_is_unverified_never_a_ticked_pass(tmp_path):
    facts = facts_of("nogpu-clean")
    facts.kernels["e2m1-cvt"].update(status="error", detail="no ptxas found")
    report = build_report(facts, load(write_matrix(tmp_path / "m", ["driver-before-580"])))
    assert not report.findings and report.exit_code() == 0
    assert report.verdict() == "unverified"
    doc = json.loads(json.dumps(report.to_dict()))
    assert doc["summary"]["verdict"] == "unverified" and doc["summary"]["unverified"] == 1
    assert doc["unverified"] == [{"probe": "e2m1-cvt", "status": "error", "detail": "no ptxas found"}]
    line = summary_line(report)
    assert "1 kernel probe unverified" in line and line.endswith("fail-on error → UNVERIFIED (exit 0)")
    out = console_text(report)
    assert "✓ no known problem" not in out
    assert "kernel probe e2m1-cvt could not run (error): no ptxas found" in " ".join(out.split())
    assert squash(out).strip().endswith("UNVERIFIED (exit 0)")


# ---- cutlass-dsl 4.4.2 on GB10: the file says it refuses sm_121a (issue 23, item 8) -----------------

_REFUSED = "OpError: expects arch to be one of ['sm_120a'], but got Arch.sm_121a"


def _pre45_facts(**kernels):
    """A 4.4.2 venv as check sees it: the capability probe read warp/mma.py's admissible_archs = ["sm_120a"]."""
    return gb10_facts(
        packages={"nvidia-cutlass-dsl": "4.4.2", "nvidia-cutlass-dsl-libs-base": "4.4.2", "nvidia-cutlass-dsl-libs-cu13": "4.4.2"},
        capabilities={"cutedsl.sm120_blockscaled_sm121a": {
            "value": False, "evidence": "nvidia_cutlass_dsl/python_packages/cutlass/cute/nvgpu/warp/mma.py:131 admissible_archs = [sm_120a]"}},
        kernels=kernels,
    )


def test_no_kernels_a_pre45_cutlass_dsl_is_an_error_from_its_file():
    report = build_report(_pre45_facts(**{p: {"kind": "cutedsl", "status": "skipped", "detail": "--no-kernels", "runs": []}
                                          for p in ("cutedsl-nvfp4-mma", "cutedsl-nvfp4-mma-tile")}), load())
    finding = next(f for f in report.findings if f.id == "cutedsl-sm121a-not-admissible")
    assert finding.severity == "error" and report.exit_code() == 1
    assert any("admissible_archs = [sm_120a]" in e for e in finding.evidence)


def test_the_tile_probes_refusal_is_attributed_to_the_entry_not_no_known_cause():
    refused = {"kind": "cutedsl", "status": "refused", "arch": "sm_121a", "detail": _REFUSED, "runs": []}
    report = build_report(_pre45_facts(**{"cutedsl-nvfp4-mma": dict(refused), "cutedsl-nvfp4-mma-tile": dict(refused)}), load())
    ids = [f.id for f in report.findings]
    assert "cutedsl-sm121a-not-admissible" in ids
    assert not [i for i in ids if i.startswith("probe-")], ids  # neither probe is "no known cause ... report it"
    # a crash of the tile probe is another outcome: the entry (expect refused) does not account for it
    crashed = dict(refused, status="crash", detail="killed by SIGSEGV")
    report = build_report(_pre45_facts(**{"cutedsl-nvfp4-mma": dict(refused), "cutedsl-nvfp4-mma-tile": crashed}), load())
    assert "probe-cutedsl-nvfp4-mma-tile" in [f.id for f in report.findings]
