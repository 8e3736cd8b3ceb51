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

from sparkdoctor.matrix.verify_table import Env, parse_step
from sparkdoctor.verify.probes import run_probe
from sparkdoctor.verify.runner import Run, exit_code, judge, verify
from sparkdoctor.verify.selection import VerifyError, parse_spec, select
from sparkdoctor.verify.venvs import READY, ensure_venv, venv_path

__all__ = [
    "Env", "READY", "Run", "VerifyError", "ensure_venv", "exit_code", "judge", "parse_spec", "parse_step", "run_probe",
    "select", "venv_path", "verify",
]
