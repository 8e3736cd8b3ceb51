"""Static capabilities of the target's FlashInfer and vLLM, read from their installed files.

probes/capabilities/ runs under the target's interpreter and reads source files (no import of
either package: that would cost seconds and may crash). Facts: capabilities = {id: {"value",
"evidence"}}; a package that is not installed contributes no ids, one whose layout the rules do
not recognise gives value None. The probe keeps derived facts in a per-interpreter cache file
(revalidated by file size + mtime), so a warm run only stats a few files.
"""

from __future__ import annotations

from pathlib import Path

from sparkdoctor.collect import Collector, CollectorError, Context
from sparkdoctor.targets.early import CAPABILITIES, capabilities_cache_file
from sparkdoctor.targets.local import TargetError, parse_json_probe, probe_entry
from sparkdoctor.targets.probe import PROBE as TARGET_PROBE
from sparkdoctor.targets.probe import Prestarted, probe_env

PROBE_TIMEOUT = 15.0
TARGET_TIMEOUT = 15.0  # the target probe's own limit (collect/targetenv.py)
PRESTART_KEY = "capabilities_probe_prestarted"


def run(ctx: Context) -> dict[str, object]:
    early = ctx.scratch.pop(PRESTART_KEY, None)
    if isinstance(early, Prestarted) and early.capabilities:
        shared = _from_target_probe(ctx, early)
        if shared is not None:
            return shared
    script = probe_entry(CAPABILITIES)
    cache = cache_file(ctx)
    args = ["--cache", str(cache)] if cache is not None else []
    try:
        # its compiled modules kept in our cache dir, as the target probe's (sparkdoctor.targets.probe)
        result = ctx.target.run_script(script, args, PROBE_TIMEOUT, env=probe_env(ctx.target, ctx.cache_dir))
        data = parse_json_probe(ctx.target, script, result)
    except TargetError as exc:
        raise CollectorError(str(exc)) from None
    caps = data.get("capabilities")
    if not isinstance(caps, dict):
        raise CollectorError("capabilities probe printed no 'capabilities' object")
    return {"capabilities": caps}


def _from_target_probe(ctx: Context, early: Prestarted) -> dict[str, object] | None:
    """The capabilities the target probe read in its own process (a local check). A target probe that
    did not answer is this collector's error too (the same line: nothing was read); None when it
    answered without them (its capabilities part failed): this collector then runs its own probe."""
    try:
        data = parse_json_probe(ctx.target, probe_entry(TARGET_PROBE), early.running.result(TARGET_TIMEOUT))
    except TargetError as exc:
        raise CollectorError(str(exc)) from None
    answer = data.get("capabilities_probe")
    if isinstance(answer, dict) and isinstance(answer.get("capabilities"), dict):
        return {"capabilities": answer["capabilities"]}
    return None


def cache_file(ctx: Context) -> Path | None:
    who = str((ctx.target.describe() or {}).get("python") or ctx.target.describe())
    path = capabilities_cache_file(None if ctx.cache_dir is None else str(ctx.cache_dir), who, ctx.use_cache)
    return None if path is None else Path(path)


# Reads installed files only: runs beside the target probe (for a local check, inside its process).
COLLECTOR = Collector("capabilities", run, timeout=20)
