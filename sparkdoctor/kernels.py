"""Kernel probes: the hand-written PTX programs in probes/kernels/, compiled with every ptxas the
toolkits collector found, for the target arch; the SASS checked for the expected instruction where
a disassembler exists; run on the GPU and compared exactly with sparkdoctor.fp_reference where the
GPU's arch matches. "X does not compile on Spark" is settled by compiling X, here, with these tools.

Each .ptx file opens with a comment block of TOML (`// key = value`) that describes the probe:
  id, title, instruction   what is probed
  family                   arch bases the probe is about (["sm_120", "sm_121"])
  home_arch                what to compile for when the target is outside the family
  needs_suffix             the instruction exists only on arch-specific (a) / family (f) targets
  always                   part of every check (false: only when the target is in the family)
  sass                     regex the disassembly must match
  entry, threads, params   the kernel, its one-block launch, its pointer parameters in order
  inputs, reference        fp_reference functions: the input bytes, and the expected outputs
The source contains `.target @ARCH@`; the arch is put in at compile time, and `.version` is raised
to the first PTX ISA that knows that arch (8.7 for sm_120a, 8.8 for sm_121a): a probe written for
8.7 then still assembles for sm_120a with CUDA 12.8.

Results are cached under <cache>/kernels/ by (ptxas realpath, version, size, mtime; probe source;
arch; disassembler); a GPU run additionally by (GPU name, cc, driver version). An unreadable entry
is recomputed, and nothing that did not finish cleanly (timeout, crash) is cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkdoctor import proc
from sparkdoctor.arch import ARCH_RE as _ARCH_RE
from sparkdoctor.arch import DEFAULT_ARCH, FIRST_PTX as _FIRST_PTX, arch_base, arch_cc, first_cuda_for, parse_arch, settle
from sparkdoctor.collect import Collector, Context

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ARCH_PLACEHOLDER = "@ARCH@"
CACHE_VERSION = 1
COMPILE_TIMEOUT = 20.0
DISASSEMBLE_TIMEOUT = 20.0
RUN_TIMEOUT = 30.0
MAX_PARALLEL = 4

_SOURCE_RANK = {"system": 0, "pip": 1, "env": 2, "triton": 3}


class ProbeError(ValueError):
    """A probe file that cannot be used; the message names the file and the field."""


# ---- probe definitions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    id: str
    title: str
    instruction: str
    family: tuple[str, ...]
    home_arch: str
    needs_suffix: bool
    always: bool
    sass: str
    entry: str
    threads: int
    params: tuple[str, ...]
    inputs: str
    reference: str
    path: Path
    source: str
    sha256: str

    @property
    def ptx_version(self) -> str:
        found = re.search(r"^\s*\.version\s+(\S+)", self.source, re.MULTILINE)
        return found.group(1) if found else "?"

    def ptx_version_for(self, arch: str) -> str:
        own = _version_tuple(self.ptx_version)
        number, suffix = parse_arch(arch)
        first = _FIRST_PTX.get(number, (0, 0))
        if suffix == "f":
            first = max(first, (8, 8))
        return ".".join(map(str, max(own, first)))

    def ptx_for(self, arch: str) -> str:
        source = re.sub(r"^(\s*\.version\s+)\S+", lambda m: m.group(1) + self.ptx_version_for(arch), self.source, count=1, flags=re.MULTILINE)
        return source.replace(ARCH_PLACEHOLDER, arch)

    def body(self) -> str:
        """The source after its module directives, for building one module out of several probes."""
        match = re.search(r"^\s*\.address_size\s+64\s*$", self.source, re.MULTILINE)
        return self.source[match.end():] if match else ""


_FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": str, "title": str, "instruction": str, "family": list, "home_arch": str, "needs_suffix": bool,
    "always": bool, "sass": str, "entry": str, "threads": int, "params": list, "inputs": str, "reference": str,
}


def probes_dir() -> Path:
    from sparkdoctor.locations import data_dir

    return data_dir("probes") / "kernels"


def parse_probe(path: Path) -> Probe:
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProbeError(f"{path}: cannot read: {exc.strerror or exc}") from None
    header = []
    for line in source.splitlines():
        if not line.startswith("//"):
            break
        header.append(line[3:] if line.startswith("// ") else line[2:])
    try:
        meta = tomllib.loads("\n".join(header))
    except tomllib.TOMLDecodeError as exc:
        raise ProbeError(f"{path}: the header is not TOML: {exc}") from None
    for name, kind in _FIELDS.items():
        if not isinstance(meta.get(name), kind) or (kind is int and isinstance(meta.get(name), bool)):
            raise ProbeError(f"{path}: header field '{name}' is missing or not a {kind.__name__}")
    if ARCH_PLACEHOLDER not in source:
        raise ProbeError(f"{path}: no '.target {ARCH_PLACEHOLDER}' line")
    try:
        re.compile(meta["sass"])
    except re.error as exc:
        raise ProbeError(f"{path}: header field 'sass' is not a regex: {exc}") from None
    for arch in [*meta["family"], meta["home_arch"]]:
        try:
            parse_arch(arch)
        except ValueError as exc:
            raise ProbeError(f"{path}: {exc}") from None
    return Probe(
        id=meta["id"], title=meta["title"], instruction=meta["instruction"], family=tuple(meta["family"]),
        home_arch=meta["home_arch"], needs_suffix=meta["needs_suffix"], always=meta["always"], sass=meta["sass"],
        entry=meta["entry"], threads=meta["threads"], params=tuple(meta["params"]), inputs=meta["inputs"],
        reference=meta["reference"], path=path, source=source,
        sha256=hashlib.sha256(source.encode()).hexdigest(),
    )


def load_probes(folder: Path | None = None) -> list[Probe]:
    folder = folder or probes_dir()
    probes = [parse_probe(p) for p in sorted(folder.glob("*.ptx"))]
    seen: set[str] = set()
    for p in probes:
        if p.id in seen:
            raise ProbeError(f"{p.path}: probe id '{p.id}' is used twice")
        seen.add(p.id)
    return probes


# ---- arches (the arithmetic lives in sparkdoctor.arch) ----------------------------------------

def _version_tuple(version: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version or "")[:3])


def ptxas_knows(version: str | None, arch: str) -> bool | None:
    first = first_cuda_for(arch)
    have = _version_tuple(version)
    if not first or len(have) < 2:
        return None
    return have[:2] >= first


def plain_sm12x_settings(env: dict[str, str], capabilities: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """(setting, arch) for every plain 12.x entry (no a/f suffix) of the build arch-list variables,
    and a vLLM whose compiled kernels target plain sm_121 (a source build that lost the suffix)."""
    found = []
    for name in ("TORCH_CUDA_ARCH_LIST", "FLASHINFER_CUDA_ARCH_LIST"):
        for token in re.split(r"[;,\s]+", env.get(name, "")):
            match = re.fullmatch(r"(?:sm_)?(12)\.?(\d)([af]?)(\+PTX)?", token.strip(), re.IGNORECASE)
            if match and not match.group(3):
                arch = f"sm_12{match.group(2)}"
                if (f"{name}={env[name]}", arch) not in found:
                    found.append((f"{name}={env[name]}", arch))
    built = (capabilities or {}).get("vllm.cubin_archs")
    archs = built.get("value") if isinstance(built, dict) else None
    # Release wheels carry plain sm_120 SASS next to sm_120f on purpose; plain sm_121 only comes from
    # a Spark source build whose arch list lost its suffix.
    if isinstance(archs, list) and "sm_121" in archs:
        found.append((f"vLLM's compiled kernels target {', '.join(a for a in archs if a.startswith('sm_12'))}", "sm_121"))
    return found


# ---- tools ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tool:
    path: str
    version: str | None
    source: str
    identity: str  # realpath, size, mtime and version: changes whenever the binary does
    used_by: tuple[str, ...] = ()  # e.g. ("triton",): who really calls this ptxas
    archs: tuple[str, ...] = ()  # the --gpu-name values it lists, when the toolkits collector read them

    def knows(self, arch: str) -> bool | None:
        if self.archs:
            return arch in self.archs
        return ptxas_knows(self.version, arch)


def _identity(path: str, version: str | None) -> str | None:
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    return f"{real}|{st.st_size}|{st.st_mtime_ns}|{version}"


def usable_ptxas(toolkits: list[dict[str, Any]]) -> tuple[list[Tool], list[str]]:
    """The ptxas binaries that can be tried (one per real file), and why others cannot."""
    tools, skipped, seen = [], [], set()
    for tk in toolkits:
        if tk.get("tool", "ptxas") != "ptxas":
            continue
        path = tk.get("path")
        if tk.get("error") or not path:
            skipped.append(f"{path or 'ptxas'}: {tk.get('error') or 'no path'}")
            continue
        ident = _identity(path, tk.get("version"))
        if ident is None:
            skipped.append(f"{path}: not readable")
            continue
        real = ident.split("|", 1)[0]
        if real in seen:
            continue
        seen.add(real)
        tools.append(
            Tool(path, tk.get("version"), str(tk.get("source") or "unknown"), ident, tuple(tk.get("used_by") or ()), tuple(tk.get("archs") or ()))
        )
    return tools, skipped


def preferred(tools: list[Tool], arch: str) -> list[Tool]:
    """The ptxas that matters first: one that knows the arch, from a CUDA toolkit (system, pip)
    before the one an env var or Triton brings."""
    return sorted(tools, key=lambda t: (t.knows(arch) is False, _SOURCE_RANK.get(t.source, 9)))


def _nvidia_wheel_bins() -> list[Path]:
    """bin/ folders of nvidia-* wheels in sparkdoctor's own environment (nvidia-cuda-nvdisasm)."""
    try:
        import nvidia  # namespace package of the CUDA wheels
    except ImportError:
        return []
    return sorted(Path(p) / sub / "bin" for p in getattr(nvidia, "__path__", []) for sub in os.listdir(p) if sub.startswith("cu"))


def find_disassembler(ptxas: Tool) -> Tool | None:
    """nvdisasm or cuobjdump: next to the ptxas (same CUDA release), else on PATH, else from an
    nvidia-cuda-nvdisasm / -cuobjdump wheel installed beside sparkdoctor."""
    folders = [Path(ptxas.path).parent, Path(os.path.realpath(ptxas.path)).parent]
    candidates = [folder / name for folder in folders for name in ("nvdisasm", "cuobjdump")]
    candidates += [Path(p) for p in (shutil.which("nvdisasm"), shutil.which("cuobjdump")) if p]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return Tool(str(candidate), None, "path", _identity(str(candidate), None) or str(candidate))
    for folder in _nvidia_wheel_bins():
        for name in ("nvdisasm", "cuobjdump"):
            candidate = folder / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return Tool(str(candidate), None, "pip", _identity(str(candidate), None) or str(candidate))
    return None


# ---- compiling -----------------------------------------------------------------------------------

_PTXAS_MESSAGE = re.compile(r"^ptxas\s+(?:\S+?, line (\d+); )?(error|fatal)\s*:\s*(.*)$")


def ptxas_errors(stderr: str) -> str:
    """The distinct error lines of a ptxas run, without the temp file path, joined with ' | '."""
    messages: list[str] = []
    for line in stderr.splitlines():
        match = _PTXAS_MESSAGE.match(line.strip())
        if not match:
            continue
        text = match.group(3).strip()
        if text == "Ptx assembly aborted due to errors":
            continue
        text = f"line {match.group(1)}: {text}" if match.group(1) else text
        if text not in messages:
            messages.append(text)
    return " | ".join(messages[:3]) or (stderr.strip().splitlines() or ["no message"])[-1][:300]


def explain(error: str, arch: str, probe: Probe, ptxas_version: str | None) -> str | None:
    """Why ptxas said no, in words a user can act on."""
    base = arch_base(arch)
    suffix = parse_arch(arch)[1]
    first = first_cuda_for(arch)
    first_text = f"CUDA {first[0]}.{first[1]}" if first else "a newer CUDA"
    if "not defined for option" in error or "does not support .target" in error or "Unknown target" in error:
        return f"ptxas {ptxas_version or '?'} does not know {arch}: targeting it needs {first_text} or newer"
    if "Unsupported .version" in error:
        return f"ptxas {ptxas_version or '?'} is older than PTX ISA {probe.ptx_version_for(arch)}, which this probe needs for {arch}"
    if "not supported on .target" in error:
        if probe.needs_suffix and not suffix and base in probe.family:
            return f"these instructions need {base}a or {base}f; a build that targets plain {base} cannot use them"
        return f"{arch} does not have this instruction"
    return None


@dataclass
class Job:
    probe: Probe
    ptxas: Tool
    arch: str
    purpose: str  # "target" | "diagnosis"
    setting: str | None = None
    primary: bool = False  # the preferred ptxas for this probe and arch: its SASS is read
    key: str = ""
    disassembler: Tool | None = None
    record: dict[str, Any] = field(default_factory=dict)
    cubin: bytes | None = None
    cacheable: bool = False


def _job_key(job: Job) -> str:
    material = {
        "v": CACHE_VERSION,
        "ptxas": job.ptxas.identity,
        "source": job.probe.sha256,
        "arch": job.arch,
        "disassembler": job.disassembler.identity if job.disassembler else None,
        "primary": job.primary,  # only the preferred ptxas's SASS is read
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def _new_record(job: Job) -> dict[str, Any]:
    return {
        "ptxas": job.ptxas.path, "ptxas_version": job.ptxas.version, "ptxas_source": job.ptxas.source,
        "used_by": list(job.ptxas.used_by), "arch": job.arch, "purpose": job.purpose, "outcome": None, "compiled": False, "error": None,
        "explanation": None, "sass_ok": None, "sass": None, "ran": None, "verified": None,
        "run_note": None, "ms": None, "cached": False,
        **({"setting": job.setting} if job.setting else {}),
    }


def compile_job(job: Job, workdir: Path, hung: set[str], lock: threading.Lock) -> None:
    """Assemble one probe with one ptxas; fill job.record, job.cubin, job.cacheable."""
    rec = job.record
    with lock:
        if job.ptxas.identity in hung:
            rec.update(outcome="timeout", error=f"not tried: this ptxas hung on another probe (over {COMPILE_TIMEOUT:.0f}s)")
            return
    folder = workdir / (job.key[:24] or f"{job.probe.id}-{job.arch}-{id(job)}")  # keys are unique per job
    folder.mkdir()
    ptx, cubin = folder / "in.ptx", folder / "out.cubin"
    ptx.write_text(job.probe.ptx_for(job.arch), encoding="utf-8")
    result = proc.run([job.ptxas.path, f"-arch={job.arch}", "-o", str(cubin), str(ptx)], timeout=COMPILE_TIMEOUT)
    rec["ms"] = round(result.seconds * 1000, 1)
    if result.ok and cubin.is_file():
        rec.update(outcome="compiled", compiled=True)
        job.cubin = cubin.read_bytes()
        job.cacheable = True
    elif result.timed_out:
        rec.update(outcome="timeout", error=f"ptxas timed out after {COMPILE_TIMEOUT:.0f}s")
        with lock:
            hung.add(job.ptxas.identity)
    elif result.start_error or result.signal:
        rec.update(outcome="error", error=result.describe_failure())
    else:
        error = ptxas_errors(result.stderr or result.stdout)
        rec.update(outcome="rejected", error=error, explanation=explain(error, job.arch, job.probe, job.ptxas.version))
        job.cacheable = True


# ---- SASS ----------------------------------------------------------------------------------------

_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.+?)\s*;")
_FUNCTION = re.compile(r"(?:\.text\.|Function\s*:\s*)([A-Za-z_$][\w$]*)")


def split_sass(text: str) -> dict[str, list[str]]:
    """Instructions per kernel from nvdisasm or cuobjdump -sass output."""
    out: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        header = _FUNCTION.search(line)
        if header and "/*" not in line.split(header.group(0))[0]:
            current = header.group(1)
            out.setdefault(current, [])
            continue
        ins = _SASS_LINE.search(line)
        if ins and current:
            out[current].append(re.sub(r"\s+", " ", ins.group(1)))
    return out


def disassemble(tool: Tool, cubin: Path) -> tuple[dict[str, list[str]] | None, str | None]:
    argv = [tool.path, "-c", str(cubin)] if Path(tool.path).name.startswith("nvdisasm") else [tool.path, "-sass", str(cubin)]
    result = proc.run(argv, timeout=DISASSEMBLE_TIMEOUT)
    if not result.ok:
        return None, result.describe_failure()
    return split_sass(result.stdout), None


def check_sass(probe: Probe, instructions: list[str] | None, why_not: str | None) -> tuple[bool | None, str]:
    if instructions is None:
        return None, f"SASS not checked: {why_not}"
    pattern = re.compile(probe.sass)
    for ins in instructions:
        if pattern.search(ins):
            return True, ins
    seen = sorted({ins.split()[0] for ins in instructions if re.search(r"MMA|F2FP", ins.split()[0])})
    return False, f"no instruction matches /{probe.sass}/; tensor/convert instructions: {', '.join(seen) or 'none'}"


def read_sass(jobs: list[Job], workdir: Path, tag: str) -> tuple[dict[str, list[str]] | None, str | None]:
    """Instructions per kernel of one module holding every probe of the group (same ptxas, arch and
    disassembler), assembled and disassembled once: nvdisasm costs ~0.6 s of CPU per call, whatever
    the cubin's size."""
    first = jobs[0]
    assert first.disassembler is not None
    version = max((j.probe.ptx_version_for(j.arch) for j in jobs), key=_version_tuple)
    module = f".version {version}\n.target {first.arch}\n.address_size 64\n" + "\n".join(j.probe.body() for j in jobs)
    folder = workdir / f"sass-{tag}-{first.key[:24]}"
    folder.mkdir()
    (folder / "all.ptx").write_text(module, encoding="utf-8")
    result = proc.run([first.ptxas.path, f"-arch={first.arch}", "-o", str(folder / "all.cubin"), str(folder / "all.ptx")], timeout=COMPILE_TIMEOUT)
    if not result.ok:
        return None, f"the combined module did not assemble: {result.describe_failure()}"
    return disassemble(first.disassembler, folder / "all.cubin")


def apply_sass(jobs: list[Job], functions: dict[str, list[str]] | None, why_not: str | None) -> None:
    for job in jobs:
        instructions = None if functions is None else functions.get(job.probe.entry, [])
        ok, text = check_sass(job.probe, instructions, why_not)
        tool = Path(job.disassembler.path).name if job.disassembler else None
        job.record["sass_ok"], job.record["sass"] = ok, f"{tool}: {text}" if ok is not None else text


# ---- cache ---------------------------------------------------------------------------------------


class Cache:
    def __init__(self, root: Path | None, read: bool) -> None:
        self.root, self.read = root, read

    def get(self, key: str, want_cubin: bool = False) -> tuple[dict[str, Any], bytes | None] | None:
        if self.root is None or not self.read:
            return None
        try:
            data = json.loads((self.root / f"{key}.json").read_text(encoding="utf-8"))
            cubin = (self.root / f"{key}.cubin").read_bytes() if want_cubin and data.get("record", {}).get("compiled") else None
        except (OSError, ValueError):
            return None  # missing or corrupt: recompute
        if not isinstance(data, dict) or data.get("key") != key or data.get("v") != CACHE_VERSION or not isinstance(data.get("record"), dict):
            return None
        return data["record"], cubin

    def put(self, key: str, record: dict[str, Any], cubin: bytes | None = None) -> None:
        if self.root is None:
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if cubin is not None:
                _atomic_write(self.root / f"{key}.cubin", cubin)
            body = {"v": CACHE_VERSION, "key": key, "record": {k: v for k, v in record.items() if k != "cached"}}
            _atomic_write(self.root / f"{key}.json", json.dumps(body).encode())
        except OSError:
            pass  # a read-only cache costs speed, never a result


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


# ---- running on the GPU --------------------------------------------------------------------------


def matching_gpu(gpus: list[dict[str, Any]] | None, arch: str) -> dict[str, Any] | None:
    """The first GPU a cubin for `arch` runs on (a: the same cc; plain and f: later minors too)."""
    if not gpus:
        return None
    from sparkdoctor.cuda_driver import cc_matches

    want = arch_cc(arch)
    exact = parse_arch(arch)[1] == "a"
    for gpu in gpus or []:
        cc = _version_tuple(str(gpu.get("cc") or ""))
        if len(cc) >= 2 and cc_matches((cc[0], cc[1]), want, exact):
            return gpu
    return None


def run_on_gpu(requests: list[dict[str, Any]], timeout: float | None = None) -> list[dict[str, Any]]:
    """Run cuda_driver's job runner in a child process; one result per request, always."""
    from sparkdoctor import cuda_driver

    script = Path(cuda_driver.__file__)
    result = proc.run([sys.executable, "-B", str(script), "--run-jobs"], timeout=timeout or RUN_TIMEOUT, input=json.dumps({"jobs": requests}))
    failed = None
    if not result.ok:
        failed = f"the GPU runner failed: {result.describe_failure()}"
    else:
        try:
            reply = json.loads(result.stdout)
        except ValueError:
            reply, failed = {}, "the GPU runner printed no JSON"
        if not failed and reply.get("error"):
            failed = reply["error"]
        if not failed:
            by_id = {r.get("id"): r for r in reply.get("results", [])}
            return [by_id.get(req["id"]) or {"id": req["id"], "ok": False, "error": "no result"} for req in requests]
    return [{"id": req["id"], "ok": False, "error": failed} for req in requests]


def reference_function(probe: Probe, field_name: str):
    """The fp_reference function a probe's `inputs` / `reference` field names (imported only when
    a GPU run needs it: `check` stays fast without one)."""
    from sparkdoctor import fp_reference

    fn = getattr(fp_reference, getattr(probe, field_name), None)
    if not callable(fn):
        raise ProbeError(f"{probe.path}: header field '{field_name}' names no function of sparkdoctor.fp_reference")
    return fn


def probe_buffers(probe: Probe) -> dict[str, bytes | int]:
    buffers = reference_function(probe, "inputs")()
    if list(buffers) != list(probe.params):
        raise ProbeError(f"{probe.path}: {probe.inputs}() returns buffers {list(buffers)}, the kernel takes {list(probe.params)}")
    return buffers


def verify_outputs(probe: Probe, buffers: dict[str, bytes | int], outputs: dict[str, bytes]) -> tuple[bool, str]:
    inputs = {k: v for k, v in buffers.items() if isinstance(v, bytes)}
    notes, ok = [], True
    for expected in reference_function(probe, "reference")(inputs):
        same, note = expected.compare(outputs.get(expected.name, b""))
        ok, notes = ok and same, notes + [note]
    return ok, "; ".join(notes)


def gpu_request(job: Job, cubin_path: Path, buffers: dict[str, bytes | int], request_id: str) -> dict[str, Any]:
    return {
        "id": request_id, "cubin": str(cubin_path), "entry": job.probe.entry, "threads": job.probe.threads, "grid": 1,
        "cc": list(arch_cc(job.arch)), "exact_cc": parse_arch(job.arch)[1] == "a",
        "buffers": [{"name": n, "hex": v.hex()} if isinstance(v, bytes) else {"name": n, "size": v} for n, v in buffers.items()],
    }


def _gpu_phase(jobs: list[Job], ctx: Context, cache: Cache, workdir: Path | None) -> None:
    facts = ctx.facts
    driver = (facts.driver or {}).get("version")
    pending: list[tuple[Job, dict[str, Any], str]] = []
    for job in jobs:
        rec = job.record
        if job.purpose != "target":
            continue
        if not rec["compiled"]:
            rec["run_note"] = "not run: it did not compile"
            continue
        gpu = matching_gpu(facts.gpus, job.arch)
        if gpu is None:
            where = "GPU unknown (the gpu collector found nothing it could read)" if facts.gpus is None else f"no {job.arch} GPU here"
            rec["run_note"] = f"compiled, not run: {where}"
            continue
        run_key = hashlib.sha256(f"{job.key}|{gpu.get('name')}|{gpu.get('cc')}|{driver}".encode()).hexdigest()
        hit = cache.get(run_key)
        if hit is not None:
            rec.update({k: hit[0].get(k) for k in ("ran", "verified", "run_note", "run_ms")})
            continue
        pending.append((job, gpu, run_key))
    if not pending:
        return
    assert workdir is not None
    requests, cases = [], {}
    for index, (job, gpu, run_key) in enumerate(pending):
        cubin = job.cubin
        if cubin is None:
            hit = cache.get(job.key, want_cubin=True)
            cubin = hit[1] if hit else None
        if cubin is None:
            job.record["run_note"] = "not run: the cached cubin is gone; run again with --no-cache"
            continue
        path = workdir / f"run-{index}.cubin"
        path.write_bytes(cubin)
        buffers = probe_buffers(job.probe)
        cases[str(index)] = (job, gpu, run_key, buffers)
        requests.append(gpu_request(job, path, buffers, str(index)))
    for result in run_on_gpu(requests) if requests else []:
        job, gpu, run_key, buffers = cases[result["id"]]
        rec = job.record
        rec["run_ms"] = result.get("ms")
        device = result.get("device") or {}
        where = f"{device.get('name') or gpu.get('name')} (cc {device.get('cc') or gpu.get('cc')})"
        if not result.get("ok"):
            rec.update(ran=False, verified=None, run_note=f"could not run on {where}: {result.get('error')}")
            continue
        outputs = {name: bytes.fromhex(h) for name, h in result.get("outputs", {}).items()}
        verified, note = verify_outputs(job.probe, buffers, outputs)
        rec.update(ran=True, verified=verified, run_note=f"ran on {where}: {note}")
        cache.put(run_key, rec)


# ---- the collector -------------------------------------------------------------------------------


def target_arch(facts) -> tuple[str, str, str | None]:
    """(arch, source, note): the arch in use (detected, given or assumed; see sparkdoctor.arch)."""
    arch = settle(facts.arch)
    note = f"arch {arch['value']} assumed ({arch.get('why')})" if arch.get("source") == "assumed" else None
    return arch["value"], arch.get("source") or "given", note


def compile_arch(probe: Probe, target: str) -> tuple[str, str | None]:
    try:
        base = arch_base(target)
    except ValueError:
        return probe.home_arch, f"{target!r} is not a CUDA arch: compiled for {probe.home_arch}"
    if base in probe.family:
        return target, None
    return probe.home_arch, f"the target {target} is not {'/'.join(probe.family)}: compiled for {probe.home_arch}"


def selected_probes(probes: list[Probe], target: str) -> list[Probe]:
    base = arch_base(target) if _ARCH_RE.match(target) else None
    return [p for p in probes if p.always or base in p.family]


def run(ctx: Context) -> dict[str, Any]:
    if not ctx.kernels:
        return {}
    target, source, target_note = target_arch(ctx.facts)
    probes = selected_probes(load_probes(), target)
    toolkits = ctx.facts.toolkits
    if toolkits is None:
        return {"kernels": {p.id: _skipped(p, target, "ptxas unknown: the toolkits collector did not report") for p in probes}}
    tools, unusable = usable_ptxas(toolkits)
    if not tools:
        why = "no ptxas found" + (f" ({'; '.join(unusable)})" if unusable else "")
        return {"kernels": {p.id: _skipped(p, target, why) for p in probes}}

    settings = plain_sm12x_settings(ctx.facts.env or {}, ctx.facts.capabilities)
    disassemblers = {t.identity: find_disassembler(t) for t in tools}
    jobs: list[Job] = []
    arch_notes: dict[str, tuple[str | None, str]] = {}
    for probe in probes:
        arch, note = compile_arch(probe, target)
        arch_notes[probe.id] = (note, "home") if note else (target_note, source)
        ordered = preferred(tools, arch)
        for rank, tool in enumerate(ordered):
            jobs.append(Job(probe, tool, arch, "target", primary=rank == 0, disassembler=disassemblers[tool.identity]))
        for setting, plain in settings:
            if arch_base(plain) in probe.family and plain != arch:
                jobs.append(Job(probe, ordered[0], plain, "diagnosis", setting))
    cache = Cache(ctx.cache_dir / "kernels" if ctx.cache_dir else None, read=ctx.use_cache)
    pending = []
    for job in jobs:
        job.key = _job_key(job)
        job.record = _new_record(job)
        hit = cache.get(job.key)
        if hit is None:
            pending.append(job)
        else:
            job.record.update(hit[0], cached=True)

    needs_gpu = any(j.purpose == "target" and matching_gpu(ctx.facts.gpus, j.arch) for j in jobs)
    workdir_ctx = None
    if pending or needs_gpu:
        import tempfile  # cold path only: `check` with a warm cache never needs a scratch folder

        workdir_ctx = tempfile.TemporaryDirectory(prefix="sparkdoctor-kernels-")
    try:
        workdir = Path(workdir_ctx.name) if workdir_ctx else None
        if pending and workdir is not None:
            _compile_phase(pending, workdir)
            for job in pending:
                if job.cacheable:
                    cache.put(job.key, job.record, job.cubin)
        _gpu_phase(jobs, ctx, cache, workdir)
    finally:
        if workdir_ctx:
            workdir_ctx.cleanup()
    return {"kernels": {p.id: _entry(p, [j for j in jobs if j.probe is p], *arch_notes[p.id]) for p in probes}}


def _compile_phase(pending: list[Job], workdir: Path) -> None:
    """Compile every pending job, ≤ MAX_PARALLEL at once, and read the SASS of the preferred ptxas's
    cubins. The SASS read starts at once, beside the compiles (it is the slow part); it is redone
    without the failures only if some probe of its group did not compile."""
    from concurrent.futures import ThreadPoolExecutor

    groups: dict[tuple[str, str, str | None], list[Job]] = {}
    for job in pending:
        if job.purpose == "target" and job.primary:
            dis = job.disassembler.identity if job.disassembler else None
            groups.setdefault((job.ptxas.identity, job.arch, dis), []).append(job)
    hung: set[str] = set()
    lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=MAX_PARALLEL) as pool:
        early = {key: pool.submit(read_sass, group, workdir, "all") for key, group in groups.items() if group[0].disassembler}
        list(pool.map(lambda j: compile_job(j, workdir, hung, lock), pending))
        for key, group in groups.items():
            compiled = [j for j in group if j.record["compiled"]]
            if not compiled:
                continue
            if key not in early:
                apply_sass(compiled, None, "no nvdisasm or cuobjdump found")
            elif len(compiled) == len(group):
                apply_sass(compiled, *early[key].result())
            else:
                apply_sass(compiled, *read_sass(compiled, workdir, "compiled"))
    for job in pending:
        if job.purpose == "target" and job.record["compiled"] and not job.primary:
            job.record["sass"] = "SASS not read: it is read for the preferred ptxas only (a disassembler call costs ~0.6 s)"


def _skipped(probe: Probe, target: str, why: str) -> dict[str, Any]:
    arch, _ = compile_arch(probe, target)
    return {"kind": "ptx", "title": probe.title, "instruction": probe.instruction, "status": "skipped", "detail": why, "arch": arch, "runs": []}


def _entry(probe: Probe, jobs: list[Job], arch_note: str | None, arch_source: str) -> dict[str, Any]:
    runs = [j.record for j in jobs]
    target_runs = [r for r in runs if r["purpose"] == "target"]
    primary = target_runs[0]  # jobs were queued in preference order
    status, detail = _judge(primary, target_runs)
    for r in target_runs[1:]:
        if r.get("used_by") and not r["compiled"] and r["outcome"] != primary["outcome"]:
            detail += f"; the ptxas {', '.join(r['used_by'])} uses, {_who(r)}, does not: {r['explanation'] or r['error']}"
    for r in runs:
        if r["purpose"] == "diagnosis" and not r["compiled"]:
            detail += f"; {r['setting']} targets plain {r['arch']}: {r['explanation'] or r['error']}"
    if arch_note:
        detail = f"{arch_note}; {detail}"
    return {
        "kind": "ptx", "title": probe.title, "instruction": probe.instruction, "status": status, "detail": detail,
        "arch": primary["arch"], "arch_source": arch_source, "runs": runs,
    }


def _who(rec: dict[str, Any]) -> str:
    return f"ptxas {rec['ptxas_version'] or '?'} ({rec['ptxas_source']})"


def _judge(primary: dict[str, Any], target_runs: list[dict[str, Any]]) -> tuple[str, str]:
    compiled = sum(1 for r in target_runs if r["compiled"])
    tally = f" ({compiled}/{len(target_runs)} ptxas compiled it)" if len(target_runs) > 1 else ""
    outcome = primary["outcome"]
    if outcome == "timeout":
        return "timeout", f"{_who(primary)}: {primary['error']}{tally}"
    if outcome == "error":
        return "error", f"{_who(primary)}: {primary['error']}{tally}"
    if outcome == "rejected":
        why = f" ({primary['explanation']})" if primary["explanation"] else ""
        return "fail", f"{_who(primary)} rejected it for {primary['arch']}: {primary['error']}{why}{tally}"
    parts = [f"compiled for {primary['arch']} by {_who(primary)}{tally}"]
    if primary["sass_ok"] is not None:
        parts.append(f"SASS {'has' if primary['sass_ok'] else 'lacks'} the instruction ({primary['sass']})")
    if primary["ran"] is False:
        return "error", "; ".join(parts + [primary["run_note"]])
    if primary["ran"] and not primary["verified"]:
        return "fail", "; ".join(parts + [f"WRONG RESULTS: {primary['run_note']}"])
    parts.append(primary["run_note"] if primary["ran"] else (primary["run_note"] or "not run"))
    return "ok", "; ".join(parts)


# capabilities (vLLM's build archs) finishes long before toolkits, so waiting on it costs nothing.
COLLECTOR = Collector("kernels", run, needs=("toolkits", "gpu", "target", "capabilities"), timeout=60)
