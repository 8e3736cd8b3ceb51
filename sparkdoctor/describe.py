"""Plain-text descriptions of a Report, shared by every renderer (console, markdown, junit).

The words for the box (target, host, GPU, arch, driver, stack), the kernel probe rows and the one
summary line live here, free of rich, so each renderer says the same thing its own way and the
document renderers never import the terminal one.

Strings from a snapshot can be anything (a 25 MB kernel detail, a version of thousands of digits):
every renderer passes what it prints through clip(), so output stays bounded and fast; the JSON
report keeps the data whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sparkdoctor.vocab import Verdict

PASS, UNVERIFIED, FAIL, UNPROBEABLE = Verdict.pass_, Verdict.unverified, Verdict.fail, Verdict.unprobeable

FACT_CHARS = 500  # one fact-derived line (a probe detail is ~300)
PROSE_CHARS = 4000  # matrix prose (a summary paragraph)
VERDICT_WORD = {PASS: "PASS", UNVERIFIED: "UNVERIFIED", FAIL: "FAIL"}

SEVERITY_HEADING = {"error": "error", "warn": "warning", "info": "info"}
# The serving stack shown in the header, in the order a person reads it.
HEADER_PACKAGES = ("torch", "triton", "vllm", "flashinfer-python", "nvidia-cutlass-dsl")
GPU_HEALTH = (("clock_graphics_mhz", "{} MHz"), ("power_w", "{} W"), ("temperature_c", "{} C"), ("pstate", "P{}"))


def text_of(value: object) -> str:
    """str(value) that cannot raise (an int past Python's 4,300-digit limit does)."""
    if isinstance(value, str):
        return value
    try:
        return str(value)
    except ValueError:
        return f"<{type(value).__name__} too long to print>"


def clip(value: object, limit: int = FACT_CHARS) -> str:
    """At most `limit` characters, saying how long the whole was: `abc… (25000000 chars)`."""
    text = text_of(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} chars)"


def plural(n: int, word: str) -> str:
    if word == "info" or n == 1:
        return f"{n} {word}"
    return f"{n} {word[:-1] + 'ies' if word.endswith('y') else word + 's'}"


def describe_target(facts) -> str:
    t = facts.target
    if not t:
        return "unknown"
    where = t.get("python") or t.get("container") or t.get("kind") or "unknown"
    parts = [str(where)]
    if t.get("kind") == "container":
        c = facts.container or {}
        image = ", ".join(str(x) for x in (c.get("image"), f"image {c['fingerprint']}" if c.get("fingerprint") else None) if x)
        parts.insert(0, f"container {t.get('container') or c.get('name') or '?'}" + (f" ({image})" if image else ""))
        if t.get("os"):
            parts.append(str(t["os"]))
    if t.get("version"):
        parts.append(f"Python {t['version']}")
    if t.get("chosen_by"):
        parts.append(f"chosen by {t['chosen_by']}")
    return " · ".join(parts)


def _gib(kib) -> str:
    try:
        return f"{kib / 1048576:.1f} GiB" if isinstance(kib, (int, float)) else "?"
    except OverflowError:  # a snapshot's 5,000-digit number
        return "?"


def describe_health(facts) -> str | None:
    """One line of host health (None when it was not observed)."""
    h = facts.host_health
    if not isinstance(h, dict):
        return None
    mem, psi, parts = h.get("memory") or {}, h.get("pressure") or {}, []
    if mem:
        parts.append(f"MemAvailable {_gib(mem.get('available_kib'))} of {_gib(mem.get('total_kib'))}")
        if mem.get("swap_used_kib"):
            parts.append(f"swap used {_gib(mem['swap_used_kib'])}")
        if mem.get("reclaimable_kib") is not None:
            parts.append(f"page cache {_gib(mem['reclaimable_kib'])} reclaimable")
        if mem.get("hugetlb_kib"):
            parts.append(f"huge pages {_gib(mem['hugetlb_kib'])} set aside")
    room = h.get("memory_limit") or {}
    if isinstance(room.get("bytes"), int):
        parts.append(f"memory cgroup {room.get('cgroup')} limited to {_gib(room['bytes'] // 1024)}")
    if psi.get("some_avg10") is not None:
        parts.append(f"PSI some {psi['some_avg10']:.1f}%")
    for gpu in h.get("gpus") or []:
        bits = [form.format(gpu[key]) for key, form in GPU_HEALTH if gpu.get(key) is not None]
        if bits:
            parts.append(f"GPU{gpu.get('index', '')} " + " ".join(bits))
    if h.get("kernel_source"):  # which kernel log the NVRM, OOM and hung-task counts come from, or why none
        parts.append(f"kernel log {h['kernel_source']}")
    elif h.get("kernel_refused"):
        parts.append(f"kernel log not read ({'; '.join(str(r) for r in h['kernel_refused'])})")
    if not h.get("live", True):
        parts.append("from a snapshot: not judged")
    return " · ".join(parts) or "unknown"


def describe_host(facts) -> str:
    h = facts.host
    if not h:
        return "unknown"
    parts = [h.get("machine"), h.get("os"), f"kernel {h['kernel']}" if h.get("kernel") else None]
    return " · ".join(str(p) for p in parts if p) or "unknown"


def describe_gpus(facts) -> str:
    if facts.gpus is None:
        return "unknown (not observed)"
    if not facts.gpus:
        memory = (facts.host_health or {}).get("memory") if isinstance(facts.host_health, dict) else None
        if isinstance(memory, dict) and memory.get("unified") is True:  # the torn driver of an upgrade looks like this
            return "none detected, though a GB10 is on the PCI bus (10de:2e12): is the NVIDIA driver loaded?"
        return "no GPU"
    out = []
    for g in facts.gpus:
        bits = []
        if g.get("cc"):
            bits.append(f"cc {g['cc']}")
        if g.get("arch"):
            bits.append(str(g["arch"]))
        mem = g.get("memory_total_mib")
        if isinstance(mem, (int, float)):
            bits.append(f"{mem / 1024:.1f} GiB{' unified' if g.get('unified') else ''}")
        name = str(g.get("name") or "unnamed GPU")
        out.append(f"{name} ({', '.join(bits)})" if bits else name)
    return "; ".join(out)


def describe_arch(facts) -> str:
    arch = facts.arch or {}
    value, source = arch.get("value"), arch.get("source")
    if value and source == "given":
        detected = arch.get("detected")
        if detected:
            return f"{value} (given via --arch; detected {detected})"
        return f"{value} (given via --arch{'; no GPU detected' if facts.gpus == [] else ''})"
    if value and source == "assumed":
        return f"{value} (assumed: {arch.get('why') or 'not detected'}; pass --arch to choose)"
    if value:
        return f"{value} ({source or 'source unknown'})"
    if source == "none":
        return "none (no GPU detected, no --arch given)"
    return "unknown"


def describe_driver(facts) -> str:
    d = facts.driver
    if d is None:
        return "unknown (not observed)"
    if not d.get("version"):
        return "no NVIDIA driver"
    text = str(d["version"])
    if d.get("cuda"):
        text += f" · CUDA {d['cuda']}"
    return text


def describe_box(facts) -> list[tuple[str, str]]:
    """(label, description) rows of the box: target, host, GPU, arch, driver and its health when observed."""
    health = describe_health(facts)
    return [("target", describe_target(facts)), ("host", describe_host(facts)), ("GPU", describe_gpus(facts)),
            ("arch", describe_arch(facts)), ("driver", describe_driver(facts)), *([("health", health)] if health else [])]


def describe_package(facts, name: str) -> str:
    """`2.13.0+cu130 (CUDA 13.0)`, `not installed`, `no metadata (3.8.0 imports)`, or `unknown`."""
    if facts.packages is None:
        return "unknown"
    pkg = facts.package(name)
    if pkg is None:  # a package that imports with no .dist-info (no-metadata-*): pip does not list it, Python imports it
        found = facts.unlisted(name)
        return f"no metadata ({found.get('version') or 'a version'} imports)" if found else "not installed"
    text = str(pkg.get("version"))
    if name == "torch":
        if pkg.get("cuda"):
            text += f" (CUDA {pkg['cuda']})"
        else:  # no CUDA read: a CPU build only when torch/version.py said so
            text += " (build unknown)" if pkg.get("build_error") else " (CPU build)"
    if name == "nvidia-cutlass-dsl" and facts.cutedsl and facts.cutedsl.get("active_build"):
        text += f" [{facts.cutedsl['active_build']}]"
    modified = pkg.get("files_modified") or []
    if modified:
        text += f" ({plural(len(modified), 'file')} modified)"
    return text


def tracked_stack(facts) -> list[tuple[str, str]]:
    """(name, description) for the header packages: the serving stack at a glance."""
    return [(name, describe_package(facts, name)) for name in HEADER_PACKAGES]


def _ptxas_label(facts, path: object, version: object) -> str:
    tools = facts.toolkits or []
    for t in tools:
        if t.get("path") == path and t.get("source"):
            twins = [u for u in tools if u.get("source") == t["source"] and u.get("version") == t.get("version")]
            where = f" {path}" if len(twins) > 1 else ""  # two system ptxas of one version: say which
            return f"{version or '?'} {t['source']}{where}"
    if path:
        p = Path(str(path))
        hint = p.parent.parent.name or p.parent.name  # .../triton/backends/nvidia/bin/ptxas -> nvidia
        return f"{version or '?'} {hint}".strip()
    return str(version or "?")


def kernel_rows(facts) -> list[dict[str, Any]]:
    """One row per (probe, ptxas) run; a probe with no runs gets one row (run=False) with its status.

    Keys: probe, kind, status, detail, run, ptxas, arch, compiled, sass_ok, sass, ran, verified, note,
    ms, cached, first. compiled/sass_ok/ran/verified are True / False / None (None = not attempted or
    not known); note is the run's compile error or run note, first line only.
    """
    rows: list[dict[str, Any]] = []
    for probe_id, result in sorted((facts.kernels or {}).items()):
        if not isinstance(result, dict):  # an older or foreign producer: show what is there
            result = {"status": str(result)}
        runs = [r for r in result.get("runs") or [] if isinstance(r, dict)]
        base = {
            "probe": probe_id,
            "kind": result.get("kind") or "",
            "status": result.get("status") or "unknown",
            "detail": _first_line(result.get("detail")),
        }
        if not runs:
            rows.append({**base, "run": False, "ptxas": "", "arch": result.get("arch") or "",
                         "compiled": result.get("compiled"), "sass_ok": None, "sass": None, "ran": result.get("ran"),
                         "verified": result.get("verified"), "note": "", "ms": result.get("ms"), "cached": None,
                         "first": True})
            continue
        for i, run in enumerate(runs):
            rows.append({**base, "run": True, "ptxas": _ptxas_label(facts, run.get("ptxas"), run.get("ptxas_version")),
                         "arch": run.get("arch") or result.get("arch") or "",
                         **{key: run.get(key) for key in ("compiled", "sass_ok", "sass", "ran", "verified")},
                         "note": _first_line(run.get("error") or run.get("run_note")), "ms": run.get("ms"),
                         "cached": run.get("cached"), "first": i == 0})
    return rows


def _first_line(value: object) -> str:
    text = text_of(value or "").strip()
    return text.splitlines()[0] if text else ""


def verdict(report) -> str:
    """`fail-on error → PASS (exit 0)`; UNVERIFIED (still exit 0) when nothing fails but a kernel probe could not run."""
    code, word = report.exit_code(), report.verdict()
    if word == UNPROBEABLE:
        return f"target could not be probed (exit {code})"
    return f"fail-on {report.fail_on} → {VERDICT_WORD[word]} (exit {code})"


def arch_assumed(facts) -> str | None:
    """`arch assumed (no GPU detected)` when the arch under evaluation is the sparkdoctor.arch default."""
    arch = facts.arch or {}
    if arch.get("source") != "assumed":
        return None
    return f"arch assumed ({text_of(arch.get('why') or 'not detected')})"


def summary_line(report) -> str:
    """`2 errors, 1 warning, 0 info · 31 entries checked, 3 unknown · evidence: 1 checked, 2 reported ·
    fail-on error → FAIL (exit 1)` (how many findings rest on each evidence level, those with any),
    with `1 kernel probe unverified` and `arch assumed (why)` before the verdict when they apply."""
    c = report.counts()
    counted = len(report.judged())  # the JSON summary's `evaluated`
    parts = [
        ", ".join(plural(c.get(s, 0), SEVERITY_HEADING[s]) for s in ("error", "warn", "info")),
        f"{plural(counted, 'entry')} checked, {len(report.unknown)} unknown",
    ]
    if report.ignored:
        parts[-1] += f", {len(report.ignored)} ignored"
    if report.findings:
        parts.append("evidence: " + ", ".join(f"{n} {level}" for level, n in report.evidence_counts().items() if n))
    if report.unverified:
        parts.append(f"{plural(len(report.unverified), 'kernel probe')} unverified")
    assumed = arch_assumed(report.facts)
    if assumed:
        parts.append(clip(assumed, 200))
    parts.append(verdict(report))
    return " · ".join(parts)


def unverified_line(report) -> str:
    """Why a clean report is not a PASS: `kernel probe e2m1-cvt could not run (error): no ptxas found`."""
    return "; ".join(f"kernel probe {u.probe} could not run ({u.status}): {_first_line(u.detail) or 'no detail'}" for u in report.unverified)


def first_false(ev) -> str:
    """Why an entry is clear: the first condition that does not hold."""
    return next((c.evidence for c in ev.checks if c.result is False), "")


def stack_also_includes(stack) -> str | None:
    """The stack's packages this box lacks, said apart from the differences (not a list to install)."""
    if not stack.missing:
        return None
    return f"the stack also includes {', '.join(stack.missing)} (not installed here)"


def stack_gap(stack) -> str:
    """`2 differences, 1 package not installed`, `matches`, or `none of its packages installed`."""
    if not stack.present:
        return "none of its packages installed"
    if stack.matches:
        return "matches"
    bits = [plural(len(stack.differences), "difference")] if stack.differences else []
    if stack.missing:
        bits.append(f"{plural(len(stack.missing), 'package')} not installed")
    return ", ".join(bits)
