"""Settings given in seconds through the environment (SPARKDOCTOR_FILEOPS_TIMEOUT, SPARKDOCTOR_FILEOPS_BULK_TIMEOUT,
SPARKDOCTOR_LOCK_WAIT, SPARKDOCTOR_FIX_INSTALL_TIMEOUT) are read where they are used, by one reader: a value that is no
number of seconds is one line naming the variable (exit 2), never an internal error, and stops only what uses it.
The container file operations' two were read when their module was imported: `abc` made `check --container` and every
container fix an internal error, and `nan` a deadline that never comes."""

import os
import subprocess
import sys

import pytest

from sparkdoctor import files
from sparkdoctor.errors import UsageError, seconds_from_env
from sparkdoctor.targets import container_files


@pytest.mark.parametrize("value", ["abc", "nan", "-5", "0", "inf", " "])
def test_a_bad_value_is_one_line_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("SPARKDOCTOR_SOME_TIMEOUT", value)
    with pytest.raises(UsageError, match=f"^SPARKDOCTOR_SOME_TIMEOUT={value}: give seconds, e.g. 120$"):
        seconds_from_env("SPARKDOCTOR_SOME_TIMEOUT", 120)


def test_unset_or_empty_is_the_default_and_a_number_is_taken(monkeypatch):
    monkeypatch.delenv("SPARKDOCTOR_SOME_TIMEOUT", raising=False)
    assert seconds_from_env("SPARKDOCTOR_SOME_TIMEOUT", 120) == 120.0
    monkeypatch.setenv("SPARKDOCTOR_SOME_TIMEOUT", "")
    assert seconds_from_env("SPARKDOCTOR_SOME_TIMEOUT", 120) == 120.0
    monkeypatch.setenv("SPARKDOCTOR_SOME_TIMEOUT", "2.5")
    assert seconds_from_env("SPARKDOCTOR_SOME_TIMEOUT", 120) == 2.5
    monkeypatch.setenv("SPARKDOCTOR_SOME_TIMEOUT", "0")
    assert seconds_from_env("SPARKDOCTOR_SOME_TIMEOUT", 120, zero=True) == 0.0


@pytest.mark.parametrize("name", ["SPARKDOCTOR_FILEOPS_TIMEOUT", "SPARKDOCTOR_FILEOPS_BULK_TIMEOUT"])
def test_the_container_file_timeouts_are_read_when_used_not_on_import(monkeypatch, name):
    env = {**os.environ, name: "abc"}
    done = subprocess.run([sys.executable, "-B", "-c", "import sparkdoctor.targets.container_files"], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-300:]
    monkeypatch.setenv(name, "abc")
    reader = container_files.small_timeout if name.endswith("FILEOPS_TIMEOUT") else container_files.bulk_timeout
    with pytest.raises(UsageError, match=f"^{name}=abc: give seconds"):
        reader()
    monkeypatch.setenv(name, "7")
    assert reader() == 7.0
    monkeypatch.delenv(name)
    assert (container_files.small_timeout(), container_files.bulk_timeout()) == (120.0, 900.0)


def test_a_container_file_operation_with_a_bad_timeout_runs_nothing(monkeypatch):
    class Target:
        name = "box"

        def exec_argv(self, *args, **kwargs):
            raise AssertionError("nothing may run")

    monkeypatch.setenv("SPARKDOCTOR_FILEOPS_TIMEOUT", "nan")
    with pytest.raises(UsageError, match="^SPARKDOCTOR_FILEOPS_TIMEOUT=nan: give seconds"):
        container_files.ContainerFiles(Target()).read("/etc/hostname")


@pytest.mark.parametrize("value", ["nan", "-1", "inf"])
def test_a_lock_wait_that_is_no_time_is_one_line(monkeypatch, tmp_path, value):
    """nan made the wait endless (no time is past a nan deadline); 0 stays: do not wait."""
    monkeypatch.setenv("SPARKDOCTOR_LOCK_WAIT", value)
    with pytest.raises(UsageError, match=f"^SPARKDOCTOR_LOCK_WAIT={value}: give seconds, e.g. 60$"):
        with files.folder_lock(tmp_path, "test"):
            pass
    monkeypatch.setenv("SPARKDOCTOR_LOCK_WAIT", "0")
    with files.folder_lock(tmp_path, "test"):
        pass
