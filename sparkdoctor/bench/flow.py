"""What `sparkdoctor bench` does for each of its three forms (--url, RECIPE, RECIPE --vs RECIPE_B), from parsed
options to the result document: the one orchestrator of a run's trip (toolchain, gates, launch, measure, answers,
roofline, ledger), stage after stage; the run it makes is sparkdoctor/bench/run.py, stored by bench/storing.py.
Every way it can fail becomes a Failure with one line whose class carries its exit code (sparkdoctor/bench/failures.py;
nothing stored when a measurement did not finish)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkdoctor import proc
from sparkdoctor.bench import ab, body, gates, run, served, storing
from sparkdoctor.bench.document import ComparisonDocument, RunDocument
from sparkdoctor.bench.failures import (
    BadBenchInput,
    RunFailed,
    StoreFailed,
    ToolchainUnreadable,
)
from sparkdoctor.bench.failures import (
    Failure as Failure,  # what callers catch (rerun, tests)
)
from sparkdoctor.bench.load import load_record, machine_load
from sparkdoctor.bench.measure import BenchError, Measurement, measure_url
from sparkdoctor.bench.server import ServerInfo
from sparkdoctor.bench.workload import Workload, WorkloadError
from sparkdoctor.errors import SparkdoctorError
from sparkdoctor.progress import progress_line
from sparkdoctor.recipes import Recipe

if TYPE_CHECKING:
    from sparkdoctor.bench.correctness import Options as CorrectnessOptions
    from sparkdoctor.targets.interface import Target
    from sparkdoctor.targets.local import PythonTarget

Progress = Callable[[str], None]
DEATH_WAIT_S = 5.0


@dataclass
class Options:
    overrides: dict[str, Any]  # workload fields given on the command line (win over a recipe's own)
    sets: dict[str, str]  # recipe parameters (--set key=value), applied to every recipe
    local: bool  # run a recipe that names a container in the target environment
    python: str | None
    ledger: Path | None
    store: bool
    ready_timeout: float
    pairs: int
    min_effect: float
    fmt: str
    model_dir: Path | None = None  # the checkpoint folder served (for the roofline); default: the recipe's model
    allow_load_difference: bool = False  # an A/B verdict is called even when its arms ran under different load
    runtime: str | None = None  # the container CLI for recipes that name a container (default: as serve.launch)
    correctness: CorrectnessOptions | None = None  # default: probes on, compared with the stored reference
    force: bool = False  # launch even when the memory preflight says the launch does not fit now


def parse_overrides(given: dict[str, Any]) -> dict[str, Any]:
    """The workload options given on the command line (None: not given), checked, --concurrency split."""
    out = {k: v for k, v in given.items() if v is not None}
    conc = out.get("concurrency")
    if isinstance(conc, str):
        try:
            out["concurrency"] = tuple(int(x) for x in conc.split(","))
        except ValueError:
            raise BadBenchInput(f"--concurrency {conc}: give whole numbers separated by commas, e.g. 1,4") from None
    workload_from(out)  # a bad value fails here, before anything starts
    return out


def workload_from(given: dict[str, Any]) -> Workload:
    """The command line's workload options over the defaults; a bad one is BadBenchInput (exit 2)."""
    try:
        return Workload.from_dict({}, **given)
    except (WorkloadError, TypeError) as exc:
        raise BadBenchInput(str(exc)) from None


def _python_target(python: str | None) -> PythonTarget:
    from sparkdoctor.targets.interface import TargetError
    from sparkdoctor.targets.local import resolve_python_target

    try:
        return resolve_python_target(python)
    except TargetError as exc:
        raise ToolchainUnreadable(str(exc)) from None


def _toolchain(python: str | None, progress: Progress) -> run.Toolchain:
    target = _python_target(python)
    progress(f"collecting the toolchain facts of {target.python}")
    toolchain = _collect_toolchain(target)
    if toolchain.facts.get("packages") is None:  # check's exit 3: stored under it, a run would pass for a real toolchain's
        found = toolchain.facts.get("errors")
        errors = [e for e in found if isinstance(e, dict) and e.get("collector") == "target"] if isinstance(found, list) else []
        why = errors[0].get("error") if errors else "its packages could not be read"
        raise ToolchainUnreadable(f"the toolchain of {target.python} could not be read ({why}): nothing was launched or "
                                  "measured")
    return toolchain


def _collect_toolchain(target: Target) -> run.Toolchain:
    """The target's Facts (the check service's, without the kernel probes) as the run's key."""
    from sparkdoctor.check import CheckRequest, collect

    facts = collect(CheckRequest(target=target, kernels=False))
    return run.Toolchain(facts.to_dict(), facts.fingerprint(), target.describe())


def _url_toolchain(url: str, opts: Options, progress: Progress) -> tuple[run.Toolchain, int | None]:
    """--python's toolchain; else that of the process serving a local port (its interpreter or container);
    else "toolchain unknown", never sparkdoctor's own. (toolchain, the serving pid to leave out of the load)."""
    if opts.python is not None:
        return _toolchain(opts.python, progress), None
    from sparkdoctor.bench import behind

    found = behind.serving_process(url)
    if found["python"]:
        try:
            toolchain = _toolchain(found["python"], progress)
        except ToolchainUnreadable as exc:  # the server's own interpreter, not one the user named: the run is unknown
            return run.unknown_toolchain(f"{found['why']}: {exc}"), found["pid"]
    elif found["container"]:
        from sparkdoctor.targets.container_inspect import resolve_container_target
        from sparkdoctor.targets.interface import TargetError

        try:
            target = resolve_container_target(found["container"], runtime=opts.runtime)
        except TargetError as exc:
            return run.unknown_toolchain(f"{found['why']}: {exc}"), found["pid"]
        progress(f"collecting the toolchain facts of container {target.name}")
        toolchain = run.in_image(_collect_toolchain(target), target.info)
    else:
        return run.unknown_toolchain(found["why"]), found["pid"]
    toolchain.target["found_by"] = found["why"]
    return toolchain, found["pid"]


def bench_url(url: str, model: str | None, opts: Options) -> RunDocument:
    ledger = storing.open_ledger(opts.ledger, opts.store, create=False)
    with progress_line() as progress:
        toolchain, pid = _url_toolchain(url, opts, progress)
        before = machine_load(progress, exclude={pid} if pid else None)
        try:
            info, m = measure_url(url, model, workload_from(opts.overrides), progress)
        except BenchError as exc:
            raise RunFailed(str(exc)) from None
        after = machine_load(None, exclude={pid} if pid else None)
        if opts.model_dir is not None and toolchain.fingerprint != run.UNKNOWN:
            toolchain = run.with_model(toolchain, str(opts.model_dir))
        checked = _check_answers(url, m, info, toolchain, opts.correctness, progress)
        config = served.read(url, m.model, info.version, info.is_vllm)  # its flags are no recipe's: asked of it
    result = run.RunResult({"name": None, "url": url, "model": m.model, "served": config}, info, m, toolchain,
                           load=load_record(before, after), correctness=checked)
    if opts.model_dir is not None:  # the dtypes the server says (/metrics, /server_info), else vLLM's defaults
        from sparkdoctor.bench.roofline import achieved

        result.roofline = achieved(str(opts.model_dir), None, m, result.summary()["headline"],
                                   *served.roofline_flags(config))
    return storing.document(ledger, result, opts.ledger, opts.store)


# ---- recipes ----------------------------------------------------------------------------------------
def _load_recipe(path: Path | Recipe, opts: Options) -> Recipe:
    from sparkdoctor.recipes import RecipeError, load

    try:  # a Recipe: an already resolved one (rerun: a recipe without one of its workarounds)
        recipe = path if isinstance(path, Recipe) else load(path, opts.sets)
    except RecipeError as exc:
        raise BadBenchInput(str(exc)) from None
    if recipe.shell:  # split as arguments, `pip install x && vllm serve` asked pip for packages named && and vllm
        raise BadBenchInput(f"{recipe.source_path}: {recipe.shell} makes the command a shell line; sparkdoctor launches "
                            "one program with its arguments, never a shell: keep the serve command alone (a step "
                            "before it belongs in the image or the environment)")
    return recipe


def _target_python(recipe: Recipe, opts: Options) -> str | None:
    """--python, else the venv the recipe's command lives in (…/bin/vllm -> …/bin/python), else None (as check)."""
    if opts.python is not None:
        return _python_target(opts.python).python  # absolute: the server runs in its own folder
    from sparkdoctor.targets.early import python_of_command

    found = python_of_command([str(a) for a in recipe.argv])
    return str(found) if found else None


def _run_dir(label: str) -> Path:
    from sparkdoctor.locations import state_dir

    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label)[:60] or "recipe"
    path = state_dir() / "runs" / f"{stamp}-{safe}-{time.monotonic_ns() % 10_000:04d}"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a read-only or full home: the server's log has nowhere to go, so nothing is launched
        raise RunFailed(f"{label}: cannot make the run folder {path} for the server's log: {exc.strerror or exc}; nothing "
                        "was launched (SPARKDOCTOR_STATE_DIR names a state folder you can write)") from None
    return path


def _launch_and_measure(recipe: Recipe, workload: Workload, toolchain: run.Toolchain, opts: Options, progress: Progress,
                        arm: str | None = None) -> run.RunResult:
    """The gates, then the recipe's server launched (serve.launch: own process group, 127.0.0.1, free port, live log
    scan), measured and torn down whatever happens. A launch that failed says why (the memory postmortem)."""
    from sparkdoctor.collect.hostroot import host_root
    from sparkdoctor.collect.kernel_log import uptime
    from sparkdoctor.serve import LaunchError

    python = _target_python(recipe, opts)
    gates.model_gate(recipe, opts.local)
    gates.mods_gate(recipe, python, opts.local, opts.runtime, progress)
    judged = gates.at(recipe, gates.memory_gate(recipe, opts.model_dir, opts.force, progress))
    since = uptime(host_root())  # where this launch's window starts in the kernel log
    try:
        result = _serve_and_measure(recipe, workload, toolchain, opts, progress, arm, python)
    except BenchError as exc:
        raise RunFailed(f"{recipe.name}: {exc}", judged) from None
    except LaunchError as exc:
        from sparkdoctor.memory.postmortem import after_launch, finding, one_line

        pm = after_launch(exc, since)
        if pm is None or pm.cause == "unknown":
            raise RunFailed(str(exc), judged) from None
        raise RunFailed(f"{exc}; {one_line(pm)}", [*judged, *gates.at(recipe, [finding(pm)])]) from None
    result.preflight = judged[0] if judged else None
    return result


def _serve_and_measure(recipe: Recipe, workload: Workload, toolchain: run.Toolchain, opts: Options, progress: Progress,
                       arm: str | None, python: str | None) -> run.RunResult:
    """While it is measured the server must stay alive: a request that fails on a dead server reports the server's
    death, not the request's."""
    from sparkdoctor import serve
    from sparkdoctor.bench.roofline import recipe_model_dir
    from sparkdoctor.serve.binding import rebind

    progress(f"launching {recipe.name} (waiting until it is ready)")
    with serve.launch(recipe, run_dir=_run_dir(recipe.name), ready_timeout=opts.ready_timeout, local=opts.local,
                      progress=progress, python=python, runtime=opts.runtime) as server:
        cgroup = (server.container or {}).get("id")
        before = machine_load(progress, exclude_cgroup=cgroup)
        try:
            info, m = measure_url(server.base_url, server.model, workload, progress)
        except BenchError:
            # A request that broke is often the first sign of a server dying: give it a moment to finish
            # dying, so the user hears about the death (status, last log line, known problems) instead.
            until = time.monotonic() + DEATH_WAIT_S
            while server.alive() and time.monotonic() < until:
                time.sleep(0.1)
            server.check_alive()  # raises LaunchError naming the death, the log's last line, known problems
            raise
        after = machine_load(None, exclude_cgroup=cgroup)
        toolchain = run.with_model(run.in_image(toolchain, server.container), recipe_model_dir(recipe)[0])
        checked = _check_answers(server.base_url, m, info, toolchain, opts.correctness, progress)  # untimed
        findings = [h.to_dict() for h in server.findings]
        # as it ran: the launcher's port and host, the target's bin/ (a container's: the `run` argv's tail)
        argv = list(server.argv) if not server.container else rebind(list(recipe.argv), "127.0.0.1", server.port)
    return run.RunResult({**run.resolved_recipe(recipe), "argv": argv}, info, m, toolchain, findings, arm=arm,
                         container=server.container, load=load_record(before, after), correctness=checked,
                         memory=server.memory())


def _check_answers(base_url: str, m: Measurement, info: ServerInfo, toolchain: run.Toolchain,
                   options: CorrectnessOptions | None, progress: Progress) -> dict[str, object] | None:
    """The correctness gate's probe requests and verdict (bench/correctness.py), or None when turned off: one at a
    time, and as many at once as the run's top concurrency (a fault only larger batches show)."""
    from sparkdoctor.bench import correctness

    options = options or correctness.Options()
    if not options.enabled:
        return None
    from sparkdoctor.bench.batched import MAX_BATCH, probe

    progress("checking the answers (correctness probes, outside the timed window)")
    batch = min(max((lvl.concurrency for lvl in m.levels), default=1), MAX_BATCH)
    at_once = partial(probe, base_url, m.model, info.is_vllm, batch=batch) if batch > 1 else None
    return correctness.step(base_url, m.model, info.is_vllm, toolchain.facts, options, at_once)


def _recipe_workload(recipe: Recipe, opts: Options) -> Workload:
    """The recipe's own workload table, with the command line's options on top."""
    from sparkdoctor.bench.workload import from_recipe

    try:
        return from_recipe(recipe.workload, f"recipe {recipe.source_path}", **opts.overrides)
    except WorkloadError as exc:
        raise BadBenchInput(str(exc)) from None


def bench_recipe(path: Path | Recipe, opts: Options) -> RunDocument:
    recipe = _load_recipe(path, opts)
    workload = _recipe_workload(recipe, opts)
    ledger = storing.open_ledger(opts.ledger, opts.store, create=False)
    with progress_line() as progress:
        toolchain = _toolchain(_target_python(recipe, opts), progress)
        result = _launch_and_measure(recipe, workload, toolchain, opts, progress)
    from sparkdoctor.bench.roofline import achieved, recipe_model_dir
    from sparkdoctor.recipes.vllm_config import served_argv

    model_dir, why = (str(opts.model_dir), None) if opts.model_dir is not None else recipe_model_dir(recipe)
    # the achieved share of the audit's ceiling, sized at the command's dtypes (its --config file's too); never fails
    # the run (the block says why it is missing)
    result.roofline = achieved(model_dir, why, result.measurement, result.summary()["headline"], served_argv(recipe))
    return storing.document(ledger, result, opts.ledger, opts.store)


def _kept_runs(stored: list[int], order: list[str], comparison_id: int | None) -> str:
    """What an interrupted A/B leaves in the ledger: its measured runs, each named, and what to do with them."""
    runs = ", ".join(f"run {rid} (arm {arm})" for rid, arm in zip(stored, order, strict=False))
    first = stored[0]
    return (f"kept {runs} of comparison {comparison_id}, marked interrupted; no verdict or conclusion uses "
            f"{'it' if len(stored) == 1 else 'them'}: `sparkdoctor history {first}` shows {'it' if len(stored) == 1 else 'the first'}"
            + (f", `sparkdoctor history --compare {stored[0]} --compare {stored[1]}` compares them" if len(stored) > 1 else "")
            + f", `sparkdoctor history --delete {first}` removes {'it' if len(stored) == 1 else 'one'}")


def bench_ab(path_a: Path | Recipe, path_b: Path | Recipe, opts: Options) -> ComparisonDocument:
    recipes = {"A": _load_recipe(path_a, opts), "B": _load_recipe(path_b, opts)}
    labels = {arm: r.name for arm, r in recipes.items()}
    if labels["A"] == labels["B"] and path_a != path_b:
        labels = {"A": f"{labels['A']} ({path_a})", "B": f"{labels['B']} ({path_b})"}
    workload = _recipe_workload(recipes["A"], opts)  # one workload for both arms: like for like
    ledger = storing.open_ledger(opts.ledger, opts.store, create=False)  # made, with the comparison, by a first run
    comparison_id: int | None = None
    stored: list[int] = []
    judged: dict[tuple[str, object], dict[str, object]] = {}  # (arm, finding id) -> the finding, once per arm
    status = "interrupted"
    try:
        with progress_line() as progress:
            toolchains = {arm: _toolchain(_target_python(r, opts), progress) for arm, r in recipes.items()}
            order = ab.schedule(opts.pairs)
            got: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}  # each arm's run summaries, in order
            for index, arm in enumerate(order):
                progress(f"arm {index + 1}/{2 * opts.pairs}: {arm} ({labels[arm]})")
                arm_opts = replace(opts, correctness=ab.against_a(opts.correctness, arm, got["A"]))  # B vs A's answers
                result = _launch_and_measure(recipes[arm], workload, toolchains[arm], arm_opts, progress, arm)
                if opts.store and comparison_id is None:
                    ledger, comparison_id = storing.begin_comparison(ledger, opts.ledger, result, labels["A"], labels["B"])
                storing.store(ledger, result, comparison_id)
                for f in run.finding_records(result):
                    judged.setdefault((arm, f["id"]), {"arm": arm, **f})
                if result.run_id is not None:
                    stored.append(result.run_id)
                got[arm].append(result.summary())
        levels = ab.compare(got["A"], got["B"], opts.min_effect)
        if opts.pairs == 1 and ledger is not None and stored:
            from sparkdoctor.bench import calibration

            ab.apply_calibration(levels, calibration.floor(ledger, stored[0]), opts.min_effect, [*got["A"], *got["B"]],
                                 opts.allow_load_difference)
        load_doc = ab.load_check(got["A"], got["B"], levels, opts.allow_load_difference)
        correct_doc = ab.correctness_check(got["A"], got["B"], levels)
        doc = ComparisonDocument(comparison_id=comparison_id, a=labels["A"], b=labels["B"], order=order, runs=stored,
                                 metric=ab.METRIC, min_effect=opts.min_effect, levels=levels, verdict=ab.overall(levels),
                                 load=load_doc, correctness=correct_doc,
                                 fingerprints={arm: t.fingerprint for arm, t in toolchains.items()},
                                 ledger=str(ledger.path) if ledger else None, findings=list(judged.values()))
        status = "complete"
        return doc
    except (KeyboardInterrupt, proc.Interrupted) as exc:  # the one line names what stays in the ledger
        if not stored:
            raise
        signum = exc.signum if isinstance(exc, proc.Interrupted) else signal.SIGINT
        done = "; ".join(filter(None, [getattr(exc, "done", None), _kept_runs(stored, order, comparison_id)]))
        raise proc.Interrupted(signum, done=done) from exc
    except SparkdoctorError as exc:  # an arm that failed after another was stored: the one line names what stays
        if stored:
            exc.args = (f"{exc}; {_kept_runs(stored, order, comparison_id)}", *exc.args[1:])
        raise
    finally:
        if ledger is not None and comparison_id is not None:
            try:
                storing.ledger_call(ledger.finish_comparison, comparison_id, status, body(doc.to_json()) if status == "complete" else None)
            except StoreFailed:
                if status == "complete":
                    raise  # else the error that stopped the comparison (a run kept in a file) is the one to say
