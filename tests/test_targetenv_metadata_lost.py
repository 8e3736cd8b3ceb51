"""A `.dist-info` whose METADATA is gone while its RECORD is there: the package pip installed, its files in place.

A torch venv with `torch-2.13.0+cpu.dist-info/METADATA` deleted: `import torch` gave 2.13.0+cpu, but check said
`torch not installed` (with "could not observe: ... cannot read METADATA: no such file"), so no torch entry was
evaluated and the verdict was PASS. The folder's name stands in for the name and version, as for a METADATA that
cannot be read, and the missing file is a finding (files-missing-<dist>). A folder with neither METADATA nor RECORD is
still no package (tests/test_targetenv.py::test_corrupt_dist_info_is_an_error_line_and_the_rest_is_reported).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from sparkdoctor.facts import Facts
from sparkdoctor.findings import build_report
from sparkdoctor.locations import data_dir
from sparkdoctor.matrix import load
from tests import venvs

PROBE = data_dir("probes") / "target_env" / "__main__.py"


def test_a_lost_metadata_file_leaves_the_package_installed_under_its_folders_name(tmp_path):
    src = venvs.shared_venv("targetenv-small", ["six==1.17.0", "idna==3.10", "packaging==24.2"]).parent.parent
    shutil.copytree(src, tmp_path / "venv", symlinks=True)
    site = next((tmp_path / "venv").glob("lib/python*/site-packages"))
    (site / "six-1.17.0.dist-info" / "METADATA").unlink()
    python = tmp_path / "venv" / "bin" / "python"
    assert subprocess.run([str(python), "-c", "import six"], timeout=60).returncode == 0
    done = subprocess.run([str(python), "-B", str(PROBE), "--no-cache", "--track", "six"], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    six = data["packages"].get("six")
    assert six is not None, "six imports: it is installed"
    assert (six["version"], six["files_missing"]) == ("1.17.0", ["six-1.17.0.dist-info/METADATA"])
    assert any("METADATA" in e["error"] for e in data["errors"]), "the damage is still said"
    report = build_report(Facts.from_dict({"schema": 1, "target": {"kind": "python", "python": str(python)},
                                           "packages": data["packages"]}), load())
    [finding] = [f for f in report.findings if f.id == "files-missing-six"]
    assert finding.severity == "warn" and "--force-reinstall --no-deps 'six==1.17.0'" in finding.remedy
