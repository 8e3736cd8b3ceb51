"""A container image's files, for the mods gate: what a recipe that names an image (eugr's `container:`) would
start from, read before anything is launched.

The image itself is never changed: a throwaway container of it is started (`run -d --network none
--entrypoint sleep IMAGE infinity`, labelled as sparkdoctor's launches are, so a sparkdoctor that dies
half-way leaves one that the next launch sweeps), its interpreter is found as `check --container` finds
one (the one holding vLLM, unless given), the files are read through the container CLI (mods.trees.
ContainerTree), and the container is removed at the end. It gets the extra mounts a launch gets
($SPARKDOCTOR_CONTAINER_MOUNTS), so the files are the ones the served container would see. Nothing is
pulled. An image that cannot be read (no container runtime, its daemon down, the image not on this machine, its
throwaway container not starting) is a TargetError, exit 3, as a `--container` that cannot be read is; `--image ''`
is a ModError (exit 2). Every caller that goes on without the mods (bench, rerun, recipe check) catches both.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

from sparkdoctor import proc
from sparkdoctor.mods.model import ModError
from sparkdoctor.mods.trees import ContainerTree
from sparkdoctor.serve.container_launch import (
    LABEL_OWNER,
    LABEL_RUN,
    MOUNTS_ENV,
    ContainerLaunchError,
    image_record,
    owner_label,
    parse_mounts,
)
from sparkdoctor.targets.container_inspect import (
    container_cli,
    resolve_container_target,
)
from sparkdoctor.targets.interface import TargetError

RUN_TIMEOUT = 120.0
RM_TIMEOUT = 60.0


@contextmanager
def image_tree(image: str, python: str | None = None, runtime: str | None = None) -> Iterator[ContainerTree]:
    """The site files of `image`'s interpreter, for the life of the block; ModError (one line) when it cannot
    be read, TargetError when its interpreter cannot be probed."""
    with throwaway_container(image, runtime) as name:
        target = resolve_container_target(name, python, runtime)
        yield ContainerTree(target, label=f"image {image} ({target.python})")


@contextmanager
def throwaway_container(image: str, runtime: str | None = None) -> Iterator[str]:
    """The name of a running throwaway container of `image` (no network, `sleep infinity`), removed at the end of
    the block; TargetError (one line, exit 3) when there is no runtime, its daemon does not answer, the image is
    not on this machine or the container does not start; ModError (exit 2) for an empty name or a bad
    $SPARKDOCTOR_CONTAINER_MOUNTS. Also what `recipe check --image` judges."""
    if not image.strip():
        raise ModError("--image '': give an image name or id")
    try:
        mounts = parse_mounts(os.environ.get(MOUNTS_ENV, ""))
    except ContainerLaunchError as exc:
        raise ModError(str(exc)) from None
    try:
        cli = container_cli(runtime)
    except TargetError as exc:  # no such runtime: the words of --container's, naming --image
        raise TargetError(str(exc).replace("--container:", f"--image {image}:", 1)) from None
    try:
        image_record(cli, image)  # never a pull
    except ContainerLaunchError as exc:  # the daemon is down, or the image is not here
        raise TargetError(str(exc)) from None
    name = f"sparkdoctor-mods-{secrets.token_hex(4)}"
    argv = [*cli, "run", "-d", "--network", "none", "--name", name, "--label", f"{LABEL_RUN}=mods-{name}",
            "--label", f"{LABEL_OWNER}={owner_label()}", "--entrypoint", "sleep"]
    for src, dst, mode in mounts:
        argv += ["-v", f"{src}:{dst}:{mode}"]
    started = proc.run([*argv, image, "infinity"], timeout=RUN_TIMEOUT)
    try:
        if not started.ok:
            said = (started.stderr or started.stdout).strip().splitlines()
            why = said[-1][:300] if said and not started.timed_out else started.describe_failure()
            raise TargetError(f"image {image}: a throwaway container of it did not start: {why}")
        yield name
    finally:
        proc.run([*cli, "rm", "-f", "-v", name], timeout=RM_TIMEOUT)
