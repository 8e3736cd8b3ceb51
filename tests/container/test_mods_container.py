"""The mods gate against a running container's files (issue 25 item 1), on the session's real dockerd: `mods
check --container` and `recipe check --container` read the files a mod touches from inside the container
through the container CLI, judge them on scratch copies on the host, and never change the container (its
`docker diff` and the bytes of the files are compared before and after)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.container.test_container_cli import one_line, sd
from tests.mods.conftest import sandbox_tools  # noqa: F401 (the fixture)
from tests.mods.test_mods_static import AFTER, BEFORE, make_diff

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("sandbox_tools")]
EUGR = "a/usr/local/lib/python3.12/dist-packages/"


def serving_venv(root: Path) -> Path:
    """A real venv (no pip) whose installed 'vllm' holds vllm/toy.py = BEFORE."""
    venv = root / "serving"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "vllm").mkdir()
    (site / "vllm" / "__init__.py").write_text("__version__ = '0.20.0'\n")
    (site / "vllm" / "toy.py").write_text(BEFORE)
    info = site / "vllm-0.20.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.20.0\n")
    (info / "RECORD").write_text("vllm/__init__.py,,\nvllm/toy.py,,\nvllm-0.20.0.dist-info/METADATA,,\n")
    return venv


def mods(root: Path) -> dict[str, Path]:
    """Three eugr-shaped mods: one that applies, one whose context is gone, one already upstream (folders whose
    run.sh applies the patch from /, as eugr's do, so it runs isolated against a scratch copy)."""
    folder = root / "repo" / "mods"
    out = {}
    for name, patch in (("fix-applies", make_diff(BEFORE, AFTER, prefix=EUGR)),
                        ("fix-gone", make_diff(BEFORE.replace("    splits = 4", "    splits = 2"), AFTER, prefix=EUGR)),
                        ("fix-upstream", make_diff(BEFORE.replace("line 7\n", ""), BEFORE, prefix=EUGR))):
        (folder / name).mkdir(parents=True)
        (folder / name / "fix.patch").write_text(patch)
        guard = " --forward" if name == "fix-upstream" else ""  # eugr's guarded form: skips a change made already
        (folder / name / "run.sh").write_text(f"#!/bin/bash\nset -e\npatch{guard} -p1 -d / < fix.patch{' || echo skipping' if guard else ''}\n")
        out[name] = folder / name
    return out


@pytest.fixture(scope="module")
def mods_container(docker_daemon, skeleton, tmp_path_factory) -> Iterator[tuple[str, Path]]:
    venv = serving_venv(tmp_path_factory.mktemp("mods-container"))
    name = "sd-mods"
    docker_daemon.containers.append(name)
    # read-write, so that "never changed" is something the container could have failed
    mounts = [arg for src, dst in docker_daemon.host_mounts() for arg in ("-v", f"{src}:{dst}:ro")]
    docker_daemon.must("run", "-d", "--init", "--network", "none", "--name", name, *mounts,
                       "-v", f"{venv}:/opt/serving", skeleton, "sleep", "infinity")
    yield name, venv
    docker_daemon.docker("rm", "-f", name, timeout=60)  # the launch tests count the daemon's containers
    docker_daemon.containers.remove(name)


def digest(venv: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(venv.rglob("*.py")) if p.is_file())).hexdigest()


def test_mods_check_reads_the_containers_files_and_changes_nothing(docker_daemon, docker_env, mods_container, tmp_path):
    name, venv = mods_container
    found = mods(tmp_path)
    before_diff, before_bytes = sorted(docker_daemon.must("diff", name).splitlines()), digest(venv)
    done = sd("mods", "check", *map(str, found.values()), "--container", name, "--container-python",
              "/opt/serving/bin/python", "-f", "json", env=docker_env, cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stderr  # fix-gone fails
    doc = json.loads(done.stdout)
    assert doc["target"] == f"container {name} (/opt/serving/bin/python)"
    verdicts = {m["name"]: m["verdict"] for m in doc["mods"]}
    assert verdicts == {"fix-applies": "applies", "fix-gone": "fails", "fix-upstream": "already-applied"}, doc
    gone = next(m for m in doc["mods"] if m["name"] == "fix-gone")
    assert any("`splits = 2` is nowhere in the file" in f["detail"] for f in gone["files"]), gone
    ran = next(m for m in doc["mods"] if m["name"] == "fix-applies")
    assert any(f["source"] == "run.sh" and f["detail"] == "changed by the script" for f in ran["files"]), ran  # ran on a copy
    assert sorted(docker_daemon.must("diff", name).splitlines()) == before_diff and digest(venv) == before_bytes
    left = docker_daemon.must("exec", name, "sh", "-c", "ls -A /tmp")
    assert "sparkdoctor" not in left, left


def test_recipe_check_judges_the_mods_inside_the_container(docker_daemon, docker_env, mods_container, tmp_path):
    name, venv = mods_container
    found = mods(tmp_path)
    recipe = tmp_path / "repo" / "recipes" / "toy.yaml"
    recipe.parent.mkdir(parents=True)
    recipe.write_text('recipe_version: "1"\nname: toy\nmodel: org/toy\ncontainer: vllm-node\n'
                      f"mods: {json.dumps([f'mods/{n}' for n in found])}\ncommand: vllm serve org/toy --port 8000\n")
    before = digest(venv)
    done = sd("recipe", "check", str(recipe), "--container", name, "--container-python", "/opt/serving/bin/python",
              "-f", "json", env={**docker_env, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}, cwd=tmp_path, timeout=400)
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    ids = {f["id"]: f["severity"] for f in doc["findings"] if f["kind"] == "mod"}
    assert ids == {"mod-fails:fix-gone": "error", "mod-superseded:fix-upstream": "warn"}, doc["findings"]
    assert doc["target"] == "/opt/serving/bin/python" and digest(venv) == before


def test_a_container_that_is_not_there_is_one_line_exit_3(docker_env, tmp_path):
    found = mods(tmp_path)
    done = sd("mods", "check", str(found["fix-applies"]), "--container", "sd-no-such-container", env=docker_env,
              cwd=tmp_path)
    one_line(done, 3, "sd-no-such-container")
    done = sd("mods", "check", str(found["fix-applies"]), "--container", "x", "--python", sys.executable,
              env=docker_env, cwd=tmp_path)
    one_line(done, 2, "exclude each other")


IMAGE = "sparkdoctor-mods-image:1"


@pytest.fixture(scope="module")
def mods_image(docker_daemon, tmp_path_factory) -> str:
    """An image whose /opt/serving venv holds vllm/toy.py = BEFORE (the interpreter it links to comes from the host
    through $SPARKDOCTOR_CONTAINER_MOUNTS, the mounts a launch gives the served container too)."""
    import tarfile

    from tests.container.docker_daemon import skeleton_tar

    root = tmp_path_factory.mktemp("mods-image")
    venv = serving_venv(root)
    tar_path = skeleton_tar(root / "image.tar")
    with tarfile.open(tar_path, "a") as tar:
        tar.add(str(venv), arcname="opt/serving")
    docker_daemon.must("import", "--change", "ENV PATH=/usr/local/bin:/usr/bin:/bin", str(tar_path), IMAGE)
    return IMAGE


def image_env(docker_daemon, docker_env, tmp_path: Path) -> dict[str, str]:
    mounts = ",".join(f"{src}:{dst}:ro" for src, dst in docker_daemon.host_mounts())
    return {**docker_env, "SPARKDOCTOR_CONTAINER_MOUNTS": mounts, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache"),
            "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "200"}


def leftovers(docker_daemon) -> list[str]:
    return docker_daemon.must("ps", "-a", "--format", "{{.Names}}", "--filter", "label=sparkdoctor.run").split()


def test_mods_check_reads_an_images_files_through_a_throwaway_container(docker_daemon, docker_env, mods_image, tmp_path):
    found = mods(tmp_path)
    image_id = docker_daemon.must("image", "inspect", "--format", "{{.Id}}", mods_image)
    done = sd("mods", "check", *map(str, found.values()), "--image", mods_image, "-f", "json",
              env=image_env(docker_daemon, docker_env, tmp_path), cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["target"] == f"image {mods_image} (/opt/serving/bin/python)"  # found as the interpreter holding vLLM
    assert {m["name"]: m["verdict"] for m in doc["mods"]} == {
        "fix-applies": "applies", "fix-gone": "fails", "fix-upstream": "already-applied"}, doc
    assert leftovers(docker_daemon) == [] and docker_daemon.must("image", "inspect", "--format", "{{.Id}}", mods_image) == image_id
    gone = sd("mods", "check", str(found["fix-applies"]), "--image", "sparkdoctor-no-such-image:1",
              env=image_env(docker_daemon, docker_env, tmp_path), cwd=tmp_path)
    one_line(gone, 3, "not on this machine", "never pulls")  # a target that cannot be read, as --container


def test_recipe_check_judges_a_recipe_against_its_images_vllm_through_a_throwaway_container(docker_daemon, docker_env,
                                                                                           mods_image, tmp_path):
    """`recipe check --image` (what the sparkrun plugin passes for a recipe's container): the image's interpreter
    holding vLLM is the target, its flags are judged against that vLLM (whose toy knows none: the flags probe
    needs probes/capabilities/ beside it in the container, which it once lacked, so no flag was ever judged in
    a container), its mods on its files, and the throwaway container is gone after."""
    found = mods(tmp_path)
    recipe = tmp_path / "repo" / "recipes" / "toy.yaml"
    recipe.parent.mkdir(parents=True)
    recipe.write_text(f'recipe_version: "1"\nname: toy\nmodel: org/toy\ncontainer: {mods_image}\n'
                      f"mods: {json.dumps([f'mods/{n}' for n in found])}\ncommand: vllm serve org/toy --port 8000\n")
    env = image_env(docker_daemon, docker_env, tmp_path)
    done = sd("recipe", "check", str(recipe), "--image", mods_image, "-f", "json", env=env, cwd=tmp_path, timeout=400)
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["target"] == "/opt/serving/bin/python" and doc["vllm"]["version"] == "0.20.0", doc
    ids = {f["id"]: f["severity"] for f in doc["findings"] if f["kind"] == "mod"}
    assert ids == {"mod-fails:fix-gone": "error", "mod-superseded:fix-upstream": "warn"}, doc["findings"]
    assert [f["id"] for f in doc["findings"] if f["kind"] == "flag"] == ["flag-unknown:--port"], doc["findings"]
    assert leftovers(docker_daemon) == []
    gone = sd("recipe", "check", str(recipe), "--image", "sparkdoctor-no-such-image:1", env=env, cwd=tmp_path)
    one_line(gone, 3, "not on this machine")
    both = sd("recipe", "check", str(recipe), "--image", mods_image, "--python", sys.executable, env=env, cwd=tmp_path)
    one_line(both, 2, "exclude each other")


def test_bench_does_not_launch_a_container_recipe_whose_mod_fails_on_its_image(docker_daemon, docker_env, mods_image, tmp_path):
    mods(tmp_path)
    recipe = tmp_path / "repo" / "recipes" / "toy.yaml"
    recipe.parent.mkdir(parents=True)
    recipe.write_text(f'recipe_version: "1"\nname: toy\nmodel: org/toy\ncontainer: {mods_image}\n'
                      'mods: ["mods/fix-applies", "mods/fix-gone"]\ncommand: vllm serve org/toy --port 8000\n')
    done = sd("bench", str(recipe), "--no-store", env=image_env(docker_daemon, docker_env, tmp_path), cwd=tmp_path,
              timeout=300)
    assert done.returncode == 4, (done.stdout[-1000:], done.stderr[-2000:])
    assert "toy: not launched: mod fix-gone does not apply to image " in done.stderr, done.stderr
    assert leftovers(docker_daemon) == []  # neither the throwaway container nor a served one


def test_rerun_finds_a_stale_mod_in_the_image_a_conclusion_was_served_from(docker_daemon, docker_env, mods_image, tmp_path):
    """A conclusion benched from a container recipe: its runs recorded the image; rerun judges the recipe's mods on
    that image's files and lists the one upstream made already (file and lines), not the one that applies."""
    from sparkdoctor.check import CheckRequest, collect
    from sparkdoctor.ledger import Ledger
    from sparkdoctor.targets.local import resolve_python_target
    from tests.rerun.ledgerdata import add_ab

    mods(tmp_path)
    recipes = {}
    for arm, listed in (("A", ["mods/fix-applies", "mods/fix-upstream"]), ("B", [])):
        recipes[arm] = tmp_path / "repo" / "recipes" / f"toy-{arm.lower()}.yaml"
        recipes[arm].parent.mkdir(parents=True, exist_ok=True)
        recipes[arm].write_text(f'recipe_version: "1"\nname: toy-{arm.lower()}\nmodel: org/toy\ncontainer: {mods_image}\n'
                                f"mods: {json.dumps(listed)}\ncommand: vllm serve org/toy --port 8000\n")
    facts = collect(CheckRequest(target=resolve_python_target(sys.executable), kernels=False)).to_dict()
    facts["container"] = {"image": mods_image, "engine": "docker"}
    ledger = tmp_path / "l.sqlite"
    with Ledger(ledger) as led:
        add_ab(led, recipes, facts, {"A": [40.0, 41.0, 40.5], "B": [30.0, 31.0, 30.5]}, "toy-mods")
    done = sd("rerun", "--dry-run", "--ledger", str(ledger), "--format", "json",
              env=image_env(docker_daemon, docker_env, tmp_path), cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    stale = [w for w in json.loads(done.stdout)["workarounds"] if w.get("kind") == "mod"]
    assert [(w["workaround"], w["target"]) for w in stale] == [
        ("mod fix-upstream", f"image {mods_image} (/opt/serving/bin/python)")], stale
    (cited,) = stale[0]["files"]
    assert cited["path"] == "vllm/toy.py" and cited["lines"] == [7, 7]  # the line the mod adds, where the image has it
    assert leftovers(docker_daemon) == []
