"""Symptoms that several known problems share: one log line, several candidate causes.

"no kernel image is available for execution on the device" is printed by a torch without SM12x code,
by CuTe DSL cubins built for another arch and by any library whose wheel lacks sm_121 code; a
DeepGEMM "Unknown recipe" abort comes from two vLLM releases that bundle a DeepGEMM without SM12x
kernels. When two or more entries match the same line, explain must not present one of them as
"the" exact cause: it lists the candidates, what tells them apart (their conditions), and points at
the command that evaluates those conditions (decide_with: `check`, `recipe check`, `fleet check`). Pure functions over matches.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkdoctor.matrix.symptoms import SymptomMatch


@dataclass(frozen=True)
class Ambiguity:
    """One line that several entries' symptoms match."""

    line_no: int
    line: str
    candidates: tuple[SymptomMatch, ...]

    @property
    def ids(self) -> list[str]:
        return [m.entry.id for m in self.candidates]


def ambiguous_lines(matches: list[SymptomMatch]) -> list[Ambiguity]:
    """The lines (in order) whose first match is shared by two or more entries. A match that
    cannot be placed (line 0: a symptom wrapped over several lines) is never grouped."""
    by_line: dict[int, list[SymptomMatch]] = {}
    for m in matches:
        if m.line_no > 0:
            by_line.setdefault(m.line_no, []).append(m)
    return [Ambiguity(no, group[0].line, tuple(group)) for no, group in sorted(by_line.items()) if len(group) > 1]


def decide_with(group: Ambiguity) -> str:
    """The command that can evaluate the candidates' conditions: `fleet check` when one needs multi-node
    signals (when.fleet is never true on one box), `recipe check` when one judges a recipe, else `check`."""
    whens = [m.entry.when for m in group.candidates]
    if any("fleet" in w for w in whens):
        return "sparkdoctor fleet check"
    if any("serving" in w for w in whens):
        return "sparkdoctor recipe check"
    return "sparkdoctor check"
