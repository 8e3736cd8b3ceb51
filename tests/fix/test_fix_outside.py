"""Only what the plan names is touched, on ordinary venvs (made by `python -m venv` and its own pip).

Byte code: pip compiles what it installs, and site-packages/__pycache__ holds the
.pyc of every top-level module (six's, typing_extensions'). An apply must leave another dist's byte
code alone, and one that is gone or rewritten while its source is unchanged is derived data: compiled
again if gone, never a reason to undo an apply, also when the venv is reached through a symlinked
folder (the path the interpreter was reached by is in every .pyc compiled there, so a .pyc compiled
again there is not the size pip wrote)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.fix import scenario
from tests.fix.scenario import as_json, fix_cli

pytestmark = pytest.mark.slow
OFFLINE = {"PIP_NO_INDEX": "1", "UV_OFFLINE": "1"}

# six reinstalled as a family: six.py sits directly in site-packages, so the clean reinstall removes what the
# uninstall left there and tidies that folder, site-packages itself (the cutlass-dsl family's .pth does the same)
SIX_FIX = """schema = 1
id = "six-family"
title = "Reinstall six cleanly at 1.17"
summary = "reinstall-family of a dist with a top-level module."

[[action]]
kind = "reinstall-family"
packages = ["six"]
requirement = "six"
version = ">=1.17"
"""
SIX_MATRIX = """component = "six"

[[entry]]
id = "six-old"
title = "six is older than 1.17"
severity = "error"
action = "fix"
fix = "six-family"
summary = "A test entry."
remedy = "upgrade"
when.packages = { six = "<1.17" }
refs = ["https://pypi.org/project/six/"]
"""


def linked_target(tmp_path: Path, wheels: Path) -> tuple[Path, Path]:
    """An ordinary pip venv (made at real/pip) and its python as reached through the symlink linked -> real
    (as a venvs folder linked to a data disk is)."""
    scenario.make_target(tmp_path / "real", "pip", wheels, fresh=True)  # pip compiles at real/pip, fix reaches linked/pip
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    python = tmp_path / "linked" / "pip" / "bin" / "python"
    return python, next((tmp_path / "real" / "pip").glob("lib/python*/site-packages"))


def pyc_of(site: Path, module: str) -> Path:
    return next((site / "__pycache__").glob(f"{module}.cpython-*.pyc"))


def test_a_family_reinstall_leaves_the_byte_code_of_other_top_level_modules_alone(tmp_path, wheels):
    """The issue's case: the clean reinstall tidied site-packages and deleted its whole __pycache__
    (typing_extensions' .pyc with it); compiled again through the symlinked path it was another size,
    and every apply was undone."""
    python, site = linked_target(tmp_path, wheels)
    data = tmp_path / "data"
    (data / "fixes").mkdir(parents=True)
    (data / "matrix").mkdir()
    (data / "fixes" / "six-family.toml").write_text(SIX_FIX)
    (data / "matrix" / "six.toml").write_text(SIX_MATRIX)
    before, code = scenario.state(python, []), scenario.byte_code(python)
    assert "typing_extensions.cpython" in " ".join(code) and "six.cpython" in " ".join(code), code
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)}
    res = fix_cli(python, "--yes", "--format", "json", env=env, data=data)
    body = as_json(res)
    assert res.returncode == 0 and body["error"] is None, res.stdout + res.stderr
    assert body["outside_restored"] == [] and body["gone"] == ["six-old"]
    te = pyc_of(site, "typing_extensions").name
    assert scenario.byte_code(python)[te] == code[te], "typing_extensions' .pyc was deleted or rewritten"

    back = fix_cli(None, "--rollback", env=OFFLINE)
    assert back.returncode == 0 and "byte for byte" in back.stdout, back.stdout + back.stderr
    assert scenario.diff(before, scenario.state(python, [])) == []
    assert scenario.byte_code(python)[te] == code[te]


def test_a_deleted_pyc_outside_the_plan_is_compiled_again_and_the_apply_stands(tmp_path, wheels):
    """An installer that deletes another dist's .pyc (its source unchanged): compiled again from that
    source; its size is no evidence (compiled through the symlink it holds the other path), so the
    apply stands and its rollback is clean."""
    python, site = linked_target(tmp_path, wheels)
    pyc = pyc_of(site, "typing_extensions")
    size = pyc.stat().st_size
    env_file, pins = scenario.files_for(tmp_path)
    before = scenario.state(python, [env_file, pins])
    env = {"PIP_CONSTRAINT": str(pins), "SPARKDOCTOR_FIX_FAULT": f"unlink:4:{pyc}"}
    res = fix_cli(python, "--env-file", str(env_file), "--yes", env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "compiled again (the installer changed them outside the plan)" in res.stdout and pyc.name in res.stdout
    # compiled where fix reached it (the linked path is in it): not the size pip wrote, and still no loss
    assert pyc.is_file() and pyc.stat().st_size != size
    back = fix_cli(None, "--rollback", env={**OFFLINE, "PIP_CONSTRAINT": str(pins)})
    assert back.returncode == 0 and "byte for byte" in back.stdout, back.stdout + back.stderr
    assert scenario.diff(before, scenario.state(python, [env_file, pins])) == [] and pyc.is_file()


def test_a_deleted_source_and_its_pyc_outside_the_plan_come_back_and_the_apply_stands(tmp_path, wheels):
    """Both typing_extensions.py and its .pyc deleted: the source is written again from its released
    wheel, then the byte code compiled again from it; nothing is lost."""
    python, site = linked_target(tmp_path, wheels)
    src, pyc = site / "typing_extensions.py", pyc_of(site, "typing_extensions")
    original = src.read_bytes()
    env_file, pins = scenario.files_for(tmp_path)
    env = {"PIP_CONSTRAINT": str(pins), "PIP_FIND_LINKS": str(wheels), "SPARKDOCTOR_FIX_FAULT": f"unlink:4:{src}:{pyc}"}
    body = as_json(fix_cli(python, "--env-file", str(env_file), "--yes", "--format", "json", env=env))
    assert body["error"] is None, body
    assert sorted(Path(p).name for p in body["outside_restored"]) == sorted([pyc.name, src.name])
    assert src.read_bytes() == original and pyc.is_file()


def test_an_automatic_rollback_that_restored_everything_is_settled(tmp_path, wheels):
    """The installer fails after the first package steps: the automatic rollback restores the target,
    the output says plainly that nothing changed, and no `fix-unfinished` is left behind."""
    python, site = linked_target(tmp_path, wheels)
    env_file, pins = scenario.files_for(tmp_path)
    before = scenario.state(python, [env_file, pins])
    res = fix_cli(python, "--env-file", str(env_file), "--yes", env={"PIP_CONSTRAINT": str(pins), "SPARKDOCTOR_FIX_FAULT": "bad-version:5"})
    assert res.returncode == 5, res.stdout + res.stderr
    assert "Rolled back: nothing changed" in res.stdout and "(undo:" not in res.stdout, res.stdout
    assert "fix-unfinished" not in res.stdout
    assert scenario.diff(before, scenario.state(python, [env_file, pins])) == []
    check = scenario.run([sys.executable, "-m", "sparkdoctor", "check", "--python", str(python), "--no-kernels", "--format", "json"])
    assert "fix-unfinished" not in [f["id"] for f in as_json(check)["findings"]]


def test_a_dist_the_plan_does_not_name_installed_by_the_resolver_undoes_the_apply(tmp_path, wheels):
    """The plan's dry run names every dist the resolver call changes; a call that changes another one
    (here a dist installed beside six) is not what was shown: undone, and the dist named."""
    python, _site = linked_target(tmp_path, wheels)
    env_file, pins = scenario.files_for(tmp_path)
    before = scenario.state(python, [env_file, pins])
    res = fix_cli(python, "--env-file", str(env_file), "--yes", "--format", "json",
                  env={"PIP_CONSTRAINT": str(pins), "PIP_FIND_LINKS": str(wheels), "SPARKDOCTOR_FIX_FAULT": "extra:5:iniconfig==2.0.0"})
    body = as_json(res)
    assert res.returncode == 5 and "it changed 1 dist(s) the plan does not name: iniconfig (not installed) -> 2.0.0" in body["error"], res.stdout + res.stderr
    assert body["rolled_back"] and body["rollback_verified"]["ok"] and "fix-unfinished" not in body["new"]
    assert scenario.diff(before, scenario.state(python, [env_file, pins])) == []
