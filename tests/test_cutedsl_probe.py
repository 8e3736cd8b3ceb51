"""The CuTe DSL compile probe and its collector.

Fast: the probe's classification of real error texts, and the collector end to end through real
subprocesses against stand-in `cutlass` packages (one that segfaults, one that hangs, one that
refuses the arch, one that compiles), including the cache. Slow: the real nvidia-cutlass-dsl
releases, in the scratch environments that `matrix verify` builds (shared with tests/test_verify.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sparkdoctor.collect import Context
from sparkdoctor.collect import cutedsl
from sparkdoctor.facts import Facts
from sparkdoctor.target import PythonTarget
from tests.venvs import ROOT as TEST_VENVS

PROBE = Path(__file__).resolve().parents[1] / "probes" / "cutedsl_probe.py"
VERIFY_VENVS = TEST_VENVS / "verify"
MMA_PTX = "mma.sync.aligned.kind::mxf4nvf4.block_scale.scale_vec::4X.m16n8k64.row.col.f32.e2m1.e2m1.f32.ue4m3"
CVT_PTX = "cvt.rn.satfinite.e2m1x2.f32"


def load_probe():
    spec = importlib.util.spec_from_file_location("sd_cutedsl_probe", PROBE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---- stand-in cutlass packages ---------------------------------------------------------------------

REFUSING_CUTE = """\
    class _Refuse:
        def __getattr__(self, name):
            raise RuntimeError("OpError: expects arch to be one of ['sm_120a'], but got Arch.sm_121a")

    nvgpu = _Refuse()
    """

# Compiles anything: every DSL call returns a stub; compile() hands back PTX holding both instructions.
COMPILING_CUTE = """\
    import types

    class _Stub:
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return _Stub()

        def __call__(self, *args, **kwargs):
            return _Stub()

    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub()

    def kernel(fn):
        return fn

    jit = kernel

    def compile(fn, *args, **kwargs):
        ptx = "\\t%s;\\n\\t%s ;\\n" % ("{MMA}", "{CVT}")
        return types.SimpleNamespace(__ptx__=ptx, __cubin__=b"cubin")
    """.replace("{MMA}", MMA_PTX + " {%f1}, {%r1}").replace("{CVT}", CVT_PTX + " %rs1, %f2, %f3")

SEGFAULT_CUTE = "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"
HANGING_CUTE = "import time\ntime.sleep(600)\n"


def fake_cutlass(root: Path, cute_source: str, version: str = "4.9.9") -> Path:
    """A site dir with an nvidia-cutlass-dsl dist-info, a `cutlass` package and a _cutlass_ir .so."""
    site = root / "site"
    info = site / f"nvidia_cutlass_dsl-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: nvidia-cutlass-dsl\nVersion: {version}\n")
    pkgs = site / "nvidia_cutlass_dsl" / "python_packages"
    (pkgs / "cutlass" / "cute").mkdir(parents=True)
    # cutlass.X resolves through cutlass.cute (where each stand-in decides what exists)
    (pkgs / "cutlass" / "__init__.py").write_text("def __getattr__(name):\n    import cutlass.cute as c\n    return getattr(c, name)\n")
    (pkgs / "cutlass" / "cute" / "__init__.py").write_text(textwrap.dedent(cute_source))
    libs = pkgs / "cutlass" / "_mlir" / "_mlir_libs"
    libs.mkdir(parents=True)
    (libs / "_cutlass_ir.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF compiler")
    (site / "nvidia_cutlass_dsl.pth").write_text(str(pkgs) + "\n")
    return site


def fake_venv(root: Path, cute_source: str) -> Path:
    """A real (pip-less) venv whose site-packages holds a stand-in cutlass; returns its python."""
    import subprocess

    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next(venv.glob("lib/python*/site-packages"))
    staged = fake_cutlass(root / "stage", cute_source)
    for item in staged.iterdir():
        item.rename(site / item.name)
    pth = site / "nvidia_cutlass_dsl.pth"
    pth.write_text(str(site / "nvidia_cutlass_dsl" / "python_packages") + "\n")
    return venv / "bin" / "python"


def ctx_for(site: Path | None, tmp_path: Path, monkeypatch, packages: dict | None = "auto") -> Context:
    if site is not None:
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(site / "nvidia_cutlass_dsl" / "python_packages")]))
    if packages == "auto":
        packages = {"nvidia-cutlass-dsl": {"name": "nvidia-cutlass-dsl", "version": "4.9.9", "location": str(site)}}
    facts = Facts(packages=packages, cutedsl={"active_build": "libs-base"})
    return Context(target=PythonTarget(sys.executable, "test"), facts=facts, cache_dir=tmp_path / "cache")


# ---- the probe's classification -------------------------------------------------------------------


def chain(*excs: BaseException) -> BaseException:
    """Raise excs[0] from excs[1] from ..., the way the DSL wraps its errors."""
    for outer, inner in zip(excs, excs[1:]):
        outer.__cause__ = inner
    return excs[0]


def classify(exc: BaseException, kernel="nvfp4-mma", dump_dir: Path | None = None) -> dict:
    mod = load_probe()
    result = {"kernel": kernel, "status": "error", "detail": "", "admissible_archs": None, "instruction": None}
    mod.classify_exception(result, exc, kernel, str(dump_dir or "/nonexistent"))
    return result


def test_refused_442_message():
    r = classify(RuntimeError("OpError: expects arch to be one of ['sm_120a'], but got Arch.sm_121a\nsuggestion: Ensure env CUTE_DSL_ARCH"))
    assert r["status"] == "refused"
    assert r["admissible_archs"] == ["sm_120a"]
    assert r["detail"] == "the DSL expects arch to be one of ['sm_120a'], but got sm_121a"


def test_refused_48_message_with_enum_reprs_and_colour():
    text = "\x1b[91mexpects arch to be one of [base_dsl.Arch.sm_120a, base_dsl.Arch.sm_120f, base_dsl.Arch.sm_121a, base_dsl.Arch.sm_121f], but got sm_100a\x1b[0m"
    r = classify(chain(RuntimeError("DSLRuntimeError: ICE"), ValueError(text)))
    assert r["status"] == "refused"
    assert r["admissible_archs"] == ["sm_120a", "sm_120f", "sm_121a", "sm_121f"]
    assert r["detail"].endswith("but got sm_100a")


def test_ptxas_rejection_is_fail_and_keeps_the_ptx_instruction(tmp_path):
    (tmp_path / "launch.sm_121a.ptx").write_text("\t_mma.block_scale.scale_vec::4X.m16n8k64.row.col.f32.e2m1.e2m1.f32.ue4m3 {%f1};\n\x00")
    text = "error: unknown: NVPTX compiler invocation failed, error log: ptxas application ptx input, line 66; error   : Unexpected instruction types specified for '_mma'"
    r = classify(chain(RuntimeError("DSLRuntimeError: compile failed"), RuntimeError(text)), dump_dir=tmp_path)
    assert r["status"] == "fail"
    assert r["detail"] == "ptxas application ptx input, line 66; error : Unexpected instruction types specified for '_mma'"
    assert r["instruction"].startswith("_mma.block_scale.scale_vec::4X")


def test_missing_libcuda_after_codegen_is_an_honest_error(tmp_path):
    (tmp_path / "k.sm_121a.ptx").write_text(f"\t{CVT_PTX} %rs1, %f1, %f2;\n")
    (tmp_path / "k.sm_121a.cubin").write_bytes(b"\x7fELF")
    cause = RuntimeError("CudaDriverDependencyError: CUDA Driver Dependency Error\n\u2022 The libcuda.so.1 library is not accessible")
    r = classify(chain(RuntimeError("DSLRuntimeError: \U0001f9ca ICE \U0001f9ca"), cause), kernel="e2m1-cvt", dump_dir=tmp_path)
    assert r["status"] == "error"
    assert r["ptx"] is True and r["cubin"] is True and r["instruction"] == CVT_PTX
    assert r["detail"].startswith(f"code generation produced PTX and cubin (PTX has {CVT_PTX}), but the step after it needs libcuda")
    assert r["detail"].endswith("The libcuda.so.1 library is not accessible")


def test_other_errors_name_the_informative_line():
    text = "\x1b[91m[Error] MLIRError: Verification failed:\x1b[0m\nerror: unknown: 'cute.gemm' op expects all operands to have the same rank"
    r = classify(RuntimeError(text))
    assert r["status"] == "error"
    assert r["detail"] == "RuntimeError: error: unknown: 'cute.gemm' op expects all operands to have the same rank"


def test_probe_is_python38_syntax():
    import ast

    ast.parse(PROBE.read_text(), feature_version=(3, 8))


# ---- the collector through real subprocesses --------------------------------------------------------


def test_compiler_segfault_is_a_crash_for_each_kernel_and_is_cached(tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, SEGFAULT_CUTE)
    ctx = ctx_for(site, tmp_path, monkeypatch)
    kernels = cutedsl.run(ctx)["kernels"]
    assert set(kernels) == {"cutedsl-nvfp4-mma", "cutedsl-e2m1-cvt"}
    for k in kernels.values():
        assert k["status"] == "crash"
        assert k["detail"].startswith("the CuTe DSL compiler was killed by SIGSEGV")
        assert k["kind"] == "cutedsl" and k["arch"] == "sm_121a" and k["build"] == "libs-base" and k["cached"] is False
        assert k["version"] == "4.9.9" and k["runs"] == []
    again = cutedsl.run(ctx)["kernels"]
    assert all(k["cached"] and k["status"] == "crash" for k in again.values())


def test_arch_comes_from_facts_and_a_refusal_reports_the_admissible_list(tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, REFUSING_CUTE)
    ctx = ctx_for(site, tmp_path, monkeypatch)
    ctx.facts.arch = {"value": "sm_121a", "source": "given"}
    mma = cutedsl.run(ctx)["kernels"]["cutedsl-nvfp4-mma"]
    assert mma["status"] == "refused" and mma["admissible_archs"] == ["sm_120a"]


def test_ok_result_names_the_instruction_and_cache_follows_the_compiler_library(tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, COMPILING_CUTE)
    ctx = ctx_for(site, tmp_path, monkeypatch)
    first = cutedsl.run(ctx)["kernels"]
    assert first["cutedsl-nvfp4-mma"]["status"] == "ok"
    assert first["cutedsl-nvfp4-mma"]["instruction"] == MMA_PTX
    assert first["cutedsl-e2m1-cvt"]["instruction"] == CVT_PTX
    assert not first["cutedsl-nvfp4-mma"]["cached"]
    assert all(k["cached"] for k in cutedsl.run(ctx)["kernels"].values())
    # Another library build on disk (a force-reinstall swaps the .so): never answer from the cache.
    so = next(site.rglob("_cutlass_ir*.so"))
    so.write_bytes(b"\x7fELF another build")
    os.utime(so, ns=(time.time_ns(), time.time_ns() + 10_000_000))
    assert not any(k["cached"] for k in cutedsl.run(ctx)["kernels"].values())
    # The arch is part of the key too.
    ctx.facts.arch = {"value": "sm_120a", "source": "given"}
    assert not any(k["cached"] for k in cutedsl.run(ctx)["kernels"].values())


def test_corrupt_cache_entries_are_ignored(tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, COMPILING_CUTE)
    ctx = ctx_for(site, tmp_path, monkeypatch)
    cutedsl.run(ctx)
    entries = list((tmp_path / "cache" / "cutedsl").glob("*.json"))
    assert len(entries) == 2
    entries[0].write_text("{broken")
    data = json.loads(entries[1].read_text())
    data["result"]["status"] = "maybe"  # not a settled outcome: must not be served
    entries[1].write_text(json.dumps(data))
    again = cutedsl.run(ctx)["kernels"]
    assert not any(k["cached"] for k in again.values())
    assert all(k["status"] == "ok" for k in again.values())


def test_hang_is_an_error_and_never_cached(tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, HANGING_CUTE)
    ctx = ctx_for(site, tmp_path, monkeypatch)
    monkeypatch.setattr(cutedsl, "COMPILE_TIMEOUT", 2.0)
    started = time.monotonic()
    kernels = cutedsl.run(ctx)["kernels"]
    assert time.monotonic() - started < 10  # both kernels at once, each killed at the deadline
    for k in kernels.values():
        assert k["status"] == "error" and "timed out" in k["detail"]
    assert not list((tmp_path / "cache" / "cutedsl").glob("*.json"))


def test_import_failure_is_an_error(tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, "raise ImportError('libcutlass_ir.so: cannot open shared object file')\n")
    kernels = cutedsl.run(ctx_for(site, tmp_path, monkeypatch))["kernels"]
    assert kernels["cutedsl-nvfp4-mma"]["status"] == "error"
    assert "import cutlass.cute failed: ImportError: libcutlass_ir.so" in kernels["cutedsl-nvfp4-mma"]["detail"]


def test_skipped_without_cutlass_dsl(tmp_path, monkeypatch):
    ctx = ctx_for(None, tmp_path, monkeypatch, packages={"torch": {"version": "2.9.0"}})
    kernels = cutedsl.run(ctx)["kernels"]
    assert {k["status"] for k in kernels.values()} == {"skipped"}
    assert kernels["cutedsl-nvfp4-mma"]["detail"] == "nvidia-cutlass-dsl not installed"


def test_unknown_package_list_lets_the_probe_tell(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "empty"))
    ctx = ctx_for(None, tmp_path, monkeypatch, packages=None)
    kernels = cutedsl.run(ctx)["kernels"]
    assert {k["status"] for k in kernels.values()} == {"skipped"}  # the probe saw no nvidia-cutlass-dsl dist
    assert not (tmp_path / "cache" / "cutedsl").exists()  # unknown install: nothing to key a cache on


def test_probe_isolated_mode_reports_each_kernel(tmp_path):
    import subprocess

    python = fake_venv(tmp_path, SEGFAULT_CUTE)
    done = subprocess.run([str(python), "-B", str(PROBE), "--arch", "sm_121a"], capture_output=True, text=True, timeout=120)
    lines = [json.loads(x) for x in done.stdout.splitlines()]
    assert [x["kernel"] for x in lines] == ["nvfp4-mma", "e2m1-cvt"]
    assert all(x["status"] == "crash" and x["version"] == "4.9.9" for x in lines)


# ---- the real releases (environments shared with `matrix verify` tests) ------------------------------


def real_env(*steps: str) -> Path:
    from sparkdoctor import verify

    env = verify.Env(tuple(verify._step(s, "test") for s in steps), "sm_121a")
    python, _ = verify.ensure_venv(VERIFY_VENVS, env)
    return python


def probe_in(python: Path, arch: str = "sm_121a") -> dict[str, dict]:
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUTE_DSL_", "PYTHONPATH"))}
    done = subprocess.run([str(python), "-B", str(PROBE), "--arch", arch], capture_output=True, text=True, timeout=300, env=env)
    return {x["kernel"]: x for x in map(json.loads, done.stdout.splitlines())}


@pytest.mark.slow
def test_real_442_refuses_sm121a_and_needs_libcuda_after_codegen():
    out = probe_in(real_env("nvidia-cutlass-dsl==4.4.2"))
    assert out["nvfp4-mma"]["status"] == "refused" and out["nvfp4-mma"]["admissible_archs"] == ["sm_120a"]
    cvt = out["e2m1-cvt"]
    assert cvt["status"] == "error" and cvt["ptx"] and cvt["cubin"] and cvt["instruction"] == CVT_PTX
    assert "libcuda" in cvt["detail"]
    assert out["nvfp4-mma"]["version"] == "4.4.2" and out["nvfp4-mma"]["bundled_cuda"] == "12.9"


@pytest.mark.slow
def test_real_450_base_fails_in_ptxas_and_cu13_compiles():
    base = probe_in(real_env("nvidia-cutlass-dsl==4.5.0"))
    assert base["nvfp4-mma"]["status"] == "fail"
    assert "Unexpected instruction types specified for '_mma'" in base["nvfp4-mma"]["detail"]
    assert base["nvfp4-mma"]["instruction"].startswith("_mma.block_scale")
    assert base["e2m1-cvt"]["status"] == "ok"
    cu13 = probe_in(real_env("nvidia-cutlass-dsl[cu13]==4.5.0"))
    assert cu13["nvfp4-mma"]["status"] == "ok" and "kind::mxf4nvf4" in cu13["nvfp4-mma"]["instruction"]
    assert cu13["nvfp4-mma"]["bundled_cuda"] == "13.1"


@pytest.mark.slow
def test_real_451_compiles_and_refuses_plain_sm121():
    python = real_env("nvidia-cutlass-dsl==4.5.1")
    out = probe_in(python)
    assert out["nvfp4-mma"]["status"] == "ok" and out["nvfp4-mma"]["instruction"].startswith("mma.sync.aligned")
    assert out["e2m1-cvt"]["status"] == "ok"
    plain = probe_in(python, arch="sm_121")
    assert plain["nvfp4-mma"]["status"] == "refused"
    assert plain["nvfp4-mma"]["admissible_archs"] == ["sm_120a", "sm_121a", "sm_120f"]


@pytest.mark.slow
def test_real_collector_against_a_real_release(tmp_path):
    """The collector end to end on a real install: one real compile, then the cache answers."""
    python = real_env("nvidia-cutlass-dsl==4.5.1")
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    packages = {
        "nvidia-cutlass-dsl": {"version": "4.5.1", "location": str(site)},
        "nvidia-cutlass-dsl-libs-base": {"version": "4.5.1", "location": str(site)},
    }
    ctx = Context(target=PythonTarget(str(python), "test"), facts=Facts(packages=packages, cutedsl={"active_build": "libs-base"}), cache_dir=tmp_path)
    started = time.monotonic()
    cold = cutedsl.run(ctx)["kernels"]
    cold_s = time.monotonic() - started
    assert {k: v["status"] for k, v in cold.items()} == {"cutedsl-nvfp4-mma": "ok", "cutedsl-e2m1-cvt": "ok"}
    started = time.monotonic()
    warm = cutedsl.run(ctx)["kernels"]
    assert time.monotonic() - started < 0.2 < cold_s
    assert all(v["cached"] for v in warm.values())
