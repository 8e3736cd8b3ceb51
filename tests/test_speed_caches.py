"""The caches that keep a warm `check` fast never keep it from seeing a change.

The parsed-matrix cache (sparkdoctor/matrix/cache.py), the probe's compiled modules in sparkdoctor's
cache dir, and the name normalisation that replaced packaging.utils on the hot path.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name as packaging_canonical

from sparkdoctor import locations
from sparkdoctor.matrix import load
from sparkdoctor.names import canonicalize_name
from sparkdoctor.targets import probe as target_probe
from sparkdoctor.targets.local import PythonTarget
from tests.probe_modules import probe_module


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SPARKDOCTOR_CONFIG", str(tmp_path / "config.toml"))
    return tmp_path / "cache"


@pytest.mark.parametrize("name", ["vllm", "Flash_Infer", "nvidia-cutlass-dsl", "cuda.Bindings", "a-_.b", "Torch", "x__y..z"])
def test_canonical_names_are_packagings(name):
    assert canonicalize_name(name) == packaging_canonical(name)


@pytest.fixture
def own_matrix(tmp_path, monkeypatch):
    """A copy of the bundled matrix that data_dir() returns, so a test may edit it."""
    root = tmp_path / "data"
    for name in ("matrix", "fixes", "probes"):
        shutil.copytree(locations.data_dir(name), root / name, symlinks=True)
    real = locations.data_dir
    monkeypatch.setattr(locations, "data_dir", lambda name: root / name if name in ("matrix", "fixes", "probes") else real(name))
    monkeypatch.setattr(locations, "installed_matrix", lambda: None)
    return root / "matrix"


def test_parsed_matrix_is_cached_and_rebuilt_when_a_file_changes(own_matrix, cache):
    first = load()
    stored = list((cache / "matrix").glob("*.pickle"))
    assert len(stored) == 1
    again = load()
    assert [e.id for e in again.entries] == [e.id for e in first.entries]
    assert again.entries[0] is not first.entries[0], "a fresh object from the cache, not the same one"

    f = sorted(own_matrix.glob("*.toml"))[0]
    text = f.read_text()
    one = next(e for e in first.entries if e.file == str(f))
    f.write_text(text.replace(f'id = "{one.id}"', f'id = "{one.id}-renamed"', 1))
    ids = {e.id for e in load().entries}
    assert f"{one.id}-renamed" in ids and one.id not in ids
    assert len(list((cache / "matrix").glob("*.pickle"))) == 1, "the stale one is removed"


def test_a_broken_matrix_file_is_reported_every_time_not_cached(own_matrix):
    from sparkdoctor.matrix import MatrixError

    load()
    f = sorted(own_matrix.glob("*.toml"))[0]
    f.write_text(f.read_text() + "\n[[entry]\n")
    for _ in range(2):
        with pytest.raises(MatrixError, match=f.name):
            load()


def test_unreadable_or_foreign_cache_file_is_ignored(own_matrix, cache):
    first = load()
    (stored,) = (cache / "matrix").glob("*.pickle")
    stored.write_bytes(b"not a pickle")
    assert [e.id for e in load().entries] == [e.id for e in first.entries]


def test_probe_keeps_its_compiled_modules_in_our_cache_only(tmp_path, cache, monkeypatch):
    """The probe runs with -B: nothing lands in the probe folder or the target; with our cache
    dir named, its modules are compiled once into cache/pycache and read from there after. The probe runs from
    a copy of probes/ that only this test sees: tests elsewhere import probe modules in-process (and write their
    __pycache__ into the checkout's probes/) while this one runs."""
    from sparkdoctor.targets import early

    target = PythonTarget(sys.executable, "--python")
    probes = tmp_path / "probes"
    shutil.copytree(locations.data_dir("probes"), probes, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(early, "probes_folder", lambda: str(probes))
    monkeypatch.setattr(target_probe, "probe_entry", lambda name: probes / name / "__main__.py")
    before: set[Path] = set()
    for _ in range(2):
        early = target_probe.prestart(target, cache, use_cache=True)
        result = early.running.result(120)
        assert result.returncode == 0, result.stderr
    compiled = [p.name for p in (cache / "pycache").rglob("*.pyc")]
    assert any(n.startswith("targetenv_integrity.") for n in compiled), compiled
    assert {p for p in probes.rglob("__pycache__")} == before


def _answer(result) -> dict:
    import json

    doc = json.loads(result.stdout.strip().splitlines()[-1])
    return {"packages": sorted(doc["packages"]), "errors": doc.get("errors"), "capabilities": (doc.get("capabilities_probe") or {}).get("capabilities")}


def test_a_damaged_compiled_module_in_our_cache_is_compiled_again_not_a_failed_probe(tmp_path, cache):
    """A .pyc whose header still matches its source (mtime, size) but whose body is damaged (a torn write, a bad
    block): Python unmarshals it and fails every import of that module, so the probe failed on every check until
    someone found and deleted the file. The probe compiles such a module again from its source and rewrites it."""
    target = PythonTarget(sys.executable, "--python")
    first = target_probe.prestart(target, cache, use_cache=True, capabilities=True).running.result(120)
    assert first.returncode == 0, first.stderr
    compiled = sorted((cache / "pycache").rglob("*.pyc"))
    assert any(p.name.startswith("capabilities_files.") for p in compiled), compiled  # a module imported late, too
    for i, pyc in enumerate(compiled):
        data = pyc.read_bytes()
        body = data[16 : 16 + len(data) // 3] if i % 2 else b"\xff" * (len(data) - 16)  # truncated (EOFError) / ValueError
        pyc.write_bytes(data[:16] + body)
    again = target_probe.prestart(target, cache, use_cache=True, capabilities=True).running.result(120)
    assert again.returncode == 0, again.stderr[-2000:]
    assert _answer(again) == _answer(first)
    assert all(p.read_bytes()[16:20] != b"\xff" * 4 for p in compiled), "written again from the source"


def test_record_fast_path_reads_the_same_rows_as_the_careful_one():
    """parse_record skips its per-line loop when no line is quoted; every RECORD of this
    environment (and odd lines) must come out the same as through the loop, which a quoted line
    at the end forces."""
    import sysconfig

    parse_record = probe_module("shared", "probe_io").parse_record
    texts = [p.read_text(encoding="utf-8") for p in Path(sysconfig.get_paths()["purelib"]).glob("*.dist-info/RECORD")]
    texts.append("a.py,sha256=x,1\n\nno-commas\nb,c\nd/e.py,,\r\nf,g,h,i\n")
    assert len(texts) > 5
    for text in texts:
        forced = parse_record(text + '\n"q,uoted.py",sha256=y,2\n')
        assert forced[-1] == ["q,uoted.py", "sha256=y", "2"]
        assert parse_record(text) == forced[:-1]


def test_a_quoted_record_line_without_three_fields_is_no_row(tmp_path):
    """A RECORD line that starts with a quote but is not three fields (`"vllm/envs.py` cut short) became a one-field
    row, and `check` said `could not observe: vllm: integrity check failed: IndexError: list index out of range` and
    left the package's integrity unchecked. Such a line is skipped, as an unquoted one without three fields is."""
    import json
    import subprocess

    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "vllm").mkdir()
    (site / "vllm" / "__init__.py").write_text("")
    info = site / "vllm-0.32.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0\n")
    (info / "RECORD").write_text('vllm/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n"vllm/envs.py\n'
                                 '"a,b.py",sha256=x,1,extra\nvllm-0.32.0.dist-info/RECORD,,\n')
    (tmp_path / "config.toml").write_text("")  # the file this module's SPARKDOCTOR_CONFIG names
    env = {**os.environ, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--no-kernels", "--format", "json", "--python",
                           str(venv / "bin" / "python")], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode in (0, 1), done.stderr[-2000:] + done.stdout[-2000:]
    facts = json.loads(done.stdout)["facts"]
    assert not facts["errors"], facts["errors"]
    assert facts["packages"]["vllm"]["integrity"] == "ok" and facts["packages"]["vllm"]["files_checked"] == 1


def test_json_check_never_loads_rich(tmp_path, monkeypatch):
    """`check --format json` (stderr not a terminal, as in CI) renders without rich: its import
    was ~45 ms of a warm check, and JSON is ASCII on any stream."""
    import json
    import subprocess

    monkeypatch.delenv("SPARKDOCTOR_CONFIG")
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write('RICH=%s\\n' % any(m == 'rich' or m.startswith('rich.') for m in sys.modules)))\n"
        "sys.argv = ['sparkdoctor', 'check', '--python', sys.executable, '--no-kernels', '--format', 'json']\n"
        "from sparkdoctor.launch import main\n"
        "main()\n"
    )
    env = {**os.environ, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "c"), "PYTHONIOENCODING": "ascii"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          cwd=Path(__file__).resolve().parent.parent)
    assert "RICH=False" in done.stderr, done.stderr[-2000:]
    assert json.loads(done.stdout)["kind"] == "report"


def test_the_flags_probe_parses_only_the_files_that_changed_since_the_last_run(tmp_path, cache):
    """recipe check's flags probe keeps each vLLM file's flags by the file's identity (path, size, mtime): a warm run
    parses nothing, and an edited, added or removed file changes the answer as a cold run would."""
    from sparkdoctor.conclusions.recipe_check import vllm_flags
    from sparkdoctor.targets.local import resolve_python_target
    from tests.container.test_mods_container import serving_venv

    venv = serving_venv(tmp_path)
    vllm = next((venv / "lib").glob("python3*/site-packages")) / "vllm"
    (vllm / "engine").mkdir()
    (vllm / "entrypoints").mkdir()
    args = vllm / "engine" / "arg_utils.py"
    args.write_text('parser.add_argument("--alpha")\n')
    (vllm / "entrypoints" / "cli.py").write_text('FLAG = "--beta"\n')
    target = resolve_python_target(str(venv / "bin" / "python"))

    def flags() -> tuple[list[str], int]:
        doc = vllm_flags(target)
        assert doc is not None
        return doc["flags"], doc["parsed"]

    assert flags() == (["--alpha", "--beta"], 2)
    assert flags() == (["--alpha", "--beta"], 0)  # warm: every file's identity is unchanged
    assert list((cache / "vllm_flags").glob("*.json"))
    args.write_text('parser.add_argument("--gamma-ray")\n')
    os.utime(args, ns=(args.stat().st_atime_ns, args.stat().st_mtime_ns + 1_000_000_000))
    assert flags() == (["--beta", "--gamma-ray"], 1)
    (vllm / "entrypoints" / "more.py").write_text('"--delta"\n')
    assert flags() == (["--beta", "--delta", "--gamma-ray"], 1)
    (vllm / "entrypoints" / "cli.py").unlink()
    assert flags() == (["--delta", "--gamma-ray"], 0)
    import json

    (kept,) = (cache / "vllm_flags").glob("*.json")
    data = json.loads(kept.read_text())
    for entry in data["files"].values():  # flags of another shape, the files' identities kept: parsed again, never an answer
        entry[2] = [["--x"], 5]
    kept.write_text(json.dumps(data))
    assert flags() == (["--delta", "--gamma-ray"], 2)
    for cached in (cache / "vllm_flags").glob("*.json"):
        cached.write_text("{not json")
    assert flags() == (["--delta", "--gamma-ray"], 2)  # a damaged cache is a cold run, never an error
