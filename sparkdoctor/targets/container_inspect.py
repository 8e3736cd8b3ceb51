"""Finding a container target: the container CLI, the container's state, its image and its interpreter.

Everything here is asked of the container CLI (docker, or podman, which answers the same inspect
fields) through proc, each call with a short timeout: a CLI that hangs, a container that does not
exist or is stopped, or one without Python is a TargetError with one line (exit 3), before any probe.

The image content fingerprint is what eugr's launcher compares before it starts two nodes: the
platform, the layer digests and the config digest. Two containers with one fingerprint run the same
bytes whatever their tags say.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sparkdoctor import proc
from sparkdoctor.inputs import NotJSON, json_answer
from sparkdoctor.locations import cache_dir, data_dir
from sparkdoctor.targets.container import ContainerTarget
from sparkdoctor.targets.early import NO_CWD
from sparkdoctor.targets.local import TargetError

INSPECT_TIMEOUT = 10.0
FIND_TIMEOUT = 20.0
RUNTIME_ENV = "SPARKDOCTOR_CONTAINER_RUNTIME"  # docker | podman | a path: for --container and container recipes
CLI_ENV = "SPARKDOCTOR_CONTAINER_CLI"  # the older name of the same setting, still read

# runs a container CLI command line within a time limit; by default here (proc.run), for a fleet node on that node
Runner = Callable[[list[str], float], proc.ProcResult]


def _here(argv: list[str], timeout: float) -> proc.ProcResult:
    return proc.run(argv, timeout=timeout)

# POSIX sh, run in the container: every interpreter worth trying, in order, with whether it holds
# vLLM (found, not imported) and its version. $VIRTUAL_ENV and the image's PATH come first.
FIND_SCRIPT = r"""
seen=" "
for p in "${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}" "$(command -v python3 2>/dev/null)" "$(command -v python 2>/dev/null)" \
         /opt/*/bin/python /opt/*/*/bin/python /venv/bin/python /.venv/bin/python /workspace/*/bin/python \
         /root/*/bin/python /app/*/bin/python /usr/local/bin/python3 /usr/bin/python3; do
  [ -n "$p" ] && [ -x "$p" ] || continue
  case "$seen" in *" $p "*) continue;; esac
  seen="$seen$p "
  v=$("$p" -S -B -X sparkdoctor_site -c "$SPARKDOCTOR_FIND" 2>/dev/null) || continue
  echo "$p $v"
  case "$v" in 1\ *) break;; esac
done
"""
# What each candidate runs: without site (a .pth import line or a sitecustomize.py is the image's code, never run), the
# import path site would have made rebuilt from files by probes/shared/probe_site.py (it and the probe_io.py it reads
# with come in the environment), then vLLM looked for, not imported.
FIND_PY = NO_CWD + """import os, sys, types
for name in ("probe_io", "probe_site"):
    module = types.ModuleType(name)
    module.__file__ = "/.sparkdoctor/shared/" + name + ".py"  # no file: no folder of probes to keep first
    exec(compile(os.environ["SPARKDOCTOR_" + name.upper()], name + ".py", "exec"), module.__dict__)
    sys.modules[name] = module
sys.modules["probe_site"].rebuild()
import importlib.util
print(int(importlib.util.find_spec("vllm") is not None), "%d.%d" % sys.version_info[:2])
"""


def _find_env() -> tuple[str, ...]:
    shared = data_dir("probes") / "shared"
    sources = {f"SPARKDOCTOR_{n.upper()}": (shared / f"{n}.py").read_text(encoding="utf-8") for n in ("probe_io", "probe_site")}
    return tuple(f"{key}={value}" for key, value in {"SPARKDOCTOR_FIND": FIND_PY, **sources}.items())

def container_cli(runtime: str | None = None) -> list[str]:
    """The container CLI: `runtime` (--runtime), else $SPARKDOCTOR_CONTAINER_RUNTIME (or its older name
    $SPARKDOCTOR_CONTAINER_CLI), else docker, else podman on PATH. The one place that chooses it."""
    chosen = runtime or os.environ.get(RUNTIME_ENV) or os.environ.get(CLI_ENV)
    for name in ([chosen] if chosen else ["docker", "podman"]):
        found = shutil.which(name)
        if found:
            return [found]
    if chosen:
        where = "--runtime" if runtime else RUNTIME_ENV if os.environ.get(RUNTIME_ENV) else CLI_ENV
        raise TargetError(f"{where} {chosen}: no such program on PATH" if runtime else f"{where}={chosen}: no such program on PATH")
    raise TargetError("--container: neither docker nor podman is on PATH")


def _ask(cli: list[str], args: list[str], what: str, run: Runner, named: int = 1, missing: str | None = None) -> str:
    """What `cli args` printed; TargetError naming `what` and the command's first `named` words when it did not
    answer in time, `missing` when it failed saying "no such", else why it failed."""
    res = run([*cli, *args], INSPECT_TIMEOUT)
    if res.timed_out:
        why = f" ({proc.BUDGET_NOTE})" if res.out_of_budget else ""
        raise TargetError(f"{what}: `{os.path.basename(cli[0])} {' '.join(args[:named])}` did not answer within "
                          f"{res.seconds:.1f}s{why}; is the container daemon up?")
    if not res.ok and missing and "no such" in (res.stderr + res.stdout).lower():
        raise TargetError(f"{what}: {missing}")
    if not res.ok:
        raise TargetError(f"{what}: {res.describe_failure()}")
    return res.stdout


def inspect_container(cli: list[str], name: str, run: Runner = _here) -> dict[str, Any]:
    what = f"--container {name}"
    stdout = _ask(cli, ["container", "inspect", "--", name], what, run, named=2,  # "--": a name is never an option
                  missing=f"no such container (see `{os.path.basename(cli[0])} ps -a`)")
    record = inspected(stdout, what)
    state = record.get("State") or {}
    if not isinstance(state, dict):
        raise TargetError(f"{what}: the container CLI printed no inspect record")
    if not state.get("Running"):
        raise TargetError(f"{what}: the container is {state.get('Status') or 'not running'}; start it first (sparkdoctor probes a running container)")
    return record


def inspected(stdout: str, what: str) -> dict[str, object]:
    """The one record a container CLI's `inspect` printed (or a list of it); TargetError naming `what` for none."""
    try:
        data = json_answer(stdout)
    except NotJSON as exc:
        raise TargetError(f"{what}: the container CLI's inspect answer {exc}") from None
    record = data[0] if isinstance(data, list) and data else data
    if not isinstance(record, dict):
        raise TargetError(f"{what}: the container CLI printed no inspect record")
    return record


def image_facts(cli: list[str], image_id: str, run: Runner = _here) -> dict[str, object]:
    """Platform, layer digests, config digest and the fingerprint over the three."""
    what = f"image {image_id[:19]}"  # the id a node's CLI named: never an option
    record = inspected(_ask(cli, ["image", "inspect", "--", image_id], what, run), what)
    platform = "/".join(str(p) for p in (record.get("Os"), record.get("Architecture"), record.get("Variant")) if p)
    layers = list((rootfs.get("Layers") if isinstance(rootfs := record.get("RootFS"), dict) else None) or [])
    config = str(record.get("Id") or image_id)
    if not config.startswith("sha256:"):
        config = f"sha256:{config}"  # podman prints the bare hex
    material = json.dumps({"platform": platform, "layers": layers, "config": config}, sort_keys=True)
    return {
        "platform": platform,
        "layers": layers,
        "config_digest": config,
        "repo_digests": list(digests) if isinstance(digests := record.get("RepoDigests"), list) else [],
        "fingerprint": hashlib.sha256(material.encode()).hexdigest()[:16],
    }


def find_python(cli: list[str], name: str) -> tuple[str, str, bool]:
    """(interpreter, why it was chosen, whether the container has a sh): the first holding vLLM, else the first on the
    container's PATH. Each look is bounded in the container (its sh, BOUNDED) and here (reaped): a candidate that
    hangs is stopped, never left running there."""
    shell = ContainerTarget(cli, name, "", "", shell=True)
    res = shell.run_command(["sh", "-c", FIND_SCRIPT], FIND_TIMEOUT, env=_find_env())
    if res.timed_out:
        raise TargetError(f"--container {name}: looking for Python in the container did not finish within {res.seconds:.1f}s")
    # a line per candidate: PATH HAS_VLLM VERSION
    found = [(p[0], p[1] == "1") for p in map(str.split, res.stdout.splitlines()) if len(p) == 3 and p[1] in ("0", "1")]
    if not found and not res.ok and not has_shell(cli, name):
        bare = ContainerTarget(cli, name, "", "")
        for python in ("python3", "python"):  # no shell in the image: try the usual names directly
            if bare.run_command([python, "-S", "-B", "-c", "pass"], FIND_TIMEOUT).ok:
                return python, "the container's PATH (no shell in the image)", False
    with_vllm = [p for p, has in found if has]
    if with_vllm:
        return with_vllm[0], "vLLM found in the container", True
    if found:
        return found[0][0], "the container's first Python (no vLLM found)", True
    raise TargetError(f"--container {name}: no Python interpreter found in the container (give one with --container-python)")


def has_shell(cli: list[str], name: str) -> bool:
    """Whether the container has a sh (a distroless image has none)."""
    return ContainerTarget(cli, name, "", "").run_command(["sh", "-c", ":"], FIND_TIMEOUT).ok


def check_python(target: ContainerTarget) -> None:
    target.shell = has_shell(target.engine, target.name)
    # -S: asking its version runs none of the interpreter's .pth import lines or sitecustomize.py
    res = target.run_command([target.python, "-S", "-B", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             timeout=FIND_TIMEOUT)
    if res.timed_out:
        raise TargetError(f"--container-python {target.python}: did not answer within {res.seconds:.1f}s")
    if not res.ok:
        raise TargetError(f"--container-python {target.python}: not runnable in container {target.name}: {res.describe_failure()}")


def resolve_container_target(name: str, python: str | None = None, runtime: str | None = None) -> ContainerTarget:
    """The running container `name` with its interpreter; TargetError (one line) when it cannot be probed."""
    if not name.strip():
        raise TargetError("--container '': give a container name or id")
    cli = container_cli(runtime)
    record = inspect_container(cli, name)
    image_id = str(record.get("Image") or "")
    config = record.get("Config") or {}
    info: dict[str, object] = {
        "name": str(record.get("Name") or name).lstrip("/"),
        "id": str(record.get("Id") or "")[:12],
        "engine": os.path.basename(cli[0]),
        "image": str(config.get("Image") or record.get("ImageName") or ""),
        "image_id": image_id,
        "runtime": (record.get("HostConfig") or {}).get("Runtime"),
    }
    try:
        info.update(image_facts(cli, image_id))
    except (TargetError, ValueError, IndexError, AttributeError, TypeError) as exc:
        info["image_error"] = str(exc)[:300]
    if python:
        target = ContainerTarget(cli, name, python, "--container-python", info)
        check_python(target)
    else:
        interpreter, why, shell = find_python(cli, name)
        target = ContainerTarget(cli, name, interpreter, why, info, shell=shell)
    target.cache_root = cache_root_for(target)
    return target


def cache_root_for(target: ContainerTarget) -> Path:
    """The host folder of one container interpreter's probe caches: by image content and interpreter
    (a container recreated from the same image keeps its cache; another image never shares it)."""
    key = f"{target.info.get('fingerprint') or target.info.get('image_id')}|{target.name}|{target.python}"
    return cache_dir() / "containers" / hashlib.sha256(key.encode()).hexdigest()[:16]
