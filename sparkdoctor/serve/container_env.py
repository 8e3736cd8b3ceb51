"""What of a recipe reaches its container: its env (the container CLI's own environment and its `-e` arguments), and
whether its model folder holds a model (only such a folder is mounted: `model: /` or `~` would put this machine's
files into a third-party image's container, on the host's network).

The CLI runs on this machine; the recipe's env is meant for the container. Passed by name (`-e NAME`), a value comes
from the CLI's own environment and never shows in a process list, but it is then the CLI's too: a recipe's PATH,
HOME, TMPDIR, LD_PRELOAD or DOCKER_HOST would act on the CLI here. Those go as `-e NAME=VALUE` and the CLI keeps this
machine's own.
"""

from __future__ import annotations

import itertools
import os

from sparkdoctor.targets.early import loads_code

# Names the container CLI itself, its Go runtime or the dynamic loader act on (beside early.loads_code's): a recipe's
# value for one is meant for the container, and set for the CLI on the host it would move the daemon it talks to
# (DOCKER_HOST, a context), the config it reads (HOME, DOCKER_CONFIG, XDG_*), the helpers podman finds (PATH: conmon,
# crun), or load a library into it (LD_PRELOAD)
CLI_PREFIXES = ("DOCKER_", "CONTAINER", "PODMAN_", "BUILDAH_", "XDG_", "REGISTRY_", "SSL_CERT_")
CLI_NAMES = frozenset({"PATH", "TMPDIR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "GODEBUG", "GOGC",
                       "GOMAXPROCS", "GOMEMLIMIT", "GOTRACEBACK", "STORAGE_DRIVER", "STORAGE_OPTS"})


def cli_reads(name: str) -> bool:
    """Whether the container CLI on this machine (or what loads it) acts on the variable `name`."""
    upper = name.upper()
    return loads_code(name) or upper.startswith(CLI_PREFIXES) or upper in CLI_NAMES


def container_env(recipe_env: dict[str, str], base: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """(the container CLI's own environment, the `-e` arguments) for a recipe's env: a variable is passed by name,
    its value in the CLI's environment, so that it never shows in a process list; one the CLI acts on (cli_reads) is
    passed as NAME=VALUE and the CLI keeps this machine's value, so a recipe's env reaches its container only."""
    cli_env = dict(base)
    cli_env.setdefault("PYTHONUNBUFFERED", "1")
    wanted = {"PYTHONUNBUFFERED": cli_env["PYTHONUNBUFFERED"], **recipe_env}
    args = []
    for name in sorted(wanted):
        if cli_reads(name) and cli_env.get(name) != wanted[name]:
            args.append(f"{name}={wanted[name]}")
        else:
            cli_env[name] = wanted[name]
            args.append(name)
    return cli_env, args


WEIGHTS = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5", ".msgpack", ".safetensors.index.json")


def holds_model(folder: str, limit: int = 10_000) -> bool:
    """Whether `folder` holds a model: a config.json or params.json, and a weights file (names only, links not followed;
    at most `limit` entries read)."""
    try:
        with os.scandir(folder) as entries:
            names = {entry.name for entry in itertools.islice(entries, limit)}
    except OSError:
        return False
    return any(name.endswith(WEIGHTS) for name in names) and bool(names & {"config.json", "params.json"})
