"""`check`'s choice of target from its options (--python, --container, --container-python), and the
early start of the target probe. Kept out of cli.py so the CLI stays parse-call-render; imports only
the light target modules (the container ones load only when --container is given).
"""

from __future__ import annotations

from sparkdoctor.errors import UsageError
from sparkdoctor.locations import cache_dir
from sparkdoctor.targets import early
from sparkdoctor.targets import probe as target_probe
from sparkdoctor.targets.interface import Target
from sparkdoctor.targets.local import resolve_python_target


def refuse_bad_target_options(python: str | None, container: str | None, container_python: str | None,
                              facts_given: bool) -> None:
    """Usage errors among the target options (exit 2, one line), before anything starts."""
    if container is not None and not container.strip():
        raise UsageError("--container '': give a container name or id")
    if container is not None and python is not None:
        raise UsageError("--python and --container exclude each other (inside a container use --container-python)")
    if container_python is not None and container is None:
        raise UsageError("--container-python needs --container (for a local interpreter use --python)")
    if container_python is not None and not container_python.strip():
        raise UsageError("--container-python '': give the interpreter's path inside the container")
    if facts_given and container is not None:
        raise UsageError("--facts and --container exclude each other: a snapshot is already of one target")


def resolve_target(python: str | None, container: str | None, container_python: str | None,
                   runtime: str | None = None) -> Target:
    """The Target the options name; TargetError (exit 3) when it cannot be probed at all."""
    if container is not None:
        # imported on use: check loads sparkdoctor.targets.container_inspect only on the runs that get here
        from sparkdoctor.targets.container_inspect import resolve_container_target

        return resolve_container_target(container, container_python, runtime)
    return resolve_python_target(python)


def start_target_probe(target: Target, no_cache: bool) -> target_probe.Prestarted:
    """The target probe, running: the one the entry point started early if it is exactly this probe of
    this target in this cache mode (sparkdoctor.targets.early), else a new one. For a local target it
    answers for the capabilities probe too."""
    local = getattr(target, "kind", "python") == "python"
    if not local:
        drop_early_probe()  # a container target: the early probe was for a local interpreter
    # a container's probes have a host cache folder of their own, their cache files carried in and out with each probe
    root = cache_dir() if getattr(target, "shares_files", True) else getattr(target, "cache_root", None)
    return target_probe.prestart(target, root, use_cache=not no_cache, capabilities=local)


def drop_early_probe() -> None:
    """Cancel the entry point's early probe (a snapshot is judged, or the target is a container)."""
    early.drop(early.TARGET)
