"""A file its dist's RECORD lists but that was gone before the apply is gone again after the rollback.

`rm .../dsl_packages/iket/__init__.py` in a real nvidia-cutlass-dsl 4.8.1 venv, then `fix --yes` (the family
reinstall wrote the file back) and `fix --rollback`: the rollback reinstalled the saved wheel, which has the file, and
its verification found the target not as before ("DIFFERENCES: .../iket/__init__.py", exit 5). The journal stayed
"rollback interrupted", check failed on `fix-unfinished` and fix refused every plan; each `fix --rollback` it advised
reinstalled the family again and ended the same way, and `--prune` never removes such a journal: no way out.
"""

import pytest

from tests.fix import scenario
from tests.fix.scenario import as_json, fix_cli

pytestmark = pytest.mark.slow


def test_a_file_missing_before_the_apply_is_missing_after_the_rollback(tmp_path, wheels):
    python = scenario.make_target(tmp_path, "pip", wheels)
    gone = next(python.parent.parent.glob("lib/python*/site-packages/cattrs/preconf/msgpack.py"))
    gone.unlink()
    before = scenario.state(python, [])

    applied = fix_cli(python, "--yes")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "attrs-family" in applied.stdout and gone.exists(), "the family reinstall writes the file back"

    back = fix_cli(None, "--rollback", "--format", "json", env={"PIP_NO_INDEX": "1"})
    assert back.returncode == 0, back.stdout + back.stderr
    assert as_json(back)["result"]["verified"]["files_differ"] == []
    assert not gone.exists() and scenario.diff(before, scenario.state(python, [])) == []
    hist = as_json(fix_cli(None, "--history", "--format", "json"))["result"]
    assert [h["status"] for h in hist] == ["rolled back"]
