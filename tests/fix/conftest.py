"""Session fixtures of the fix tests: the wheelhouse (downloaded once), and a fresh target per test."""

import os
from pathlib import Path

import pytest

from tests.fix import scenario


@pytest.fixture(scope="session")
def wheels(tmp_path_factory) -> Path:
    root = Path(os.environ.get("SPARKDOCTOR_TEST_VENVS", tmp_path_factory.mktemp("venvs"))) / "fix-wheelhouse"
    return scenario.wheelhouse(root)
