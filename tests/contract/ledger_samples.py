"""Real Results of the kinds fix, bench, history, conclusions and rerun write, made by calling each verb's `run()`
(no typer): tests/contract/test_vocabularies.py renders every one in every format its kind declares."""

from __future__ import annotations

from pathlib import Path

from sparkdoctor.result import Result
from tests.bench.sse_server import Style, serve

QUICK = {"rounds": 1, "concurrency": "1", "max_tokens": 4, "warmup": 0}


def empty_ledger(tmp_path: Path) -> Path:
    from sparkdoctor.ledger import Ledger

    path = tmp_path / "ledger.sqlite"
    Ledger(path).close()  # an empty ledger of the current schema
    return path


def samples(tmp_path: Path) -> dict[str, Result]:
    from sparkdoctor.commands import bench, conclusions, fix, history, rerun

    ledger = empty_ledger(tmp_path)
    with serve(Style(delay=0.001)) as (url, _style):
        benched = bench.run(bench.BenchCommand(url=url, ledger=ledger, **QUICK))
    return {
        "fix": fix.run(fix.FixCommand(history=True)),
        "bench": benched,
        "history": history.run(history.HistoryCommand(run_id=1, ledger=ledger)),
        "conclusions": conclusions.run(conclusions.ConclusionsCommand(ledger=ledger)),
        "rerun": rerun.run(rerun.RerunCommand(dry_run=True, ledger=ledger)),
    }
