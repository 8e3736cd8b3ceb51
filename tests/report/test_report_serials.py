"""A GPU's UUID and a board's serial number name one piece of hardware: no report format keeps them (they were
printed as found, in `report` of either format and in `check --format markdown`)."""

from __future__ import annotations

import re

import pytest

from sparkdoctor.anonymize import Redactor
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import load
from sparkdoctor.views.markdown import render_markdown
from tests.gb10 import gb10_facts
from tests.report.bug_report import REPORT_FORMATS, whole_report

MATRIX = load(None)
UUID = "8f3c5a0e-1b2d-4c3e-9f4a-0123456789ab"
MIG = "5d2a9c1e-7b3f-4e8a-b6c0-fedcba987654"
SERIAL = "1324321012345"
BOARD = "PX2YB41K0037"


def _facts():
    return gb10_facts(packages={"triton": "3.5.1"}, env={"CUDA_VISIBLE_DEVICES": f"GPU-{UUID}"},
                      errors=[{"collector": "gpu", "error": f"nvidia-smi -q: Serial Number : {SERIAL}; "
                               f"MIG-GPU-{MIG}/1/0 busy; dmidecode: board_serial={BOARD}"}])


def _shown(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)  # as GitHub shows the markdown: `\_` is `_`


@pytest.mark.parametrize("fmt", [*REPORT_FORMATS, "check-markdown"])
def test_gpu_uuids_and_serial_numbers_do_not_leak(fmt):
    report = build_report(_facts(), MATRIX)
    text = _shown(render_markdown(report) if fmt == "check-markdown" else whole_report(report, fmt, redact=True))
    assert [s for s in (UUID, MIG, SERIAL, BOARD) if s in text] == []
    assert "GPU-<serial>" in text  # the form a launch named its device by is kept


@pytest.mark.parametrize("fmt", REPORT_FORMATS)
def test_no_redact_keeps_them_so_the_check_can_fail(fmt):
    text = _shown(whole_report(build_report(_facts(), MATRIX), fmt, redact=False))
    assert all(s in text for s in (UUID, MIG, SERIAL, BOARD))


@pytest.mark.parametrize("text", ["serial_console=ttyS0", "USB serial converter", "serial: 2", "GPU-0 and GPU-1",
                                  "request 8f3c5a0e-1b2d-4c3e-9f4a-0123456789ab done"])
def test_what_names_no_device_is_kept(text):
    assert Redactor().text(text) == text


def test_redacting_twice_changes_nothing():
    r = Redactor()
    once = r.text(f"GPU-{UUID} Serial Number: {SERIAL} MIG-GPU-{MIG}/1/0")
    assert once == "GPU-<serial> Serial Number: <serial> MIG-GPU-<serial>/1/0" and r.text(once) == once
