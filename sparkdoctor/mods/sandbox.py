"""Run a mod's script against a scratch copy of the files it may touch, isolated, and see what it changed.

The isolation is bubblewrap (`bwrap`): the whole file system read-only, a private /tmp, no network, its
own process tree (everything it forks dies with it), a time limit; the scratch copy of the site folder is
the only writable place, mounted at every site path the script names (so a script that edits
/usr/local/lib/python3.12/dist-packages/vllm/... edits the copy). Without bwrap a script is not run at
all: its verdict is "cannot tell", never a run on the real target.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sparkdoctor import proc
from sparkdoctor.mods.model import ModError
from sparkdoctor.mods.trees import MAX_FILE, Tree

SCRIPT_TIMEOUT = 60.0
DEFAULT_SITE = "/usr/local/lib/python3.12/dist-packages"  # where eugr's images keep vLLM
_SITE_PATH = re.compile(r"(/[\w.+-]+(?:/[\w.+-]+)*/(?:site|dist)-packages)(?=[/\s\"']|$)")
_PKG_FILE = re.compile(r"(?:(?:site|dist)-packages/|\b)((?:vllm|flashinfer|cutlass|triton|torch|transformers|"
                       r"compressed_tensors|nvidia)/[\w/.-]+\.(?:py|pyi|json|jinja|txt|cfg|toml|yaml))")


@dataclass
class ScriptRun:
    """What one script did to its scratch tree."""

    result: proc.ProcResult | None
    changed: list[str] = field(default_factory=list)   # site-relative paths whose bytes changed
    created: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)   # named by the script, not in the tree
    refused: str | None = None                         # why it was not run at all


def sandbox_available() -> str | None:
    """None when scripts can be run isolated here; else why not, in words."""
    if shutil.which("bwrap") is None:
        return "no sandbox: bubblewrap (bwrap) is not installed, and a script is never run unisolated"
    return None


def referenced_files(texts: list[str]) -> list[str]:
    """Site-relative files a script (and the files beside it) name."""
    out: dict[str, None] = {}
    for text in texts:
        for m in _PKG_FILE.finditer(text):
            out.setdefault(m.group(1))
    return list(out)


def site_paths(texts: list[str]) -> list[str]:
    found = dict.fromkeys(m.group(1) for t in texts for m in _SITE_PATH.finditer(t))
    return list(found) or [DEFAULT_SITE]


def _digest(root: Path) -> dict[str, str]:
    """site-relative path -> the sha256 of each regular file, read through sparkdoctor.inputs: a file over
    trees.MAX_FILE (a sparse 64 GB one a script left) is stood for by its size, never read; a FIFO or device
    a script made is stood for by its kind, never opened in a way that blocks."""
    from sparkdoctor.inputs import TooBig, read_bytes

    out = {}
    for path in root.rglob("*"):
        if path.is_symlink() or path.is_dir():
            continue
        rel = path.relative_to(root).as_posix()
        try:
            size = path.lstat().st_size
            out[rel] = (f"over {MAX_FILE} bytes: {size} bytes, not read" if size > MAX_FILE
                        else hashlib.sha256(read_bytes(path, MAX_FILE)).hexdigest())
        except TooBig:
            out[rel] = f"grew past {MAX_FILE} bytes while read"
        except OSError as exc:
            out[rel] = f"unreadable: {exc.strerror or exc}"
    return out


def _copy_mod(mod_dir: Path, work: Path) -> None:
    """The mod folder copied (links as links); a FIFO, device or socket in it is refused in one line, not
    opened (copying one would block or fail half-way)."""
    for folder, dirs, names in os.walk(mod_dir):
        for name in [*dirs, *names]:
            mode = os.lstat(os.path.join(folder, name)).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                raise ModError(f"{os.path.join(folder, name)}: not a regular file, folder or link (a FIFO, device or socket); "
                               "a mod folder holds files")
    shutil.copytree(mod_dir, work, symlinks=True)


def _mount_args(target: str, source: Path) -> list[str]:
    """bwrap arguments that make `source` appear, writable, at `target` on a read-only root.

    A mount point must exist: when `target` does not, the deepest folder above it that does is covered by
    a tmpfs and its own entries are mounted back read-only, so the new path can be made inside."""
    path = Path(target)
    if path.exists():
        return ["--bind", str(source), target]
    anchor = path.parent
    while not anchor.exists():
        anchor = anchor.parent
    if anchor == Path("/"):
        return []
    args = ["--tmpfs", str(anchor)]
    for entry in sorted(os.listdir(anchor)):
        args += ["--ro-bind-try", str(anchor / entry), str(anchor / entry)]
    return args + ["--bind", str(source), target]


def run_script(argv_in_mod: list[str], mod_dir: Path, texts: list[str], tree: Tree,
               timeout: float = SCRIPT_TIMEOUT) -> ScriptRun:
    """Run `argv_in_mod` (e.g. ["bash", "run.sh"]) from a scratch copy of `mod_dir`, against a scratch copy of
    the files the mod names, and report what changed."""
    why = sandbox_available()
    if why:
        return ScriptRun(None, refused=why)
    with tempfile.TemporaryDirectory(prefix="sparkdoctor-mod-") as tmp:
        scratch = Path(tmp)
        site, work, home = scratch / "site", scratch / "mod", scratch / "home"
        site.mkdir()
        home.mkdir()
        _copy_mod(mod_dir, work)
        missing = []
        for rel in referenced_files(texts):
            data = tree.read(rel)
            if data is None:
                missing.append(rel)
                continue
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            (site / rel).write_bytes(data)
        before = _digest(site)
        mounts: list[str] = []
        sites = site_paths(texts)
        for target in sites:
            mounts += _mount_args(target, site)
        argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                "--bind", str(scratch), str(scratch), *mounts, "--unshare-all", "--die-with-parent",
                "--new-session", "--chdir", str(work), "--", *argv_in_mod]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
               "PYTHONPATH": sites[0], "PYTHONDONTWRITEBYTECODE": "1"}
        result = proc.run(argv, timeout=timeout, env=env)
        after = _digest(site)
    return ScriptRun(
        result,
        changed=sorted(k for k in before if k in after and before[k] != after[k]),
        created=sorted(k for k in after if k not in before),
        removed=sorted(k for k in before if k not in after),
        missing=missing,
    )
