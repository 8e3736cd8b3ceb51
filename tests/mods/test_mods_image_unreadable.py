"""`mods check --image` when the image cannot be read (no container runtime, its daemon down, the image not on this
machine) is exit 3, as `--container` is: the target could not be read. bench's mods gate and recipe check's
`--image` go on (or stop) as they did: they catch both ModError and TargetUnprobeable. No daemon is needed: a
fake `docker` on PATH answers as a stopped daemon does."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkdoctor.errors import TargetUnprobeable
from tests.mods.test_mods_recipe import eugr_repo

DOWN = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
GONE = "Error response from daemon: No such image: img:1"


def fake_docker(tmp_path: Path, said: str) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    docker = folder / "docker"
    docker.write_text(f"#!/bin/sh\necho '{said}' >&2\nexit 1\n")
    docker.chmod(0o755)
    return folder


def mods_check_image(tmp_path: Path):
    from sparkdoctor.commands.mods import ModsCommand, run

    patch = tmp_path / "m.patch"
    patch.write_text("--- a/vllm/a.py\n+++ b/vllm/a.py\n@@ -1 +1 @@\n-hi\n+ho\n")
    return run(ModsCommand([patch], image="img:1"))


@pytest.mark.parametrize("said, words", [(DOWN, "Cannot connect to the Docker daemon"),
                                         (GONE, "image img:1 is not on this machine")], ids=["daemon-down", "not-here"])
def test_an_image_whose_daemon_is_down_or_that_is_not_here_is_exit_3(tmp_path, monkeypatch, said, words):
    monkeypatch.setenv("PATH", str(fake_docker(tmp_path, said)))
    monkeypatch.delenv("SPARKDOCTOR_CONTAINER_RUNTIME", raising=False)
    monkeypatch.delenv("SPARKDOCTOR_CONTAINER_CLI", raising=False)
    with pytest.raises(TargetUnprobeable, match=words) as caught:
        mods_check_image(tmp_path)
    assert caught.value.exit_code == 3


def test_an_image_with_no_runtime_is_exit_3_and_names_image(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("SPARKDOCTOR_CONTAINER_RUNTIME", raising=False)
    monkeypatch.delenv("SPARKDOCTOR_CONTAINER_CLI", raising=False)
    with pytest.raises(TargetUnprobeable, match="--image img:1: neither docker nor podman is on PATH") as caught:
        mods_check_image(tmp_path)
    assert caught.value.exit_code == 3
    monkeypatch.setenv("SPARKDOCTOR_CONTAINER_RUNTIME", str(tmp_path / "no-docker"))
    with pytest.raises(TargetUnprobeable, match="no such program") as caught:
        mods_check_image(tmp_path)
    assert caught.value.exit_code == 3


def test_benchs_mods_gate_goes_on_when_the_daemon_is_down(tmp_path, monkeypatch):
    """bench judges a container recipe's mods against its image; a daemon that is down leaves them unjudged (said)
    and the launch goes on to fail or succeed on its own, as before."""
    from sparkdoctor.mods.recipe import launch_gate
    from sparkdoctor.recipes.loader import load

    recipe = load(eugr_repo(tmp_path, ["mods/fix-upstream"]))
    monkeypatch.setenv("PATH", str(fake_docker(tmp_path, DOWN)))
    said: list[str] = []
    assert launch_gate(recipe, None, False, said.append, runtime="docker") is None
    assert any("could not be judged" in line and "Cannot connect" in line for line in said), said


def test_recipe_check_image_with_the_daemon_down_is_still_exit_3(tmp_path, monkeypatch):
    from sparkdoctor.conclusions.recipe_check import run

    recipe = eugr_repo(tmp_path, ["mods/fix-upstream"])
    monkeypatch.setenv("PATH", str(fake_docker(tmp_path, DOWN)))
    with pytest.raises(TargetUnprobeable, match="Cannot connect") as caught:
        run(str(recipe), {}, None, None, "error", image="img:1")
    assert caught.value.exit_code == 3
