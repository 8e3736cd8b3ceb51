"""Session fixtures of the fix tests: the wheelhouse (downloaded once), and one applied target put back per test."""

import os
from pathlib import Path

import pytest

from tests.fix import scenario


@pytest.fixture(scope="session")
def wheels(tmp_path_factory) -> Path:
    root = Path(os.environ.get("SPARKDOCTOR_TEST_VENVS", tmp_path_factory.mktemp("venvs"))) / "fix-wheelhouse"
    return scenario.wheelhouse(root)


@pytest.fixture(scope="session")
def _applied_frozen(tmp_path_factory, wheels) -> tuple[Path, tuple, scenario.Frozen]:
    root = tmp_path_factory.mktemp("applied-frozen")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARKDOCTOR_STATE_DIR", str(root / "state"))
        result = scenario.applied(root / "target", wheels)
    return root, result, scenario.Frozen(root / "target", root / "state")


@pytest.fixture
def applied_again(_applied_frozen, monkeypatch) -> tuple:
    """scenario.applied()'s tuple for a test that goes on from a fresh apply (rolls it back, damages its journal):
    the session's one apply, its target and state folder frozen and put back at the same paths for each test,
    as a fresh apply would have left them; $SPARKDOCTOR_STATE_DIR is its state folder."""
    root, result, frozen = _applied_frozen
    frozen.put_back()
    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(root / "state"))
    return result
