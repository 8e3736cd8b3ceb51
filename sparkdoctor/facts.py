"""Facts: one JSON-able snapshot of everything observed about a target.

Every later stage (matrix, findings, fixes, bench) reads Facts and nothing else, so a saved snapshot
is evaluated exactly like a live box.

Unknown is not absent: a field that is None means "could not be observed" (its collector failed or
did not run); an empty list/dict means "observed, and there is nothing". The shape of each field is written
beside it below, the longest here (sparkdoctor/facts_shapes.py checks them when a snapshot is read; keep the two in
step). Every key is optional and may be null (unknown), and a snapshot may hold keys a newer producer added.
The nested sections that travel untyped:

  host_health {"live": bool (False: read from a snapshot, never judged), "root": where /proc and /sys were read,
               "memory": {"total_kib", "available_kib", "swap_total_kib", "swap_used_kib", "page_cache_kib",
               "reclaimable_kib", "hugetlb_kib", "hugetlb_free_kib"}, "memory_limit": {"bytes", "used_bytes", "cgroup"}
               (the memory cgroup this process runs in, when it or an ancestor has a limit), "pressure": {"some_avg10", "some_avg60", "full_avg10", "full_avg60"},
               "gpus": [{"index", "clock_graphics_mhz", "clock_graphics_max_mhz", "clock_memory_mhz", "power_w",
               "power_limit_w", "pstate", "temperature_c", "throttle_reasons": [name], "clocks_locked": bool,
               "memory_used_mib", "memory_total_mib", "compute_processes", "processes": [{"pid", "name", "used_mib"}]}],
               "docker": {"daemon_json", "runtimes": [name], "default_runtime", "cdi_specs": [path], "nvidia_cdi": bool,
               "nvidia_runtime_binary": bool} (None: docker not installed),
               "links": [{"name", "kind": "net" | "infiniband", "driver", "state", "speed_mbps", "mtu", "rate"}],
               "kernel": {"nvrm_no_memory", "xids", "oom_kills" (the box ran out), "oom_kills_cgroup" (a cgroup's own limit), "hung_tasks"} (counts in /dev/kmsg since boot),
               "oom_daemons": {"earlyoom_kills", "oomd_kills"} (their kills in this boot's journal; None: not read),
               "errors": [str]}  (each part None where it could not be read)
  kernels     {probe id: {"kind": "ptx" | "cutedsl", "status", "detail", "arch", "runs": [...], ...}}
  fleet       {"node", "hostname", "boot_id", "driver_flavour": "open" | "proprietary", "cuda_toolkit", "nccl": {"candidates":
               [{"path", "realpath", "source": "process" | "LD_PRELOAD" | "VLLM_NCCL_SO_PATH" | "pip" | "system", "version",
               "build_id", "sha256" (None when there is a build_id), "size"}], "loaded": candidate, "loaded_by", "pip_system_same_version_other_build"},
               "nccl_conf": [{"path", "settings", "sha256"}], "cma": {"total_kib", "free_kib", "cmdline"},
               "roce_v2_gid_index": {netdev: index}, "fabric": {"root", "rdma": [{"device", "netdevs", "fw_ver", "board_id",
               "pci": {"address", "current_link_width", "max_link_width", "current_link_speed", "max_link_speed"}, "ports":
               [{"port", "state", "phys_state", "rate", "rate_gbps", "link_layer", "netdev", "gids": [{"index", "gid", "type",
               "ndev", "ipv4"}]}]}], "netdevs": {name: {"state", "mtu", "speed_mbps", "physical", "addrs", "subnets"}},
               "addresses_from", "nccl": {KEY: {"value", "source"}}} (probes/fleet_node/fleetnode_fabric.py),
               "in_container", "clock_skew_s", and from the N-way comparison:
               "nodes": how many nodes answered, "drift": [risky "area: key" differences of the fleet], "odd": [those
               where this node is not on the majority value], "unpaired_links": [links up on a subnet no other node has],
               "topology": "pair" | "triangle" | "ring" | "switch" | "partial" | "single" | "none", "fabric_findings":
               [{"rule", "node", "link", "setting", "detail"}] (sparkdoctor/fleet/fabric.py)}
               (None: not a `fleet check`; sparkdoctor/fleet/)
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypedDict

from sparkdoctor.errors import InputError, OneLine
from sparkdoctor.files import write_text
from sparkdoctor.inputs import STREAM_BYTES, NonFinite, loads_finite, read_text
from sparkdoctor.names import canonicalize_name

SCHEMA = 1


class ToolFacts(TypedDict, total=False):
    name: str | None
    version: str | None
    host_python: str | None


class KernelWheel(TypedDict, total=False):
    version: str | None
    matches: bool | None
    requires: list[str] | None  # jit_cache only: provider arch tags


class KernelProvider(TypedDict, total=False):
    arch: str | None  # "sm120f"
    version: str | None
    matches: bool | None


class FlashinferKernelFacts(TypedDict, total=False):
    """The kernel wheels `vllm download-kernels` installs, judged for the arch by sparkdoctor/flashinfer_kernels.py."""

    flashinfer: str | None  # its version
    vllm_download_kernels: bool | None  # the installed vLLM has the command; None: no vLLM
    torch_cuda: str | None
    jit_cache_wanted: bool | None  # torch's CUDA >= 12.9
    cubin: KernelWheel | None
    jit_cache: KernelWheel | None
    providers: list[KernelProvider] | None


class CollectorError(TypedDict):
    collector: str
    error: str


class FactsError(OneLine, InputError, ValueError):
    """A snapshot that cannot be read; the message names the file and the field, in one line."""

    code = "snapshot"


@dataclass
class Facts:
    schema: int = SCHEMA
    # when the snapshot was taken; None: a snapshot read from a file that does not say (never the time it was read)
    taken_at: str | None = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    tool: ToolFacts = field(default_factory=lambda: ToolFacts())
    # {"kind": "python" | "container", "python": path, "chosen_by", "version": "3.12.3", "implementation", "prefix",
    # "base_prefix", "is_venv", "executable"; a container adds "container": name, "engine", "os": the container's OS}
    target: dict[str, Any] | None = None
    host: dict[str, Any] | None = None  # {"os": "Ubuntu 24.04", "machine": "aarch64", "kernel"} (always the machine's)
    # {"name", "id", "engine", "image", "image_id", "runtime", "platform": "linux/arm64", "layers": [digest],
    # "config_digest", "repo_digests", "fingerprint": 16 hex over platform + layers + config, "image_error"}
    # (None: the target is not a container)
    container: dict[str, Any] | None = None
    host_health: dict[str, Any] | None = None
    # {"value": "sm_121a", "source": "detected" | "given" | "assumed", "detected": arch, "why"} (assumed: no GPU /
    # unreadable GPU and no --arch; older snapshots may hold "none" | "unknown")
    arch: dict[str, Any] = field(default_factory=lambda: {"value": None, "source": "unknown"})
    # [{"index", "name", "cc": "12.1", "arch": "sm_121a", "memory_total_mib", "unified", "addressing_mode"}]
    gpus: list[dict[str, Any]] | None = None
    # {"version": "580.95.05", "cuda": "13.0", "libcuda", "source": "nvml" | "nvidia-smi" | "libcuda"} ({}: no NVIDIA driver)
    driver: dict[str, Any] | None = None
    # [{"tool": "ptxas", "path", "realpath", "version", "source": "system" | "pip" | "triton" | "env", "sources",
    #   "package", "package_version", "used_by": ["triton"], "sm_121a": bool | None, "sm_121a_by", "archs", "error"}]
    toolkits: list[dict[str, Any]] | None = None
    # {canonical name: {"name", "version", "location"}} for every distribution ("metadata_error": METADATA was
    # unreadable, name and version come from the folder name); tracked ones add "integrity": "ok" | "modified" |
    # "unchecked" | "no-record", "files_modified", "files_missing", "files_unreadable": [{"path", "error"}],
    # "files_shared": {path: [other dists listing it]}, "files_overwritten": {path: "dist version" whose RECORD the
    # bytes match (not a modification)}, "files_checked", "files_unverified", "direct_url" (PEP 610), "no_record": the
    # .dist-info folder when it has no RECORD (pip cannot uninstall it); torch adds
    # "cuda" (None: CPU build), "git_version" and, when torch/version.py cannot tell, "build_error" (build unknown).
    # None: some sys.path folder could not be listed, so any package may be there (unknown)
    packages: dict[str, dict[str, Any]] | None = None
    # {"active_build": "libs-cu13" | "libs-base" | "libs-cu12" | "unknown" | None (not installed), "bundled_cuda":
    # "13.1", "installed_builds": [...], "evidence", "sha256", "files": [...]}
    cutedsl: dict[str, Any] | None = None
    # [{"module": "triton", "distribution": "triton", "path", "version": from its `__version__ = '...'` or None}]: a tracked
    # component's top-level package on sys.path that no metadata folder describes (pip does not list it); None: not looked
    modules_without_metadata: list[dict[str, str | None]] | None = None
    flashinfer_kernels: FlashinferKernelFacts | None = None  # None: FlashInfer not installed, or an older snapshot
    env: dict[str, str] | None = None  # secret-looking values redacted
    # [{"file", "line", "source", "requirement", "name", "specifier", "marker", "extras", "url", "included_from"}]
    constraints: list[dict[str, Any]] | None = None
    kernels: dict[str, Any] | None = None
    capabilities: dict[str, Any] | None = None  # capability id: {"value", "evidence": "file:line"} (static, from installed files)
    # {"name", "argv", "model": audit/served_model.model_facts}: the recipe `recipe check` judges; None everywhere else
    recipe: dict[str, Any] | None = None
    fleet: dict[str, Any] | None = None
    errors: list[CollectorError] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)

    # ---- accessors the matrix and renderers use -------------------------------------------------
    def package(self, name: str) -> dict[str, Any] | None:
        """The installed distribution `name`, None if absent. Raises nothing; check packages is not None first."""
        if self.packages is None:
            return None
        return self.packages.get(canonicalize_name(name))

    def unlisted(self, name: str) -> dict[str, str | None] | None:
        """The modules_without_metadata row of `name` when no metadata lists it: its code imports, its version is
        unknown to pip (what its `__version__` line says is in the row), so an entry about it cannot be judged."""
        name = canonicalize_name(name)
        if self.package(name) is not None:
            return None
        return next((m for m in self.modules_without_metadata or [] if m.get("distribution") == name), None)

    def add_error(self, collector: str, error: str) -> None:
        self.errors.append({"collector": collector, "error": error})

    def taken(self) -> str:
        """When the snapshot was taken, as printed: `unknown` for one that does not say."""
        return self.taken_at or "unknown"

    # ---- (de)serialisation ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: object, source: str = "snapshot") -> Facts:
        """Facts from a parsed snapshot; FactsError (one line: source, field path, why) for any field
        that does not have its documented shape (sparkdoctor/facts_shapes.py)."""
        # imported on use: check loads sparkdoctor.facts_shapes only on the runs that get here
        from sparkdoctor.facts_shapes import ShapeError, check_field

        if not isinstance(data, dict):
            raise FactsError(f"{source}: expected a JSON object at the top level")
        schema = data.get("schema")
        if type(schema) is not int or schema != SCHEMA:  # `true` == 1 in Python, not in a schema number
            # a name for what is there, never its repr: a nested list or a 5,000-digit int has none
            shown = "missing" if "schema" not in data else "null" if schema is None else repr(schema)[:50] if isinstance(
                schema, (str, bool, float)) or (
                type(schema) is int and abs(schema) < 10**20) else f"a {type(schema).__name__}"
            raise FactsError(f"{source}: field 'schema' is {shown}; this sparkdoctor reads schema {SCHEMA}")
        known = {f.name for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                continue  # newer producers may add fields; ignoring them loses nothing we use
            if value is None and key in ("arch", "tool", "errors", "timings_ms"):
                continue  # fields that are never unknown: their default
            try:
                check_field(key, value)
            except ShapeError as exc:
                raise FactsError(f"{source}: {exc}") from None
            try:
                kwargs[key] = scrub(value)
            except RecursionError:
                raise FactsError(f"{source}: field '{key}' is nested too deeply") from None
        kwargs.setdefault("taken_at", None)  # a snapshot that does not say when it was taken: unknown, not now
        return cls(**kwargs)

    @classmethod
    def load(cls, path: Path) -> Facts:
        try:  # a file, or a pipe with a writer (`--facts <(...)`); never a FIFO nobody writes
            text = read_text(path, max_bytes=STREAM_BYTES, stream=True)  # a file too: a sparse 8 GB one is no snapshot
        except OSError as exc:
            raise FactsError(f"{path}: cannot read snapshot: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise FactsError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        try:
            data = loads_finite(text)
        except json.JSONDecodeError as exc:
            raise FactsError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
        except NonFinite as exc:  # no reading carries one, and `check --facts --format json` would print it as non-JSON
            raise FactsError(f"{path}: not a snapshot: the number {exc} is not finite") from None
        except RecursionError:  # arrays in arrays deeper than Python's stack
            raise FactsError(f"{path}: not a snapshot: nested too deeply to read") from None
        except ValueError:  # json.loads' plain ValueError: an integer of more digits than int() reads
            raise FactsError(f"{path}: not a snapshot: a number longer than {sys.get_int_max_str_digits():,} digits "
                             "(more than Python reads as an integer)") from None
        return cls.from_dict(_snapshot_in(data, path), source=str(path))

    def save(self, path: Path) -> None:
        """Write atomically, and only to a regular file (sparkdoctor.output); OSError otherwise. Strings past a snapshot's
        bounds are clipped (facts_shapes.fit): a snapshot sparkdoctor writes is one it reads back."""
        from sparkdoctor.facts_shapes import fit

        write_text(Path(path), json.dumps({key: fit(key, value) for key, value in self.to_dict().items()}, indent=2) + "\n")

    # ---- fingerprint ----------------------------------------------------------------------------
    def fingerprint_material(self) -> dict[str, object]:
        """What decides behaviour and speed; a change here makes earlier conclusions stale."""
        pkgs = self.packages or {}
        return {
            "arch": self.arch.get("value"),
            "gpus": sorted(((g.get("name"), g.get("cc")) for g in (self.gpus or [])), key=_none_first),
            "driver": (self.driver or {}).get("version"),
            "cuda_driver": (self.driver or {}).get("cuda"),
            "packages": {
                name: [p.get("version"), sorted(p.get("files_modified") or []), p.get("cuda")]
                for name, p in sorted(pkgs.items())
                if is_tracked(name)
            },
            # what else decides speed, by version (docs/bench.md "What a run is keyed to"); present only when
            # one is installed, so a venv without them keeps the fingerprint it always had
            **({"speed_packages": speed} if (speed := {name: p.get("version") for name, p in sorted(pkgs.items())
                                                         if decides_speed(name)}) else {}),
            "cutedsl_build": (self.cutedsl or {}).get("active_build"),
            "ptxas": sorted(((t.get("version"), tuple(t.get("used_by") or ())) for t in (self.toolkits or [])), key=_none_first),
            "env": {k: v for k, v in sorted((self.env or {}).items())
                    if k in FINGERPRINT_ENV or (k.startswith("VLLM_") and not _PER_NODE.search(k))},
            # only for a container: snapshots of plain venvs keep the fingerprint they always had
            **({"image": self.container.get("fingerprint")} if self.container else {}),
            # the checkpoint served (config + safetensors header digest; bench/model_identity.py), for a run only
            **({"model": ident} if (ident := ((self.recipe or {}).get("model") or {}).get("identity")) else {}),
        }

    def fingerprint(self) -> str:
        blob = json.dumps(self.fingerprint_material(), sort_keys=True, separators=(",", ":"), default=list)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# The serving stack whose versions and files decide behaviour; also the packages whose files are
# integrity-checked against their RECORD.
TRACKED_PREFIXES = ("torch", "triton", "vllm", "flashinfer", "nvidia-cutlass-dsl", "cuda-python", "cuda-bindings", "quack-kernels", "b12x")

# A node's own address and ports (VLLM_HOST_IP, VLLM_PORT, VLLM_DP_MASTER_IP, ..._HOST): not the toolchain, and in a
# shared report's fingerprint a few thousand guesses away from the address the report replaced
_PER_NODE = re.compile(r"(HOST|ADDR|_IP$|_IP_|PORT)")
FINGERPRINT_ENV = frozenset({"CUTE_DSL_ARCH", "TORCH_CUDA_ARCH_LIST", "FLASHINFER_CUDA_ARCH_LIST", "TRITON_PTXAS_PATH",
                             "TRITON_PTXAS_BLACKWELL_PATH", "TRITON_OVERRIDE_ARCH", "CUDA_HOME", "PYTORCH_CUDA_ALLOC_CONF"})


def _snapshot_in(data: object, path: Path) -> object:
    """The snapshot a file holds: the file itself, or the `facts` of a `check --format json` document (the same
    snapshot `--save-facts` writes). Any other sparkdoctor document is refused by name: read as a snapshot, its
    fields would be `not observed`, and a diff of two such files would agree on nothing it could see."""
    if not isinstance(data, dict) or "envelope" not in data or "command" not in data:
        return data
    if isinstance(data.get("facts"), dict):
        return data["facts"]
    command = data["command"] if isinstance(data["command"], str) else "?"
    raise FactsError(f"{path}: a `sparkdoctor {command[:40]}` JSON document, not one snapshot; "
                     "`sparkdoctor check --save-facts FILE` writes one (or `check --format json`, whose `facts` it is)")


def scrub(value: object) -> Any:
    """`value` with every lone surrogate spelled out (\\udcff): a file name that is not UTF-8 (read
    with surrogateescape) or a "\\udcff" escape in a snapshot can then be printed, written and
    hashed like any other text. Every Facts field passes through here on its way in."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def _none_first(row: tuple[object, ...]) -> tuple[tuple[bool, object], ...]:
    """A sort key for rows holding unknowns (None): a ptxas whose version could not be read sorts
    before the rest instead of raising TypeError; rows without None sort exactly as before."""
    return tuple((value is not None, value if value is not None else "") for value in row)


# Packages outside TRACKED_PREFIXES whose version decides serving speed (their files are not integrity-checked,
# which keeps `check` fast). Chosen from what vLLM loads: its pins (requirements/common.txt: transformers,
# tokenizers, compressed-tensors, xgrammar; cuda.txt: flashinfer, torch, already tracked), the libraries its
# kernels and torch's dlopen (the nvidia-* wheels: cuBLAS, cuDNN, NCCL, the CUDA runtime and NVRTC for JIT
# kernels, cuSPARSELt, NVSHMEM), and the alternative kernel stacks a GB10 image swaps in (tokenspeed-triton,
# deep-gemm).
SPEED_PACKAGES = ("transformers", "tokenizers", "compressed-tensors", "xgrammar", "tokenspeed-triton", "deep-gemm",
                  "nvidia-cublas", "nvidia-cudnn", "nvidia-nccl", "nvidia-cuda-runtime", "nvidia-cuda-nvrtc",
                  "nvidia-cusparselt", "nvidia-nvshmem")


def decides_speed(name: str) -> bool:
    return not is_tracked(name) and any(name == p or name.startswith(p + "-") for p in SPEED_PACKAGES)


def is_tracked(name: str) -> bool:
    return name == "torch" or any(name == p or name.startswith(p + "-") for p in TRACKED_PREFIXES)
