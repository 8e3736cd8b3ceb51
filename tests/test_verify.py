"""`sparkdoctor matrix verify`.

Fast: the verify table's schema, the verdict rules, and the command end to end against prepared
environments holding stand-in cutlass builds. verify + slow: the real releases from PyPI (cutlass-dsl
4.4.2 / 4.5.0 base / 4.5.0 cu13 / the cu13-then-base collision / 4.5.1, ptxas 12.8 / 12.9 / 13.0),
in environments kept under the shared test cache so a warm run only probes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sparkdoctor import verify
from sparkdoctor.matrix import MatrixError, load
from sparkdoctor.verify import venvs
from tests.test_cutedsl_probe import (
    COMPILING_CUTE,
    REFUSING_CUTE,
    VERIFY_VENVS,
    fake_venv,
)

REPO = Path(__file__).resolve().parent.parent


def matrix_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "matrix" / "test.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('component = "test"\n' + textwrap.dedent(body))
    return path


def entry(entry_id: str, probe: str, expect: str, verify_table: str) -> str:
    return f"""
        [[entry]]
        id = "{entry_id}"
        title = "t"
        severity = "error"
        action = "fix"
        summary = "s"
        remedy = "r"
        when.gpu_arch = ["sm_121a"]
        verified_by = {{ probe = "{probe}", expect = "{expect}" }}
        refs = ["https://example.org/x"]
        {verify_table}
        """


def specs_of(tmp_path: Path, verify_table: str, probe="cutedsl-nvfp4-mma", expect="refused"):
    return verify.select(load(matrix_file(tmp_path, entry("e1", probe, expect, verify_table))), None)


# ---- the verify table -----------------------------------------------------------------------------


def test_schema_steps_tables_and_arch(tmp_path):
    table = """verify = { arch = "sm_121a", affected = [["nvidia-cutlass-dsl[cu13]==4.5.0", "--force-reinstall --no-deps nvidia-cutlass-dsl-libs-base==4.5.0"]], fixed = [{ steps = ["nvidia-cutlass-dsl==4.5.1"], arch = "sm_120a" }] }"""
    (spec,) = specs_of(tmp_path, table)
    assert spec.probe == "cutedsl-nvfp4-mma" and spec.expect == "refused"
    assert spec.affected[0].steps == (("nvidia-cutlass-dsl[cu13]==4.5.0",), ("--force-reinstall", "--no-deps", "nvidia-cutlass-dsl-libs-base==4.5.0"))
    assert spec.affected[0].arch == "sm_121a"
    assert spec.fixed[0].arch == "sm_120a"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('verify = { affected = [] }', "needs at least one environment"),
        ('verify = { affected = ["nvidia-cutlass-dsl==4.5.0"] }', "must be a non-empty list of pip install steps"),
        ('verify = { affected = [["--index-url https://evil.example/simple nvidia-cutlass-dsl==1"]] }', "uses --index-url"),
        ('verify = { affected = [["x@https://evil.example/x.whl"]] }', "URL requirements are not allowed"),
        ('verify = { affected = [["--no-deps"]] }', "installs nothing"),
        ('verify = { affected = [["nvidia-cutlass-dsl!"]] }', "is not a requirement"),
        ('verify = { affected = [["evil==1"]] }', "evil is not a package a verify probe compiles with"),
        ('verify = { affected = [["--no-binary=:all: nvidia-cutlass-dsl==4.5.0"]] }', "uses --no-binary=:all:"),
        ('verify = { arch = "121a", affected = [["nvidia-cutlass-dsl==1"]] }', "verify.arch"),
        ('verify = { affected = [{ steps = ["nvidia-cutlass-dsl==1"], gpu = "h100" }] }', "unknown key(s): gpu"),
        ('verify = { affected = [["nvidia-cutlass-dsl==1"]], also = 1 }', "unknown key(s): also"),
    ],
)
def test_schema_errors_name_file_entry_and_field(tmp_path, table, message):
    # refused when the matrix is loaded: check, validate and verify share one validation
    with pytest.raises(MatrixError) as err:
        specs_of(tmp_path, table)
    assert message in str(err.value)
    assert "\n" not in str(err.value)
    assert "test.toml: entry e1: field 'verify" in str(err.value)


def test_select_by_id_needs_a_verify_table(tmp_path):
    body = entry("with", "cutedsl-nvfp4-mma", "fail", 'verify = { affected = [["nvidia-cutlass-dsl==1"]] }') + entry("without", "cutedsl-nvfp4-mma", "fail", "")
    m = load(matrix_file(tmp_path, body))
    assert [s.entry.id for s in verify.select(m, None)] == ["with"]
    with pytest.raises(verify.VerifyError, match="field 'verify' is missing"):
        verify.select(m, "without")
    with pytest.raises(verify.VerifyError, match="no matrix entry with id 'nope'"):
        verify.select(m, "nope")


# ---- verdicts ----------------------------------------------------------------------------------------


def run_(role, status, detail="d"):
    return verify.Run(role, verify.Env((("nvidia-cutlass-dsl==1",),), "sm_121a"), status=status, detail=detail)


@pytest.mark.parametrize(
    ("runs", "verdict"),
    [
        ([run_("affected", "fail"), run_("fixed", "ok"), run_("fixed", "refused")], "confirmed"),
        ([run_("affected", "ok"), run_("fixed", "ok")], "contradicted"),
        ([run_("affected", "fail"), run_("fixed", "fail")], "contradicted"),
        ([run_("affected", "fail"), run_("fixed", "error", "pip install nvidia-cutlass-dsl==1 failed")], "error"),
    ],
)
def test_judge(tmp_path, runs, verdict):
    (spec,) = specs_of(tmp_path, 'verify = { affected = [["nvidia-cutlass-dsl==1"]] }', expect="fail")
    got, why = verify.judge(spec, runs)
    assert got == verdict
    if verdict == "contradicted":
        assert "[nvidia-cutlass-dsl==1]" in why


# ---- end to end against prepared environments ---------------------------------------------------------


def prepared(root: Path, tmp_path: Path, step: str, cute_source: str) -> None:
    """Put a ready environment for [step] where verify will look for it."""
    env = verify.Env((verify.parse_step(step, "test"),), "")
    python = fake_venv(tmp_path / step.replace("=", "_"), cute_source)
    target = verify.venv_path(root, env)
    target.parent.mkdir(parents=True, exist_ok=True)
    python.parent.parent.rename(target)
    # the venv's pyvenv.cfg does not depend on its folder name; its .pth points at its own site dir
    site = next(target.glob("lib/python*/site-packages"))
    (site / "nvidia_cutlass_dsl.pth").write_text(str(site / "nvidia_cutlass_dsl" / "python_packages") + "\n")
    (target / verify.READY).write_text(json.dumps([[step]]))


@pytest.fixture
def envs(tmp_path):
    root = tmp_path / "venvs"
    prepared(root, tmp_path, "nvidia-cutlass-dsl==4.4.2", REFUSING_CUTE)
    prepared(root, tmp_path, "nvidia-cutlass-dsl==4.5.1", COMPILING_CUTE)
    return root


TABLE = 'verify = { affected = [["nvidia-cutlass-dsl==4.4.2"]], fixed = [["nvidia-cutlass-dsl==4.5.1"]] }'


def test_verify_confirms_and_keeps_prepared_environments(tmp_path, envs):
    specs = specs_of(tmp_path, TABLE, expect="refused")
    (result,) = verify.verify(specs, root=envs)
    assert result.verdict == "confirmed", result.why
    assert [(r.role, r.status) for r in result.runs] == [("affected", "refused"), ("fixed", "ok")]
    assert result.runs[0].versions["nvidia-cutlass-dsl"] == "4.9.9"
    assert "expects arch to be one of ['sm_120a']" in result.runs[0].detail
    assert verify.exit_code([result]) == 0
    assert len([p for p in envs.iterdir() if p.is_dir()]) == 2  # existed before: not this run's to delete


def test_verify_contradicted_when_the_fixed_version_still_shows_it(tmp_path, envs):
    table = 'verify = { affected = [["nvidia-cutlass-dsl==4.4.2"]], fixed = [["nvidia-cutlass-dsl==4.4.2"]] }'
    (result,) = verify.verify(specs_of(tmp_path, table, expect="refused"), root=envs)
    assert result.verdict == "contradicted"
    assert "fixed [nvidia-cutlass-dsl==4.4.2] still gave refused" in result.why
    assert verify.exit_code([result]) == 1


def test_build_failure_is_an_error_and_fresh_envs_are_removed(tmp_path, envs, monkeypatch):
    def failing_pip(python, step):
        return [sys.executable, "-c", "import sys; sys.stderr.write('ERROR: No matching distribution found for nvidia-cutlass-dsl==0.0.1\\n'); sys.exit(1)"]

    monkeypatch.setattr(venvs, "pip_install", failing_pip)
    table = 'verify = { affected = [["nvidia-cutlass-dsl==0.0.1"]], fixed = [["nvidia-cutlass-dsl==4.5.1"]] }'
    (result,) = verify.verify(specs_of(tmp_path, table, expect="refused"), root=envs)
    assert result.verdict == "error"
    assert result.runs[0].detail == "environment could not be built: pip install nvidia-cutlass-dsl==0.0.1 failed: ERROR: No matching distribution found for nvidia-cutlass-dsl==0.0.1"
    assert not verify.venv_path(envs, verify.Env(((("nvidia-cutlass-dsl==0.0.1"),),), "")).exists()
    assert verify.exit_code([result]) == 2


def test_whether_our_pip_can_install_elsewhere_is_read_without_starting_it(monkeypatch, tmp_path):
    """`python -m pip --version` cost every whatif of a venv without pip 0.4 s of CPU; the dist-info beside the pip
    package that run would import answers the same, and a pip older than 22.3 (no --python) still answers no."""
    import pip

    def no_process(argv, **_):
        raise AssertionError(f"started {argv}")

    monkeypatch.setattr(venvs.proc, "run", no_process)
    monkeypatch.setattr(venvs, "_OWN_PIP", [])
    assert venvs.own_pip() is (tuple(int(x) for x in pip.__version__.split(".")[:2]) >= (22, 3))
    old = tmp_path / "site" / "pip-22.2.2.dist-info"
    old.mkdir(parents=True)
    (old / "METADATA").write_text("Metadata-Version: 2.1\nName: pip\nVersion: 22.2.2\n")
    monkeypatch.setattr(venvs, "_OWN_PIP", [])
    monkeypatch.setattr(venvs, "own_pip_folder", lambda: str(tmp_path / "site"))
    assert venvs.own_pip_version(str(tmp_path / "site")) == (22, 2) and venvs.own_pip() is False


def test_pip_comes_from_sparkdoctor_or_else_from_the_venv(monkeypatch):
    python = Path("/x/venv/bin/python")
    monkeypatch.setattr(venvs, "_OWN_PIP", [True])
    own = [*venvs.bounded_pip(sys.executable, venvs.INSTALL_MEMORY), "--python", str(python)]
    assert venvs.pip_install(python, ("a==1",))[:len(own)] == own
    monkeypatch.setattr(venvs, "_OWN_PIP", [False])
    assert venvs.pip_install(python, ("a==1",))[:len(own) - 2] == venvs.bounded_pip(python, venvs.INSTALL_MEMORY)
    assert venvs.bounded_pip(python)[:2] == [str(python), "-c"] and "RLIMIT_FSIZE" in venvs.bounded_pip(python)[2]
    # a requirement is never an option, and only wheels are installed
    assert venvs.pip_install(python, ("--no-deps", "a==1"))[-5:] == ["install", "--no-deps", "--only-binary=:all:", "--", "a==1"]


def test_unknown_probe_is_refused_at_load_and_an_error_at_run(tmp_path, envs):
    with pytest.raises(MatrixError, match="'no-such-probe', which is no probe"):
        specs_of(tmp_path, TABLE, probe="no-such-probe", expect="fail")
    python = verify.venv_path(envs, verify.Env((verify.parse_step("nvidia-cutlass-dsl==4.4.2", "test"),), "")) / "bin" / "python"
    status, detail, _ = verify.run_probe("no-such-probe", python, "sm_121a")
    assert status == "error" and "unknown probe 'no-such-probe'" in detail


def cli(tmp_path: Path, root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARKDOCTOR_", "CUTE_DSL_"))}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_VERIFY_VENVS=str(root), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="120")
    return subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "verify", *args], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)


def test_cli_json_console_and_exit_codes(tmp_path, envs):
    path = matrix_file(tmp_path, entry("good", "cutedsl-nvfp4-mma", "refused", TABLE) + entry("wrong", "cutedsl-nvfp4-mma", "ok", TABLE))
    done = cli(tmp_path, envs, "good", "--matrix", str(path), "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["summary"] == {"confirmed": 1, "contradicted": 0, "error": 0}
    assert doc["results"][0]["runs"][1]["status"] == "ok"
    done = cli(tmp_path, envs, "--matrix", str(path))
    assert done.returncode == 1
    assert "CONFIRMED    good" in done.stdout and "CONTRADICTED wrong" in done.stdout
    assert "2 entries verified" in done.stdout
    done = cli(tmp_path, envs, "nope", "--matrix", str(path))
    assert done.returncode == 2 and done.stderr.strip() == "sparkdoctor: error: no matrix entry with id 'nope'"
    done = cli(tmp_path, envs, "--matrix", str(path), "--format", "junit")
    assert done.returncode == 2 and "choose one of console, json" in done.stderr


def test_two_verify_modes_are_refused_not_one_silently_dropped():
    """`matrix verify --bounds --stacks` ran the bounds only (found by QA); nothing here reaches a registry."""
    env = {k: v for k, v in os.environ.items() if k != "SPARKDOCTOR_DEBUG"}
    dead = "http://127.0.0.1:9/simple"  # were a mode to run, it must not reach a real registry
    env.update(SPARKDOCTOR_INDEX_URL=dead, PIP_INDEX_URL=dead, UV_INDEX_URL=dead, UV_DEFAULT_INDEX=dead)
    for modes in (["--bounds", "--stacks"], ["--latest", "--bisect", "x"], ["--stacks", "--latest"]):
        done = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "verify", *modes, "--format", "json"],
                              capture_output=True, text=True, timeout=60, env=env, check=False)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "exclude each other" in done.stderr, (modes, done.stderr)
        assert json.loads(done.stdout)["exit_code"] == 2


# ---- the real releases ------------------------------------------------------------------------------------

REAL = """
[[entry]]
id = "t-cutedsl-442-refused"
title = "t"
severity = "warn"
action = "fix"
summary = "s"
remedy = "r"
when.gpu_arch = ["sm_121a"]
verified_by = { probe = "cutedsl-nvfp4-mma", expect = "refused" }
refs = ["https://github.com/NVIDIA/cutlass/issues/3150"]
verify = { affected = [["nvidia-cutlass-dsl==4.4.2"]], fixed = [["nvidia-cutlass-dsl==4.5.1"]] }

[[entry]]
id = "t-cutedsl-450-base-mma"
title = "t"
severity = "error"
action = "fix"
summary = "s"
remedy = "r"
when.gpu_arch = ["sm_121a"]
verified_by = { probe = "cutedsl-nvfp4-mma", expect = "fail" }
refs = ["https://github.com/NVIDIA/cutlass/issues/3227"]
verify.affected = [
  ["nvidia-cutlass-dsl==4.5.0"],
  ["nvidia-cutlass-dsl[cu13]==4.5.0", "--force-reinstall --no-deps nvidia-cutlass-dsl-libs-base==4.5.0"],
]
verify.fixed = [["nvidia-cutlass-dsl[cu13]==4.5.0"], ["nvidia-cutlass-dsl==4.5.1"]]

[[entry]]
id = "t-ptxas-128-no-sm121a"
title = "t"
severity = "error"
action = "fix"
summary = "s"
remedy = "r"
when.gpu_arch = ["sm_121a"]
verified_by = { probe = "e2m1-cvt", expect = "fail" }
refs = ["https://docs.nvidia.com/cuda/parallel-thread-execution/"]
verify = { affected = [["nvidia-cuda-nvcc-cu12==12.8.93"]], fixed = [["nvidia-cuda-nvcc-cu12==12.9.86"]] }

[[entry]]
id = "t-ptxas-13-plain-sm121"
title = "t"
severity = "error"
action = "configure"
summary = "s"
remedy = "r"
when.gpu_arch = ["sm_121a"]
verified_by = { probe = "nvfp4-mma", expect = "fail" }
refs = ["https://docs.nvidia.com/cuda/parallel-thread-execution/"]
verify.affected = [{ steps = ["nvidia-cuda-nvcc==13.0.88"], arch = "sm_121" }]
verify.fixed = [{ steps = ["nvidia-cuda-nvcc==13.0.88"], arch = "sm_121a" }]
"""


@pytest.fixture(scope="module")
def real_results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("verify-real")
    path = tmp / "real.toml"
    path.write_text('component = "test"\n' + REAL)
    started = time.monotonic()
    results = {r.id: r for r in verify.verify(verify.select(load(path), None), root=VERIFY_VENVS, keep=True)}
    sys.stderr.write(f"\nmatrix verify (real releases): {time.monotonic() - started:.1f}s\n")
    return results


def statuses(result) -> list[tuple[str, str, str]]:
    return [(r.role, r.env.label, r.status) for r in result.runs]


@pytest.mark.verify
@pytest.mark.slow
def test_real_cutlass_dsl_442_is_refused(real_results):
    r = real_results["t-cutedsl-442-refused"]
    assert r.verdict == "confirmed", r.why
    assert "['sm_120a']" in r.runs[0].detail
    assert r.runs[1].status == "ok"


@pytest.mark.verify
@pytest.mark.slow
def test_real_cutlass_dsl_450_base_mma_and_the_collision(real_results):
    r = real_results["t-cutedsl-450-base-mma"]
    assert r.verdict == "confirmed", r.why
    assert statuses(r) == [
        ("affected", "nvidia-cutlass-dsl==4.5.0", "fail"),
        ("affected", "nvidia-cutlass-dsl[cu13]==4.5.0 ; --force-reinstall --no-deps nvidia-cutlass-dsl-libs-base==4.5.0", "fail"),
        ("fixed", "nvidia-cutlass-dsl[cu13]==4.5.0", "ok"),
        ("fixed", "nvidia-cutlass-dsl==4.5.1", "ok"),
    ]
    assert all("Unexpected instruction types specified for '_mma'" in run.detail for run in r.runs[:2])
    # pip still lists libs-cu13 in the collision environment, yet the base build's bytes are active
    assert r.runs[1].versions.get("nvidia-cutlass-dsl-libs-cu13") == "4.5.0"
    assert r.runs[1].versions["bundled CUDA"] == "12.9" and r.runs[2].versions["bundled CUDA"] == "13.1"


@pytest.mark.verify
@pytest.mark.slow
def test_real_pip_ptxas_128_rejects_sm121a(real_results):
    r = real_results["t-ptxas-128-no-sm121a"]
    assert r.verdict == "confirmed", r.why
    assert "Value 'sm_121a' is not defined for option 'gpu-name'" in r.runs[0].detail
    assert r.runs[0].versions["ptxas"] == "12.8.93" and r.runs[1].versions["ptxas"] == "12.9.86"


@pytest.mark.verify
@pytest.mark.slow
def test_real_ptxas_13_rejects_fp4_for_plain_sm121(real_results):
    r = real_results["t-ptxas-13-plain-sm121"]
    assert r.verdict == "confirmed", r.why
    assert "not supported on .target 'sm_121'" in r.runs[0].detail
    assert "need sm_121a or sm_121f" in r.runs[0].detail
    assert r.runs[1].status == "ok"


@pytest.mark.verify
@pytest.mark.slow
def test_bundled_matrix_entries_verify():
    """Every shipped entry with a verify table holds against the real releases it names."""
    specs = verify.select(load(), None)
    assert specs, "the bundled matrix has no entry with a verify table"
    started = time.monotonic()
    results = verify.verify(specs, root=VERIFY_VENVS, keep=True)
    sys.stderr.write(f"\nmatrix verify (bundled matrix, {len(specs)} entries): {time.monotonic() - started:.1f}s\n")
    assert {r.id: r.verdict for r in results} == {s.entry.id: "confirmed" for s in specs}, [r.why for r in results if r.verdict != "confirmed"]
