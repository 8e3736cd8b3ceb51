"""`fix --prune` beside a `fix --container ID --yes` under way: the apply took the container's lock under the name its
runtime reports (`vllm_node`), while its journal recorded the container as the user named it (the id), and prune keyed
its lock by that: it did not meet the apply's lock and removed the journal under the apply. Both now key the container
by the id its runtime reports. The apply's side is the lock `fix --yes` takes (pipeline.held_for_apply, then
apply's lock_of) on the container target `--container ID` resolves to; prune is the real command. No daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from sparkdoctor.fix import journal as jr
from tests.fix.test_fix_targets import write_journal

ID = "0123456789ab"
RECORD = {"kind": "container", "container": ID, "container_id": ID, "engine": "docker", "python": "/opt/venv/bin/python",
          "image_id": "sha256:ab"}
APPLY = f"""
import sys, time
from sparkdoctor.fix import inventory, journal as jr, pipeline
from sparkdoctor.targets.container import ContainerTarget
target = ContainerTarget(["docker"], {ID!r}, "/opt/venv/bin/python", "--container-python",
                         {{"name": "vllm_node", "id": {ID!r}, "image_id": "sha256:ab"}})
with pipeline.held_for_apply(target), jr.target_lock(*inventory.lock_of(target, {RECORD!r})):
    print("held", flush=True)
    time.sleep(600)
"""


def test_prune_meets_the_lock_of_an_apply_that_named_the_container_by_its_id(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(state))
    journal = write_journal(dict(RECORD))
    env = {**os.environ, "SPARKDOCTOR_STATE_DIR": str(state)}
    apply = subprocess.Popen([sys.executable, "-c", APPLY], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert apply.stdout is not None and apply.stdout.readline() == "held\n"
        pruned = subprocess.run([sys.executable, "-m", "sparkdoctor", "fix", "--prune", "--keep", "0", "--format", "json"],
                                capture_output=True, text=True, timeout=120, env=env, check=False)
    finally:
        apply.kill()
        apply.wait()
    assert pruned.returncode == 0, pruned.stdout + pruned.stderr
    result = json.loads(pruned.stdout)["result"]
    assert result["removed"] == [] and [r["journal"] for r in result["kept_unsettled"]] == [journal], result
    assert (jr.journals_dir() / journal).is_dir()
    # with the apply gone, the settled journal goes
    again = subprocess.run([sys.executable, "-m", "sparkdoctor", "fix", "--prune", "--keep", "0", "--format", "json"],
                           capture_output=True, text=True, timeout=120, env=env, check=False)
    assert [r["journal"] for r in json.loads(again.stdout)["result"]["removed"]] == [journal], again.stdout + again.stderr
