"""`sparkdoctor matrix verify`: prove matrix entries against real package versions.

An entry that a probe can check names the probe and what it gives on an affected install, and lists
the installs to try in a `verify` table (format: sparkdoctor.matrix.verify_table). Each environment
is built with real pip, the probe runs in it, and the entry is judged:

  selection  which entries, and their probe, expectation and environments
  venvs      the scratch environments (build, reuse, lock, remove)
  probes     one probe in one environment
  runner     the runs and the verdicts (confirmed / contradicted / error), and the exit code

Output lives in sparkdoctor.views.verify, exit codes in sparkdoctor.exitcodes.
"""

from sparkdoctor.matrix.verify_table import ALLOWED_OPTIONS, Env, parse_step
from sparkdoctor.verify.probes import find_ptxas, run_probe
from sparkdoctor.verify.runner import Result, Run, exit_code, judge, verify
from sparkdoctor.verify.selection import Spec, VerifyError, parse_spec, select
from sparkdoctor.verify.venvs import (
    READY,
    BuildError,
    ensure_venv,
    venv_path,
    venv_root,
)

__all__ = [
    "ALLOWED_OPTIONS", "BuildError", "Env", "READY", "Result", "Run", "Spec", "VerifyError", "ensure_venv", "exit_code",
    "find_ptxas", "judge", "parse_spec", "parse_step", "run_probe", "select", "venv_path", "venv_root", "verify",
]
