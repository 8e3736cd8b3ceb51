"""The sparkrun plugin on a recipe that names a container image, through real sparkrun 0.4.2 and the session's real
dockerd: the gates judge the image (a throwaway container of it, `recipe check --image` and `mods check --image`),
and the recipe's mods are the folders sparkrun itself would find beside the recipe (sparkrun core/mods.py
_resolve_adjacent). A mod that fails on the image refuses the launch; with mods that apply, `sparkrun run --dry-run`
goes on through all six of its steps (the image is on the daemon: "[5/6] Launching vllm runtime" is planned, not
executed). No GPU here: see tests/test_sparkrun_plugin.py for why the launches are dry runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests import venvs
from tests.container.test_mods_container import image_env, leftovers, mods, mods_image  # noqa: F401 (a fixture)
from tests.mods.conftest import sandbox_tools  # noqa: F401 (the fixture)
from tests.test_sparkrun_plugin import REFUSED, home, run

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("sandbox_tools")]


def recipe(root: Path, image: str, names: list[str]) -> Path:
    """A sparkrun recipe in root/recipes/ whose mods (root/recipes/mods/NAME, as sparkrun looks for them) are the
    eugr-shaped mods of test_mods_container."""
    folder = root / "recipes"
    found = mods(root / "made")
    for name in names:
        shutil.copytree(found[name], folder / "mods" / name)
    path = folder / f"toy-{'-'.join(names)}.yaml"
    path.write_text(f'recipe_version: "2"\nmodel: org/toy\nruntime: vllm\ncontainer: {image}\n'
                    f"mods: {json.dumps(names)}\ncommand: vllm serve org/toy\nsparkdoctor: true\n")
    return path


def test_a_mod_that_fails_on_the_recipes_image_refuses_the_launch_and_one_that_applies_does_not(
        docker_daemon, docker_env, mods_image, tmp_path):  # noqa: F811 (the fixture)
    python = venvs.sparkrun_venv()
    env = {**image_env(docker_daemon, docker_env, tmp_path), **home(tmp_path / "home")}
    assert run([python.parent / "sparkrun", "plugins", "enable", "sparkdoctor"], env).returncode == 0

    def launch(path: Path) -> str:
        done = run([python.parent / "sparkrun", "run", path, "-H", "localhost", "--dry-run", "--offline",
                    "--no-auto-detect"], env)
        return f"rc={done.returncode}\n{done.stdout}{done.stderr}"

    out = launch(recipe(tmp_path / "bad", mods_image, ["fix-applies", "fix-gone"]))
    assert "rc=1" in out and REFUSED + "mods check: mod fix-gone does not apply to image " + mods_image in out, out[-3000:]
    assert "fix-applies does not apply" not in out and "[1/6] Preparing" not in out
    assert f"target: image {mods_image}" in out  # the recipe's image, as sparkrun resolved the recipe
    out = launch(recipe(tmp_path / "good", mods_image, ["fix-applies"]))
    assert "sparkdoctor: every gate passed" in out and "[1/6] Preparing" in out, out[-3000:]
    # the image is on the (test) daemon, so the dry run plans every step to the end: only the run is dry
    assert "[3/6] Distributing resources\n  done" in out and "[5/6] Launching vllm runtime" in out, out[-3000:]
    assert leftovers(docker_daemon) == []  # the gates' throwaway containers are gone
