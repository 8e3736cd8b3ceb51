"""The Plan: what `fix` will do, in apply order, as plain data that is shown, journaled and replayed.

A Plan is computed once (sparkdoctor.fix.plan), shown as the dry run, written into the journal,
and applied from the journal, so what runs is what was shown. Versioned like every store.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

from sparkdoctor.fix.interface import ActionKind, StepKind

PLAN_VERSION = 1


@dataclass
class Step:
    """One change. op: edit (a file's new text), uninstall (names), install (requirements in one
    resolver call, with constraint lines), restore (force-reinstall exact versions, no deps)."""

    op: StepKind
    fix: str
    why: list[str]
    kind: ActionKind  # the fix file's action that asked for it
    path: str | None = None
    old_sha256: str | None = None
    new_text: str | None = None
    diff: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    requirements: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    side: str = "target"  # an edit's file: "target" (found in the target, e.g. a pin file) or "host" (named on the command line)


class PlannedFix(TypedDict):
    id: str
    title: str
    findings: list[str]  # the finding ids that ask for it


@dataclass
class Plan:
    target: dict[str, Any]  # python, is_venv; a container's kind, container and image_id
    installer: str
    fixes: list[PlannedFix] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    changes: dict[str, list[str | None]] = field(default_factory=dict)  # name -> [before, after]
    touched: list[str] = field(default_factory=list)  # every dist whose files may change
    checks_after: list[str] = field(default_factory=list)  # finding ids that should be gone
    probes_after: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    version: int = PLAN_VERSION

    @property
    def empty(self) -> bool:
        return not self.steps

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        if data.get("version") != PLAN_VERSION:
            raise ValueError(f"plan version {data.get('version')!r}; this sparkdoctor reads {PLAN_VERSION}")
        data = dict(data)
        data["steps"] = [step_of(s) for s in data.get("steps", [])]
        return cls(**data)


def step_of(data: dict[str, Any]) -> Step:
    """A Step from its JSON (a plan, a journal); ValueError when `op` names no StepKind or `kind` no ActionKind."""
    return Step(**{**data, "op": StepKind(data.get("op")), "kind": ActionKind(data.get("kind"))})
