"""What `conclusions` and `rerun` answer, as dataclasses: `to_json()` writes the keys their JSON always had
({"schema", "conclusion_version" | "rerun_version", "kind", ...}). Their views (sparkdoctor/views/conclusions.py and
rerun.py) draw them from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkdoctor.conclusions.model import CONCLUSION_VERSION
from sparkdoctor.conclusions.staleness import Status
from sparkdoctor.exitcodes import EXIT_RERUN_FAIL_ON, EXIT_RERUN_INCOMPLETE

SCHEMA = 1
RERUN_VERSION = 1  # rerun's document (RerunReport.to_json)
FAIL_ON = ("flipped", "regression")
"""What `rerun --fail-on` may name."""


@dataclass
class ConclusionsDocument:
    """Every recorded conclusion (or the one named), judged on the current toolchain."""

    ledger: str
    conclusions: list[Status] = field(default_factory=list)

    kind = "conclusions"

    def to_json(self) -> dict[str, object]:
        return {"schema": SCHEMA, "conclusion_version": CONCLUSION_VERSION, "kind": self.kind, "ledger": self.ledger,
                "conclusions": [s.to_dict() for s in self.conclusions]}


@dataclass
class RerunPlan:
    """What is stale (sparkdoctor.conclusions.rerun.plan): every judged conclusion, and the stale workarounds of the
    recipes they measured."""

    conclusions: list[Status] = field(default_factory=list)
    workarounds: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class RerunDone:
    """What re-measuring found (sparkdoctor.conclusions.rerun.execute): one row per stale conclusion (holds,
    flipped, changed, broken, inconclusive, not re-run) and every stale workaround with its measured cost."""

    results: list[dict[str, Any]] = field(default_factory=list)
    workarounds: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class RerunDocument:
    """`rerun --dry-run` (kind rerun-plan: what is stale and why) or `rerun` (kind rerun: what the re-measurement
    found); `failed` is what `--fail-on` asked about and happened."""

    ledger: str
    planned: RerunPlan
    done: RerunDone | None = None
    failed: list[str] = field(default_factory=list)

    @property
    def dry_run(self) -> bool:
        return self.done is None

    @property
    def kind(self) -> str:
        return "rerun-plan" if self.dry_run else "rerun"

    def happened(self, wanted: set[str]) -> list[str]:
        """Which of `wanted` (FAIL_ON words) happened: a conclusion flipped (or broke), a recipe got slower."""
        if self.done is None:
            return []
        out = []
        broken = any(s.state == "broken" for s in self.planned.conclusions)  # a stored row that can no longer be judged
        if "flipped" in wanted and (broken or any(r["outcome"] in ("flipped", "broken") for r in self.done.results)):
            out.append("flipped")
        if "regression" in wanted and any(r.get("regression") for r in self.done.results):
            out.append("regression")
        return out

    @property
    def exit_code(self) -> int:
        """1 when --fail-on's event happened; 4 when a stale conclusion or workaround could not be re-measured (a
        superseded mod is advice, never measured: sparkdoctor does not apply mods, so it does not count)."""
        if self.failed:
            return EXIT_RERUN_FAIL_ON
        if self.done is not None and (any(r["outcome"] == "not re-run" for r in self.done.results)
                                      or any(not w.get("cost") and w.get("kind") != "mod" for w in self.done.workarounds)):
            return EXIT_RERUN_INCOMPLETE
        return 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, object] = {"schema": SCHEMA, "rerun_version": RERUN_VERSION, "kind": self.kind, "ledger": self.ledger,
                               "dry_run": self.dry_run, "conclusions": [s.to_dict() for s in self.planned.conclusions],
                               "workarounds": self.planned.workarounds}
        if self.done is not None:
            out.update(workarounds=self.done.workarounds, results=self.done.results)
        out["failed"] = self.failed
        return out
