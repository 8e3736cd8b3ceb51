"""The scripts sparkdoctor hands a container's interpreter with `-c` never import from the container's working folder.

`python -c SOURCE` puts the working folder first on sys.path (`-S` does not change that), and `docker exec` runs in
the image's WORKDIR: a `json.py`, `base64.py` or `types.py` there (the image's own files) ran in place of the
standard module when the interpreter search, the probe bootstrap, fix's file operations, the ptxas compile or bench's
socket check started. The container CLI here is a stand-in that runs `exec -i NAME ARGV...` as ARGV on this machine,
in the folder the test chooses as the working folder: the argv, flags and sources travel exactly as into a container.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.fix import inventory
from sparkdoctor.serve.binding import wide_inside
from sparkdoctor.targets.container import ContainerTarget
from sparkdoctor.targets.container_inspect import find_python

NAMES = ("base64", "json", "types", "io", "tempfile", "zipfile", "shutil", "hashlib", "contextlib", "importlib", "stat")


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> tuple[Path, Path, Path]:
    """(the working folder with planted standard names, the markers folder, the stand-in container CLI)."""
    folder, markers = tmp_path / "workdir", tmp_path / "markers"
    folder.mkdir()
    markers.mkdir()
    for name in NAMES:
        (folder / f"{name}.py").write_text(f"open({str(markers / name)!r}, 'w').close()\n")
    engine = tmp_path / "engine"
    engine.write_text('#!/bin/sh\nshift\n[ "$1" = "-i" ] && shift\nwhile [ "$1" = -e ]; do export "$2"; shift 2; done\n'
                      'shift\nexec "$@"\n')
    engine.chmod(0o755)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    monkeypatch.chdir(folder)
    monkeypatch.setenv("PATH", f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return folder, markers, engine


def test_the_interpreter_search_imports_nothing_from_the_working_folder(workdir):
    folder, markers, engine = workdir
    python, why, shell = find_python([str(engine)], "c")
    assert python.endswith("python3") and shell, why
    assert sorted(os.listdir(markers)) == []


def test_the_probe_bootstrap_and_fixs_file_operations_import_nothing_from_the_working_folder(workdir):
    folder, markers, engine = workdir
    target = ContainerTarget([str(engine)], "c", "python3", "test")
    assert inventory.read(target).is_venv  # the probe bootstrap, then target_dists.py
    assert target.file_transport().listdir(str(folder))  # targets/fileops.py as a -c script
    assert sorted(os.listdir(markers)) == []


def test_the_socket_check_in_a_container_imports_nothing_from_the_working_folder(workdir):
    folder, markers, engine = workdir
    assert isinstance(wide_inside([]), list)  # `RUNTIME exec -u 0 NAME` left out: python3 -S -c here
    assert sorted(os.listdir(markers)) == []


def test_the_compile_script_imports_nothing_from_the_working_folder(workdir, tmp_path):
    from types import SimpleNamespace

    from sparkdoctor.collect.toolkits_container import container_runner

    folder, markers, engine = workdir
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\necho 'ptxas fatal : no'\nexit 1\n")
    fake.chmod(0o755)
    (tmp_path / "in.ptx").write_text("x")
    run_ptxas = container_runner(ContainerTarget([str(engine)], "c", "python3", "test"))
    res, _ = run_ptxas(SimpleNamespace(path=str(fake)), "sm_121a", tmp_path / "in.ptx", tmp_path / "out.cubin", 5)
    assert "ptxas fatal : no" in res.stdout + res.stderr, res.describe_failure()
    assert sorted(os.listdir(markers)) == []
