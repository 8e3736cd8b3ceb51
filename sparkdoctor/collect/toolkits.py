"""Every ptxas the serving stack could use, what version it is, whether it knows sm_121a, and which one Triton runs.

Where ptxas comes from: $CUDA_HOME/bin, every PATH entry, /usr/local/cuda*/bin, /usr/local/bin, the
copies inside the target's packages (the target probe lists them in ctx.scratch["ptxas_candidates"]:
the nvidia-cuda-nvcc wheels, Triton's bundled ones) and the files Triton's environment variables
name. Copies reached by several routes (symlinks, wrapper folders) are one entry with all routes.

A wrapper script is the ptxas it runs (sparkdoctor.ptxas.resolve_ptxas): a `#!` script whose text
names exactly one executable ptxas by absolute path is one entry with that binary, under `wrappers`.

Support for sm_121a is asked of the tool itself: the allowed values of --gpu-name in `ptxas --help`.
Only a ptxas whose help lists nothing is judged by version (CUDA >= 12.9 knows sm_121a), and the
entry says which way it was decided. Results are cached by (path, size, mtime).
"""

from __future__ import annotations

import glob
import json
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkdoctor import proc
from sparkdoctor.arch import DEFAULT_ARCH
from sparkdoctor.collect import Collector, Context
from sparkdoctor.files import write_cache_entry
from sparkdoctor.ptxas import Resolved, resolve_ptxas, version_tuple

PTXAS_TIMEOUT = 5.0
CACHE_FILE = "toolkits.json"
CACHE_SCHEMA = 1
TARGET_ARCH = DEFAULT_ARCH
FIRST_VERSION_WITH_TARGET = (12, 9)  # CUDA 12.9 is the first toolkit that targets sm_121a
SOURCE_ORDER = ("triton", "pip", "system", "env")  # an entry's `source` is where the file comes from

# Triton (>= 3.6) bundles a second, newer ptxas ("ptxas-blackwell") and runs it for sm_100 and newer
# GPUs, GB10 included; TRITON_PTXAS_BLACKWELL_PATH overrides it. Older Triton bundles only `ptxas`,
# overridden by TRITON_PTXAS_PATH. Either variable naming a ptxas Triton cannot run falls back to
# the bundled copy (triton/knobs.py, env_nvidia_tool).
TRITON_ENV_VARS = ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH")
TRITON_BLACKWELL_NAME = "ptxas-blackwell"

_VERSION_RE = re.compile(r"release (\d{1,9})\.(\d{1,9})(?:, V(\d{1,9}\.\d{1,9}\.\d{1,9}))?\b")
_ARCH_RE = re.compile(r"'(sm_(\d{1,9})([a-z]?))'")
@dataclass
class Ptxas:
    realpath: str
    paths: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    package: str | None = None
    package_version: str | None = None
    env_vars: list[str] = field(default_factory=list)
    missing: bool = False
    version: str | None = None
    archs: list[str] = field(default_factory=list)
    sm_121a: bool | None = None
    sm_121a_by: str | None = None
    error: str | None = None
    used_by: list[str] = field(default_factory=list)
    wrappers: list[str] = field(default_factory=list)  # paths that are scripts running `realpath`
    trusted: bool = False  # reached by a route of this machine or the target, not only by what a recipe's env names

    def add(self, path: str, source: str, package: str | None = None, package_version: str | None = None,
            env_var: str | None = None, by_recipe: bool = False) -> None:
        self.trusted = self.trusted or not by_recipe
        if path not in self.paths:
            self.paths.append(path)
        if source not in self.sources:
            self.sources.append(source)
        if package and not self.package:
            self.package, self.package_version = package, package_version
        if env_var and env_var not in self.env_vars:
            self.env_vars.append(env_var)

    def named(self, basename: str) -> bool:
        return any(os.path.basename(p) == basename for p in self.paths)

    def as_fact(self) -> dict[str, object]:
        return {
            "tool": "ptxas",
            "path": self.paths[0],
            "realpath": self.realpath,
            "paths": list(self.paths),
            "version": self.version,
            "source": next(s for s in SOURCE_ORDER if s in self.sources),
            "sources": list(self.sources),
            "package": self.package,
            "package_version": self.package_version,
            "env_vars": list(self.env_vars),
            "used_by": list(self.used_by),
            "sm_121a": self.sm_121a,
            "archs": list(self.archs),
            "sm_121a_by": self.sm_121a_by,
            "error": self.error,
            "wrappers": list(self.wrappers),
        }


# ---- parsing what ptxas prints ---------------------------------------------------------------------------
def parse_version(text: str) -> str | None:
    """"Cuda compilation tools, release 13.0, V13.0.88" -> "13.0.88" (or "13.0" when no V-number)."""
    m = _VERSION_RE.search(text)
    if not m:
        return None
    return m.group(3) or f"{m.group(1)}.{m.group(2)}"


def parse_gpu_names(help_text: str) -> list[str]:
    """The sm_ targets --gpu-name accepts, from the "Allowed values" of that option in `ptxas --help`."""
    start = re.search(r"(?m)^[ \t]*--gpu-name\b", help_text)  # [ \t]: \s would cross lines (quadratic)
    if start is None:
        return []
    block = help_text[start.end():]
    nxt = re.search(r"\n--", block)
    block = block[: nxt.start()] if nxt else block
    allowed = block.find("Allowed values")
    if allowed < 0:
        return []
    found = {m.group(1): (int(m.group(2)), m.group(3)) for m in _ARCH_RE.finditer(block[allowed:])}
    return sorted(found, key=lambda name: found[name])


def judge_target(version: str | None, archs: list[str]) -> tuple[bool | None, str | None]:
    if archs:
        return TARGET_ARCH in archs, "help"
    vt = version_tuple(version)
    if len(vt) >= 2:
        return vt[:2] >= FIRST_VERSION_WITH_TARGET, "version"
    return None, None


# ---- asking one ptxas ----------------------------------------------------------------------------------
def probe(path: str) -> dict[str, Any]:
    """{version, archs} or {error}; never raises."""
    done = proc.run([path, "--version"], timeout=PTXAS_TIMEOUT)
    if not done.ok:
        return {"error": done.describe_failure()}
    version = parse_version(done.stdout + done.stderr)
    if version is None:
        first = ((done.stdout + done.stderr).strip().splitlines() or ["no output"])[0]
        return {"error": f"{os.path.basename(path)} --version printed no CUDA release: {first[:200]}"}
    helped = proc.run([path, "--help"], timeout=PTXAS_TIMEOUT)
    archs = parse_gpu_names(helped.stdout + helped.stderr) if helped.ok else []
    return {"version": version, "archs": archs, "help_ok": helped.ok}


# ---- cache -----------------------------------------------------------------------------------------------
class _Cache:
    """realpath -> {size, mtime_ns, version, archs}; a file that is not what we wrote is ignored and rewritten."""

    def __init__(self, ctx: Context):
        self.path = Path(ctx.cache_dir) / CACHE_FILE if ctx.cache_dir else None
        self.entries: dict[str, Any] = {}
        self.dirty = False
        self.lock = threading.Lock()
        if self.path is not None and ctx.use_cache:
            self.entries = self._read(self.path)

    @staticmethod
    def _read(path: Path) -> dict[str, object]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        entries = data.get("entries") if isinstance(data, dict) and data.get("schema") == CACHE_SCHEMA else None
        return entries if isinstance(entries, dict) else {}

    @staticmethod
    def key(realpath: str) -> tuple[int, int] | None:
        """(size, mtime_ns), or None for files whose answer can change without them changing."""
        try:
            st = os.stat(realpath)
            with open(realpath, "rb") as fh:
                if fh.read(2) == b"#!":  # a wrapper script: the ptxas it runs can change under it
                    return None
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    def get(self, realpath: str) -> dict[str, Any] | None:
        key = self.key(realpath)
        hit = self.entries.get(realpath)
        if key is None or not isinstance(hit, dict) or [hit.get("size"), hit.get("mtime_ns")] != list(key):
            return None
        if not isinstance(hit.get("version"), str) or not isinstance(hit.get("archs"), list):
            return None
        return {"version": hit["version"], "archs": [a for a in hit["archs"] if isinstance(a, str)]}

    def put(self, realpath: str, result: Mapping[str, object]) -> None:
        key = self.key(realpath)
        if key is None or self.path is None or "error" in result or not result.get("help_ok"):
            return  # failures and half answers are asked again next time
        with self.lock:
            self.entries[realpath] = {"size": key[0], "mtime_ns": key[1], "version": result["version"], "archs": result["archs"]}
            self.dirty = True

    def save(self) -> None:
        if not self.dirty or self.path is None:
            return
        # a read-only cache folder or a full disk costs speed, not correctness
        write_cache_entry(self.path, json.dumps({"schema": CACHE_SCHEMA, "entries": self.entries}, indent=1, sort_keys=True).encode())


# ---- discovery -------------------------------------------------------------------------------------------
def recipe_env(ctx: Context) -> Mapping[str, str]:
    """The variables a recipe put into the target's environment (recipe check's target carries them), else none."""
    env = getattr(ctx.target, "recipe_env", None)
    return env if isinstance(env, Mapping) else {}


def _only_recipe(recipe: Mapping[str, str], var: str, value: str) -> bool:
    """The recipe sets `var` to `value`, and the user's own environment does not."""
    return recipe.get(var) == value and os.environ.get(var) != value


def discover(ctx: Context) -> list[Ptxas]:
    found: dict[str, Ptxas] = {}

    def add(path: str, source: str, must_exist: bool, **extra: Any) -> None:
        exists = os.path.isfile(path)
        if not exists and not must_exist:
            return
        resolved = resolve_ptxas(path) if exists else Resolved(os.path.abspath(path))
        entry = found.setdefault(resolved.binary, Ptxas(resolved.binary, missing=not exists))
        entry.add(path, source, **extra)
        if resolved.scripts and path not in entry.wrappers:
            entry.wrappers.append(path)

    # A recipe is third-party text: a ptxas that only its env names (CUDA_HOME, TRITON_PTXAS_PATH, a PATH folder of
    # its own) is listed, never run. One this machine or the target reaches by another route is run as before.
    recipe = recipe_env(ctx)
    for var in TRITON_ENV_VARS:
        value = ctx.target_env(var)
        if value:
            add(value, "env", must_exist=True, env_var=var, by_recipe=_only_recipe(recipe, var, value))
    cuda_home = ctx.target_env("CUDA_HOME")
    if cuda_home:
        add(os.path.join(cuda_home, "bin", "ptxas"), "system", must_exist=False, by_recipe=_only_recipe(recipe, "CUDA_HOME", cuda_home))
    path_env = ctx.scratch.get("path_env") or os.environ.get("PATH", "")
    own_path = set(os.environ.get("PATH", "").split(os.pathsep)) if "PATH" in recipe else set()
    for folder in path_env.split(os.pathsep):
        if folder:
            add(os.path.join(folder, "ptxas"), "system", must_exist=False, by_recipe="PATH" in recipe and folder not in own_path)
    for path in sorted(glob.glob("/usr/local/cuda*/bin/ptxas")):
        add(path, "system", must_exist=False)
    add("/usr/local/bin/ptxas", "system", must_exist=False)
    for item in ctx.scratch.get("ptxas_candidates") or []:
        if not isinstance(item, dict) or not isinstance(item.get("path"), str):
            continue
        source: str = item["source"] if item.get("source") in ("pip", "triton") else "pip"
        extra = {"package": item.get("package"), "package_version": item.get("version_of_package")}
        add(item["path"], source, must_exist=True, **extra)  # missing here: the target sees another filesystem
        if source == "triton":  # the probe may list only `ptxas`; Triton >= 3.6 ships its sibling too
            sibling = os.path.join(os.path.dirname(item["path"]), TRITON_BLACKWELL_NAME)
            add(sibling, "triton", must_exist=False, **extra)
    return list(found.values())


def _in_triton_module(path: str) -> bool:
    """A copy inside the importable `triton` package (triton or pytorch-triton), not a fork under another name."""
    parts = Path(path).parts
    return len(parts) >= 5 and parts[-5:-1] == ("triton", "backends", "nvidia", "bin")


def mark_triton(entries: list[Ptxas]) -> None:
    """Put used_by "triton" on the ptxas Triton runs for sm_121a (see TRITON_ENV_VARS)."""
    bundled = [e for e in entries if "triton" in e.sources and any(_in_triton_module(p) for p in e.paths)]
    if not bundled:
        return  # no Triton in the target: its variables steer nothing
    blackwell = next((e for e in bundled if e.named(TRITON_BLACKWELL_NAME)), None)
    chosen: Ptxas | None
    if blackwell is not None:
        var, chosen = "TRITON_PTXAS_BLACKWELL_PATH", blackwell
    else:
        var, chosen = "TRITON_PTXAS_PATH", next((e for e in bundled if e.named("ptxas")), None)
    override = next((e for e in entries if var in e.env_vars), None)
    if override is not None and override.version is not None and override.error is None:
        chosen = override
    if chosen is not None:
        chosen.used_by.append("triton")


def _fill(entry: Ptxas, cache: _Cache) -> None:
    if entry.missing:
        how = " and ".join(entry.env_vars) or "the target"
        entry.error = f"{entry.paths[0]} does not exist on this machine (named by {how})"
        return
    if not entry.trusted:
        entry.error = (f"{entry.paths[0]} was not run: only the recipe's env names it, and sparkdoctor runs no program "
                       "a recipe names (its version and sm_121a support are unknown)")
        return
    if not os.access(entry.realpath, os.X_OK):
        entry.error = f"{entry.paths[0]} is not executable"
        return
    # Ask the binary itself where a route reaches it directly: a wrapper's answer may not be the
    # binary's, so it is asked through the wrapper (and not cached) only when there is no such route.
    direct = [p for p in entry.paths if p not in entry.wrappers]
    result = cache.get(entry.realpath) if direct else None
    if result is None:
        result = probe(direct[0] if direct else entry.paths[0])
        if direct:
            cache.put(entry.realpath, result)
    if "error" in result:
        entry.error = result["error"]
        return
    entry.version, entry.archs = result["version"], result["archs"]
    entry.sm_121a, entry.sm_121a_by = judge_target(entry.version, entry.archs)


def run(ctx: Context) -> dict[str, object]:
    entries = discover(ctx)
    cache = _Cache(ctx)
    if len(entries) == 1:  # the usual box: no pool (concurrent.futures is ~3 ms of imports on a warm check)
        _fill(entries[0], cache)
    elif entries:
        # imported on use: check loads concurrent.futures only on the runs that get here
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(8, len(entries)), thread_name_prefix="ptxas") as pool:
            list(pool.map(lambda e: _fill(e, cache), entries))
    cache.save()
    mark_triton(entries)
    return {"toolkits": [e.as_fact() for e in entries]}


COLLECTOR = Collector("toolkits", run, needs=("target",), timeout=15)
