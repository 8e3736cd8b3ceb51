"""Which NCCL library a node's serving stack loads, and what identifies that build; /etc/nccl.conf.

The version string is not an identity: the pip wheel nvidia-nccl-cu13 2.28.9 and DGX OS's libnccl2
2.28.9 are different binaries (vllm-project/vllm#41725). Each candidate library is identified by its
ELF GNU build-id (read from the file's notes, no tool needed), else its sha256, and the version is read
from the "NCCL version X" string inside the binary, never from a package name.

Which candidate loads, in the order the dynamic loader and torch/vLLM decide it:
  1. a library already mapped by a running process (/proc/PID/maps): the one really loaded;
  2. LD_PRELOAD naming libnccl;
  3. VLLM_NCCL_SO_PATH (vLLM's own communicator dlopens it);
  4. the pip wheel's nvidia/nccl/lib/libnccl.so.2 in the interpreter's site-packages (torch's RPATH);
  5. the system library the loader finds (ldconfig's cache, then the usual folders).
"""

import hashlib
import os
import re
import struct
import subprocess
import sys

from probe_io import open_regular, read_text

VERSION_RE = re.compile(rb"NCCL version (\d+\.\d+\.\d+[^\s\x00]*)")
CHUNK = 1 << 20
MAX_LIB = 2 << 30  # bytes of one library read at most (real ones are ~300 MB)
MAX_CONF = 1 << 20
MAX_PIDS = 4096
SYSTEM_DIRS = ("/usr/lib/aarch64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib",
               "/usr/local/cuda/lib64", "/usr/local/nccl/lib")


def elf_build_id(path):
    """The GNU build-id of an ELF file as hex, read from its program headers' PT_NOTE segments; None when
    it has none (or is not ELF)."""
    fh, _ = open_regular(path)
    with fh:
        head = fh.read(64)
        if len(head) < 52 or head[:4] != b"\x7fELF":
            return None
        is64, little = head[4] == 2, head[5] == 1
        end = "<" if little else ">"
        if is64:
            phoff, = struct.unpack(end + "Q", head[32:40])
            phentsize, phnum = struct.unpack(end + "HH", head[54:58])
        else:
            phoff, = struct.unpack(end + "I", head[28:32])
            phentsize, phnum = struct.unpack(end + "HH", head[42:46])
        if phnum > 512 or phentsize < 32:
            return None
        fh.seek(phoff)
        table = fh.read(phentsize * phnum)
        for i in range(phnum):
            entry = table[i * phentsize:(i + 1) * phentsize]
            if len(entry) < phentsize:
                break
            p_type, = struct.unpack(end + "I", entry[:4])
            if p_type != 4:  # PT_NOTE
                continue
            if is64:
                offset, = struct.unpack(end + "Q", entry[8:16])
                size, = struct.unpack(end + "Q", entry[32:40])
            else:
                offset, = struct.unpack(end + "I", entry[4:8])
                size, = struct.unpack(end + "I", entry[16:20])
            fh.seek(offset)
            notes = fh.read(min(size, 1 << 16))
            pos = 0
            while pos + 12 <= len(notes):
                namesz, descsz, ntype = struct.unpack(end + "III", notes[pos:pos + 12])
                name_end = pos + 12 + ((namesz + 3) & ~3)
                desc_end = name_end + ((descsz + 3) & ~3)
                if ntype == 3 and notes[pos + 12:pos + 12 + namesz].rstrip(b"\x00") == b"GNU":
                    return notes[name_end:name_end + descsz].hex()
                pos = desc_end
    return None


def identify(path, source, errors, known=None):
    """One candidate library: where, what it resolves to, version inside the binary, build-id, sha256.

    A library with a GNU build-id is identified by it and read only up to its version banner: a real
    libnccl is ~300 MB, and hashing it whole cost more than everything else this probe does (0.15 s of
    CPU on an x86 node, per library). One without a build-id is hashed whole (sha256). `known` maps
    real paths already identified in this run to their record, so one file reached by two names is read once.
    """
    item = {"path": path, "source": source}
    try:
        real = os.path.realpath(path)
        if known is not None and real in known:
            return dict(known[real], path=path, source=source)
        item["realpath"] = real
        item["build_id"] = elf_build_id(real)
        fh, st = open_regular(real)
        item["size"] = st.st_size
        digest = None if item["build_id"] else hashlib.sha256()
        version, tail, read = None, b"", 0
        with fh:
            while read < MAX_LIB:
                block = fh.read(CHUNK)
                if not block:
                    break
                read += len(block)
                if digest is not None:
                    digest.update(block)
                if version is None:
                    found = VERSION_RE.search(tail + block)
                    if found:
                        version = found.group(1).decode("ascii", "replace")
                        if digest is None:
                            break  # the build-id identifies it; the banner was all that was left to read
                tail = block[-64:]
        item["sha256"] = digest.hexdigest() if digest is not None and read < MAX_LIB else None
        item["version"] = version
    except OSError as exc:
        item["error"] = "%s: %s" % (path, exc.strerror or exc)
        errors.append(item["error"])
    if known is not None and "error" not in item:
        known[item["realpath"]] = dict(item)
    return item


def pip_candidates():
    found = []
    for folder in sys.path:
        lib = os.path.join(folder or ".", "nvidia", "nccl", "lib", "libnccl.so.2")
        if os.path.exists(lib) and lib not in found:
            found.append(lib)
    return found


def system_candidates():
    found = []
    try:
        out = subprocess.run(["ldconfig", "-p"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=5,
                             universal_newlines=True).stdout
        for line in out.splitlines():
            if "libnccl.so.2 " in line and "=>" in line:
                found.append(line.split("=>", 1)[1].strip())
    except (OSError, subprocess.SubprocessError):
        pass
    if not found:
        for folder in SYSTEM_DIRS:
            lib = os.path.join(folder, "libnccl.so.2")
            if os.path.exists(lib):
                found.append(lib)
    return list(dict.fromkeys(found))


def mapped_by_processes():
    """{path: number of processes mapping it} for every libnccl a running process has loaded."""
    mapped = {}
    pids = [p for p in os.listdir("/proc") if p.isdigit()][:MAX_PIDS]
    for pid in pids:
        try:
            with open("/proc/%s/maps" % pid, "rb") as fh:
                data = fh.read(8 << 20)
        except OSError:
            continue
        seen = set()
        for line in data.splitlines():
            if b"libnccl" in line:
                path = line.split(None, 5)[-1].decode("utf-8", "replace")
                if path.startswith("/") and path not in seen:
                    seen.add(path)
                    mapped[path] = mapped.get(path, 0) + 1
    return mapped


def nccl_libraries(errors):
    """{"candidates": [...], "loaded": the candidate that loads (or is loaded), "loaded_by": why}."""
    candidates, loaded, why, known = [], None, None, {}
    mapped = mapped_by_processes()
    for path, count in sorted(mapped.items()):
        item = identify(path, "process", errors, known)
        item["processes"] = count
        candidates.append(item)
    if candidates:
        loaded, why = candidates[0], "mapped by a running process"
    preload = [p for p in os.environ.get("LD_PRELOAD", "").replace(":", " ").split() if "nccl" in p]
    vllm_path = os.environ.get("VLLM_NCCL_SO_PATH")
    ordered = [(p, "LD_PRELOAD") for p in preload]
    ordered += [(vllm_path, "VLLM_NCCL_SO_PATH")] if vllm_path else []
    ordered += [(p, "pip") for p in pip_candidates()] + [(p, "system") for p in system_candidates()]
    for path, source in ordered:
        item = identify(path, source, errors, known)
        candidates.append(item)
        if loaded is None and "error" not in item:
            loaded, why = item, {"pip": "the wheel in the interpreter's site-packages (torch's RPATH)",
                                 "system": "the system library the loader finds"}.get(source, "named by " + source)
    pip = [c for c in candidates if c.get("source") == "pip" and c.get("version")]
    system = [c for c in candidates if c.get("source") == "system" and c.get("version")]
    split = any(p["version"] == s["version"] and _identity(p) != _identity(s) for p in pip for s in system)
    return {"candidates": candidates, "loaded": loaded, "loaded_by": why, "pip_system_same_version_other_build": split}


def _identity(item):
    return item.get("build_id") or item.get("sha256")


def nccl_conf(errors):
    """The NCCL config files NCCL reads ($NCCL_CONF_FILE, else ~/.nccl.conf, and /etc/nccl.conf)."""
    paths = []
    if os.environ.get("NCCL_CONF_FILE"):
        paths.append(os.environ["NCCL_CONF_FILE"])
    paths += [os.path.expanduser("~/.nccl.conf"), "/etc/nccl.conf"]
    found = []
    for path in dict.fromkeys(paths):
        if not os.path.exists(path):
            continue
        try:
            text = read_text(path, MAX_CONF)
        except OSError as exc:
            errors.append("%s: %s" % (path, exc.strerror or exc))
            continue
        settings = {}
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if "=" in line:
                key, value = line.split("=", 1)
                settings[key.strip()] = value.strip()
        found.append({"path": path, "settings": settings,
                      "sha256": hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()})
    return found
