"""`rerun` lists a mod that upstream made already as a stale workaround, citing the file and lines (issue 25
item 4), on real material: the target venv holds vLLM 0.19.1's own released files (read from the registry's
wheel at test time, never committed), and the mods are eugr/spark-vllm-docker-shaped folders.

- pr34695-backport: the second step of eugr's mods/fix-glm-4.7-flash-AWQ (065fb92) backports
  vllm-project/vllm#34695 (`and hasattr(self.kv_b_proj, "weight")` in mla_attention.py), guarded by a grep as
  eugr's run.sh is. vLLM 0.19.1 has the line: the mod is stale there.
- fix-kv-splits: eugr's glm47_flash.patch change to triton_mla.py (the KV-split count), written for 0.19.1: it
  applies there, so it is not stale (and not listed).
Written in this project's words from the released files (no third-party patch is stored here).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.conclusions import rerun as pipeline
from sparkdoctor.ledger import Ledger
from tests.mods.conftest import sandbox_tools  # noqa: F401 (the fixture)
from tests.mods.test_mods_releases import (
    EUGR_PREFIX,
    MLA_ATTENTION,
    TRITON_MLA,
    diff,
    released,
)
from tests.rerun.ledgerdata import add_ab
from tests.rerun.test_conclusions import _json

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("sandbox_tools")]

GUARD = '            and hasattr(self.kv_b_proj, "weight")\n'
KV_LINE = "num_kv_splits = 1 if envs.VLLM_BATCH_INVARIANT else 4"


def vllm_venv(tmp_path: Path, version: str, files: dict[str, str]) -> Path:
    """A real venv whose installed 'vllm' distribution holds these released files (site-relative path -> text)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "vllm").mkdir()
    (site / "vllm" / "__init__.py").write_text(f"__version__ = '{version}'\n")
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    info = site / f"vllm-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    (info / "RECORD").write_text("".join(f"{r},,\n" for r in ["vllm/__init__.py", *files, f"{info.name}/METADATA"]))
    return venv / "bin" / "python"


def eugr_repo(tmp_path: Path, mla: str, triton: str) -> dict[str, Path]:
    repo = tmp_path / "repo"
    (repo / "recipes").mkdir(parents=True)
    backport = repo / "mods" / "pr34695-backport"
    backport.mkdir(parents=True)
    (backport / "fix.patch").write_text(diff(mla.replace(GUARD, "", 1), mla, MLA_ATTENTION, EUGR_PREFIX))
    (backport / "run.sh").write_text(f"#!/bin/bash\nset -e\nif grep -q 'hasattr(self.kv_b_proj, \"weight\")' "
                                     f"/{EUGR_PREFIX}{MLA_ATTENTION}; then echo 'already there'; exit 0; fi\n"
                                     "patch -p1 -d / < fix.patch\n")
    splits = repo / "mods" / "fix-kv-splits"
    splits.mkdir(parents=True)
    (splits / "fix.patch").write_text(diff(triton, triton.replace(KV_LINE, "num_kv_splits = 1 if envs.VLLM_BATCH_INVARIANT else max(4, B)"),
                                           TRITON_MLA, EUGR_PREFIX))
    (splits / "run.sh").write_text("#!/bin/bash\nset -e\npatch -p1 -d / < fix.patch\n")
    paths = {}
    for arm, mods in (("A", ["mods/pr34695-backport", "mods/fix-kv-splits"]), ("B", [])):
        path = repo / "recipes" / f"glm-{arm.lower()}.yaml"
        path.write_text(f'recipe_version: "1"\nname: glm-{arm.lower()}\nmodel: org/glm\ncontainer: vllm-node\n'
                        f"mods: {json.dumps(mods)}\ncommand: vllm serve org/glm --port 8000"
                        f"{' --enforce-eager' if arm == 'B' else ''}\n")
        paths[arm] = path
    return paths


def test_rerun_lists_a_mod_upstream_made_as_a_stale_workaround_with_file_and_lines(tmp_path, here_facts):
    mla, triton = released("0.19.1", MLA_ATTENTION), released("0.19.1", TRITON_MLA)
    assert GUARD in mla and KV_LINE in triton
    python = vllm_venv(tmp_path, "0.19.1", {MLA_ATTENTION: mla, TRITON_MLA: triton})
    paths = eugr_repo(tmp_path, mla, triton)
    facts = json.loads(json.dumps(here_facts))
    facts["target"] = {**facts["target"], "python": str(python), "executable": str(python)}
    ledger = tmp_path / "l.sqlite"
    with Ledger(ledger) as led:
        add_ab(led, paths, facts, {"A": [40.0, 41.0, 40.5], "B": [30.0, 31.0, 30.5]}, "mods-vs-eager",
               extra={"local": True})  # benched with --local: the venv's files are the target's
    result, doc = _json(["rerun", "--dry-run", "--ledger", ledger, "--format", "json"])
    assert doc is not None, result.output
    mods = [w for w in doc["workarounds"] if w.get("kind") == "mod"]
    assert [w["workaround"] for w in mods] == ["mod pr34695-backport"], doc["workarounds"]  # fix-kv-splits applies: not stale
    (mod,) = mods
    assert mod["status"] == "stale" and mod["recipe"] == str(paths["A"]) and mod["key"] == "mod:mods/pr34695-backport"
    (cited,) = mod["files"]
    assert cited["path"] == MLA_ATTENTION and cited["verdict"] == "already-applied"
    first, last = cited["lines"]
    assert mla.splitlines()[first - 1] == GUARD.rstrip("\n") and first <= last  # the line the mod adds, where 0.19.1 has it
    assert first == last  # the backport adds one line
    assert f"{MLA_ATTENTION}, line {first}: already-applied" in mod["reasons"][0]["evidence"][0]
    console = _json(["rerun", "--dry-run", "--ledger", ledger])[0].stdout
    assert "workaround mod pr34695-backport in glm-a" in console and f"line {first}: already-applied" in console
    assert "never applies mods" in console
    # rerun itself: a stale mod is advice (sparkdoctor never applies mods, so there is no with/without to launch)
    measured = pipeline.measure_workaround(None, mod, {}, pipeline.Options(ledger=ledger, matrix=None))
    assert measured["cost"] == [] and measured["advice"].startswith("drop mod pr34695-backport from glm-a")


def test_a_mod_the_release_breaks_is_not_called_stale(tmp_path, here_facts):
    """On vLLM 0.20.0's files the kv-splits patch fails (eugr/spark-vllm-docker#344): recipe check's error, never
    a stale workaround."""
    mla, triton = released("0.19.1", MLA_ATTENTION), released("0.19.1", TRITON_MLA)
    python = vllm_venv(tmp_path, "0.20.0", {TRITON_MLA: released("0.20.0", TRITON_MLA)})
    paths = eugr_repo(tmp_path, mla, triton)
    facts = json.loads(json.dumps(here_facts))
    facts["target"] = {**facts["target"], "python": str(python), "executable": str(python)}
    ledger = tmp_path / "l.sqlite"
    with Ledger(ledger) as led:
        add_ab(led, paths, facts, {"A": [40.0, 41.0, 40.5], "B": [30.0, 31.0, 30.5]}, "mods-vs-eager",
               extra={"local": True})  # benched with --local: the venv's files are the target's
    result, doc = _json(["rerun", "--dry-run", "--ledger", ledger, "--format", "json"])
    assert doc is not None, result.output
    assert not [w for w in doc["workarounds"] if w.get("kind") == "mod"], doc["workarounds"]
