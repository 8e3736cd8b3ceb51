"""CuTe DSL compile probes: the target's own nvidia-cutlass-dsl compiles tiny sm_121a kernels.

Runs probes/cutedsl/ once under the target's interpreter. The probe tells from disk alone
(no import) whether nvidia-cutlass-dsl is there and whether its cache still holds the answer; only
then does it compile, each kernel in its own child process (a compiler that segfaults on one kernel
must not hide the other's result), both at once. So this collector needs only the arch, and starts
beside the target collector instead of after it. Results land in facts.kernels["cutedsl-nvfp4-mma"]
and ["cutedsl-e2m1-cvt"]:

  {"kind": "cutedsl", "status": ok|refused|fail|crash|error|skipped, "detail", "arch", "version",
   "build", "bundled_cuda", "admissible_archs", "instruction", "ms", "cached", "runs": []}

`runs` stays empty: these kernels are compiled, never launched. The cache is one file per
interpreter under <cache>/cutedsl/, read and written by the probe itself, keyed by everything that
decides the outcome (see the probe); only settled outcomes are kept, never a timeout or an error.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from sparkdoctor import proc
from sparkdoctor.arch import DEFAULT_ARCH
from sparkdoctor.collect import Collector, Context
from sparkdoctor.inputs import NUMBER_TOO_LONG, json_lines
from sparkdoctor.targets.local import probe_entry
from sparkdoctor.vocab import CUTEDSL_KERNELS

# The probe's first line, printed before it imports anything of its own or of the DSL: a probe killed before it
# is an interpreter that could not start, one killed after it the compiler (`--kernel` compiles in the probe).
STARTED = '{"started": "cutedsl"}'
COMPILE_TIMEOUT = 60.0  # per kernel, inside the probe (the kernels compile at the same time)
PROBE_MARGIN = 15.0  # the probe's own start, its disk reads and its children's exits
DIST_PREFIX = "nvidia-cutlass-dsl"


def probe_script() -> Path:
    return probe_entry("cutedsl")


def run(ctx: Context) -> dict[str, object]:
    arch = (ctx.facts.arch or {}).get("value") or DEFAULT_ARCH
    args = ["--arch", arch, "--timeout", f"{COMPILE_TIMEOUT:g}"]
    if ctx.cache_dir is not None:
        args += ["--cache", str(cache_file(ctx))]
        if not ctx.use_cache:
            args.append("--refresh")
    result = ctx.target.run_script(probe_script(), args, timeout=COMPILE_TIMEOUT + PROBE_MARGIN)
    # The target collector may have told the build already; the probe's own answer comes first.
    known_build = (ctx.facts.cutedsl or {}).get("active_build")
    return {"kernels": {kid: shape(interpret(kernel, arch, result), arch, known_build) for kid, kernel in CUTEDSL_KERNELS.items()}}


def cache_file(ctx: Context) -> Path:
    if ctx.cache_dir is None:
        raise ValueError("cutedsl.cache_file: the run has no cache folder")
    python = str((ctx.target.describe() or {}).get("python") or "")
    return ctx.cache_dir / "cutedsl" / f"{hashlib.sha256(python.encode()).hexdigest()[:24]}.json"


def shape(raw: dict[str, Any], arch: str, known_build: str | None) -> dict[str, object]:
    dists = raw.get("dists") or {}
    return {
        "kind": "cutedsl",
        "status": raw.get("status", "error"),
        "detail": raw.get("detail", ""),
        "arch": raw.get("arch") or arch,
        "version": raw.get("version") or dists.get(DIST_PREFIX),
        "build": None if raw.get("status") == "skipped" else raw.get("build") or known_build,
        "bundled_cuda": raw.get("bundled_cuda"),
        "admissible_archs": raw.get("admissible_archs"),
        "instruction": raw.get("instruction"),
        "ms": raw.get("ms"),
        "cached": bool(raw.get("cached")),
        "runs": [],
    }


def interpret(kernel: str, arch: str, result: proc.ProcResult) -> dict[str, object]:
    """The probe's JSON for this kernel when it printed one; otherwise the way its process ended, as evidence."""
    answers, too_long = json_lines(line for line in reversed((result.stdout or "").splitlines()) if line.strip().startswith("{"))
    for data in answers:
        if isinstance(data, dict) and data.get("kernel") == kernel:
            return data
    tail = [x.strip() for x in (result.stderr or "").splitlines() if x.strip()]
    last = f": {tail[-1][:300]}" if tail else ""
    started = STARTED in (x.strip() for x in (result.stdout or "").splitlines())
    ended = {"kernel": kernel, "arch": arch, "ms": round(result.seconds * 1000)}
    if result.signal and not started:  # e.g. `check --python X` where X is no working Python: no compiler ran
        return {**ended, "status": "error",
                "detail": f"could not run the target's Python: {result.describe_failure()} before the probe started{last}"}
    if result.signal:
        killer = proc.signal_name(result.signal)
        return {**ended, "status": "crash", "detail": f"the CuTe DSL compiler was killed by {killer}{last}"}
    if too_long:
        return {**ended, "status": "error", "detail": f"the compile probe's answer {NUMBER_TOO_LONG}"}
    return {**ended, "status": "error", "detail": f"compile probe gave no result: {result.describe_failure()}"}


# Only the arch (from the gpu collector, ~20 ms): the probe reads the install itself.
COLLECTOR = Collector("cutedsl", run, needs=("gpu",), timeout=90)
