"""What `sparkdoctor bench` does for each of its three forms (--url, RECIPE, RECIPE --vs RECIPE_B),
from parsed options to the result document; every way it can fail becomes a Failure with one line
whose class carries its exit code (sparkdoctor/bench/failures.py; nothing stored when a measurement did not finish)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkdoctor.bench import ab, session
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
from sparkdoctor.bench.measure import BenchError
from sparkdoctor.bench.workload import Workload, WorkloadError
from sparkdoctor.progress import progress_line


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
    correctness: Any = None  # bench/correctness.Options (default: probes on, compared with the stored reference)
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
    workload_from(None, **out)  # a bad value fails here, before anything starts
    return out


def workload_from(base: dict[str, Any] | None = None, **cli: Any) -> Workload:
    try:
        return Workload.from_dict(dict(base or {}), **cli)
    except (WorkloadError, TypeError) as exc:
        raise BadBenchInput(str(exc)) from None




def _open_ledger(opts: Options):
    if not opts.store:
        return None
    from sparkdoctor.ledger import Ledger, LedgerError

    try:
        return Ledger(opts.ledger)
    except LedgerError as exc:
        raise StoreFailed(str(exc)) from None


def _ledger_call(fn: Callable[..., Any], *args: Any) -> Any:
    """A ledger write whose failure (a malformed or read-only file) is a Failure with exit 5, like storing a run."""
    from sparkdoctor.ledger import LedgerError

    try:
        return fn(*args)
    except LedgerError as exc:
        raise StoreFailed(str(exc)) from None


def _store(ledger, result: session.RunResult, comparison_id: int | None = None) -> None:
    if ledger is None:
        return
    from sparkdoctor.ledger import LedgerError

    try:
        session.store(ledger, result, comparison_id)
    except LedgerError as exc:
        raise StoreFailed(str(exc)) from None


def _stored_run(ledger, result: session.RunResult) -> dict[str, Any]:
    from sparkdoctor.ledger import LedgerError

    try:
        return session.stored_run(ledger, result)
    except LedgerError as exc:
        raise StoreFailed(str(exc)) from None


def _toolchain(python: str | None, progress: Callable[[str], None]) -> session.Toolchain:
    from sparkdoctor.targets.local import TargetError, resolve_python_target

    try:
        target = resolve_python_target(python)
    except TargetError as exc:
        raise ToolchainUnreadable(str(exc)) from None
    progress(f"collecting the toolchain facts of {target.python}")
    return session.collect_toolchain(target)


def _url_toolchain(url: str, opts: Options, progress: Callable[[str], None]) -> tuple[session.Toolchain, int | None]:
    """--python's toolchain; else that of the process serving a local port (its interpreter or container);
    else "toolchain unknown", never sparkdoctor's own. (toolchain, the serving pid to leave out of the load)."""
    if opts.python is not None:
        return _toolchain(opts.python, progress), None
    from sparkdoctor.bench import behind

    found = behind.serving_process(url)
    if found["python"]:
        toolchain = _toolchain(found["python"], progress)
        toolchain.target["found_by"] = found["why"]
        return toolchain, found["pid"]
    if found["container"]:
        from sparkdoctor.targets.container_inspect import resolve_container_target
        from sparkdoctor.targets.local import TargetError

        try:
            target = resolve_container_target(found["container"], runtime=opts.runtime)
        except TargetError as exc:
            return session.unknown_toolchain(f"{found['why']}: {exc}"), found["pid"]
        progress(f"collecting the toolchain facts of container {target.name}")
        toolchain = session.in_image(session.collect_toolchain(target), target.info)
        toolchain.target["found_by"] = found["why"]
        return toolchain, found["pid"]
    return session.unknown_toolchain(found["why"]), found["pid"]


def bench_url(url: str, model: str | None, opts: Options) -> RunDocument:
    ledger = _open_ledger(opts)
    with progress_line() as progress:
        toolchain, pid = _url_toolchain(url, opts, progress)
        before = session.machine_load(progress, exclude={pid} if pid else None)
        try:
            info, m = session.measure_url(url, model, workload_from(None, **opts.overrides), progress)
        except BenchError as exc:
            raise RunFailed(str(exc)) from None
        after = session.machine_load(None, exclude={pid} if pid else None)
        if opts.model_dir is not None and toolchain.fingerprint != session.UNKNOWN:
            toolchain = session.with_model(toolchain, str(opts.model_dir))
        checked = session.check_answers(url, m.model, info, toolchain, opts.correctness, progress)
    result = session.RunResult({"name": None, "url": url, "model": m.model}, info, m, toolchain,
                               load=session.load_record(before, after), correctness=checked)
    if opts.model_dir is not None:
        _roofline(result, str(opts.model_dir), None)
    _store(ledger, result)
    return RunDocument(result, str(ledger.path) if ledger else None, _stored_run(ledger, result))


# ---- recipes ----------------------------------------------------------------------------------------
def _load_recipe(path: Path, opts: Options) -> Any:
    if hasattr(path, "argv"):  # an already resolved Recipe (rerun: a recipe without one of its workarounds)
        return path
    from sparkdoctor.recipes import RecipeError, load

    try:
        return load(path, opts.sets)
    except RecipeError as exc:
        raise BadBenchInput(str(exc)) from None


def _target_python(recipe: Any, opts: Options) -> str | None:
    """--python, else the venv the recipe's command lives in (…/bin/vllm -> …/bin/python), else None (as check)."""
    if opts.python is not None:
        from sparkdoctor.targets.local import TargetError, resolve_python_target

        try:
            return resolve_python_target(opts.python).python  # absolute: the server runs in its own folder
        except TargetError as exc:
            raise ToolchainUnreadable(str(exc)) from None
    from sparkdoctor.targets.early import python_of_command

    found = python_of_command([str(a) for a in recipe.argv])
    return str(found) if found else None


def _run_dir(label: str) -> Path:
    from sparkdoctor.locations import state_dir

    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label)[:60] or "recipe"
    path = state_dir() / "runs" / f"{stamp}-{safe}-{time.monotonic_ns() % 10_000:04d}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _launch_and_measure(recipe: Any, workload: Workload, toolchain, opts: Options, progress, arm: str | None = None):
    from sparkdoctor.collect.hostroot import host_root
    from sparkdoctor.collect.kernel_log import uptime
    from sparkdoctor.serve import LaunchError

    python = _target_python(recipe, opts)
    _mods_gate(recipe, python, opts, progress)
    judged = _at(recipe, _memory_gate(recipe, opts, progress))
    since = uptime(host_root())  # where this launch's window starts in the kernel log
    try:
        result = session.run_recipe(recipe, workload, toolchain, _run_dir(recipe.name), opts.ready_timeout, progress, arm,
                                    python=python, local=opts.local, runtime=opts.runtime, correctness=opts.correctness)
    except BenchError as exc:
        raise RunFailed(f"{recipe.name}: {exc}", judged) from None
    except LaunchError as exc:
        from sparkdoctor.memory.postmortem import after_launch, finding, one_line

        pm = after_launch(exc, since)
        if pm is None or pm.cause == "unknown":
            raise RunFailed(str(exc), judged) from None
        raise RunFailed(f"{exc}; {one_line(pm)}", [*judged, *_at(recipe, [finding(pm)])]) from None
    result.preflight = judged[0] if judged else None
    return result


def _at(recipe: Any, findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Finding records that name the recipe file they are about (SARIF locates them there)."""
    return [{**f, "path": str(recipe.source_path)} for f in findings]


def _mods_gate(recipe: Any, python: str | None, opts: Options, progress: Callable[[str], None]) -> None:
    """A recipe whose mods would fail on the target is not launched (sparkdoctor.mods.recipe.launch_gate)."""
    from sparkdoctor.mods.recipe import launch_gate

    refusal = launch_gate(recipe, python, opts.local, progress, opts.runtime)
    if refusal:
        raise RunFailed(refusal)


def _memory_gate(recipe: Any, opts: Options, progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """A vLLM launch that does not fit in the memory free now is not started unless --force (sparkdoctor/memory/);
    one whose checkpoint cannot be read (no local folder, no safetensors) is launched unjudged, and a server that is
    not vLLM is not sized by vLLM's rules. The verdict as a finding record ([] when not judged)."""
    from sparkdoctor.audit.errors import AuditError
    from sparkdoctor.bench.roofline import recipe_model_dir
    from sparkdoctor.memory.findings import findings, launch_refusal, preflight
    from sparkdoctor.memory.need import launches_vllm

    folder = str(opts.model_dir) if opts.model_dir is not None else recipe_model_dir(recipe)[0]
    if folder is None or not launches_vllm(recipe.argv):
        return []
    progress(f"memory preflight: sizing {recipe.name} against the memory free now")
    try:
        verdict = preflight(recipe, folder)
    except AuditError as exc:
        progress(f"memory preflight skipped: {exc}")
        return []
    refusal, judged = launch_refusal(verdict), findings(verdict)
    if refusal and not opts.force:
        raise RunFailed(f"{recipe.name}: {refusal}", _at(recipe, judged))
    if refusal:
        progress(f"{recipe.name}: launched with --force: {refusal}")
    return judged


def _recipe_workload(recipe: Any, opts: Options) -> Workload:
    """The recipe's own workload table, with the command line's options on top."""
    from sparkdoctor.bench.workload import from_recipe

    try:
        return from_recipe(recipe.workload, f"recipe {recipe.source_path}", **opts.overrides)
    except WorkloadError as exc:
        raise BadBenchInput(str(exc)) from None


def bench_recipe(path: Path, opts: Options) -> RunDocument:
    recipe = _load_recipe(path, opts)
    workload = _recipe_workload(recipe, opts)
    ledger = _open_ledger(opts)
    with progress_line() as progress:
        toolchain = _toolchain(_target_python(recipe, opts), progress)
        result = _launch_and_measure(recipe, workload, toolchain, opts, progress)
    from sparkdoctor.bench.roofline import recipe_model_dir

    model_dir, why = (str(opts.model_dir), None) if opts.model_dir is not None else recipe_model_dir(recipe)
    _roofline(result, model_dir, why)
    _store(ledger, result)
    return RunDocument(result, str(ledger.path) if ledger else None, _stored_run(ledger, result))


def _roofline(result: session.RunResult, model_dir: str | None, why: str | None) -> None:
    """The achieved share of the audit's ceiling; never fails the run (the block says why it is missing)."""
    from sparkdoctor.bench import roofline

    result.roofline = roofline.achieved(model_dir, why, result.measurement, result.summary()["headline"],
                                        roofline.kv_dtype_of(result.recipe.get("argv")))


def bench_ab(path_a: Path, path_b: Path, opts: Options) -> ComparisonDocument:
    recipes = {"A": _load_recipe(path_a, opts), "B": _load_recipe(path_b, opts)}
    labels = {arm: r.name for arm, r in recipes.items()}
    if labels["A"] == labels["B"] and path_a != path_b:
        labels = {"A": f"{labels['A']} ({path_a})", "B": f"{labels['B']} ({path_b})"}
    workload = _recipe_workload(recipes["A"], opts)  # one workload for both arms: like for like
    ledger = _open_ledger(opts)
    comparison_id = None
    if ledger is not None:
        comparison_id = _ledger_call(ledger.begin_comparison, labels["A"], labels["B"])
    stored: list[int] = []
    judged: dict[tuple[str, str], dict[str, Any]] = {}  # (arm, finding id) -> the finding, once per arm
    status = "interrupted"
    try:
        with progress_line() as progress:
            toolchains = {arm: _toolchain(_target_python(r, opts), progress) for arm, r in recipes.items()}

            def run_arm(arm: str, index: int) -> dict[str, Any]:
                progress(f"arm {index + 1}/{2 * opts.pairs}: {arm} ({labels[arm]})")
                result = _launch_and_measure(recipes[arm], workload, toolchains[arm], opts, progress, arm)
                _store(ledger, result, comparison_id)
                for f in session.finding_records(result):
                    judged.setdefault((arm, f["id"]), {"arm": arm, **f})
                if result.run_id is not None:
                    stored.append(result.run_id)
                return result.summary()

            order, got = ab.run_interleaved(opts.pairs, run_arm)
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
    finally:
        if ledger is not None and comparison_id is not None:
            _ledger_call(ledger.finish_comparison, comparison_id, status, _stored_result(doc) if status == "complete" else None)


def _stored_result(doc: ComparisonDocument) -> dict[str, Any]:
    """What the ledger keeps of a finished comparison (its row's result_json): the comparison's own keys."""
    body = doc.to_json()
    for key in ("schema", "bench_version", "kind"):
        body.pop(key)
    return body


