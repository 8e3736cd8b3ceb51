"""Where the knowledge folders and the user's cache/state/config live.

The knowledge folders (matrix/, probes/, fixes/, recipes/) sit at the top of a checkout and inside
the package (sparkdoctor/_data/) in a wheel; both layouts are found.
"""

from __future__ import annotations

import functools
import os
import types
from pathlib import Path

import platformdirs

_PKG = Path(__file__).resolve().parent
APP = "sparkdoctor"


def data_dir(name: str) -> Path:
    """The knowledge folder `name` (matrix, probes, fixes, recipes)."""
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"sparkdoctor's {name}/ folder is missing from this installation ({_PKG})")


def cache_dir() -> Path:
    return Path(os.environ.get("SPARKDOCTOR_CACHE_DIR") or platformdirs.user_cache_dir(APP))


def config_file() -> Path:
    return Path(os.environ.get("SPARKDOCTOR_CONFIG") or Path(platformdirs.user_config_dir(APP)) / "config.toml")


def state_dir() -> Path:
    """Where sparkdoctor keeps what it must not lose: fix journals, the benchmark ledger."""
    return Path(os.environ.get("SPARKDOCTOR_STATE_DIR") or platformdirs.user_state_dir(APP))


def data_home() -> Path:
    """Where sparkdoctor keeps knowledge it installed itself (`matrix update`): the user data dir."""
    return Path(os.environ.get("SPARKDOCTOR_DATA_DIR") or platformdirs.user_data_dir(APP))


def installed_matrix() -> Path | None:
    """The matrix `sparkdoctor matrix update` installed (preferred over the bundled one), if any."""
    current = data_home() / "matrix" / "current"
    return current if current.is_dir() else None


def local_overrides() -> Path:
    """The user's own matrix files, layered over whichever matrix is in use (an entry or stack with a
    shipped id replaces it; new ids are added). `matrix update` never touches them."""
    return data_home() / "matrix" / "local"


def scratch(prefix: str) -> Path:
    """A new scratch folder `<tmp>/<prefix><pid>-<random>` for the caller to remove; first, those under `prefix` whose
    process is gone (ended by SIGKILL, so their `finally` never ran) are removed. The probes' own helper
    (probes/shared/probe_scratch.py, standard library only), loaded from there: one implementation for both."""
    return Path(shared_probe_module("probe_scratch").scratch(prefix))


@functools.cache
def shared_probe_module(name: str) -> types.ModuleType:
    """A module of probes/shared/ (standard library only) loaded into this process, for one implementation of what
    the probes and sparkdoctor both do. Compiled in memory: no __pycache__ is written into the probes folder."""
    path = data_dir("probes") / "shared" / f"{name}.py"
    module = types.ModuleType(f"sparkdoctor._probe_{name}")
    module.__file__ = str(path)
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    return module
