"""What `history` answers: the list of runs, one run in full, two runs compared, or the page `--html` wrote.
`to_json()` writes the keys history's JSON always had ({"schema", "bench_version", "kind", ...}); `console_text()`
draws them with bench's renderer (sparkdoctor/bench/render.py). sparkdoctor/render/documents.py renders both."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparkdoctor.bench import envelope

if TYPE_CHECKING:
    from sparkdoctor.sink import Sink


def _draw(sink: Sink, draw: Any) -> str:
    from sparkdoctor.render.documents import wide_capture

    return wide_capture(sink, draw)


@dataclass
class HistoryList:
    """The ledger's runs, newest first (`history`)."""

    ledger: str
    runs: list[dict[str, Any]] = field(default_factory=list)

    kind = "history"

    def to_json(self) -> dict[str, Any]:
        return envelope(self.kind, {"ledger": self.ledger, "runs": self.runs})

    def console_text(self, sink: Sink) -> str:
        from sparkdoctor.bench import render

        return _draw(sink, lambda console: render.render_history(console, self.runs))


@dataclass
class HistoryRun:
    """One run in full: its levels, toolchain and findings (`history RUN_ID`)."""

    run: dict[str, Any]

    kind = "history-run"

    def to_json(self) -> dict[str, Any]:
        return envelope(self.kind, {"run": self.run})

    def console_text(self, sink: Sink) -> str:
        from sparkdoctor.bench import render

        run = self.run
        shown = {"run_id": run["id"], "recipe": run["recipe"], "server": run["server"], "base_url": run["base_url"],
                 "model": run["model"], "fingerprint": run["fingerprint"], "levels": run["summary"]["levels"],
                 "headline": run["summary"]["headline"], "findings": run["findings"]}

        def draw(console: Any) -> None:
            console.print(f"run {run['id']} at {run['created_at']} (bench version {run['bench_version']}, "
                          f"sparkdoctor {run['tool_version']})")
            render.render_run(console, shown)

        return _draw(sink, draw)


@dataclass
class HistoryCompare:
    """Two runs compared: what changed in the toolchain, what changed in the numbers (`history --compare A B`)."""

    compared: dict[str, Any]

    kind = "history-compare"

    def to_json(self) -> dict[str, Any]:
        return envelope(self.kind, self.compared)

    def console_text(self, sink: Sink) -> str:
        from sparkdoctor.bench import render

        return _draw(sink, lambda console: render.render_compare(console, self.to_json()))


@dataclass
class HistoryPage:
    """The page `history --html FILE` wrote: where, and what it holds (the console says it on stderr)."""

    html: str
    runs: int
    changes: int
    bytes: int

    kind = "history-html"

    def to_json(self) -> dict[str, Any]:
        return envelope(self.kind, {"html": self.html, "runs": self.runs, "changes": self.changes, "bytes": self.bytes})

    def console_text(self, sink: Sink) -> str:
        return ""


HistoryDocument = HistoryList | HistoryRun | HistoryCompare | HistoryPage
