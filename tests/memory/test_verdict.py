"""The verdict: fits / fits with these settings / does not fit, on fixture boxes of known memory, for a real-shaped
Qwen3-8B checkpoint; the settings it proposes are checked against the same arithmetic one block further."""

from __future__ import annotations

import json

from sparkdoctor.memory.findings import findings
from sparkdoctor.memory.have import GIB, OS_RESERVE, SERVER_PROCESSES, read_have
from sparkdoctor.memory.need import launch_need
from sparkdoctor.memory.verdict import FITS, FITS_WITH, NO_FIT, SHORTEST, UNKNOWN, judge
from tests.memory.conftest import recipe
from tests.memory.hosts import busy_gb10, container, gb10_nvml

TOTAL_KIB = 125_511_680


def box(tmp_path, available_gib: float, free_gib: float | None = None, cached_gib: float = 2):
    """busy_gb10 with its /proc/meminfo rewritten: MemAvailable (and MemFree, Cached) as given."""
    root = busy_gb10(tmp_path)
    free = available_gib - cached_gib if free_gib is None else free_gib
    kib = {"MemTotal": TOTAL_KIB, "MemFree": int(free * 2**20), "MemAvailable": int(available_gib * 2**20),
           "Buffers": 0, "Cached": int(cached_gib * 2**20), "SwapTotal": 0, "SwapFree": 0, "Shmem": 0, "Dirty": 0,
           "SReclaimable": 0}
    (root / "proc" / "meminfo").write_text("".join(f"{k}: {v} kB\n" for k, v in kib.items()))
    return read_have(root, nvml=gb10_nvml())


def test_fits_on_a_healthy_box(tmp_path, qwen3_8b):
    have = read_have(busy_gb10(tmp_path), nvml=gb10_nvml())
    need = launch_need(recipe(tmp_path, qwen3_8b, "--gpu-memory-utilization", "0.5"), qwen3_8b, have.pool_bytes)
    verdict = judge(need, have)
    assert verdict.outcome == FITS and verdict.short_bytes == 0
    assert verdict.share_bytes == int(0.5 * TOTAL_KIB * 1024)
    pool = verdict.share_bytes - need.fixed_bytes(1024) - need.block_bytes
    assert verdict.full_length_seqs == pool // need.kv_per_seq(40960)
    (finding,) = findings(verdict)
    assert finding["id"] == "memory-fits" and finding["severity"] == "info"
    assert any(e.startswith("weights: 15.3 GiB (exact: safetensors headers") for e in finding["evidence"])
    json.dumps(verdict.to_dict())


def test_fits_with_a_lower_utilization(tmp_path, qwen3_8b):
    have = box(tmp_path, available_gib=64)  # 58.5 GiB usable of 119.7 (less the OS reserve and the server's own processes)
    need = launch_need(recipe(tmp_path, qwen3_8b), qwen3_8b, have.pool_bytes)
    verdict = judge(need, have)
    assert verdict.outcome == FITS_WITH
    assert verdict.settings == {"gpu_memory_utilization": 0.48, "max_model_len": 40960, "max_num_seqs": 1024}
    assert verdict.largest_utilization == 0.48 and int(0.49 * have.pool_bytes) > have.usable_bytes
    (finding,) = findings(verdict)
    assert finding["severity"] == "warn" and "--gpu-memory-utilization 0.48 --max-model-len 40960 --max-num-seqs 1024" in finding["title"]
    assert "stop pid 4242 (python3)" in finding["remedy"]  # what holds the rest, largest first



def test_a_share_set_too_small_for_the_weights_is_raised_to_what_is_free(tmp_path, qwen3_8b):
    """--gpu-memory-utilization 0.12 (14.4 GiB) cannot hold Qwen3-8B's 15.3 GiB of weights; 58.5 GiB is free. The
    proposal stayed inside the recipe's own share and called the launch "does not fit ... 0.0 GiB more than is free"."""
    have = box(tmp_path, available_gib=64)
    need = launch_need(recipe(tmp_path, qwen3_8b, "--gpu-memory-utilization", "0.12", "--max-model-len", "8192"), qwen3_8b,
                       have.pool_bytes)
    verdict = judge(need, have)
    assert need.least() < have.usable_bytes
    assert verdict.outcome == FITS_WITH and verdict.short_bytes == 0, verdict.reasons
    assert verdict.settings["gpu_memory_utilization"] == verdict.largest_utilization == 0.48
    assert verdict.settings["max_model_len"] == 8192
    (finding,) = findings(verdict)  # "14.4 GiB asked, 58.5 GiB free" read as if it fitted: it says why it does not
    assert "(14.4 GiB asked, less than the 19.7 GiB it needs, 58.5 GiB free)" in finding["title"], finding["title"]

def test_outside_a_cgroup_the_servers_own_processes_count_on_unified_memory(tmp_path, qwen3_8b):
    """On GB10 outside any memory cgroup the server's own processes (Python, torch, vLLM's host side) take from the
    same pool as its share: a launch sized to MemAvailable less the OS reserve (0.5 of 119.7 GiB with 64 GiB
    available) was "fits", and did not fit. A GPU with its own memory is not changed (test_have's H100)."""
    have = box(tmp_path, available_gib=64)
    assert have.limit_bytes is None and have.usable_bytes == 64 * GIB - OS_RESERVE - SERVER_PROCESSES
    verdict = judge(launch_need(recipe(tmp_path, qwen3_8b, "--gpu-memory-utilization", "0.5"), qwen3_8b, have.pool_bytes), have)
    assert verdict.share_bytes <= 64 * GIB - OS_RESERVE  # inside what was counted as usable before
    assert verdict.outcome == FITS_WITH and verdict.settings["gpu_memory_utilization"] == 0.48
    assert "(MemAvailable 64.0 GiB less the OS reserve 4.0 GiB and the server's own processes 1.5 GiB)" in verdict.reasons[0]
    assert json.loads(json.dumps(have.to_dict()))["server_processes_bytes"] == SERVER_PROCESSES


def test_fits_only_with_a_shorter_context_and_fewer_sequences(tmp_path, qwen3_8b):
    have = box(tmp_path, available_gib=23.5)  # 18 GiB usable: the weights (15.3) and the reserve leave little KV
    need = launch_need(recipe(tmp_path, qwen3_8b), qwen3_8b, have.pool_bytes)
    verdict = judge(need, have)
    assert verdict.outcome == FITS_WITH, verdict.reasons
    s = verdict.settings
    share = int(s["gpu_memory_utilization"] * have.pool_bytes)
    assert share <= have.usable_bytes
    # the largest that fit: one more sequence's sampler warm-up, or 256 more tokens, would not
    assert need.least(SHORTEST, s["max_num_seqs"]) <= share < need.least(SHORTEST, s["max_num_seqs"] + 1)
    assert need.least(s["max_model_len"], s["max_num_seqs"]) <= share
    assert s["max_model_len"] % 16 == 0 and s["max_model_len"] < 40960 and s["max_num_seqs"] < 1024
    assert need.least(s["max_model_len"] + 16, s["max_num_seqs"]) > share  # one block more would not start


def test_does_not_fit_says_by_how_much_and_what_holds_the_rest(tmp_path, qwen3_8b):
    have = box(tmp_path, available_gib=12)
    need = launch_need(recipe(tmp_path, qwen3_8b), qwen3_8b, have.pool_bytes)
    verdict = judge(need, have)
    assert verdict.outcome == NO_FIT
    assert verdict.short_bytes == need.least(SHORTEST, 1) - have.usable_bytes
    held = [h.what for h in verdict.holding]
    assert held[0].startswith("pid 4242 (python3) in container 9b8c7d6e5f4a holds /dev/nvidia-uvm")
    assert any("ComfyUI" in h for h in held) and any(h.startswith("container 3f2a9c1b7d4e holds memory with no process") for h in held)
    assert any("gnome-shell" in h for h in held)  # not on the GPU, but on one pool it takes from the GPU too
    (finding,) = findings(verdict)
    assert finding["severity"] == "error" and f"{verdict.short_bytes / GIB:.1f} GiB short" in finding["title"]
    assert "docker rm -f 3f2a9c1b7d4e" in finding["remedy"]



def test_a_launch_too_big_for_the_box_is_not_told_to_drop_the_page_cache(tmp_path, qwen3_8b):
    """MemAvailable already counts the clean page cache: on a box with nothing else to stop, "drop the page cache"
    was the one remedy of a launch that stays as short after it."""
    have = box(tmp_path, available_gib=12, cached_gib=10)
    need = launch_need(recipe(tmp_path, qwen3_8b), qwen3_8b, have.pool_bytes)
    verdict = judge(need, have)
    assert verdict.outcome == NO_FIT and verdict.short_bytes // 4 < 10 * GIB  # large enough to be named before
    assert not any("drop the page cache" in r for r in verdict.remedies), verdict.remedies
    assert "docker rm -f 3f2a9c1b7d4e" in " ".join(verdict.remedies)  # what does hold the rest is still named

def test_a_container_off_the_gpu_is_not_removed_unasked_and_a_small_one_is_not_named(tmp_path, qwen3_8b):
    """A container with no process on the GPU may be any service (a database, a test's `sleep infinity`): the remedy
    asks first instead of telling the user to `docker rm -f` it; one holding next to nothing is not listed."""
    have = box(tmp_path, available_gib=12)
    root = tmp_path / "gb10-healthy"
    container(root, "0123456789ab" + "1" * 52, 40 * 2**20, [9100])  # 40 MiB: noise beside a launch
    have = read_have(root, nvml=gb10_nvml())
    verdict = judge(launch_need(recipe(tmp_path, qwen3_8b), qwen3_8b, have.pool_bytes), have)
    held = [h.what for h in verdict.holding]
    assert not any("0123456789ab" in h for h in held)
    (leftover,) = [h for h in verdict.holding if h.what.startswith("container 3f2a9c1b7d4e")]
    assert leftover.remedy == ("if container 3f2a9c1b7d4e is a server's whose server died, remove it: "
                               "docker rm -f 3f2a9c1b7d4e (or podman)")


def test_page_cache_is_named_as_a_remedy_when_free_memory_is_short(tmp_path, qwen3_8b):
    have = box(tmp_path, available_gib=100, free_gib=30, cached_gib=70)
    need = launch_need(recipe(tmp_path, qwen3_8b, "--gpu-memory-utilization", "0.6"), qwen3_8b, have.pool_bytes)
    verdict = judge(need, have)
    assert verdict.outcome == FITS and any("drop_caches" in r for r in verdict.remedies)


def test_the_page_cache_is_said_once_in_a_proposal(tmp_path, qwen3_8b):
    """A proposal said "drop the page cache: sync; echo 3 ..." as a holding, then again as its note."""
    have = box(tmp_path, available_gib=64, free_gib=4, cached_gib=60)
    verdict = judge(launch_need(recipe(tmp_path, qwen3_8b), qwen3_8b, have.pool_bytes), have)
    assert verdict.outcome == FITS_WITH
    assert "; ".join(verdict.remedies).count("drop_caches") == 1, verdict.remedies


def test_a_fixed_kv_pool_is_judged_without_the_share(tmp_path, qwen3_8b):
    have = box(tmp_path, available_gib=23.5)
    fits = judge(launch_need(recipe(tmp_path, qwen3_8b, "--kv-cache-memory-bytes", str(GIB), "--max-model-len", "4096",
                                    "--max-num-seqs", "4", "--enforce-eager", "--gpu-memory-utilization", "0.1"),
                             qwen3_8b, have.pool_bytes), have)
    assert fits.outcome == FITS and fits.share_bytes == fits.least_bytes
    big = judge(launch_need(recipe(tmp_path, qwen3_8b, "--kv-cache-memory-bytes", str(8 * GIB), "--max-model-len", "4096",
                                   "--max-num-seqs", "4", "--enforce-eager", "--gpu-memory-utilization", "0.1"),
                            qwen3_8b, have.pool_bytes), have)
    assert big.outcome == FITS_WITH and big.settings["kv_cache_memory_bytes"] < 8 * GIB


def test_a_fixed_kv_pool_still_needs_its_utilization_free_at_start(tmp_path, qwen3_8b):
    """vLLM's worker checks that --gpu-memory-utilization of the total is free before anything else
    (v1/worker/utils.py request_memory), --kv-cache-memory-bytes or not. A 1 GiB pool at the default 0.9 on a box
    with 23.5 GiB available was "fits": vLLM refuses that start ("Free memory on device ... is less than desired
    GPU memory utilization")."""
    have = box(tmp_path, available_gib=23.5)
    verdict = judge(launch_need(recipe(tmp_path, qwen3_8b, "--kv-cache-memory-bytes", str(GIB), "--max-model-len", "4096",
                                       "--max-num-seqs", "4", "--enforce-eager"), qwen3_8b, have.pool_bytes), have)
    assert verdict.outcome == FITS_WITH, verdict.reasons
    assert "vLLM checks at start that --gpu-memory-utilization 0.9" in verdict.reasons[0] and "refuses to start" in verdict.reasons[0]
    util = verdict.settings["gpu_memory_utilization"]
    assert util == verdict.largest_utilization and int(util * have.pool_bytes) <= have.usable_bytes
    assert verdict.settings["kv_cache_memory_bytes"] == GIB  # the pool the recipe asked for still fits
    (finding,) = findings(verdict)
    assert f"--gpu-memory-utilization {util} --kv-cache-memory-bytes {GIB}" in finding["title"]


def test_unknown_memory_is_not_a_verdict(tmp_path, qwen3_8b):
    (tmp_path / "bare" / "proc").mkdir(parents=True)
    have = read_have(tmp_path / "bare", nvml=[])
    verdict = judge(launch_need(recipe(tmp_path, qwen3_8b, "--max-num-seqs", "4"), qwen3_8b, 0), have)
    assert verdict.outcome == UNKNOWN
    assert findings(verdict)[0]["id"] == "memory-unknown"


def test_a_fixed_pool_too_small_for_one_sequence_gets_a_shorter_context(tmp_path, qwen3_8b):
    have = box(tmp_path, available_gib=64)
    pool = 36 * 2 * 8 * 128 * 2 * 3000  # bf16 KV for 3,000 tokens
    need = launch_need(recipe(tmp_path, qwen3_8b, "--kv-cache-memory-bytes", str(pool), "--max-model-len", "4096",
                              "--max-num-seqs", "4"), qwen3_8b, have.pool_bytes)
    verdict = judge(need, have)
    assert verdict.outcome == FITS_WITH and "vLLM refuses to start" in verdict.reasons[0]
    # 3,000 tokens hold 187 whole 16-token blocks; vLLM keeps one back: 186 blocks, 2,976 tokens
    assert verdict.settings == {"gpu_memory_utilization": 0.48, "kv_cache_memory_bytes": pool, "max_model_len": 2976,
                                "max_num_seqs": 4}


def test_a_container_recipe_is_not_bounded_by_this_processs_cgroup(tmp_path, qwen3_8b):
    """sparkdoctor in a cgroup limited to 8 GiB (a container, a systemd unit) launching a container recipe: the
    server starts in docker's cgroup, not in sparkdoctor's, and was refused as if the 8 GiB bound it."""
    from sparkdoctor.memory.findings import preflight
    from sparkdoctor.recipes import load

    path = tmp_path / "in-a-container.toml"
    path.write_text(f'schema = 1\nname = "c"\nmodel = {json.dumps(str(qwen3_8b))}\ncontainer = "vllm/vllm-openai:v0.33.0"\n'
                    f'command = {json.dumps(["vllm", "serve", str(qwen3_8b), "--max-model-len", "8192", "--gpu-memory-utilization", "0.4"])}\n')
    local = tmp_path / "local.toml"
    local.write_text(path.read_text().replace('container = "vllm/vllm-openai:v0.33.0"\n', ""))
    verdicts = {}
    for file in (path, local):
        have = box(tmp_path / file.stem, available_gib=100)
        have.limit_bytes, have.limit_used_bytes = 8 * GIB, GIB
        verdicts[file.stem] = preflight(load(file), qwen3_8b, have)
    assert verdicts["local"].outcome != FITS and verdicts["local"].usable_bytes < 8 * GIB
    contained = verdicts["in-a-container"]
    assert contained.outcome == FITS and contained.usable_bytes > 50 * GIB, contained.reasons
    assert any("in its runtime's cgroup" in n for n in contained.need.notes)


def test_memory_offloaded_to_the_host_comes_from_the_same_pool_on_unified_memory(tmp_path, qwen3_8b):
    """--cpu-offload-gb keeps weights in pinned host memory outside the share, --kv-offloading-size a host buffer for
    KV blocks: on GB10 both are the same memory. A 0.45 share (53.9 GiB) with 10 GiB offloaded on a box with 58.5 GiB
    usable was "fits": it takes 63.9 GiB."""
    have = box(tmp_path, available_gib=64)
    plain = judge(launch_need(recipe(tmp_path, qwen3_8b, "--gpu-memory-utilization", "0.45", "--max-model-len", "8192"),
                              qwen3_8b, have.pool_bytes), have)
    assert plain.outcome == FITS
    need = launch_need(recipe(tmp_path, qwen3_8b, "--gpu-memory-utilization", "0.45", "--max-model-len", "8192",
                              "--cpu-offload-gb", "8", "--kv-offloading-size", "2", name="offload"), qwen3_8b, have.pool_bytes)
    assert need.outside_bytes == 10 * GIB and need.part("weights") == plain.need.part("weights") - 8 * GIB
    verdict = judge(need, have)
    assert verdict.outcome == FITS_WITH and verdict.usable_bytes == have.usable_bytes - 10 * GIB
    assert "10.0 GiB of host memory outside the share (--cpu-offload-gb 8, --kv-offloading-size 2)" in verdict.reasons[0]
    assert int(verdict.settings["gpu_memory_utilization"] * have.pool_bytes) <= have.usable_bytes - 10 * GIB


def _h200s(used_mib: list[int]) -> list[dict]:
    """Eight H200s as NVML reads them (the GB10 answer's shape, with the memory a discrete GPU reports)."""
    base = gb10_nvml()[0]
    return [{**base, "index": i, "name": "NVIDIA H200", "memory_total_mib": 143_771, "memory_used_mib": used, "processes": []}
            for i, used in enumerate(used_mib)]


def test_discrete_gpus_are_judged_one_a_rank_not_summed(tmp_path, qwen3_8b, monkeypatch):
    """On eight H200s the pool was their sum (1,123 GiB): a tensor-parallel-1 launch whose one sequence needs more than
    one GPU has was "fits". vLLM's rank takes one GPU, its share of that GPU; with --tensor-parallel-size 2, two."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    root = busy_gb10(tmp_path)
    have = read_have(root, nvml=_h200s([0] * 8))
    assert not have.unified and len(have.gpu_devices) == 8
    big = ("--max-model-len", "32768", "--kv-cache-memory-bytes", "150G")  # more than one GPU has, less than eight
    one = judge(launch_need(recipe(tmp_path, qwen3_8b, *big), qwen3_8b, have.pool_bytes, "NVIDIA H200"), have)
    assert one.outcome != FITS and one.usable_bytes == 143_771 * 2**20, one.reasons
    assert "judged on 1 of the 8 visible GPU(s)" in " ".join(one.reasons)
    short = judge(launch_need(recipe(tmp_path, qwen3_8b, "--max-model-len", "32768", name="short"), qwen3_8b, have.pool_bytes,
                              "NVIDIA H200"), have)
    assert short.outcome == FITS and short.share_bytes == int(0.9 * 143_771 * 2**20)
    two = judge(launch_need(recipe(tmp_path, qwen3_8b, "--max-model-len", "32768", "-tp", "2", name="two"), qwen3_8b,
                            have.pool_bytes, "NVIDIA H200"), have)
    assert two.outcome == FITS and two.share_bytes == int(0.9 * 2 * 143_771 * 2**20)
    # the GPU the launch sees first is the one judged: CUDA_VISIBLE_DEVICES=3 names a GPU another job fills
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    busy = read_have(root, nvml=_h200s([0, 0, 0, 140_000, 0, 0, 0, 0]))
    assert busy.gpu_devices == [(143_771 * 2**20, 140_000 * 2**20)]
    assert judge(launch_need(recipe(tmp_path, qwen3_8b, "--max-model-len", "32768", name="busy"), qwen3_8b, busy.pool_bytes,
                             "NVIDIA H200"), busy).outcome == NO_FIT
    # a GPU's own memory is no cgroup's: a host memory limit does not shrink it
    busy.limit_bytes, busy.limit_used_bytes = 8 * GIB, 0
    assert busy.usable_bytes == (143_771 - 140_000) * 2**20


def test_a_fixed_pool_on_a_box_without_a_gpu_is_not_held_to_the_utilization(tmp_path, qwen3_8b):
    """vLLM's CPU worker skips the utilization check when --kv-cache-memory-bytes is set (v1/worker/cpu_worker.py),
    its GPU worker does not: a CPU-only box (no NVML) is judged by the pool alone."""
    root = box(tmp_path, available_gib=23.5).root
    cpu_only = read_have(root, nvml=[])
    assert not cpu_only.has_gpu and cpu_only.unified
    verdict = judge(launch_need(recipe(tmp_path, qwen3_8b, "--kv-cache-memory-bytes", str(GIB), "--max-model-len", "4096",
                                       "--max-num-seqs", "4", "--enforce-eager"), qwen3_8b, cpu_only.pool_bytes), cpu_only)
    assert verdict.outcome == FITS, verdict.reasons
