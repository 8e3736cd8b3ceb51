"""What `history` answers: the list of runs, one run in full, two runs compared, or the page `--html` wrote.
`to_json()` writes the keys history's JSON always had ({"schema", "bench_version", "kind", ...}); their view
(sparkdoctor/views/history.py) draws them with bench's console text."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from sparkdoctor.bench import envelope
from sparkdoctor.ledger.compare import Comparison


@dataclass
class HistoryDocument:
    kind: ClassVar[str]

    def to_json(self) -> dict[str, object]:
        return envelope(self.kind, asdict(self))


@dataclass
class HistoryList(HistoryDocument):
    """The ledger's runs, newest first (`history`)."""

    ledger: str
    runs: list[dict[str, object]] = field(default_factory=list)
    recipe: str | None = None  # the --recipe filter, for the console's empty answer; not in the JSON document

    kind = "history"

    def to_json(self) -> dict[str, object]:
        return envelope(self.kind, {"ledger": self.ledger, "runs": self.runs})


@dataclass
class HistoryRun(HistoryDocument):
    """One run in full: its levels, toolchain and findings (`history RUN_ID`)."""

    run: dict[str, Any]  # Ledger.run(): the view reads its stored columns

    kind = "history-run"


@dataclass
class HistoryCompare(HistoryDocument):
    """Two runs compared: what changed in the toolchain, what changed in the numbers (`history --compare A B`)."""

    compared: Comparison

    kind = "history-compare"

    def to_json(self) -> dict[str, object]:
        return envelope(self.kind, dict(self.compared))


@dataclass
class HistoryPage(HistoryDocument):
    """The page `history --html FILE` wrote: where, and what it holds (the console says it on stderr)."""

    html: str
    runs: int
    changes: int
    bytes: int

    kind = "history-html"


@dataclass
class HistoryImport(HistoryDocument):
    """A run `bench` kept in a file (the ledger could not take it), now stored (`history --import FILE`)."""

    ledger: str
    run_id: int
    file: str
    removed: bool  # the file is gone now that the ledger holds the run (False: it could not be removed)
    already: bool = False  # the ledger held this run already (the file was imported before): not stored twice

    kind = "history-import"


@dataclass
class HistoryDelete(HistoryDocument):
    """A run removed from the ledger (`history --delete RUN_ID --yes`), or, without --yes, what would be removed."""

    ledger: str
    run_id: int
    deleted: bool  # False: a dry run, nothing changed
    run: dict[str, object]  # created_at, recipe_name, base_url, comparison_id, arm, headline
    conclusions: list[str] = field(default_factory=list)  # the conclusions that name it (a rerun reports them broken)
    kept: str | None = None  # the file that holds the removed run (`history --import FILE` stores it again)

    kind = "history-delete"
