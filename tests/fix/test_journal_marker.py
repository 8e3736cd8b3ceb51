"""A COMPLETE marker that is not UTF-8 (a disk error, a hand edit) is a damaged journal in one line, never an
internal error (found by tests/test_fuzz_inputs.py::test_journal_files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkdoctor.fix import journal as jr
from sparkdoctor.fix.interface import FixError

REAL = Path(__file__).resolve().parents[1] / "data" / "journals" / "uv-apply.json"  # written by `fix --yes`


@pytest.mark.parametrize("marker", [b"\xff\xfe\n", b"\xed\xa0\x80" + b"0" * 61 + b"\n"])
def test_a_complete_marker_that_is_not_utf8_is_a_damaged_journal(tmp_path, marker):
    folder = tmp_path / "20261126-130950-509260"
    folder.mkdir()
    (folder / "journal.json").write_bytes(REAL.read_bytes())
    (folder / jr.COMPLETE).write_bytes(marker)
    with pytest.raises(FixError, match="does not match its COMPLETE marker") as info:
        jr.load(str(folder))
    assert "\n" not in str(info.value)
