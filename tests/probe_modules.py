"""A probe's own modules, imported into the test process as the probe imports them when it runs: with its folder
(probes/<probe>/) and probes/shared/ first on sys.path. The two folders are there for the import only: no later
import of another test finds a probe's module by chance."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

from sparkdoctor.locations import data_dir


def probe_module(probe: str, module: str, own_name: str | None = None) -> ModuleType:
    """probes/<probe>/<module>.py, its sibling imports resolved as when the probe runs. Imported under its own name
    (kept in sys.modules, one module for every test), or with `own_name`: loaded again from its file as a module of
    that name, a new module object each call (for a test that changes the module's globals)."""
    probes = data_dir("probes")
    folders = list(dict.fromkeys([str(probes / probe), str(probes / "shared")]))
    sys.path[:0] = folders
    try:
        if own_name is None:
            return importlib.import_module(module)
        spec = importlib.util.spec_from_file_location(own_name, probes / probe / f"{module}.py")
        assert spec is not None and spec.loader is not None
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        return loaded
    finally:
        for folder in folders:
            sys.path.remove(folder)
