"""Hypothesis strategies for the fuzz suite (tests/test_fuzz.py), by job: values.py (what to plant),
mutate.py (where), files.py (how it is written out), inputs.py (snapshots, matrices, configs)."""

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

__all__ = ["FACTS_DIR", "MATRIX_DIR", "SLOW_ENV", "config_files", "materialize", "matrix_files", "snapshot_bases",
           "snapshot_files", "snapshots"]
