"""The post-mortem: each cause from kernel-log and server-log lines quoted from reports (tests/data/memory/logs),
and a real process killed by the real OOM killer in a real 64 MiB memory cgroup, named from the real kernel log."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.collect.kernel_log import counts, parse, read_kernel_log, uptime
from sparkdoctor.memory.postmortem import Sample, classify
from tests.memory.cgroups import limited, start_in

LOGS = Path(__file__).resolve().parent.parent / "data" / "memory" / "logs"
GIB = 2**30


def log(name: str) -> str:
    return (LOGS / name).read_text()


def test_kernel_lines_are_parsed_from_dmesg_and_journalctl_text():
    events = parse(log("nvrm-no-memory.dmesg") + log("cgroup-oom.dmesg") + log("hung-task.journal") + log("xid.dmesg"))
    assert [e.kind for e in events] == ["nvrm-no-memory", "nvrm-no-memory", "oom-invoked", "oom-kill", "hung-task", "xid"]
    kill = events[3]
    assert (kill.pid, kill.name, kill.seconds) == (12026, "python3", 394.558841)
    assert kill.line.startswith("Memory cgroup out of memory: Killed process 12026 (python3)")
    hung, xid = events[4], events[5]
    assert (hung.pid, hung.name, hung.seconds) == (4242, "python3", None)
    assert (xid.code, xid.pid, xid.name) == (31, 2415, "python3")
    # the kill was a memory cgroup's (its own limit), not the box running out: counted apart
    assert counts(events) == {"nvrm_no_memory": 2, "xids": 1, "oom_kills": 0, "oom_kills_cgroup": 1, "hung_tasks": 1}
    assert parse(log("cgroup-oom.dmesg"), since=394.555)[0].kind == "oom-kill"  # the window drops what came before


def test_driver_no_memory_with_its_lines_and_the_setting():
    pm = classify(log("nvrm-no-memory.dmesg"), ["INFO: loading weights"], returncode=1, largest_utilization=0.62,
                  samples=[Sample(0, 60 * GIB, GIB), Sample(30, int(1.5 * GIB), 70 * GIB)])
    assert pm.cause == "driver-no-memory"
    assert pm.evidence[0] == ("kernel: NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) "
                              "returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359")
    assert "--gpu-memory-utilization 0.62" in pm.avoid and "--max-num-batched-tokens" in pm.avoid
    assert pm.high_water_bytes == 70 * GIB and pm.lowest_available_bytes == int(1.5 * GIB)
    assert "exit: exit code 1" in pm.evidence and "memory: MemAvailable fell to 1.50 GiB during the run" in pm.evidence


def test_oom_killed_names_the_victim_only_when_it_is_the_server():
    pm = classify(log("cgroup-oom.dmesg"), [], pids={12026}, returncode=-signal.SIGKILL)
    assert pm.cause == "oom-killed" and pm.victim == {"pid": 12026, "name": "python3"}
    assert "exit: killed by SIGKILL" in pm.evidence
    other = classify(log("cgroup-oom.dmesg"), [], pids={999}, returncode=1)  # another process was the victim
    assert other.cause == "crash"
    # the box itself out of memory (the kernel's global OOM line): the share and what else holds memory
    box = log("cgroup-oom.dmesg").replace("Memory cgroup out of memory: Killed process", "Out of memory: Killed process")
    whole = classify(box, [], pids={12026}, returncode=-signal.SIGKILL)
    assert whole.cause == "oom-killed" and "--gpu-memory-utilization" in whole.avoid and "stop what else holds memory" in whole.avoid


@pytest.mark.parametrize("name, summary, avoid", [
    ("vllm-share-not-free.log", "less memory is free than its --gpu-memory-utilization share", "--gpu-memory-utilization"),
    ("vllm-kv-too-small.log", "one sequence of --max-model-len does not fit", "--max-model-len 233600 (vLLM's own estimate"),
    ("sglang-unbalanced.log", "memory held by other processes", "stop the leftover server or container"),
])
def test_the_servers_own_words(name, summary, avoid):
    pm = classify("", log(name).splitlines(), returncode=1)
    assert pm.cause == "cuda-oom" and summary in pm.summary and avoid in pm.avoid
    assert pm.evidence[0].startswith("server: ") and pm.evidence[0][8:] in log(name)


def test_hang_crash_and_nothing_to_go_on():
    hang = classify(log("hung-task.journal"), [], hung=True, samples=[Sample(0, GIB, None)])
    assert hang.cause == "hang" and hang.evidence[0] == "kernel: INFO: task python3:4242 blocked for more than 122 seconds."
    assert "--enforce-eager" in hang.avoid and "memory ran low" in hang.avoid
    # alive and never ready, with no kernel hang report: it may have been starting still (a --ready-timeout too short
    # for a first start); the advice was --enforce-eager alone
    slow = classify("", ["INFO: loading weights", "INFO: capturing CUDA graphs"], hung=True)
    assert slow.cause == "hang" and slow.avoid.startswith("a longer --ready-timeout") and "--enforce-eager" in slow.avoid
    assert "server: its last line: INFO: capturing CUDA graphs" in slow.evidence
    crash = classify(log("xid.dmesg"), ["Segmentation fault"], returncode=-signal.SIGSEGV)
    assert crash.cause == "crash" and "killed by SIGSEGV" in crash.summary and crash.evidence[0].startswith("kernel: NVRM: Xid")
    assert classify("", [], returncode=0).cause == "unknown"


def test_a_real_process_under_an_address_space_limit_is_named_by_its_memoryerror_line():
    """A real interpreter under `ulimit -v` (RLIMIT_AS, 300 MB) that asks for 2 GB dies with a traceback: the
    evidence quoted first is the MemoryError line, not the traceback's last frame, and the advice names the limit
    (a lower --gpu-memory-utilization alone does not lift it)."""
    code = "import resource; resource.setrlimit(resource.RLIMIT_AS, (300 * 10**6, 300 * 10**6)); x = bytearray(2 * 10**9)"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert child.returncode == 1 and child.stderr.rstrip().endswith("MemoryError")
    pm = classify("", ["starting", *child.stderr.splitlines()], returncode=child.returncode)
    assert pm.cause == "crash" and pm.summary == "the server could not allocate host memory"
    assert pm.evidence[0] == "server: MemoryError"
    assert "ulimit -v" in pm.avoid and "--gpu-memory-utilization" in pm.avoid


def test_a_real_process_killed_by_the_real_oom_killer_is_named_from_the_real_kernel_log():
    """A process that takes 300 MiB in a cgroup limited to 64 MiB: the kernel kills it, and the post-mortem
    reads /dev/kmsg from the moment it started and names it as the victim."""
    root = Path("/")
    start = uptime(root)
    assert start is not None
    with limited(64 * 2**20) as group:
        child = start_in(group, "b = [bytearray(2**20) for _ in range(300)]; print('survived')")
        out, _ = child.communicate(timeout=120)
    assert child.returncode == -signal.SIGKILL and "survived" not in out
    kernel = read_kernel_log(root, live=False).text
    assert kernel is not None, "/dev/kmsg is not readable here"
    pm = classify(kernel, [], since=start - 1, pids={child.pid}, returncode=child.returncode)
    comm = Path(f"/proc/{child.pid}/comm")  # gone: the name is the interpreter's, as the kernel cut it to 15 characters
    assert not comm.exists()
    assert pm.cause == "oom-killed" and pm.victim is not None and pm.victim["pid"] == child.pid
    assert pm.victim["name"] == Path(sys.executable).name[:15]  # comm: the name exec was given
    assert any(e.startswith("kernel: ") and f"Killed process {child.pid} ({pm.victim['name']})" in e for e in pm.evidence)
    # the cgroup's limit was reached, not the box's memory: a lower share or stopping other processes would not help
    assert pm.avoid.startswith("raise the memory limit of the cgroup it ran in") and "--gpu-memory-utilization" not in pm.avoid


def test_after_a_launch_the_whole_log_end_is_read_not_only_the_launchers_tail(tmp_path):
    """vLLM's ValueError comes from its engine process; the API server's traceback after it runs past the
    launcher's 40-line tail, so the post-mortem reads the end of the log file."""
    from types import SimpleNamespace

    from sparkdoctor.memory.postmortem import after_launch

    log = tmp_path / "server.log"
    trace = [f'(APIServer pid=9) File "async_llm.py", line {i}, in init' for i in range(120)]
    log.write_text("\n".join(log_lines := [*(LOGS / "vllm-kv-too-small.log").read_text().splitlines(), *trace]) + "\n")
    error = SimpleNamespace(returncode=1, not_ready=False, log_tail=log_lines[-40:], log_path=log)
    empty = tmp_path / "root"
    (empty / "dev").mkdir(parents=True)
    (empty / "dev" / "kmsg").write_text("")
    pm = after_launch(error, None, root=empty)
    assert pm is not None and pm.cause == "cuda-oom" and "--max-model-len 233600" in pm.avoid
    assert after_launch(SimpleNamespace(returncode=None, not_ready=False), None, root=empty) is None  # never started


def test_memory_rising_to_the_end_is_the_oom_killers_mark_when_the_kernel_log_is_silent():
    """SIGKILL with the server's memory at its high-water mark in its last sample and well above where it was: the
    OOM killer's way, said as such when the kernel log does not name the victim; flat memory is not."""
    # the last sample: the group after the server died (the supervisor alone), as the launcher sees it
    rising = [Sample(0, 20 * GIB, GIB), Sample(5, 12 * GIB, 6 * GIB), Sample(12, GIB // 4, 14 * GIB), Sample(12.5, 20 * GIB, 2**24)]
    pm = classify("", [], returncode=-signal.SIGKILL, samples=rising)
    assert pm.cause == "oom-killed" and pm.victim is None and "OOM killer's way" in pm.summary
    assert pm.evidence[0].startswith("memory: the server's resident size rose from 1.00 GiB to 14.00 GiB")
    assert "MemAvailable 0.25 GiB" in pm.evidence[0] and "--gpu-memory-utilization" in pm.avoid
    flat = [Sample(0, 20 * GIB, 14 * GIB), Sample(30, 20 * GIB, 14 * GIB), Sample(40, 20 * GIB, 14 * GIB)]
    long_ago = [Sample(0, 20 * GIB, GIB), Sample(5, 12 * GIB, 14 * GIB), *(Sample(5 + i, 12 * GIB, 13 * GIB) for i in range(1, 6))]
    assert classify("", [], returncode=-signal.SIGKILL, samples=long_ago).cause == "crash"  # the peak was not at the end
    assert classify("", [], returncode=-signal.SIGKILL, samples=flat).cause == "crash"
    assert classify("", [], returncode=-signal.SIGSEGV, samples=rising).cause == "crash"  # a signal the OOM killer never sends
    # flat, but at its memory cgroup's limit (the limit counts more than resident pages: 80% of it is at the limit)
    held = classify("", [], returncode=-signal.SIGKILL, samples=flat, memory={"cgroup_limit_bytes": 16 * GIB})
    assert held.cause == "oom-killed" and "88% of its memory cgroup's limit of 16.00 GiB" in held.evidence[0], held.evidence
    assert classify("", [], returncode=-signal.SIGKILL, samples=flat, memory={"cgroup_limit_bytes": 64 * GIB}).cause == "crash"
    # the launcher's own high-water mark (taken at every sample, the series thinned) outranks the series'
    kept = classify("", [], returncode=-signal.SIGKILL, samples=flat, memory={"high_water_bytes": 20 * GIB})
    assert kept.high_water_bytes == 20 * GIB and kept.cause == "crash"
    # with the kernel's line, the rise is evidence beside it
    named = classify(log("cgroup-oom.dmesg"), [], pids={12026}, returncode=-signal.SIGKILL, samples=rising)
    assert named.cause == "oom-killed" and named.evidence[0].startswith("kernel: ")
    assert any(e.startswith("memory: the server's resident size rose") for e in named.evidence)


def test_a_launched_server_growing_into_its_cgroup_limit_is_named_from_its_samples_alone(tmp_path):
    """A real 'server' in a 128 MiB memory cgroup that takes 2 MiB every 20 ms until the real OOM killer kills it:
    the launcher sampled its group's memory rising to the end, and the post-mortem names the OOM killer from those
    samples when the kernel log is not readable (an empty host root), and from the kernel's line when it is."""
    import json

    from sparkdoctor.memory.postmortem import after_launch
    from sparkdoctor.recipes import load
    from sparkdoctor.serve import LaunchError, launch

    grow = "import time; b = []\nwhile True: b.append(b'x' * 2 * 2**20); time.sleep(0.02)"
    with limited(128 * 2**20) as group:
        command = ["sh", "-c", f"echo $$ > {group}/cgroup.procs && exec {sys.executable} -c \"{grow}\""]
        (tmp_path / "grow.toml").write_text(f'schema = 1\nname = "grow"\ncommand = {json.dumps(command)}\n')
        start = uptime(Path("/"))
        with pytest.raises(LaunchError) as died:
            with launch(load(tmp_path / "grow.toml"), run_dir=tmp_path / "run", ready_timeout=120, matrix=[]):
                pass
    assert died.value.returncode == -signal.SIGKILL, died.value
    assert died.value.memory and died.value.memory["high_water_bytes"] >= 32 * 2**20, died.value.memory
    assert died.value.memory["cgroup_limit_bytes"] == 128 * 2**20  # read once the server had joined the cgroup
    silent = tmp_path / "root"
    (silent / "dev").mkdir(parents=True)
    (silent / "dev" / "kmsg").write_text("")
    pm = after_launch(died.value, start, root=silent)
    assert pm is not None and pm.cause == "oom-killed" and pm.victim is None, pm
    assert pm.evidence[0].startswith("memory: the server's resident size rose"), pm.evidence
    real = after_launch(died.value, start)
    assert real is not None and real.cause == "oom-killed" and real.victim is not None
    assert any(e.startswith("memory: the server's resident size rose") for e in real.evidence)


@pytest.mark.parametrize("prefix", [
    "Nov 28 09:00:00 spark-1 kernel: [  394.558841] ",  # /var/log/kern.log (rsyslog keeps the kernel's stamp)
    "[Sat Nov 28 09:00:00 2026] ",  # dmesg -T
    "[  394.558841] spark-1 kernel: ",  # journalctl -k -o short-monotonic
    "2026-11-28T09:00:00.123456+00:00 spark-1 kernel: ",  # journalctl -k -o short-iso, Ubuntu 24.04's kern.log
])
def test_a_cgroup_kill_is_counted_apart_whatever_stamp_the_log_puts_before_it(prefix):
    events = parse(prefix + "Memory cgroup out of memory: Killed process 12026 (python3) total-vm:1kB\n")
    assert events[0].line.startswith("Memory cgroup out of memory: Killed process 12026")
    assert counts(events)["oom_kills"] == 0 and counts(events)["oom_kills_cgroup"] == 1
    pm = classify(prefix + "Memory cgroup out of memory: Killed process 12026 (python3)\n", pids={12026}, returncode=-9)
    assert pm.avoid.startswith("raise the memory limit of the cgroup")


def test_the_launch_window_is_read_on_the_kernel_logs_own_clock(tmp_path, monkeypatch):
    """The kernel stamps its log with a clock that stops during suspend (as CLOCK_MONOTONIC); /proc/uptime counts
    suspended time. On a box suspended for 10 minutes since boot, a launch's window read from /proc/uptime began
    600 s after the kernel's stamps of its own OOM kill, and the post-mortem said "crash ... nothing pointing at
    memory". The window now starts on the monotonic clock (a fixture host root keeps its /proc/uptime)."""
    import time

    monkeypatch.setattr(time, "clock_gettime", lambda clock: 300.0 if clock == time.CLOCK_MONOTONIC else 900.0)
    assert uptime(Path("/")) == 300.0
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "uptime").write_text("900.00 1700.00\n")
    assert uptime(tmp_path) == 900.0
    kill = "6,1234,305000000,-;Out of memory: Killed process 4242 (python3) total-vm:75220kB, anon-rss:65280kB\n"
    assert classify(kill, ["x"], since=uptime(Path("/")), pids={4242}, returncode=-9).cause == "oom-killed"
