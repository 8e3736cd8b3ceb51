"""`sparkdoctor bench`: measure a serving recipe (launch, wait, measure, tear down, store), a server
that is already running (`--url`), or two recipes interleaved (`--vs`). Parses and renders; the work
is in sparkdoctor/bench/ and sparkdoctor/ledger/."""

from __future__ import annotations

from pathlib import Path

import typer

from sparkdoctor.cli_support import Fatal
from sparkdoctor.commands.options import format_option
from sparkdoctor.result import Format

FORMATS = ("console", "json")


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
    python: str | None = typer.Option(None, "--python", help="Interpreter (or venv) whose toolchain the run is stored with. Default: the recipe command's venv, else as `check`."),
    concurrency: str | None = typer.Option(None, "--concurrency", help="Concurrency levels, comma separated (default 1,4)."),
    rounds: int | None = typer.Option(None, "--rounds", help="Rounds per level (default 5)."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="Output tokens per request (default 64)."),
    prompt_words: int | None = typer.Option(None, "--prompt-words", help="Words of prose per prompt (default 100)."),
    warmup: int | None = typer.Option(None, "--warmup", help="Warm-up requests, not counted (default 2)."),
    api: str | None = typer.Option(None, "--api", help="chat or completions (default chat)."),
    pairs: int = typer.Option(3, "--pairs", help="--vs: interleaved (A, B) pairs, one server restart per arm."),
    min_effect: float = typer.Option(0.02, "--min-effect", help="--vs: smallest relative difference ever called faster/slower."),
    ready_timeout: float = typer.Option(600.0, "--ready-timeout", help="Seconds to wait for a launched server to be ready."),
    ledger: Path | None = typer.Option(None, "--ledger", help="Ledger file (default: the state folder's ledger.sqlite)."),
    no_store: bool = typer.Option(False, "--no-store", help="Measure only; write nothing to the ledger."),
    fmt: str = format_option(Format.console, Format.json),
    calibrate: bool = typer.Option(False, "--calibrate", help="RECIPE: measure its launch-to-launch noise with interleaved A/A launches (--pairs, 3 or more) and print the smallest effect 1, 3, 5 and 10 pairs detect."),
    allow_load_difference: bool = typer.Option(False, "--allow-load-difference", help="--vs: call the verdict even when the arms ran under clearly different machine load (one pair: use a calibration taken under other load)."),
    conclude: str | None = typer.Option(None, "--conclude", help="--vs: record the result as conclusion NAME (sparkdoctor conclusions, rerun)."),
    reference: bool = typer.Option(False, "--reference", help="This run's answers are good: store them as the correctness reference for its model."),
    reference_file: Path | None = typer.Option(None, "--reference-file", help="Compare the answers with this reference file (with --reference: write it there)."),
    no_correctness: bool = typer.Option(False, "--no-correctness", help="Send no correctness probes (the run's answers are not checked)."),
) -> None:
    """Benchmark a server: decode tok/s, TTFT, ITL, a concurrency sweep; stored with the toolchain fingerprint."""
    if fmt not in FORMATS:
        raise Fatal(f"--format {fmt}: choose one of {', '.join(FORMATS)}")
    if (recipe is None) == (url is None):
        raise Fatal("give a RECIPE to launch, or --url URL of a running server (not both)")
    if vs is not None and recipe is None:
        raise Fatal("--vs needs a RECIPE: an A/B launches both, one at a time")
    if model_dir is not None and vs is not None:
        raise Fatal("--model-dir is for one run (RECIPE or --url), not an A/B")
    if pairs < 1:
        raise Fatal(f"--pairs {pairs}: give 1 or more")
    if calibrate and (recipe is None or vs is not None or conclude is not None):
        raise Fatal("--calibrate measures one RECIPE against itself: no --vs, --url or --conclude")
    if calibrate and pairs < 2:
        raise Fatal(f"--calibrate --pairs {pairs}: the launch noise needs 2 pairs or more (3 or more to be useful)")
    if not 0 <= min_effect < 1:
        raise Fatal(f"--min-effect {min_effect}: give a fraction between 0 and 1")
    if conclude is not None and (vs is None or no_store or not conclude.strip()):
        raise Fatal("--conclude NAME needs a name and an A/B that is stored: RECIPE --vs RECIPE_B, without --no-store")
    if reference and vs is not None:
        raise Fatal("--reference marks one run's answers as good: bench that recipe alone, then A/B it")
    if no_correctness and (reference or reference_file is not None):
        raise Fatal("--no-correctness sends no probes: it does not go with --reference or --reference-file")
    from sparkdoctor.bench import flow
    from sparkdoctor.bench.correctness import Options as CorrectnessOptions
    from sparkdoctor.bench.http import Endpoint, HttpError

    if url is not None:  # a malformed URL is a usage error (2), not a server that could not be reached (4)
        try:
            Endpoint.parse(url)
        except HttpError as exc:
            raise Fatal(f"--url {exc}") from None

    given = {"concurrency": concurrency, "rounds": rounds, "max_tokens": max_tokens, "prompt_words": prompt_words,
             "warmup": warmup, "api": api}
    from sparkdoctor.commands.recipe import parse_sets

    overrides = flow.parse_overrides(given)  # a flow.Failure carries its exit code
    opts = flow.Options(overrides=overrides, sets=parse_sets(sets), local=local, python=python, ledger=ledger, store=not no_store,
                        ready_timeout=ready_timeout, pairs=pairs, min_effect=min_effect, fmt=fmt,
                        model_dir=model_dir, runtime=runtime, allow_load_difference=allow_load_difference,
                        correctness=CorrectnessOptions(not no_correctness, reference,
                                                       str(reference_file) if reference_file else None))
    if url is not None:  # a flow.Failure carries its exit code
        doc = flow.bench_url(url, model, opts)
    elif calibrate:
        from sparkdoctor.bench import calibration

        doc = calibration.document(flow.bench_ab(recipe, recipe, opts))
    elif vs is None:
        doc = flow.bench_recipe(recipe, opts)
    else:
        doc = flow.bench_ab(recipe, vs, opts)
    if conclude is not None:  # sparkdoctor/conclusions/: the A/B bound to its runs and their fingerprints
        from sparkdoctor.conclusions.store import conclude as record_conclusion

        # a ConclusionError is exit 2, a ledger that cannot store it a LedgerError (exit 5): by themselves
        doc["conclusion"] = record_conclusion(conclude, doc, recipe, vs, python, ledger, opts.sets, local)
    if fmt == "json":
        from sparkdoctor.emit import emit_json

        emit_json("bench", str(doc.get("kind", "bench")), doc)
    else:
        from sparkdoctor.bench import render as bench_render
        from sparkdoctor.emit import emit_console

        def draw(console) -> None:
            flow.render(doc, console)
            if doc.get("conclusion"):
                console.print(f"conclusion {conclude!r} recorded: {doc['conclusion']['statement']}", markup=False, highlight=False,
                              soft_wrap=True)

        emit_console(draw, bench_render.console())

