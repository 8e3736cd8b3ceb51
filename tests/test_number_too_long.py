"""A probe's JSON with an integer of more digits than int() reads (sys.get_int_max_str_digits: 4,300 by default).
json.loads raises a plain ValueError there, not a JSONDecodeError: readers that took every ValueError for "not JSON"
said the probe printed no JSON, and readers that caught JSONDecodeError alone stopped on it with Python's own words.
Each now says in one line what was wrong."""

from __future__ import annotations

import json
import sys

import pytest

from sparkdoctor import proc
from sparkdoctor.inputs import NUMBER_TOO_LONG, number_too_long

LONG = '{"kernel": "nvfp4-mma-tile", "stage": "init", "x": ' + "9" * 5000 + "}"


def _error(text: str) -> BaseException:
    try:
        json.loads(text)
    except (ValueError, RecursionError) as exc:
        return exc
    raise AssertionError(f"{text[:40]} parsed")


def test_only_a_number_past_ints_digit_limit_is_too_long():
    assert number_too_long(_error(LONG))
    assert not number_too_long(_error("{not json")) and not number_too_long(_error('{"x": 1e}'))
    assert json.loads('{"x": ' + "9" * 4300 + "}")["x"] > 0  # at the limit: read


def test_the_target_probe_says_the_number_is_too_long():
    from sparkdoctor.targets.interface import TargetError
    from sparkdoctor.targets.local import PythonTarget, parse_json_probe, probe_entry

    with pytest.raises(TargetError) as info:
        parse_json_probe(PythonTarget(sys.executable, "--python"), probe_entry("target_env"),
                         proc.ProcResult([sys.executable], 0, LONG + "\n", "", 0.1))
    assert str(info.value) == f"probe target_env printed JSON that {NUMBER_TOO_LONG}"


def test_the_cutedsl_probe_says_the_number_is_too_long():
    """Before: ValueError out of the collector (it caught JSONDecodeError only)."""
    from sparkdoctor.collect import cutedsl

    raw = cutedsl.interpret("nvfp4-mma-tile", "sm_121a", proc.ProcResult(["p"], 0, LONG + "\n", "", 0.1))
    assert raw["status"] == "error" and raw["detail"] == f"the compile probe's answer {NUMBER_TOO_LONG}", raw


def test_the_gpu_helper_says_the_number_is_too_long():
    """Before: ValueError out of the collector (it caught JSONDecodeError only)."""
    from sparkdoctor.collect import gpu

    records, problem = gpu.stage_records(proc.ProcResult(["p"], 0, LONG + "\n", "", 0.1), {"init": "the driver"})
    assert records == {} and problem == f"the GPU query helper's answer {NUMBER_TOO_LONG}"


def test_a_file_operation_in_a_container_says_the_number_is_too_long(monkeypatch):
    from sparkdoctor.targets import container_files
    from sparkdoctor.targets.files import FileError

    files = object.__new__(container_files.ContainerFiles)
    files.where = "container c"
    monkeypatch.setattr(files, "_argv", lambda *a: ["true"], raising=False)
    monkeypatch.setattr(container_files, "reaped", lambda res, token: res)
    monkeypatch.setattr(container_files.proc, "run", lambda *a, **k: proc.ProcResult(["p"], 0, LONG + "\n", "", 0.1))
    with pytest.raises(FileError) as info:
        files._call({"op": "info"}, 5.0)
    assert str(info.value) == f"container c: file operation info: its answer {NUMBER_TOO_LONG}"
