"""The toolkits collector against real ptxas binaries (system CUDA, pip wheels, Triton's) and misbehaving stand-ins."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import types
from pathlib import Path

import pytest

from sparkdoctor import proc, ptxas
from sparkdoctor.collect import Context, run_collectors, toolkits
from sparkdoctor.facts import Facts
from sparkdoctor.targets.local import PythonTarget
from tests import venvs

SYSTEM_PTXAS = "/usr/local/bin/ptxas"
needs_system_ptxas = pytest.mark.skipif(not os.path.exists(SYSTEM_PTXAS), reason=f"no {SYSTEM_PTXAS}")

HELP_12_8 = """--gpu-name <gpu name>                               (-arch)
        Specify name of NVIDIA GPU to generate code for.
        Allowed values for this option:  'compute_120','lto_120','sm_100','sm_100a','sm_120',
        'sm_120a','sm_52','sm_90','sm_90a'.
        Default value:  'sm_52'.

--help                                              (-h)
        Print this help information on this tool.
"""


@pytest.fixture(autouse=True)
def answers_are_waited_for(monkeypatch):
    """ptxas's 5 s limit is wall-clock: a stand-in (or a real ptxas) that answers must not time out on a loaded
    machine. Only the tests of a hang set a short limit, after this."""
    monkeypatch.setattr(toolkits, "PTXAS_TIMEOUT", 600.0)


def only_the_hang_is_short(monkeypatch, seconds: float, hangs) -> None:
    """PTXAS_TIMEOUT is one limit for every call: the call that hangs (`hangs(argv)`) gets `seconds`, the calls that
    answer keep 600 s, so a loaded machine cannot turn their answers into time-outs too."""
    def run(argv, timeout, **kw):
        return proc.run(argv, timeout=seconds if hangs(argv) else 600.0, **kw)
    monkeypatch.setattr(toolkits, "proc", types.SimpleNamespace(run=run))


def make_ctx(tmp_path: Path, env: dict | None = None, path_env: str | None = None, candidates: list | None = None, use_cache: bool = True) -> Context:
    facts = Facts()
    facts.env = dict(env or {})
    ctx = Context(target=PythonTarget(sys.executable, "test"), facts=facts, cache_dir=tmp_path / "cache", use_cache=use_cache)
    # an empty folder keeps this process's PATH (and its ptxas) out of tests that do not want it
    ctx.scratch["path_env"] = path_env if path_env is not None else str(tmp_path / "empty-path")
    if candidates is not None:
        ctx.scratch["ptxas_candidates"] = candidates
    return ctx


def fake_ptxas(folder: Path, body: str, name: str = "ptxas") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def version_and_help(release: str, full: str, help_text: str) -> str:
    """A shell body that answers --version and --help like ptxas does."""
    return (
        'case "$1" in\n'
        f'  --version) echo "ptxas: NVIDIA (R) Ptx optimizing assembler"; echo "Cuda compilation tools, release {release}, V{full}";;\n'
        f"  --help) cat <<'EOF'\n{help_text}EOF\n;;\n"
        "esac"
    )


def by_path(result: dict, path: Path | str) -> dict:
    real = ptxas.resolve_ptxas(str(path)).binary  # /usr/local/bin/ptxas may be a wrapper script
    hits = [t for t in result["toolkits"] if t["realpath"] == real]
    assert len(hits) == 1, [t["realpath"] for t in result["toolkits"]]
    return hits[0]


def triton_tree(tmp_path: Path, blackwell: bool) -> Path:
    """A Triton-shaped install: bundled ptxas 12.8 (no sm_121a) and, for Triton >= 3.6, ptxas-blackwell 13.0."""
    bin_dir = tmp_path / "site" / "triton" / "backends" / "nvidia" / "bin"
    fake_ptxas(bin_dir, version_and_help("12.8", "12.8.93", HELP_12_8))
    if blackwell:
        os.symlink("/usr/local/cuda-13.0/bin/ptxas", bin_dir / "ptxas-blackwell")
    return bin_dir


def triton_candidate(bin_dir: Path) -> dict:
    return {"path": str(bin_dir / "ptxas"), "source": "triton", "package": "triton", "version_of_package": "3.5.0"}


# ---- parsing -------------------------------------------------------------------------------------------
def test_parse_version():
    assert toolkits.parse_version("Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0") == "13.0.88"
    assert toolkits.parse_version("Cuda compilation tools, release 12.8") == "12.8"
    assert toolkits.parse_version("hello") is None


def test_parse_gpu_names_sorts_numerically_and_keeps_only_sm():
    assert toolkits.parse_gpu_names(HELP_12_8) == ["sm_52", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_120", "sm_120a"]
    assert toolkits.parse_gpu_names("usage: ptxas [options] file") == []
    assert toolkits.parse_gpu_names("--gpu-name <gpu name>\n   no list here\n--help\n 'sm_121a'") == []


def test_judge_target():
    assert toolkits.judge_target("12.8.93", ["sm_120a"]) == (False, "help")
    assert toolkits.judge_target("12.8.93", ["sm_121a"]) == (True, "help")  # the tool's own list wins
    assert toolkits.judge_target("12.9.86", []) == (True, "version")
    assert toolkits.judge_target("12.8", []) == (False, "version")
    assert toolkits.judge_target(None, []) == (None, None)


# ---- real system ptxas -------------------------------------------------------------------------------
@needs_system_ptxas
def test_real_system_ptxas(tmp_path):
    out = toolkits.run(make_ctx(tmp_path, path_env="/usr/local/bin"))
    t = by_path(out, SYSTEM_PTXAS)
    assert t["version"] == "13.0.88"
    assert t["sm_121a"] is True and t["sm_121a_by"] == "help"
    assert {"sm_120a", "sm_121", "sm_121a", "sm_121f", "sm_90a"} <= set(t["archs"])
    assert not any(a.startswith(("compute_", "lto_")) for a in t["archs"])
    assert t["source"] == "system" and t["error"] is None and t["used_by"] == []


def test_cuda_home_from_target_env(tmp_path):
    home = tmp_path / "cuda-x"
    fake_ptxas(home / "bin", version_and_help("12.9", "12.9.86", ""))
    out = toolkits.run(make_ctx(tmp_path, env={"CUDA_HOME": str(home)}))
    t = by_path(out, home / "bin" / "ptxas")
    assert (t["version"], t["sm_121a"], t["sm_121a_by"]) == ("12.9.86", True, "version")


# ---- misbehaving ptxas: evidence, never fatal ------------------------------------------------------------
def test_hanging_ptxas_times_out_and_others_still_answer(tmp_path, monkeypatch):
    hang = fake_ptxas(tmp_path / "hang", "sleep 600")
    good = fake_ptxas(tmp_path / "good", version_and_help("13.0", "13.0.88", ""))
    only_the_hang_is_short(monkeypatch, 5.0, lambda argv: argv[0] == str(hang))  # the default, timed here
    start = time.monotonic()
    out = toolkits.run(make_ctx(tmp_path, path_env=f"{hang.parent}{os.pathsep}{good.parent}"))
    assert time.monotonic() - start < 120  # its 5 s limit, not the 600 s hang (it was held to 9 s: no room for load)
    assert "timed out after 5" in by_path(out, hang)["error"]
    assert by_path(out, hang)["version"] is None and by_path(out, hang)["sm_121a"] is None
    assert by_path(out, good)["version"] == "13.0.88"


def test_crashing_ptxas(tmp_path):
    crash = fake_ptxas(tmp_path / "crash", "kill -SEGV $$")
    t = by_path(toolkits.run(make_ctx(tmp_path, path_env=str(crash.parent))), crash)
    assert t["error"] == "ptxas was killed by SIGSEGV"


def test_garbage_ptxas(tmp_path):
    junk = fake_ptxas(tmp_path / "junk", "echo 'hello, I am not a compiler'")
    t = by_path(toolkits.run(make_ctx(tmp_path, path_env=str(junk.parent))), junk)
    assert t["error"] == "ptxas --version printed no CUDA release: hello, I am not a compiler"
    assert t["version"] is None


def test_failing_ptxas(tmp_path):
    bad = fake_ptxas(tmp_path / "bad", "echo 'error while loading shared libraries: libstdc++.so.6' >&2; exit 127")
    t = by_path(toolkits.run(make_ctx(tmp_path, path_env=str(bad.parent))), bad)
    assert t["error"].startswith("ptxas exited 127: error while loading shared libraries")


def test_not_executable(tmp_path):
    f = tmp_path / "noexec" / "ptxas"
    f.parent.mkdir()
    f.write_text("#!/bin/sh\necho release 13.0\n")
    t = by_path(toolkits.run(make_ctx(tmp_path, path_env=str(f.parent))), f)
    assert t["error"].endswith("is not executable")


def test_help_that_hangs_falls_back_to_version(tmp_path, monkeypatch):
    only_the_hang_is_short(monkeypatch, 1.0, lambda argv: argv[1:] == ["--help"])  # --version answers: 600 s
    p = fake_ptxas(tmp_path / "h", 'case "$1" in --version) echo "release 12.9, V12.9.86";; *) sleep 60;; esac')
    t = by_path(toolkits.run(make_ctx(tmp_path, path_env=str(p.parent))), p)
    assert (t["version"], t["sm_121a"], t["sm_121a_by"], t["error"]) == ("12.9.86", True, "version", None)


def test_the_collector_runner_survives_a_hang(tmp_path, monkeypatch):
    monkeypatch.setattr(toolkits, "PTXAS_TIMEOUT", 1.0)
    hang = fake_ptxas(tmp_path / "hang", "sleep 60")
    ctx = make_ctx(tmp_path, path_env=str(hang.parent))
    facts = run_collectors(ctx, [toolkits.COLLECTOR])
    assert facts.errors == []
    assert "timed out" in next(t for t in facts.toolkits if t["path"] == str(hang))["error"]


# ---- dedupe -----------------------------------------------------------------------------------------------
@needs_system_ptxas
def test_symlinks_are_one_entry_with_every_route(tmp_path):
    real = os.path.realpath("/usr/local/cuda-13.0/bin/ptxas")
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        os.symlink(real, d / "ptxas")
    pip_bin = tmp_path / "site" / "nvidia" / "cu13" / "bin"
    pip_bin.mkdir(parents=True)
    os.symlink(a / "ptxas", pip_bin / "ptxas")  # a chain of links
    cand = [{"path": str(pip_bin / "ptxas"), "source": "pip", "package": "nvidia-cuda-nvcc", "version_of_package": "13.0.88"}]
    out = toolkits.run(make_ctx(tmp_path, path_env=f"{a}{os.pathsep}{b}", candidates=cand))
    hits = [t for t in out["toolkits"] if t["realpath"] == real]
    assert len(hits) == 1
    t = hits[0]
    assert t["path"] == str(a / "ptxas")
    assert {str(a / "ptxas"), str(b / "ptxas"), str(pip_bin / "ptxas")} <= set(t["paths"])
    assert t["sources"] == ["system", "pip"] and t["source"] == "pip"
    assert (t["package"], t["package_version"]) == ("nvidia-cuda-nvcc", "13.0.88")


@needs_system_ptxas
def test_a_wrapper_script_and_the_binary_it_runs_are_one_entry(tmp_path):
    real = os.path.realpath("/usr/local/cuda-13.0/bin/ptxas")
    wrapper = fake_ptxas(tmp_path / "wrap", f'exec "{real}" "$@"')
    chained = fake_ptxas(tmp_path / "outer", f'exec {wrapper} "$@"')
    folders = [wrapper.parent, chained.parent, Path(real).parent]
    out = toolkits.run(make_ctx(tmp_path, path_env=os.pathsep.join(map(str, folders))))
    [t] = [t for t in out["toolkits"] if str(wrapper) in t["paths"]]  # not three ptxas: one binary, three routes
    assert t["realpath"] == real and t["paths"][:3] == [str(wrapper), str(chained), os.path.join(Path(real).parent, "ptxas")]
    assert t["wrappers"][:2] == [str(wrapper), str(chained)]
    assert str(chained) not in {p for other in out["toolkits"] if other is not t for p in other["paths"]}
    assert t["version"] == "13.0.88" and t["error"] is None


def test_a_wrapper_naming_two_binaries_is_its_own_entry_and_not_cached(tmp_path):
    one, two = tmp_path / "a" / "ptxas", tmp_path / "b" / "ptxas"
    for binary in (one, two):
        binary.parent.mkdir()
        shutil.copy("/bin/true", binary)
    script = fake_ptxas(tmp_path / "s", f'[ -n "$X" ] && exec {one} "$@"\n{version_and_help("13.0", "13.0.88", "")}')
    script.write_text(script.read_text() + f'\nexec {two} "$@"\n')
    out = toolkits.run(make_ctx(tmp_path, path_env=str(script.parent)))
    t = by_path(out, script)
    assert t["realpath"] == str(script.resolve()) and t["wrappers"] == [] and t["version"] == "13.0.88"
    entries = json.loads(cache_file(tmp_path).read_text())["entries"] if cache_file(tmp_path).exists() else {}
    assert str(script.resolve()) not in entries


def test_candidate_missing_on_this_machine(tmp_path):
    cand = [{"path": "/nonexistent/site-packages/nvidia/cu13/bin/ptxas", "source": "pip", "package": "nvidia-cuda-nvcc", "version_of_package": "13.0.88"}]
    out = toolkits.run(make_ctx(tmp_path, candidates=cand))
    t = next(t for t in out["toolkits"] if t["path"] == cand[0]["path"])
    assert "does not exist on this machine" in t["error"] and t["source"] == "pip"


# ---- which ptxas Triton runs -------------------------------------------------------------------------------
def triton_user(out: dict) -> list[dict]:
    return [t for t in out["toolkits"] if "triton" in t["used_by"]]


def test_triton_bundled_ptxas_before_3_6(tmp_path):
    bin_dir = triton_tree(tmp_path, blackwell=False)
    out = toolkits.run(make_ctx(tmp_path, candidates=[triton_candidate(bin_dir)]))
    [used] = triton_user(out)
    assert used["path"] == str(bin_dir / "ptxas")
    assert (used["version"], used["sm_121a"], used["source"], used["package"]) == ("12.8.93", False, "triton", "triton")


@needs_system_ptxas
def test_triton_ptxas_path_overrides_before_3_6(tmp_path):
    bin_dir = triton_tree(tmp_path, blackwell=False)
    ctx = make_ctx(tmp_path, env={"TRITON_PTXAS_PATH": SYSTEM_PTXAS}, candidates=[triton_candidate(bin_dir)])
    out = toolkits.run(ctx)
    [used] = triton_user(out)
    assert used["path"] == SYSTEM_PTXAS and used["sm_121a"] is True
    assert used["env_vars"] == ["TRITON_PTXAS_PATH"] and used["sources"] == ["env", "system"] and used["source"] == "system"
    assert by_path(out, bin_dir / "ptxas")["used_by"] == []


def test_triton_ptxas_path_that_does_not_exist_falls_back(tmp_path):
    bin_dir = triton_tree(tmp_path, blackwell=False)
    ctx = make_ctx(tmp_path, env={"TRITON_PTXAS_PATH": str(tmp_path / "gone" / "ptxas")}, candidates=[triton_candidate(bin_dir)])
    out = toolkits.run(ctx)
    gone = next(t for t in out["toolkits"] if t["source"] == "env")
    assert "does not exist on this machine (named by TRITON_PTXAS_PATH)" in gone["error"]
    assert [t["path"] for t in triton_user(out)] == [str(bin_dir / "ptxas")]


def test_triton_ptxas_path_that_prints_garbage_falls_back(tmp_path):
    bin_dir = triton_tree(tmp_path, blackwell=False)
    junk = fake_ptxas(tmp_path / "junk", "echo nonsense")
    out = toolkits.run(make_ctx(tmp_path, env={"TRITON_PTXAS_PATH": str(junk)}, candidates=[triton_candidate(bin_dir)]))
    assert [t["path"] for t in triton_user(out)] == [str(bin_dir / "ptxas")]


def test_triton_ptxas_path_from_this_process_when_the_target_env_lacks_it(tmp_path, monkeypatch):
    bin_dir = triton_tree(tmp_path, blackwell=False)
    other = fake_ptxas(tmp_path / "other", version_and_help("13.0", "13.0.88", ""))
    monkeypatch.setenv("TRITON_PTXAS_PATH", str(other))
    out = toolkits.run(make_ctx(tmp_path, candidates=[triton_candidate(bin_dir)]))
    assert [t["path"] for t in triton_user(out)] == [str(other)]


@needs_system_ptxas
def test_triton_3_6_runs_ptxas_blackwell_and_ignores_triton_ptxas_path(tmp_path):
    bin_dir = triton_tree(tmp_path, blackwell=True)
    stale = fake_ptxas(tmp_path / "stale", version_and_help("12.8", "12.8.93", HELP_12_8))
    ctx = make_ctx(tmp_path, env={"TRITON_PTXAS_PATH": str(stale)}, candidates=[triton_candidate(bin_dir)])
    out = toolkits.run(ctx)
    [used] = triton_user(out)
    assert str(bin_dir / "ptxas-blackwell") in used["paths"]  # found beside the bundled ptxas, not listed by the probe
    assert used["source"] == "triton" and used["sm_121a"] is True and used["version"] == "13.0.88"
    assert by_path(out, stale)["used_by"] == []


def test_triton_3_6_with_triton_ptxas_blackwell_path(tmp_path):
    bin_dir = triton_tree(tmp_path, blackwell=False)
    fake_ptxas(bin_dir, version_and_help("12.9", "12.9.86", ""), name="ptxas-blackwell")
    mine = fake_ptxas(tmp_path / "mine", version_and_help("13.0", "13.0.88", ""))
    ctx = make_ctx(tmp_path, env={"TRITON_PTXAS_BLACKWELL_PATH": str(mine)}, candidates=[triton_candidate(bin_dir)])
    out = toolkits.run(ctx)
    assert [t["path"] for t in triton_user(out)] == [str(mine)]
    assert by_path(out, mine)["env_vars"] == ["TRITON_PTXAS_BLACKWELL_PATH"]


def test_a_triton_fork_under_another_module_name_is_not_triton(tmp_path):
    fork_bin = tmp_path / "site" / "tokenspeed_triton" / "backends" / "nvidia" / "bin"
    fake_ptxas(fork_bin, version_and_help("13.4", "13.4.59", ""))
    bin_dir = triton_tree(tmp_path, blackwell=False)
    cand = [
        {"path": str(fork_bin / "ptxas"), "source": "triton", "package": "tokenspeed-triton", "version_of_package": "1.0"},
        triton_candidate(bin_dir),
    ]
    out = toolkits.run(make_ctx(tmp_path, candidates=cand))
    assert [t["package"] for t in triton_user(out)] == ["triton"]
    assert by_path(out, fork_bin / "ptxas")["source"] == "triton"  # still listed, just not "used by triton"


def test_no_triton_means_no_triton_user(tmp_path):
    other = fake_ptxas(tmp_path / "other", version_and_help("13.0", "13.0.88", ""))
    out = toolkits.run(make_ctx(tmp_path, env={"TRITON_PTXAS_PATH": str(other)}))
    assert triton_user(out) == []
    assert by_path(out, other)["source"] == "env"


@pytest.mark.slow
def test_real_triton_3_9_install(tmp_path, vllm032_venv):
    [bin_dir] = vllm032_venv.glob("lib/python*/site-packages/triton/backends/nvidia/bin")
    cand = [{"path": str(bin_dir / "ptxas"), "source": "triton", "package": "triton", "version_of_package": "3.9.0"}]
    out = toolkits.run(make_ctx(tmp_path, candidates=cand))
    [used] = triton_user(out)
    assert used["path"] == str(bin_dir / "ptxas-blackwell")
    assert used["version"].startswith("13.") and used["sm_121a"] is True and used["sm_121a_by"] == "help"
    legacy = by_path(out, bin_dir / "ptxas")
    assert legacy["version"].startswith("12.") and legacy["used_by"] == []


# ---- cache --------------------------------------------------------------------------------------------------
@pytest.fixture
def binary_ptxas(tmp_path):
    """A real ptxas binary at a private path (the cache only trusts files that are not wrapper scripts)."""
    # the test extra's nvidia-cuda-nvcc wheel: in every test environment, no system CUDA needed
    from sparkdoctor.kernels.tools import nvidia_wheel_bins

    src = next((b / "ptxas" for b in nvidia_wheel_bins() if os.access(b / "ptxas", os.X_OK)), None)
    assert src is not None, "no nvidia-cuda-nvcc wheel in this environment: pip install -e '.[test]'"
    dst = tmp_path / "copy" / "ptxas"
    dst.parent.mkdir()
    shutil.copy2(src, dst)
    return dst


def cache_file(tmp_path: Path) -> Path:
    return tmp_path / "cache" / toolkits.CACHE_FILE


def test_cache_is_written_and_used(tmp_path, binary_ptxas):
    toolkits.run(make_ctx(tmp_path, path_env=str(binary_ptxas.parent)))
    data = json.loads(cache_file(tmp_path).read_text())
    entry = data["entries"][str(binary_ptxas)]
    assert entry["version"] == "13.0.88" and "sm_121a" in entry["archs"]
    # A cached answer is believed while the file's size and mtime stay the same...
    entry["version"] = "13.0.1"
    cache_file(tmp_path).write_text(json.dumps(data))
    assert by_path(toolkits.run(make_ctx(tmp_path, path_env=str(binary_ptxas.parent))), binary_ptxas)["version"] == "13.0.1"
    # ...and not once the file changes.
    os.utime(binary_ptxas, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert by_path(toolkits.run(make_ctx(tmp_path, path_env=str(binary_ptxas.parent))), binary_ptxas)["version"] == "13.0.88"


def test_no_cache_asks_again_and_refreshes(tmp_path, binary_ptxas):
    toolkits.run(make_ctx(tmp_path, path_env=str(binary_ptxas.parent)))
    data = json.loads(cache_file(tmp_path).read_text())
    data["entries"][str(binary_ptxas)]["version"] = "13.0.1"
    cache_file(tmp_path).write_text(json.dumps(data))
    out = toolkits.run(make_ctx(tmp_path, path_env=str(binary_ptxas.parent), use_cache=False))
    assert by_path(out, binary_ptxas)["version"] == "13.0.88"
    assert json.loads(cache_file(tmp_path).read_text())["entries"][str(binary_ptxas)]["version"] == "13.0.88"


@pytest.mark.parametrize("junk", ["{not json", "[]", '{"schema": 99, "entries": {}}', '{"schema": 1, "entries": {"/x": 5}}'])
def test_corrupt_cache_is_ignored_and_rewritten(tmp_path, binary_ptxas, junk):
    cache_file(tmp_path).parent.mkdir(parents=True)
    cache_file(tmp_path).write_text(junk)
    out = toolkits.run(make_ctx(tmp_path, path_env=str(binary_ptxas.parent)))
    assert by_path(out, binary_ptxas)["version"] == "13.0.88"
    data = json.loads(cache_file(tmp_path).read_text())
    assert data["schema"] == toolkits.CACHE_SCHEMA and data["entries"][str(binary_ptxas)]["version"] == "13.0.88"


def test_scripts_and_failures_are_not_cached(tmp_path):
    script = fake_ptxas(tmp_path / "s", version_and_help("13.0", "13.0.88", ""))
    crash = fake_ptxas(tmp_path / "c", "kill -SEGV $$")
    toolkits.run(make_ctx(tmp_path, path_env=f"{script.parent}{os.pathsep}{crash.parent}"))
    entries = json.loads(cache_file(tmp_path).read_text())["entries"] if cache_file(tmp_path).exists() else {}
    assert str(script) not in entries and str(crash) not in entries


def test_no_cache_dir_works(tmp_path):
    p = fake_ptxas(tmp_path / "p", version_and_help("13.0", "13.0.88", ""))
    ctx = make_ctx(tmp_path, path_env=str(p.parent))
    ctx.cache_dir = None
    assert by_path(toolkits.run(ctx), p)["version"] == "13.0.88"


# ---- real pip ptxas (installs from PyPI) -----------------------------------------------------------------------
def pip_ptxas(name: str, requirement: str, inner: str) -> Path:
    python = venvs.shared_venv(name, [requirement])
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    return site / inner


@pytest.mark.slow
def test_real_pip_ptxas_12_8_does_not_know_sm_121a(tmp_path):
    path = pip_ptxas("ptxas128", "nvidia-cuda-nvcc-cu12==12.8.*", "nvidia/cuda_nvcc/bin/ptxas")
    cand = [{"path": str(path), "source": "pip", "package": "nvidia-cuda-nvcc-cu12", "version_of_package": "12.8.93"}]
    t = by_path(toolkits.run(make_ctx(tmp_path, candidates=cand)), path)
    assert t["version"].startswith("12.8.")
    assert (t["sm_121a"], t["sm_121a_by"]) == (False, "help")
    assert "sm_120a" in t["archs"] and "sm_121a" not in t["archs"]
    assert (t["source"], t["package"]) == ("pip", "nvidia-cuda-nvcc-cu12")


@pytest.mark.slow
def test_real_pip_ptxas_13_0_knows_sm_121a(tmp_path):
    path = pip_ptxas("ptxas130", "nvidia-cuda-nvcc==13.0.*", "nvidia/cu13/bin/ptxas")
    cand = [{"path": str(path), "source": "pip", "package": "nvidia-cuda-nvcc", "version_of_package": "13.0"}]
    t = by_path(toolkits.run(make_ctx(tmp_path, candidates=cand)), path)
    assert t["version"].startswith("13.0.")
    assert (t["sm_121a"], t["sm_121a_by"]) == (True, "help")


# ---- broken ptxas beside a working one, end to end -----------------------------------------------------
@needs_system_ptxas
def test_each_broken_ptxas_is_reported_on_its_own_and_the_check_still_works(tmp_path):
    """A hang, a segfault, exit 1, a garbage and a 5,000-digit version, and a stale TRITON_PTXAS_PATH,
    beside the real ptxas: `check` finishes, names each one's failure and proves the kernels with the
    good one (this once died in the fingerprint, sorting versions that were None)."""
    import subprocess

    bodies = {
        "hang": "exec sleep 60",
        "segv": "kill -SEGV $$",
        "exit1": "echo 'libnvptxcompiler.so: cannot open shared object file' >&2; exit 1",
        "garbage": "echo 'Cuda compilation tools, release banana'",
        "huge": f"echo 'Cuda compilation tools, release 1{'0' * 5000}.0, V1{'0' * 5000}.0.1'",
    }
    folders = [fake_ptxas(tmp_path / name, body).parent for name, body in bodies.items()]
    good = tmp_path / "good"
    good.mkdir()
    from sparkdoctor.kernels.tools import nvidia_wheel_bins

    real = next(b / "ptxas" for b in nvidia_wheel_bins() if os.access(b / "ptxas", os.X_OK))  # the test extra's
    os.symlink(real, good / "ptxas")
    (tmp_path / "no-config.toml").write_text("")  # an empty config: the user's own stays out
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "CUDA_HOME", "SPARKDOCTOR_"))}
    env.update(
        PATH=os.pathsep.join([*map(str, folders), str(good), "/usr/bin", "/bin"]), TRITON_PTXAS_PATH=str(tmp_path / "gone" / "ptxas"),
        SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"), SPARKDOCTOR_CONFIG=str(tmp_path / "no-config.toml"),
        PYTHONPATH=str(Path(__file__).resolve().parent.parent),
    )
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--python", sys.executable, "-f", "json", "-o", str(report)],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr  # a verdict, not an internal error (3)
    facts = json.loads(report.read_text())["facts"]
    errors = {Path(t["path"]).parent.name: t["error"] for t in facts["toolkits"] if t["error"]}
    expected = {
        "hang": "ptxas timed out after 5.0s",
        "segv": "ptxas was killed by SIGSEGV",
        "exit1": "ptxas exited 1: libnvptxcompiler.so: cannot open shared object file",
        "garbage": "ptxas --version printed no CUDA release: Cuda compilation tools, release banana",
        "huge": "ptxas --version printed no CUDA release: Cuda compilation tools, release 1000",
        "gone": f"{tmp_path / 'gone' / 'ptxas'} does not exist on this machine (named by TRITON_PTXAS_PATH)",
    }
    assert set(errors) == set(expected) and all(errors[k].startswith(v) for k, v in expected.items()), errors
    ptx = {pid: k for pid, k in facts["kernels"].items() if k["kind"] == "ptx"}
    assert ptx and {k["status"] for k in ptx.values()} == {"ok"}, {pid: k["detail"] for pid, k in ptx.items()}
    assert all(r["compiled"] and r["ptxas_version"] == "13.0.88" for k in ptx.values() for r in k["runs"])


def test_a_ptxas_that_only_a_recipes_env_names_is_listed_not_run(tmp_path):
    """recipe check's target carries the recipe's env: a ptxas reached only through it (TRITON_PTXAS_PATH, CUDA_HOME,
    a PATH folder the recipe added) is third-party code, listed with why it was not run and used by nothing; one the
    machine also reaches (here: the same file on the process's own PATH) is run and judged."""
    from sparkdoctor.conclusions.recipe_check import EnvTarget

    marker = tmp_path / "ran"
    tool = fake_ptxas(tmp_path / "cuda" / "bin", f"echo x >> {marker}\necho 'Cuda compilation tools, release 13.0, V13.0.88'")
    named = {"TRITON_PTXAS_PATH": str(tool), "CUDA_HOME": str(tmp_path / "cuda"), "PATH": f"{tool.parent}:/usr/bin"}
    ctx = make_ctx(tmp_path, env=named, path_env=named["PATH"])
    ctx.target = EnvTarget(ctx.target, named)
    [entry] = [e for e in toolkits.run(ctx)["toolkits"] if e["realpath"] == str(tool)]
    assert not marker.exists() and entry["version"] is None and entry["used_by"] == [], entry
    assert "not run: only the recipe's env names it" in entry["error"]
    ctx = make_ctx(tmp_path, env=named, path_env=f"{tool.parent}:/usr/bin")
    ctx.target = EnvTarget(ctx.target, {"TRITON_PTXAS_PATH": str(tool)})  # PATH is the machine's own here
    [entry] = [e for e in toolkits.run(ctx)["toolkits"] if e["realpath"] == str(tool)]
    assert marker.exists() and entry["version"] == "13.0.88" and entry["error"] is None, entry
