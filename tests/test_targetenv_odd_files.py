"""The target probe on broken and hostile environments: one odd file costs at most its own package.

Real fixtures, no mocks: FIFOs, /dev/zero, a 200 GB sparse file, a RECORD line past the csv
module's limit, a .pth file that prints, folders a non-root user cannot list (the probe runs as
`nobody` through runuser, since root reads everything), two wheels that ship the same path.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from sparkdoctor import matrix
from sparkdoctor.collect import Context, run_collectors, targetenv
from sparkdoctor.facts import Facts
from sparkdoctor.targets.local import PythonTarget, probe_entry
from tests.probe_modules import probe_module

PROBE = probe_entry("target_env")
SYSTEM_PYTHON = Path("/usr/bin/python3")
RUNUSER = shutil.which("runuser")
HUGE_DIGITS = "9" * 5000


# ---- fixtures ---------------------------------------------------------------------------------------


@pytest.fixture
def bare_venv(tmp_path) -> tuple[Path, Path]:
    """(python, site-packages) of a fresh venv without pip: quick, and .pth files run there."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True, timeout=120)
    python = tmp_path / "venv" / "bin" / "python"
    return python, next((tmp_path / "venv").glob("lib/python*/site-packages"))


def digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def add_dist(site: Path, name: str, version: str, files: dict[str, bytes] | None = None, write: bool = True,
             rows: list[str] | None = None) -> Path:
    """A dist-info whose RECORD lists `files` with their true hashes (written to disk if `write`)."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    record = []
    for rel, data in (files or {}).items():
        if write:
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            (site / rel).write_bytes(data)
        record.append(f"{rel},{digest(data)},{len(data)}")
    record += rows or []
    (info / "RECORD").write_text("\n".join(record + [f"{info.name}/RECORD,,"]) + "\n")
    return info


def run_probe(python: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> dict:
    done = subprocess.run([str(python), "-B", str(PROBE), "--no-cache", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def collect(python: str, monkeypatch, env: dict[str, str] | None = None) -> Facts:
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    facts = Facts(target={"kind": "python", "python": python, "chosen_by": "test"})
    run_collectors(Context(target=PythonTarget(python, "test"), facts=facts, cache_dir=None), [targetenv.COLLECTOR])
    return facts


def evaluations(facts: Facts) -> dict[str, str]:
    return {ev.entry.id: ev.outcome for ev in matrix.evaluate_all(matrix.load(), facts)}


# ---- packages that cannot be listed are unknown, not absent ------------------------------------------


@pytest.fixture
def world_readable_tmp():
    """A folder `nobody` can reach (pytest's tmp_path sits under a 0700 folder)."""
    folder = Path(tempfile.mkdtemp(prefix="sparkdoctor-nobody-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0 or RUNUSER is None or not SYSTEM_PYTHON.exists(),
                    reason="drops root for `nobody` with runuser")
@pytest.mark.parametrize("how", ["folder unreadable", "parent unsearchable"])
def test_a_site_folder_that_cannot_be_listed_makes_packages_unknown(world_readable_tmp, monkeypatch, how):
    readable = world_readable_tmp / "site"
    readable.mkdir()
    add_dist(readable, "vllm", "0.22.0", {"vllm/__init__.py": b""})
    for path in readable.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    readable.chmod(0o755)
    locked = world_readable_tmp / "locked" / "site-packages"
    locked.mkdir(parents=True)
    add_dist(locked, "torch", "2.9.0", {"torch/version.py": b"cuda = None\n"})
    (locked if how == "folder unreadable" else locked.parent).chmod(0o700)  # root's; nobody is out
    wrapper = world_readable_tmp / "python-as-nobody"
    wrapper.write_text(f'#!/bin/sh\nexec {RUNUSER} -u nobody -- {SYSTEM_PYTHON} "$@"\n')
    wrapper.chmod(0o755)

    facts = collect(str(wrapper), monkeypatch, {"PYTHONPATH": f"{readable}:{locked}"})
    assert facts.packages is None, "a folder nobody could list may hold anything"
    assert any(str(locked) in e["error"] and "unknown" in e["error"] for e in facts.errors), facts.errors
    outcomes = evaluations(facts)
    assert outcomes["torch-cpu-only-build"] == "unknown"  # torch may well be there, in the locked folder
    assert "match" not in {outcomes[i] for i in outcomes if i.startswith("torch-")}


# ---- torch's build: unknown unless version.py says ---------------------------------------------------


@pytest.mark.parametrize("how", ["missing", "a FIFO", "assigns no cuda"])
def test_torch_without_a_readable_version_py_is_unknown_not_cpu_only(bare_venv, monkeypatch, how):
    python, site = bare_venv
    add_dist(site, "torch", "2.9.0", {"torch/__init__.py": b""})
    add_dist(site, "vllm", "0.22.0", {"vllm/__init__.py": b""})
    version_py = site / "torch" / "version.py"
    if how == "a FIFO":
        os.mkfifo(version_py)
    elif how == "assigns no cuda":
        version_py.write_text("__version__ = '2.9.0'\n")
    facts = collect(str(python), monkeypatch)
    torch = facts.package("torch")
    assert torch["cuda"] is None and torch["build_error"], torch
    assert evaluations(facts)["torch-cpu-only-build"] == "unknown"


def test_torch_that_says_cuda_none_is_still_a_cpu_build(bare_venv, monkeypatch):
    python, site = bare_venv
    add_dist(site, "torch", "2.9.0", {"torch/__init__.py": b"", "torch/version.py": b"cuda: Optional[str] = None\n"})
    add_dist(site, "vllm", "0.22.0", {"vllm/__init__.py": b""})
    facts = collect(str(python), monkeypatch)
    assert "build_error" not in facts.package("torch")
    assert evaluations(facts)["torch-cpu-only-build"] == "match"


# ---- one path, two wheels: the bytes belong to the one installed last --------------------------------

MMA = "nvidia_cutlass_dsl/python_packages/cutlass/cute/nvgpu/warp/mma.py"
SO = "nvidia_cutlass_dsl/python_packages/cutlass/_mlir/_mlir_libs/_cutlass_ir.cpython-312-aarch64-linux-gnu.so"


def test_a_file_another_installed_dist_wrote_is_not_a_modification(bare_venv, monkeypatch):
    """pip install nvidia-cutlass-dsl==4.4.2, then its [cu13] extra: libs-cu13 overwrites libs-base's
    warp/mma.py and compiler library with its own bytes. Nobody edited anything."""
    python, site = bare_venv
    add_dist(site, "nvidia-cutlass-dsl", "4.4.2")
    add_dist(site, "nvidia-cutlass-dsl-libs-base", "4.4.2", {MMA: b"# libs-base mma.py\n", SO: b"\x7fELF base"})
    add_dist(site, "nvidia-cutlass-dsl-libs-cu13", "4.4.2", {MMA: b"# libs-cu13 mma.py, longer\n", SO: b"\x7fELF cu13 build"})
    facts = collect(str(python), monkeypatch)
    base, cu13 = facts.package("nvidia-cutlass-dsl-libs-base"), facts.package("nvidia-cutlass-dsl-libs-cu13")
    assert cu13["integrity"] == "ok" and cu13["files_modified"] == []
    assert base["files_modified"] == [] and base["integrity"] == "ok"
    assert base["files_overwritten"] == {MMA: "nvidia-cutlass-dsl-libs-cu13 4.4.2", SO: "nvidia-cutlass-dsl-libs-cu13 4.4.2"}
    assert facts.cutedsl["active_build"] == "libs-cu13"
    outcomes = evaluations(facts)
    assert outcomes["cutedsl-warp-mma-patched-pre-45"] == "clear"
    assert outcomes["cutedsl-base-hand-modified"] == "clear"


def test_a_shared_path_with_bytes_nobody_recorded_is_still_modified(bare_venv, monkeypatch):
    python, site = bare_venv
    add_dist(site, "nvidia-cutlass-dsl", "4.4.2")
    add_dist(site, "nvidia-cutlass-dsl-libs-base", "4.4.2", {MMA: b"# libs-base mma.py\n"})
    add_dist(site, "nvidia-cutlass-dsl-libs-cu13", "4.4.2", {MMA: b"# libs-cu13 mma.py\n"}, write=False)
    (site / MMA).write_text("# libs-base mma.py, patched to admit sm_121a\n")
    base = collect(str(python), monkeypatch).package("nvidia-cutlass-dsl-libs-base")
    assert base["files_modified"] == [MMA] and base["integrity"] == "modified"
    assert base["files_shared"] == {MMA: ["nvidia-cutlass-dsl-libs-cu13 4.4.2"]} and "files_overwritten" not in base


# ---- odd files cost one package, never the target ----------------------------------------------------


def test_a_pth_file_that_prints_does_not_hide_the_answer(bare_venv, monkeypatch):
    python, site = bare_venv
    add_dist(site, "vllm", "0.22.0", {"vllm/__init__.py": b""})
    (site / "chatty.pth").write_text("import sys; sys.stdout.write('hello from a .pth {\"not\": \"json\"}')\n")
    (site / "chattier.pth").write_text("import sys; print('a line of its own')\n")
    facts = collect(str(python), monkeypatch)
    assert facts.package("vllm")["version"] == "0.22.0"
    assert not [e for e in facts.errors if e["collector"] == "target"], facts.errors


@pytest.mark.parametrize("which", ["METADATA", "RECORD"])
@pytest.mark.parametrize("odd", ["a FIFO", "/dev/zero"])
def test_a_fifo_or_device_as_metadata_or_record_costs_only_its_package(bare_venv, which, odd):
    python, site = bare_venv
    info = add_dist(site, "vllm", "0.22.0", {"vllm/__init__.py": b""})
    add_dist(site, "triton", "3.5.0", {"triton/__init__.py": b"# fine\n"})
    (info / which).unlink()
    if odd == "a FIFO":
        os.mkfifo(info / which)
    else:
        (info / which).symlink_to("/dev/zero")
    data = run_probe(python, timeout=30)  # before: blocked on open() or read without end
    assert data["packages"]["triton"]["integrity"] == "ok"
    errors = " ".join(e["error"] for e in data["errors"])
    assert str(info) in errors and ("FIFO" in errors or "character device" in errors), errors
    if which == "RECORD":
        vllm = data["packages"]["vllm"]
        assert vllm["integrity"] == "unchecked" and vllm["files_unreadable"][0]["path"].endswith("/RECORD")
    else:  # installed all the same: the folder name says which version, never "absent"
        vllm = data["packages"]["vllm"]
        assert vllm["version"] == "0.22.0" and "not a regular file" in vllm["metadata_error"]


def test_a_record_line_past_the_csv_field_limit_costs_only_its_package(bare_venv):
    python, site = bare_venv
    add_dist(site, "vllm", "0.22.0", {"vllm/__init__.py": b""}, rows=['"vllm/' + "x" * 200_000 + '.py",sha256=AAAA,1'])
    add_dist(site, "triton", "3.5.0", {"triton/__init__.py": b"# fine\n"})
    data = run_probe(python)
    assert data["packages"]["vllm"]["integrity"] == "unchecked"
    assert any("field larger than field limit" in e["error"] for e in data["errors"]), data["errors"]
    assert data["packages"]["triton"]["integrity"] == "ok"


def test_a_200gb_sparse_file_in_a_record_is_not_hashed(bare_venv):
    python, site = bare_venv
    add_dist(site, "vllm", "0.22.0", {"vllm/__init__.py": b""}, rows=[f"vllm/huge.py,{digest(b'x')},{200 << 30}"])
    with open(site / "vllm" / "huge.py", "wb") as fh:
        fh.truncate(200 << 30)  # sparse: no disk used, but reading it would take minutes
    data = run_probe(python, "--hash-budget", "5", timeout=30)
    vllm = data["packages"]["vllm"]
    assert vllm["integrity"] == "ok" and vllm["files_modified"] == [], "its size matches RECORD; nobody edits 200 GB"
    assert data["cache"]["hashed_bytes"] < 1 << 20


def test_a_sparse_compiler_library_is_refused_not_hashed(bare_venv):
    python, site = bare_venv
    add_dist(site, "nvidia-cutlass-dsl", "4.5.0")
    add_dist(site, "nvidia-cutlass-dsl-libs-base", "4.5.0", rows=[f"{SO},{digest(b'x')},{200 << 30}"])
    (site / SO).parent.mkdir(parents=True)
    with open(site / SO, "wb") as fh:
        fh.truncate(200 << 30)
    data = run_probe(python, timeout=30)
    entry = data["cutedsl"]["files"][0]
    assert "too large to hash" in entry["error"] and data["cutedsl"]["active_build"] == "unknown"
    assert data["packages"]["nvidia-cutlass-dsl-libs-base"]["integrity"] == "unchecked"


def test_versions_and_sizes_of_thousands_of_digits(bare_venv, monkeypatch, tmp_path):
    """A version of 5,002 characters was judged live and written whole by --save-facts, and that snapshot was refused by
    --facts (over the 200 characters a snapshot's version may have): now it is clipped to the bound where it is read,
    so the live check, the saved snapshot and the snapshot read back agree."""
    from sparkdoctor.facts_shapes import CLIPPED, MAX_VERSION

    python, site = bare_venv
    info = add_dist(site, "vllm", "0.22.0", {"vllm/__init__.py": b""})
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: 1.{HUGE_DIGITS}\n")
    add_dist(site, "nvidia-cutlass-dsl", "4.5.0")
    add_dist(site, "nvidia-cutlass-dsl-libs-base", "4.5.0", rows=[f"{SO},{digest(b'x')},{HUGE_DIGITS}"])
    (site / SO).parent.mkdir(parents=True)
    (site / SO).write_bytes(b"x")
    facts = collect(str(python), monkeypatch)
    version = facts.package("vllm")["version"]
    assert len(version) == MAX_VERSION and version == f"1.{HUGE_DIGITS}"[: MAX_VERSION - 1] + CLIPPED
    assert facts.cutedsl["active_build"] == "libs-base", facts.cutedsl  # the bytes match; the size field is junk
    assert not [e for e in facts.errors if e["collector"] == "target"], facts.errors
    facts.save(tmp_path / "snap.json")
    loaded = Facts.load(tmp_path / "snap.json")
    assert loaded.package("vllm")["version"] == version and evaluations(loaded) == evaluations(facts)


def test_the_probe_never_opens_a_fifo_it_was_not_asked_about(bare_venv):
    """direct_url.json and an egg-info file are read too: a FIFO there must not block either."""
    python, site = bare_venv
    info = add_dist(site, "vllm", "0.22.0", {"vllm/__init__.py": b""})
    os.mkfifo(info / "direct_url.json")
    os.mkfifo(site / "odd.egg-info")
    data = run_probe(python, timeout=30)
    assert data["packages"]["vllm"]["integrity"] == "ok"
    assert stat.S_ISFIFO((site / "odd.egg-info").stat().st_mode)


def test_the_hash_budget_stops_inside_a_file_not_only_between_files(tmp_path):
    """A budget that runs out while one large file is read stops there (HashBudgetSpent), instead
    of reading the file to its end first."""
    targetenv_base = probe_module("target_env", "targetenv_base")
    targetenv_hashes = probe_module("target_env", "targetenv_hashes")
    big = tmp_path / "_cutlass_ir.cpython-312-aarch64-linux-gnu.so"
    with open(big, "wb") as fh:
        fh.truncate(1 << 30)  # sparse: 1 GiB of zeros to read, under the identity-hash limit
    started, cpu = time.monotonic(), time.process_time()
    with pytest.raises(targetenv_base.HashBudgetSpent):
        targetenv_hashes.hash_file(str(big), True, started + 0.05)
    assert time.process_time() - cpu < 0.5  # CPU seconds: the whole GiB would be seconds; a busy machine is not


def test_a_snapshot_sparkdoctor_saves_is_one_it_reads_back(tmp_path):
    """Whatever collector read a string past a snapshot's bound, --save-facts clips it: never a file --facts refuses."""
    facts = Facts(driver={"version": "5" * 300, "cuda": "13.0"}, env={"LONG": "x" * 1_000_001})
    facts.save(tmp_path / "snap.json")
    loaded = Facts.load(tmp_path / "snap.json")
    assert loaded.driver["version"].endswith("\u2026") and len(loaded.driver["version"]) == 200
    assert loaded.driver["cuda"] == "13.0" and len(loaded.env["LONG"]) == 1_000_000
