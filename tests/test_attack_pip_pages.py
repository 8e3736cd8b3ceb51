"""A hostile package index aimed at the pip that installs a verify step (`matrix verify --kind installs`) and the pip
that resolves a stack (`--stacks`): an index page that never ends. Both held it whole (they had the file cap of
test_attack_pip_downloads.py, not the version list's address space); now both stop at venvs.INSTALL_MEMORY. And a
version too long for the wheel cache's lock file name, which read as a usage error. Each test failed on the code
before its fix."""

from __future__ import annotations

import os
import sys

import pytest

from sparkdoctor.matrix.verify_table import Env
from sparkdoctor.verify import stacks, venvs, wheels
from tests.test_attack_pip_downloads import EndlessPage

MEMORY_STOP = "pip ran out of the memory it may use and was stopped (an index page that large is not one)"


@pytest.fixture
def endless_page(monkeypatch):
    """An endless index page as the only index; the address space made 512 MiB, so the test stops in seconds and the
    code before the fix fails by the time limit (30 s) instead."""
    page = EndlessPage()
    for name in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", page.url)
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    monkeypatch.setattr(venvs, "INSTALL_MEMORY", 512 * 1024 * 1024, raising=False)  # raising: the code before had none
    yield page
    page.close()


def test_a_verify_install_whose_index_page_never_ends_is_stopped_at_the_memory_limit(tmp_path, monkeypatch, endless_page):
    monkeypatch.setattr(venvs, "PIP_TIMEOUT", 30.0)
    env = Env(steps=(("endless-page-demo==1.0",),), arch="sm_121")
    with pytest.raises(venvs.BuildError) as caught:
        venvs.ensure_venv(tmp_path / "venvs", env)
    assert str(caught.value) == f"pip install endless-page-demo==1.0 failed: {MEMORY_STOP}"
    assert not venvs.venv_path(tmp_path / "venvs", env).exists()


def test_a_stack_resolve_whose_index_page_never_ends_is_stopped_at_the_memory_limit(tmp_path, monkeypatch, endless_page):
    from tests.test_stacks_resolve import stack

    monkeypatch.setattr(stacks, "RESOLVE_TIMEOUT", 30.0)
    result = stacks.resolve(stack(tmp_path, packages='"endless-page-demo" = "==1.0"'))
    assert (result.verdict, result.why) == ("error", MEMORY_STOP)


def test_a_version_too_long_for_the_lock_file_name_is_a_wheel_error(tmp_path):
    """A files check on a version of 200 components: `File name too long` under the JSON code `usage`, exit 2, which
    ended the whole run; now the entry's own error (code verify-wheel), and the other entries are verified."""
    version = "1." + ".".join(["0"] * 200)
    with pytest.raises(wheels.WheelError) as caught:
        wheels.wheel("demo-pkg", version, tmp_path / "wheels")
    assert caught.value.code == "verify-wheel"
    assert str(caught.value) == (f"pip download demo-pkg=={version[:40]}... ({len(version)} characters) failed: cannot lock it "
                                 f"in {tmp_path / 'wheels'}: File name too long")
    assert sys.platform != "linux" or list((tmp_path / "wheels").iterdir()) == []
