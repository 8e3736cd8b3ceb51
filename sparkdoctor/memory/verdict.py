"""The verdict before anything launches: fits / fits with these settings / does not fit.

vLLM's start, as the verdict models it: the engine asks for its share (--gpu-memory-utilization of the pool:
MemTotal on unified memory, the GPU's memory elsewhere) and refuses to start when the free memory is less; inside
the share it loads the weights, keeps its reserve, and needs room for ONE sequence of --max-model-len in its
KV pool (--kv-cache-memory-bytes fixes the pool instead of the share). On GB10 an allocation past what is free
does not always fail cleanly: it can end as `NV_ERR_NO_MEMORY` in the kernel log or a frozen box, which is
why the verdict is taken before the launch.

- fits: the share is free now and the launch fits inside it;
- fits with these settings: the largest --gpu-memory-utilization the free memory allows now, and inside it the
  largest --max-num-seqs and --max-model-len (at most the recipe's, in whole KV blocks) that still start;
- does not fit: by how much, and what holds the rest (processes on the GPU, containers, page cache).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sparkdoctor.memory.have import LARGE, Have
from sparkdoctor.memory.need import GIB, OUTSIDE, Need

FITS, FITS_WITH, NO_FIT, UNKNOWN = "fits", "fits-with", "does-not-fit", "unknown"
PAGE_CACHE = "clean page cache (reclaimable)"
SHORTEST = 256  # the shortest --max-model-len proposed: below it a server is of little use
DROP_CACHES = "`sync; echo 3 | sudo tee /proc/sys/vm/drop_caches`"  # quoted: a view prints the command whole


@dataclass(frozen=True)
class Holding:
    what: str  # "pid 4242 (python3) holds /dev/nvidia0", "container 3f2a... (no process on the GPU)", "page cache"
    bytes: int
    remedy: str


@dataclass
class Verdict:
    outcome: str  # FITS | FITS_WITH | NO_FIT | UNKNOWN
    need: Need
    have: Have
    share_bytes: int = 0  # what the launch asks for
    least_bytes: int = 0  # the least it starts in (weights, reserve, one full-length sequence)
    usable_bytes: int | None = None
    short_bytes: int = 0  # how much more is needed (does-not-fit; or the share over what is free)
    largest_utilization: float | None = None  # the largest --gpu-memory-utilization that fits now
    full_length_seqs: int = 0  # sequences of --max-model-len the KV pool holds at once
    max_model_len: int | None = None  # the length judged: the recipe's, or what vLLM fits `auto` to in this share
    settings: dict[str, float] = field(default_factory=dict)  # fits-with: the flags to launch with (ints but the utilization)
    holding: list[Holding] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    remedies: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"outcome": self.outcome, "share_bytes": self.share_bytes, "least_bytes": self.least_bytes,
                "usable_bytes": self.usable_bytes, "short_bytes": self.short_bytes,
                "largest_gpu_memory_utilization": self.largest_utilization, "full_length_seqs": self.full_length_seqs,
                "max_model_len": self.max_model_len,
                "settings": dict(self.settings), "holding": [vars(h) for h in self.holding],
                "reasons": list(self.reasons), "remedies": list(self.remedies),
                "need": self.need.to_dict(), "have": self.have.to_dict()}


def gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def judge(need: Need, have: Have) -> Verdict:
    """The verdict for `need` on the box `have` describes."""
    verdict = Verdict(UNKNOWN, need, have, least_bytes=need.least(), usable_bytes=have.usable_bytes)
    pool, usable = have.pool_bytes, have.usable_bytes
    verdict.holding = holdings(have)
    if not pool or usable is None:
        verdict.reasons.append("the memory of this box is unknown (no MemTotal and MemAvailable, no NVML answer): "
                               + "; ".join(have.errors or ["nothing to judge against"]))
        return verdict
    if not have.unified and have.gpu_devices:  # vLLM's ranks each take one GPU, in order, each its share of it
        ranks = min(need.ranks, len(have.gpu_devices))
        taken = have.gpu_devices[:ranks]
        pool, usable = ranks * min(t for t, _ in taken), ranks * min(t - u for t, u in taken)
        verdict.usable_bytes = usable
        if len(have.gpu_devices) > 1 or need.ranks > 1:
            verdict.reasons.append(f"judged on {ranks} of the {len(have.gpu_devices)} visible GPU(s), one a rank (tensor x pipeline "
                                   f"parallel {need.ranks}), as the tightest of them: {gib(pool // ranks)} each, "
                                   f"{gib(usable // ranks)} free")
    if have.unified and need.outside_bytes:  # offloaded to "host" memory: on one pool, taken before the share
        usable = max(0, usable - need.outside_bytes)
        verdict.usable_bytes = usable
        verdict.reasons.append(f"{gib(need.outside_bytes)} of host memory outside the share ("
                               + ", ".join(p.source.split(":")[0] for p in need.parts if p.name in OUTSIDE)
                               + "): on unified memory the same pool, so the share has that much less")
    util = float(need.setting("gpu_memory_utilization"))
    length, seqs = int(need.setting("max_model_len")), int(need.setting("max_num_seqs"))
    fixed = need.fixed_kv_bytes is not None
    verdict.share_bytes = verdict.least_bytes if fixed else int(util * pool)
    verdict.largest_utilization = min(1.0, math.floor(usable / pool * 100) / 100)
    if need.auto_length:  # vLLM fits the length to its KV pool; it fails only when not one block fits
        room = need.fixed_kv_bytes if fixed else verdict.share_bytes - need.fixed_bytes(seqs)
        fitted = _longest(need, room or 0, length)
        if fitted >= need.block_size:
            if fitted < length:
                verdict.reasons.append(f"--max-model-len auto: vLLM fits the length to its KV pool, {fitted} tokens here "
                                       f"(the model's own is {length})")
            length = fitted
            verdict.least_bytes = need.least(max_model_len=fitted)
    verdict.max_model_len = length
    inside = verdict.least_bytes <= verdict.share_bytes
    if fixed and need.kv_per_seq(length) + need.block_bytes > (need.fixed_kv_bytes or 0):  # vLLM's check: one sequence
        inside = False
    # vLLM's GPU worker checks utilization x total against free memory at start (v1/worker/utils.py request_memory),
    # with a fixed pool too; its CPU worker (a box without a GPU) skips the check when the pool is fixed
    asked = int(util * pool) > usable and (not fixed or have.has_gpu)
    free = verdict.share_bytes <= usable and not asked
    if inside and free:
        verdict.outcome = FITS
        verdict.full_length_seqs = _full_length(need, verdict.share_bytes, seqs, length)
        _page_cache_note(verdict)
        return verdict
    if fixed and asked:
        verdict.reasons.append(f"vLLM checks at start that --gpu-memory-utilization {util:g} of {gib(pool)} "
                               f"({gib(int(util * pool))}) is free, --kv-cache-memory-bytes or not, and {gib(usable)} is free "
                               f"now ({_free_words(have)}): vLLM refuses to start")
    elif not free:
        verdict.reasons.append(f"the launch asks for {gib(verdict.share_bytes)} "
                               + ("(weights, reserve and its fixed KV pool)" if fixed else f"({util:g} of {gib(pool)})")
                               + f" and {gib(usable)} is free now ({_free_words(have)})")
    if not inside and fixed:
        verdict.reasons.append(f"one sequence of {length} tokens needs {gib(need.kv_per_seq(length) + need.block_bytes)} of KV cache and "
                               f"--kv-cache-memory-bytes gives {gib(need.fixed_kv_bytes or 0)}: vLLM refuses to start")
    elif not inside:
        verdict.reasons.append(f"inside its {gib(verdict.share_bytes)} the launch needs {gib(verdict.least_bytes)}: "
                               f"weights {gib(need.part('weights'))}, reserve {gib(need.fixed_bytes(seqs) - need.part('weights'))}, "
                               f"one sequence of {length} tokens {gib(need.kv_per_seq(length))}")
    _propose(verdict, need, pool, usable, length, seqs)
    return verdict


def _free_words(have: Have) -> str:
    if not have.unified:
        return "the GPU's memory less what NVML says is used"
    limit = f", within this cgroup's {gib(have.limit_bytes)} limit" if have.limit_bytes is not None else ""
    return (f"MemAvailable {gib(have.available_bytes or 0)} less the OS reserve {gib(have.os_reserve_bytes)} and the server's own "
            f"processes {gib(have.server_processes_bytes)}{limit}")


def _full_length(need: Need, share: int, seqs: int, length: int) -> int:
    pool = need.fixed_kv_bytes if need.fixed_kv_bytes is not None else share - need.fixed_bytes(seqs)
    per = need.kv_per_seq(length)
    return max(0, int((pool - need.block_bytes) // per)) if per > 0 else 0


def _page_cache_note(verdict: Verdict, share: int | None = None) -> None:
    have, share = verdict.have, verdict.share_bytes if share is None else share
    if have.unified and have.free_bytes is not None and have.page_cache_bytes and share > have.free_bytes - have.os_reserve_bytes:
        verdict.remedies.append(f"only {gib(have.free_bytes)} is free without reclaiming; {gib(have.page_cache_bytes)} is clean page "
                                f"cache the kernel must give back while the launch allocates: drop it first ({DROP_CACHES})")


def _propose(verdict: Verdict, need: Need, pool: int, usable: int, length: int, seqs: int) -> None:
    """fits-with (the largest settings that start now) or does-not-fit (by how much)."""
    fixed = need.fixed_kv_bytes is not None
    share = usable if fixed else int((verdict.largest_utilization or 0) * pool)  # the largest share free now (docs/memory.md)
    shortest = min(length, SHORTEST)
    base = need.fixed_bytes(0)
    kv_short = need.kv_per_seq(shortest) + need.block_bytes  # the smallest KV pool that still starts (fixed or not)
    room = share - base - kv_short
    per_seq = need.sampler_bytes_per_seq
    seqs2 = seqs if per_seq * seqs <= room else (room // per_seq if per_seq else seqs)
    if seqs2 < 1 or room < 0:
        least = need.fixed_bytes(1) + kv_short
        verdict.outcome = NO_FIT
        verdict.short_bytes = max(1, least - usable)
        verdict.reasons.append(f"even at --max-num-seqs 1 and --max-model-len {shortest} it needs {gib(least)}, "
                               f"{gib(verdict.short_bytes)} more than is free now")
        # MemAvailable already counts the page cache: dropping it brings nothing nearer (it is said once the rest fits)
        verdict.remedies += [h.remedy for h in verdict.holding if h.bytes >= verdict.short_bytes // 4 and h.what != PAGE_CACHE][:5]
        return
    if fixed:
        kv = min(int(need.fixed_kv_bytes or 0), share - need.fixed_bytes(seqs2))
        length2 = _longest(need, kv, length)
        util2 = min(float(need.setting("gpu_memory_utilization")), verdict.largest_utilization or 0.0)
        # the utilization beside a fixed pool only where vLLM's GPU worker checks it (its CPU worker does not)
        verdict.settings = {**({"gpu_memory_utilization": util2} if verdict.have.has_gpu else {}), "kv_cache_memory_bytes": kv,
                            "max_model_len": length2, "max_num_seqs": int(seqs2)}
    else:
        length2 = _longest(need, share - need.fixed_bytes(seqs2), length)
        verdict.settings = {"gpu_memory_utilization": round(share / pool, 2), "max_model_len": length2, "max_num_seqs": int(seqs2)}
    verdict.outcome = FITS_WITH
    verdict.short_bytes = max(0, verdict.share_bytes - usable)
    verdict.full_length_seqs = _full_length(need, share, int(seqs2), length2) if not fixed else 0
    flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in verdict.settings.items())
    verdict.remedies.append(f"launch with {flags}")
    verdict.remedies += [h.remedy for h in verdict.holding if h.what != PAGE_CACHE][:3]
    _page_cache_note(verdict, share)  # the page cache, once and only when the proposal needs it dropped


def _longest(need: Need, kv_room: int, length: int) -> int:
    """The longest --max-model-len (at most `length`, in whole blocks) one sequence of which fits in a KV pool of
    `kv_room` bytes, less the block vLLM keeps back: what vLLM's own estimate of the longest says."""
    room = kv_room - need.block_bytes
    if need.kv_per_seq(length) <= room:
        return length
    low, high = 0, length // need.block_size
    while low < high:  # the largest block count that fits
        mid = (low + high + 1) // 2
        if need.kv_per_seq(mid * need.block_size) <= room:
            low = mid
        else:
            high = mid - 1
    return low * need.block_size


def holdings(have: Have) -> list[Holding]:
    """What holds memory a launch could have had, largest first."""
    out = []
    for h in have.holders:
        size = h.gpu_bytes if h.gpu_bytes is not None else h.rss_bytes
        if not size:
            continue
        where = ", ".join(h.devices) or "the GPU (NVML)"
        inside = f" in container {h.container}" if h.container else ""
        out.append(Holding(f"pid {h.pid} ({h.name or '?'}){inside} holds {where}", size,
                           f"stop pid {h.pid} ({h.name or '?'}) if it is not the server you mean to keep"))
    if have.unified:  # on one pool every large process takes from what the GPU could have had
        for h in have.others[:5]:
            inside = f" in container {h.container}" if h.container else ""
            out.append(Holding(f"pid {h.pid} ({h.name or '?'}){inside}, not on the GPU, holds shared memory", h.rss_bytes or 0,
                               f"stop or shrink pid {h.pid} ({h.name or '?'}): on unified memory its memory is the GPU's too"))
    for c in have.containers:  # below LARGE it is noise; it may be any service's, so the remedy asks first
        if c.leftover and c.bytes >= LARGE:
            out.append(Holding(f"container {c.id} holds memory with no process on the GPU ({len(c.pids)} process(es) left)",
                               c.bytes, f"if container {c.id} is a server's whose server died, remove it: "
                                        f"docker rm -f {c.id} (or podman)"))
    if have.limit_bytes is not None and have.available_bytes is not None:  # what the cgroup's limit withholds
        withheld = (have.box_usable_bytes or 0) - (have.usable_bytes or 0)
        if withheld > 0:
            out.append(Holding(f"the memory limit ({gib(have.limit_bytes)}) of the cgroup this runs in, and a launch from here",
                               withheld, "raise the memory limit of the cgroup this runs in (docker run --memory, systemd "
                                         "MemoryMax= and MemoryHigh=) or launch outside it"))
    if have.hugetlb_bytes:  # huge pages set aside: MemAvailable never counts them, and nothing else says where they went
        unused = f", {gib(have.hugetlb_free_bytes)} of them unused" if have.hugetlb_free_bytes is not None else ""
        out.append(Holding(f"huge pages set aside (vm.nr_hugepages, Hugetlb in /proc/meminfo{unused})", have.hugetlb_bytes,
                           "if nothing needs the huge pages, give them back: `echo 0 | sudo tee /proc/sys/vm/nr_hugepages` "
                           "(and drop hugepages= from the kernel command line)"))
    if have.page_cache_bytes:
        out.append(Holding(PAGE_CACHE, have.page_cache_bytes, f"drop the page cache: {DROP_CACHES}"))
    if have.swap_used_bytes:
        out.append(Holding("swap in use (memory pushed out under pressure)", have.swap_used_bytes,
                           "find what filled memory before the launch; swap on unified memory slows the GPU's host side"))
    # largest first; a binding cgroup limit leads whatever its size: nothing else freed reaches a launch from here
    return sorted(out, key=lambda h: (not h.what.startswith("the memory limit"), -h.bytes))
