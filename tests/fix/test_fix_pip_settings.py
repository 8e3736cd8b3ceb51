"""The user's pip settings that change WHERE or WHAT pip installs, in the environment and in pip config files (user and
site), during `fix` and `fix --yes`, on a venv made as users make them (python -m venv --system-site-packages, its pip,
plain pip install), local wheels and local file indexes, no network.

Before: PIP_EXTRA_INDEX_URL naming a second index that serves six 1.17.0 with a build tag had the apply install that
index's six (dependency confusion); `user = true` in the user's pip.conf had pip refuse the plan's install, or install
a new package into ~/.local instead of the venv; PIP_PREFIX was refused. Now fix's pip keeps only the settings that
reach the index (index-url, find-links, cert, ...), sets the others aside, and the plan says which and why, the same in
the plan and in the apply."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from tests.fix import scenario
from tests.fix.scenario import fix_cli
from tests.released_server import build_wheel

pytestmark = pytest.mark.slow

MATRIX = """component = "small"

[[entry]]
id = "small-six-old"
title = "six is older than 1.17"
severity = "error"
action = "fix"
fix = "six-and-decorator"
summary = "A test entry: six below 1.17."
remedy = "pip install six==1.17.0 decorator==5.1.1"
when.packages = { six = "<1.17" }
refs = ["https://pypi.org/project/six/"]
"""
FIX = """schema = 1
id = "six-and-decorator"
title = "Install six 1.17.0 and decorator 5.1.1"
summary = "An exact install: one package to replace, one new."

[[action]]
kind = "install"
requirements = ["six==1.17.0", "decorator==5.1.1"]
"""
SET_ASIDE = ["PIP_EXTRA_INDEX_URL=", "PIP_PREFIX=", "PIP_NO_DEPS=1", "[install] user = true (a pip config file)",
             "[install] pre = true", "[install] upgrade-strategy = eager", "[install] ignore-installed = true"]


def _indexes(root: Path) -> tuple[str, str]:
    """A local PEP 503 index with nothing in it (the index fix may use) and a second one whose six 1.17.0 carries a
    build tag, which pip prefers to the wheel folder's six 1.17.0 of the same version."""
    empty, second = root / "empty" / "simple", root / "second" / "simple"
    empty.mkdir(parents=True)
    (empty / "index.html").write_text("<html><body></body></html>\n")
    (second / "six").mkdir(parents=True)
    wheel = build_wheel(root / "second", "six", "1.17.0", {"six.py": b"SECOND_INDEX = True\n"}, tag="1-py2.py3-none-any")
    (second / "six" / "index.html").write_text(f'<html><body><a href="{wheel.as_uri()}">{wheel.name}</a></body></html>\n')
    return empty.as_uri(), second.as_uri()


def test_only_the_settings_that_reach_the_index_are_kept_and_the_plan_names_the_others(tmp_path, wheels, monkeypatch):
    python = scenario.make_target(tmp_path, "pip", wheels)
    venv = python.parent.parent
    cfg = venv / "pyvenv.cfg"  # as `python -m venv --system-site-packages` writes it: the user site is on sys.path
    cfg.write_text(cfg.read_text().replace("include-system-site-packages = false", "include-system-site-packages = true"))
    site = next(venv.glob("lib/python*/site-packages"))
    home = tmp_path / "home"
    (home / ".config" / "pip").mkdir(parents=True)
    index, second = _indexes(tmp_path / "indexes")
    (home / ".config" / "pip" / "pip.conf").write_text("[install]\nuser = true\npre = true\nupgrade-strategy = eager\n")
    (venv / "pip.conf").write_text("[install]\nignore-installed = true\n")
    data = tmp_path / "data"
    (data / "matrix").mkdir(parents=True)
    (data / "fixes").mkdir()
    (data / "matrix" / "small.toml").write_text(MATRIX)
    (data / "fixes" / "six-and-decorator.toml").write_text(FIX)
    for name in ("PIP_CONFIG_FILE", "PIP_NO_INDEX", "PIP_EXTRA_INDEX_URL", "PIP_USER", "PIP_TARGET", "PIP_REQUIREMENT"):
        monkeypatch.delenv(name, raising=False)
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_CONFIG_DIRS": str(tmp_path / "no-xdg"), "PIP_INDEX_URL": index, "PIP_FIND_LINKS": str(wheels),
           "PIP_EXTRA_INDEX_URL": second, "PIP_PREFIX": str(tmp_path / "prefix"), "PIP_NO_DEPS": "1"}

    planned = fix_cli(python, "--format", "json", env=env, data=data)
    assert planned.returncode == 1, planned.stdout + planned.stderr  # the finding: a plan, nothing changed
    notes = scenario.as_json(planned)["plan"]["notes"]
    (note,) = [n for n in notes if n.startswith("fix's pip runs without these pip settings")]
    for shown in SET_ASIDE:
        assert shown in note, note
    assert "dependency confusion" in note and "(~/.local)" in note, note
    for kept in ("PIP_INDEX_URL", "PIP_FIND_LINKS", "cert"):
        assert kept not in note, note

    applied = fix_cli(python, "--yes", env=env, data=data)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert f"Note: {note}\n" in applied.stdout, applied.stdout  # the apply ran with the settings its plan named
    dists = sorted(p.name for p in site.glob("*.dist-info"))
    assert "six-1.17.0.dist-info" in dists and "decorator-5.1.1.dist-info" in dists, dists
    assert "SECOND_INDEX" not in (site / "six.py").read_text()  # the wheel folder's six, not the second index's
    with zipfile.ZipFile(next(wheels.glob("six-1.17.0-*.whl"))) as zf:
        assert (site / "six.py").read_bytes() == zf.read("six.py")
    assert not list(home.rglob("*.dist-info")), list(home.rglob("*"))  # nothing in ~/.local
    assert not (tmp_path / "prefix").exists()
