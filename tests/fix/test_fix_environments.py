"""`fix` on environments built the ways Spark users build them, each made for real here: a uv venv (no pip in it)
fixed by a sparkdoctor installed where no uv is (`uv tool install`, `pipx`: uv is not beside its python, and not
on a `sudo` PATH); the OS's own python3 (Debian, Ubuntu, DGX OS, a container's), which PEP 668 marks
EXTERNALLY-MANAGED; a `setup.py develop` checkout; a `pip install --user` copy over a non-venv python's own; a dist
without RECORD."""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

import pytest

from sparkdoctor.views.fix import differences
from tests.fix import scenario


def elsewhere(tmp_path: Path) -> Path:
    """A python that runs this checkout's sparkdoctor with no uv beside it (as a `uv tool install` does): a venv
    without pip whose .pth names this checkout and the packages sparkdoctor needs."""
    venv = tmp_path / "tool"
    scenario.must([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "sparkdoctor.pth").write_text(f"{Path(__file__).parents[2]}\n{sysconfig.get_paths()['purelib']}\n")
    return venv / "bin" / "python"


@pytest.mark.slow
def test_a_uv_venv_is_fixed_with_no_uv_on_path(tmp_path, wheels):
    """A uv venv (no pip) is installed into by sparkdoctor's own pip, so no uv is needed: before, with none on PATH, fix
    said "put uv on PATH" (exit 6), and with one, uv ran the target's .pth lines (test_fix_install_no_site.py)."""
    target = scenario.make_target(tmp_path, "uv", wheels)
    before = scenario.state(target, [])
    tool = elsewhere(tmp_path)
    env = {"PATH": scenario.path_without_uv(tmp_path), "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"),
           "PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1"}
    argv = [str(tool), "-m", "sparkdoctor", "fix", "--python", str(target), "--no-kernels", "--matrix", str(scenario.DATA / "matrix"),
            "--fixes", str(scenario.DATA / "fixes")]
    res = scenario.run([*argv, "--yes"], env=env)
    assert res.returncode == 0 and "sparkdoctor's pip" in res.stdout, res.stdout + res.stderr
    assert "six-1.17.0.dist-info" in scenario.state(target, [])["dists"]
    back = scenario.run([str(tool), "-m", "sparkdoctor", "fix", "--rollback"], env=env)
    assert back.returncode == 0, back.stdout + back.stderr
    assert scenario.diff(before, scenario.state(target, [])) == []


@pytest.mark.slow
def test_the_os_python_marked_externally_managed_is_refused_before_anything_even_with_system(tmp_path, wheels):
    """Before: `--system --yes` planned, started, pip refused ('externally-managed-environment'), pip refused the
    reverse too, and fix printed 'Rolled back: DIFFERENCES: ' (empty), a fix-unfinished finding and exit 5. The
    interpreter is one of the test's own, marked as Debian and Ubuntu mark theirs (the machine's python3 may not be)."""
    python = interpreter_at(tmp_path / "py")
    scenario.must([str(python), "-m", "ensurepip"], env={"PIP_NO_INDEX": "1", "PYTHONUSERBASE": str(tmp_path / "user")})
    stdlib = scenario.must([str(python), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"]).stdout.strip()
    assert stdlib.startswith(str(tmp_path)), stdlib  # its own folder of links, never the machine's standard library
    (Path(stdlib) / "EXTERNALLY-MANAGED").unlink(missing_ok=True)  # never written through a link to the OS's own
    (Path(stdlib) / "EXTERNALLY-MANAGED").write_text("[externally-managed]\nError=use a venv\n")
    matrix, fixes = tmp_path / "matrix", tmp_path / "fixes"
    matrix.mkdir()
    fixes.mkdir()
    (matrix / "small.toml").write_text('component = "small"\n\n[[entry]]\nid = "small-pip-here"\ntitle = "t"\nseverity = "error"\n'
                                       'action = "fix"\nfix = "six-exact"\nsummary = "s"\nremedy = "r"\nwhen.packages = { pip = "*" }\n'
                                       'refs = ["https://pypi.org/project/six/"]\n')
    (fixes / "six-exact.toml").write_text('schema = 1\nid = "six-exact"\ntitle = "t"\nsummary = "s"\n\n[[action]]\n'
                                          'kind = "install"\nrequirements = ["six==1.17.0"]\n')
    state = tmp_path / "state"
    env = {"SPARKDOCTOR_STATE_DIR": str(state), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), "PIP_BREAK_SYSTEM_PACKAGES": ""}
    res = scenario.run([sys.executable, "-m", "sparkdoctor", "fix", "--python", str(python), "--no-kernels", "--matrix", str(matrix),
                        "--fixes", str(fixes), "--system", "--yes"], env=env)
    lines = [line for line in res.stderr.splitlines() if line.startswith("sparkdoctor: error:")]
    assert res.returncode == 4, res.stdout + res.stderr
    assert len(lines) == 1 and "EXTERNALLY-MANAGED" in lines[0] and "PIP_BREAK_SYSTEM_PACKAGES=1" in lines[0], res.stderr
    assert not (state / "journals").exists() or not os.listdir(state / "journals")


def test_a_rollback_whose_reverse_failed_says_which_step_never_an_empty_line():
    verified = {"ok": False, "packages_differ": [], "files_differ": [],
                "reverse_errors": ["step 1 (install six==1.17.0): pip uninstall six failed: error: externally-managed-environment"]}
    assert differences(verified) == verified["reverse_errors"][0]
    assert differences({"packages_differ": ["six 1.16.0 -> 1.17.0"], "files_differ": ["six.py"]}) == "six 1.16.0 -> 1.17.0; six.py"


@pytest.mark.slow
def test_a_setup_py_develop_checkout_is_never_replaced_as_its_rollback_could_not_put_it_back(tmp_path, wheels):
    """`python setup.py develop` (old vLLM-from-source guides) leaves six.egg-link and an easy-install.pth line, no
    direct_url.json. Before: the plan took six 1.16.0 for a registry install (no refusal at all); applied, its
    rollback ended 'DIFFERENCES: six: 1.16.0 -> -', exit 5, six gone from the venv."""
    venv = tmp_path / "venv"
    scenario.must([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    if scenario.run([str(python), "-c", "import setuptools"]).returncode != 0:
        pytest.skip("this Python's venv brings no setuptools")
    src = tmp_path / "six-src"
    src.mkdir()
    (src / "setup.py").write_text("from setuptools import setup\nsetup(name='six', version='1.16.0', py_modules=['six'])\n")
    (src / "six.py").write_text("__version__ = '1.16.0'\n")
    scenario.must([str(python), "setup.py", "-q", "develop"], cwd=str(src))
    site = next(venv.glob("lib/python*/site-packages"))
    assert (site / "six.egg-link").is_file()
    before = scenario.state(python, [])
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)}
    res = scenario.fix_cli(python, "--allow-replace", "six", "--yes", env=env)
    lines = [line for line in res.stderr.splitlines() if line.startswith("sparkdoctor: error:")]
    assert res.returncode == 4, res.stdout + res.stderr
    assert len(lines) == 1 and "setup.py develop" in lines[0] and f"pip install -e {src}" in lines[0], res.stderr
    assert scenario.diff(before, scenario.state(python, [])) == []
    assert scenario.must([str(python), "-c", "import six; print(six.__file__)"]).stdout.strip() == str(src / "six.py")


def interpreter_at(root: Path) -> Path:
    """A Python that is no venv, with its own empty site-packages, as a pyenv or container python is: this one's binary
    copied under root/bin (its prefix is found from there) and its standard library linked entry by entry."""
    real = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    lib = root / "lib" / stdlib.name
    lib.mkdir(parents=True)
    for entry in stdlib.iterdir():
        if entry.name not in ("site-packages", "EXTERNALLY-MANAGED"):  # the OS's mark (Debian, Ubuntu) is not linked
            (lib / entry.name).symlink_to(entry)
    (lib / "site-packages").mkdir()
    (root / "bin").mkdir()
    python = root / "bin" / real.name
    scenario.must(["cp", str(real), str(python)])
    assert scenario.must([str(python), "-c", "import sys; print(sys.prefix)"]).stdout.strip() == str(root)
    return python


@pytest.mark.slow
def test_a_user_site_copy_over_the_one_pip_writes_is_refused_before_anything(tmp_path, wheels):
    """`pip install --user six==1.16.0` over a system six 1.17.0 (pyenv, a container's python): the user site's copy is
    the one imported. Before: `fix --system --yes` let pip remove the user copy and write over the system one; the
    rollback put the user copy back and removed the system's, and said '3 packages as before'."""
    python = interpreter_at(tmp_path / "py")
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), "PIP_CONFIG_FILE": "/dev/null",
           "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "PYTHONUSERBASE": ""}
    scenario.must([str(python), "-m", "ensurepip"], env=env)
    scenario.must([str(python), "-m", "pip", "install", "-q", "six==1.17.0"], env=env)
    scenario.must([str(python), "-m", "pip", "install", "-q", "--user", "six==1.16.0"], env=env)
    system = next((tmp_path / "py").glob("lib/python*/site-packages"))
    user = next(home.glob(".local/lib/python*/site-packages"))
    before = {p: sorted(x.name for x in p.iterdir()) for p in (system, user)}
    res = scenario.fix_cli(python, "--system", "--yes", env=env)
    lines = [line for line in res.stderr.splitlines() if line.startswith("sparkdoctor: error:")]
    assert res.returncode == 4, res.stdout + res.stderr
    assert len(lines) == 1 and "six is installed twice" in lines[0] and str(user) in lines[0] and str(system) in lines[0], res.stderr
    assert {p: sorted(x.name for x in p.iterdir()) for p in (system, user)} == before


@pytest.mark.slow
def test_restoring_a_dist_with_no_record_says_why_nothing_is_restored(tmp_path, wheels):
    """A dist-info without RECORD (repackaged, copied by hand, a failed install) whose files were edited. Before: the
    plan named the fix, listed no step and said nothing of why."""
    python = scenario.make_target(tmp_path, "pip", wheels)
    next(python.parent.parent.glob("lib/python*/site-packages/idna-*.dist-info/RECORD")).unlink()
    res = scenario.fix_cli(python, env={"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state")})
    assert "idna 3.7 has no RECORD" in res.stdout and "pip install --ignore-installed --no-deps idna==3.7" in res.stdout, res.stdout + res.stderr


def test_one_folder_by_two_names_is_no_second_copy(tmp_path):
    """Fedora, RHEL, UBI and openSUSE venvs put lib64/pythonX.Y/site-packages (a link to lib's) and lib's on sys.path,
    so every dist is listed twice: the second was taken for a copy shadowed by the first, and every fix was refused
    as "installed twice". The inventory probe run on such a path (lib64 first, as site makes it there)."""
    import json
    import subprocess

    from sparkdoctor.fix.inventory import SCRIPT

    venv = tmp_path / "venv"
    scenario.must([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    site = next(venv.glob("lib/python*/site-packages"))
    info = site / "six-1.16.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: six\nVersion: 1.16.0\n")
    lib64 = venv / "lib64"
    if not lib64.exists():
        lib64.symlink_to("lib")
    twin = lib64 / site.parent.name / "site-packages"
    script = SCRIPT
    code = (f"import runpy, sys; sys.path[:0] = [{str(twin)!r}, {str(site)!r}]; sys.argv = [{str(script)!r}]; "
            f"runpy.run_path({str(script)!r}, run_name='__main__')")
    done = subprocess.run([str(venv / "bin" / "python"), "-S", "-c", code], capture_output=True, text=True, timeout=120)
    six = json.loads(done.stdout.strip().splitlines()[-1])["dists"]["six"]
    assert not six.get("shadows"), six


def test_an_egg_link_in_the_user_site_is_found_where_pip_finds_it(tmp_path, monkeypatch):
    """`setup.py develop --user` (and pip's legacy `install --user -e`) leaves the .egg-link in the user site: missed,
    the checkout was taken for a registry install and replaced, and its rollback could not put it back."""
    import site

    from sparkdoctor.fix import target_dists

    purelib, user, checkout = tmp_path / "site-packages", tmp_path / "user-site", tmp_path / "six-src"
    for folder in (purelib, user, checkout):
        folder.mkdir()
    (user / "six.egg-link").write_text(f"{checkout}\n.\n")
    assert target_dists.egg_link("six", [str(purelib), str(user)]) == str(checkout)
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(user))
    monkeypatch.delenv("PYTHONNOUSERSITE", raising=False)
    monkeypatch.setattr(target_dists, "pyvenv_cfg", lambda: None)
    monkeypatch.setattr(sys, "base_prefix", sys.prefix)  # a system interpreter reads its user site
    assert target_dists.link_folders(str(purelib)) == [str(user), str(purelib)]  # pip looks in the user site first
    monkeypatch.setattr(sys, "base_prefix", "/elsewhere")  # a venv without the system's site-packages does not
    monkeypatch.setattr(target_dists, "pyvenv_cfg", lambda: {"include-system-site-packages": "false"})
    assert target_dists.link_folders(str(purelib)) == [str(purelib)]
    monkeypatch.setattr(target_dists, "pyvenv_cfg", lambda: {"include-system-site-packages": "true"})
    assert target_dists.link_folders(str(purelib)) == [str(purelib), str(user)]


@pytest.mark.slow
def test_a_marked_os_python_without_pip_is_told_to_fix_a_venv_not_to_run_ensurepip(tmp_path, wheels):
    """Ubuntu's python3 without python3-pip (common in containers): fix said to run `-m ensurepip`, which Debian and
    Ubuntu disable for it, and never named the mark that stops pip there anyway."""
    python = interpreter_at(tmp_path / "py")
    stdlib = scenario.must([str(python), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"]).stdout.strip()
    assert stdlib.startswith(str(tmp_path)), stdlib
    (Path(stdlib) / "EXTERNALLY-MANAGED").write_text("[externally-managed]\nError=use a venv\n")
    tool = elsewhere(tmp_path)
    res = scenario.run([str(tool), "-m", "sparkdoctor", "fix", "--python", str(python), "--no-kernels", "--system"],
                       env={"PATH": scenario.path_without_uv(tmp_path), "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"),
                            "PIP_BREAK_SYSTEM_PACKAGES": ""})
    lines = [line for line in res.stderr.splitlines() if line.startswith("sparkdoctor: error:")]
    assert res.returncode == 6, res.stdout + res.stderr
    assert len(lines) == 1 and "EXTERNALLY-MANAGED" in lines[0] and "ensurepip" not in lines[0], res.stderr


@pytest.mark.slow
def test_a_venv_whose_pip_folder_is_gone_but_its_dist_info_stays_is_fixed_by_sparkdoctors_pip(tmp_path, wheels):
    """A venv whose pip/ folder was deleted (by hand, by a cleanup script) but whose pip-*.dist-info stayed counted as
    having pip: fix ran `python -m pip` there and failed with "No module named pip". pip is counted only where its
    package is on disk; otherwise sparkdoctor's own pip installs, as for a venv without pip."""
    import shutil

    target = scenario.make_target(tmp_path, "pip", wheels)
    site = next(target.parents[1].glob("lib/python*/site-packages"))
    shutil.rmtree(site / "pip")
    assert list(site.glob("pip-*.dist-info"))
    before = scenario.state(target, [])
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1"}
    argv = [sys.executable, "-m", "sparkdoctor", "fix", "--python", str(target), "--no-kernels", "--matrix",
            str(scenario.DATA / "matrix"), "--fixes", str(scenario.DATA / "fixes")]
    res = scenario.run([*argv, "--yes"], env=env)
    assert res.returncode == 0 and "sparkdoctor's pip" in res.stdout, res.stdout + res.stderr
    assert "six-1.17.0.dist-info" in scenario.state(target, [])["dists"]
    back = scenario.run([sys.executable, "-m", "sparkdoctor", "fix", "--rollback"], env=env)
    assert back.returncode == 0, back.stdout + back.stderr
    assert scenario.diff(before, scenario.state(target, [])) == []
