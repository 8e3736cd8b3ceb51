"""The mods gate against real released vLLM files (read from the registry's wheels, never installed),
reproducing mods that applied on the release they were written for and broke on a later one.

The mods are written here, at test time, from the released file they were made for: the same change the
community mod makes, in this project's words (no third-party patch is stored in the repository).
- eugr/spark-vllm-docker#182 and #344 (mods/fix-glm-4.7-flash-AWQ, glm47_flash.patch at 065fb92): a patch that
  replaces triton_mla.py's fixed KV-split count; vLLM 0.20.0 rewrote that code (dynamic splits), so the patch
  stops applying. Here: written for 0.19.1, judged on 0.19.1 and 0.20.0.
- eugr/spark-vllm-docker#33 (fastsafetensors.patch at 6a66a4b): a patch of weight_utils.py that adds an import
  beside `get_tensor_model_parallel_rank` and takes the device from the world group; by vLLM 0.19.1 that import
  line had changed, so the patch fails. Here: written for 0.11.1, judged on 0.11.1 and 0.19.1.
- PR vllm-project/vllm#34695 (the second step of fix-glm-4.7-flash-AWQ, which guards itself with a grep): its
  line is in vLLM 0.19.1, so a mod that adds it is already upstream there.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

from sparkdoctor.mods.judge import judge_mod
from sparkdoctor.mods.model import Verdict
from sparkdoctor.mods.trees import ReleaseTree
from tests.mods.test_mods_static import sd

pytestmark = pytest.mark.slow

TRITON_MLA = "vllm/v1/attention/backends/mla/triton_mla.py"
WEIGHT_UTILS = "vllm/model_executor/model_loader/weight_utils.py"
MLA_ATTENTION = "vllm/model_executor/layers/attention/mla_attention.py"
EUGR_PREFIX = "usr/local/lib/python3.12/dist-packages/"


@pytest.fixture(autouse=True)
def _tools(sandbox_tools):
    pass


def released(version: str, rel: str) -> str:
    data = ReleaseTree([("vllm", version)]).read(rel)
    assert data is not None, f"{rel} is not in vllm {version}"
    return data.decode()


def diff(before: str, after: str, rel: str, prefix: str = "") -> str:
    assert before != after, "the mod changes nothing: the release does not read as expected"
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{prefix}{rel}",
                                        f"b/{prefix}{rel}"))


def eugr_mod(tmp_path: Path, name: str, patch: str) -> Path:
    """An eugr-style mod folder: the patch and a run.sh that applies it from / (as eugr's mods do)."""
    mod = tmp_path / "mods" / name
    mod.mkdir(parents=True)
    (mod / "fix.patch").write_text(patch)
    (mod / "run.sh").write_text("#!/bin/bash\nset -e\npatch -p1 -d / < fix.patch\necho '=== OK'\n")
    return mod


def test_kv_splits_patch_applies_on_0_19_1_and_breaks_on_0_20_0(tmp_path):
    old = released("0.19.1", TRITON_MLA)
    line = "num_kv_splits = 1 if envs.VLLM_BATCH_INVARIANT else 4"
    mod = eugr_mod(tmp_path, "fix-kv-splits",
                   diff(old, old.replace(line, "num_kv_splits = 1 if envs.VLLM_BATCH_INVARIANT else max(4, B)"),
                        TRITON_MLA, EUGR_PREFIX))
    written_for = judge_mod(mod, ReleaseTree([("vllm", "0.19.1")]))
    assert written_for.verdict is Verdict.APPLIES, written_for
    later = judge_mod(mod, ReleaseTree([("vllm", "0.20.0")]))
    assert later.verdict is Verdict.FAILS
    static = next(f for f in later.files if f.source == "fix.patch")
    assert static.path == TRITON_MLA and f"`{line}` is nowhere in the file" in static.detail
    assert "Hunk #1 FAILED" in later.detail  # what run.sh itself printed, as in the log


def test_fastsafetensors_patch_applies_on_0_11_1_and_breaks_on_0_19_1(tmp_path):
    old = released("0.11.1", WEIGHT_UTILS)
    anchor = "from vllm.distributed import get_tensor_model_parallel_rank\n"
    new = old.replace(anchor, anchor + "from vllm.distributed.parallel_state import get_world_group\n", 1)
    new = new.replace("        pg = torch.distributed.group.WORLD\n",
                      "        pg = get_world_group().device_group\n", 1)
    patch = tmp_path / "fastsafetensors.patch"
    patch.write_text(diff(old, new, WEIGHT_UTILS))
    assert judge_mod(patch, ReleaseTree([("vllm", "0.11.1")])).verdict is Verdict.APPLIES
    later = judge_mod(patch, ReleaseTree([("vllm", "0.19.1")]))
    assert later.verdict is Verdict.FAILS
    assert later.files[0].path == WEIGHT_UTILS and "hunk 1" in later.files[0].detail


def test_a_backport_that_is_upstream_already(tmp_path):
    now = released("0.19.1", MLA_ATTENTION)
    line = '            and hasattr(self.kv_b_proj, "weight")\n'
    assert line in now
    patch = tmp_path / "pr34695.patch"
    patch.write_text(diff(now.replace(line, "", 1), now, MLA_ATTENTION))
    result = judge_mod(patch, ReleaseTree([("vllm", "0.19.1")]))
    assert result.verdict in (Verdict.ALREADY_APPLIED, Verdict.SUPERSEDED), result


def test_the_command_judges_a_release_without_installing_it(tmp_path):
    old = released("0.19.1", TRITON_MLA)
    line = "num_kv_splits = 1 if envs.VLLM_BATCH_INVARIANT else 4"
    mod = eugr_mod(tmp_path, "fix-kv-splits", diff(old, old.replace(line, "num_kv_splits = 8"), TRITON_MLA, EUGR_PREFIX))
    done = sd("mods", "check", str(mod), "--release", "vllm==0.20.0", "-f", "json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["mods"][0]["verdict"] == "fails" and "vllm 0.20.0" in doc["target"]
