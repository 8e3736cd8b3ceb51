"""What `bench` answers: one run (RECIPE or --url), or an A/B comparison (RECIPE --vs B, and its A/A form
--calibrate). `to_json()` writes the keys bench's JSON always had ({"schema", "bench_version", "kind", ...});
`console_text()` draws them (sparkdoctor/bench/render.py). sparkdoctor/render/documents.py renders both."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparkdoctor.bench import envelope
from sparkdoctor.bench.cell import Reproduction
from sparkdoctor.bench.run import RunResult

if TYPE_CHECKING:
    from sparkdoctor.sink import Sink


@dataclass
class RunDocument:
    """One measured server, stored (or not: `ledger` None) with its toolchain's fingerprint."""

    result: RunResult
    ledger: str | None
    stored: dict[str, Any] | None = field(default=None, repr=False)
    """The run as the ledger keeps it (run.stored_run): what `--export` writes a cell from."""
    exported: str | None = None
    """The file `--export` wrote the run's cell to."""

    kind = "run"

    def to_json(self) -> dict[str, Any]:
        extra = {"exported": self.exported} if self.exported is not None else {}
        return envelope(self.kind, {**self.result.to_dict(), "ledger": self.ledger, **extra})

    def console_text(self, sink: Sink) -> str:
        from sparkdoctor.bench import render
        from sparkdoctor.render.documents import wide_capture

        return wide_capture(sink, lambda console: render.render_run(console, self.to_json()))


@dataclass
class ComparisonDocument:
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
    load: dict[str, Any]
    correctness: dict[str, Any]
    fingerprints: dict[str, str]
    ledger: str | None
    calibration: list[dict[str, Any]] | None = None
    """Per level: the launch-to-launch noise and the minimal detectable effects (`bench --calibrate`)."""
    conclusion: dict[str, Any] | None = None
    """The conclusion this A/B was recorded as (`--conclude NAME`)."""

    @property
    def kind(self) -> str:
        return "calibration" if self.calibration is not None else "comparison"

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "comparison_id": self.comparison_id, "a": self.a, "b": self.b, "order": self.order, "runs": self.runs,
            "metric": self.metric, "min_effect": self.min_effect, "levels": self.levels, "verdict": self.verdict,
            "load": self.load, "correctness": self.correctness, "fingerprints": self.fingerprints, "ledger": self.ledger}
        if self.calibration is not None:
            body["calibration"] = self.calibration
        if self.conclusion is not None:
            body["conclusion"] = self.conclusion
        return envelope(self.kind, body)

    def console_text(self, sink: Sink) -> str:
        from sparkdoctor.bench import render
        from sparkdoctor.render.documents import wide_capture

        def draw(console: Any) -> None:
            document = self.to_json()
            render.render_comparison(console, document)
            if self.calibration is not None:
                render.render_calibration(console, document)
            if self.conclusion:
                console.print(f"conclusion {self.conclusion.get('name')!r} recorded: {self.conclusion.get('statement')}",
                              markup=False, highlight=False, soft_wrap=True)

        return wide_capture(sink, draw)


@dataclass
class ReproduceDocument:
    """A run measured here with an exported cell's workload, compared with that cell (`bench --reproduce`): the
    numbers side by side and, key by key, what differs (bench/cell.py)."""

    run: RunDocument
    reproduction: Reproduction

    kind = "reproduce"

    def to_json(self) -> dict[str, Any]:
        run = self.run.to_json()
        for key in ("schema", "bench_version", "kind"):
            run.pop(key)
        return envelope(self.kind, {**self.reproduction.to_dict(), "run": run})

    def console_text(self, sink: Sink) -> str:
        from sparkdoctor.bench import render
        from sparkdoctor.render.documents import wide_capture

        def draw(console: Any) -> None:
            document = self.to_json()
            render.render_run(console, {**document["run"], "kind": "run"})
            render.render_reproduce(console, document)

        return wide_capture(sink, draw)


BenchDocument = RunDocument | ComparisonDocument | ReproduceDocument
