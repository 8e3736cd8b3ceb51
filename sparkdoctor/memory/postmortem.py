"""Why a launch died: the kernel log of the run's window, the server's last lines, how it ended and the memory
sampled through the run, classified into one cause with its evidence and the setting that would have avoided it.

  oom-killed         the kernel's OOM killer chose the server (its pid is the victim of "Killed process PID")
  driver-no-memory   the NVIDIA driver failed an allocation (NVRM ... Out of memory [NV_ERR_NO_MEMORY]); on GB10
                     what the share and the rest of the box asked for went past the unified memory
  cuda-oom           the server itself reports CUDA out of memory (or vLLM refused: the KV cache or the share
                     does not fit)
  hang               hung-task reports, or a server alive that stopped answering
  crash              it died otherwise (a signal, an exit code, an Xid), with nothing pointing at memory
  unknown            nothing to go on
Read first to last: an OOM kill of the server outranks a driver failure, which outranks what the server said.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sparkdoctor.collect.hostroot import host_root
from sparkdoctor.collect.kernel_log import (
    KernelEvent,
    daemon_kills,
    parse,
    read_daemon_log,
    read_kernel_log,
)

CAUSES = ("oom-killed", "driver-no-memory", "cuda-oom", "hang", "crash", "unknown")
GIB = 2**30
MAX_LINES = 2000  # the server's last lines looked at (a traceback after the error can run to hundreds)
LOG_TAIL_BYTES = 512 * 1024
RISE_NEAR, RISE_BY, RISE_WINDOW_S, RISE_LAST = 0.95, 1.25, 10.0, 3  # "still rising when it died": _rose_to_the_end
LIMIT_NEAR = 0.8  # "at its cgroup's limit" (the limit counts the page cache and kernel memory the resident size does not)
_SERVER = [  # (what, pattern) over the server's last lines
    ("vllm-share-not-free", re.compile(r"Free memory on device .{0,80} is less than desired GPU memory utilization")),
    ("vllm-kv-too-small", re.compile(r"KV cache is needed, which is larger than the available KV cache memory|"
                                     r"No available memory for the cache blocks")),
    ("cuda-oom", re.compile(r"CUDA out of memory|CUDA error: out of memory|cudaErrorMemoryAllocation|OutOfMemoryError|"
                            r"CUDA driver error: out of memory")),
    ("unbalanced", re.compile(r"The memory capacity is unbalanced")),
    ("host-oom", re.compile(r"\bMemoryError\b|Cannot allocate memory")),
]
_ESTIMATE = re.compile(r"estimated maximum model length is (\d{1,12})")


@dataclass(frozen=True)
class Sample:
    """Memory at one moment of the run."""

    seconds: float  # since the launch
    available_bytes: int | None  # MemAvailable
    server_rss_bytes: int | None = None


@dataclass
class PostMortem:
    cause: str  # one of CAUSES
    summary: str
    evidence: list[str] = field(default_factory=list)  # "kernel: <line>", "server: <line>", "exit: ...", "memory: ..."
    avoid: str = ""  # the setting that would have avoided it
    victim: dict[str, int | str | None] | None = None  # {"pid", "name"} of the OOM killer's choice
    kernel: list[KernelEvent] = field(default_factory=list)  # every memory event of the window
    high_water_bytes: int | None = None  # the server's largest resident size seen
    lowest_available_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.cause not in CAUSES:  # a closed vocabulary: JSON consumers switch on it (docs/json.md)
            raise ValueError(f"post-mortem cause {self.cause!r} is not one of {', '.join(CAUSES)}")

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def classify(kernel_text: str = "", server_lines: list[str] | None = None, *, since: float | None = None,
             pids: set[int] | None = None, returncode: int | None = None, hung: bool = False,
             samples: list[Sample] | None = None, largest_utilization: float | None = None,
             memory: Mapping[str, object] | None = None, kernel_source: str | None = None,
             kernel_refused: list[str] | None = None, daemon_text: str = "") -> PostMortem:
    """The cause of a dead (or hung) launch. `since`: where the run's window starts in the kernel log (seconds
    since boot); `pids`: the server's processes; `returncode`: as subprocess gives it (-9: SIGKILL); `hung`: the
    server lived but stopped answering; `largest_utilization`: the preflight's, named in the advice; `memory`:
    the launcher's record of the run (serve/memwatch.py: its high-water mark outranks the thinned samples');
    `kernel_source`: the log `kernel_text` was read from, said when it holds nothing of the window; `kernel_refused`:
    why each log could not be read, when none could (then nothing the kernel alone says can be ruled out);
    `daemon_text`: the journal's lines of the user-space OOM killers (earlyoom, systemd-oomd), which the kernel log
    never holds."""
    events = parse(kernel_text, since)
    lines = [ln.rstrip() for ln in (server_lines or []) if ln.strip()][-MAX_LINES:]
    said = {what: ln for ln in lines for what, pattern in reversed(_SERVER) if pattern.search(ln)}
    pm = PostMortem("unknown", "nothing in the kernel log, the server's last lines or its exit says why it ended",
                    kernel=events)
    _memory(pm, samples or [], memory or {})
    limit = (memory or {}).get("cgroup_limit_bytes")
    rose = _rose_to_the_end(samples or [], pm.high_water_bytes, limit if isinstance(limit, int) else None)
    lower = (f"--gpu-memory-utilization {largest_utilization} (the largest the preflight found free)" if largest_utilization
             else "a lower --gpu-memory-utilization (sparkdoctor recipe check RECIPE --model PATH says how low)")
    kills = [e for e in events if e.kind == "oom-kill"]
    victim = next((e for e in kills if pids is None or e.pid in pids), None)
    daemons = daemon_kills(daemon_text, since)
    # earlyoom's bare stderr line in the server's own log (earlyoom started beside it, in its container or its script)
    early, early_from = next(((e, src) for src, found in (("journal", daemons), ("server", daemon_kills("\n".join(lines))))
                              for e in found if e.kind == "earlyoom-kill" and (pids is None or e.pid in pids)), (None, ""))
    oomd = [e for e in daemons if e.kind == "oomd-kill"]
    no_memory = [e for e in events if e.kind == "nvrm-no-memory"]
    exit_line = _exit(returncode)
    unread = (f"the kernel log could not be read ({'; '.join(kernel_refused)})"
              if kernel_refused and kernel_source is None else "")
    if victim is not None:
        pm.cause, pm.victim = "oom-killed", {"pid": victim.pid, "name": victim.name}
        whose = "the server" if pids is not None else "a process while the server ran"
        pm.summary = f"the kernel's OOM killer killed {whose} (pid {victim.pid}, {victim.name})"
        pm.evidence = [f"kernel: {victim.line}"] + [f"kernel: {e.line}" for e in no_memory[:2]]
        pm.avoid = f"{lower}, and stop what else holds memory first: the share and the rest of the box exceeded it"
        if victim.line.startswith("Memory cgroup out of memory"):  # its cgroup's limit, not the box, was reached
            pm.avoid = ("raise the memory limit of the cgroup it ran in (docker run --memory, systemd MemoryMax=), or size "
                        "the launch to it: sparkdoctor recipe check RECIPE --model PATH, run from inside that cgroup, says what fits")
    elif early is not None:  # earlyoom acts before the kernel's killer, from user space: no kernel line
        pm.cause, pm.victim = "oom-killed", {"pid": early.pid, "name": early.name}
        whose = "the server" if pids is not None else "a process while the server ran"
        pm.summary = f"earlyoom, a user-space OOM killer, killed {whose} (pid {early.pid}, {early.name}): memory ran low"
        pm.evidence = [f"{early_from}: {early.line}"]
        pm.avoid = (f"{lower}, and stop what else holds memory first; earlyoom kills at its own thresholds (-m/-s, 10% "
                    "of memory and swap free by default), before the kernel would")
    elif rose and _sigkill(returncode) and not kills:
        pm.cause = "oom-killed"
        pm.summary = ("the server was killed by SIGKILL with its memory at its high-water mark, still rising or at its "
                      "cgroup's limit: the OOM killer's way (the kernel log, unreadable or silent here, does not name the victim)")
        pm.evidence = [f"memory: {rose}"]
        pm.avoid = f"{lower}, and stop what else holds memory first; read the kernel log as root to confirm (sudo dmesg)"
    elif no_memory:
        pm.cause = "driver-no-memory"
        pm.summary = f"the NVIDIA driver ran out of memory ({len(no_memory)} NV_ERR_NO_MEMORY line(s) in the kernel log)"
        pm.evidence = [f"kernel: {e.line}" for e in no_memory[:3]]
        pm.avoid = (f"{lower}; for long prompts a smaller --max-num-batched-tokens (the prefill chunk); drop the page "
                    "cache and stop other GPU processes before the launch")
    elif said.keys() & {"cuda-oom", "vllm-kv-too-small", "vllm-share-not-free", "unbalanced"}:
        pm.cause = "cuda-oom"
        what = next(w for w in ("vllm-share-not-free", "vllm-kv-too-small", "unbalanced", "cuda-oom") if w in said)
        pm.summary = {"vllm-share-not-free": "vLLM refused to start: less memory is free than its --gpu-memory-utilization share",
                      "vllm-kv-too-small": "vLLM refused to start: one sequence of --max-model-len does not fit in its KV cache",
                      "unbalanced": "the server found memory held by other processes (a leftover server or container)",
                      "cuda-oom": "the server ran out of CUDA memory"}[what]
        pm.evidence = [f"server: {said[what]}"]
        estimate = _ESTIMATE.search(said[what])
        pm.avoid = {"vllm-share-not-free": lower, "vllm-kv-too-small": (f"--max-model-len {estimate.group(1)} (vLLM's own estimate of the longest that fits)" if estimate
                                              else "a shorter --max-model-len (recipe check --model names the longest that fits)"),
                    "unbalanced": "stop the leftover server or container that holds the memory (recipe check --model names it)",
                    "cuda-oom": "a smaller --max-num-seqs or --max-num-batched-tokens, or a lower --gpu-memory-utilization "
                                "that leaves the activations room"}[what]
    elif hung or any(e.kind == "hung-task" for e in events):
        hangs = [e for e in events if e.kind == "hung-task"]
        pm.cause, pm.summary = "hang", "the server stopped answering" + (f"; the kernel reported {len(hangs)} hung task(s)" if hangs else "")
        pm.evidence = [f"kernel: {e.line}" for e in hangs[:3]] or ["server: alive but not answering"]
        pm.avoid = ("--enforce-eager (no CUDA-graph capture or compile to stall in)"
                    + (f"; memory ran low during it: {lower}" if pm.lowest_available_bytes is not None and pm.lowest_available_bytes < 4 * GIB else ""))
        if not hangs and lines:  # nothing says it stalled: it may still have been starting when the wait ran out
            pm.evidence.append(f"server: its last line: {lines[-1]}")
            pm.avoid = ("a longer --ready-timeout if its last line shows it still starting (a first start compiles and "
                        f"loads for minutes); if it stalled there, {pm.avoid}")
    elif exit_line or said or any(e.kind == "xid" for e in events):
        pm.cause, pm.summary = "crash", f"the server died ({exit_line or 'no exit status'}) with nothing pointing at memory"
        pm.evidence = [f"kernel: {e.line}" for e in events if e.kind == "xid"][:3] + [f"server: {ln}" for ln in lines[-3:]]
        pm.avoid = "nothing memory-related; match its log against known problems: sparkdoctor explain LOG"
        if unread:  # the OOM killer and the driver speak only in the kernel log: unread, nothing is ruled out
            pm.summary = (f"the server died ({exit_line or 'no exit status'}); nothing in its own lines points at memory, "
                          f"but {unread}")
            pm.avoid = (("SIGKILL is what the kernel's OOM killer sends: " if _sigkill(returncode) else "")
                        + "read the kernel log as root (sudo dmesg | sparkdoctor explain) to see whether the OOM killer "
                          "chose it or the NVIDIA driver ran out of memory; match its log against known problems: "
                          "sparkdoctor explain LOG")
        if "host-oom" in said:  # its own line first: the traceback's last frame says nothing
            pm.summary = "the server could not allocate host memory"
            pm.evidence = [f"server: {said['host-oom']}"] + [e for e in pm.evidence if e != f"server: {said['host-oom']}"]
            pm.avoid = f"{lower}; or lift the server's own limit if it has one (ulimit -v, a container's --memory)"
    if exit_line:
        pm.evidence.append(f"exit: {exit_line}")
    if oomd and returncode is not None and pm.cause != "oom-killed":  # oomd names a cgroup, never a pid: said, not blamed
        pm.evidence += [f"journal: {e.line}" for e in oomd[:2]]
        pm.avoid += ("; systemd-oomd killed a cgroup while the server ran (above): if it was the server's, free memory "
                     "before the launch or exempt its unit (ManagedOOMMemoryPressure=auto)")
    if unread and f"but {unread}" not in pm.summary:
        pm.evidence.append(f"kernel: {unread}")
    elif kernel_source and not events:
        pm.evidence.append(f"kernel: {kernel_source} read: no memory event in the launch's window")
    if rose and pm.cause in ("oom-killed", "driver-no-memory", "crash") and f"memory: {rose}" not in pm.evidence:
        pm.evidence.append(f"memory: {rose}")
    if pm.high_water_bytes is not None:
        pm.evidence.append(f"memory: the server's high-water mark {pm.high_water_bytes / GIB:.2f} GiB resident")
    if pm.lowest_available_bytes is not None:
        pm.evidence.append(f"memory: MemAvailable fell to {pm.lowest_available_bytes / GIB:.2f} GiB during the run")
    return pm


def _exit(returncode: int | None) -> str | None:
    if returncode is None or returncode == 0:
        return None
    code = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else None
    if code is not None:
        try:
            return f"killed by {signal.Signals(code).name}"
        except ValueError:
            pass
    return f"exit code {returncode}"


def _sigkill(returncode: int | None) -> bool:
    return returncode in (-signal.SIGKILL, 128 + signal.SIGKILL)


def _memory(pm: PostMortem, samples: list[Sample], memory: Mapping[str, object]) -> None:
    rss = [s.server_rss_bytes for s in samples if s.server_rss_bytes is not None]
    avail = [s.available_bytes for s in samples if s.available_bytes is not None]
    high, low = memory.get("high_water_bytes"), memory.get("lowest_available_bytes")
    pm.high_water_bytes = high if isinstance(high, int) else max(rss) if rss else None
    pm.lowest_available_bytes = low if isinstance(low, int) else min(avail) if avail else None


def _rose_to_the_end(samples: list[Sample], high_water: int | None, limit: int | None = None) -> str:
    """A sentence when the server's memory was still rising when it died, or had reached its cgroup's limit: its peak
    (within RISE_NEAR of the high-water mark) among the last RISE_LAST samples (those after it can show the group
    already emptying), and at least RISE_BY above its resident size RISE_WINDOW_S before the peak, or at least
    LIMIT_NEAR of `limit` (the memory cgroup's limit: resident pages are not all it counts); "" otherwise."""
    seen = [s for s in samples if s.server_rss_bytes]
    if not seen or not high_water:
        return ""
    peak = max(range(len(seen)), key=lambda i: (seen[i].server_rss_bytes or 0, i))
    top = seen[peak]
    before = ([s for s in seen[:peak] if s.seconds <= top.seconds - RISE_WINDOW_S] or seen[:1])[-1]
    assert top.server_rss_bytes is not None and before.server_rss_bytes is not None
    at_limit = limit is not None and limit > 0 and top.server_rss_bytes >= LIMIT_NEAR * limit
    rising = len(seen) >= 2 and top.server_rss_bytes >= RISE_BY * before.server_rss_bytes
    if peak < len(seen) - RISE_LAST or top.server_rss_bytes < RISE_NEAR * high_water or not (rising or at_limit):
        return ""
    avail = f"; MemAvailable {top.available_bytes / GIB:.2f} GiB" if top.available_bytes is not None else ""
    of_limit = (f", {100 * top.server_rss_bytes / limit:.0f}% of its memory cgroup's limit of {limit / GIB:.2f} GiB"
                if at_limit and limit else "")
    how = (f"rose from {before.server_rss_bytes / GIB:.2f} GiB to {top.server_rss_bytes / GIB:.2f} GiB (its high-water "
           f"mark) between {before.seconds:.1f} s and {top.seconds:.1f} s" if rising else
           f"stood at {top.server_rss_bytes / GIB:.2f} GiB (its high-water mark) at {top.seconds:.1f} s")
    return f"the server's resident size {how}{of_limit}, just before it died{avail}"


def after_launch(error: object, since: float | None, root: Path | None = None, largest_utilization: float | None = None) -> PostMortem | None:
    """The post-mortem of a launch that died or never answered (a serve LaunchError with `returncode` or
    `not_ready`), from the kernel log since `since` (seconds since boot: /dev/kmsg, or the journal where that is
    refused, collect/kernel_log.read_kernel_log) and the server's last lines; None
    for a launch that never started (nothing ran to die)."""

    returncode, hung = getattr(error, "returncode", None), bool(getattr(error, "not_ready", False))
    if returncode is None and not hung:
        return None
    log = read_kernel_log(host_root() if root is None else root)
    lines = _log_end(getattr(error, "log_path", None)) or list(getattr(error, "log_tail", []) or [])
    samples = [Sample(t, avail, rss) for t, avail, rss in getattr(error, "samples", []) or []]
    signalled = _exit(returncode) in ("killed by SIGKILL", "killed by SIGTERM")  # how the OOM killers end a process
    return classify(log.text or "", lines, since=since, pids=getattr(error, "pids", None), returncode=returncode, hung=hung,
                    samples=samples, largest_utilization=largest_utilization, memory=getattr(error, "memory", None),
                    kernel_source=log.source, kernel_refused=log.refused,
                    daemon_text=(read_daemon_log(None if root is None else Path(root) == Path("/")) or "") if signalled else "")


def _log_end(path: str | os.PathLike[str] | None) -> list[str]:
    """The last LOG_TAIL_BYTES of the server's log (the launcher's 40-line tail can miss an error that a long
    traceback followed); [] when there is no such file."""
    if path is None:
        return []
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - LOG_TAIL_BYTES))
            return fh.read(LOG_TAIL_BYTES).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []


def finding(pm: PostMortem) -> dict[str, object]:
    """The post-mortem as a finding record ({"kind", "id", "severity", "title", "evidence", "remedy"}: JSON and SARIF
    like every finding); its id names the cause (postmortem-oom-killed, ...)."""
    return {"kind": "post-mortem", "id": f"postmortem-{pm.cause}", "severity": "error", "title": pm.summary,
            "evidence": list(pm.evidence), "remedy": pm.avoid or "nothing known"}


def one_line(pm: PostMortem) -> str:
    """The post-mortem as the clause a one-line error carries."""
    first = pm.evidence[0] if pm.evidence else "no evidence"
    seen = [f"the server's high-water mark {pm.high_water_bytes / GIB:.2f} GiB resident" if pm.high_water_bytes else "",
            f"MemAvailable fell to {pm.lowest_available_bytes / GIB:.2f} GiB" if pm.lowest_available_bytes is not None else ""]
    memory = "; ".join(x for x in seen if x)
    return (f"post-mortem: {pm.cause}: {pm.summary} ({first[:300]}){'; ' + memory if memory else ''}; "
            f"avoid it with: {pm.avoid or 'nothing known'}")
