"""Real scratch targets for the fix tests: small pure-Python registry dists in venvs made in about a
second (uv, offline, from a wheelhouse downloaded once per session), a constraints file, an env
file, a hand-edited file; and the state that `nothing lost` is judged by.

Two kinds of target, each where it is the point:
- "pip": a venv made by `python -m venv` with pip in it: fix drives it with `python -m pip`;
- "uv": a uv venv (pyvenv.cfg has `uv = ...`, no pip): fix drives it with `uv pip --python`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

from sparkdoctor import proc

DATA = Path(__file__).parent / "data"
WHEELS = ["pip==24.0", "six==1.16.0", "six==1.17.0", "idna==3.7", "cattrs==23.2.3", "attrs==23.2.0"]
BASE = ["six==1.16.0", "idna==3.7", "cattrs==23.2.3", "attrs==23.2.0"]
ENV_TEXT = "# the server's env file\nA=1\nVLLM_NVFP4_GEMM_BACKEND=marlin\nexport B=\"x y\"\n"
PINS_TEXT = "# pins\nsix==1.16.0  # why not\nattrs>=20\n"


def uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    assert Path(found).exists(), "uv is a test dependency (pip install uv)"
    return found


def run(argv: list[str], timeout: float = 300, env: dict | None = None, cwd: str | None = None) -> proc.ProcResult:
    full = dict(os.environ)
    full.update(env or {})
    return proc.run(argv, timeout=timeout, env=full, cwd=cwd)


def must(argv: list[str], **kw) -> proc.ProcResult:
    res = run(argv, **kw)
    assert res.ok, f"{argv}: {res.describe_failure()}\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
    return res


def wheelhouse(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for req in WHEELS:
        name, version = req.split("==")
        if not list(folder.glob(f"{name}-{version}-*.whl")):
            must([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", str(folder), req])
    return folder


def make_target(root: Path, kind: str, wheels: Path) -> Path:
    """A target venv under root/<kind>, with the base dists, idna/core.py hand-edited; returns its python."""
    venv = root / kind
    if kind == "uv":
        must([uv(), "venv", "--quiet", str(venv)])
        extra = []
    else:
        must([sys.executable, "-m", "venv", "--without-pip", str(venv)])
        extra = ["pip==24.0"]
    python = venv / "bin" / "python"
    # --link-mode copy: uv hardlinks from its cache by default, and the hand edit below would then change
    # the cached file, and with it every venv made from it (two test sessions saw each other's edit).
    must([uv(), "pip", "install", "--quiet", "--link-mode", "copy", "--python", str(python), "--offline", "--no-index",
          "--find-links", str(wheels), *extra, *BASE])
    core = next(venv.glob("lib/python*/site-packages/idna/core.py"))
    core.write_text(core.read_text() + "\n# a hand edit\n")
    return python


def files_for(root: Path) -> tuple[Path, Path]:
    env, pins = root / "vllm.env", root / "pins.txt"
    env.write_text(ENV_TEXT)
    pins.write_text(PINS_TEXT)
    return env, pins


def state(python: Path, extra_files: list[Path]) -> dict:
    """`pip freeze --all` (from the dists on disk) plus the sha256 of every file of every dist, and of the edited files."""
    venv = python.parent.parent
    site = next(venv.glob("lib/python*/site-packages"))
    dists = sorted(p.name for p in site.glob("*.dist-info"))
    hashes = {}
    for p in sorted(site.rglob("*")):
        if p.is_file() and p.suffix != ".pyc" and "__pycache__" not in p.parts:
            hashes[str(p.relative_to(site))] = hashlib.sha256(p.read_bytes()).hexdigest()
    for f in extra_files:
        hashes[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest() if f.exists() else None
    return {"dists": dists, "hashes": hashes}


def diff(a: dict, b: dict) -> list[str]:
    out = [f"dists {sorted(set(a['dists']) ^ set(b['dists']))}"] if a["dists"] != b["dists"] else []
    keys = set(a["hashes"]) | set(b["hashes"])
    out += [f"file {k}" for k in sorted(keys) if a["hashes"].get(k) != b["hashes"].get(k)]
    return out


def fix_cli(python: Path, *args: str, env: dict | None = None, timeout: float = 600, data: Path = DATA) -> proc.ProcResult:
    argv = [sys.executable, "-m", "sparkdoctor", "fix", *args]
    if python is not None and "--rollback" not in args and "--history" not in args:
        argv += ["--python", str(python), "--no-kernels", "--matrix", str(data / "matrix")]
        argv += [] if "--fixes" in args else ["--fixes", str(data / "fixes")]
    return run(argv, timeout=timeout, env=env)


def journals(state_dir: Path) -> list[Path]:
    root = state_dir / "journals"
    return sorted(root.iterdir(), reverse=True) if root.is_dir() else []


def as_json(res: proc.ProcResult) -> dict:
    return json.loads(res.stdout)
