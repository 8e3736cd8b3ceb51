"""Judge entries against Facts, three-valued: an entry matches, is clear, or could not be evaluated.

Any condition that is False clears the entry (false wins over unknown); otherwise any unknown makes
the entry unknown, never clear; only all-True is a match.
"""

from __future__ import annotations

from sparkdoctor.facts import Facts
from sparkdoctor.matrix.conditions import CONDITIONS
from sparkdoctor.matrix.model import Entry, Evaluation, Matrix
from sparkdoctor.patterns import budget


def evaluate(entry: Entry, facts: Facts) -> Evaluation:
    if entry.withdrawn:
        return Evaluation(entry, "withdrawn", [])
    checks = [c for key, spec in entry.when.items() for c in CONDITIONS[key].evaluate(spec, facts)]
    if any(c.result is False for c in checks):
        outcome = "clear"
    elif any(c.result is None for c in checks):
        outcome = "unknown"
    else:
        outcome = "match"
    return Evaluation(entry, outcome, checks)


def needs_recipe(entry: Entry) -> bool:
    """Whether the entry judges a recipe's settings (a condition only `recipe check` can evaluate)."""
    return any(CONDITIONS[key].needs_recipe for key in entry.when if key in CONDITIONS)


def evaluate_all(matrix: Matrix, facts: Facts) -> list[Evaluation]:
    """Every entry, less those that judge a recipe's settings when the Facts carry no recipe (plain check)
    and those kept for reference only (a platform fact with nothing to change: `explain` still finds them).
    The entries' patterns share one time budget (patterns.budget): a file's patterns are bounded in total."""
    with budget():
        return [evaluate(e, facts) for e in matrix.entries
                if not e.reference_only and (facts.recipe is not None or not needs_recipe(e))]
