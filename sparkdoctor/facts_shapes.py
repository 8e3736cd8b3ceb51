"""The shape of every Facts field (as facts.py documents them), checked when a snapshot is read.

A snapshot is user input: a wrong type three levels down used to surface as "internal error:
<Python exception>" somewhere in the matrix or a renderer, or worse, pass silently
(`"arch": {"value": 121}`). Every field is checked here, once, and the first problem is one line
naming its path (`field 'packages.torch.version' should be a version string or null, got int`). Keys this sparkdoctor does
not know are allowed (a newer producer may add them); keys it knows must have their documented
type. Strings are bounded, so a 5,000-digit "version" never reaches int() or a regex.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

from sparkdoctor.arch import real_arch_problem
from sparkdoctor.errors import InputError

MAX_VERSION = 200  # characters in any version string
MAX_TEXT = 1_000_000  # characters in any other string (a detail, an error, a path)


def table(value: object) -> dict[str, object]:
    """A JSON object as read, or {} for anything else (missing, null, damaged)."""
    return value if isinstance(value, dict) else {}


def array(value: object) -> list[object]:
    """A JSON array as read, or [] for anything else."""
    return value if isinstance(value, list) else []


class ShapeError(InputError, ValueError):
    """The first field that does not have its documented shape: path and one line why."""

    code = "snapshot-shape"


@dataclass(frozen=True)
class Str:
    max_len: int = MAX_TEXT
    name: str = "a string"


@dataclass(frozen=True)
class Opt:
    inner: object  # the shape, or None


@dataclass(frozen=True)
class ListOf:
    item: object


@dataclass(frozen=True)
class MapOf:
    value: object


@dataclass(frozen=True)
class Finite:
    """A number a float holds: JSON writes 10**400 as an int, which no time arithmetic survives."""


@dataclass(frozen=True)
class Arch:
    """A real GPU arch name (sm_121a), or None."""


ANY = object()
TEXT = Str()
VERSION = Str(MAX_VERSION, "a version string")
NUMBER = (int, float)


def _record(**keys: object) -> dict[str, object]:
    """An object whose known keys are all optional and may be null (null: unknown)."""
    return {k: Opt(v) for k, v in keys.items()}


FIELD_SHAPES: dict[str, object] = {
    "taken_at": TEXT,
    "tool": _record(name=TEXT, version=VERSION, host_python=VERSION),
    "target": _record(kind=TEXT, python=TEXT, chosen_by=TEXT, version=VERSION, implementation=TEXT, prefix=TEXT,
                      base_prefix=TEXT, is_venv=bool, executable=TEXT, container=TEXT, engine=TEXT, os=TEXT,
                      fix_unsettled=TEXT, markers=MapOf(TEXT)),
    "container": _record(name=TEXT, id=TEXT, engine=TEXT, image=TEXT, image_id=TEXT, runtime=TEXT, platform=TEXT,
                         layers=ListOf(TEXT), config_digest=TEXT, repo_digests=ListOf(TEXT), fingerprint=TEXT,
                         image_error=TEXT),
    "host_health": _record(
        live=bool, root=TEXT,
        memory=_record(total_kib=NUMBER, available_kib=NUMBER, swap_total_kib=NUMBER, swap_used_kib=NUMBER,
                       page_cache_kib=NUMBER, reclaimable_kib=NUMBER, hugetlb_kib=NUMBER, hugetlb_free_kib=NUMBER,
                       unified=bool),
        memory_limit=_record(bytes=int, used_bytes=int, cgroup=TEXT),
        pressure=MapOf(Opt(NUMBER)),
        gpus=ListOf(_record(index=int, clock_graphics_mhz=NUMBER, clock_graphics_max_mhz=NUMBER, clock_sm_mhz=NUMBER,
                            clock_memory_mhz=NUMBER, power_w=NUMBER, power_limit_w=NUMBER, pstate=int,
                            temperature_c=NUMBER, throttle_reasons=ListOf(TEXT), throttle_mask=int, clocks_locked=bool,
                            memory_used_mib=NUMBER, memory_total_mib=NUMBER, compute_processes=int,
                            processes=ListOf(_record(pid=int, name=TEXT, used_mib=NUMBER)))),
        docker=_record(daemon_json=TEXT, runtimes=ListOf(TEXT), default_runtime=TEXT, cdi_specs=ListOf(TEXT),
                       nvidia_cdi=bool, nvidia_runtime_binary=bool, error=TEXT),
        links=ListOf(_record(name=TEXT, kind=TEXT, driver=TEXT, state=TEXT, speed_mbps=NUMBER, mtu=int, rate=TEXT,
                             port=int)),
        kernel=_record(nvrm_no_memory=int, xids=int, oom_kills=int, oom_kills_cgroup=int, hung_tasks=int),
        oom_daemons=_record(earlyoom_kills=int, oomd_kills=int),
        kernel_source=TEXT, kernel_refused=ListOf(TEXT), errors=ListOf(TEXT)),
    "host": _record(os=TEXT, machine=TEXT, kernel=VERSION),
    "arch": _record(value=Arch(), source=TEXT, detected=Arch(), why=TEXT),
    "gpus": ListOf(_record(index=int, name=TEXT, cc=VERSION, arch=TEXT, memory_total_mib=NUMBER, unified=bool,
                           addressing_mode=TEXT)),
    "driver": _record(version=VERSION, cuda=VERSION, libcuda=VERSION, source=TEXT),
    "toolkits": ListOf(_record(tool=TEXT, path=TEXT, realpath=TEXT, version=VERSION, source=TEXT, sources=ListOf(TEXT),
                               paths=ListOf(TEXT), package=TEXT, package_version=VERSION, used_by=ListOf(TEXT),
                               sm_121a=bool, sm_121a_by=TEXT, archs=ListOf(TEXT), error=TEXT)),
    "packages": MapOf({**_record(name=TEXT, location=TEXT, integrity=TEXT, files_modified=ListOf(TEXT),
                                 files_missing=ListOf(TEXT), files_unreadable=ListOf(_record(path=TEXT, error=TEXT)),
                                 files_shared=MapOf(ListOf(TEXT)), files_checked=int, no_record=TEXT, direct_url=dict, cuda=VERSION,
                                 git_version=TEXT, requires=ListOf(TEXT)),
                       "version": VERSION, "!required": ("version",)}),
    "cutedsl": _record(active_build=TEXT, bundled_cuda=VERSION, installed_builds=ListOf(TEXT), evidence=TEXT, sha256=TEXT,
                       files=list),
    "flashinfer_kernels": _record(flashinfer=VERSION, vllm_download_kernels=bool, torch_cuda=VERSION, jit_cache_wanted=bool,
                                  cubin=_record(version=VERSION, matches=bool),
                                  jit_cache=_record(version=VERSION, matches=bool, requires=ListOf(TEXT)),
                                  providers=ListOf(_record(arch=TEXT, version=VERSION, matches=bool))),
    "env": MapOf(TEXT),
    "modules_without_metadata": ListOf({**_record(path=TEXT), "module": TEXT, "distribution": TEXT, "version": Opt(VERSION),
                                        "!required": ("module", "distribution")}),
    "constraints": ListOf({**_record(file=TEXT, line=int, source=TEXT, specifier=TEXT, marker=TEXT, extras=ListOf(TEXT),
                                     url=TEXT, included_from=TEXT),
                           "name": TEXT, "requirement": TEXT, "!required": ("name",)}),
    "kernels": MapOf(_record(kind=TEXT, status=TEXT, detail=TEXT, arch=TEXT, title=TEXT, instruction=TEXT,
                             runs=ListOf(_record(arch=TEXT, outcome=TEXT, ptxas=TEXT, ptxas_source=TEXT,
                                                 ptxas_version=VERSION, purpose=TEXT, error=TEXT, explanation=TEXT,
                                                 run_note=TEXT, sass=TEXT, used_by=ListOf(TEXT), compiled=bool,
                                                 ran=bool, verified=bool, sass_ok=bool, cached=bool, ms=NUMBER,
                                                 run_ms=NUMBER)))),
    "capabilities": MapOf(_record(evidence=TEXT)),
    "recipe": dict,
    "fleet": {**_record(node=TEXT, hostname=TEXT, boot_id=TEXT, driver_flavour=TEXT, cuda_toolkit=VERSION, nccl=dict,
                        nccl_conf=ListOf(dict), cma=MapOf(ANY), roce_v2_gid_index=MapOf(Opt(int)), in_container=bool,
                        clock_skew_s=NUMBER, nodes=int, drift=ListOf(TEXT), odd=ListOf(TEXT), unpaired_links=ListOf(TEXT),
                        fabric=dict, topology=TEXT, fabric_findings=ListOf(dict), memory=dict)},
    "errors": ListOf({"collector": TEXT, "error": TEXT, "!required": ("collector", "error")}),
    "timings_ms": MapOf(NUMBER),
}


def check_field(name: str, value: object, lengths: bool = True) -> None:
    """ShapeError naming the path of the first part of `value` that is not FIELD_SHAPES[name]; lengths=False checks
    the types alone (a live probe's readings: a real METADATA may hold a version of thousands of digits)."""
    shape = FIELD_SHAPES.get(name)
    if shape is not None and value is not None:
        check_value(value, shape, name, lengths)


CLIPPED = "\u2026"  # ends a string fit() shortened: no PEP 440 version ends in it, so a clipped version is unknown


def fit(name: str, value: object) -> object:
    """`value` of field `name` (its types already checked) with every string past its bound clipped to it, ending in
    CLIPPED: a live probe's readings have a snapshot's bounds, so what `check` judges live is what `--save-facts`
    writes and `--facts` reads back (a 5,000-digit version from a real METADATA was judged, then refused on read)."""
    shape = FIELD_SHAPES.get(name)
    return value if shape is None else _fit(value, shape)


def _fit(value: object, shape: object) -> object:
    if isinstance(shape, Opt):
        return _fit(value, shape.inner)
    if isinstance(shape, Str) and isinstance(value, str) and len(value) > shape.max_len:
        return value[: shape.max_len - len(CLIPPED)] + CLIPPED
    if isinstance(shape, dict) and isinstance(value, dict):
        return {k: _fit(v, shape[k]) if isinstance(k, str) and not k.startswith("!") and k in shape else v
                for k, v in value.items()}
    if isinstance(shape, MapOf) and isinstance(value, dict):
        return {k: _fit(v, shape.value) for k, v in value.items()}
    if isinstance(shape, ListOf) and isinstance(value, list):
        return [_fit(v, shape.item) for v in value]
    return value


def _type_name(value: object) -> str:
    return "null" if value is None else {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__)


def _want(shape: object) -> str:
    if isinstance(shape, Str):
        return shape.name
    if isinstance(shape, Opt):
        return f"{_want(shape.inner)} or null"
    if isinstance(shape, (dict, MapOf)) or shape is dict:
        return "an object"
    if isinstance(shape, ListOf) or shape is list:
        return "a list"
    if isinstance(shape, Arch):
        return "a GPU arch such as sm_121a"
    if shape is bool:
        return "true or false"
    if shape is int:
        return "an integer"
    if shape == NUMBER:
        return "a number"
    return str(shape)


def check_value(value: object, shape: object, path: str, lengths: bool = True) -> None:
    """ShapeError naming the path of the first part of `value` that is not `shape` (also for other documents of
    this module's shapes: a fleet node's answer)."""
    if shape is ANY:
        return
    if isinstance(shape, Opt):
        if value is not None:
            check_value(value, shape.inner, path, lengths)
        return
    if isinstance(shape, Str):
        if not isinstance(value, str):
            raise ShapeError(f"field '{path}' should be {shape.name}, got {_type_name(value)}")
        if lengths and len(value) > shape.max_len:
            raise ShapeError(f"field '{path}' has {len(value):,} characters, more than the {shape.max_len:,} a real one has")
        return
    if isinstance(shape, Finite):
        if isinstance(value, bool) or not isinstance(value, NUMBER):
            raise ShapeError(f"field '{path}' should be a number, got {_type_name(value)}")
        with contextlib.suppress(OverflowError):
            if math.isfinite(float(value)):
                return
        raise ShapeError(f"field '{path}' is not a finite number a float can hold")
    if isinstance(shape, Arch):
        if not isinstance(value, str):
            raise ShapeError(f"field '{path}' should be {_want(shape)}, got {_type_name(value)}")
        problem = real_arch_problem(value[:50])
        if problem:
            raise ShapeError(f"field '{path}' is {value[:50]!r}: {problem}")
        return
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            raise ShapeError(f"field '{path}' should be an object, got {_type_name(value)}")
        for key in shape.get("!required", ()):
            if key not in value:
                raise ShapeError(f"field '{path}' needs a {key!r}")
        for key, inner in shape.items():
            if not key.startswith("!") and key in value:
                check_value(value[key], inner, f"{path}.{key}", lengths)
        return
    if isinstance(shape, MapOf):
        if not isinstance(value, dict):
            raise ShapeError(f"field '{path}' should be an object, got {_type_name(value)}")
        for key, item in value.items():
            check_value(item, shape.value, f"{path}.{str(key)[:100]}", lengths)
        return
    if isinstance(shape, ListOf):
        if not isinstance(value, list):
            raise ShapeError(f"field '{path}' should be a list, got {_type_name(value)}")
        for i, item in enumerate(value):
            check_value(item, shape.item, f"{path}[{i}]", lengths)
        return
    types = shape if isinstance(shape, tuple) else (shape,)
    if isinstance(value, bool) and bool not in types:  # JSON true is not a number here
        raise ShapeError(f"field '{path}' should be {_want(shape)}, got a boolean")
    if not isinstance(value, types):
        raise ShapeError(f"field '{path}' should be {_want(shape)}, got {_type_name(value)}")
