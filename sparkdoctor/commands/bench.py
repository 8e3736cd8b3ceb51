"""`sparkdoctor bench`: measure a serving recipe (launch, wait, measure, tear down, store), a server that is already
running (`--url`), two recipes interleaved (`--vs`), or one recipe against itself (`--calibrate`).

`--export FILE` writes a run's cell and `--reproduce FILE` compares a run with one (sparkdoctor/bench/cell.py).
The JSON `kind` is the document's: run, comparison or calibration (sparkdoctor/bench/document.py). A failure is its
error class: UsageError (2), a bench failure (4: not launched, reached or measured), a ledger failure (5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sparkdoctor.commands.options import (
    NAMES_A_FILE,
    Fmt,
    Ledger,
    Output,
    Sets,
    format_option,
    parse_sets,
    refuse_bad_seconds,
    refuse_unwritable_output,
    verb,
)
from sparkdoctor.errors import AnswersUnchecked, UsageError, WrongAnswers
from sparkdoctor.result import Format, Result
from sparkdoctor.views.bench import VIEW

if TYPE_CHECKING:
    from sparkdoctor.bench.document import BenchDocument
    from sparkdoctor.bench.references import Answer

FORMATS = VIEW.formats


@dataclass
class BenchCommand:
    recipe: Annotated[Path | None, typer.Argument(help="Recipe to launch and measure (ours, eugr v1 YAML, sparkrun v2 YAML).")] = None
    vs: Annotated[Path | None, typer.Option("--vs", help="Second recipe: A/B, interleaved A B B A ..., ratio B/A with its 95% CI.")] = None
    url: Annotated[str | None, typer.Option("--url", help="Measure a server that is already running (no launch).")] = None
    model: Annotated[str | None, typer.Option("--model", help="Model name to request (default: the only one the server lists).")] = None
    model_dir: Annotated[Path | None, typer.Option("--model-dir", help="Checkpoint folder the server serves: the report shows the achieved share of its roofline (default: a recipe's model, when a local folder).")] = None
    sets: Annotated[Sets, typer.Option("--set", help="Recipe parameter key=value or env.NAME=value (repeatable; both recipes of --vs).")] = field(default_factory=list)
    local: Annotated[bool, typer.Option("--local", help="Run a recipe that names a container directly in the target environment.")] = False
    runtime: Annotated[str | None, typer.Option("--runtime", help="Container CLI for a recipe that names a container: docker or podman (default: $SPARKDOCTOR_CONTAINER_RUNTIME, else docker, else podman).")] = None
    python: Annotated[str | None, typer.Option("--python", help="Interpreter (or venv) whose toolchain the run is stored with. Default: the recipe command's venv, else as `check`."), NAMES_A_FILE] = None
    concurrency: Annotated[str | None, typer.Option("--concurrency", help="Concurrency levels, comma separated (default 1,4).")] = None
    rounds: Annotated[int | None, typer.Option("--rounds", help="Rounds per level (default 5).")] = None
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", help="Output tokens per request (default 64).")] = None
    prompt_words: Annotated[int | None, typer.Option("--prompt-words", help="Words of prose per prompt (default 100).")] = None
    warmup: Annotated[int | None, typer.Option("--warmup", help="Warm-up requests, not counted (default 2).")] = None
    api: Annotated[str | None, typer.Option("--api", help="chat or completions (default chat).")] = None
    pairs: Annotated[int, typer.Option("--pairs", help="--vs: interleaved (A, B) pairs, one server restart per arm.")] = 3
    min_effect: Annotated[float, typer.Option("--min-effect", help="--vs: smallest relative difference ever called faster/slower.")] = 0.02
    ready_timeout: Annotated[float, typer.Option("--ready-timeout", help="Seconds to wait for a launched server to be ready.")] = 600.0
    ledger: Ledger = None
    no_store: Annotated[bool, typer.Option("--no-store", help="Measure only; write nothing to the ledger.")] = False
    fmt: Annotated[Fmt, format_option(*FORMATS)] = Format.console
    output: Output = None
    calibrate: Annotated[bool, typer.Option("--calibrate", help="RECIPE: measure its launch-to-launch noise with interleaved A/A launches (--pairs, 3 or more) and print the smallest effect 1, 3, 5 and 10 pairs detect.")] = False
    allow_load_difference: Annotated[bool, typer.Option("--allow-load-difference", help="--vs: call the verdict even when the arms ran under clearly different machine load (one pair: use a calibration taken under other load).")] = False
    conclude: Annotated[str | None, typer.Option("--conclude", help="--vs: record the result as conclusion NAME (sparkdoctor conclusions, rerun).")] = None
    reference: Annotated[bool, typer.Option("--reference", help="This run's answers are good: store them as the correctness reference for its model.")] = False
    reference_file: Annotated[Path | None, typer.Option("--reference-file", help="Compare the answers with this reference file (with --reference: write it there).")] = None
    no_correctness: Annotated[bool, typer.Option("--no-correctness", help="Send no correctness probes (the run's answers are not checked).")] = False
    allow_wrong: Annotated[bool, typer.Option("--allow-wrong", help="Exit 0 even when the answers are judged wrong (or an A/B arm's are), or could not be judged against their reference: for the numbers alone.")] = False
    export: Annotated[Path | None, typer.Option("--export", help="Write the run as one self-contained cell (JSON: recipe, toolchain, model, load, workload, numbers, config hash) to FILE.")] = None
    reproduce: Annotated[Path | None, typer.Option("--reproduce", help="Run the workload of the cell in FILE here (RECIPE or --url) and show what differs from it, key by key. FILE may also be a llama-benchy JSON report, a sparkrun benchmark export or a Spark Arena submission's metadata.json.")] = None
    force: Annotated[bool, typer.Option("--force", help="Launch even when the memory preflight says the recipe does not fit in the memory free now.")] = False

    def refuse_bad_options(self) -> None:
        """Every usage error of `bench`, before a server is launched or reached (exit 2, one line)."""
        Format.parse(self.fmt, FORMATS)
        for flag, path in (("--export", self.export), ("--reproduce", self.reproduce)):
            if path is not None and (self.vs is not None or self.calibrate):
                raise UsageError(f"{flag} is for one run (RECIPE or --url), not an A/B or --calibrate")
        if self.reproduce is not None and self.recipe is None and self.url is None:
            raise UsageError("--reproduce FILE runs the cell's workload here: give the RECIPE to launch (the cell's "
                             "recipe.source_path names the one it ran) or --url URL of a running server")
        if self.export is not None and str(self.export) == "-":  # a cell besides the document on stdout: never a file named -
            raise UsageError("--export -: this file is written besides the document on stdout; name a file")
        if self.export is not None and not self.export.expanduser().absolute().parent.is_dir():
            raise UsageError(f"--export {self.export}: its folder does not exist")
        if self.export is not None and (self.export.is_symlink() or self.export.exists()) and not self.export.is_file():
            raise UsageError(f"--export {self.export}: exists and is not a regular file; a cell is written only as one")
        refuse_unwritable_output(self.output)  # a server launched and measured for minutes, then nowhere to say so
        # bench's modules, loaded by bench only
        from sparkdoctor.bench.correctness import probe_timeout

        probe_timeout()  # a bad $SPARKDOCTOR_CORRECTNESS_TIMEOUT, before minutes of launching
        refuse_unwritable_output(self.export.expanduser() if self.export is not None else None, "--export")
        if (self.recipe is None) == (self.url is None):
            raise UsageError("give a RECIPE to launch, or --url URL of a running server (not both)")
        if self.vs is not None and self.recipe is None:
            raise UsageError("--vs needs a RECIPE: an A/B launches both, one at a time")
        if self.url is not None and (self.sets or self.local or self.runtime is not None):  # they were ignored
            given = "--set" if self.sets else "--local" if self.local else "--runtime"
            raise UsageError(f"{given} changes how a RECIPE is launched: --url measures a server that is already running")
        if self.model_dir is not None and self.vs is not None:
            raise UsageError("--model-dir is for one run (RECIPE or --url), not an A/B")
        if self.pairs < 1:
            raise UsageError(f"--pairs {self.pairs}: give 1 or more")
        if self.calibrate and (self.recipe is None or self.vs is not None or self.conclude is not None):
            raise UsageError("--calibrate measures one RECIPE against itself: no --vs, --url or --conclude")
        if self.calibrate and self.reference:  # every A/A arm stored its answers as the reference, each over the last
            raise UsageError("--calibrate measures launch noise, --reference marks one run's answers as good: bench "
                             "the recipe alone with --reference, then --calibrate it")
        if self.calibrate and self.pairs < 2:
            raise UsageError(f"--calibrate --pairs {self.pairs}: the launch noise needs 2 pairs or more (3 or more to be useful)")
        if not 0 <= self.min_effect < 1:
            raise UsageError(f"--min-effect {self.min_effect}: give a fraction between 0 and 1")
        refuse_bad_seconds("--ready-timeout", self.ready_timeout)
        if self.conclude is not None and (self.vs is None or self.no_store or not self.conclude.strip()):
            raise UsageError("--conclude NAME needs a name and an A/B that is stored: RECIPE --vs RECIPE_B, without --no-store")
        if self.reference and self.vs is not None:
            raise UsageError("--reference marks one run's answers as good: bench that recipe alone, then A/B it")
        if self.allow_wrong and self.no_correctness:
            raise UsageError("--allow-wrong lets wrong answers pass: it does not go with --no-correctness, which sends no probes")
        if self.no_correctness and (self.reference or self.reference_file is not None):
            raise UsageError("--no-correctness sends no probes: it does not go with --reference or --reference-file")
        parse_sets(self.sets)  # a --set without '=' is one line, exit 2
        if self.url is not None:  # a malformed URL is a usage error (2), not a server that could not be reached (4)
            from sparkdoctor.bench.http import Endpoint, HttpError

            try:
                Endpoint.parse(self.url)
            except HttpError as exc:
                raise UsageError(f"--url {exc}") from None


def named_reference(options: BenchCommand) -> list[Answer] | None:
    """--reference-file's answers, read once and checked before anything is launched or measured: the ones the run
    is judged by (read again when scoring, a file replaced in between was scored unvalidated). One named to read
    must exist and hold an answer for each probe: a missing or stale file turned the gate off (`unchecked`, exit 0)
    after the whole measurement. A usage error (exit 2) otherwise; None without the option or with --reference."""
    if options.reference_file is None:
        return None
    from sparkdoctor.bench.correctness import PROBES
    from sparkdoctor.bench.references import check_path

    answers, why = check_path(options.reference_file, write=options.reference, prompts=PROBES)
    if why:
        raise UsageError(why)
    return answers


def run(options: BenchCommand) -> Result[BenchDocument]:
    """Measure what the options name and return its document (a run, a comparison or a calibration)."""
    options.refuse_bad_options()
    reference = named_reference(options)
    from sparkdoctor.bench import flow
    from sparkdoctor.bench.correctness import Options as CorrectnessOptions

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
                                                       str(options.reference_file) if options.reference_file else None,
                                                       reference))
    doc: BenchDocument
    unrecorded: Exception | None = None
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
            from sparkdoctor.conclusions.model import ConclusionError
            from sparkdoctor.conclusions.store import conclude as record_conclusion

            # a ConclusionError is exit 2, with the A/B it measured and stored still shown; a ledger that cannot
            # store it a LedgerError (exit 5) by itself
            try:
                doc.conclusion = record_conclusion(options.conclude, doc.to_json(), options.recipe, options.vs,
                                                   options.python, options.ledger, opts.sets, options.local)
            except ConclusionError as exc:
                unrecorded = exc
    if options.export is not None or there is not None:
        doc = _export_and_reproduce(options, doc, there)
    result = Result("bench", "bench", doc)
    kept = "measured, not stored (--no-store)" if options.no_store else "measured and stored"
    if unrecorded is not None:
        result.fail(unrecorded)
        result.notes.append(f"bench: {unrecorded} (the A/B above is measured and stored)")
    wrong = wrong_answers(doc)
    if wrong and not options.allow_wrong:
        result.fail(WrongAnswers(f"{wrong} ({kept}; --allow-wrong to exit 0)"))
        result.notes.append(f"bench: {wrong}: exit 1 (--allow-wrong to pass wrong answers)")
    unjudged = None if wrong or options.allow_wrong else unjudged_answers(doc)
    if unjudged:  # a gate with a reference to check the answers by never passes without checking them
        against = f"--reference-file {options.reference_file}" if options.reference_file else \
            "the reference being marked (--reference)" if options.reference else "the reference stored for its model"
        result.fail(AnswersUnchecked(f"{unjudged} against {against} ({kept}; --allow-wrong to exit 0)"))
        result.notes.append(f"bench: {unjudged}: exit 3 (--allow-wrong to pass answers not judged)")
    elif not wrong and _nothing_to_judge_by(doc):
        result.notes.append("bench: the answers were not checked: no reference for this model yet; exit 0 (mark a "
                            "known-good run with --reference; --reference-file FILE fails when it cannot judge)")
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

    doc = doc.run if isinstance(doc, ReproduceDocument) else doc
    if isinstance(doc, RunDocument):
        checked = doc.result.correctness or {}
        return "the answers are wrong" if checked.get("verdict") == Verdict.WRONG else None
    levels = [lvl for lvl in getattr(doc, "levels", []) if (lvl.get("ratio") or {}).get("verdict") == WRONG_ARM]
    if levels:
        return f"a faster arm gave wrong answers (concurrency {', '.join(str(lvl['concurrency']) for lvl in levels)})"
    wrong = (getattr(doc, "correctness", None) or {}).get("wrong") or []
    return f"arm {' and '.join(wrong)} gave wrong answers" if wrong else None


def unjudged_answers(doc: object) -> str | None:
    """Why a bench document's answers were not judged against the reference there was to judge them by (named with
    --reference-file, stored for the model, or being marked): `unchecked` (the probe or scoring requests failed, the
    reference could not be read) or `unscored` (no log-probabilities), or None: a run's, or each arm's of an A/B.
    "No reference for this model yet" is not one of them (_nothing_to_judge_by)."""
    from sparkdoctor.bench.correctness import Verdict
    from sparkdoctor.bench.document import ReproduceDocument, RunDocument

    doc = doc.run if isinstance(doc, ReproduceDocument) else doc
    if isinstance(doc, RunDocument):
        checked = doc.result.correctness or {}
        verdict = checked.get("verdict")
        return f"the answers could not be judged ({verdict})" if checked.get("reference_expected") and \
            verdict in (Verdict.UNCHECKED, Verdict.UNSCORED) else None
    arms = getattr(doc, "correctness", None)
    named = [f"{arm} {arms.get(arm)}" for arm in arms.get("unjudged") or []] if isinstance(arms, dict) else []
    return f"the answers of arm {' and '.join(named)} could not be judged" if named else None


def _nothing_to_judge_by(doc: object) -> bool:
    """A run (or an A/B arm) whose answers were `unchecked` because its model has no reference yet: exit 0, said."""
    from sparkdoctor.bench.document import ReproduceDocument, RunDocument

    doc = doc.run if isinstance(doc, ReproduceDocument) else doc
    if isinstance(doc, RunDocument):
        checked = doc.result.correctness or {}
        return checked.get("verdict") == "unchecked" and not checked.get("reference_expected")
    arms = getattr(doc, "correctness", None) or {}
    return any(arms.get(arm) == "unchecked" and arm not in (arms.get("unjudged") or []) for arm in ("A", "B"))


def register(app: typer.Typer) -> None:
    app.command("bench")(verb(BenchCommand, run, """
        Benchmark a server: decode tok/s, TTFT, ITL, a concurrency sweep; stored with the toolchain fingerprint."""))
