"""Real scratch targets for the fix tests: small pure-Python registry dists (from a wheelhouse
downloaded once per session), a constraints file, an env file, a hand-edited file; and the state
that `nothing lost` is judged by.

Two kinds of target, each made the way its users make it:
- "pip": `python -m venv` with the pip it brings, then a plain `pip install` (pip byte-compiles what
  it installs: site-packages/__pycache__ holds the top-level modules' .pyc, six's and
  typing_extensions', as on every ordinary venv): fix drives it with `python -m pip`;
- "uv": a uv venv (pyvenv.cfg has `uv = ...`, no pip), filled by `uv pip install` (no byte code):
  fix drives it with sparkdoctor's own pip, run by the target's interpreter without site.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

from sparkdoctor import proc

DATA = Path(__file__).parent / "data"
# typing_extensions: a top-level module no test plan touches (its .pyc sits in site-packages/__pycache__ beside six's)
# decorator: a dist whose module sits directly in site-packages, reinstalled as a family by test_fix_faults
# pip 22.0.2: what Ubuntu 22.04's venvs bring (no `install --dry-run --report`, which came in 22.2)
# pip 26.2.1: a pip that needs Python 3.10 (sparkdoctor's own pip, for a target on 3.8 or 3.9)
WHEELS = ["pip==26.2.1", "pip==24.0", "pip==22.0.2", "six==1.16.0", "six==1.17.0", "idna==3.7", "cattrs==23.2.3", "attrs==23.2.0", "typing_extensions==4.12.2",
          "decorator==5.1.1"]
BASE = ["six==1.16.0", "idna==3.7", "cattrs==23.2.3", "attrs==23.2.0", "typing_extensions==4.12.2"]
ENV_TEXT = "# the server's env file\nA=1\nVLLM_NVFP4_GEMM_BACKEND=marlin\nexport B=\"x y\"\n"
PINS_TEXT = "# pins\nsix==1.16.0  # why not\nattrs>=20\n"


def uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    assert Path(found).exists(), "uv is a test dependency (pip install uv)"
    return found


SYSTEM_BIN = ("/usr/bin", "/bin")


def path_without_uv(tmp_path: Path) -> str:
    """A PATH for a machine without uv: a folder of links to every program in /usr/bin and /bin but uv and uvx. A plain
    PATH=/usr/bin:/bin finds a uv installed there, and fix then drives the target with it."""
    folder = tmp_path / "bin-without-uv"
    folder.mkdir()
    for source in SYSTEM_BIN:
        for name in sorted(os.listdir(source)):
            if name not in ("uv", "uvx") and not os.path.lexists(folder / name):
                (folder / name).symlink_to(os.path.join(source, name))
    assert shutil.which("uv", path=str(folder)) is None
    return str(folder)


def run(argv: list[str], timeout: float = 300, env: dict | None = None, cwd: str | None = None) -> proc.ProcResult:
    full = dict(os.environ)
    full.update(env or {})
    return proc.run(argv, timeout=timeout, env=full, cwd=cwd)


def must(argv: list[str], **kw) -> proc.ProcResult:
    res = run(argv, **kw)
    assert res.ok, f"{argv}: {res.describe_failure()}\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
    return res


def wheelhouse(folder: Path) -> Path:
    """The WHEELS in folder, each fetched once. One `pip download` per round (about 0.7 s of CPU each, mostly pip's
    start-up), a round holding at most one version of each name (pip refuses two of one name in one call): two
    rounds for the eight wheels instead of eight calls. Each wheel is then looked for by name and version."""
    folder.mkdir(parents=True, exist_ok=True)
    missing = [r for r in WHEELS if not list(folder.glob("{}-{}-*.whl".format(*r.split("=="))))]
    while missing:
        round_: dict[str, str] = {}  # name -> requirement: the first missing version of each name
        for req in missing:
            round_.setdefault(req.split("==")[0], req)
        must([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", str(folder), *round_.values()])
        missing = [r for r in missing if r not in round_.values()]
    absent = [r for r in WHEELS if not list(folder.glob("{}-{}-*.whl".format(*r.split("=="))))]
    assert not absent, f"pip download left out {absent}"
    return folder


_TEMPLATES: dict[tuple[str, str], Path] = {}


def make_target(root: Path, kind: str, wheels: Path, fresh: bool = False) -> Path:
    """A target venv under root/<kind>, with the base dists, idna/core.py hand-edited; returns its python.
    Each kind is built once per process and copied here with `cp -a` (every byte, mode and mtime: pip's .pyc stay
    valid), so a test that changes its target changes only its own copy. `fresh`: built here, at root/<kind>
    (for a test whose point is the path pip compiled at)."""
    venv = root / kind
    if fresh:
        return _build(venv, kind, wheels)
    key = (kind, str(wheels))
    if key not in _TEMPLATES:
        folder = Path(tempfile.mkdtemp(prefix="sparkdoctor-fix-target-"))
        atexit.register(shutil.rmtree, folder, True)
        _build(folder / kind, kind, wheels)
        _TEMPLATES[key] = folder / kind
    root.mkdir(parents=True, exist_ok=True)
    must(["cp", "-a", str(_TEMPLATES[key]), str(venv)])
    return venv / "bin" / "python"


def _build(venv: Path, kind: str, wheels: Path) -> Path:
    python = venv / "bin" / "python"
    if kind == "uv":
        must([uv(), "venv", "--quiet", str(venv)])
        # --link-mode copy: uv hardlinks from its cache by default, and the hand edit below would then change
        # the cached file, and with it every venv made from it (two test sessions saw each other's edit).
        must([uv(), "pip", "install", "--quiet", "--link-mode", "copy", "--python", str(python), "--offline", "--no-index",
              "--find-links", str(wheels), *BASE])
    else:
        must([sys.executable, "-m", "venv", str(venv)])
        must([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index", "--find-links", str(wheels), *BASE])
    core = next(venv.glob("lib/python*/site-packages/idna/core.py"))
    core.write_text(core.read_text() + "\n# a hand edit\n")
    return python


class Frozen:
    """Folders saved once as a fix left them (a target after its apply or a killed apply, and its state folder: the
    journal, the unsettled mark) and put back at the SAME paths for each case that starts there: `cp -a` keeps every
    byte, mode, mtime and link, and the journal names those paths and the sizes and mtimes of what it recorded, so a
    case sees exactly what the fix left, without running the fix again. What a case changes is thrown away."""

    def __init__(self, *folders: Path):
        self.folders = folders
        self.saved = Path(tempfile.mkdtemp(prefix="sparkdoctor-fix-frozen-"))
        atexit.register(shutil.rmtree, self.saved, True)
        for n, folder in enumerate(folders):
            must(["cp", "-a", str(folder), str(self.saved / str(n))])

    def put_back(self) -> None:
        for n, folder in enumerate(self.folders):
            must(["rm", "-rf", str(folder)])
            must(["cp", "-a", str(self.saved / str(n)), str(folder)])


def byte_code(python: Path) -> dict[str, tuple[int, int]]:
    """(inode, mtime_ns) of every .pyc in site-packages' own __pycache__ (the top-level modules')."""
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (site / "__pycache__").glob("*.pyc")}


Entry = tuple[int, int, bytes | None, str | None]


def snapshot(folder: Path, skip: tuple[str, ...] = ()) -> dict[str, Entry]:
    """Every entry under folder but the top-level names in skip: (mode, mtime_ns, a file's bytes, a link's target)."""
    out: dict[str, Entry] = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if rel.parts[0] in skip:
            continue
        st = p.lstat()
        out[str(rel)] = (st.st_mode, st.st_mtime_ns, p.read_bytes() if stat.S_ISREG(st.st_mode) else None,
                         os.readlink(p) if stat.S_ISLNK(st.st_mode) else None)
    return out


def put_back(folder: Path, snap: dict[str, Entry], skip: tuple[str, ...] = ()) -> None:
    """folder made again exactly as snapshot() saw it (but the top-level names in skip: left as they are), and checked:
    every file's bytes, every mode and mtime, every link, nothing more."""
    for child in folder.iterdir():
        if child.name not in skip:
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    for rel, (_mode, _mtime, data, link) in sorted(snap.items()):  # a folder before what is in it
        if link is not None:
            (folder / rel).symlink_to(link)
        elif data is None:
            (folder / rel).mkdir()
        else:
            (folder / rel).write_bytes(data)
    for rel, (mode, mtime, _data, link) in sorted(snap.items(), reverse=True):  # what is in a folder before the folder
        if link is None:
            os.chmod(folder / rel, stat.S_IMODE(mode))
            os.utime(folder / rel, ns=(mtime, mtime))
    assert snapshot(folder, skip) == snap, f"{folder} was not put back as it was"


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


def fix_cli(python: Path | None, *args: str, env: dict | None = None, timeout: float = 600, data: Path = DATA,
            host: str = sys.executable) -> proc.ProcResult:
    """`sparkdoctor fix` run by `host` (the interpreter sparkdoctor is installed for)."""
    argv = [host, "-m", "sparkdoctor", "fix", *args]
    if python is not None and "--rollback" not in args and "--history" not in args:
        argv += ["--python", str(python), "--no-kernels", "--matrix", str(data / "matrix")]
        argv += [] if "--fixes" in args else ["--fixes", str(data / "fixes")]
    return run(argv, timeout=timeout, env=env)


def applied(root: Path, wheels: Path) -> tuple[Path, Path, Path, dict, dict, Path]:
    """A pip target under root with the full test plan applied (`fix --env-file --yes`, PIP_CONSTRAINT on the pins
    file), its journal in $SPARKDOCTOR_STATE_DIR; (python, env file, pins, state before, state after, journal)."""
    python = make_target(root, "pip", wheels)
    env_file, pins = files_for(root)
    before = state(python, [env_file, pins])
    res = fix_cli(python, "--env-file", str(env_file), "--yes", env={"PIP_CONSTRAINT": str(pins)})
    assert res.returncode == 0, res.stdout + res.stderr
    (journal,) = journals(Path(os.environ["SPARKDOCTOR_STATE_DIR"]))
    return python, env_file, pins, before, state(python, [env_file, pins]), journal


def journals(state_dir: Path) -> list[Path]:
    root = state_dir / "journals"
    return sorted(root.iterdir(), reverse=True) if root.is_dir() else []


def as_json(res: proc.ProcResult) -> dict:
    return json.loads(res.stdout)
