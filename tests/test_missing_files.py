"""A tracked distribution whose files are gone from disk is a finding (files-missing-<dist>), not a PASS.

`rm -rf site-packages/triton` (or an uninstall stopped after pip removed the files but not the .dist-info) left
check printing `triton 3.9.0` and `PASS (exit 0)`; the missing files were listed only under `-v`, and `fix` said
"Nothing to fix". Importing triton failed.
"""

from __future__ import annotations

from sparkdoctor.check import _unknown_ignores
from sparkdoctor.config import Config
from sparkdoctor.facts import Facts
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import load

TRITON_FILES = ["triton/FileCheck", "triton/_C/libtriton.so", "triton/__init__.py", "triton/language/core.py"]


def facts(**triton: object) -> Facts:
    row = {"name": "triton", "version": "3.9.0", "location": "/venv/lib/python3.11/site-packages", "integrity": "ok",
           "files_modified": [], "files_missing": [], "files_checked": 602, **triton}
    return Facts.from_dict({"schema": 1, "target": {"kind": "python", "python": "/venv/bin/python"},
                            "packages": {"triton": row}})


def finding(report, name: str = "triton"):
    found = {f.id: f for f in report.findings}
    return found.get(f"files-missing-{name}")


def test_a_package_folder_deleted_under_its_dist_info_fails_the_check():
    report = build_report(facts(integrity="modified", files_missing=TRITON_FILES), load())
    gone = finding(report)
    assert gone is not None, [f.id for f in report.findings]
    assert gone.severity == "error" and report.exit_code() == 1
    assert gone.title == "triton 3.9.0: 4 of its 602 installed files are missing"
    assert gone.evidence == ["missing: triton/__init__.py, triton/FileCheck, triton/_C/libtriton.so, triton/language/core.py"]
    assert "--force-reinstall --no-deps 'triton==3.9.0'" in gone.remedy and "pip uninstall triton" in gone.remedy


def test_files_missing_below_the_top_level_module_are_a_warning():
    report = build_report(facts(integrity="modified", files_missing=["triton/backends/amd/driver.c"]), load())
    gone = finding(report)
    assert gone is not None and gone.severity == "warn"
    assert report.exit_code() == 0
    assert build_report(facts(integrity="modified", files_missing=["triton/backends/amd/driver.c"]), load(),
                        fail_on="warn").exit_code() == 1


def test_many_missing_files_are_counted_not_listed():
    many = [f"triton/language/m{i}.py" for i in range(5000)]
    gone = finding(build_report(facts(integrity="modified", files_missing=many, files_checked=6000), load()))
    assert gone is not None and gone.evidence[0].endswith(" and 4995 more") and len(gone.evidence[0]) < 400


def test_a_healthy_or_unchecked_package_has_no_such_finding():
    for row in ({}, {"integrity": "no-record", "files_checked": 0}, {"files_missing": None}):
        assert finding(build_report(facts(**row), load())) is None


def test_it_can_be_ignored_by_its_id_without_a_warning_that_no_entry_has_it():
    report = build_report(facts(integrity="modified", files_missing=TRITON_FILES), load(), ignore={"files-missing-triton"})
    assert finding(report) is None and report.ignored == ["files-missing-triton"] and report.exit_code() == 0
    assert _unknown_ignores(load(), ["files-missing-triton"], Config()) == []


def test_cutlass_dsl_files_missing_deep_in_the_family_fail_when_the_dsl_no_longer_imports():
    """`rm nvidia_cutlass_dsl/cu12/lib/libcute_dsl_runtime.so` (pip install nvidia-cutlass-dsl, then a clean-up) made
    `import cutlass` raise "cu12 install is incomplete", and the CuTe DSL probes said so, yet check gave a warning and
    exit 0: the file is no top-level module. The probe's failed import is the proof that importing it fails."""
    gone = {"name": "nvidia-cutlass-dsl-libs-cu12", "version": "4.8.1", "integrity": "modified", "files_checked": 12,
            "files_missing": ["nvidia_cutlass_dsl/cu12/lib/libcute_dsl_runtime.so"]}
    failed = {"kind": "cutedsl", "status": "error", "arch": "sm_121a",
              "detail": "import cutlass.cute failed: RuntimeError: cu12 install is incomplete: libcute_dsl_runtime.so is missing"}
    snapshot = facts()
    snapshot.packages = {"nvidia-cutlass-dsl-libs-cu12": gone}
    report = build_report(snapshot, load())
    assert finding(report, "nvidia-cutlass-dsl-libs-cu12").severity == "warn"  # no sign yet that the import fails
    snapshot.kernels = {"cutedsl-nvfp4-mma": failed, "cutedsl-e2m1-cvt": {**failed, "status": "skipped", "detail": ""}}
    report = build_report(snapshot, load())
    found = finding(report, "nvidia-cutlass-dsl-libs-cu12")
    assert found.severity == "error" and report.exit_code() == 1
    assert found.summary.endswith("importing it fails.")
    assert found.evidence[-1] == f"the CuTe DSL probe: {failed['detail']}"
    snapshot.packages = {"triton": {**gone, "name": "triton", "version": "3.9.0", "files_missing": ["triton/x/y.so"]}}
    assert finding(build_report(snapshot, load())).severity == "warn"  # another package's import is not cutlass's
