"""What `bench` answers: one run (RECIPE or --url), or an A/B comparison (RECIPE --vs B, and its A/A form
--calibrate). `to_json()` writes the keys bench's JSON always had ({"schema", "bench_version", "kind", ...});
their view (sparkdoctor/views/bench.py) draws them from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkdoctor.bench import body, envelope
from sparkdoctor.bench.cell import Reproduction
from sparkdoctor.bench.run import RunResult


class BenchDocument:
    def to_json(self) -> dict[str, Any]:  # the view reads each kind's keys (views/bench.py)
        raise NotImplementedError


@dataclass
class RunDocument(BenchDocument):
    """One measured server, stored (or not: `ledger` None) with its toolchain's fingerprint."""

    result: RunResult
    ledger: str | None
    stored: dict[str, Any] | None = field(default=None, repr=False)
    """The run as the ledger keeps it (run.stored_run): what `--export` writes a cell from."""
    exported: str | None = None
    """The file `--export` wrote the run's cell to."""

    kind = "run"

    def to_json(self) -> dict[str, object]:
        extra = {"exported": self.exported} if self.exported is not None else {}
        return envelope(self.kind, {**self.result.to_dict(), "ledger": self.ledger, **extra})


@dataclass
class ComparisonDocument(BenchDocument):
    """Two recipes measured interleaved (A B B A ...): the ratio B/A per concurrency level with its interval and
    verdict; with `calibration`, one recipe against itself and the smallest effect 1, 3, 5 and 10 pairs detect."""

    comparison_id: int | None
    a: str
    b: str
    order: list[str]
    runs: list[int]
    metric: str
    min_effect: float
    levels: list[dict[str, Any]]
    verdict: str
    load: dict[str, object]
    correctness: dict[str, object]
    fingerprints: dict[str, str]
    ledger: str | None
    calibration: list[dict[str, object]] | None = None
    """Per level: the launch-to-launch noise and the minimal detectable effects (`bench --calibrate`)."""
    conclusion: dict[str, object] | None = None
    """The conclusion this A/B was recorded as (`--conclude NAME`)."""
    findings: list[dict[str, object]] = field(default_factory=list)
    """What judged each arm's runs, once per arm (bench/run.py finding_records, with `arm`)."""

    @property
    def kind(self) -> str:
        return "calibration" if self.calibration is not None else "comparison"

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {
            "comparison_id": self.comparison_id, "a": self.a, "b": self.b, "order": self.order, "runs": self.runs,
            "metric": self.metric, "min_effect": self.min_effect, "levels": self.levels, "verdict": self.verdict,
            "load": self.load, "correctness": self.correctness, "fingerprints": self.fingerprints, "ledger": self.ledger,
            "findings": self.findings}
        if self.calibration is not None:
            body["calibration"] = self.calibration
        if self.conclusion is not None:
            body["conclusion"] = self.conclusion
        return envelope(self.kind, body)


@dataclass
class ReproduceDocument(BenchDocument):
    """A run measured here with an exported cell's workload, compared with that cell (`bench --reproduce`): the
    numbers side by side and, key by key, what differs (bench/cell.py)."""

    run: RunDocument
    reproduction: Reproduction

    kind = "reproduce"

    def to_json(self) -> dict[str, object]:
        return envelope(self.kind, {**self.reproduction.to_dict(), "run": body(self.run.to_json())})
