"""The kernels collector: which probes a check needs, for which arch, with which ptxas; the cache
first, then the compiles (and the SASS read beside them), then the GPU runs; one verdict per probe.
The work itself lives in the sibling modules; this one only plans and wires it."""

from __future__ import annotations

import re
import tempfile
import threading
from collections.abc import Mapping
from contextlib import nullcontext
from pathlib import Path

from sparkdoctor.arch import ARCH_RE, arch_base, settle
from sparkdoctor.collector import Collector, Context
from sparkdoctor.kernels import assemble, gpu_run, sass, tools, verdict
from sparkdoctor.kernels.assemble import Job
from sparkdoctor.kernels.cache import Cache
from sparkdoctor.kernels.probes import Probe, load_probes

MAX_PARALLEL = 4


def target_arch(facts) -> tuple[str, str, str | None]:
    """(arch, source, note): the arch in use (detected, given or assumed; see sparkdoctor.arch)."""
    arch = settle(facts.arch)
    note = f"arch {arch['value']} assumed ({arch.get('why')})" if arch.get("source") == "assumed" else None
    return arch["value"], arch.get("source") or "given", note


def compile_arch(probe: Probe, target: str) -> tuple[str, str | None]:
    try:
        base = arch_base(target)
    except ValueError:
        return probe.home_arch, f"{target!r} is not a CUDA arch: compiled for {probe.home_arch}"
    if base in probe.family:
        return target, None
    return probe.home_arch, f"the target {target} is not {'/'.join(probe.family)}: compiled for {probe.home_arch}"


def selected_probes(probes: list[Probe], target: str) -> list[Probe]:
    base = arch_base(target) if ARCH_RE.match(target) else None
    return [p for p in probes if p.always or base in p.family]


def plain_sm12x_settings(env: dict[str, str], capabilities: Mapping[str, object] | None = None) -> list[tuple[str, str]]:
    """(setting, arch) for every plain 12.x entry (no a/f suffix) of the build arch-list variables,
    and a vLLM whose compiled kernels target plain sm_121 (a source build that lost the suffix)."""
    found = []
    for name in ("TORCH_CUDA_ARCH_LIST", "FLASHINFER_CUDA_ARCH_LIST"):
        for token in re.split(r"[;,\s]+", env.get(name, "")):
            match = re.fullmatch(r"(?:sm_)?(12)\.?(\d)([af]?)(\+PTX)?", token.strip(), re.IGNORECASE)
            if match and not match.group(3):
                arch = f"sm_12{match.group(2)}"
                if (f"{name}={env[name]}", arch) not in found:
                    found.append((f"{name}={env[name]}", arch))
    built = (capabilities or {}).get("vllm.cubin_archs")
    archs = built.get("value") if isinstance(built, dict) else None
    # Release wheels carry plain sm_120 SASS next to sm_120f on purpose; plain sm_121 only comes from
    # a Spark source build whose arch list lost its suffix.
    if isinstance(archs, list) and "sm_121" in archs:
        found.append((f"vLLM's compiled kernels target {', '.join(a for a in archs if a.startswith('sm_12'))}", "sm_121"))
    return found


def run(ctx: Context) -> dict[str, object]:
    if not ctx.kernels:
        return {}
    target, source, target_note = target_arch(ctx.facts)
    probes = selected_probes(load_probes(), target)
    toolkits = ctx.facts.toolkits
    usable, unusable = tools.usable_ptxas(toolkits) if toolkits is not None else ([], [])
    if not usable:
        why = ("ptxas unknown: the toolkits collector did not report" if toolkits is None
               else "no ptxas found" + (f" ({'; '.join(unusable)})" if unusable else ""))
        return {"kernels": {p.id: verdict.skipped(p, compile_arch(p, target)[0], why) for p in probes}}

    jobs, arch_notes = _plan(ctx, probes, usable, target, source, target_note)
    cache = Cache(ctx.cache_dir / "kernels" if ctx.cache_dir else None, read=ctx.use_cache)
    pending = cache.lookup(jobs)

    needs_gpu = any(j.purpose == "target" and gpu_run.matching_gpu(ctx.facts.gpus, j.arch) for j in jobs)
    folder = tempfile.TemporaryDirectory(prefix="sparkdoctor-kernels-") if pending or needs_gpu else nullcontext()
    with folder as name:
        workdir = Path(name) if name else None
        if pending and workdir is not None:
            _compile_phase(pending, workdir)
            cache.store(pending)
        gpu_run.gpu_phase(jobs, ctx, cache, workdir)
    return {"kernels": {p.id: verdict.entry(p, [j.record for j in jobs if j.probe is p], *arch_notes[p.id]) for p in probes}}


def _plan(ctx: Context, probes: list[Probe], usable: list[tools.Tool], target: str, source: str,
          target_note: str | None) -> tuple[list[Job], dict[str, tuple[str | None, str]]]:
    """Every job, in preference order per probe, and each probe's (arch note, arch source)."""
    settings: dict[str, str] = {}  # plain arch -> every setting that targets it: one diagnosis compile each
    for setting, plain in plain_sm12x_settings(ctx.facts.env or {}, ctx.facts.capabilities):
        settings[plain] = f"{settings[plain]} and {setting}" if plain in settings else setting
    disassemblers = {t.identity: tools.find_disassembler(t) for t in usable}
    jobs: list[Job] = []
    arch_notes: dict[str, tuple[str | None, str]] = {}
    for probe in probes:
        arch, note = compile_arch(probe, target)
        arch_notes[probe.id] = (note, "home") if note else (target_note, source)
        ordered = tools.preferred(usable, arch)
        for rank, tool in enumerate(ordered):
            jobs.append(Job(probe, tool, arch, "target", primary=rank == 0, disassembler=disassemblers[tool.identity]))
        for plain, setting in settings.items():
            if arch_base(plain) in probe.family and plain != arch:
                jobs.append(Job(probe, ordered[0], plain, "diagnosis", setting))
    return jobs, arch_notes


def _compile_phase(pending: list[Job], workdir: Path) -> None:
    """Compile every pending job, ≤ MAX_PARALLEL at once, and read the SASS of the preferred ptxas's
    cubins. The SASS read starts at once, beside the compiles (it is the slow part); it is redone
    without the failures only if some probe of its group did not compile."""
    # imported on use: check loads concurrent.futures only on the runs that get here
    from concurrent.futures import ThreadPoolExecutor

    groups: dict[tuple[str, str, str | None], list[Job]] = {}
    for job in pending:
        if job.purpose == "target" and job.primary:
            dis = job.disassembler.identity if job.disassembler else None
            groups.setdefault((job.ptxas.identity, job.arch, dis), []).append(job)
    hung: set[str] = set()
    lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=MAX_PARALLEL) as pool:
        early = {key: pool.submit(sass.read_sass, group, workdir, "all") for key, group in groups.items() if group[0].disassembler}
        list(pool.map(lambda j: assemble.compile_job(j, workdir, hung, lock), pending))
        for key, group in groups.items():
            compiled = [j for j in group if j.record["compiled"]]
            if not compiled:
                continue
            if key not in early:
                sass.apply_sass(compiled, None, "no nvdisasm or cuobjdump found")
            elif len(compiled) == len(group):
                sass.apply_sass(compiled, *early[key].result())
            else:
                sass.apply_sass(compiled, *sass.read_sass(compiled, workdir, "compiled"))
    for job in pending:
        if job.purpose == "target" and job.record["compiled"] and not job.primary:
            job.record["sass"] = "SASS not read: it is read for the preferred ptxas only (a disassembler call costs ~0.6 s)"


# capabilities (vLLM's build archs) finishes long before toolkits, so waiting on it costs nothing.
COLLECTOR = Collector("kernels", run, needs=("toolkits", "gpu", "target", "capabilities"), timeout=60)
