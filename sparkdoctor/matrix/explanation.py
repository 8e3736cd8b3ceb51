"""What `sparkdoctor explain` found in one text, as a document: the entries whose symptoms it shows, the lines several
entries explain (ambiguous) with the conditions that tell the candidates apart. sparkdoctor/views/explain.py draws it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparkdoctor.exitcodes import EXIT_EXPLAIN_NO_MATCH, EXIT_OK
from sparkdoctor.matrix.ambiguity import decide_with
from sparkdoctor.matrix.conditions.serving import describe

if TYPE_CHECKING:
    from sparkdoctor.matrix.ambiguity import Ambiguity
    from sparkdoctor.matrix.model import Entry
    from sparkdoctor.matrix.symptoms import SymptomMatch


def describe_condition(key: str, value: object) -> str:
    """One `when` condition in words a person reads: `nvidia-cutlass-dsl ==4.5.0`, `CUTE_DSL_ARCH unset`."""
    if key == "serving" and isinstance(value, dict):
        return describe(value)
    if isinstance(value, dict):
        parts = []
        for k, v in value.items():
            if key == "env" and isinstance(v, bool):
                parts.append(f"{k} {'set' if v else 'unset'}")
            elif key in ("env", "ptxas", "kernels", "capabilities"):
                shown = " | ".join(map(str, v)) if isinstance(v, list) else str(v)
                parts.append(f"{k}={shown}")
            elif key == "env_matches":
                parts.append(f"{k} =~ /{v}/")
            elif isinstance(v, list):
                parts.append(f"{k} [{', '.join(map(str, v))}]")
            else:
                parts.append(f"{k} {v}")
        return ", ".join(parts)
    if isinstance(value, list):
        return " | ".join(map(str, value))
    return str(value)


def tells_apart(entry: Entry) -> list[str]:
    """The conditions that must hold for this candidate, in words (what check would look at)."""
    return [f"{key}: {describe_condition(key, value)}" for key, value in entry.when.items() if key != "gpu_arch"]


def summary(matches: list[SymptomMatch], groups: list[Ambiguity]) -> dict[str, Any]:
    shared = {i for g in groups for i in g.ids}
    one = [m for m in matches if m.entry.id not in shared]
    return {
        "matched": len(matches),
        "exact": sum(1 for m in one if m.how == "exact"),
        "tolerant": sum(1 for m in one if m.how == "tolerant"),
        "ambiguous": len(groups),
        "evidence": {lv: sum(1 for m in matches if m.entry.evidence == lv) for lv in ("reproduced", "checked", "reported")},
    }


EXPLAIN_SCHEMA = 1


@dataclass
class Explanation:
    """What `sparkdoctor explain` found in one text: the entries whose symptoms it shows, and the lines several
    entries explain (ambiguous)."""

    matches: list[SymptomMatch]
    source: str  # how to name the text: "stdin" or the file
    lines: int
    groups: list[Ambiguity] = field(default_factory=list)
    schema: int = EXPLAIN_SCHEMA

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.matches else EXIT_EXPLAIN_NO_MATCH

    def to_json(self) -> dict[str, object]:
        where = {i: g for g in self.groups for i in g.ids}
        docs = []
        for m in self.matches:
            doc = m.to_dict()
            g = where.get(m.entry.id)
            if g is not None:
                doc.update(ambiguous=True, candidates=g.ids, tells_apart=tells_apart(m.entry))
            docs.append(doc)
        amb = [{"line_no": g.line_no, "line": g.line, "decide_with": decide_with(g),
                "candidates": [{"id": m.entry.id, "title": m.entry.title, "tells_apart": tells_apart(m.entry)} for m in g.candidates]}
               for g in self.groups]
        return {"schema": self.schema, "source": self.source, "lines": self.lines, "summary": summary(self.matches, self.groups),
                "ambiguous": amb, "matches": docs}
