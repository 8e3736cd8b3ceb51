"""The node outside the Python environment: memory and CMA, the kernel command line, the NVIDIA driver
and its flavour (open or proprietary kernel modules), the driver's CUDA, the CUDA toolkit, GPU clocks
through nvidia-smi, and whether this runs inside a container.
"""

import ctypes
import json
import os
import re
import subprocess

MEMINFO_KEYS = {"MemTotal": "total_kib", "MemAvailable": "available_kib", "SwapTotal": "swap_total_kib",
                "SwapFree": "swap_free_kib", "CmaTotal": "cma_total_kib", "CmaFree": "cma_free_kib"}
SMI_FIELDS = ("index", "name", "compute_cap", "driver_version", "clocks.gr", "clocks.max.gr", "clocks.mem", "pstate",
              "temperature.gpu", "power.draw", "clocks_event_reasons.active", "memory.used")
SMI_TIMEOUT = 8


def _text(path, limit=1 << 16):
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def meminfo():
    """(memory, cma) from /proc/meminfo, in KiB; a kernel without CMA lines gives cma None."""
    found = {}
    for line in (_text("/proc/meminfo") or "").splitlines():
        key, _, rest = line.partition(":")
        if key in MEMINFO_KEYS:
            try:
                found[MEMINFO_KEYS[key]] = int(rest.split()[0])
            except (ValueError, IndexError):
                pass
    memory = {k: found.get(k) for k in ("total_kib", "available_kib", "swap_total_kib")}
    if found.get("swap_total_kib") is not None and found.get("swap_free_kib") is not None:
        memory["swap_used_kib"] = found["swap_total_kib"] - found["swap_free_kib"]
    cmdline = _text("/proc/cmdline") or ""
    cma_arg = next((w.split("=", 1)[1] for w in cmdline.split() if w.startswith("cma=")), None)
    cma = None
    if "cma_total_kib" in found:
        cma = {"total_kib": found["cma_total_kib"], "free_kib": found.get("cma_free_kib"), "cmdline": cma_arg}
    return memory, cma


def driver(errors):
    """{"version", "flavour": "open" | "proprietary", "cuda", "libcuda"}; {} when no NVIDIA driver is loaded."""
    text = _text("/proc/driver/nvidia/version")
    found = {}
    if text:
        first = text.splitlines()[0] if text.splitlines() else ""
        match = re.search(r"\s(\d{3}\.\d+(?:\.\d+)?)\s", first + " ")
        found["version"] = match.group(1) if match else None
        found["flavour"] = "open" if "Open Kernel Module" in first else "proprietary"
        found["source"] = "/proc/driver/nvidia/version"
    else:
        version = (_text("/sys/module/nvidia/version") or "").strip()
        if version:
            found = {"version": version, "flavour": None, "source": "/sys/module/nvidia/version"}
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        value = ctypes.c_int()
        if lib.cuDriverGetVersion(ctypes.byref(value)) == 0 and value.value:
            found["cuda"] = "%d.%d" % (value.value // 1000, (value.value % 1000) // 10)
            found["libcuda"] = found["cuda"]
    except (OSError, AttributeError):
        pass
    return found


def cuda_toolkit():
    """The CUDA toolkit the node's CUDA_HOME (or /usr/local/cuda) holds: {"path", "version"} or None."""
    home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    text = _text(os.path.join(home, "version.json"))
    if text:
        try:
            return {"path": home, "version": json.loads(text)["cuda"]["version"]}
        except (ValueError, KeyError, TypeError):
            return {"path": home, "version": None}
    return None


def nvidia_smi(errors):
    """[{per GPU fields}] from nvidia-smi, or None when it is missing or fails (said in errors)."""
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(SMI_FIELDS), "--format=csv,noheader,nounits"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=SMI_TIMEOUT, universal_newlines=True)
    except FileNotFoundError:
        return None
    except (OSError, subprocess.SubprocessError) as exc:
        errors.append("nvidia-smi: %s" % exc)
        return None
    if done.returncode != 0:
        errors.append("nvidia-smi exited %d: %s" % (done.returncode, (done.stderr or done.stdout).strip()[:200]))
        return None
    gpus = []
    for line in done.stdout.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(SMI_FIELDS):
            continue
        row = dict(zip(SMI_FIELDS, cells))
        gpus.append({
            "index": _num(row["index"], int), "name": row["name"], "cc": row["compute_cap"],
            "clock_graphics_mhz": _num(row["clocks.gr"]), "clock_graphics_max_mhz": _num(row["clocks.max.gr"]),
            "clock_memory_mhz": _num(row["clocks.mem"]), "pstate": _num(row["pstate"].lstrip("P"), int),
            "temperature_c": _num(row["temperature.gpu"]), "power_w": _num(row["power.draw"]),
            "throttle_reasons_active": row["clocks_event_reasons.active"], "memory_used_mib": _num(row["memory.used"]),
            "driver_version": row["driver_version"],
        })
    return gpus


def _num(text, kind=float):
    try:
        return kind(text)
    except (TypeError, ValueError):
        return None


def in_container():
    """Whether this runs inside a container (what it can tell from inside; the image is the host's to name)."""
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return True
    cgroup = _text("/proc/1/cgroup") or ""
    return any(word in cgroup for word in ("docker", "containerd", "libpod", "kubepods"))


def identity():
    """The node's name and boot: two inventory lines that reach one machine show as one boot id."""
    import socket

    return {"hostname": socket.gethostname(), "boot_id": (_text("/proc/sys/kernel/random/boot_id") or "").strip() or None}
