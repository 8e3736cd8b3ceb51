"""Which CuTe DSL compiler build is really on disk, proven with the real 4.5.0 wheels.

For 4.4/4.5, nvidia-cutlass-dsl-libs-base and -libs-cu13 write the SAME _cutlass_ir*.so path, so
the last install wins whatever pip lists. The probe must follow the bytes, not pip's list, and a
hash cache must never carry an answer across a reinstall. (cp311 wheels exist for 4.5.0, so the
test interpreter's 3.11 is fine.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sparkdoctor.locations import data_dir
from tests import venvs

PROBE = data_dir("probes") / "target_env" / "__main__.py"
LIB_SO = "python_packages/cutlass/_mlir/_mlir_libs/_cutlass_ir.cpython-{}{}-x86_64-linux-gnu.so".format(*sys.version_info[:2])


def probe(python, cache):
    done = subprocess.run([str(python), "-B", str(PROBE), "--cache", str(cache)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def pip(python, *args):
    """This pip, installing into the venv of `python` (`pip --python`, as tests/venvs.py built the cached one)."""
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", str(python), "-q", *args],
                   check=True, timeout=1800)


@pytest.mark.slow
def test_active_build_follows_the_bytes_not_pips_list(tmp_path):
    python = venvs.copy_of(venvs.cutedsl450(), tmp_path / "venv")  # `pip install nvidia-cutlass-dsl==4.5.0`, a copy
    cache = tmp_path / "hashes.json"

    base = probe(python, cache)["cutedsl"]
    assert base["installed_builds"] == ["libs-base"]
    assert (base["active_build"], base["bundled_cuda"]) == ("libs-base", "12.9")
    assert "matches the RECORD of nvidia-cutlass-dsl-libs-base 4.5.0" in base["evidence"]

    pip(python, "install", "nvidia-cutlass-dsl-libs-cu13==4.5.0")
    cu13 = probe(python, cache)
    assert cu13["cutedsl"]["installed_builds"] == ["libs-base", "libs-cu13"]
    assert (cu13["cutedsl"]["active_build"], cu13["cutedsl"]["bundled_cuda"]) == ("libs-cu13", "13.1")
    assert "nvidia-cutlass-dsl-libs-cu13 4.5.0" in cu13["cutedsl"]["evidence"]
    # libs-base's RECORD no longer describes the shared files: its integrity says so.
    assert cu13["packages"]["nvidia-cutlass-dsl-libs-base"]["integrity"] == "modified"

    pip(python, "install", "--force-reinstall", "--no-deps", "nvidia-cutlass-dsl-libs-base==4.5.0")
    back = probe(python, cache)
    assert "nvidia-cutlass-dsl-libs-cu13" in back["packages"], "pip still lists libs-cu13"
    assert back["cutedsl"]["installed_builds"] == ["libs-base", "libs-cu13"]
    assert (back["cutedsl"]["active_build"], back["cutedsl"]["bundled_cuda"]) == ("libs-base", "12.9")
    assert back["cache"]["hashed_files"] > 0, "reinstalled files are hashed again, not read from the cache"
    cu13_pkg = back["packages"]["nvidia-cutlass-dsl-libs-cu13"]
    assert cu13_pkg["integrity"] == "modified"
    so = next(p for p in cu13_pkg["files_modified"] if p.endswith(LIB_SO))
    assert cu13_pkg["files_shared"][so] == ["nvidia-cutlass-dsl-libs-base 4.5.0"]

    # Uninstalling the listed cu13 build deletes the shared files: no compiler is left on disk.
    pip(python, "uninstall", "-y", "nvidia-cutlass-dsl-libs-cu13")
    gone = probe(python, cache)["cutedsl"]
    assert gone["installed_builds"] == ["libs-base"]
    assert gone["active_build"] == "unknown" and gone["bundled_cuda"] is None
    assert "no CuTe DSL compiler file is on disk" in gone["evidence"]


@pytest.mark.slow
def test_a_downgrade_that_leaves_a_mixed_family_is_judged_by_what_import_loads(tmp_path):
    """A plain 4.8.1 install downgraded by `pip install nvidia-cutlass-dsl==4.5.0`: libs-core and libs-cu12 stay at
    4.8.1, and their cu12 compiler stays on disk, but the .pth file in force is libs-base 4.5.0's, so `import cutlass`
    loads libs-base 4.5.0's compiler. check names that build, its two known bugs and the mixed family, with and
    without the kernel probes (which compile with the library that really loads)."""
    python = venvs.cutedsl_downgraded()
    cute = probe(python, tmp_path / "hashes.json")["cutedsl"]
    assert cute["installed_builds"] == ["libs-base", "libs-core", "libs-cu12"]
    assert (cute["active_build"], cute["bundled_cuda"]) == ("libs-base", "12.9"), cute["evidence"]
    assert "from nvidia_cutlass_dsl.pth" in cute["evidence"] and "never loaded, off the import path" in cute["evidence"]
    assert "matches the RECORD of nvidia-cutlass-dsl-libs-base 4.5.0" in cute["evidence"]
    # The interpreter agrees: the compiler library `import cutlass` maps is the one the probe chose.
    maps = subprocess.run([str(python), "-c", "import cutlass\nprint(sorted({l.split()[-1] for l in open('/proc/self/maps') "
                           "if '_cutlass_ir' in l}))"], capture_output=True, text=True, timeout=300)
    chosen = next(f["path"] for f in cute["files"] if f["sha256"] == cute["sha256"])
    assert maps.stdout.strip().splitlines()[-1] == repr([chosen]), (maps.stdout, maps.stderr, chosen)
    env = dict(os.environ, SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"))
    for kernels in ("--no-kernels", "--kernels"):
        done = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--python", str(python), "--arch", "sm_121a",
                               kernels, "-f", "json"], capture_output=True, text=True, timeout=600, env=env)
        doc = json.loads(done.stdout)
        found = {f["id"]: f for f in doc["findings"]}
        assert {"cutedsl-450-libs-base-mma", "cutedsl-libs-base-tile-crash", "cutedsl-mixed-family"} <= set(found), (kernels, list(found))
        assert not [i for i in found if i.startswith("probe-")], (kernels, list(found))  # every probe result explained
        assert found["cutedsl-mixed-family"]["evidence"] == [
            "the nvidia-cutlass-dsl family is at different versions: nvidia-cutlass-dsl 4.5.0, nvidia-cutlass-dsl-libs-base 4.5.0, "
            "nvidia-cutlass-dsl-libs-core 4.8.1, nvidia-cutlass-dsl-libs-cu12 4.8.1"]
        assert done.returncode == 1, done.stderr


@pytest.mark.slow
def test_fix_plans_one_version_for_the_mixed_family(tmp_path):
    """`fix` (a dry run: nothing is changed) on the downgraded venv: the mixed family asks for its fix, and the merged plan
    leaves every cutlass-dsl member that stays at one version, the 4.8.1 leftovers removed."""
    python = venvs.cutedsl_downgraded()
    env = dict(os.environ, SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "fix", "--python", str(python), "--arch", "sm_121a", "--no-kernels",
                           "-f", "json"], capture_output=True, text=True, timeout=600, env=env)
    plan = json.loads(done.stdout)["plan"]
    assert {"id": "cutlass-dsl-family-one-version", "title": plan["fixes"][-1]["title"], "findings": ["cutedsl-mixed-family"]} in plan["fixes"]
    after = {name: new for name, (_, new) in plan["changes"].items() if name.startswith("nvidia-cutlass-dsl")}
    assert after["nvidia-cutlass-dsl-libs-core"] is None and after["nvidia-cutlass-dsl-libs-cu12"] is None, after
    assert len({v for v in after.values() if v is not None}) == 1, after
