"""What an interrupted pip uninstall or upgrade leaves in site-packages, against a real venv.

pip moves what it removes aside first, to a folder beside it whose name has its first letter replaced by `~`
(pip's AdjacentTempDirectory: `six-1.17.0.dist-info` -> `~ix-1.17.0.dist-info`, `six.py` -> `~ix.py`), and deletes
it when the change commits. Stopped before that (Ctrl-C, a kill, a full disk), the `~` folders stay. Python does
not see them (`importlib.metadata.version()` finds no distribution by that name, `import` no module) and pip ignores
them ("Ignoring invalid distribution ~ix"): the target probe must not read one as the package installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from sparkdoctor.locations import data_dir
from tests import venvs

PROBE = data_dir("probes") / "target_env" / "__main__.py"


@pytest.fixture
def venv(tmp_path) -> Path:
    """A private copy of a real pip-built venv holding six 1.17.0; returns its site-packages."""
    src = venvs.shared_venv("targetenv-small", ["six==1.17.0", "idna==3.10", "packaging==24.2"]).parent.parent
    shutil.copytree(src, tmp_path / "venv", symlinks=True)
    return next((tmp_path / "venv").glob("lib/python*/site-packages"))


def probe(site: Path) -> dict:
    python = site.parent.parent.parent / "bin" / "python"
    done = subprocess.run([str(python), "-B", str(PROBE), "--no-cache", "--track", "six"], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def imports_six(site: Path) -> bool:
    python = site.parent.parent.parent / "bin" / "python"
    return subprocess.run([str(python), "-c", "import six"], capture_output=True, timeout=60).returncode == 0


def test_an_uninstall_stopped_after_pip_moved_the_package_aside_is_not_installed(venv):
    (venv / "six-1.17.0.dist-info").rename(venv / "~ix-1.17.0.dist-info")
    (venv / "six.py").rename(venv / "~ix.py")
    assert not imports_six(venv)
    data = probe(venv)
    assert "six" not in data["packages"], data["packages"].get("six")
    assert data["errors"] == []


def test_an_upgrade_stopped_before_pip_deleted_the_old_release_is_the_new_release_and_no_error(venv):
    old = venv / "~ix-1.16.0.dist-info"
    shutil.copytree(venv / "six-1.17.0.dist-info", old)
    meta = old / "METADATA"
    meta.write_text(meta.read_text().replace("Version: 1.17.0", "Version: 1.16.0"))
    assert imports_six(venv)
    data = probe(venv)
    six = data["packages"]["six"]
    assert (six["version"], six["integrity"], six["files_missing"]) == ("1.17.0", "ok", [])
    assert data["errors"] == [], "not 'two metadata folders ... a stale one is left over', and not 'could not observe'"


def test_fix_reads_the_same_distributions_as_check(venv):
    """fix's inventory (sparkdoctor/fix/target_dists.py, through importlib.metadata.distributions(), which yields
    `~` folders too) took `~ix-1.17.0.dist-info` for six 1.17.0 installed, as check did."""
    (venv / "six-1.17.0.dist-info").rename(venv / "~ix-1.17.0.dist-info")
    (venv / "six.py").rename(venv / "~ix.py")
    python = venv.parent.parent.parent / "bin" / "python"
    repo = Path(__file__).parents[1]
    done = subprocess.run([str(python), "-S", "-B", "-X", f"sparkdoctor_site={repo / 'probes' / 'shared'}",
                           str(repo / "sparkdoctor" / "fix" / "target_dists.py")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    dists = json.loads(done.stdout.splitlines()[-1])["dists"]
    assert "six" not in dists, dists.get("six")
    assert "idna" in dists
