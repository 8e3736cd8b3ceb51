"""The distribution installs THIS project under a name of its own, and the wheel works away from the checkout.

"sparkdoctor" on PyPI is someone else's package (a PySpark linter), so the distribution is
sparkdoctor-gb10 while the command and the import package stay `sparkdoctor`. The slow tests build
the real wheel and install it the way the README says (pipx), from outside the checkout.
"""

import email.parser
import importlib.metadata
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import sparkdoctor
from tests import venvs

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
DISTRIBUTION = "sparkdoctor-gb10"
WHEEL_GLOB = "sparkdoctor_gb10-*-py3-none-any.whl"


def test_pyproject_names_the_distribution_and_reads_the_version_from_the_code():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION
    assert project["scripts"] == {"sparkdoctor": "sparkdoctor.launch:main"}
    assert "version" in project.get("dynamic", []), "one version, in sparkdoctor/__init__.py"


def test_the_installed_distribution_is_this_project():
    """The test venv has the checkout installed: its metadata must answer under the new name."""
    dist = importlib.metadata.distribution(DISTRIBUTION)
    assert dist.version == sparkdoctor.__version__
    [script] = [e for e in dist.entry_points if e.group == "console_scripts"]
    assert (script.name, script.value) == ("sparkdoctor", "sparkdoctor.launch:main")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO), "-w", str(out)],
                   check=True, timeout=300, capture_output=True)
    [built] = out.glob(WHEEL_GLOB)
    return built


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as zf:
        [name] = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(zf.read(name).decode())


@pytest.mark.slow
def test_wheel_metadata_carries_the_free_name(wheel):
    meta = _metadata(wheel)
    assert meta["Name"] == DISTRIBUTION and meta["Version"] == sparkdoctor.__version__
    names = zipfile.ZipFile(wheel).namelist()
    assert f"sparkdoctor_gb10-{sparkdoctor.__version__}.dist-info/entry_points.txt" in names
    assert "sparkdoctor/__init__.py" in names, "the import package keeps its name"


@pytest.mark.slow
def test_wheel_carries_the_sparkrun_plugin_and_its_extra_only_for_python_312(wheel):
    """The extra installs sparkrun only where it can install (Python >= 3.12); the entry point and the manifest
    sparkrun reads beside the module (docs/sparkrun.md) are in the wheel."""
    meta = _metadata(wheel)
    assert "sparkrun" in meta.get_all("Provides-Extra")
    from packaging.requirements import Requirement

    [requirement] = [Requirement(r) for r in meta.get_all("Requires-Dist") if r.startswith("sparkrun")]
    assert requirement.marker is not None and str(requirement.specifier) == "<0.5,>=0.4.2"
    for python, extra, wanted in (("3.12", "sparkrun", True), ("3.11", "sparkrun", False), ("3.12", "", False)):
        assert requirement.marker.evaluate({"python_version": python, "extra": extra}) is wanted, (python, extra)
    with zipfile.ZipFile(wheel) as zf:
        [entry_points] = [n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = zf.read(entry_points).decode()
        assert "[sparkrun.plugins]\nsparkdoctor = sparkdoctor.integrations.sparkrun_plugin" in text, text
        assert b'module = "sparkdoctor.integrations.sparkrun_plugin"' in zf.read("sparkdoctor/integrations/plugin.toml")


def _assert_works_away_from_the_checkout(doctor: Path, python: Path, tmp_path: Path) -> None:
    away = tmp_path / "elsewhere"  # not the checkout: only the wheel's copy can be found
    away.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    version = subprocess.run([str(doctor), "--version"], cwd=away, env=env, capture_output=True, text=True, timeout=60)
    assert version.stdout == f"sparkdoctor {sparkdoctor.__version__}\n", version.stderr
    validate = subprocess.run([str(doctor), "matrix", "validate"], cwd=away, env=env, capture_output=True, text=True, timeout=60)
    assert validate.returncode == 0 and validate.stdout.startswith("ok: "), validate.stderr
    done = subprocess.run([str(doctor), "check", "--no-kernels", "--format", "json"], cwd=away, env=env,
                          capture_output=True, text=True, timeout=120)
    doc = json.loads(done.stdout)
    assert done.returncode == doc["exit_code"] in (0, 1)
    assert doc["facts"]["tool"]["name"] == "sparkdoctor" and doc["facts"]["tool"]["version"] == sparkdoctor.__version__
    packages = doc["facts"]["packages"]
    assert doc["facts"]["target"]["python"] == str(python)
    assert packages[DISTRIBUTION]["version"] == sparkdoctor.__version__ and "sparkdoctor" not in packages


@pytest.mark.slow
def test_installed_wheel_finds_its_matrix_and_probes(wheel, tmp_path):
    names = zipfile.ZipFile(wheel).namelist()
    for folder in ("matrix", "probes", "fixes", "recipes"):
        assert any(n.startswith(f"sparkdoctor/_data/{folder}/") for n in names), folder
    for probe in ("target_env", "cutedsl", "capabilities", "vllm_flags"):
        assert f"sparkdoctor/_data/probes/{probe}/__main__.py" in names
    assert "sparkdoctor/_data/probes/shared/probe_io.py" in names

    python = venvs.create(tmp_path / "venv", [str(wheel)])
    _assert_works_away_from_the_checkout(python.parent / "sparkdoctor", python, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("source, backend", [("wheel", "pip"), ("checkout", "uv"), ("git", "pip")])
def test_pipx_install_gives_a_working_command(wheel, tmp_path, source, backend):
    """The README's lines `pipx install /path/to/sparkdoctor_gb10-*.whl`, `pipx install ./` and
    `pipx install git+URL` (here a file URL of this checkout's HEAD), in a private PIPX_HOME, with both of
    pipx's installers."""
    home = tmp_path / "pipx"
    env = {**os.environ, "HOME": str(tmp_path), "PIPX_HOME": str(home), "PIPX_BIN_DIR": str(tmp_path / "bin"),
           "PIPX_MAN_DIR": str(tmp_path / "man"), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    spec = {"wheel": str(wheel), "checkout": "./", "git": f"git+file://{REPO}"}[source]
    done = subprocess.run([sys.executable, "-m", "pipx", "install", "--backend", backend, spec], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    doctor = tmp_path / "bin" / "sparkdoctor"
    assert doctor.resolve() == home / "venvs" / DISTRIBUTION / "bin" / "sparkdoctor"
    _assert_works_away_from_the_checkout(doctor, home / "venvs" / DISTRIBUTION / "bin" / "python", tmp_path)


# ---- .ci/run ----------------------------------------------------------------------------------------------------
CI_RUN = REPO / ".ci" / "run"


def test_ci_runs_the_readme_test_command():
    """.ci/run is what the README tells a person to run, word for word (plus keeping pytest's exit code)."""
    readme = (REPO / "README.md").read_text()
    [command] = [line for line in readme.splitlines() if line.startswith("python3 -m venv .venv") and "pytest" in line]
    assert f"{command} || rc=$?" in CI_RUN.read_text().splitlines()


def _checkout_with_tests(tmp_path: Path, test_source: str | None) -> tuple[Path, Path]:
    """A checkout holding a copy of .ci/run, where `python3 -m venv` and `pip install` are stand-ins (the install is
    not what is tested) and .venv/bin/python is this interpreter: real bash, real pytest on real test files."""
    repo = tmp_path / "checkout"
    (repo / ".ci").mkdir(parents=True)
    (repo / ".ci" / "run").write_bytes(CI_RUN.read_bytes())
    (repo / ".ci" / "run").chmod(0o755)
    (repo / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    (repo / "tests").mkdir()
    if test_source is not None:
        (repo / "tests" / "test_one.py").write_text(test_source)
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    venv_bin = repo / ".venv" / "bin"
    (stubs / "python3").write_text(f'#!/bin/sh\nmkdir -p "{venv_bin}"\n')
    venv_bin.mkdir(parents=True)
    (venv_bin / "pip").write_text("#!/bin/sh\nexit 0\n")
    for gate in ("ruff", "mypy", "lint-imports", "vulture"):  # the gates pass here: what is tested is pytest's exit code
        (venv_bin / gate).write_text("#!/bin/sh\nexit 0\n")
        (venv_bin / gate).chmod(0o755)
    (venv_bin / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for stub in (stubs / "python3", venv_bin / "pip", venv_bin / "python"):
        stub.chmod(0o755)
    return repo, stubs


@pytest.mark.parametrize("test_source, code", [
    (None, 5),
    ("def test_fails():\n    assert False\n", 1),
    ("def test_passes():\n    pass\n", 0),
], ids=["no-tests", "failing", "passing"])
def test_ci_run_passes_pytest_exit_code_and_names_an_empty_run(tmp_path, test_source, code):
    repo, stubs = _checkout_with_tests(tmp_path, test_source)
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}"}
    done = subprocess.run([str(repo / ".ci" / "run")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == code, done.stdout[-2000:] + done.stderr[-2000:]
    said = ".ci/run: error: pytest collected no tests (exit 5): nothing was tested\n"
    assert (said in done.stderr) == (code == 5), done.stderr
