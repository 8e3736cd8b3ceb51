"""One benchmark run: the key of the toolchain it measured (the Facts of the target whose Python runs the server),
its result, and the ledger's record of it. A run is (Facts fingerprint, resolved recipe, bench-code version) plus its
numbers, stored only when the measurement finished, in one transaction (its trip: sparkdoctor/bench/flow.py)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparkdoctor import __version__
from sparkdoctor.bench import BENCH_VERSION

if TYPE_CHECKING:  # the measurement's and server's types only: importing them brings aiohttp (bench/http.py), a
    # quarter second of CPU that history, conclusions and rerun's plan paid on every start without a request
    from sparkdoctor.bench.measure import Measurement
    from sparkdoctor.bench.server import ServerInfo
    from sparkdoctor.ledger import Ledger, RunRecord
    from sparkdoctor.recipes import Recipe

@dataclass
class Toolchain:
    """Facts of the target that runs the server, collected once per bench invocation."""

    facts: dict[str, object]
    fingerprint: str
    target: dict[str, object]


UNKNOWN = "unknown"  # the fingerprint of a run whose toolchain could not be found (kept out of conclusions)


def unknown_toolchain(why: str) -> Toolchain:
    """A run measured without knowing what served it: stored as such, never under another toolchain."""
    return Toolchain({}, UNKNOWN, {"kind": UNKNOWN, "why": why})


CONTAINER_KEYS = ("name", "id", "engine", "image", "image_id", "platform", "layers", "config_digest", "repo_digests",
                  "fingerprint", "image_error")


def in_image(toolchain: Toolchain, container: Mapping[str, object] | None) -> Toolchain:
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
    recipe = toolchain.facts.get("recipe")
    facts = {**toolchain.facts, "recipe": {**(recipe if isinstance(recipe, dict) else {}),
                                           "model": {"ref": str(folder), "identity": ident}}}
    return Toolchain(facts, Facts.from_dict(facts, source="bench").fingerprint(), toolchain.target)


@dataclass
class RunResult:
    """A finished run: what the console and JSON render, and what the ledger stored."""

    recipe: dict[str, object]
    server: ServerInfo
    measurement: Measurement
    toolchain: Toolchain
    findings: list[dict[str, str]] = field(default_factory=list)  # the symptoms the server's log printed (Hit)
    run_id: int | None = None
    arm: str | None = None
    roofline: dict[str, object] | None = None  # bench/roofline.py: achieved share of the ceiling, or why missing
    container: dict[str, object] | None = None  # the container it was served from (image id, fingerprint), or None
    load: dict[str, object] | None = None  # bench/load.py samples {"before", "after"} and "busy" (why, or None)
    correctness: dict[str, object] | None = None  # bench/correctness.py: the probe answers and their verdict
    memory: dict[str, object] | None = None  # serve/memwatch.py: the server's memory from launch to teardown (None: in a container)
    preflight: dict[str, object] | None = None  # the memory preflight's verdict as a finding (None: not judged)

    def summary(self) -> dict[str, Any]:
        return {**self.measurement.summary(), "load": self.load, "correctness": self.correctness}

    def to_dict(self) -> dict[str, object]:
        s = self.summary()
        return {"run_id": self.run_id, "arm": self.arm, "recipe": self.recipe, "server": self.server.to_dict(),
                "base_url": self.measurement.base_url, "model": self.measurement.model,
                "fingerprint": self.toolchain.fingerprint, "target": self.toolchain.target,
                "bench_version": BENCH_VERSION, "workload": self.measurement.workload.to_dict(),
                "headline": s["headline"], "levels": s["levels"], "seconds": s["seconds"], "findings": self.findings,
                "roofline": self.roofline, "container": self.container, "load": self.load,
                "correctness": self.correctness, "memory": self.memory, "preflight": self.preflight}


def finding_records(result: RunResult) -> list[dict[str, object]]:
    """What judged a run, as finding records ({"kind", "id", "severity", "title", "evidence", "remedy", "path"}): the
    memory preflight's verdict and each matrix entry whose symptom the server's log printed."""
    path = result.recipe.get("source_path")
    out = [result.preflight] if result.preflight else []
    return out + [{"kind": "symptom", "id": hit.get("entry_id"), "severity": None,
                   "title": f"the server's log shows a known problem ({hit.get('symptom')})",
                   "evidence": [hit.get("line")], "remedy": "", "path": path} for hit in result.findings]


def samples_of(m: Measurement) -> Iterator[tuple[int, int, int, dict[str, object]]]:
    for i, sample in enumerate(m.warmup):
        yield 0, 0, i, sample.to_dict()
    for level in m.levels:
        for r, rnd in enumerate(level.rounds):
            for i, sample in enumerate(rnd.samples):
                yield level.concurrency, r, i, sample.to_dict()


def record(result: RunResult, comparison_id: int | None = None) -> RunRecord:
    """The ledger's record of a finished run (sparkdoctor/ledger/store.py RunRecord)."""
    from sparkdoctor.ledger import RunRecord

    m = result.measurement
    return RunRecord(recipe=result.recipe, base_url=m.base_url, model=m.model, server=result.server.to_dict(),
                     facts=result.toolchain.facts, fingerprint=result.toolchain.fingerprint, bench_version=BENCH_VERSION,
                     tool_version=__version__, workload=m.workload.to_dict(), summary=result.summary(),
                     findings=result.findings, samples=list(samples_of(m)), comparison_id=comparison_id, arm=result.arm,
                     memory=result.memory)


def stored_run(ledger: Ledger | None, result: RunResult) -> dict[str, Any]:
    """The run as the ledger keeps it (Ledger.run()): read back when it was stored, else as it would be."""
    if ledger is not None and result.run_id is not None:
        found = ledger.run(result.run_id)
        if found is not None:
            return dict(found)
    return record(result).as_stored(result.run_id)


def resolved_recipe(recipe: Recipe) -> dict[str, object]:
    """What the ledger keeps of a recipe: name, the argv and env it ran with, the model, its source."""
    data = recipe.to_dict()
    return {k: data.get(k) for k in ("name", "format", "source_path", "fingerprint", "argv", "env", "model",
                                       "served_model_name", "workarounds", "params", "container") if k in data}
