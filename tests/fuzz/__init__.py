"""Hypothesis strategies for the fuzz suite (tests/test_fuzz.py), by job: values.py (what to plant),
mutate.py (where), files.py (how it is written out), inputs.py (snapshots, matrices, configs)."""

import os

from tests.fuzz.files import materialize
from tests.fuzz.inputs import (
    FACTS_DIR,
    MATRIX_DIR,
    SLOW_ENV,
    config_files,
    matrix_files,
    snapshot_bases,
    snapshot_files,
    snapshots,
)

__all__ = ["FACTS_DIR", "MATRIX_DIR", "SCALE", "SLOW_ENV", "config_files", "materialize", "matrix_files", "n",
           "snapshot_bases", "snapshot_files", "snapshots"]

# The counts are a CI run's: the examples are derandomized (the same ones every run), so CI re-runs a fixed set as a
# regression check. Through 2026-11-30 every run of tests/test_fuzz.py was 10,380 examples and the last ones found
# nothing left; the four library surfaces that took 80 of its 104 CPU s at load 4 now run half their count.
# SPARKDOCTOR_FUZZ_SCALE=2 doubles every count (tests/test_fuzz_inputs.py reads it too), 0.1 is a quick look.
SCALE = float(os.environ.get("SPARKDOCTOR_FUZZ_SCALE", "1"))


def n(examples: int) -> int:
    """A surface's example count at SCALE."""
    return max(1, int(examples * SCALE))
