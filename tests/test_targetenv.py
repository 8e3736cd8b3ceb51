"""The target env probe and its collector, against real venvs with real packages from the registry.

The probe's integrity routine is exercised on real installed packages through `--track NAME`
(extra names treated like the serving stack). Tests that change files work on a private copy of
the shared venv, never on the shared one.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkdoctor.collect import CollectorError, Context, run_collectors, targetenv
from sparkdoctor.facts import Facts
from sparkdoctor.locations import data_dir
from sparkdoctor.targets import probe as target_probe
from sparkdoctor.targets.early import HASH_BUDGET, hash_cache_file
from sparkdoctor.targets.local import PythonTarget
from tests import venvs

PROBE = data_dir("probes") / "target_env" / "__main__.py"
SMALL = ["six==1.17.0", "idna==3.10", "packaging==24.2"]

TORCH_VERSION_PY = """from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']
__version__ = '2.13.0+cu130'
debug = False
{cuda_line}
git_version = 'cf30153c4c131c8164ee7798e5022d810682e2cb'
hip: Optional[str] = None
rocm: Optional[str] = None
xpu: Optional[str] = None
"""


# ---- helpers ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_python() -> Path:
    return venvs.shared_venv("targetenv-small", SMALL)


@pytest.fixture
def venv(tmp_path, small_python) -> Path:
    """A private copy of the small venv (its python) that a test may change."""
    src = small_python.parent.parent
    dst = tmp_path / "venv"
    shutil.copytree(src, dst, symlinks=True)
    return dst / "bin" / "python"


def site_of(python: Path) -> Path:
    return next(python.parent.parent.glob("lib/python*/site-packages"))


def probe(python: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> dict:
    full_env = dict(os.environ)
    full_env.update(env or {})
    done = subprocess.run(
        [str(python), "-B", str(PROBE), *args], capture_output=True, text=True, timeout=timeout, env=full_env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().count("\n") == 0, "one JSON object on one line"
    return json.loads(done.stdout)


def error_lines(data: dict) -> list[str]:
    return [e["error"] for e in data["errors"]]


def write_dist(site: Path, name: str, version: str, metadata: str | None, record: list[str] | None = None) -> Path:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    if metadata is not None:
        (info / "METADATA").write_text(metadata)
    if record is not None:
        (info / "RECORD").write_text("\n".join(record) + "\n")
    return info


def record_row(site: Path, rel: str) -> str:
    data = (site / rel).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(data)}"


def same_size_edit(path: Path) -> None:
    """Change one byte without changing the size (the edit a 'mod' makes to a constant)."""
    data = path.read_bytes()
    i = data.index(b"e")
    path.write_bytes(data[:i] + b"E" + data[i + 1 :])
    assert path.stat().st_size == len(data)


# ---- what is reported -------------------------------------------------------------------------------------------
def test_lists_real_packages_with_versions_and_locations(small_python):
    data = probe(small_python, "--no-cache")
    site = str(site_of(small_python))
    pkgs = data["packages"]
    assert pkgs["six"] == {"name": "six", "version": "1.17.0", "location": site}
    assert pkgs["idna"]["version"] == "3.10" and pkgs["packaging"]["version"] == "24.2"
    assert "pip" in pkgs  # every distribution, not only the ones asked about
    assert all("integrity" not in p for p in pkgs.values()), "nothing here is tracked"
    t = data["target"]
    assert t["version"] == "{}.{}.{}".format(*sys.version_info[:3])
    assert t["is_venv"] is True and t["prefix"] == str(small_python.parent.parent)
    assert t["implementation"] == "cpython"
    assert set(data["host"]) == {"os", "machine", "kernel"} and data["host"]["machine"] == os.uname().machine
    assert data["cutedsl"]["active_build"] is None and data["cutedsl"]["installed_builds"] == []
    assert data["errors"] == []


IMPORTLIB_LIST = """
import importlib.metadata as md, json, re
found = {}
for d in md.distributions():
    name = d.metadata["Name"]
    if name:
        found.setdefault(re.sub(r"[-_.]+", "-", name).lower(), [d.version, str(d.locate_file(""))])
print(json.dumps(found))
"""


@pytest.mark.parametrize("which", ["small", pytest.param("vllm032", marks=pytest.mark.slow)])
def test_discovery_agrees_with_importlib_metadata(request, which):
    """The probe finds distributions itself (importing importlib.metadata costs more than the rest)."""
    if which == "small":
        python = request.getfixturevalue("small_python")
    else:
        python = request.getfixturevalue("vllm032_venv") / "bin" / "python"
    done = subprocess.run([str(python), "-B", "-c", IMPORTLIB_LIST], capture_output=True, text=True, timeout=60, cwd="/")
    expected = json.loads(done.stdout)
    got = {k: [p["version"], p["location"]] for k, p in probe(python)["packages"].items()}
    assert got == expected and len(got) > 3


def test_untouched_tracked_packages_are_ok(small_python):
    data = probe(small_python, "--no-cache", "--track", "six", "--track", "IDNA")
    for name in ("six", "idna"):
        p = data["packages"][name]
        assert (p["integrity"], p["files_modified"], p["files_missing"]) == ("ok", [], [])
        assert p["files_checked"] >= 2
    assert "integrity" not in data["packages"]["packaging"]


def test_direct_url_says_where_a_tracked_package_came_from(venv):
    site = site_of(venv)
    info = next(site.glob("idna-*.dist-info"))
    (info / "direct_url.json").write_text(json.dumps({"url": "file:///src/idna", "dir_info": {"editable": True}}))
    (next(site.glob("six-*.dist-info")) / "direct_url.json").write_text(
        json.dumps({"url": "https://github.com/benjaminp/six", "vcs_info": {"vcs": "git", "commit_id": "abc123"}})
    )
    pkgs = probe(venv, "--no-cache", "--track", "idna", "--track", "six", "--track", "packaging")["packages"]
    assert pkgs["idna"]["direct_url"] == {"url": "file:///src/idna", "editable": True, "commit": None}
    assert pkgs["six"]["direct_url"] == {"url": "https://github.com/benjaminp/six", "editable": False, "commit": "abc123"}
    assert "direct_url" not in pkgs["packaging"], "an index install has none"


def test_same_size_edit_and_size_change_are_modified(venv):
    site = site_of(venv)
    same_size_edit(site / "idna" / "core.py")
    with open(site / "six.py", "a") as fh:
        fh.write("\n# patched by a mod\n")
    data = probe(venv, "--no-cache", "--track", "six", "--track", "idna", "--track", "packaging")
    assert data["packages"]["idna"]["files_modified"] == ["idna/core.py"]
    assert data["packages"]["six"]["files_modified"] == ["six.py"]
    assert data["packages"]["idna"]["integrity"] == data["packages"]["six"]["integrity"] == "modified"
    assert data["packages"]["packaging"]["integrity"] == "ok"


def test_a_file_two_wheels_ship_is_reported_as_shared(venv):
    site = site_of(venv)
    write_dist(site, "six-fork", "9.0", "Metadata-Version: 2.1\nName: six-fork\nVersion: 9.0\n", ["six.py,sha256=AAAA,10", "x/six.py,sha256=BBBB,5"])
    (site / "six.py").write_text("# the fork's six.py won\n")
    data = probe(venv, "--no-cache", "--track", "six", "--track", "idna")
    six = data["packages"]["six"]
    assert six["files_modified"] == ["six.py"] and six["files_shared"] == {"six.py": ["six-fork 9.0"]}
    assert "files_shared" not in data["packages"]["idna"]


def test_deleted_file_is_missing(venv):
    site = site_of(venv)
    (site / "idna" / "idnadata.py").unlink()
    p = probe(venv, "--no-cache", "--track", "idna")["packages"]["idna"]
    assert (p["integrity"], p["files_missing"], p["files_modified"]) == ("modified", ["idna/idnadata.py"], [])


def test_directory_and_broken_symlink_are_reported_per_file(venv):
    site = site_of(venv)
    (site / "idna" / "codec.py").unlink()
    (site / "idna" / "codec.py").mkdir()
    (site / "idna" / "compat.py").unlink()
    (site / "idna" / "compat.py").symlink_to(site / "idna" / "nowhere.py")
    data = probe(venv, "--no-cache", "--track", "idna", "--track", "six")
    p = data["packages"]["idna"]
    reasons = {u["path"]: u["error"] for u in p["files_unreadable"]}
    assert reasons == {"idna/codec.py": "a directory where RECORD lists a file", "idna/compat.py": "broken symlink"}
    assert p["integrity"] == "modified" and set(p["files_modified"]) == {"idna/codec.py", "idna/compat.py"}
    assert data["packages"]["six"]["integrity"] == "ok", "one bad package does not stop the rest"


def test_corrupt_dist_info_is_an_error_line_and_the_rest_is_reported(venv):
    site = site_of(venv)
    no_meta = write_dist(site, "ghost", "1.0", None)
    garbage = write_dist(site, "noise", "2.0", "\x00\x01\x02 not a header block\n\xff")
    data = probe(venv, "--no-cache")
    lines = error_lines(data)
    assert any(str(no_meta) in line and "METADATA" in line for line in lines), lines
    assert any(str(garbage) in line and "no Name" in line for line in lines), lines
    assert "ghost" not in data["packages"] and "noise" not in data["packages"]
    assert data["packages"]["six"]["version"] == "1.17.0"


def test_stale_second_dist_info_is_reported(venv):
    site = site_of(venv)
    write_dist(site, "six", "1.16.0", "Metadata-Version: 2.1\nName: six\nVersion: 1.16.0\n")
    data = probe(venv, "--no-cache")
    assert any("two metadata folders for six" in line for line in error_lines(data))
    assert data["packages"]["six"]["version"] in ("1.16.0", "1.17.0")


def test_broken_torch_is_reported_without_a_crash(venv):
    site = site_of(venv)
    write_dist(
        site,
        "torch",
        "2.13.0+cu130",
        "Metadata-Version: 2.4\nName: torch\nVersion: 2.13.0+cu130\nSummary: Tensors\n\nlong description\n",
        ["torch/version.py,sha256=AAAA,321", "torch-2.13.0+cu130.dist-info/RECORD,,"],
    )
    data = probe(venv, "--no-cache")
    torch = data["packages"]["torch"]
    assert torch["version"] == "2.13.0+cu130"
    assert torch["cuda"] is None
    assert torch["integrity"] == "modified" and torch["files_missing"] == ["torch/version.py"]
    assert any("torch/version.py" in line for line in error_lines(data))


@pytest.mark.parametrize(
    "cuda_line, expected",
    [
        ("cuda = '13.0'", "13.0"),
        ("cuda: Optional[str] = '13.0'", "13.0"),
        ('cuda: Optional[str] = "12.9"', "12.9"),
        ("cuda: Optional[str] = None", None),
    ],
)
def test_torch_cuda_is_read_from_version_py_as_text(venv, cuda_line, expected):
    site = site_of(venv)
    (site / "torch").mkdir()
    (site / "torch" / "version.py").write_text(TORCH_VERSION_PY.format(cuda_line=cuda_line))
    # A torch that would fail on import proves it is read, not imported.
    (site / "torch" / "__init__.py").write_text("raise SystemExit('imported!')\n")
    write_dist(
        site,
        "torch",
        "2.13.0",
        "Metadata-Version: 2.4\nName: torch\nVersion: 2.13.0\n",
        [record_row(site, "torch/version.py"), record_row(site, "torch/__init__.py")],
    )
    torch = probe(venv, "--no-cache")["packages"]["torch"]
    assert torch["cuda"] == expected
    assert torch["git_version"] == "cf30153c4c131c8164ee7798e5022d810682e2cb"
    assert torch["integrity"] == "ok"


def test_env_is_filtered_and_secrets_redacted(small_python):
    env = {
        "VLLM_API_KEY": "sk-secret",
        "VLLM_USE_V1": "1",
        "CUTE_DSL_ARCH": "sm_121a",
        "TRITON_PTXAS_BLACKWELL_PATH": "/usr/local/cuda/bin/ptxas",
        "TORCH_CUDA_ARCH_LIST": "12.1a",
        "VLLM_HF_TOKEN": "hf_abc",
        "VLLM_AUTH_HEADER": "Bearer x",
        "HF_TOKEN": "hf_not_ours",
        "SOMETHING_ELSE": "x",
    }
    got = probe(small_python, "--no-cache", env=env)["env"]
    assert got["VLLM_API_KEY"] == got["VLLM_HF_TOKEN"] == got["VLLM_AUTH_HEADER"] == "<redacted>"
    assert got["VLLM_USE_V1"] == "1" and got["CUTE_DSL_ARCH"] == "sm_121a" and got["TORCH_CUDA_ARCH_LIST"] == "12.1a"
    assert got["TRITON_PTXAS_BLACKWELL_PATH"] == "/usr/local/cuda/bin/ptxas"
    assert "HF_TOKEN" not in got and "SOMETHING_ELSE" not in got
    assert "sk-secret" not in json.dumps(got)


def test_pip_config_files_follow_pips_rules(small_python, tmp_path):
    xdg = tmp_path / "xdg"
    (xdg / "pip").mkdir(parents=True)
    (xdg / "pip" / "pip.conf").write_text("[global]\nconstraint = /c.txt\n")
    home = tmp_path / "home"
    (home / ".config" / "pip").mkdir(parents=True)
    (home / ".config" / "pip" / "pip.conf").write_text("[install]\nno-deps = true\n")
    base = {"XDG_CONFIG_DIRS": str(xdg), "HOME": str(home), "XDG_CONFIG_HOME": ""}
    files = probe(small_python, "--no-cache", env=base)["pip_config_files"]
    paths = [f["path"] for f in files]
    assert str(xdg / "pip" / "pip.conf") in paths and str(home / ".config" / "pip" / "pip.conf") in paths
    assert next(f for f in files if f["path"].startswith(str(xdg)))["text"].startswith("[global]\nconstraint")
    # PIP_CONFIG_FILE that exists replaces the user files; os.devnull turns all config off.
    env_file = tmp_path / "env.conf"
    env_file.write_text("[global]\nindex-url = http://x\n")
    files = probe(small_python, "--no-cache", env={**base, "PIP_CONFIG_FILE": str(env_file)})["pip_config_files"]
    kinds = {f["path"]: f["kind"] for f in files}
    assert kinds[str(env_file)] == "env" and str(home / ".config" / "pip" / "pip.conf") not in kinds
    assert probe(small_python, "--no-cache", env={**base, "PIP_CONFIG_FILE": os.devnull})["pip_config_files"] == []
    data = probe(small_python, "--no-cache", env={**base, "PATH": "/opt/x/bin:/usr/bin"})
    assert data["path_env"] == "/opt/x/bin:/usr/bin"


# ---- hash cache ------------------------------------------------------------------------------------------------
def test_hash_cache_is_used_and_never_stale(venv, tmp_path):
    cache = tmp_path / "c" / "hashes.json"
    args = ["--cache", str(cache), "--track", "idna", "--track", "six"]
    first = probe(venv, *args)
    assert first["cache"]["hashed_files"] > 5 and first["cache"]["saved"] and cache.exists()
    second = probe(venv, *args)
    assert second["cache"]["loaded"] and second["cache"]["hashed_files"] == 0 and not second["cache"]["saved"]
    assert second["packages"]["idna"]["integrity"] == "ok"

    target = site_of(venv) / "idna" / "core.py"
    before = target.stat().st_mtime_ns
    same_size_edit(target)
    os.utime(target, ns=(before + 10**9, before + 10**9))  # a later mtime, same size
    third = probe(venv, *args)
    assert third["cache"]["hashed_files"] == 1, "only the changed file is read again"
    assert third["packages"]["idna"]["files_modified"] == ["idna/core.py"]
    assert third["packages"]["six"]["integrity"] == "ok"

    shutil.copy2(site_of(Path(venvs.shared_venv("targetenv-small", SMALL))) / "idna" / "core.py", target)
    os.utime(target, ns=(before + 2 * 10**9, before + 2 * 10**9))
    fourth = probe(venv, *args)
    assert fourth["cache"]["hashed_files"] == 1 and fourth["packages"]["idna"]["integrity"] == "ok"


def test_a_same_size_edit_with_its_mtime_put_back_is_hashed_again(venv, tmp_path):
    """The cache key holds ctime too: one byte changed in a cached-clean file with its size kept AND its
    mtime put back (`touch -r`, os.utime) moves the ctime, which no program can set back, so the warm
    run reads that file again and sees the edit. (Size-only files, the binaries, are outside this:
    a same-size edit of one is not seen; only hashing every binary on every run would see it.)"""
    cache = tmp_path / "hashes.json"
    args = ["--cache", str(cache), "--track", "idna"]
    assert probe(venv, *args)["packages"]["idna"]["integrity"] == "ok"
    target = site_of(venv) / "idna" / "core.py"
    st = target.stat()
    same_size_edit(target)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    warm = probe(venv, *args)
    assert warm["cache"]["hashed_files"] == 1 and warm["packages"]["idna"]["files_modified"] == ["idna/core.py"]


def test_cache_file_keeps_no_verdict_across_a_touch_without_change(venv, tmp_path):
    """A file whose mtime moved but bytes did not is re-hashed once and stays ok."""
    cache = tmp_path / "hashes.json"
    args = ["--cache", str(cache), "--track", "six"]
    probe(venv, *args)
    six = site_of(venv) / "six.py"
    st = six.stat()
    os.utime(six, ns=(st.st_atime_ns, st.st_mtime_ns + 5))
    again = probe(venv, *args)
    assert again["cache"]["hashed_files"] == 1 and again["packages"]["six"]["integrity"] == "ok"


@pytest.mark.parametrize("content", ["{not json", '{"format": 4, "files": [], "verdicts": 7}', '["x"]', ""])
def test_corrupt_cache_is_ignored_and_rewritten(venv, tmp_path, content):
    cache = tmp_path / "hashes.json"
    args = ["--cache", str(cache), "--track", "idna"]
    probe(venv, *args)
    cache.write_text(content)
    (tmp_path / "hashes.json.files").write_text("garbage\n@nothing\n")
    data = probe(venv, *args)
    assert not data["cache"]["loaded"] and data["cache"]["hashed_files"] > 5 and data["cache"]["saved"]
    assert data["packages"]["idna"]["integrity"] == "ok"
    assert json.loads(cache.read_text())["format"] == 4
    assert probe(venv, *args)["cache"]["hashed_files"] == 0


def test_a_kept_verdict_of_another_shape_is_hashed_again_never_reported(venv, tmp_path):
    """A verdict whose signature still matches but whose list of modified files holds no strings (another
    version's cache, a hand edit) was reported as the package's modified files. Now it is a miss: hashed again."""
    cache = tmp_path / "hashes.json"
    args = ["--cache", str(cache), "--track", "idna"]
    probe(venv, *args)
    data = json.loads(cache.read_text())
    for verdict in data["verdicts"].values():
        verdict["modified"] = [1, None]
    cache.write_text(json.dumps(data))
    got = probe(venv, *args)["packages"]["idna"]
    assert got["integrity"] == "ok" and not got.get("files_modified"), got


def test_corrupt_table_with_a_valid_index_never_gives_a_stale_ok(venv, tmp_path):
    cache = tmp_path / "hashes.json"
    args = ["--cache", str(cache), "--track", "idna"]
    probe(venv, *args)
    table = tmp_path / "hashes.json.files"
    table.write_text(table.read_text().replace("\t", "\tx", 3))
    target = site_of(venv) / "idna" / "core.py"
    before = target.stat().st_mtime_ns
    same_size_edit(target)
    os.utime(target, ns=(before + 10**9, before + 10**9))
    data = probe(venv, *args)
    assert data["packages"]["idna"]["files_modified"] == ["idna/core.py"]


def test_no_cache_rehashes_and_rewrites(venv, tmp_path):
    cache = tmp_path / "hashes.json"
    args = ["--cache", str(cache), "--track", "idna"]
    probe(venv, *args)
    cache.write_text('{"format": 4, "files": {}, "verdicts": {}}')
    data = probe(venv, *args, "--no-cache")
    assert data["cache"]["hashed_files"] > 5 and data["cache"]["saved"]
    assert json.loads(cache.read_text())["verdicts"], "rewritten with fresh verdicts"


def test_hash_budget_leaves_packages_unverified_and_the_next_run_goes_on(venv, tmp_path):
    site = site_of(venv)
    with open(site / "six.py", "a") as fh:
        fh.write("# size changed\n")
    cache = tmp_path / "hashes.json"
    args = ["--cache", str(cache), "--track", "idna", "--track", "six"]
    spent = probe(venv, *args, "--hash-budget", "0")
    idna, six = spent["packages"]["idna"], spent["packages"]["six"]
    assert idna["integrity"] == "unchecked" and idna["files_unverified"] > 5
    assert six["integrity"] == "modified" and six["files_modified"] == ["six.py"], "stat-only findings still count"
    [line] = [e for e in error_lines(spent) if "budget" in e]
    assert "idna" in line and "six" in line
    assert spent["cache"]["hashed_files"] == 0
    full = probe(venv, *args)
    assert full["packages"]["idna"]["integrity"] == "ok" and "files_unverified" not in full["packages"]["idna"]
    assert not [e for e in error_lines(full) if "budget" in e]


def _oldest_python() -> tuple[str, tuple[int, int]]:
    """The oldest Python >= 3.8 this machine has (the probes promise 3.8+); at worst this one."""
    found = {sys.version_info[:2]: sys.executable}
    for minor in range(8, sys.version_info[1]):
        for exe in (shutil.which(f"python3.{minor}"), *map(str, Path.home().glob(f".pyenv/versions/3.{minor}.*/bin/python"))):
            # a pyenv shim of a version that is not selected exits non-zero: only interpreters that run
            if exe and subprocess.run([exe, "-c", "pass"], capture_output=True, timeout=30).returncode == 0:
                found.setdefault((3, minor), exe)
                break
    oldest = min(found)
    return found[oldest], oldest


def test_probe_runs_under_the_oldest_python_here(small_python):
    python, (major, minor) = _oldest_python()
    data = probe(Path(python), "--no-cache", "--track", "pip")
    assert data["target"]["version"].startswith(f"{major}.{minor}.")
    assert "pip" in data["packages"] and data["packages"]["pip"]["integrity"] in ("ok", "modified")


# ---- the collector ------------------------------------------------------------------------------------------------
@pytest.fixture
def answers_are_waited_for(monkeypatch):
    """The probe's 15 s and the interpreter's 3 s ping are wall-clock: an interpreter (or a stand-in) that answers must
    not time out on a loaded machine. The hang test sets its own short limit."""
    from sparkdoctor.targets import local

    monkeypatch.setattr(targetenv, "PROBE_TIMEOUT", 600.0)
    monkeypatch.setattr(local, "PING_TIMEOUT", 600.0)


# the collector's own 20 s is wall-clock too: the tests that expect an answer lift it
ANSWERING = dataclasses.replace(targetenv.COLLECTOR, timeout=600.0)


def make_ctx(python: str, tmp_path: Path, use_cache: bool = True) -> Context:
    target = PythonTarget(python, "--python")
    facts = Facts()
    facts.target = target.describe()
    return Context(target=target, facts=facts, cache_dir=tmp_path / "cache", use_cache=use_cache)


def test_collector_end_to_end_through_python_target(venv, tmp_path, answers_are_waited_for):
    site = site_of(venv)
    write_dist(site, "ghost", "1.0", None)
    ctx = make_ctx(str(venv), tmp_path)
    run_collectors(ctx, [ANSWERING])
    facts = ctx.facts
    assert facts.target["chosen_by"] == "--python" and facts.target["python"] == str(venv)
    assert facts.target["kind"] == "python" and facts.target["version"] == "{}.{}.{}".format(*sys.version_info[:3])
    assert facts.package("six") == {"name": "six", "version": "1.17.0", "location": str(site)}
    assert facts.host["machine"] == os.uname().machine
    assert facts.cutedsl["active_build"] is None and isinstance(facts.env, dict)
    assert any(e["collector"] == "target_env" and "ghost" in e["error"] for e in facts.errors)
    assert set(targetenv.SCRATCH_KEYS) <= set(ctx.scratch)
    cache = Path(hash_cache_file(str(tmp_path / "cache"), str(venv)))
    assert cache.exists() and cache.parent.name == "hashes"
    assert re.fullmatch(r"[0-9a-f]{16}\.json", cache.name)


def test_collector_no_cache_passes_through(venv, tmp_path):
    ctx = make_ctx(str(venv), tmp_path, use_cache=False)
    args, warning = target_probe.probe_args(ctx.target, ctx.cache_dir, ctx.use_cache)
    assert args[-1] == "--no-cache" and warning is None
    assert target_probe.probe_args(ctx.target, None, False) == (["--hash-budget", str(HASH_BUDGET)], None)


def test_prestarted_probe_is_used_and_gives_the_same_facts(venv, tmp_path, answers_are_waited_for):
    """check starts the probe before importing the rest of sparkdoctor; the collector then only waits."""
    live = make_ctx(str(venv), tmp_path)
    expected = targetenv.run(live)
    early = make_ctx(str(venv), tmp_path)
    early.scratch[targetenv.PRESTART_KEY] = targetenv.prestart(early.target, early.cache_dir, early.use_cache)
    got = targetenv.run(early)
    assert targetenv.PRESTART_KEY not in early.scratch, "consumed"
    assert got["packages"] == expected["packages"] and got["env"] == expected["env"]


def fake_interpreter(tmp_path: Path, body: str) -> str:
    script = tmp_path / "fakepython"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize(
    "body, words",
    [
        ("echo 'Fatal Python error: init_fs_encoding' >&2; exit 1", "exited 1: Fatal Python error"),
        ("kill -SEGV $$", "SIGSEGV"),
        ("echo hello", "does not run as a Python interpreter: asked for its version (-c), it exited 0 and printed 'hello'"),
        ("echo '[1, 2]'", "not an object"),
        ("echo '{\"target\": {}}'", "no package list"),
    ],
)
def test_probe_that_crashes_is_one_collector_error_line(tmp_path, body, words, answers_are_waited_for):
    ctx = make_ctx(fake_interpreter(tmp_path, body), tmp_path)
    with pytest.raises(CollectorError) as info:
        targetenv.run(ctx)
    message = str(info.value)
    assert words in message and "\n" not in message


def test_probe_that_hangs_times_out_and_packages_stay_unknown(tmp_path, monkeypatch):
    monkeypatch.setattr(targetenv, "PROBE_TIMEOUT", 1.0)
    ctx = make_ctx(fake_interpreter(tmp_path, "sleep 30"), tmp_path)
    started = time.monotonic()
    run_collectors(ctx, [targetenv.COLLECTOR])
    assert time.monotonic() - started < 20  # its 1 s limit, not the 30 s sleep; room for a loaded machine
    assert ctx.facts.packages is None
    [err] = [e for e in ctx.facts.errors if e["collector"] == "target"]
    assert "timed out" in err["error"] and "\n" not in err["error"]


# ---- CuTe DSL >= 4.6 layout (one compiler per CUDA major), built offline -----------------------------------------
def bare_venv(tmp_path: Path) -> Path:
    """A venv without pip: offline, so it also works on the GPU machine."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True, timeout=60)
    return tmp_path / "bare" / "bin" / "python"


def flavoured_cutedsl(python: Path, version: str = "4.8.0") -> dict[int, Path]:
    """The 4.6+ wheel layout: libs-cu12 and libs-cu13 each ship _cutlass_ir.cu<N>.*.so (contents are
    stand-ins carrying the release banner the real compiler embeds)."""
    site = site_of(python)
    mlir = site / "nvidia_cutlass_dsl" / "dsl_packages" / "cutlass" / "_mlir" / "_mlir_libs"
    mlir.mkdir(parents=True)
    write_dist(site, "nvidia-cutlass-dsl", version, f"Metadata-Version: 2.1\nName: nvidia-cutlass-dsl\nVersion: {version}\n", [])
    files = {}
    for major, release in ((12, "12.9, V12.9.86"), (13, "13.4, V13.4.59")):
        so = mlir / f"_cutlass_ir.cu{major}.cpython-311-x86_64-linux-gnu.so"
        so.write_bytes(b"\x7fELF" + b"\0" * 3000 + f"Cuda compilation tools, release {release}".encode() + b"\0" * 100)
        name = f"nvidia-cutlass-dsl-libs-cu{major}"
        write_dist(site, name, version, f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", [record_row(site, str(so.relative_to(site)))])
        files[major] = so
    return files


def test_flavoured_layout_both_intact(tmp_path):
    python = bare_venv(tmp_path)
    flavoured_cutedsl(python)
    cute = probe(python, "--no-cache")["cutedsl"]
    assert cute["installed_builds"] == ["libs-cu12", "libs-cu13"]
    assert "cu12 intact" in cute["evidence"] and "cu13 intact" in cute["evidence"]
    assert {f["flavor"]: f["cuda_release"] for f in cute["files"]} == {12: "12.9", 13: "13.4"}
    assert (cute["active_build"], cute["bundled_cuda"]) == ("libs-cu13", "13.4")  # no driver, or a CUDA 13 one


def test_flavoured_layout_with_a_corrupt_chosen_build_is_unknown(tmp_path):
    python = bare_venv(tmp_path)
    files = flavoured_cutedsl(python)
    data = bytearray(files[13].read_bytes())
    data[10] = 1
    files[13].write_bytes(bytes(data))
    cute = probe(python, "--no-cache")["cutedsl"]
    assert cute["active_build"] == "unknown" and "cu13 matches no RECORD" in cute["evidence"]
    assert "cu12 intact" in cute["evidence"]


def test_flavoured_compiler_nobody_records_is_listed(tmp_path):
    python = bare_venv(tmp_path)
    files = flavoured_cutedsl(python)
    orphan = files[13].with_name("_cutlass_ir.cu14.cpython-311-x86_64-linux-gnu.so")
    shutil.copy(files[13], orphan)
    cute = probe(python, "--no-cache")["cutedsl"]
    entry = next(f for f in cute["files"] if f["path"] == str(orphan))
    assert entry["matches"] == [] and entry["flavor"] == 14
    if "no CUDA driver here" in cute["evidence"]:  # the loader would take the newest: the orphan
        assert cute["active_build"] == "unknown" and "cu14 matches no RECORD" in cute["evidence"]


@pytest.mark.gpu
def test_flavoured_layout_is_chosen_by_the_real_driver(tmp_path):
    python = bare_venv(tmp_path)
    flavoured_cutedsl(python)
    cute = probe(python, "--no-cache")["cutedsl"]
    match = re.search(r"the driver reports CUDA (\d+)\.(\d+), so the loader picks cu(\d+)", cute["evidence"])
    assert match, cute["evidence"]
    assert int(match.group(3)) == min(13, int(match.group(1)))
    assert cute["active_build"] == f"libs-cu{match.group(3)}"


# ---- a real vLLM venv (read-only) -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_real_vllm_venv(tmp_path, vllm032_venv):
    python = vllm032_venv / "bin" / "python"
    cache = tmp_path / "hashes.json"
    started = time.monotonic()
    cold = probe(python, "--cache", str(cache))
    cold_s = time.monotonic() - started
    started = time.monotonic()
    warm = probe(python, "--cache", str(cache))
    warm_s = time.monotonic() - started
    print(f"vllm032 probe: cold {cold_s:.2f}s, warm {warm_s:.2f}s")
    assert warm["cache"]["hashed_files"] == 0 and cold["cache"]["hashed_files"] > 10000
    assert json.dumps(cold["packages"], sort_keys=True) == json.dumps(warm["packages"], sort_keys=True)
    pkgs = warm["packages"]
    torch = pkgs["torch"]
    assert torch["version"] == "2.13.0+cpu" and torch["cuda"] is None and re.fullmatch(r"[0-9a-f]{40}", torch["git_version"])
    # torch's C++ SDK headers (torch/include, ~9k files) are skipped; its Python files are all checked
    assert torch["integrity"] == "ok" and 2371 <= torch["files_checked"] < 5000
    assert pkgs["vllm"]["version"] == "0.32.0" and pkgs["vllm"]["integrity"] == "ok"
    assert pkgs["triton"]["integrity"] == "ok" and pkgs["flashinfer-python"]["integrity"] == "ok"
    # flashinfer-python and torch-c-dlpack-ext both ship a top-level build_backend.py: a wheel collision. Which copy
    # is on disk depends on the installer's order (uv installs wheels in parallel: both orders were seen, one on a
    # fresh HOME at load 4): the dist whose RECORD the bytes match owns it, the other's copy is overwritten, and
    # neither is hand-modified.
    from packaging.utils import canonicalize_name

    pair = {name: pkgs[name] for name in ("torch-c-dlpack-ext", "flashinfer-python")}
    lost = [name for name, row in pair.items() if row.get("files_overwritten")]
    assert len(lost) == 1, pair
    (owner,) = set(pair) - set(lost)
    by = pair[lost[0]]["files_overwritten"]
    name, version = by["build_backend.py"].split()
    assert list(by) == ["build_backend.py"] and canonicalize_name(name) == owner and version == pair[owner]["version"], by
    assert pair[lost[0]]["files_shared"] == {"build_backend.py": [by["build_backend.py"]]}
    assert not any(row.get("files_modified") for row in pair.values())
    cute = warm["cutedsl"]
    assert set(cute["installed_builds"]) == {"libs-base", "libs-core", "libs-cu12", "libs-cu13"}
    assert cute["active_build"] == "libs-cu13" and cute["bundled_cuda"] == "13.4"
    assert "cu12 intact" in cute["evidence"] and "cu13 intact" in cute["evidence"]
    releases = {f["flavor"]: f["cuda_release"] for f in cute["files"]}
    assert releases == {12: "12.9", 13: "13.4"}
    assert re.fullmatch(r"[0-9a-f]{64}", cute["sha256"])
    ptxas = {(c["source"], c["package"], c["binary"]): c["path"] for c in warm["ptxas_candidates"]}
    site = str(next(vllm032_venv.glob("lib/python*/site-packages")))
    assert ptxas[("pip", "nvidia-cuda-nvcc", "ptxas")] == site + "/nvidia/cu13/bin/ptxas"
    assert ptxas[("triton", "triton", "ptxas-blackwell")] == site + "/triton/backends/nvidia/bin/ptxas-blackwell"
    assert ("triton", "tokenspeed-triton", "ptxas") in ptxas
    assert warm["errors"] == []


def test_one_install_with_a_dist_info_and_an_egg_info_of_one_version_is_no_stale_leftover(venv, tmp_path):
    """Debian's python3-cryptography ships cryptography-38.0.4.dist-info and cryptography.egg-info, both 38.0.4: a
    container's system python showed 'two metadata folders ... left over from an upgrade' under 'could not observe'.
    The egg-info is written as setuptools' `egg_info` writes it (no setuptools is needed: Python 3.12's venvs have
    none), beside pip's six 1.17.0 dist-info. Two .dist-info folders of one version are still a leftover."""
    site = site_of(venv)
    egg = site / "six.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: six\nVersion: 1.17.0\n")
    (egg / "top_level.txt").write_text("six\n")
    (egg / "SOURCES.txt").write_text("setup.py\nsix.py\nsix.egg-info/PKG-INFO\n")
    data = probe(venv, "--no-cache")
    assert not any("six" in line for line in error_lines(data)), error_lines(data)
    six = data["packages"]["six"]
    assert six["version"] == "1.17.0" and six["location"] == str(site), six
    shutil.rmtree(egg)
    twin = site / "Six-1.17.0.dist-info"  # a second .dist-info of the same version: a copy left behind, said
    shutil.copytree(next(site.glob("six-1.17.0.dist-info")), twin)
    assert any("six" in line and "two metadata folders" in line for line in error_lines(probe(venv, "--no-cache")))


BACKEND = '''
import base64, hashlib, os, zipfile

NAME, VERSION = "demo_src", "0.1.dev3+g1234abc"


def get_requires_for_build_editable(config_settings=None):
    return []


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    info = "%s-%s.dist-info" % (NAME, VERSION)
    files = {"%s.pth" % NAME: os.path.abspath("src") + "\\n",
             info + "/METADATA": "Metadata-Version: 2.1\\nName: %s\\nVersion: %s\\n" % (NAME, VERSION),
             info + "/WHEEL": "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
    rows = ["%s,sha256=%s,%d" % (k, base64.urlsafe_b64encode(hashlib.sha256(v.encode()).digest()).rstrip(b"=").decode(), len(v))
            for k, v in files.items()]
    name = "%s-%s-py3-none-any.whl" % (NAME, VERSION)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as zf:
        for k, v in files.items():
            zf.writestr(k, v)
        zf.writestr(info + "/RECORD", "\\n".join(rows + [info + "/RECORD,,"]) + "\\n")
    return name
'''


def test_an_editable_install_whose_checkout_is_gone_is_said(venv, tmp_path):
    """`pip install -e ./checkout` (PEP 660; an in-tree build backend, so no registry), then the checkout moved or
    deleted, as a vLLM built from source in ~/vllm is: its dist-info stays and `import` fails. Before: integrity ok,
    no word of it (check said no known problem)."""
    src = tmp_path / "checkout"
    (src / "src" / "demo_src").mkdir(parents=True)
    (src / "src" / "demo_src" / "__init__.py").write_text("")
    (src / "backend.py").write_text(BACKEND)
    (src / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n')
    done = subprocess.run([str(venv), "-m", "pip", "install", "-q", "--no-index", "-e", str(src)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    here = probe(venv, "--no-cache", "--track", "demo-src")
    assert here["packages"]["demo-src"]["direct_url"]["editable"] and not any("demo" in e for e in error_lines(here))
    src.rename(tmp_path / "moved")
    lines = [e for e in error_lines(probe(venv, "--no-cache", "--track", "demo-src")) if "demo" in e]
    assert len(lines) == 1 and f"its editable checkout {src} is gone" in lines[0], lines
