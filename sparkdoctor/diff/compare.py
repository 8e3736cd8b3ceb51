"""Two Facts snapshots compared field by field, each difference with a verdict (diff/rules.py).

One comparer per Facts field that has structure worth naming (packages by name, ptxas by where
it came from, kernel probes by id); any other field, including those a newer sparkdoctor or
another collector adds (a host's health, a container's details), is flattened to paths and
compared leaf by leaf, so nothing in a snapshot is silently skipped. Fields that are unknown
(None) on either side are listed as not compared: a difference that could not be seen is not
reported as agreement.

Fields that differ on every run by nature (taken_at, timings_ms) and the producing tool are not
compared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

from sparkdoctor.describe import clip, text_of
from sparkdoctor.diff.rules import (
    BENIGN,
    RISKY,
    env_verdict,
    package_verdict,
    target_key_verdict,
)
from sparkdoctor.facts import Facts, is_tracked

NOT_COMPARED = frozenset({"schema", "taken_at", "timings_ms", "tool", "errors"})
MAX_LEAVES = 5000  # per field compared leaf by leaf, and entries of a field compared by key (packages, env, ...)
MAX_VALUES = 200_000  # values in one field, at any depth (a modified torch lists thousands of files)


class TooManyLeaves(Exception):
    """A field with more than MAX_LEAVES readings (or MAX_VALUES values): comparing part of it would read as agreement
    on the rest, and comparing all of a hostile one (300,000 variables) took minutes and printed a difference each."""


VIRTUAL = "a virtual interface (a container's veth, a bridge, docker0): no cable between the nodes runs on it"


@dataclass
class Difference:
    area: str  # the Facts field (packages, driver, env, ...)
    key: str  # what in it (a package name, a variable, a probe id)
    a: str | None  # the value in A; None: absent there
    b: str | None
    verdict: str  # risky | benign
    why: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class Comparison:
    differences: list[Difference]
    not_compared: list[dict[str, str]]  # {"area", "why"}

    @property
    def risky(self) -> list[Difference]:
        return [d for d in self.differences if d.verdict == RISKY]

    @property
    def benign(self) -> list[Difference]:
        return [d for d in self.differences if d.verdict == BENIGN]


def compare(a: Facts, b: Facts) -> Comparison:
    diffs: list[Difference] = []
    unknown: list[dict[str, str]] = []
    for name in dict.fromkeys(f.name for facts in (a, b) for f in fields(facts)):
        if name in NOT_COMPARED:
            continue
        va, vb = getattr(a, name, None), getattr(b, name, None)
        if (va is None) != (vb is None):
            unknown.append({"area": name, "why": f"not observed in {'A' if va is None else 'B'}"})
        if va is None or vb is None:
            continue
        try:
            _bounded(va)
            _bounded(vb)
            diffs += COMPARERS.get(name, _generic)(name, va, vb)
        except TooManyLeaves:
            unknown.append({"area": name, "why": f"over {MAX_LEAVES:,} readings in one snapshot"})
    return Comparison(diffs, unknown)


def _bounded(value: object) -> None:
    """TooManyLeaves for a field of more than MAX_LEAVES entries, or MAX_VALUES values at any depth."""
    if isinstance(value, (dict, list)) and len(value) > MAX_LEAVES:
        raise TooManyLeaves
    stack, seen = [value], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise TooManyLeaves
        if isinstance(item, dict):
            stack += item.values()
        elif isinstance(item, list):
            stack += item


def _show(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return clip(", ".join(text_of(v) for v in value) or "none", 300)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return clip(value, 300)


def _diff(area: str, key: str, va: object, vb: object, verdict: str, why: str) -> list[Difference]:
    if va == vb:
        return []
    return [Difference(area, clip(key, 300), _show(va), _show(vb), verdict, why)]  # a key is a snapshot's too


def _keyed(area: str, ma: dict, mb: dict, judge: Callable[[str], tuple[str, str]],
           value: Callable[[object], object] = lambda v: v) -> list[Difference]:
    """One difference per key of either mapping that differs (as `value` reads it), judged by `judge(key)`."""
    return [d for key in sorted(set(ma) | set(mb))
            for d in _diff(area, key, value(ma.get(key)), value(mb.get(key)), *judge(key))]


def _leafwise(area: str, va: object, vb: object, judge: Callable[[str], tuple[str, str]]) -> list[Difference]:
    """One difference per leaf path of either side that differs, judged by `judge(path)`."""
    return [d for key, a, b in _leaf_pairs(va, vb) for d in _diff(area, key, a, b, *judge(key))]


def _packages(area: str, pa: dict, pb: dict) -> list[Difference]:
    out: list[Difference] = []
    for name in sorted(set(pa) | set(pb)):
        a, b = pa.get(name) or {}, pb.get(name) or {}
        verdict, why = package_verdict(name)
        if not a or not b:
            which = "A" if not a else "B"
            out += _diff(area, name, a.get("version"), b.get("version"), verdict, f"not installed in {which}; {why}")
            continue
        out += _diff(area, name, a.get("version"), b.get("version"), verdict, why)
        if name == "torch":
            out += _diff(area, "torch CUDA build", a.get("cuda"), b.get("cuda"), RISKY,
                         "torch built for another CUDA: kernels and NCCL differ")
        for kind in ("files_modified", "files_missing"):
            sa, sb = sorted(a.get(kind) or []), sorted(b.get(kind) or [])
            if sa != sb:
                tracked = is_tracked(name)
                out += _diff("modified files", f"{name} {kind[6:]}", sa, sb, RISKY if tracked else BENIGN,
                             "the nodes run different code under one version number" if tracked else
                             "files of a package outside the serving stack")
    return out


def _driver(area: str, da: dict, db: dict) -> list[Difference]:
    out = _diff(area, "version", da.get("version"), db.get("version"), RISKY,
                "different driver between nodes (has broken Ray/vLLM clusters: vllm-project/vllm#4114)")
    out += _diff(area, "CUDA", da.get("cuda"), db.get("cuda"), RISKY, "the driver supports another CUDA version")
    out += _diff(area, "libcuda", da.get("libcuda"), db.get("libcuda"), RISKY, "another libcuda")
    return out


def _cutedsl(area: str, ca: dict, cb: dict) -> list[Difference]:
    out = _diff(area, "active build", ca.get("active_build"), cb.get("active_build"), RISKY,
                "another cutlass-dsl library build on disk: FP4 kernels compile differently")
    out += _diff(area, "bundled CUDA", ca.get("bundled_cuda"), cb.get("bundled_cuda"), RISKY,
                 "the DSL compiles with another bundled CUDA")
    out += _diff(area, "installed builds", sorted(ca.get("installed_builds") or []),
                 sorted(cb.get("installed_builds") or []), BENIGN, "the active build decides; the others are dormant")
    return out


def _ptxas_key(t: dict) -> str:
    """`triton ptxas-blackwell`: where it came from and which binary; paths differ between venvs."""
    path = text_of(t.get("path") or t.get("tool") or "ptxas")
    return f"{t.get('source') or '?'} {path.rsplit('/', 1)[-1]}"


def _toolkits(area: str, ta: list, tb: list) -> list[Difference]:
    out: list[Difference] = []
    by_a, by_b = ({_ptxas_key(t): t for t in ts if isinstance(t, dict)} for ts in (ta, tb))
    for key in sorted(set(by_a) | set(by_b)):
        a, b = by_a.get(key) or {}, by_b.get(key) or {}
        used = bool(a.get("used_by") or b.get("used_by"))
        verdict = RISKY if used else BENIGN
        why = f"used by {', '.join(map(text_of, a.get('used_by') or b.get('used_by') or []))}: kernels compile differently" \
            if used else "a ptxas nothing is configured to use"
        out += _diff("ptxas", key, a.get("version"), b.get("version"), verdict, why)
        if a and b:
            out += _diff("ptxas", f"{key} used by", sorted(a.get("used_by") or []), sorted(b.get("used_by") or []),
                         RISKY, "another consumer runs this ptxas")
    return out


def _kernels(area: str, ka: dict, kb: dict) -> list[Difference]:
    return _keyed(area, ka, kb, lambda _: (RISKY, "the kernel probe ends differently: the toolchains compile differently"),
                  lambda k: k.get("status") if isinstance(k, dict) else (None if k is None else text_of(k)))


def _target(area: str, ta: dict, tb: dict) -> list[Difference]:
    out: list[Difference] = []
    for key, va, vb in _leaf_pairs(ta, tb):
        if key.startswith("markers."):  # PEP 508 variables: the Python version and the host again, in other words
            continue
        if key == "version":
            minor_a, minor_b = (".".join(text_of(v).split(".")[:2]) if v else None for v in (va, vb))
            verdict = RISKY if minor_a != minor_b else BENIGN
            why = "another Python minor version" if verdict == RISKY else "another Python patch release"
        else:
            verdict, why = target_key_verdict(key)
        out += _diff(area, key, va, vb, verdict, why)
    return out


HOST_KEYS = {"machine": (RISKY, "another CPU architecture"),
             "kernel": (BENIGN, "another kernel (ConnectX and GPU drivers ride on it: worth aligning)")}


def _host(area: str, ha: dict, hb: dict) -> list[Difference]:
    return _leafwise(area, ha, hb, lambda key: HOST_KEYS.get(key, (BENIGN, "a host reading, not the serving stack")))


def _arch(area: str, aa: dict, ab: dict) -> list[Difference]:
    return _diff(area, "value", aa.get("value"), ab.get("value"), RISKY, "evaluated for another GPU arch")


def _gpus(area: str, ga: list, gb: list) -> list[Difference]:
    def names(gs: list) -> list[str]:
        return sorted(f"{g.get('name')} cc {g.get('cc')}" for g in gs if isinstance(g, dict))

    return _diff(area, "models", names(ga), names(gb), RISKY, "other GPUs")


def _constraints(area: str, ca: list, cb: list) -> list[Difference]:
    def pins(rows: list) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for row in rows:
            if isinstance(row, dict):
                found.setdefault(text_of(row.get("name")), []).append(text_of(row.get("requirement") or row.get("specifier") or ""))
        return {k: sorted(v) for k, v in found.items()}

    return _keyed(area, pins(ca), pins(cb), lambda _: (BENIGN, "a pin in a constraints file, not what is installed"))


def _capabilities(area: str, ca: dict, cb: dict) -> list[Difference]:
    return _keyed(area, ca, cb, lambda _: (BENIGN, "read from the installed files: follows the package versions above"),
                  lambda c: c.get("value") if isinstance(c, dict) else c)


OTHER_IMAGE = (RISKY, "another image content: eugr's launcher refuses two nodes like this")
CONTAINER_KEYS = {"fingerprint": OTHER_IMAGE, "platform": OTHER_IMAGE,
                  "runtime": (RISKY, "another container runtime: one node may run the image without the GPU")}


def _container(area: str, ca: dict, cb: dict) -> list[Difference]:
    """The image record of a container target: its content fingerprint decides."""
    return _leafwise(area, ca, cb, lambda key: CONTAINER_KEYS.get(
        key, (BENIGN, "ids, names and digests differ between stores; the fingerprint decides")))


def _host_health(area: str, ha: dict, hb: dict) -> list[Difference]:
    """Live readings are benign; what NCCL and the container need from both hosts is not: the same
    ConnectX interface names, MTU, speed and state, GPU clocks locked on both or neither, a GPU runtime."""
    out: list[Difference] = []
    links_a = {text_of(x.get("name")): x for x in ha.get("links") or [] if isinstance(x, dict)}
    links_b = {text_of(x.get("name")): x for x in hb.get("links") or [] if isinstance(x, dict)}
    for name in sorted(set(links_a) | set(links_b)):
        a, b = links_a.get(name), links_b.get(name)
        virtual = all(x.get("physical") is False for x in (a, b) if x is not None)
        if a is None or b is None:
            out += _diff(area, f"link {name}", "present" if a else None, "present" if b else None,
                         *((BENIGN, VIRTUAL) if virtual else
                           (RISKY, "interface names must be identical on every node (NCCL_SOCKET_IFNAME, NCCL_IB_HCA)")))
            continue
        for key in ("state", "mtu", "speed_mbps", "rate"):
            out += _diff(area, f"link {name} {key}", a.get(key), b.get(key),
                         *((BENIGN, VIRTUAL) if virtual else
                           (RISKY, "the nodes' links differ: NCCL runs at the slower one, or not at all")))
    gpus_a, gpus_b = ({g.get("index"): g for g in h.get("gpus") or [] if isinstance(g, dict)} for h in (ha, hb))
    for index in sorted(set(gpus_a) & set(gpus_b), key=text_of):
        out += _diff(area, f"gpu {index} clocks_locked", gpus_a[index].get("clocks_locked"), gpus_b[index].get("clocks_locked"),
                     RISKY, "clocks locked on one node only (nvidia-smi -lgc does not survive a reboot)")
    docker_a, docker_b = ha.get("docker") or {}, hb.get("docker") or {}
    if isinstance(docker_a, dict) and isinstance(docker_b, dict):
        for key in ("default_runtime", "nvidia_cdi", "nvidia_runtime_binary"):
            out += _diff(area, f"docker {key}", docker_a.get(key), docker_b.get(key), RISKY,
                         "the container gets the GPU another way (or not at all) on one node")
    rest_a, rest_b = ({k: v for k, v in h.items() if k not in ("links", "docker")} for h in (ha, hb))
    for key, va, vb in _leaf_pairs(rest_a, rest_b):
        if not key.endswith("clocks_locked"):
            out += _diff(area, key, va, vb, BENIGN, "a live reading of the host, not its configuration")
    return out


def _generic(area: str, va: object, vb: object) -> list[Difference]:
    return _leafwise(area, va, vb, lambda key: (RISKY, "a content fingerprint") if "fingerprint" in key.lower()
                     else (BENIGN, f"a {area} reading, not the serving stack"))


def _leaf_pairs(va: object, vb: object) -> list[tuple[str, object, object]]:
    fa, fb = dict(_leaves(va)), dict(_leaves(vb))
    return [(k, fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb))]


def _leaves(value: object) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    stack: list[tuple[str, object]] = [("", value)]
    while stack:
        if len(out) >= MAX_LEAVES:
            raise TooManyLeaves
        path, item = stack.pop()
        if isinstance(item, dict) and item:
            stack += [(f"{path}.{k}" if path else str(k), v) for k, v in item.items()]
        elif isinstance(item, list) and item and any(isinstance(v, (dict, list)) for v in item):
            stack += [(f"{path}[{i}]", v) for i, v in enumerate(item)]
        elif not path and isinstance(item, (dict, list)) and not item:
            continue  # an empty field: nothing observed to compare, leaf by leaf
        else:
            out.append((path or "value", item))
    return out


COMPARERS: dict[str, Callable[[str, Any, Any], list[Difference]]] = {
    "packages": _packages,
    "driver": _driver,
    "cutedsl": _cutedsl,
    "toolkits": _toolkits,
    "env": lambda area, ea, eb: _keyed(area, ea, eb, env_verdict),
    "kernels": _kernels,
    "target": _target,
    "host": _host,
    "arch": _arch,
    "gpus": _gpus,
    "constraints": _constraints,
    "capabilities": _capabilities,
    "container": _container,
    "host_health": _host_health,
}
