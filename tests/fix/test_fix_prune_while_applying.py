"""`fix --prune` beside a `fix --yes` that has written its journal and not yet marked it applying: the journal read as
"planned" (settled) and was removed under the apply, which then changed the target with no journal to undo it. A
journal whose target another fix or rollback holds is now spared, whatever it says. A venv made as users make it
(python -m venv, its pip), local wheels, no network."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from sparkdoctor import proc
from tests.fix import scenario
from tests.fix.scenario import DATA, as_json, fix_cli

pytestmark = pytest.mark.slow


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] == "T"


def test_prune_spares_the_journal_of_an_apply_under_way(tmp_path, wheels):
    python = scenario.make_target(tmp_path, "pip", wheels, fresh=True)
    state_dir = tmp_path / "state"
    env = {**os.environ, "SPARKDOCTOR_STATE_DIR": str(state_dir), "PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1"}
    argv = [sys.executable, "-m", "sparkdoctor", "fix", "--python", str(python), "--no-kernels", "--matrix", str(DATA / "matrix"),
            "--fixes", str(DATA / "fixes"), "--yes"]
    # the apply stops itself (SIGSTOP) once its journal is whole, before it marks it applying and changes anything
    first = proc.start(argv, env={**env, "SPARKDOCTOR_FIX_STOP_AT": "apply:journal-complete"})
    assert first.popen is not None
    try:
        for _ in range(6000):  # its check, plan and journal: polled every 0.1 s, at most 10 min on a loaded machine
            if first.popen.poll() is not None or _stopped(first.popen.pid):
                break
            time.sleep(0.1)
        assert first.popen.poll() is None and _stopped(first.popen.pid)
        (journal,) = scenario.journals(state_dir)

        pruned = fix_cli(None, "--prune", "--keep", "0", "--format", "json", env=env)
        assert pruned.returncode == 0, pruned.stdout + pruned.stderr
        result = as_json(pruned)["result"]
        assert result["removed"] == [] and [r["journal"] for r in result["kept_unsettled"]] == [journal.name], result
        assert journal.is_dir()
        said = fix_cli(None, "--prune", "--keep", "0", env=env)
        assert said.returncode == 0 and f"Kept {journal.name} (planned): a fix or rollback is running on its target now" in \
            said.stdout, said.stdout + said.stderr
    finally:
        os.kill(first.popen.pid, signal.SIGCONT)
    done = first.result(600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (journal / "applied").exists()
