"""The target: the environment sparkdoctor examines and fixes (a local interpreter or venv, or one inside a
running container), how it is chosen from the options, probed early, and how its files are read and written.

    local.py              PythonTarget (a local interpreter or venv), the probe-script helpers
    container.py          ContainerTarget: the same, through `docker|podman exec`
    container_inspect.py  finding the container, its image and its interpreter
    container_reap.py     stopping what an exec left running in the container when it ran out of time
    files.py              FileTransport for a local target (LocalFiles)
    container_files.py    FileTransport for a container target (fileops.py run as a script inside it)
    fileops.py            the file operations themselves, standard library only (Python 3.6+)
    probe.py              the target probe started before the CLI is imported (a warm check's long pole)
    choose.py             check's choice of target from --python / --container / --container-python

    interface.py          the Protocols (Target, FileTransport) and the stage's errors (TargetError, FileError)

The names most callers need are importable from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparkdoctor.targets.interface import (
        FileError,
        FileTransport,
        Target,
        TargetError,
    )
    from sparkdoctor.targets.local import (
        PythonTarget,
        probe_entry,
        resolve_python_target,
    )

__all__ = ["FileError", "FileTransport", "PythonTarget", "Target", "TargetError", "probe_entry", "resolve_python_target"]
_HOME = {"FileError": "interface", "FileTransport": "interface", "Target": "interface", "TargetError": "interface",
         "PythonTarget": "local", "probe_entry": "local", "resolve_python_target": "local"}


def __getattr__(name: str) -> object:
    """The names above, imported on first use: the console entry point imports targets.early (standard library
    only) to start the target probe, and loading local.py (pathlib, platformdirs) first would delay it ~20 ms."""
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
