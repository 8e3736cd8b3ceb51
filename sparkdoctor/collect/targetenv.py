"""The target's Python environment: interpreter, host, packages and their integrity, CuTe DSL build, env.

All of it comes from one probe (probes/target_env/) run by the TARGET's interpreter, so the
sparkdoctor process never imports what it inspects. File hashes are cached per interpreter under
<cache>/hashes/, which keeps a warm check fast; `--no-cache` makes the probe re-hash everything.
A sys.path folder the probe could not list (no permission) makes packages None: what it holds is
unknown, not absent, and every entry that needs packages reads as unknown. Raw observations other
collectors need (ptxas copies inside site-packages, pip config files, the
target's PATH) go to ctx.scratch, not into Facts.
"""

from __future__ import annotations

from collections.abc import Mapping

from sparkdoctor.collect import Collector, CollectorError, Context
from sparkdoctor.collect.host_os import local_host
from sparkdoctor.targets.local import Target, TargetError, parse_json_probe, probe_entry
from sparkdoctor.targets.probe import PROBE, Prestarted, prestart

PROBE_TIMEOUT = 15.0
SCRATCH_KEYS = ("ptxas_candidates", "pip_config_files", "path_env")
PRESTART_KEY = "target_probe_prestarted"
BASE_FIELDS = ("name", "version", "location")


def start_probes(target: Target, no_cache: bool) -> dict[str, Prestarted]:
    """The target probe (for a local target answering for the capabilities probe too) and the GPU helper, started
    before the collectors, by scratch key: what a CheckRequest's `prestarted` carries (check, recipe check)."""
    from sparkdoctor.collect import capabilities, gpu
    from sparkdoctor.targets.choose import start_target_probe

    probe = start_target_probe(target, no_cache)
    prestarted = {PRESTART_KEY: probe}
    if probe.capabilities:  # a local target: one probe process answers for both collectors
        prestarted[capabilities.PRESTART_KEY] = probe
        gpu.prestart()  # the early helper, or one started now, beside the probe
    return prestarted


def run(ctx: Context) -> dict[str, object]:
    early = ctx.scratch.pop(PRESTART_KEY, None)
    if not isinstance(early, Prestarted):
        early = prestart(ctx.target, ctx.cache_dir, ctx.use_cache)
    if early.warning:
        ctx.facts.add_error("target", early.warning)
    script = probe_entry(PROBE)
    try:
        data = parse_json_probe(ctx.target, script, early.running.result(PROBE_TIMEOUT))
    except TargetError as exc:
        raise CollectorError(str(exc)) from None
    packages = data.get("packages")
    if not isinstance(packages, dict):
        raise CollectorError(f"probe {PROBE} reported no package list")
    for key, kind, name in (("target", dict, "object"), ("host", dict, "object"), ("errors", list, "list"),
                            ("unlisted", list, "list")):
        if not isinstance(data.get(key) or kind(), kind):
            raise CollectorError(f"probe {PROBE} printed JSON of the wrong shape: field {key!r} is no {name}")

    for item in data.get("errors") or []:
        if isinstance(item, dict) and item.get("error"):
            ctx.facts.add_error(str(item.get("collector") or "target_env"), str(item["error"]))
    for key in SCRATCH_KEYS:
        if key in data:
            ctx.scratch[key] = data[key]

    unlisted = [u for u in data.get("unlisted") or [] if isinstance(u, dict)]
    for item in unlisted:
        ctx.facts.add_error("target", f"cannot list {item.get('path')}: {item.get('error')}; installed packages are unknown")

    target = dict(ctx.facts.target or {})
    target.update(data.get("target") or {})
    for key, value in (ctx.facts.target or {}).items():  # how the target was chosen stays as given
        if key in ("kind", "python", "chosen_by", "container", "engine"):
            target[key] = value
    host = data.get("host")
    if not getattr(ctx.target, "shares_files", True):  # a container: its OS is the target's, the host is ours
        target["os"] = (host or {}).get("os") if isinstance(host, dict) else None
        host = local_host()
    found = {
        "target": target,
        "host": host,
        "packages": None if unlisted else {name: _package(pkg) for name, pkg in packages.items() if isinstance(pkg, dict)},
        "cutedsl": data.get("cutedsl"),
        "flashinfer_kernels": data.get("flashinfer_kernels") if isinstance(data.get("flashinfer_kernels"), dict) else None,
        "env": data.get("env") if isinstance(data.get("env"), dict) else None,
        "modules_without_metadata": data.get("modules_without_metadata") if isinstance(data.get("modules_without_metadata"), list) else None,
    }
    _refuse_wrong_shapes(found)
    from sparkdoctor.facts_shapes import fit

    return {key: fit(key, value) for key, value in found.items()}  # a snapshot's bounds: what is judged is what is saved


def _refuse_wrong_shapes(found: Mapping[str, object]) -> None:
    """The shapes a snapshot must have (sparkdoctor/facts_shapes.py), asked of what the target printed: an interpreter
    that exits 0 with a JSON object of another shape (a .pth file can print a last line) is a target that could not be
    probed (exit 3), not an internal error further on."""
    from sparkdoctor.facts_shapes import ShapeError, check_field

    for key, value in found.items():
        try:
            check_field(key, value, lengths=False)  # a huge version from a real METADATA: clipped by fit(), not refused
        except ShapeError as exc:
            raise CollectorError(f"probe {PROBE} printed JSON of the wrong shape: {exc}") from None


def _package(pkg: Mapping[str, object]) -> dict[str, object]:
    """Tracked packages keep their integrity fields; the rest carry only name, version and location, and why the
    METADATA could not be read (name and version come from the folder name) or where a RECORD is missing."""
    if "integrity" in pkg or "cuda" in pkg or "build_error" in pkg:
        return dict(pkg)
    return {**{key: pkg.get(key) for key in BASE_FIELDS}, **{k: pkg[k] for k in ("metadata_error", "no_record") if pkg.get(k)}}


COLLECTOR = Collector("target", run, timeout=PROBE_TIMEOUT + 5)
