"""One benchmark run end to end: the toolchain's Facts, the measurement, the ledger row.

A run is (Facts fingerprint, resolved recipe, bench-code version) plus its numbers; a run is stored
only when the measurement finished, in one transaction, so the ledger never holds half a run.
The Facts are those of the target whose Python runs the server: for a recipe, the venv of its
command (bin/vllm -> bin/python) or --python; for `--url`, the --python target (default: as `check`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkdoctor import __version__
from sparkdoctor.bench import BENCH_VERSION
from sparkdoctor.bench.http import HttpError
from sparkdoctor.bench.measure import BenchError, Measurement, measure
from sparkdoctor.bench.server import ServerInfo, detect
from sparkdoctor.bench.workload import Workload

RESULT_SCHEMA = 1
DEATH_WAIT_S = 5.0
Progress = Callable[[str], None]


@dataclass
class Toolchain:
    """Facts of the target that runs the server, collected once per bench invocation."""

    facts: dict[str, Any]
    fingerprint: str
    target: dict[str, Any]


UNKNOWN = "unknown"  # the fingerprint of a run whose toolchain could not be found (kept out of conclusions)


def unknown_toolchain(why: str) -> Toolchain:
    """A run measured without knowing what served it: stored as such, never under another toolchain."""
    return Toolchain({}, UNKNOWN, {"kind": UNKNOWN, "why": why})


def collect_toolchain(target: Any) -> Toolchain:
    from sparkdoctor.check import CheckOptions, collect_facts

    facts = collect_facts(target, CheckOptions(kernels=False))
    return Toolchain(facts.to_dict(), facts.fingerprint(), target.describe())


CONTAINER_KEYS = ("name", "id", "engine", "image", "image_id", "platform", "layers", "config_digest", "repo_digests",
                  "fingerprint", "image_error")


def in_image(toolchain: Toolchain, container: dict[str, Any] | None) -> Toolchain:
    """The toolchain of a run served from a container: the image's identity (id, layers, content
    fingerprint) joins its Facts, so the run's fingerprint changes whenever the image does and a number
    stays tied to the image it was measured in."""
    if not container:
        return toolchain
    from sparkdoctor.facts import Facts

    facts = {**toolchain.facts, "container": {k: container[k] for k in CONTAINER_KEYS if container.get(k) is not None}}
    return Toolchain(facts, Facts.from_dict(facts, source="bench").fingerprint(), toolchain.target)


def with_model(toolchain: Toolchain, folder: str | None) -> Toolchain:
    """The toolchain of a run with the identity of the checkpoint it served (bench/model_identity.py) in its
    fingerprint, when the model is a local folder: the same path re-quantized is another run's key."""
    if not folder:
        return toolchain
    from sparkdoctor.bench.model_identity import identity
    from sparkdoctor.facts import Facts

    ident = identity(folder)
    if ident is None:
        return toolchain
    facts = {**toolchain.facts, "recipe": {**(toolchain.facts.get("recipe") or {}),
                                           "model": {"ref": str(folder), "identity": ident}}}
    return Toolchain(facts, Facts.from_dict(facts, source="bench").fingerprint(), toolchain.target)


@dataclass
class RunResult:
    """A finished run: what the console and JSON render, and what the ledger stored."""

    recipe: dict[str, Any]
    server: ServerInfo
    measurement: Measurement
    toolchain: Toolchain
    findings: list[dict[str, Any]] = field(default_factory=list)
    run_id: int | None = None
    arm: str | None = None
    roofline: dict[str, Any] | None = None  # bench/roofline.py: achieved share of the ceiling, or why missing
    container: dict[str, Any] | None = None  # the container it was served from (image id, fingerprint), or None
    load: dict[str, Any] | None = None  # bench/load.py samples {"before", "after"} and "busy" (why, or None)
    correctness: dict[str, Any] | None = None  # bench/correctness.py: the probe answers and their verdict
    memory: dict[str, Any] | None = None  # serve/memwatch.py: the server's memory from launch to teardown (None: in a container)
    preflight: dict[str, Any] | None = None  # the memory preflight's verdict as a finding (None: not judged)

    def summary(self) -> dict[str, Any]:
        return {**self.measurement.summary(), "load": self.load, "correctness": self.correctness}

    def to_dict(self) -> dict[str, Any]:
        s = self.summary()
        return {"run_id": self.run_id, "arm": self.arm, "recipe": self.recipe, "server": self.server.to_dict(),
                "base_url": self.measurement.base_url, "model": self.measurement.model,
                "fingerprint": self.toolchain.fingerprint, "target": self.toolchain.target,
                "bench_version": BENCH_VERSION, "workload": self.measurement.workload.to_dict(),
                "headline": s["headline"], "levels": s["levels"], "seconds": s["seconds"], "findings": self.findings,
                "roofline": self.roofline, "container": self.container, "load": self.load,
                "correctness": self.correctness, "memory": self.memory, "preflight": self.preflight}


def finding_records(result: RunResult) -> list[dict[str, Any]]:
    """What judged a run, as finding records ({"kind", "id", "severity", "title", "evidence", "remedy", "path"}): the
    memory preflight's verdict and each matrix entry whose symptom the server's log printed."""
    path = result.recipe.get("source_path")
    out = [result.preflight] if result.preflight else []
    for hit in result.findings:
        out.append({"kind": "symptom", "id": hit.get("entry_id"), "severity": None,
                    "title": f"the server's log shows a known problem ({hit.get('symptom')})", "evidence": [hit.get("line")],
                    "remedy": "", "path": path})
    return out


def samples_of(m: Measurement) -> Iterator[tuple[int, int, int, dict[str, Any]]]:
    for i, sample in enumerate(m.warmup):
        yield 0, 0, i, sample.to_dict()
    for level in m.levels:
        for r, rnd in enumerate(level.rounds):
            for i, sample in enumerate(rnd.samples):
                yield level.concurrency, r, i, sample.to_dict()


def measure_url(base_url: str, model: str | None, workload: Workload, progress: Progress | None = None
                ) -> tuple[ServerInfo, Measurement]:
    """Detect the server, pick the model (the only one served when none is named), measure."""

    async def go() -> tuple[ServerInfo, Measurement]:
        try:
            info = await detect(base_url)
        except HttpError as exc:
            raise BenchError(f"{base_url}: {exc}") from None
        name = model
        if name is None:
            if len(info.models) != 1:
                served = ", ".join(info.models) or "none"
                raise BenchError(f"{base_url} serves {len(info.models)} models ({served}): name one with --model")
            name = info.models[0]
        return info, await measure(base_url, name, info, workload, progress)

    return asyncio.run(go())


def record(result: RunResult, comparison_id: int | None = None) -> Any:
    """The ledger's record of a finished run (sparkdoctor/ledger/store.py RunRecord)."""
    from sparkdoctor.ledger import RunRecord

    m = result.measurement
    return RunRecord(recipe=result.recipe, base_url=m.base_url, model=m.model, server=result.server.to_dict(),
                     facts=result.toolchain.facts, fingerprint=result.toolchain.fingerprint, bench_version=BENCH_VERSION,
                     tool_version=__version__, workload=m.workload.to_dict(), summary=result.summary(),
                     findings=result.findings, samples=samples_of(m), comparison_id=comparison_id, arm=result.arm,
                     memory=result.memory)


def store(ledger: Any, result: RunResult, comparison_id: int | None = None) -> int:
    result.run_id = ledger.add_run(record(result, comparison_id))
    return result.run_id


def stored_run(ledger: Any, result: RunResult) -> dict[str, Any]:
    """The run as the ledger keeps it (Ledger.run()): read back when it was stored, else as it would be."""
    if ledger is not None and result.run_id is not None:
        found = ledger.run(result.run_id)
        if found is not None:
            return dict(found)
    stored: dict[str, Any] = record(result).as_stored(result.run_id)
    return stored


def envelope(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    """The one JSON shape every bench/history answer has: {"schema", "bench_version", "kind", ...}."""
    return {"schema": RESULT_SCHEMA, "bench_version": BENCH_VERSION, "kind": kind, **data}


# ---- a recipe: launch, measure, tear down ---------------------------------------------------------
def resolved_recipe(recipe: Any) -> dict[str, Any]:
    """What the ledger keeps of a recipe: name, the argv and env it ran with, the model, its source."""
    data = recipe.to_dict() if hasattr(recipe, "to_dict") else dict(vars(recipe))
    return {k: data.get(k) for k in ("name", "format", "source_path", "fingerprint", "argv", "env", "model",
                                       "served_model_name", "workarounds", "params", "container") if k in data}


def run_recipe(recipe: Any, workload: Workload, toolchain: Toolchain, run_dir: Path, ready_timeout: float,
               progress: Progress | None = None, arm: str | None = None, python: str | None = None,
               local: bool = False, runtime: str | None = None, correctness: Any = None) -> RunResult:
    """Launch the recipe's server (serve.launch: own process group, 127.0.0.1, free port, live log
    scan), measure it, and tear it down whatever happens. While it is measured the server must stay
    alive: a request that fails on a dead server reports the server's death, not the request's."""
    from sparkdoctor import serve

    if progress:
        progress(f"launching {recipe.name} (waiting until it is ready)")
    with serve.launch(recipe, run_dir=run_dir, ready_timeout=ready_timeout, local=local, progress=progress,
                      python=python, runtime=runtime) as server:
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
        from sparkdoctor.bench.roofline import recipe_model_dir

        toolchain = with_model(in_image(toolchain, server.container), recipe_model_dir(recipe)[0])
        checked = check_answers(server.base_url, m.model, info, toolchain, correctness, progress)  # after the timed window
        findings = [h.to_dict() for h in server.findings]
        argv = list(server.argv) if not server.container else _command_of(recipe, server)
    resolved = resolved_recipe(recipe)
    resolved["argv"] = argv  # as it ran: the launcher's port and host, the target's bin/
    return RunResult(resolved, info, m, toolchain, findings, arm=arm, container=server.container,
                     load=load_record(before, after), correctness=checked, memory=server.memory())


def check_answers(base_url: str, model: str, info: ServerInfo, toolchain: Toolchain, options: Any,
                  progress: Progress | None) -> dict[str, Any] | None:
    """The correctness gate's probe requests and verdict (bench/correctness.py), or None when turned off."""
    from sparkdoctor.bench import correctness

    options = options or correctness.Options()
    if not options.enabled:
        return None
    if progress:
        progress("checking the answers (correctness probes, outside the timed window)")
    return correctness.step(base_url, model, info.is_vllm, toolchain.facts, options)


def machine_load(progress: Progress | None, exclude: set[int] | None = None,
                 exclude_cgroup: str | None = None) -> dict[str, Any] | None:
    """A load sample (bench/load.py); None when /proc cannot be read (never fails a run)."""
    from sparkdoctor.bench import load

    if progress:
        progress("sampling the machine's load")
    try:
        return load.sample(exclude, exclude_cgroup=exclude_cgroup)
    except OSError:
        return None


def load_record(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any]:
    from sparkdoctor.bench import load

    why = load.busy(before) or load.busy(after)
    return {"before": before, "after": after, "busy": why, "index": load.run_load([before or {}, after or {}])}


def _command_of(recipe: Any, server: Any) -> list[str]:
    """The command a container ran (the `run` argv's tail after the image), as the ledger keeps argv."""
    from sparkdoctor.serve.binding import rebind

    return rebind(list(recipe.argv), "127.0.0.1", server.port)
