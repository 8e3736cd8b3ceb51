"""A kernel verdict needs proof: a cubin for the arch (ELF, EM_CUDA, the SM in e_flags), the
instruction in its SASS, one tool per real ptxas binary (wrappers resolved), a cache that follows
the binary behind a wrapper, and version numbers that cannot crash anything. Real ptxas and real
misbehaving stand-ins (scripts that exit 0 with garbage, cheat on the arch, strip the instruction)."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from sparkdoctor import kernels, ptxas
from sparkdoctor.collect import toolkits
from tests.test_kernels import (
    SM12X,
    SYSTEM_PTXAS,
    fake_ptxas,
    make_ctx,
    needs_ptxas,
    ptxas_version,
)

# The ELF binary behind /usr/local/bin/ptxas (a wrapper script on some machines), and the
# nvidia-cuda-nvcc wheel's: two builds whose cubin headers are both checked.
REAL_PTXAS = ptxas.resolve_ptxas(SYSTEM_PTXAS).binary if SYSTEM_PTXAS else None
WHEEL_PTXAS = next((str(b / "ptxas") for b in kernels.tools.nvidia_wheel_bins() if os.access(b / "ptxas", os.X_OK)), None)
TRIVIAL_PTX = ".version 8.8\n.target {arch}\n.address_size 64\n.visible .entry k() {{ ret; }}\n"
HUGE = "1" * 5000  # int() refuses strings over 4,300 digits


@pytest.fixture
def no_disassembler(monkeypatch):
    """The SASS read costs ~0.6 s a call; only the tests about SASS pay for it."""
    monkeypatch.setattr(kernels.tools, "find_disassembler", lambda ptxas: None)


def real_cubin(folder: Path, arch: str, ptxas: str | None = None) -> Path:
    import subprocess

    folder.mkdir(parents=True, exist_ok=True)
    ptx, cubin = folder / f"{arch}.ptx", folder / f"{arch}.cubin"
    ptx.write_text(TRIVIAL_PTX.format(arch=arch))
    subprocess.run([ptxas or REAL_PTXAS, f"-arch={arch}", "-o", str(cubin), str(ptx)], check=True, timeout=60)
    return cubin


def toolkit(path: str | Path, version: str = "13.0.88", source: str = "system", **extra) -> dict:
    return {"tool": "ptxas", "path": str(path), "version": version, "source": source, **extra}


# ---- the cubin check ---------------------------------------------------------------------------


@needs_ptxas
def test_real_cubins_carry_their_sm_in_e_flags(tmp_path):
    """Measured with both ptxas builds: the SM number is in the header, the a/f suffix is not."""
    archs = {"sm_89": 89, "sm_90": 90, "sm_90a": 90, "sm_100a": 100, "sm_120a": 120, "sm_121": 121, "sm_121a": 121, "sm_121f": 121}
    for tool in filter(None, (REAL_PTXAS, WHEEL_PTXAS)):
        for arch, sm in archs.items():
            cubin = real_cubin(tmp_path / Path(tool).parent.name, arch, tool)
            assert kernels.cubin_arch(cubin.read_bytes()) == (f"sm_{sm}", None), (tool, arch)  # 13.0 sets no 'a' bit
            assert kernels.cubin_problem(cubin, arch) is None
        assert kernels.cubin_problem(cubin, "sm_90a") == "its cubin is for sm_121, not sm_90a"


@needs_ptxas
def test_what_is_not_a_cubin_is_named(tmp_path):
    cubin = real_cubin(tmp_path, "sm_121a").read_bytes()
    cases = {
        "empty": (b"", "its output is empty"),
        "text": (b"garbage\n", "its output is not an ELF file (it starts with b'garbage\\n')"),
        "host ELF": (Path("/bin/true").read_bytes(), "its output is an ELF file for machine "),
        "cut": (cubin[:200], "its cubin is cut short (200 bytes;"),
        "elf32": (b"\x7fELF\x01\x01" + bytes(60), "its output is not a whole 64-bit little-endian ELF file"),
    }
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        problem = kernels.cubin_problem(tmp_path / name, "sm_121a")
        assert problem is not None and problem.startswith(message), (name, problem)
    assert kernels.cubin_problem(tmp_path / "missing", "sm_121a") == "it wrote no cubin"
    (tmp_path / "no-arch").write_bytes(cubin[:48] + bytes(4) + cubin[52:])
    assert kernels.cubin_problem(tmp_path / "no-arch", "sm_121a") == "its cubin names no arch (e_flags 0x00000000)"
    os.mkfifo(tmp_path / "fifo")  # reading it would block for ever
    assert kernels.cubin_problem(tmp_path / "fifo", "sm_121a") == "its output is not a regular file"


@needs_ptxas
def test_both_e_flags_layouts_and_the_a_bit(tmp_path):
    """The values ptxas 12.8.93 writes (measured; the slow test compiles with it for real)."""
    cubin = real_cubin(tmp_path, "sm_121a").read_bytes()

    def header(abi: int, flags: int) -> bytes:
        return cubin[:8] + bytes([abi]) + cubin[9:48] + flags.to_bytes(4, "little") + cubin[52:]

    cases = {(7, 0x005A0D5A): "sm_90a", (7, 0x005A055A): "sm_90", (7, 0x00590559): "sm_89",
             (8, 0x0600780A): "sm_120a", (8, 0x06007802): "sm_120", (8, 0x06007902): "sm_121"}
    for (abi, flags), arch in cases.items():
        assert kernels.cubin_arch(header(abi, flags)) == (arch, None), (abi, hex(flags))
    (tmp_path / "a.cubin").write_bytes(header(8, 0x0600780A))
    assert kernels.cubin_problem(tmp_path / "a.cubin", "sm_120a") is None
    assert kernels.cubin_problem(tmp_path / "a.cubin", "sm_120") == "its cubin is for sm_120a, not sm_120"  # would not load on sm_121
    (tmp_path / "plain.cubin").write_bytes(header(8, 0x06007902))
    assert kernels.cubin_problem(tmp_path / "plain.cubin", "sm_121a") is None  # 13.0 never sets the bit


def _broken_outputs(tmp_path: Path) -> dict[str, tuple[str, str]]:
    sm90 = real_cubin(tmp_path / "real", "sm_90a")
    return {
        "nothing": ("exit 0", "it wrote no cubin"),
        "garbage": ('echo garbage > "$3"', "its output is not an ELF file"),
        "host ELF": ('cp /bin/true "$3"', "its output is an ELF file for machine "),
        "cut short": (f'head -c 300 "{sm90}" > "$3"', "its cubin is cut short"),
        "another arch": (f'cp "{sm90}" "$3"', "its cubin is for sm_90, not sm_121a"),
    }


@needs_ptxas
@pytest.mark.parametrize("case", ["nothing", "garbage", "host ELF", "cut short", "another arch"])
def test_a_ptxas_that_exits_0_without_a_cubin_for_the_arch_is_an_error(tmp_path, case, no_disassembler):
    body, message = _broken_outputs(tmp_path)[case]
    liar = fake_ptxas(tmp_path, "ptxas", body)
    out = kernels.run(make_ctx(tmp_path, [toolkit(liar)]))["kernels"]
    for pid in SM12X:
        entry = out[pid]
        assert entry["status"] == "error", entry["detail"]
        assert f"ptxas exited 0 but {message}" in entry["detail"]
        assert entry["runs"][0]["compiled"] is False and entry["runs"][0]["outcome"] == "error"
    again = kernels.run(make_ctx(tmp_path, [toolkit(liar)]))["kernels"]
    assert not any(e["runs"][0]["cached"] for e in again.values())  # a broken tool is asked again


@needs_ptxas
def test_an_arch_the_ptxas_does_not_know_never_compiles(tmp_path):
    probe = next(p for p in kernels.load_probes() if p.id == "e2m1-cvt")

    def compile_for(path: str, arch: str) -> dict:
        job = kernels.Job(probe, kernels.Tool(path, "13.0.88", "system", path), arch, "target")
        workdir = tmp_path / f"work-{len(list(tmp_path.glob('work-*')))}"
        workdir.mkdir()
        kernels.compile_job(job, workdir, set(), threading.Lock())
        return job.record

    assert compile_for(SYSTEM_PTXAS, "sm_999")["outcome"] == "rejected"  # the real one says no
    # a wrapper that ignores -arch and always writes an sm_121a cubin: exit 0 is not a pass
    sm121 = real_cubin(tmp_path / "real", "sm_121a")
    cheat = fake_ptxas(tmp_path, "cheat", f'cp "{sm121}" "$3"')
    rec = compile_for(cheat, "sm_999")
    assert (rec["outcome"], rec["compiled"]) == ("error", False)
    assert rec["error"] == "ptxas exited 0 but its cubin is for sm_121, not sm_999"
    assert compile_for(cheat, "sm_121a")["compiled"] is True


# ---- the SASS check ---------------------------------------------------------------------------


@needs_ptxas
def test_a_cubin_whose_sass_lacks_the_instruction_fails(tmp_path):
    if kernels.find_disassembler(kernels.Tool(SYSTEM_PTXAS, None, "system", "")) is None:
        pytest.skip("no nvdisasm/cuobjdump (pip install nvidia-cuda-nvdisasm)")
    # a ptxas that quietly turns the FP4 conversion into an integer one: a valid sm_121a cubin
    strip = 's/cvt\\.rn\\.satfinite\\.e2m1x2\\.f32 %byte, %hi, %lo;/cvt.rzi.u8.f32 %byte, %hi;/'
    liar = fake_ptxas(tmp_path, "ptxas", f"sed '{strip}' \"$4\" > \"$4.x\" && exec \"{REAL_PTXAS}\" \"$1\" \"$2\" \"$3\" \"$4.x\"")
    out = kernels.run(make_ctx(tmp_path, [toolkit(liar)]))["kernels"]
    entry = out["e2m1-cvt"]
    assert entry["status"] == "fail", entry["detail"]
    assert entry["runs"][0]["compiled"] is True and entry["runs"][0]["sass_ok"] is False
    assert "its SASS lacks the instruction" in entry["detail"] and "no instruction matches /F2FP" in entry["detail"]
    assert out["fp4-mma"]["status"] == "ok" and out["fp4-mma"]["runs"][0]["sass_ok"] is True


def test_a_kernel_missing_from_the_disassembly_lacks_the_instruction():
    probe = next(p for p in kernels.load_probes() if p.id == "nvfp4-mma")
    ok, text = kernels.check_sass(probe, [], None)
    assert ok is False and text.startswith("kernel probe_nvfp4_mma is not in the disassembly")
    record = {"outcome": "compiled", "compiled": True, "arch": "sm_121a", "ptxas_version": "13.0.88", "ptxas_source": "pip",
              "sass_ok": False, "sass": f"nvdisasm: {text}", "ran": None, "run_note": "compiled, not run"}
    status, detail = kernels.verdict.judge(record, [record])
    assert status == "fail" and "its SASS lacks the instruction" in detail


# ---- wrappers: one tool per binary, cached on the binary and the wrapper's bytes --------------


@needs_ptxas
def test_a_wrapper_and_the_binary_it_runs_are_one_ptxas(tmp_path, no_disassembler):
    version = ptxas_version(REAL_PTXAS)
    wrapper = fake_ptxas(tmp_path, "ptxas", f'exec "{REAL_PTXAS}" "$@"')
    tk = [toolkit(wrapper, version, "env", used_by=["triton"]), toolkit(REAL_PTXAS, version)]
    entry = kernels.run(make_ctx(tmp_path, tk))["kernels"]["nvfp4-mma"]
    assert entry["status"] == "ok"
    [run] = entry["runs"]
    assert run["used_by"] == ["triton"]  # whoever uses either uses the one binary
    assert "ptxas compiled it" not in entry["detail"]  # no "(2/2 ...)" tally for one binary


@needs_ptxas
def test_the_cache_follows_the_binary_behind_a_wrapper_and_the_wrappers_bytes(tmp_path, no_disassembler):
    binary = tmp_path / "cuda" / "bin" / "ptxas"
    binary.parent.mkdir(parents=True)
    shutil.copy2(REAL_PTXAS, binary)
    wrapper = fake_ptxas(tmp_path, "ptxas", f'exec "{binary}" "$@" # a')
    tk = [toolkit(wrapper, ptxas_version(str(binary)))]

    def cached() -> set[bool]:
        return {e["runs"][0]["cached"] for e in kernels.run(make_ctx(tmp_path, tk))["kernels"].values()}

    assert cached() == {False} and cached() == {True}
    os.utime(binary, (1, 1))  # the binary behind the wrapper was reinstalled
    assert cached() == {False} and cached() == {True}
    before = os.stat(wrapper)
    Path(wrapper).write_text(Path(wrapper).read_text().replace("# a", "# b"))  # same size ...
    os.utime(wrapper, ns=(before.st_atime_ns, before.st_mtime_ns))  # ... and mtime: only the bytes differ
    assert cached() == {False}


def test_wrapper_resolution_rule(tmp_path):
    binary = tmp_path / "cuda" / "ptxas"
    binary.parent.mkdir()
    shutil.copy("/bin/true", binary)  # any executable that is not a script
    other = tmp_path / "other" / "ptxas-blackwell"
    other.parent.mkdir()
    shutil.copy("/bin/true", other)
    real = str(binary.resolve())

    def wrap(name: str, body: str) -> str:
        return os.path.realpath(fake_ptxas(tmp_path, name, body))

    one = wrap("one", f'exec "{binary}" "$@"')
    assert ptxas.resolve_ptxas(one) == ptxas.Resolved(real, (one,))
    chain = wrap("chain", f"exec {one} \"$@\"  # not named ptxas: not followed")
    assert ptxas.resolve_ptxas(chain) == ptxas.Resolved(chain, ())
    os.symlink(one, tmp_path / "ptxas")
    outer = wrap("outer", f'exec {tmp_path / "ptxas"} "$@"')
    assert ptxas.resolve_ptxas(outer) == ptxas.Resolved(real, (outer, one))  # through a link to a wrapper
    assert ptxas.resolve_ptxas(str(binary)) == ptxas.Resolved(real, ())
    unresolved = {
        "two": f'if [ -n "$X" ]; then exec {binary} "$@"; else exec {other} "$@"; fi',
        "missing": 'exec /nonexistent/bin/ptxas "$@"',
        "variable": 'exec "$CUDA_HOME/bin/ptxas" "$@"',
        "relative": 'exec ./bin/ptxas "$@"',
    }
    for name, body in unresolved.items():
        path = wrap(name, body)
        assert ptxas.resolve_ptxas(path) == ptxas.Resolved(path, ()), name
    big = wrap("big", f'exec "{binary}" "$@"\n' + "#" * (70 * 1024))
    assert ptxas.resolve_ptxas(big) == ptxas.Resolved(big, ())  # a program, not a wrapper
    looping = tmp_path.resolve() / "loop" / "ptxas"
    looping.parent.mkdir()
    looping.write_text(f'#!/bin/sh\nexec "{looping}" "$@"\n')
    looping.chmod(0o755)
    assert ptxas.resolve_ptxas(str(looping)) == ptxas.Resolved(str(looping), ())


# ---- version numbers -------------------------------------------------------------------------


def test_version_numbers_over_the_int_limit_are_no_versions():
    assert ptxas.version_tuple(f"{HUGE}.0.1") == ()
    assert ptxas.version_tuple("13.0.88") == (13, 0, 88) and ptxas.version_tuple("12.9", parts=2) == (12, 9)
    assert toolkits.parse_version(f"Cuda compilation tools, release {HUGE}.0, V{HUGE}.0.1") is None
    assert toolkits.parse_version(f"Cuda compilation tools, release 13.0, V13.0.{HUGE}") == "13.0"
    assert toolkits.parse_gpu_names(f"--gpu-name <gpu name>\n   Allowed values for this option: 'sm_{HUGE}a','sm_90a'.\n") == ["sm_90a"]
    assert toolkits.judge_target(f"{HUGE}.0", []) == (None, None)
    assert kernels.ptxas_knows(f"{HUGE}.0.1", "sm_121a") is None
    assert kernels.matching_gpu([{"cc": f"{HUGE}.1"}], "sm_121a") is None
    huge_tool = kernels.Tool("/x/ptxas", f"{HUGE}.0", "system", "x")
    assert kernels.preferred([huge_tool], "sm_121a") == [huge_tool]


@needs_ptxas
def test_a_ptxas_fact_with_a_huge_version_still_compiles(tmp_path, no_disassembler):
    out = kernels.run(make_ctx(tmp_path, [toolkit(SYSTEM_PTXAS, f"{HUGE}.0.1")]))["kernels"]
    assert {e["status"] for e in out.values()} == {"ok"}


def test_a_disassembler_that_prints_no_kernel_leaves_the_sass_unknown(tmp_path):
    probe = next(p for p in kernels.load_probes() if p.id == "nvfp4-mma")
    tool = kernels.Tool("/x/ptxas", "13.0.88", "system", "x")
    job = kernels.Job(probe, tool, "sm_121a", "target", disassembler=kernels.Tool("/x/nvdisasm", None, "path", "d"))
    job.record = kernels.new_record(job)
    kernels.sass.apply_sass([job], {}, None)  # a broken nvdisasm: exit 0, nothing we can read
    assert job.record["sass_ok"] is None and job.record["sass"] == "SASS not checked: the disassembler printed no kernel it could read"
    kernels.sass.apply_sass([job], {"probe_other": ["HMMA.16816.F32 R1, R2, R3, RZ"]}, None)  # a cubin without this kernel
    assert job.record["sass_ok"] is False


# ---- the GPU runner's reply and the cached cubin ---------------------------------------------


@pytest.mark.parametrize("reply", ["[1, 2]", '{"results": 5}', '{"results": [{"id": "x", "ok": true, "outputs": {"d": "zz"}}]}',
                                   '{"results": [{"id": "x", "ok": true, "outputs": {"d": 7}}]}', '"text"'])
def test_a_malformed_gpu_runner_reply_is_an_error_per_request(tmp_path, monkeypatch, reply):
    from sparkdoctor import cuda_driver

    runner = tmp_path / "runner.py"
    runner.write_text(f"import sys\nsys.stdin.read()\nprint({reply!r})\n")
    monkeypatch.setattr(cuda_driver, "__file__", str(runner))
    [result] = kernels.run_on_gpu([{"id": "x"}])
    assert result["ok"] is False and result["id"] == "x"
    assert result["error"] in ("no result", "the GPU runner's reply is not what it writes", "the GPU runner's result is malformed: output 'd' is not hex")


@needs_ptxas
def test_a_damaged_cached_cubin_is_compiled_again_not_run(tmp_path, monkeypatch, no_disassembler):
    from tests.test_kernels import GB10, _reference_outputs

    calls = []

    def gpu(requests, timeout=None):
        calls.append(len(requests))
        return [{"id": r["id"], "ok": True, "device": {"name": "NVIDIA GB10", "cc": "12.1"}, "outputs": _reference_outputs(r["entry"], r)}
                for r in requests]

    monkeypatch.setattr(kernels.gpu_run, "run_on_gpu", gpu)
    kernels.run(make_ctx(tmp_path, [toolkit(SYSTEM_PTXAS)], arch="sm_121a", gpus=GB10, driver={"version": "580.95.05"}))
    for cubin in (tmp_path / "cache" / "kernels").glob("*.cubin"):
        cubin.write_bytes(b"\x7fELF damaged")
    out = kernels.run(make_ctx(tmp_path, [toolkit(SYSTEM_PTXAS)], arch="sm_121a", gpus=GB10, driver={"version": "590.1"}))["kernels"]
    assert calls == [4, 4]  # the new driver needs new runs: of cubins compiled again, not of the damaged ones
    for entry in out.values():
        assert (entry["status"], entry["runs"][0]["cached"], entry["runs"][0]["verified"]) == ("ok", False, True)


def test_a_wrapper_names_only_literal_absolute_ptxas_paths(tmp_path):
    assert ptxas.named_ptxas('exec "/opt/cuda/bin/ptxas" "$@"') == {"/opt/cuda/bin/ptxas"}
    assert ptxas.named_ptxas("P=/a/ptxas-blackwell\nexec $P") == {"/a/ptxas-blackwell"}
    for text in ('exec "${CUDA}/bin/ptxas" "$@"', 'exec "$(dirname "$0")/real/ptxas"', "exec /opt/cuda-*/bin/ptxas", "exec ./ptxas",
                 "exec /opt/cuda/bin/ptxas2", "exec /opt/cuda/bin/nvptxas"):
        assert ptxas.named_ptxas(text) == set(), text
    start = time.process_time()  # CPU seconds: a busy machine does not make it fail
    assert ptxas.named_ptxas("/" * 65536 + "x") == set()  # one long word: no quadratic backtracking
    assert time.process_time() - start < 1
    os.mkfifo(tmp_path / "ptxas")  # opening it would block for ever
    assert ptxas.resolve_ptxas(str(tmp_path / "ptxas")) == ptxas.Resolved(str((tmp_path / "ptxas").resolve()), ())


def test_a_flooding_disassembler_line_costs_no_time():
    start = time.process_time()
    text = ".text.probe_x:\n/*0000*/ " + " " * 1_000_000 + "x\n" + "/*0010*/   F2FP.SATFINITE.E2M1.F32 R0, R2, R3, RZ ;\n" + "/*0020*/ " + "/*0000*/ " * 100_000
    assert kernels.split_sass(text) == {"probe_x": ["F2FP.SATFINITE.E2M1.F32 R0, R2, R3, RZ"]}
    assert time.process_time() - start < 1


def test_a_flooding_ptxas_help_costs_no_time():
    start = time.process_time()
    assert toolkits.parse_gpu_names("\n" * 200_000 + "no options here") == []
    assert time.process_time() - start < 1


def test_a_flooding_ptxas_error_is_cut_to_one_short_line():
    flood = "\n".join(["ptxas fatal   : " + "x" * 1_000_000] * 10 + ["ptxas error   : " + "y" * 50_000])
    assert len(kernels.ptxas_errors(flood)) <= 2 * 300 + 3
    assert "\n" not in kernels.ptxas_errors(flood)


def test_a_huge_sparse_script_is_identified_without_reading_it(tmp_path):
    script = tmp_path / "ptxas"
    with open(script, "wb") as fh:
        fh.write(b"#!/bin/sh\nexec /nonexistent/ptxas\n")
        fh.truncate(50 * 1024**3)  # 50 GB, sparse: reading it all would take minutes
    script.chmod(0o755)
    start = time.process_time()
    binary, identity = kernels.tools.tool_identity(str(script), "13.0.88")
    assert binary == str(script.resolve()) and str(50 * 1024**3) in identity
    assert time.process_time() - start < 2
