"""`fix` on more environments made the ordinary way: a venv with a `pip install --target DIR` copy on PYTHONPATH,
a dist whose METADATA is not UTF-8, a package conda installed, and a target whose `.pth` runs code while the
journal's wheels are fetched. Each test failed on the code before its fix (docs/evidence/revenvs-2026-11-30.md)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from sparkdoctor.fix.installers import PipInstaller
from sparkdoctor.fix.inventory import Inventory
from sparkdoctor.targets.local import PythonTarget
from tests.fix import scenario
from tests.fix.scenario import as_json, fix_cli

pytestmark = pytest.mark.slow
OFFLINE = {"PIP_NO_INDEX": "1", "UV_OFFLINE": "1"}


def _site(python: Path) -> Path:
    return next(python.parent.parent.glob("lib/python*/site-packages"))


def test_a_copy_on_pythonpath_ahead_of_the_venv_is_refused_in_the_plan(tmp_path, wheels):
    """`pip install --target DIR six==1.16.0` and PYTHONPATH=DIR: pip leaves a copy outside the venv ("outside
    environment") and installs 1.17.0 into site-packages, behind it. The apply failed ("six is 1.16.0, the plan said
    1.17.0") and its rollback said "nothing changed (... verified identical)" while six 1.17.0 stayed in site-packages.
    The plan refuses now (exit 4), nothing done."""
    python = scenario.make_target(tmp_path, "pip", wheels)
    site, outside = _site(python), tmp_path / "target-dir"
    outside.mkdir()
    for name in ("six.py", "six-1.16.0.dist-info"):
        shutil.move(str(site / name), str(outside / name))
    before = sorted(os.listdir(site))
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "PYTHONPATH": str(outside), "PIP_FIND_LINKS": str(wheels), **OFFLINE}
    res = fix_cli(python, "--yes", "--format", "json", env=env)
    assert res.returncode == 4, res.stdout + res.stderr
    refusals = " ".join(as_json(res)["plan"]["refusals"])
    assert f"six is imported from {outside}" in refusals and "pip install --target" in refusals, refusals
    assert sorted(os.listdir(site)) == before, "nothing was installed"


def test_a_dist_whose_metadata_is_not_utf8_is_named_by_what_stops_the_plan(tmp_path, wheels):
    """check lists it under "could not observe"; fix's inventory probe died on it (exit 3, "the target could not be
    probed"). It is left out of the inventory as check leaves it out; pip's own dry run then stops on it, and the
    line quoted pip's "ERROR: Exception:" alone: it says what pip stopped on now (exit 6, nothing changed)."""
    python = scenario.make_target(tmp_path, "pip", wheels)
    (_site(python) / "typing_extensions-4.12.2.dist-info" / "METADATA").write_bytes(b"\x00\xff not UTF-8\n")
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "PIP_FIND_LINKS": str(wheels), **OFFLINE}
    res = fix_cli(python, "--format", "json", env=env)
    message = as_json(res)["errors"][0]["message"]
    assert res.returncode == 6, res.stdout + res.stderr
    assert "pip stopped on an error of its own: UnicodeDecodeError" in message and "nothing was changed" in message, message


def test_a_package_conda_installed_is_not_replaced_without_allow_replace(tmp_path, wheels):
    """A conda environment's packages carry INSTALLER `conda` (conda-meta/ keeps conda's own record). pip replaced
    such a six with the registry's wheel and said nothing; conda's record then named a version no longer there."""
    python = scenario.make_target(tmp_path, "pip", wheels)
    (_site(python) / "six-1.16.0.dist-info" / "INSTALLER").write_text("conda\n")
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "PIP_FIND_LINKS": str(wheels), **OFFLINE}
    res = fix_cli(python, "--yes", "--format", "json", env=env)
    refusals = " ".join(as_json(res)["plan"]["refusals"])
    assert res.returncode == 4 and "six 1.16.0 came from conda" in refusals and "--allow-replace six" in refusals, res.stdout
    assert (_site(python) / "six-1.16.0.dist-info" / "INSTALLER").read_text() == "conda\n", "nothing was changed"


def test_fetching_the_journals_wheels_runs_no_package_code(tmp_path, wheels, monkeypatch):
    """Before the first change `fix --yes` fetches the wheels of what it replaces (the rollback's copies). That pip
    ran with site: the target's .pth import lines and sitecustomize.py ran, though only the install itself runs pip so."""
    python = scenario.make_target(tmp_path, "pip", wheels)
    site, markers = _site(python), tmp_path / "markers"
    markers.mkdir()
    (site / "zz_evil.pth").write_text(f"import os; open(os.path.join({str(markers)!r}, 'PTH_%d' % os.getpid()), 'w').close()\n")
    (site / "sitecustomize.py").write_text(f"import os\nopen(os.path.join({str(markers)!r}, 'SC_%d' % os.getpid()), 'w').close()\n")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    inventory = Inventory(python=str(python), is_venv=True, has_pip=True, writable=True, purelib=str(site),
                          version="{}.{}".format(*sys.version_info[:2]), dists={})
    dest = tmp_path / "dest"
    dest.mkdir()
    got = PipInstaller(PythonTarget(str(python), "--python"), inventory).download(["six==1.16.0"], str(dest))
    assert got["six"] and (dest / got["six"]).is_file(), got
    assert sorted(os.listdir(markers)) == []


def test_a_venv_whose_pip_predates_dry_run_reports_is_planned_and_predicted(tmp_path, wheels):
    """Ubuntu 22.04's `python3 -m venv` brings pip 22.0.2, which has no `install --dry-run --report` (pip 22.2):
    `fix` stopped with "pip dry run of six==1.17.0 failed: no such option: --dry-run" (exit 6) and `whatif` with
    "cannot be resolved ... no such option: --dry-run". sparkdoctor's own pip resolves now, run by the target's
    interpreter without site; the install itself is still the target's pip."""
    python = scenario.make_target(tmp_path, "pip", wheels)
    scenario.must([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index", "--find-links",
                   str(wheels), "pip==22.0.2"])
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "PIP_FIND_LINKS": str(wheels), **OFFLINE}
    res = fix_cli(python, "--format", "json", env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    assert as_json(res)["plan"]["changes"]["six"] == ["1.16.0", "1.17.0"], res.stdout
    what = scenario.run([sys.executable, "-m", "sparkdoctor", "whatif", "six==1.17.0", "--python", str(python), "--format", "json"],
                        env=env)
    assert what.returncode in (0, 1), what.stdout + what.stderr
    assert "no such option" not in what.stdout + what.stderr


@pytest.mark.parametrize("damage", [b"\xff\xfe not UTF-8,,\n", b'"' + b"x" * 200_000 + b'",,\n'], ids=["not-utf8", "huge-field"])
def test_a_record_that_is_no_utf8_or_no_csv_does_not_stop_the_apply(tmp_path, wheels, damage):
    """A RECORD pip cannot have written (bytes that are not UTF-8; a field past csv's limit) in a dist no plan names:
    `fix --yes` ended with exit 5, "cannot read the files outside the plan: probe target_stat.py ... python exited 1:
    UnicodeDecodeError", though nothing had been changed. The files the listing names are not watched, as
    target_dists.py leaves such a dist out. Run here as fix runs it (the stat before the apply)."""
    python = scenario.make_target(tmp_path, "pip", wheels)
    site = _site(python)
    record = site / "typing_extensions-4.12.2.dist-info" / "RECORD"
    record.write_bytes(record.read_bytes() + damage)
    script = Path(__file__).parents[2] / "sparkdoctor" / "fix" / "target_stat.py"
    res = scenario.must([str(python), "-S", "-B", "-X", f"sparkdoctor_site={Path(__file__).parents[2] / 'probes' / 'shared'}",
                         str(script), "stat", "--skip", "six"])
    stat = json.loads(res.stdout.splitlines()[-1])["stat"]
    assert str(site / "idna" / "core.py") in stat and str(site / "typing_extensions.py") not in stat, sorted(stat)[:5]


@pytest.mark.parametrize("record", ["missing", "empty"])
def test_a_dist_info_without_record_rows_is_refused_before_pip_touches_it(tmp_path, wheels, record):
    """six's RECORD missing: pip stopped ("Cannot uninstall six 1.16.0, RECORD file not found"), the rollback stopped
    the same way (exit 5), and check then failed on `fix-unfinished` for an environment nothing had changed. RECORD
    empty: pip removed nothing, wrote six 1.17.0 beside it, and the rollback said "nothing changed (... verified
    identical)" with six.py at 1.17.0 and two dist-info folders. Refused in the plan now (exit 4), with a remedy that
    works."""
    python = scenario.make_target(tmp_path, "pip", wheels)
    site = _site(python)
    rec = site / "six-1.16.0.dist-info" / "RECORD"
    rec.unlink() if record == "missing" else rec.write_text("")
    before = sorted(os.listdir(site)), (site / "six.py").read_bytes()
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "PIP_FIND_LINKS": str(wheels), **OFFLINE}
    res = fix_cli(python, "--yes", "--format", "json", env=env)
    refusals = " ".join(as_json(res)["plan"]["refusals"])
    assert res.returncode == 4 and "six 1.16.0 has no RECORD rows" in refusals, res.stdout + res.stderr
    assert (sorted(os.listdir(site)), (site / "six.py").read_bytes()) == before
    remedy = refusals.split("first (pip's own hint, --force-reinstall, stops the same way): ")[1].split()[:5]
    assert remedy == ["pip", "install", "--ignore-installed", "--no-deps", "six==1.16.0"], remedy
    scenario.must([str(python), "-m", *remedy], env={"PIP_FIND_LINKS": str(wheels), **OFFLINE})
    assert rec.read_text(), "the remedy wrote RECORD again"


def test_a_rollback_of_a_user_site_dist_leaves_no_empty_dist_info_where_pip_writes(tmp_path, wheels):
    """`pip install --user six==1.16.0` into a python that is no venv and has no six of its own; `fix --system --yes`
    (pip moves six to the system's site-packages), then `--rollback`: the journal's wheel was installed where pip
    writes, its files removed again and the user copy put back, but an empty `six-1.16.0.dist-info` folder stayed in
    the system's site-packages ("Verified: ... as before"): pip warned "Skipping ... invalid metadata entry 'name'"
    on every run, and check listed it under "could not observe"."""
    from tests.fix.test_fix_environments import interpreter_at

    python = interpreter_at(tmp_path / "py")
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PIP_FIND_LINKS": str(wheels), "PIP_CONFIG_FILE": "/dev/null", "PYTHONUSERBASE": "",
           "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), **OFFLINE}
    scenario.must([str(python), "-m", "ensurepip"], env=env)
    scenario.must([str(python), "-m", "pip", "install", "-q", "--user", "six==1.16.0"], env=env)
    system = next((tmp_path / "py").glob("lib/python*/site-packages"))
    user = next(home.glob(".local/lib/python*/site-packages"))
    before = {p: sorted(x.name for x in p.iterdir()) for p in (system, user)}
    applied = fix_cli(python, "--system", "--yes", env=env)
    assert applied.returncode == 0 and (system / "six-1.17.0.dist-info").is_dir(), applied.stdout + applied.stderr
    back = fix_cli(None, "--rollback", env=env)
    assert back.returncode == 0, back.stdout + back.stderr
    assert {p: sorted(x.name for x in p.iterdir()) for p in (system, user)} == before
