"""The matrix: the cited knowledge of what is broken (entries) and what is good (stacks).

Every matrix/*.toml file holds one component's `[[entry]]` and `[[stack]]` tables. An entry's `when`
table is a conjunction of conditions over Facts. Evaluation is three-valued: a condition is True,
False, or None when the fact it needs is unknown, so an entry either matches, is clear, or could
not be evaluated; "unknown" is never reported as "clear".

Modules, each importing only those above it:
  model        Entry, Stack, Matrix, Check, Evaluation, MatrixError
  versions     PEP 440 versions and specifiers, safe against any reported string
  conditions/  the condition vocabulary: one registry, a validator and an evaluator per condition
  verify_table the `verify` table of an entry (installs that `matrix verify` builds)
  file_checks  the `files` table of an entry (what the released wheels must contain)
  tracking     the `[tracked]` and `[lockstep]` tables and the rule that ties evidence to bounds
  schema       one entry / one stack checked field by field
  cache        the parsed matrix kept between runs
  loader       files, TOML, unique ids: the one validation path of every command
  evaluate     entries judged against Facts
  symptoms     entries found by their symptoms in pasted text or a server log
  ambiguity    symptoms several entries share, and the conditions that tell them apart
  explanation  what `explain` found, as a document
  consistency  what `matrix validate` checks across entries
  freshness    the releases the matrix is tracked through, and its known-good stacks, against what is installed
"""

from sparkdoctor.matrix.conditions import CONDITIONS
from sparkdoctor.matrix.evaluate import evaluate, evaluate_all, needs_recipe
from sparkdoctor.matrix.loader import known_probes, load
from sparkdoctor.matrix.model import (
    ACTIONS,
    EVIDENCE_LEVELS,
    SEVERITIES,
    Entry,
    Evaluation,
    Matrix,
    MatrixError,
    Stack,
)
from sparkdoctor.matrix.versions import version_in

__all__ = [
    "ACTIONS", "CONDITIONS", "EVIDENCE_LEVELS", "Entry", "Evaluation", "Matrix", "MatrixError", "SEVERITIES", "Stack",
    "evaluate", "evaluate_all", "needs_recipe", "known_probes", "load", "version_in",
]
