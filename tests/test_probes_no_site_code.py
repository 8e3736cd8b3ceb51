"""check and fix never run a package's code in the target: no .pth `import` line, no sitecustomize.py.

The probes start under the target's interpreter with -S (sparkdoctor/targets/early.py, script_argv) and rebuild the
import path site would have made from the files alone (probes/shared/probe_site.py). A venv made as users make it
(`python -m venv`), with an evil .pth import line and a sitecustomize.py that each leave a marker file, and a .pth
path line to a folder outside site-packages holding a real distribution: no marker may appear, and that
distribution must still be seen.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.fix import inventory, outside
from sparkdoctor.targets import early
from sparkdoctor.targets.container import ContainerTarget
from sparkdoctor.targets.local import PythonTarget, probe_entry
from sparkdoctor.whatif.resolve import PIP_DRY

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO / "probes" / "shared"
EXTRA_DIST = "path-line-dist"


def plant(site: Path, markers: Path, extra: Path) -> None:
    """The evil .pth import line, sitecustomize.py, and a path line to `extra`, which holds a real dist-info."""
    markers.mkdir(exist_ok=True)
    (site / "evil.pth").write_text(f"import os; open(os.path.join({str(markers)!r}, 'PTH_RAN_%d' % os.getpid()), 'w').write('x')\n")
    (site / "sitecustomize.py").write_text(
        f"import os\nopen(os.path.join({str(markers)!r}, 'SITECUSTOMIZE_RAN_%d' % os.getpid()), 'w').write('x')\n")
    info = extra / "path_line_dist-1.2.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {EXTRA_DIST}\nVersion: 1.2.3\n")
    (info / "RECORD").write_text("path_line_dist-1.2.3.dist-info/METADATA,,\n")
    (site / "extra_folder.pth").write_text(f"# a comment\n\n{extra}\n")


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(python, markers folder, extra folder) of a venv made by `python -m venv` (with pip, as users make it)."""
    root = tmp_path_factory.mktemp("nosite")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=300, capture_output=True)
    python = root / "venv" / "bin" / "python"
    site = next((root / "venv").glob("lib/python*/site-packages"))
    plant(site, root / "markers", root / "extra")
    return python, root / "markers", root / "extra"


def ran(markers: Path) -> list[str]:
    return sorted(os.listdir(markers))


def clear(markers: Path) -> None:
    """Each test judges its own runs (the venv is shared by the module)."""
    for name in os.listdir(markers):
        os.unlink(markers / name)


@pytest.fixture
def cli(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "SPARKDOCTOR_DEBUG", "VIRTUAL_ENV")}
    config = tmp_path / "config.toml"
    config.write_text("")
    env.update(PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""), SPARKDOCTOR_CONFIG=str(config),
               SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"))

    def call(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "sparkdoctor", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)

    return call


def test_check_runs_no_pth_import_line_nor_sitecustomize_and_still_sees_path_line_dists(planted, cli):
    python, markers, extra = planted
    clear(markers)
    done = cli("check", "--no-kernels", "--python", str(python), "--format", "json")
    assert ran(markers) == [], done.stderr
    packages = json.loads(done.stdout)["facts"]["packages"]
    assert packages[EXTRA_DIST]["version"] == "1.2.3" and packages[EXTRA_DIST]["location"] == str(extra)
    assert "pip" in packages  # the venv's own site-packages, rebuilt without site


def test_fix_runs_no_pth_import_line_nor_sitecustomize(planted, cli):
    python, markers, extra = planted
    clear(markers)
    done = cli("fix", "--python", str(python), "--format", "json")
    assert ran(markers) == [], done.stderr
    assert json.loads(done.stdout)["command"] == "fix"


def in_a_container(tmp_path: Path, python: Path) -> ContainerTarget:
    """A container target whose container CLI runs `exec -i NAME ARGV...` as ARGV on this machine: the payload, its
    bootstrap and the interpreter's flags travel exactly as into a container, without a daemon."""
    engine = tmp_path / "engine"
    engine.write_text('#!/bin/sh\nshift\n[ "$1" = "-i" ] && shift\nwhile [ "$1" = -e ]; do export "$2"; shift 2; done\nshift\nexec "$@"\n')
    engine.chmod(0o755)
    return ContainerTarget([str(engine)], "c", str(python), "test")


@pytest.mark.parametrize("where", ["local", "container"])
def test_fix_and_whatif_scripts_see_path_line_dists_without_site(planted, tmp_path, where):
    """fix's target_dists.py and target_stat.py and whatif's target_pip_dry.py import probe_site.py from the folder
    sparkdoctor names in -X sparkdoctor_site=FOLDER (probes/shared/ here, the payload's shared/ in a container)."""
    python, markers, extra = planted
    clear(markers)
    target = PythonTarget(str(python), "--python") if where == "local" else in_a_container(tmp_path, python)
    inv = inventory.read(target)
    dist = inv.get(EXTRA_DIST)
    assert dist is not None and dist.version == "1.2.3" and dist.location == str(extra)
    assert inv.is_venv and inv.has_pip and inv.purelib.startswith(str(python.parent.parent))
    assert str(extra / "path_line_dist-1.2.3.dist-info" / "METADATA") in outside.snapshot(target, [])
    listed = target.run_script(PIP_DRY, ["--disable-pip-version-check", "list", "--format", "json"], 120)
    assert listed.ok, listed.describe_failure()
    assert EXTRA_DIST in {row["name"] for row in json.loads(listed.stdout)}
    assert ran(markers) == []


@pytest.mark.parametrize("where", ["local", "container"])
def test_mods_reads_the_site_folders_without_running_site_code(planted, tmp_path, cli, where):
    """`mods check --python` (and `--container`, `recipe check` on a recipe with mods, what-if's upgraded tree) asked
    the interpreter for its site folders with -I alone, which still runs site: the .pth line and sitecustomize.py
    ran, twice. The folders are the venv's all the same, found without site, and the mod is judged against them."""
    python, markers, extra = planted
    clear(markers)
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    (site / "modpkg").mkdir(exist_ok=True)
    (site / "modpkg" / "x.py").write_text("a = 1\nb = 2\nc = 3\n")
    diff = tmp_path / "m.diff"
    diff.write_text("--- a/modpkg/x.py\n+++ b/modpkg/x.py\n@@ -1,3 +1,3 @@\n a = 1\n-b = 2\n+b = 5\n c = 3\n")
    if where == "local":
        done = cli("mods", "check", str(diff), "--python", str(python), "--format", "json")
        assert json.loads(done.stdout)["counts"] == {"applies": 1}, done.stdout + done.stderr
    else:
        from sparkdoctor.mods.trees import ContainerTree

        assert ContainerTree(in_a_container(tmp_path, python)).dirs() == [str(site)]
    assert ran(markers) == []


@pytest.mark.parametrize("script", [inventory.SCRIPT, outside.SCRIPT, PIP_DRY], ids=lambda p: p.name)
@pytest.mark.parametrize("flag", ["sparkdoctor_site", "sparkdoctor_site=True"])
def test_a_script_given_no_absolute_folder_imports_nothing_from_the_current_one(tmp_path, script, flag):
    """A bare -X sparkdoctor_site is True, and str(True) on sys.path is the current folder's `True/`: a probe_site.py
    planted there would run. The scripts put the value under "/" (an absolute folder stays itself) or stop."""
    planted = tmp_path / "True"
    planted.mkdir()
    (planted / "probe_site.py").write_text(f"open({str(tmp_path / 'RAN')!r}, 'w').close()\n")
    done = subprocess.run([sys.executable, "-S", "-B", "-X", flag, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1 and "No module named 'probe_site'" in done.stderr, done.stderr
    assert not (tmp_path / "RAN").exists()


@pytest.mark.parametrize("probe, args", [("vllm_flags", []), ("cutedsl", ["--arch", "sm_121a"]), ("capabilities", [])])
def test_other_probes_run_no_site_code(planted, probe, args):
    python, markers, extra = planted
    clear(markers)
    result = PythonTarget(str(python), "--python").run_script(probe_entry(probe), args, 120)
    assert result.ok, result.describe_failure()
    assert ran(markers) == []


def test_every_target_script_starts_without_site():
    from sparkdoctor.targets.local import ping_argv

    assert early.SITE_XOPTION == "sparkdoctor_site"
    source = (SHARED / "probe_site.py").read_text()
    assert f'XOPTION = "{early.SITE_XOPTION}"' in source
    argv = early.script_argv("/py", "/probes/target_env/__main__.py", ["--x"])
    assert argv == ["/py", "-S", "-B", "-X", f"sparkdoctor_site={SHARED}", "/probes/target_env/__main__.py", "--x"]
    assert early.script_argv("/py", "/x/fix/target_dists.py", [])[1:4] == ["-S", "-B", "-X"]
    assert early.script_argv("/py", "/x.py", [], shared="/in/there")[4] == "sparkdoctor_site=/in/there"  # a container's
    assert early.script_argv("/py", early.PIP_NO_SITE, [])[1:3] == ["-S", "-B"]  # fix's pip install too
    assert ping_argv("/py") == ["/py", "-S", "-B", "-c", "pass"]


SHOW = """
import json, sys
sys.path.insert(1, {shared!r})
import probe_site
probe_site.rebuild()
print(json.dumps({{"path": [p for p in sys.path[1:] if p != {shared!r}], "prefix": sys.prefix,
                  "skipped": [line for _, line in probe_site.SKIPPED]}}))
"""


def test_a_standard_module_name_in_the_cutlass_dsl_folder_never_runs(tmp_path, cli):
    """nvidia-cutlass-dsl's .pth puts its dsl_packages folder first on the path, before the standard library: a
    base64.py planted there ran when the probe imported base64, and `check` said PASS. The rebuild puts the folder
    after the standard library (still before every site folder)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True, timeout=120)
    site = next((tmp_path / "v").glob("lib/python*/site-packages"))
    dsl = site / "nvidia_cutlass_dsl" / "dsl_packages"
    (dsl / "cutlass").mkdir(parents=True)
    (site / "nvidia_cutlass_dsl_packages.pth").write_text(
        "import sys, os, nvidia_cutlass_dsl; sys.path.insert(0, os.path.join(nvidia_cutlass_dsl.__path__[0], 'dsl_packages'))")
    markers = tmp_path / "markers"
    markers.mkdir()
    for name in ("base64", "json", "re", "subprocess", "tempfile", "zipfile", "csv", "email", "hashlib", "shutil"):
        (dsl / f"{name}.py").write_text(f"open({str(markers / name)!r}, 'w').close()\n")
    done = cli("check", "--no-kernels", "--python", str(tmp_path / "v" / "bin" / "python"), "--format", "json")
    assert json.loads(done.stdout)["command"] == "check", done.stderr
    assert ran(markers) == []


def test_rebuilt_path_is_the_one_site_makes(tmp_path):
    """Path lines (absolute, relative, missing, repeated), comments, nvidia-cutlass-dsl 4.6+'s import line (its effect
    computed from the folders) and a venv's prefix: the same sys.path and sys.prefix as site, and the other import
    lines listed, not run."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True, timeout=120)
    python = tmp_path / "v" / "bin" / "python"
    site = next((tmp_path / "v").glob("lib/python*/site-packages"))
    (tmp_path / "abs").mkdir()
    (site / "rel").mkdir()
    (site / "nvidia_cutlass_dsl" / "dsl_packages" / "cutlass").mkdir(parents=True)  # a namespace package, as shipped
    (site / "a.pth").write_text(f"{tmp_path / 'abs'}\nrel\n# rel2\n{tmp_path / 'missing'}\nrel\n")
    (site / "nvidia_cutlass_dsl_packages.pth").write_text(
        "import sys, os, nvidia_cutlass_dsl; sys.path.insert(0, os.path.join(nvidia_cutlass_dsl.__path__[0], 'dsl_packages'))")
    (site / "z.pth").write_text("import os; os.environ.setdefault('NOBODY_READS_THIS', '1')\n")
    script = tmp_path / "show.py"
    script.write_text(SHOW.format(shared=str(SHARED)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    with_site = json.loads(subprocess.run([str(python), "-B", str(script)], capture_output=True, text=True, check=True,
                                          env=env).stdout)
    rebuilt = json.loads(subprocess.run([str(python), "-S", "-B", "-X", "sparkdoctor_site", str(script)],
                                        capture_output=True, text=True, check=True, env=env).stdout)
    dsl = str(site / "nvidia_cutlass_dsl" / "dsl_packages")
    # site puts the DSL's folder first; the rebuild puts it after the standard library, before every site folder
    # (twice: site reads a venv's .pth files twice)
    assert with_site["path"][:2] == [dsl, dsl]
    rest = with_site["path"][2:]
    first_site = rest.index(str(site))
    assert rebuilt["path"] == [*rest[:first_site], dsl, dsl, *rest[first_site:]]
    assert rebuilt["prefix"] == with_site["prefix"] == str(tmp_path / "v")
    assert str(tmp_path / "abs") in rebuilt["path"] and str(site / "rel") in rebuilt["path"]
    # (listed twice: site reads a venv's .pth files twice, its venv() and then its prefixes)
    assert with_site["skipped"] == [] and set(rebuilt["skipped"]) == {"import os; os.environ.setdefault('NOBODY_READS_THIS', '1')"}
    # -S alone (whatif's scratch sites: only PYTHONPATH on purpose) rebuilds nothing
    bare = json.loads(subprocess.run([str(python), "-S", "-B", str(script)], capture_output=True, text=True, check=True,
                                     env=env).stdout)
    assert str(site) not in bare["path"] and bare["prefix"] != str(tmp_path / "v")


USER_SITE = "import json, site; print(json.dumps([site.ENABLE_USER_SITE, site.USER_BASE, site.USER_SITE]))"


@pytest.mark.parametrize("which", ["venv", "no-venv"])
def test_the_rebuild_leaves_the_user_site_settings_site_leaves(tmp_path, which):
    """fix's pip install runs under -S: pip falls back to a --user install (a python that is no venv, whose
    site-packages it cannot write) only when site.ENABLE_USER_SITE is true, which site.main() sets and -S leaves None:
    pip then wrote into the system's site-packages and failed. The rebuild sets it, USER_BASE and USER_SITE as site."""
    python = sys.executable if which == "venv" else os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("PYTHONNOUSERSITE", None)
    env.pop("PYTHONUSERBASE", None)
    with_site = subprocess.run([python, "-c", USER_SITE], capture_output=True, text=True, env=env, check=True, timeout=60)
    rebuilt = f"import sys; sys.path.insert(1, {str(SHARED)!r}); import probe_site; probe_site.rebuild(); {USER_SITE}"
    without = subprocess.run([python, "-S", "-B", "-X", early.SITE_XOPTION, "-c", rebuilt], capture_output=True, text=True, env=env,
                             check=True, timeout=60)
    assert json.loads(without.stdout) == json.loads(with_site.stdout), (with_site.stdout, without.stdout)
    assert json.loads(with_site.stdout)[0] is (which == "no-venv")  # both cases are told apart
