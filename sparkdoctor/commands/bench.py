"""`sparkdoctor bench`: measure a serving recipe (launch, wait, measure, tear down, store), a server that is already
running (`--url`), two recipes interleaved (`--vs`), or one recipe against itself (`--calibrate`).

`--export FILE` writes a run's cell and `--reproduce FILE` compares a run with one (sparkdoctor/bench/cell.py).
`BenchCommand` holds the options, `run()` does the work and returns a Result (kind "bench"; the JSON `kind` is the
document's: run, comparison or calibration; sparkdoctor/bench/document.py), `register()` adds the typer command. The
work is in sparkdoctor/bench/ and sparkdoctor/ledger/. A failure is its error class: UsageError (2), a bench failure
(4: not launched, reached or measured), a ledger failure (5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from sparkdoctor.commands.options import (
    format_option,
    ledger_option,
    output_option,
    output_path,
    python_option,
)
from sparkdoctor.errors import UsageError
from sparkdoctor.result import Format, Result
from sparkdoctor.views.bench import VIEW

if TYPE_CHECKING:
    from sparkdoctor.bench.document import BenchDocument

FORMATS = VIEW.formats


@dataclass
class BenchCommand:
    """Everything `bench` is told; the defaults are the command line's."""

    recipe: Path | None = None
    vs: Path | None = None
    url: str | None = None
    model: str | None = None
    model_dir: Path | None = None
    sets: list[str] = field(default_factory=list)
    local: bool = False
    runtime: str | None = None
    python: str | None = None
    concurrency: str | None = None
    rounds: int | None = None
    max_tokens: int | None = None
    prompt_words: int | None = None
    warmup: int | None = None
    api: str | None = None
    pairs: int = 3
    min_effect: float = 0.02
    ready_timeout: float = 600.0
    ledger: Path | None = None
    no_store: bool = False
    fmt: Format = Format.console
    output: Path | None = None
    calibrate: bool = False
    allow_load_difference: bool = False
    conclude: str | None = None
    reference: bool = False
    reference_file: Path | None = None
    no_correctness: bool = False
    allow_wrong: bool = False
    export: Path | None = None
    reproduce: Path | None = None
    force: bool = False

    def refuse_bad_options(self) -> None:
        """Every usage error of `bench`, before a server is launched or reached (exit 2, one line)."""
        Format.parse(self.fmt, FORMATS)
        for flag, path in (("--export", self.export), ("--reproduce", self.reproduce)):
            if path is not None and (self.vs is not None or self.calibrate):
                raise UsageError(f"{flag} is for one run (RECIPE or --url), not an A/B or --calibrate")
        if self.reproduce is not None and self.recipe is None and self.url is None:
            raise UsageError("--reproduce FILE runs the cell's workload here: give the RECIPE to launch (the cell's "
                             "recipe.source_path names the one it ran) or --url URL of a running server")
        if self.export is not None and not self.export.expanduser().absolute().parent.is_dir():
            raise UsageError(f"--export {self.export}: its folder does not exist")
        if self.export is not None and (self.export.is_symlink() or self.export.exists()) and not self.export.is_file():
            raise UsageError(f"--export {self.export}: exists and is not a regular file; a cell is written only as one")
        if (self.recipe is None) == (self.url is None):
            raise UsageError("give a RECIPE to launch, or --url URL of a running server (not both)")
        if self.vs is not None and self.recipe is None:
            raise UsageError("--vs needs a RECIPE: an A/B launches both, one at a time")
        if self.model_dir is not None and self.vs is not None:
            raise UsageError("--model-dir is for one run (RECIPE or --url), not an A/B")
        if self.pairs < 1:
            raise UsageError(f"--pairs {self.pairs}: give 1 or more")
        if self.calibrate and (self.recipe is None or self.vs is not None or self.conclude is not None):
            raise UsageError("--calibrate measures one RECIPE against itself: no --vs, --url or --conclude")
        if self.calibrate and self.pairs < 2:
            raise UsageError(f"--calibrate --pairs {self.pairs}: the launch noise needs 2 pairs or more (3 or more to be useful)")
        if not 0 <= self.min_effect < 1:
            raise UsageError(f"--min-effect {self.min_effect}: give a fraction between 0 and 1")
        if self.conclude is not None and (self.vs is None or self.no_store or not self.conclude.strip()):
            raise UsageError("--conclude NAME needs a name and an A/B that is stored: RECIPE --vs RECIPE_B, without --no-store")
        if self.reference and self.vs is not None:
            raise UsageError("--reference marks one run's answers as good: bench that recipe alone, then A/B it")
        if self.allow_wrong and self.no_correctness:
            raise UsageError("--allow-wrong lets wrong answers pass: it does not go with --no-correctness, which sends no probes")
        if self.no_correctness and (self.reference or self.reference_file is not None):
            raise UsageError("--no-correctness sends no probes: it does not go with --reference or --reference-file")
        if self.reference_file is not None:  # refused before anything is launched or measured
            from sparkdoctor.bench.references import check_path

            why = check_path(self.reference_file, write=self.reference)
            if why:
                raise UsageError(why)
        from sparkdoctor.commands.options import parse_sets

        parse_sets(self.sets)  # a --set without '=' is one line, exit 2
        if self.url is not None:  # a malformed URL is a usage error (2), not a server that could not be reached (4)
            from sparkdoctor.bench.http import Endpoint, HttpError

            try:
                Endpoint.parse(self.url)
            except HttpError as exc:
                raise UsageError(f"--url {exc}") from None


def run(options: BenchCommand) -> Result[BenchDocument]:
    """Measure what the options name and return its document (a run, a comparison or a calibration)."""
    options.refuse_bad_options()
    from sparkdoctor.bench import flow
    from sparkdoctor.bench.correctness import Options as CorrectnessOptions
    from sparkdoctor.commands.options import parse_sets

    given = {"concurrency": options.concurrency, "rounds": options.rounds, "max_tokens": options.max_tokens,
             "prompt_words": options.prompt_words, "warmup": options.warmup, "api": options.api}
    there = None
    if options.reproduce is not None:  # a bad cell is one line (exit 2), before anything is launched
        from sparkdoctor.bench import cell

        there = cell.read(options.reproduce)
        given = {**cell.workload_of(there), **{k: v for k, v in given.items() if v is not None}}
    overrides = flow.parse_overrides(given)  # a flow.Failure carries its exit code
    opts = flow.Options(overrides=overrides, sets=parse_sets(options.sets), local=options.local, python=options.python,
                        ledger=options.ledger, store=not options.no_store, ready_timeout=options.ready_timeout,
                        pairs=options.pairs, min_effect=options.min_effect, fmt=options.fmt.value,
                        model_dir=options.model_dir, runtime=options.runtime,
                        allow_load_difference=options.allow_load_difference, force=options.force,
                        correctness=CorrectnessOptions(not options.no_correctness, options.reference,
                                                       str(options.reference_file) if options.reference_file else None))
    doc: BenchDocument
    if options.url is not None:  # a flow.Failure carries its exit code
        doc = flow.bench_url(options.url, options.model, opts)
    elif options.calibrate:
        assert options.recipe is not None
        from sparkdoctor.bench import calibration

        doc = calibration.document(flow.bench_ab(options.recipe, options.recipe, opts))
    elif options.vs is None:
        assert options.recipe is not None
        doc = flow.bench_recipe(options.recipe, opts)
    else:
        assert options.recipe is not None
        doc = flow.bench_ab(options.recipe, options.vs, opts)
        if options.conclude is not None:  # sparkdoctor/conclusions/: the A/B bound to its runs and their fingerprints
            from sparkdoctor.conclusions.store import conclude as record_conclusion

            # a ConclusionError is exit 2, a ledger that cannot store it a LedgerError (exit 5): by themselves
            doc.conclusion = record_conclusion(options.conclude, doc.to_json(), options.recipe, options.vs, options.python,
                                               options.ledger, opts.sets, options.local)
    if options.export is not None or there is not None:
        doc = _export_and_reproduce(options, doc, there)
    result = Result("bench", "bench", doc)
    wrong = wrong_answers(doc)
    if wrong and not options.allow_wrong:
        from sparkdoctor.errors import WrongAnswers

        result.fail(WrongAnswers(f"{wrong} (measured and stored; --allow-wrong to exit 0)"))
        result.notes.append(f"bench: {wrong}: exit 1 (--allow-wrong to pass wrong answers)")
    return result


def _export_and_reproduce(options: BenchCommand, doc: BenchDocument, there: dict[str, Any] | None) -> BenchDocument:
    """--export: the run's cell written to FILE; --reproduce: the run compared with the cell, key by key."""
    from sparkdoctor.bench import cell
    from sparkdoctor.bench.document import ReproduceDocument, RunDocument

    assert isinstance(doc, RunDocument) and doc.stored is not None
    here = cell.from_run(doc.stored)
    if options.export is not None:
        from sparkdoctor.files import write_text

        write_text(options.export, cell.dumps(here))  # an OutputError is one line (exit 2)
        doc.exported = str(options.export)
    if there is None:
        return doc
    return ReproduceDocument(doc, cell.reproduce(str(options.reproduce), there, here))


def wrong_answers(doc: object) -> str | None:
    """Why a bench document fails the correctness gate (a CI gate on answers), or None."""
    from sparkdoctor.bench.ab import WRONG_ARM
    from sparkdoctor.bench.correctness import Verdict
    from sparkdoctor.bench.document import ReproduceDocument, RunDocument

    if isinstance(doc, ReproduceDocument):
        doc = doc.run

    if isinstance(doc, RunDocument):
        checked = doc.result.correctness or {}
        return "the answers are wrong" if checked.get("verdict") == Verdict.WRONG else None
    levels = [lvl for lvl in getattr(doc, "levels", []) if (lvl.get("ratio") or {}).get("verdict") == WRONG_ARM]
    if levels:
        return f"a faster arm gave wrong answers (concurrency {', '.join(str(lvl['concurrency']) for lvl in levels)})"
    wrong = (getattr(doc, "correctness", None) or {}).get("wrong") or []
    return f"arm {' and '.join(wrong)} gave wrong answers" if wrong else None


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)


def bench(
    recipe: Path | None = typer.Argument(None, help="Recipe to launch and measure (ours, eugr v1 YAML, sparkrun v2 YAML)."),
    vs: Path | None = typer.Option(None, "--vs", help="Second recipe: A/B, interleaved A B B A ..., ratio B/A with its 95% CI."),
    url: str | None = typer.Option(None, "--url", help="Measure a server that is already running (no launch)."),
    model: str | None = typer.Option(None, "--model", help="Model name to request (default: the only one the server lists)."),
    model_dir: Path | None = typer.Option(None, "--model-dir", help="Checkpoint folder the server serves: the report shows the achieved share of its roofline (default: a recipe's model, when a local folder)."),
    sets: list[str] | None = typer.Option(None, "--set", help="Recipe parameter key=value or env.NAME=value (repeatable; both recipes of --vs)."),
    local: bool = typer.Option(False, "--local", help="Run a recipe that names a container directly in the target environment."),
    runtime: str | None = typer.Option(None, "--runtime", help="Container CLI for a recipe that names a container: docker or podman (default: $SPARKDOCTOR_CONTAINER_RUNTIME, else docker, else podman)."),
    python: str | None = python_option("Interpreter (or venv) whose toolchain the run is stored with. Default: the recipe command's venv, else as `check`."),
    concurrency: str | None = typer.Option(None, "--concurrency", help="Concurrency levels, comma separated (default 1,4)."),
    rounds: int | None = typer.Option(None, "--rounds", help="Rounds per level (default 5)."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="Output tokens per request (default 64)."),
    prompt_words: int | None = typer.Option(None, "--prompt-words", help="Words of prose per prompt (default 100)."),
    warmup: int | None = typer.Option(None, "--warmup", help="Warm-up requests, not counted (default 2)."),
    api: str | None = typer.Option(None, "--api", help="chat or completions (default chat)."),
    pairs: int = typer.Option(3, "--pairs", help="--vs: interleaved (A, B) pairs, one server restart per arm."),
    min_effect: float = typer.Option(0.02, "--min-effect", help="--vs: smallest relative difference ever called faster/slower."),
    ready_timeout: float = typer.Option(600.0, "--ready-timeout", help="Seconds to wait for a launched server to be ready."),
    ledger: Path | None = ledger_option(),
    no_store: bool = typer.Option(False, "--no-store", help="Measure only; write nothing to the ledger."),
    fmt: str = format_option(*FORMATS),
    output_name: str | None = output_option(),
    calibrate: bool = typer.Option(False, "--calibrate", help="RECIPE: measure its launch-to-launch noise with interleaved A/A launches (--pairs, 3 or more) and print the smallest effect 1, 3, 5 and 10 pairs detect."),
    allow_load_difference: bool = typer.Option(False, "--allow-load-difference", help="--vs: call the verdict even when the arms ran under clearly different machine load (one pair: use a calibration taken under other load)."),
    conclude: str | None = typer.Option(None, "--conclude", help="--vs: record the result as conclusion NAME (sparkdoctor conclusions, rerun)."),
    reference: bool = typer.Option(False, "--reference", help="This run's answers are good: store them as the correctness reference for its model."),
    reference_file: Path | None = typer.Option(None, "--reference-file", help="Compare the answers with this reference file (with --reference: write it there)."),
    no_correctness: bool = typer.Option(False, "--no-correctness", help="Send no correctness probes (the run's answers are not checked)."),
    allow_wrong: bool = typer.Option(False, "--allow-wrong", help="Exit 0 even when the answers are judged wrong (or an A/B arm's are): for the numbers alone."),
    export: Path | None = typer.Option(None, "--export", help="Write the run as one self-contained cell (JSON: recipe, toolchain, model, load, workload, numbers, config hash) to FILE."),
    reproduce: Path | None = typer.Option(None, "--reproduce", help="Run the workload of the cell in FILE here (RECIPE or --url) and show what differs from it, key by key."),
    force: bool = typer.Option(False, "--force", help="Launch even when the memory preflight says the recipe does not fit in the memory free now."),
) -> None:
    """Benchmark a server: decode tok/s, TTFT, ITL, a concurrency sweep; stored with the toolchain fingerprint."""
    from sparkdoctor.emit import emit

    options = BenchCommand(
        recipe=recipe, vs=vs, url=url, model=model, model_dir=model_dir, sets=list(sets or []), local=local,
        runtime=runtime, python=python, concurrency=concurrency, rounds=rounds, max_tokens=max_tokens,
        prompt_words=prompt_words, warmup=warmup, api=api, pairs=pairs, min_effect=min_effect,
        ready_timeout=ready_timeout, ledger=ledger, no_store=no_store, fmt=Format(fmt),
        output=output_path("--output", output_name), calibrate=calibrate,
        allow_load_difference=allow_load_difference, conclude=conclude, reference=reference,
        reference_file=reference_file, no_correctness=no_correctness, allow_wrong=allow_wrong,
        export=export, reproduce=reproduce, force=force,
    )
    raise typer.Exit(emit(run(options), options.fmt, options.output))
