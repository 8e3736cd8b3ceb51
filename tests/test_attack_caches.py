"""sparkdoctor's caches under a failed write: a full disk, a quota, a file-size limit (all an OSError at write time).

Each cache writer (the kernel results, the ptxas versions, the parsed matrix, the released files' members, the
capabilities and vLLM-flags probes' caches; all but the released files' run here) wrote a temporary file and renamed it; on a failed write the temporary
file stayed behind, one per run and process (a cache folder on a full disk filled with them). Now they go through
files.write_cache_entry (probe_io.replace_file in the probes): the entry is whole or absent, nothing else is left,
and the next run is a miss that writes it. The failure is real: a child process whose files may not grow past 64
bytes (RLIMIT_FSIZE; Python ignores SIGXFSZ, so a write fails with EFBIG).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

WRITE_ALL = """
import os, sys
from pathlib import Path
from types import SimpleNamespace
from sparkdoctor.collect.toolkits import _Cache
from sparkdoctor.kernels.cache import Cache
from sparkdoctor.matrix import load

root = Path(os.environ["SPARKDOCTOR_CACHE_DIR"])
kernels = Cache(root / "kernels", read=True)
kernels.put("k1", {"compiled": True, "log": "x" * 1000}, cubin=b"\\0" * 1000)
print("kernels", kernels.get("k1") is not None)
tools = _Cache(SimpleNamespace(cache_dir=root, use_cache=True))
tools.put(os.path.realpath(sys.executable), {"version": "13.0", "archs": ["sm_90"] * 50, "help_ok": True})
tools.save()
print("toolkits", _Cache(SimpleNamespace(cache_dir=root, use_cache=True)).get(os.path.realpath(sys.executable)) is not None)
print("matrix", len(load().entries) > 0)
import importlib.util
from sparkdoctor.locations import data_dir
for name in ("capabilities", "vllm_flags"):  # the probes' own writers (standard library, run by the target's Python)
    sys.path.insert(0, str(data_dir("probes") / name))  # as when it runs: its folder is sys.path[0]
    spec = importlib.util.spec_from_file_location(name + "_probe", data_dir("probes") / name / "__main__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = str(root / name / "cache.json")
    if name == "capabilities":
        module.save_cache(path, {"_dirty": True, "key": {"seen": {}, "facts": {"caps": "x" * 1000}}})
    else:
        module.save_cache(path, "probe", {"/x.py": [1, 2, ["--x"] * 200]})
    print(name, os.path.isfile(path))
"""


def _write_all(cache: Path, limit: int | None) -> list[str]:
    def cap() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    # -B: under the limit Python's own .pyc writes are cut short and kept (io's write returns a short count,
    # importlib does not check it): this child must not leave such files in the checkout
    env = {**os.environ, "SPARKDOCTOR_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-B", "-c", WRITE_ALL], env=env, preexec_fn=cap, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split("\n")[:-1]


def _files(cache: Path) -> list[str]:
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file())


def test_a_cache_write_that_fails_leaves_no_half_entry_and_no_temporary_file(tmp_path):
    cache = tmp_path / "cache"
    got = _write_all(cache, 64)
    assert got == ["kernels False", "toolkits False", "matrix True", "capabilities False", "vllm_flags False"]
    assert _files(cache) == [], "neither a half entry nor a temporary file"
    again = _write_all(cache, None)  # the disk has room again: the next run writes every entry
    assert again == ["kernels True", "toolkits True", "matrix True", "capabilities True", "vllm_flags True"]
    assert not [f for f in _files(cache) if Path(f).name.startswith(".")]


def test_a_lock_file_that_is_a_link_never_truncates_what_it_points_at(tmp_path):
    """`matrix verify`'s lock files (one per scratch venv, one per downloaded wheel) were opened with "w": a link in
    their place (to a file outside the cache) emptied that file. A lock file is opened, never written."""
    from sparkdoctor.matrix.verify_table import Env
    from sparkdoctor.verify import venvs, wheels

    outside = tmp_path / "outside.txt"
    outside.write_text("the user's own file\n")
    root = tmp_path / "cache"
    env = Env(steps=(("six==1.17.0",),), arch="sm_121a")
    venv = venvs.venv_path(root, env)
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    (venv / venvs.READY).write_text("[]\n")
    (root / f"{venv.name}.lock").symlink_to(outside)
    assert venvs.ensure_venv(root, env) == (venv / "bin" / "python", False)
    (root / "six-1.17.0-py2.py3-none-any.whl").write_bytes(b"PK")
    (root / ".six-1.17.0.lock").symlink_to(outside)
    assert wheels.wheel("six", "1.17.0", root) == root / "six-1.17.0-py2.py3-none-any.whl"
    assert outside.read_text() == "the user's own file\n"
