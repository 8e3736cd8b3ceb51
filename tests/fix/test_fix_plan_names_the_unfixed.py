"""A fix plan names each failing finding it does not fix, with what to do by hand.

On a venv whose triton files were gone, check failed (`files-missing-triton`, exit 1) and `sparkdoctor fix` printed
only "Nothing to fix: no finding names a fix." and exited 1: what was failing, and what to do, was not said.
"""

from __future__ import annotations

from sparkdoctor.facts import Facts
from sparkdoctor.findings import build_report
from sparkdoctor.fix.documents import PlanDocument
from sparkdoctor.fix.model import Plan
from sparkdoctor.matrix import load
from sparkdoctor.views.fix import plan_document_lines


def report(**extra: object):
    triton = {"name": "triton", "version": "3.9.0", "location": "/venv/lib/python3.11/site-packages", "integrity": "modified",
              "files_modified": [], "files_missing": ["triton/__init__.py"], "files_checked": 602}
    return build_report(Facts.from_dict({"schema": 1, "target": {"kind": "python", "python": "/venv/bin/python"},
                                         "packages": {"triton": triton}}), load(), **extra)


def plan(**fields: object) -> Plan:
    return Plan(target={"python": "/venv/bin/python", "is_venv": True}, installer="/venv/bin/python -m pip", **fields)


def test_an_empty_plan_names_the_failing_finding_and_its_remedy():
    lines = plan_document_lines(PlanDocument(plan(), report()))
    assert lines[1] == "Nothing to fix: no finding names a fix."
    assert lines[2] == ("Not fixed by sparkdoctor: files-missing-triton (error): reinstall it in the target (`python -m pip "
                        "install --force-reinstall --no-deps 'triton==3.9.0'`), or remove what is left (`python -m pip "
                        "uninstall triton`) if it was meant to go")


def test_a_finding_the_plan_fixes_or_one_below_fail_on_is_not_listed():
    fixing = plan(fixes=[{"id": "x", "title": "x", "findings": ["files-missing-triton"]}])
    assert not any(line.startswith("Not fixed") for line in plan_document_lines(PlanDocument(fixing, report())))
    ignored = report(ignore={"files-missing-triton"})
    assert not any(line.startswith("Not fixed") for line in plan_document_lines(PlanDocument(plan(), ignored)))


def test_a_finding_the_plan_expects_gone_is_not_listed_as_left_to_the_user():
    reinstalling = plan(changes={"triton": ["3.9.0", "3.9.0"]}, checks_after=["files-missing-triton"])
    assert not any(line.startswith("Not fixed") for line in plan_document_lines(PlanDocument(reinstalling, report())))
