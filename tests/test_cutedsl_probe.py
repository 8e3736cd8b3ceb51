"""The CuTe DSL compile probe and its collector.

Fast: the probe's classification of real error texts, and the collector end to end through real
subprocesses against stand-in `cutlass` installs (one that segfaults, one that hangs, one that
refuses the arch, one that compiles), including the probe-side cache: which changes on disk must
miss it, and what must never be written to it. Slow: the real nvidia-cutlass-dsl releases, in the
scratch environments that `matrix verify` builds (shared with tests/test_verify.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sparkdoctor.collect import Context, cutedsl
from sparkdoctor.facts import Facts
from sparkdoctor.targets.local import PythonTarget
from tests.probe_modules import probe_module
from tests.venvs import ROOT as TEST_VENVS

PROBE = Path(__file__).resolve().parents[1] / "probes" / "cutedsl" / "__main__.py"
VERIFY_VENVS = TEST_VENVS / "verify"
MMA_PTX = "mma.sync.aligned.kind::mxf4nvf4.block_scale.scale_vec::4X.m16n8k64.row.col.f32.e2m1.e2m1.f32.ue4m3"
CVT_PTX = "cvt.rn.satfinite.e2m1x2.f32"
SO_NAME = "_cutlass_ir.cpython-311-x86_64-linux-gnu.so"


def load_probe(module: str = "cutedsl_install"):
    """One of the probe's modules, loaded from its file (its siblings on sys.path, as when it runs)."""
    return probe_module("cutedsl", module, own_name=f"sd_{module}")


def result_lines(stdout: str) -> list[dict]:
    """The probe's per-kernel JSON lines (each printed on a line of its own, blank lines between), after the start
    line it prints first of all."""
    lines = [x for x in stdout.splitlines() if x.strip()]
    assert lines[:1] == [cutedsl.STARTED], stdout[:300]
    return [json.loads(x) for x in lines[1:]]


# ---- stand-in cutlass installs --------------------------------------------------------------------

# Every stand-in `cutlass.cute` notes each import (imports.log beside it, with the importing
# process's arguments); the compiling one also notes each compile (compiles.log: the kernel), so a
# test can tell a cached answer from a compile.
LOG_IMPORT = """\
    import os as _os, sys as _sys
    with open(_os.path.join(_os.path.dirname(__file__), "imports.log"), "a") as _fh:
        _fh.write(" ".join(_sys.argv[1:]) + "\\n")
    """

REFUSING_CUTE = """\
    class _Refuse:
        def __getattr__(self, name):
            raise RuntimeError("OpError: expects arch to be one of ['sm_120a'], but got Arch.sm_121a")

    nvgpu = _Refuse()
    """

# Compiles anything: every DSL call returns a stub; compile() hands back PTX holding both instructions.
# ON_COMPILE is where a variant misbehaves for one kernel (`kernel` is the probe's compile_one argument).
COMPILING_TEMPLATE = """\
    import os, sys, types

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
        kernel = sys._getframe(1).f_locals.get("kernel")
        with open(os.path.join(os.path.dirname(__file__), "compiles.log"), "a") as fh:
            fh.write("%s\\n" % kernel)
        ON_COMPILE
        ptx = "\\t%s;\\n\\t%s ;\\n" % ("{MMA}", "{CVT}")
        return types.SimpleNamespace(__ptx__=ptx, __cubin__=b"cubin")
    """.replace("{MMA}", MMA_PTX + " {%f1}, {%r1}").replace("{CVT}", CVT_PTX + " %rs1, %f2, %f3")


def compiling_cute(on_compile: str = "pass") -> str:
    assert "ON_COMPILE" in COMPILING_TEMPLATE
    return COMPILING_TEMPLATE.replace("ON_COMPILE", on_compile)


SEGFAULT_CUTE = "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"
HANGING_CUTE = "import time\ntime.sleep(600)\n"
# The MMA compile hangs / segfaults, the cvt one compiles: one settled result beside the other.
HALF_HANGING_CUTE = compiling_cute("if kernel.startswith('nvfp4-mma'): __import__('time').sleep(600)")
HALF_CRASHING_CUTE = compiling_cute("if kernel.startswith('nvfp4-mma'): os.kill(os.getpid(), 11)")
COMPILING_CUTE = compiling_cute()


def fake_cutlass(root: Path, cute_source: str, version: str = "4.9.9") -> Path:
    """A site dir laid out like nvidia-cutlass-dsl 4.5 (umbrella + libs-base dist-infos with RECORDs,
    a `cutlass` package, a _cutlass_ir .so, cute/nvgpu/warp/mma.py); returns the site dir."""
    site = root / "site"
    pkgs = site / "nvidia_cutlass_dsl" / "python_packages"
    cute = pkgs / "cutlass" / "cute"
    (cute / "nvgpu" / "warp").mkdir(parents=True)
    # cutlass.X resolves through cutlass.cute (where each stand-in decides what exists)
    (pkgs / "cutlass" / "__init__.py").write_text("def __getattr__(name):\n    import cutlass.cute as c\n    return getattr(c, name)\n")
    (cute / "__init__.py").write_text(textwrap.dedent(LOG_IMPORT) + textwrap.dedent(cute_source))
    (cute / "nvgpu" / "warp" / "mma.py").write_text("# the file two libs wheels both ship\n")
    libs = pkgs / "cutlass" / "_mlir" / "_mlir_libs"
    libs.mkdir(parents=True)
    (libs / SO_NAME).write_bytes(b"\x7fELF compiler")
    (site / "nvidia_cutlass_dsl.pth").write_text(str(pkgs) + "\n")
    write_dist(site, "nvidia-cutlass-dsl", version, ["nvidia_cutlass_dsl.pth"])
    lib_files = [str(p.relative_to(site)) for p in sorted(pkgs.rglob("*")) if p.is_file()]
    write_dist(site, "nvidia-cutlass-dsl-libs-base", version, lib_files)
    return site


def write_dist(site: Path, name: str, version: str, files: list[str]) -> Path:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nName: not-the-header\n")
    rows = [f"{f},sha256=x,{(site / f).stat().st_size}" for f in files] + [f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    return info


def logged(site: Path, name: str) -> list[str]:
    log = site / "nvidia_cutlass_dsl" / "python_packages" / "cutlass" / "cute" / name
    return log.read_text().splitlines() if log.exists() else []


def compiles(site: Path) -> list[str]:
    """The kernels the stand-in compiled, in order."""
    return logged(site, "compiles.log")


def imports(site: Path) -> list[str]:
    """The arguments of every process that imported the stand-in DSL."""
    return logged(site, "imports.log")


def fake_venv(root: Path, cute_source: str) -> Path:
    """A real (pip-less) venv whose site-packages holds a stand-in cutlass; returns its python."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next(venv.glob("lib/python*/site-packages"))
    staged = fake_cutlass(root / "stage", cute_source)
    for item in staged.iterdir():
        item.rename(site / item.name)
    pth = site / "nvidia_cutlass_dsl.pth"
    pth.write_text(str(site / "nvidia_cutlass_dsl" / "python_packages") + "\n")
    return venv / "bin" / "python"


def ctx_for(site: Path | None, tmp_path: Path, monkeypatch, cutedsl_facts: dict | None = None) -> Context:
    """The collector's context: the test's own interpreter, the stand-in site on its path; only the
    gpu collector has run (the target collector's facts are not there, as when both start at once)."""
    if site is not None:
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(site / "nvidia_cutlass_dsl" / "python_packages")]))
    facts = Facts(cutedsl=cutedsl_facts)
    return Context(target=PythonTarget(sys.executable, "test"), facts=facts, cache_dir=tmp_path / "cache")


def cache_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "cutedsl").glob("*.json"))


def touch_later(path: Path) -> None:
    """A new mtime (what a reinstall leaves), safely past the filesystem's timestamp granularity."""
    later = path.stat().st_mtime_ns + 5_000_000_000
    os.utime(path, ns=(later, later))


# ---- the probe's classification -------------------------------------------------------------------


def chain(*excs: BaseException) -> BaseException:
    """Raise excs[0] from excs[1] from ..., the way the DSL wraps its errors."""
    for outer, inner in zip(excs, excs[1:], strict=False):
        outer.__cause__ = inner
    return excs[0]


def classify(exc: BaseException, kernel="nvfp4-mma", dump_dir: Path | None = None) -> dict:
    mod = load_probe("cutedsl_kernels")
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

    for path in [*PROBE.parent.glob("*.py"), *(PROBE.parents[1] / "shared").glob("*.py")]:
        ast.parse(path.read_text(), feature_version=(3, 8))


# ---- the collector through real subprocesses --------------------------------------------------------


def test_collector_needs_only_the_arch():
    assert cutedsl.COLLECTOR.needs == ("gpu",)  # starts beside the target collector, not after it


def test_compiler_segfault_is_a_crash_for_each_kernel_and_is_cached(tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, SEGFAULT_CUTE)
    ctx = ctx_for(site, tmp_path, monkeypatch)
    kernels = cutedsl.run(ctx)["kernels"]
    assert set(kernels) == {"cutedsl-nvfp4-mma", "cutedsl-nvfp4-mma-tile", "cutedsl-e2m1-cvt"}
    for k in kernels.values():
        assert k["status"] == "crash"
        assert k["detail"].startswith("the CuTe DSL compiler was killed by SIGSEGV")
        assert k["kind"] == "cutedsl" and k["arch"] == "sm_121a" and k["build"] == "libs-base" and k["cached"] is False
        assert k["version"] == "4.9.9" and k["runs"] == []
    assert len(imports(site)) == 1  # the compile server died importing; both kernels were in it
    again = cutedsl.run(ctx)["kernels"]
    assert all(k["cached"] and k["status"] == "crash" and k["build"] == "libs-base" for k in again.values())
    assert len(imports(site)) == 1


def test_arch_comes_from_facts_and_a_refusal_reports_the_admissible_list(tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, REFUSING_CUTE)
    ctx = ctx_for(site, tmp_path, monkeypatch)
    ctx.facts.arch = {"value": "sm_120a", "source": "given"}
    mma = cutedsl.run(ctx)["kernels"]["cutedsl-nvfp4-mma"]
    assert mma["status"] == "refused" and mma["admissible_archs"] == ["sm_120a"] and mma["arch"] == "sm_120a"
    assert imports(site) and all("--arch sm_120a" in line for line in imports(site))


def test_warm_run_answers_from_the_cache_without_compiling(tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, COMPILING_CUTE)
    ctx = ctx_for(site, tmp_path, monkeypatch)
    first = cutedsl.run(ctx)["kernels"]
    assert first["cutedsl-nvfp4-mma"]["status"] == "ok" and first["cutedsl-nvfp4-mma"]["instruction"] == MMA_PTX
    assert first["cutedsl-e2m1-cvt"]["instruction"] == CVT_PTX
    assert not any(k["cached"] for k in first.values())
    assert sorted(compiles(site)) == ["e2m1-cvt", "nvfp4-mma", "nvfp4-mma-tile"]
    assert len(imports(site)) == 1  # one import, a forked child per kernel
    [entry] = cache_files(tmp_path)  # one file for this interpreter
    assert entry.name == cutedsl.cache_file(ctx).name
    second = cutedsl.run(ctx)["kernels"]
    assert all(k["cached"] for k in second.values())
    assert len(compiles(site)) == 3 and len(imports(site)) == 1  # nothing compiled, cutlass not even imported
    drop = ("cached",)
    assert [{k: v for k, v in x.items() if k not in drop} for x in second.values()] == [{k: v for k, v in x.items() if k not in drop} for x in first.values()]


@pytest.mark.parametrize(
    "change",
    ["compiler library swapped", "compiler library touched", "warp/mma.py touched", "version", "arch", "CUTE_DSL_ env", "probe source", "something installed"],
)
def test_anything_that_decides_the_outcome_misses_the_cache(change, tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, COMPILING_CUTE)
    ctx = ctx_for(site, tmp_path, monkeypatch)
    cutedsl.run(ctx)
    assert all(k["cached"] for k in cutedsl.run(ctx)["kernels"].values())
    so = next(site.rglob(SO_NAME))
    if change == "compiler library swapped":  # a force-reinstall of another build over the same path
        so.write_bytes(b"\x7fELF another build of the compiler")
    elif change == "compiler library touched":  # same size, reinstalled
        touch_later(so)
    elif change == "warp/mma.py touched":  # the file the libs-base / libs-cu13 wheels collide on
        touch_later(next(site.rglob("warp/mma.py")))
    elif change == "version":
        info = next(site.glob("nvidia_cutlass_dsl-*.dist-info"))
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-cutlass-dsl\nVersion: 4.9.10\n")
    elif change == "arch":
        ctx.facts.arch = {"value": "sm_120a", "source": "given"}
    elif change == "CUTE_DSL_ env":
        monkeypatch.setenv("CUTE_DSL_LOG_LEVEL", "10")
    elif change == "something installed":  # e.g. a .pth that puts another cutlass first on sys.path
        (site / "another.pth").write_text(str(tmp_path) + "\n")
        touch_later(site)
    elif change == "probe source":
        shutil.copytree(PROBE.parents[1], tmp_path / "probes", ignore=shutil.ignore_patterns("kernels"))
        copy = tmp_path / "probes" / "cutedsl" / "__main__.py"
        kernels_module = copy.parent / "cutedsl_kernels.py"  # any part of the probe, not only its entry
        kernels_module.write_text(kernels_module.read_text() + "\n# another revision\n")
        monkeypatch.setattr(cutedsl, "probe_script", lambda: copy)
    kernels = cutedsl.run(ctx)["kernels"]
    assert not any(k["cached"] for k in kernels.values())
    assert len(compiles(site)) == 6
    if change == "version":
        assert {k["version"] for k in kernels.values()} == {"4.9.10"}
    if change == "compiler library swapped":  # no RECORD lists the .so at this size any more
        assert {k["build"] for k in kernels.values()} == {"unknown"}
    assert all(k["cached"] for k in cutedsl.run(ctx)["kernels"].values())  # and the new answer is kept


def test_corrupt_or_foreign_cache_is_ignored_and_rewritten(tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, COMPILING_CUTE)
    ctx = ctx_for(site, tmp_path, monkeypatch)
    cutedsl.run(ctx)
    [entry] = cache_files(tmp_path)
    good = json.loads(entry.read_text())
    for bad in ("{broken", json.dumps([1, 2]), json.dumps({**good, "results": "nope"})):
        entry.write_text(bad)
        assert not any(k["cached"] for k in cutedsl.run(ctx)["kernels"].values())
        assert json.loads(entry.read_text())["key"] == good["key"]  # rewritten whole
    unsettled = json.loads(json.dumps(good))
    unsettled["results"]["nvfp4-mma"]["status"] = "maybe"  # not a settled outcome: must not be served
    entry.write_text(json.dumps(unsettled))
    again = cutedsl.run(ctx)["kernels"]
    assert again["cutedsl-nvfp4-mma"]["cached"] is False and again["cutedsl-nvfp4-mma"]["status"] == "ok"
    assert again["cutedsl-e2m1-cvt"]["cached"] is True
    assert len(compiles(site)) == 3 + 3 * 3 + 1


def test_hang_is_an_error_and_never_cached(tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, HANGING_CUTE)
    ctx = ctx_for(site, tmp_path, monkeypatch)
    monkeypatch.setattr(cutedsl, "COMPILE_TIMEOUT", 2.0)
    started = time.monotonic()
    kernels = cutedsl.run(ctx)["kernels"]
    assert time.monotonic() - started < 120  # each killed at its 2 s deadline, not the 600 s hang; room for load
    for k in kernels.values():
        assert k["status"] == "error" and "timed out" in k["detail"] and not k["cached"]
    assert not cache_files(tmp_path)


def test_a_timeout_beside_a_settled_result_keeps_only_the_settled_one(tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, HALF_HANGING_CUTE)
    ctx = ctx_for(site, tmp_path, monkeypatch)
    # one deadline serves both kernels: the hang must meet it and the stand-in's instant compile must not, on a busy machine
    monkeypatch.setattr(cutedsl, "COMPILE_TIMEOUT", 8.0)
    first = cutedsl.run(ctx)["kernels"]
    assert first["cutedsl-nvfp4-mma"]["status"] == "error" and "timed out" in first["cutedsl-nvfp4-mma"]["detail"]
    assert first["cutedsl-e2m1-cvt"]["status"] == "ok"
    [entry] = cache_files(tmp_path)
    assert set(json.loads(entry.read_text())["results"]) == {"e2m1-cvt"}
    second = cutedsl.run(ctx)["kernels"]
    assert second["cutedsl-e2m1-cvt"]["cached"] is True
    assert second["cutedsl-nvfp4-mma"]["cached"] is False and "timed out" in second["cutedsl-nvfp4-mma"]["detail"]
    assert compiles(site).count("e2m1-cvt") == 1  # the timeout alone was retried


def segfaulting_python(tmp_path: Path) -> Path:
    """`check --python ./segfaults`: an "interpreter" that kills itself with SIGSEGV at start."""
    python = tmp_path / "segfaults"
    python.write_text("#!/bin/sh\nkill -SEGV $$\n")
    python.chmod(0o755)
    return python


def test_an_interpreter_that_dies_at_start_is_no_compiler_crash(tmp_path):
    """`check --python X` where X segfaults at start: the collector called that "the CuTe DSL compiler was killed by
    SIGSEGV", three probe-cutedsl-* errors ("report it") about a compiler never reached. The probe prints its start
    line before anything else; killed before it, the target's Python could not run: unverified, no finding."""
    from sparkdoctor.findings import check_probes

    ctx = Context(target=PythonTarget(str(segfaulting_python(tmp_path)), "test"), facts=Facts(), cache_dir=tmp_path / "cache")
    kernels = cutedsl.run(ctx)["kernels"]
    for k in kernels.values():
        assert k["status"] == "error", k
        assert k["detail"] == "could not run the target's Python: segfaults was killed by SIGSEGV before the probe started"
    findings, unverified = check_probes(Facts(arch={"value": "sm_121a"}, kernels=kernels), [])
    assert not findings and {u.probe for u in unverified} == set(kernels)
    assert not cache_files(tmp_path)  # nothing settled


def test_a_compiler_that_kills_the_probe_itself_is_a_crash_but_a_dead_interpreter_is_not(tmp_path):
    """`matrix verify` compiles in the probe's own process (`--kernel`): the real libs-base 4.5.x tile crash kills
    that process, after its start line, and that SIGSEGV is the evidence of cutedsl-libs-base-tile-crash."""
    from sparkdoctor.verify import run_probe

    status, detail, versions = run_probe("cutedsl-nvfp4-mma-tile", fake_venv(tmp_path, SEGFAULT_CUTE), "sm_121a")
    assert (status, detail) == ("crash", "the CuTe DSL compiler was killed by SIGSEGV")
    status, detail, versions = run_probe("cutedsl-nvfp4-mma-tile", segfaulting_python(tmp_path), "sm_121a")
    assert status == "error" and detail.startswith("could not run the target's Python: segfaults was killed by SIGSEGV")


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "fresh interpreters"])
def test_a_segfault_in_one_compile_leaves_the_other_result(fork, tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, HALF_CRASHING_CUTE)
    ctx = ctx_for(site, tmp_path, monkeypatch)
    if not fork:  # the way the server compiles where the import initialised the CUDA driver
        monkeypatch.setenv("SPARKDOCTOR_CUTEDSL_NO_FORK", "1")
    kernels = cutedsl.run(ctx)["kernels"]
    assert kernels["cutedsl-nvfp4-mma"]["status"] == "crash"
    assert kernels["cutedsl-nvfp4-mma"]["detail"].startswith("the CuTe DSL compiler was killed by SIGSEGV")
    assert kernels["cutedsl-e2m1-cvt"]["status"] == "ok" and kernels["cutedsl-e2m1-cvt"]["instruction"] == CVT_PTX
    assert sorted(compiles(site)) == ["e2m1-cvt", "nvfp4-mma", "nvfp4-mma-tile"]
    if fork:  # the server's one import
        assert len(imports(site)) == 1 and "--compile nvfp4-mma,nvfp4-mma-tile,e2m1-cvt" in imports(site)[0]
    else:  # none in the server, one per kernel in its own interpreter
        assert sorted(line.split("--kernel ")[1] for line in imports(site)) == ["e2m1-cvt", "nvfp4-mma", "nvfp4-mma-tile"]


def test_no_cache_flag_compiles_again_and_refreshes_the_cache(tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, COMPILING_CUTE)
    ctx = ctx_for(site, tmp_path, monkeypatch)
    cutedsl.run(ctx)
    ctx.use_cache = False
    assert not any(k["cached"] for k in cutedsl.run(ctx)["kernels"].values())
    assert len(compiles(site)) == 6
    ctx.use_cache = True
    assert all(k["cached"] for k in cutedsl.run(ctx)["kernels"].values())


def test_without_a_cache_dir_every_run_compiles(tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, COMPILING_CUTE)
    ctx = ctx_for(site, tmp_path, monkeypatch)
    ctx.cache_dir = None
    cutedsl.run(ctx)
    assert not any(k["cached"] for k in cutedsl.run(ctx)["kernels"].values())
    assert len(compiles(site)) == 6


def test_build_the_probe_cannot_tell_comes_from_the_target_facts_when_there(tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, COMPILING_CUTE)
    for info in site.glob("nvidia_cutlass_dsl_libs_*.dist-info"):  # an install with no libs RECORD
        (info / "RECORD").unlink()
    ctx = ctx_for(site, tmp_path, monkeypatch)
    assert {k["build"] for k in cutedsl.run(ctx)["kernels"].values()} == {None}
    ctx.facts.cutedsl = {"active_build": "libs-cu13"}
    assert {k["build"] for k in cutedsl.run(ctx)["kernels"].values()} == {"libs-cu13"}


def test_import_failure_is_an_error(tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, "raise ImportError('libcutlass_ir.so: cannot open shared object file')\n")
    ctx = ctx_for(site, tmp_path, monkeypatch)
    kernels = cutedsl.run(ctx)["kernels"]
    assert kernels["cutedsl-nvfp4-mma"]["status"] == "error"
    assert "import cutlass.cute failed: ImportError: libcutlass_ir.so" in kernels["cutedsl-nvfp4-mma"]["detail"]
    assert not cache_files(tmp_path)


def test_without_cutlass_dsl_the_probe_skips_at_once(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "empty"))
    ctx = ctx_for(None, tmp_path, monkeypatch)
    started = time.monotonic()
    kernels = cutedsl.run(ctx)["kernels"]
    assert time.monotonic() - started < 60  # one interpreter start and a folder listing, no compile (room for load)
    assert {k["status"] for k in kernels.values()} == {"skipped"}
    assert kernels["cutedsl-nvfp4-mma"]["detail"] == "nvidia-cutlass-dsl not installed"
    assert kernels["cutedsl-nvfp4-mma"]["build"] is None and kernels["cutedsl-nvfp4-mma"]["version"] is None
    assert not (tmp_path / "cache" / "cutedsl").exists()  # nothing to key a cache on


@pytest.mark.parametrize("odd", ["METADATA a FIFO", "RECORD a FIFO", "RECORD /dev/zero", "RECORD line past the csv limit", "RECORD size of 5000 digits"])
def test_an_odd_metadata_or_record_never_stops_the_compile_probe(odd, tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, COMPILING_CUTE)
    info = next(site.glob("nvidia_cutlass_dsl_libs_base-*.dist-info"))
    name = odd.split()[0]
    if "FIFO" in odd or "/dev/zero" in odd:
        (info / name).unlink()
        os.mkfifo(info / name) if "FIFO" in odd else (info / name).symlink_to("/dev/zero")
    elif "csv" in odd:
        (info / "RECORD").write_text('"' + "x" * 200_000 + '",sha256=x,1\n' + (info / "RECORD").read_text())
    else:
        so = next(site.rglob(SO_NAME)).relative_to(site)
        (info / "RECORD").write_text(f"{so},sha256=x,{'9' * 5000}\n")
    ctx = ctx_for(site, tmp_path, monkeypatch)
    started = time.monotonic()
    kernels = cutedsl.run(ctx)["kernels"]
    assert time.monotonic() - started < 30  # before: blocked on the FIFO, or died on csv / int()
    assert {k["status"] for k in kernels.values()} == {"ok"}, kernels


def test_dists_are_read_from_disk_without_importing(tmp_path, monkeypatch):
    site = fake_cutlass(tmp_path, SEGFAULT_CUTE)  # importing this cutlass would kill the probe
    monkeypatch.setattr(sys, "path", [str(tmp_path / "missing"), str(site)])
    probe = load_probe()
    dists = probe.find_dists()
    assert [(d["name"], d["version"]) for d in dists] == [("nvidia-cutlass-dsl", "4.9.9"), ("nvidia-cutlass-dsl-libs-base", "4.9.9")]
    files = probe.installed_files(dists)
    so = str(next(site.rglob(SO_NAME)))
    assert files[so] == [("libs-base", len(b"\x7fELF compiler"))]
    assert str(next(site.rglob("warp/mma.py"))) in files
    assert probe.active_build(None, files, probe.stat_files(files)) == "libs-base"


def test_probe_isolated_mode_reports_each_kernel(tmp_path):
    python = fake_venv(tmp_path, SEGFAULT_CUTE)
    done = subprocess.run([str(python), "-B", str(PROBE), "--arch", "sm_121a"], capture_output=True, text=True, timeout=120)
    lines = result_lines(done.stdout)
    assert [x["kernel"] for x in lines] == ["nvfp4-mma", "nvfp4-mma-tile", "e2m1-cvt"]
    assert all(x["status"] == "crash" and x["version"] == "4.9.9" and x["build"] == "libs-base" for x in lines)


# ---- the compile server and the CUDA driver (a GPU machine) -----------------------------------------

# nvidia-cutlass-dsl 4.4/4.5 query the GPU (cuInit) at import even with CUTE_DSL_ARCH set, and 4.4
# needs libcuda again after code generation; a child forked after cuInit cannot use the driver.
CUINIT_AT_IMPORT = "import ctypes\nassert ctypes.CDLL('libcuda.so.1').cuInit(0) == 0\n"
NEEDS_CUDA_TO_COMPILE = compiling_cute(
    "if __import__('ctypes').CDLL('libcuda.so.1').cuInit(0) != 0: raise RuntimeError('CudaDriverDependencyError: libcuda unusable here')"
)


def probe_isolated(site: Path, *args: str) -> dict[str, dict]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(site / "nvidia_cutlass_dsl" / "python_packages")])}
    done = subprocess.run([sys.executable, "-B", str(PROBE), "--arch", "sm_121a", *args], capture_output=True, text=True, timeout=120, env=env)
    return {x["kernel"]: x for x in result_lines(done.stdout)}


@pytest.mark.gpu
def test_a_dsl_that_initialises_cuda_at_import_compiles_in_fresh_interpreters(tmp_path):
    site = fake_cutlass(tmp_path, CUINIT_AT_IMPORT + textwrap.dedent(NEEDS_CUDA_TO_COMPILE))
    out = probe_isolated(site)
    assert {k: (r["status"], r["isolation"]) for k, r in out.items()} == {"nvfp4-mma": ("ok", "exec"), "nvfp4-mma-tile": ("ok", "exec"), "e2m1-cvt": ("ok", "exec")}


@pytest.mark.gpu
def test_a_dsl_that_leaves_cuda_alone_at_import_compiles_in_forked_children(tmp_path):
    site = fake_cutlass(tmp_path, NEEDS_CUDA_TO_COMPILE)
    out = probe_isolated(site)
    assert {k: (r["status"], r["isolation"]) for k, r in out.items()} == {"nvfp4-mma": ("ok", "fork"), "nvfp4-mma-tile": ("ok", "fork"), "e2m1-cvt": ("ok", "fork")}
    assert len(imports(site)) == 1


def test_here_without_a_driver_the_server_forks(tmp_path):
    site = fake_cutlass(tmp_path, COMPILING_CUTE)
    # the probe runs in a fresh interpreter that never loaded libcuda (this worker may have: test_gpu.py loads a
    # stand-in libcuda.so through ctypes, and a loaded library cannot be unloaded)
    assert {r["isolation"] for r in probe_isolated(site).values()} == {"fork"}


# ---- the real releases (environments shared with `matrix verify` tests) ------------------------------


def real_env(*steps: str) -> Path:
    from sparkdoctor import verify

    env = verify.Env(tuple(verify.parse_step(s, "test") for s in steps), "sm_121a")
    python, _ = verify.ensure_venv(VERIFY_VENVS, env)
    return python


def probe_in(python: Path, arch: str = "sm_121a") -> dict[str, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUTE_DSL_", "PYTHONPATH"))}
    done = subprocess.run([str(python), "-B", str(PROBE), "--arch", arch], capture_output=True, text=True, timeout=300, env=env)
    return {x["kernel"]: x for x in result_lines(done.stdout)}


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
    assert base["nvfp4-mma"]["build"] == "libs-base"
    cu13 = probe_in(real_env("nvidia-cutlass-dsl[cu13]==4.5.0"))
    assert cu13["nvfp4-mma"]["status"] == "ok" and "kind::mxf4nvf4" in cu13["nvfp4-mma"]["instruction"]
    assert cu13["nvfp4-mma"]["bundled_cuda"] == "13.1"
    # libs-base and libs-cu13 both record the same compiler path; the size on disk says whose it is
    assert cu13["nvfp4-mma"]["build"] == "libs-cu13"


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
def test_real_451_base_tile_crash_kills_the_probe_itself_after_its_start_line():
    """Which process the real libs-base 4.5.x tile crash kills, and when: in `matrix verify`'s `--kernel` mode the
    probe's own process, after its start line. That SIGSEGV is the evidence of cutedsl-libs-base-tile-crash
    (verified_by expect = "crash"), so it stays a crash; only a death before the start line is not."""
    from sparkdoctor import proc
    from sparkdoctor.verify.probes import PROBE_TIMEOUT

    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUTE_DSL_", "PYTHONPATH"))}
    python = real_env("nvidia-cutlass-dsl==4.5.1")
    result = proc.run([str(python), "-B", str(PROBE), "--arch", "sm_121a", "--kernel", "nvfp4-mma-tile"], timeout=PROBE_TIMEOUT, env=env)
    assert result.signal == signal.SIGSEGV, result.describe_failure()
    assert [x for x in result.stdout.splitlines() if x.strip()] == [cutedsl.STARTED]
    raw = cutedsl.interpret("nvfp4-mma-tile", "sm_121a", result)
    assert raw["status"] == "crash" and raw["detail"].startswith("the CuTe DSL compiler was killed by SIGSEGV"), raw


@pytest.mark.slow
def test_real_collector_against_a_real_release(tmp_path, monkeypatch):
    """The collector end to end on a real install, with no facts from the target collector: one
    real compile, then the probe answers from its cache; a touched warp/mma.py compiles again."""
    for name in [k for k in os.environ if k.startswith("CUTE_DSL_") or k == "PYTHONPATH"]:
        monkeypatch.delenv(name)
    python = real_env("nvidia-cutlass-dsl==4.5.1")
    ctx = Context(target=PythonTarget(str(python), "test"), facts=Facts(), cache_dir=tmp_path)
    started = time.monotonic()
    cold = cutedsl.run(ctx)["kernels"]
    cold_s = time.monotonic() - started
    # libs-base 4.5.1 compiles the minimal MMA and kills the compiler on the realistic tile
    assert {k: v["status"] for k, v in cold.items()} == {"cutedsl-nvfp4-mma": "ok", "cutedsl-nvfp4-mma-tile": "crash", "cutedsl-e2m1-cvt": "ok"}
    assert cold["cutedsl-nvfp4-mma-tile"]["detail"] == "the CuTe DSL compiler was killed by SIGSEGV"
    assert {v["build"] for v in cold.values()} == {"libs-base"} and {v["version"] for v in cold.values()} == {"4.5.1"}
    before = os.times()  # CPU seconds, this process's and the probe's (waited for): a busy machine does not add to them
    warm = cutedsl.run(ctx)["kernels"]
    after = os.times()
    assert sum(after[:4]) - sum(before[:4]) < 0.5 < cold_s
    assert all(v["cached"] for v in warm.values())
    assert [{**v, "cached": None} for v in warm.values()] == [{**v, "cached": None} for v in cold.values()]


def test_a_compile_server_killed_mid_compile_leaves_no_scratch_folder_behind(tmp_path):
    """Ctrl-C during `check`, or a compile past its deadline, ends the compile server with SIGKILL, so its `finally`
    never removes its scratch folder: /tmp kept a sparkdoctor-cutedsl-* folder per interrupt. The next probe
    removes those of servers that are gone, and never one of a live server."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    site = fake_cutlass(tmp_path, HANGING_CUTE)  # the server hangs in `import cutlass`, its scratch folder made
    env = {**os.environ, "TMPDIR": str(tmp),
           "PYTHONPATH": os.pathsep.join([str(site), str(site / "nvidia_cutlass_dsl" / "python_packages")])}

    def hanging_server() -> tuple[subprocess.Popen, Path]:
        before = set(tmp.iterdir())
        server = subprocess.Popen([sys.executable, "-B", str(PROBE), "--arch", "sm_121a", "--compile", "e2m1-cvt",
                                   "--timeout", "600"], env=env, start_new_session=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(600):  # until its scratch folder is there (a safety net, not a verdict)
            made = set(tmp.iterdir()) - before
            if made:
                return server, made.pop()
            time.sleep(0.1)
        os.killpg(server.pid, signal.SIGKILL)
        raise AssertionError("the compile server made no scratch folder")

    live, live_scratch = hanging_server()
    try:
        killed, killed_scratch = hanging_server()
        os.killpg(killed.pid, signal.SIGKILL)  # what proc does to a probe's process group on Ctrl-C
        killed.wait()
        assert killed_scratch.is_dir()  # nothing in the killed server could remove it
        done = subprocess.run([sys.executable, "-B", str(PROBE), "--arch", "sm_121a", "--compile", "e2m1-cvt"],
                              env={**env, "PYTHONPATH": str(tmp_path / "no-cutlass")}, capture_output=True, text=True,
                              timeout=120)
        assert [r["status"] for r in result_lines(done.stdout)] == ["error"]  # no DSL there: quick, and it ends
        assert not killed_scratch.exists(), "a killed server's scratch folder outlives it"
        assert live_scratch.is_dir(), "a live server's scratch folder was taken away"
        assert set(tmp.iterdir()) == {live_scratch}
    finally:
        os.killpg(live.pid, signal.SIGKILL)
        live.wait()
