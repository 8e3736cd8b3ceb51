"""`recipe check` judges the mods a recipe names (eugr's `mods:`) against the target's installed files: a mod
that no longer applies is an error, one already upstream a stale workaround, a missing one an error."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mods.test_mods_static import AFTER, BEFORE, make_diff, sd


@pytest.fixture(autouse=True)
def _tools(sandbox_tools):
    pass


def target_venv(tmp_path: Path, toy: str) -> Path:
    """A real venv holding an installed 'vllm' distribution (metadata, RECORD, two files) whose vllm/toy.py is `toy`."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "vllm").mkdir()
    (site / "vllm" / "__init__.py").write_text("__version__ = '0.20.0'\n")
    (site / "vllm" / "toy.py").write_text(toy)
    info = site / "vllm-0.20.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.20.0\n")
    (info / "RECORD").write_text("vllm/__init__.py,,\nvllm/toy.py,,\nvllm-0.20.0.dist-info/METADATA,,\n")
    return venv / "bin" / "python"


def eugr_repo(tmp_path: Path, mods: list[str]) -> Path:
    """An eugr/spark-vllm-docker-shaped checkout: recipes/ and mods/ side by side."""
    repo = tmp_path / "repo"
    (repo / "recipes").mkdir(parents=True)
    stale = make_diff(BEFORE.replace("    splits = 4", "    splits = 2"), BEFORE.replace("    splits = 4", "    splits = 3"), prefix="a/usr/local/lib/python3.12/dist-packages/")
    for name, patch in (("fix-stale", stale), ("fix-upstream", make_diff(BEFORE, AFTER))):
        (repo / "mods" / name).mkdir(parents=True)
        (repo / "mods" / name / "fix.patch").write_text(patch)
        (repo / "mods" / name / "run.sh").write_text("#!/bin/bash\nset -e\npatch --forward -p1 -d /usr/local/lib/python3.12/dist-packages < fix.patch || echo skipping\n"
                                                      if name == "fix-upstream" else "#!/bin/bash\nset -e\npatch -p1 -d / < fix.patch\n")
    recipe = repo / "recipes" / "toy.yaml"
    recipe.write_text('recipe_version: "1"\nname: toy\nmodel: org/toy\ncontainer: vllm-node\n'
                      f"mods: {json.dumps(mods)}\ncommand: vllm serve org/toy --port 8000\n")
    return recipe


def test_recipe_check_reports_failing_upstream_and_missing_mods(tmp_path):
    python = target_venv(tmp_path, AFTER)
    recipe = eugr_repo(tmp_path, ["mods/fix-stale", "mods/fix-upstream", "mods/fix-gone"])
    done = sd("recipe", "check", str(recipe), "--python", str(python), "-f", "json")
    doc = json.loads(done.stdout)
    by_id = {f["id"]: f for f in doc["findings"] if f["kind"] == "mod"}
    assert by_id["mod-fails:fix-stale"]["severity"] == "error"
    assert any("`splits = 2` is nowhere in the file" in e for e in by_id["mod-fails:fix-stale"]["evidence"])
    assert by_id["mod-superseded:fix-upstream"]["severity"] == "warn"
    assert by_id["mod-missing:mods/fix-gone"]["severity"] == "error"
    assert done.returncode == 1, done.stderr


def test_a_mod_that_applies_says_nothing(tmp_path):
    python = target_venv(tmp_path, BEFORE)
    recipe = eugr_repo(tmp_path, ["mods/fix-upstream"])
    done = sd("recipe", "check", str(recipe), "--python", str(python), "-f", "json")
    doc = json.loads(done.stdout)
    assert not [f for f in doc["findings"] if f["kind"] == "mod"], doc["findings"]


def test_bench_does_not_launch_a_recipe_whose_mod_fails(tmp_path):
    """A failing mod stops the launch before anything starts: one line, exit 4 (the server could not be launched)."""
    python = target_venv(tmp_path, AFTER)
    recipe = eugr_repo(tmp_path, ["mods/fix-stale"])
    done = sd("bench", str(recipe), "--local", "--python", str(python), "--no-store")
    assert done.returncode == 4, done.stderr
    assert "not launched" in done.stderr and "fix-stale" in done.stderr and done.stderr.count("\n") == 1


def test_an_upgraded_tree_reads_changed_packages_from_the_release(tmp_path):
    """what-if's view of the files after an upgrade: the changed package's files as released, the rest as now."""
    from sparkdoctor.mods.trees import SiteTree, UpgradedTree

    class Release:
        label = "vllm 9.9 (released wheel)"

        def read(self, rel: str) -> bytes | None:
            return b"released" if rel == "vllm/toy.py" else None

    (tmp_path / "site" / "vllm").mkdir(parents=True)
    (tmp_path / "site" / "vllm" / "gone.py").write_text("here today")
    (tmp_path / "site" / "flashinfer").mkdir()
    (tmp_path / "site" / "flashinfer" / "x.py").write_text("kept")
    tree = UpgradedTree(Release(), SiteTree([tmp_path / "site"], "today"), {"vllm"})  # type: ignore[arg-type]
    assert tree.read("vllm/toy.py") == b"released"
    assert tree.read("vllm/gone.py") is None  # the upgrade replaces the whole package
    assert tree.read("flashinfer/x.py") == b"kept"


def test_a_recipe_naming_a_mod_outside_its_repository_is_not_walked_copied_or_run(tmp_path, monkeypatch):
    """A recipe is third-party data: `mods: ["/"]` walked the whole file system (an internal error at /proc/1/cwd),
    and `~`, an absolute path or `..` pointed the sandbox's copy at any folder of the user's."""
    python = target_venv(tmp_path, AFTER)
    home = tmp_path / "home"
    (home / "grab").mkdir(parents=True)
    (home / "grab" / "run.sh").write_text(f"#!/bin/bash\ntouch {tmp_path}/copied-and-ran\n")
    outside = ["/", "/proc", "~/grab", str(home / "grab"), "../../home/grab", "mods/../../home/grab"]
    recipe = eugr_repo(tmp_path, [*outside, "mods/fix-upstream"])
    monkeypatch.setenv("HOME", str(home))
    done = sd("recipe", "check", str(recipe), "--python", str(python), "-f", "json")
    assert done.returncode in (0, 1), done.stdout[-800:]
    by_id = {f["id"]: f for f in json.loads(done.stdout)["findings"] if f["kind"] == "mod"}
    for written in outside:
        assert "an absolute path, ~ or .. is not judged" in by_id[f"mod-unjudged:{written}"]["evidence"][0], by_id
    assert "mod-superseded:fix-upstream" in by_id and not (tmp_path / "copied-and-ran").exists()
    folder = sd("mods", "check", "/proc", "--python", str(python))  # asked for by hand: walked only to a limit
    # which limit /proc meets first is the machine's: over ~940 processes, its pid folders pass the 1,000 entries before
    # 200 files are seen (a CI run, 2026-12-02)
    assert folder.returncode == 2 and "Traceback" not in folder.stderr, folder.stderr
    assert re.search(r"/proc: more than (200 files|1000 files, folders and links); a mod folder that large is not read",
                     folder.stderr), folder.stderr


def test_a_mod_that_is_a_link_out_of_the_recipes_repository_is_not_walked_copied_or_run(tmp_path, monkeypatch):
    """`mods/x` written as the repository's own but a symbolic link to a folder of the user's (`ln -s ~/grab mods/x`
    in a cloned recipe repository) passed the `..`/absolute test: it was walked, copied into the sandbox and its run.sh
    run, as the paths above are not."""
    python = target_venv(tmp_path, AFTER)
    home = tmp_path / "home"
    (home / "grab").mkdir(parents=True)
    (home / "grab" / "run.sh").write_text(f"#!/bin/bash\necho ran > {home}/ran\n")
    recipe = eugr_repo(tmp_path, ["mods/link-out", "mods/fix-upstream"])
    (recipe.parent.parent / "mods" / "link-out").symlink_to(home / "grab")
    monkeypatch.setenv("HOME", str(home))
    done = sd("recipe", "check", str(recipe), "--python", str(python), "-f", "json")
    assert done.returncode in (0, 1), done.stdout[-800:]
    by_id = {f["id"]: f for f in json.loads(done.stdout)["findings"] if f["kind"] == "mod"}
    assert "a link to a place outside the recipe's repository" in by_id["mod-unjudged:mods/link-out"]["evidence"][0], by_id
    assert "mod-superseded:fix-upstream" in by_id and not (home / "ran").exists()


def test_a_mod_folder_holding_a_link_out_of_itself_is_not_read(tmp_path):
    """`mods/fix/extra.patch -> ~/.ssh/id_ed25519` in a cloned recipe repository: the file behind the link was read
    (outside the sandbox) and judged as a diff; in the sandbox's copy the link dangles. A link inside the folder
    (`fix.diff -> fix.patch`) is read as before."""
    python = target_venv(tmp_path, AFTER)
    secret = tmp_path / "home" / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True)
    secret.write_text(make_diff(BEFORE, AFTER, rel="vllm/secret-name.py"))
    recipe = eugr_repo(tmp_path, ["mods/fix-upstream", "mods/fix-stale"])
    (recipe.parent.parent / "mods" / "fix-upstream" / "extra.patch").symlink_to(secret)
    (recipe.parent.parent / "mods" / "fix-stale" / "same.diff").symlink_to("fix.patch")
    (recipe.parent.parent / "mods" / "fix-stale" / "loop").symlink_to("loop")  # a link to itself: no internal error
    done = sd("recipe", "check", str(recipe), "--python", str(python), "-f", "json")
    by_id = {f["id"]: f for f in json.loads(done.stdout)["findings"] if f["kind"] == "mod"}
    assert "a link to a place outside the mod folder" in by_id["mod-unjudged:mods/fix-upstream"]["evidence"][0], by_id
    assert "secret-name" not in done.stdout and "mod-fails:fix-stale" in by_id
