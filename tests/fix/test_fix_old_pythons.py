"""`fix` on Python 3.8 and 3.9 targets (pip's distutils-era install schemes, pip 23.0.1 from their ensurepip), made as
their users make them: `python3.8 -m venv` and its pip, or `uv venv --python 3.8` (no pip). Plan, `--yes` and
`--rollback`, with a `.pth` import line and a sitecustomize.py in the target that write a file if they run.

sparkdoctor's own pip installs into a venv without pip, run by the target's interpreter; a pip too new for that
interpreter (pip 26 needs 3.10) stopped on a TypeError of its own ("dataclass() got an unexpected keyword argument
'slots'"); it is now refused before anything runs, in one line that says why and what to do.

The interpreters are pyenv's (present on the machines the suite runs on); local wheels, no network."""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

import pytest

import sparkdoctor
from tests.fix import scenario
from tests.fix.scenario import as_json, fix_cli

pytestmark = pytest.mark.slow

PYENV = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
BASE = ["six==1.16.0", "idna==3.7", "typing_extensions==4.12.2"]


def interpreter(minor: str) -> Path:
    found = sorted(PYENV.glob(f"{minor}.*/bin/python{minor}"))
    if not found:
        pytest.skip(f"no Python {minor} under {PYENV}")
    return found[-1]


def host(tmp_path: Path, wheels: Path, pip: str) -> str:
    """An environment sparkdoctor is installed for whose own pip is `pip` (a version): this interpreter's packages, and
    pip unpacked from its wheel ahead of them (as `pip install -U pip` leaves sparkdoctor's venv)."""
    venv = tmp_path / "host"
    scenario.must([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    site = next(venv.glob("lib/python*/site-packages"))
    with zipfile.ZipFile(next(wheels.glob(f"pip-{pip}-*.whl"))) as whl:
        whl.extractall(site)
    lines = [str(Path(sparkdoctor.__file__).parent.parent), *(p for p in sys.path if p.endswith("site-packages"))]
    (site / "zz_sparkdoctor.pth").write_text("\n".join(lines) + "\n")
    return str(venv / "bin" / "python")


def target(tmp_path: Path, wheels: Path, minor: str, kind: str) -> tuple[Path, Path]:
    """A venv of Python `minor` with BASE, idna/core.py hand-edited, and the canaries; (its python, the markers folder)."""
    venv, base = tmp_path / kind, interpreter(minor)
    python = venv / "bin" / "python"
    offline = ["--no-index", "--find-links", str(wheels), *BASE]
    if kind == "uv":
        scenario.must([scenario.uv(), "venv", "--quiet", "--python", str(base), str(venv)])
        scenario.must([scenario.uv(), "pip", "install", "--quiet", "--link-mode", "copy", "--python", str(python), "--offline", *offline])
    else:
        scenario.must([str(base), "-m", "venv", str(venv)])
        scenario.must([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *offline])
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "idna" / "core.py").write_text((site / "idna" / "core.py").read_text() + "\n# a hand edit\n")
    markers = tmp_path / "markers"
    markers.mkdir()
    (site / "zz_evil.pth").write_text(f"import os; open(os.path.join({str(markers)!r}, 'PTH_%d' % os.getpid()), 'w').close()\n")
    (site / "sitecustomize.py").write_text(f"import os\nopen(os.path.join({str(markers)!r}, 'SC_%d' % os.getpid()), 'w').close()\n")
    return python, markers


def _env(tmp_path: Path, wheels: Path) -> dict[str, str]:
    return {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1",
            "PIP_CONFIG_FILE": os.devnull, "UV_CACHE_DIR": str(tmp_path / "uv-cache")}


@pytest.mark.parametrize(("minor", "kind"), [("3.8", "pip"), ("3.9", "pip"), ("3.8", "uv"), ("3.9", "uv")])
def test_plan_apply_and_rollback_on_python_38_and_39(tmp_path, wheels, minor, kind):
    python, markers = target(tmp_path, wheels, minor, kind)
    env, sd = _env(tmp_path, wheels), host(tmp_path, wheels, "24.0")  # pip 24.0 runs on 3.7 and later
    check = scenario.run([sd, "-m", "sparkdoctor", "check", "--python", str(python), "--no-kernels", "--matrix",
                          str(scenario.DATA / "matrix"), "--format", "json"], env=env)
    assert check.returncode == 1 and "small-six-old" in check.stdout, check.stdout[-2000:] + check.stderr
    before = scenario.state(python, [])
    plan = fix_cli(python, "--format", "json", env=env, host=sd)
    assert plan.returncode == 1, plan.stdout + plan.stderr
    assert as_json(plan)["plan"]["changes"]["six"] == ["1.16.0", "1.17.0"]
    applied = fix_cli(python, "--yes", env=env, host=sd)
    assert applied.returncode == 0 and "Findings gone: small-six-old" in applied.stdout, applied.stdout + applied.stderr
    assert "six-1.17.0.dist-info" in scenario.state(python, [])["dists"]
    back = fix_cli(None, "--rollback", env=env, host=sd)
    assert back.returncode == 0 and "Verified:" in back.stdout, back.stdout + back.stderr
    assert scenario.diff(before, scenario.state(python, [])) == []
    assert sorted(os.listdir(markers)) == [], "fix ran the target's startup code"


@pytest.mark.parametrize("kind", ["uv", "pip-22.0.2"])
def test_a_pip_too_new_for_the_target_is_refused_in_one_line(tmp_path, wheels, kind):
    """A uv venv on 3.9 (no pip), and a 3.9 venv whose pip 22.0.2 cannot dry-run: sparkdoctor's own pip would do it,
    and pip 26.2.1 needs Python 3.10."""
    python, markers = target(tmp_path, wheels, "3.9", "uv" if kind == "uv" else "pip")
    if kind != "uv":
        scenario.must([str(python), "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(wheels), "pip==22.0.2"])
        for made in markers.iterdir():  # that pip ran the canaries: it is this test's, not fix's
            made.unlink()
    env, sd = _env(tmp_path, wheels), host(tmp_path, wheels, "26.2.1")
    before = scenario.state(python, [])
    res = fix_cli(python, "--yes", env=env, host=sd)
    assert res.returncode == 6, res.stdout + res.stderr
    assert "sparkdoctor's own pip 26.2.1 needs Python >=3.10, not 3.9" in res.stderr, res.stderr
    assert "TypeError" not in res.stderr and scenario.diff(before, scenario.state(python, [])) == []
    assert sorted(os.listdir(markers)) == []


def test_whatif_with_a_pip_too_new_for_the_target_says_why_in_one_line(tmp_path, wheels):
    """whatif resolves with sparkdoctor's own pip where the target's is older than 22.2: pip 26.2.1 on 3.9 ended on
    "cannot be resolved in PY: TypeError: dataclass() got an unexpected keyword argument 'slots'"."""
    python, _markers = target(tmp_path, wheels, "3.9", "pip")
    scenario.must([str(python), "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(wheels), "pip==22.0.2"])
    res = scenario.run([host(tmp_path, wheels, "26.2.1"), "-m", "sparkdoctor", "whatif", "--python", str(python), "six==1.17.0"],
                       env=_env(tmp_path, wheels))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "sparkdoctor's own pip 26.2.1 needs Python >=3.10, not 3.9" in res.stderr and "TypeError" not in res.stderr, res.stderr
