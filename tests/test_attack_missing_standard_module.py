"""A target interpreter built without a standard module runs no site folder's module of that name.

pyenv builds an interpreter without _lzma, _bz2, _ctypes or _sqlite3 when their development libraries are missing (it
warns, and the build succeeds). The standard modules that import them fall back when they are absent: shutil, zipfile
and tarfile go on without lzma and bz2, and importlib.metadata and pip import zipfile. The scripts sparkdoctor runs in
the target put the site folders on sys.path (probes/shared/probe_site.py), and a missing name was looked for there: a
package's `_lzma.py` in site-packages ran in fix's target_dists.py and in pip's dry run (sparkdoctor's own pip too),
which promise never to run a package's code. Here such an interpreter is made from this one (its binary copied, its
standard library linked, lib-dynload without _lzma and _bz2), a venv is made from it, and site-packages gets an
_lzma.py and a _bz2.py that each leave a marker.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from sparkdoctor.fix import inventory
from sparkdoctor.targets.early import own_pip_folder
from sparkdoctor.targets.local import PythonTarget
from sparkdoctor.whatif.resolve import PIP_DRY

REPO = Path(__file__).resolve().parent.parent
LEFT_OUT = ("_lzma", "_bz2")
VERSION = f"python{sys.version_info[0]}.{sys.version_info[1]}"


def interpreter_without(root: Path) -> Path:
    """A copy of this interpreter whose standard library lacks LEFT_OUT; the test is skipped where it cannot be made."""
    base, dynload = Path(sys.base_prefix), Path(sysconfig.get_config_var("DESTSHARED") or "")
    binary, stdlib = base / "bin" / VERSION, base / "lib" / VERSION
    if any(name in sys.builtin_module_names for name in LEFT_OUT) or not binary.is_file() or dynload != stdlib / "lib-dynload":
        pytest.skip("this interpreter's layout is not a plain prefix with lib-dynload (or has _lzma built in)")
    (root / "bin").mkdir(parents=True)
    shutil.copy2(binary, root / "bin" / VERSION)
    for entry in (base / "lib").iterdir():
        if entry.name != VERSION:
            (root / "lib").mkdir(exist_ok=True)
            (root / "lib" / entry.name).symlink_to(entry)
    (root / "lib" / VERSION / "lib-dynload").mkdir(parents=True)
    (root / "lib" / VERSION / "site-packages").mkdir()
    for entry in stdlib.iterdir():
        if entry.name not in ("lib-dynload", "site-packages"):
            (root / "lib" / VERSION / entry.name).symlink_to(entry)
    for entry in dynload.iterdir():
        if not entry.name.startswith(LEFT_OUT):
            (root / "lib" / VERSION / "lib-dynload" / entry.name).symlink_to(entry)
    python = root / "bin" / VERSION
    probe = subprocess.run([str(python), "-c", "import zipfile, lzma"], capture_output=True, text=True, timeout=60)
    if "No module named '_lzma'" not in probe.stderr:
        pytest.skip(f"the copied interpreter did not come out without _lzma: {probe.stderr[-300:]}")
    return python


@pytest.fixture(scope="module")
def lacking(tmp_path_factory) -> tuple[Path, Path]:
    """(the venv's python, the markers folder): a venv without pip of an interpreter without _lzma and _bz2."""
    root = tmp_path_factory.mktemp("nolzma")
    base = interpreter_without(root / "base")
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=120)
    site = next((root / "venv").glob("lib/python*/site-packages"))
    markers = root / "markers"
    markers.mkdir()
    for name in LEFT_OUT:
        (site / f"{name}.py").write_text(f"import os\nopen(os.path.join({str(markers)!r}, '{name}_%d' % os.getpid()), 'w')\n"
                                         "raise ImportError('planted')\n")
    return root / "venv" / "bin" / "python", markers


def ran(markers: Path) -> list[str]:
    found = sorted(os.listdir(markers))
    for name in found:
        os.unlink(markers / name)
    return found


def test_fix_reads_the_target_without_running_a_site_module_named_as_a_missing_standard_one(lacking, tmp_path):
    python, markers = lacking
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "VIRTUAL_ENV")}
    (tmp_path / "config.toml").write_text("")
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_CONFIG=str(tmp_path / "config.toml"),
               SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"))
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "fix", "--python", str(python), "--no-kernels",
                           "--format", "json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert json.loads(done.stdout)["command"] == "fix", done.stderr
    assert ran(markers) == []


def test_the_inventory_and_sparkdoctors_pip_run_no_site_module_named_as_a_missing_standard_one(lacking):
    python, markers = lacking
    target = PythonTarget(str(python), "--python")
    assert inventory.read(target).is_venv
    listed = target.run_script(PIP_DRY, ["--pip-from", str(own_pip_folder()), "--disable-pip-version-check", "list",
                                         "--format", "json"], 120)
    assert listed.ok, listed.describe_failure()
    assert json.loads(listed.stdout) == []
    assert ran(markers) == []


def test_a_missing_standard_module_still_reads_as_missing(lacking):
    """The guard answers as the interpreter would without site folders: ImportError, and lzma's importers fall back."""
    python, markers = lacking
    shared = REPO / "probes" / "shared"
    code = (f"import sys; sys.path.insert(1, {str(shared)!r}); import probe_site; probe_site.rebuild()\n"
            "import shutil, zipfile\nprint(zipfile.ZIP_LZMA, shutil.get_archive_formats())\n"
            "try:\n    import lzma\nexcept ImportError as exc:\n    print('missing', exc.name)\n")
    done = subprocess.run([str(python), "-S", "-B", "-X", f"sparkdoctor_site={shared}", "-c", code], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "missing _lzma" in done.stdout and "xztar" not in done.stdout
    assert ran(markers) == []
