"""What a maintainer asks for in a GB10 bug, as format-free sections of (label, value) rows.

The rows follow `vllm collect-env` (system, PyTorch, Python, CUDA/GPU, the versions of relevant
libraries as `[pip3] name==version`, environment variables) and add what that script cannot see:
the cutlass-dsl build really on disk, every ptxas and who uses it, files that differ from their
RECORD, the kernel probes, and whatever newer collectors put in the Facts (a container target's
image and fingerprint, the host's health) without this module having to know their names: a
Facts field or target key it does not know is shown as flattened rows, never dropped.

Sections are drawn from the Facts they are given (the redacted copy, for a redacted report) and
are rendered by github.py and forum.py; the words for target, host, GPU, arch and driver come from
describe.py, so the report says what `check` says.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from sparkdoctor.describe import (
    clip,
    describe_arch,
    describe_driver,
    describe_gpus,
    describe_host,
    describe_package,
    kernel_rows,
    text_of,
)
from sparkdoctor.facts import Facts

# Substrings of package names `vllm collect-env` lists (its DEFAULT_PIP_PATTERNS), plus the GB10 stack.
RELEVANT_PACKAGES = ("torch", "numpy", "triton", "optree", "onnx", "nccl", "transformers", "zmq", "nvidia", "pynvml",
                     "flashinfer", "vllm", "cutlass", "cuda", "tvm-ffi", "quack", "b12x", "ray", "xformers", "tokenizers",
                     "safetensors", "sglang", "deep-gemm", "deep-ep")
# The Facts fields this module renders by name; any other field is shown generically.
KNOWN_FIELDS = frozenset({"schema", "taken_at", "tool", "target", "host", "arch", "gpus", "driver", "toolkits", "packages",
                          "cutedsl", "env", "constraints", "kernels", "capabilities", "recipe", "errors", "timings_ms",
                          "container"})
PYTHON_TARGET_KEYS = ("kind", "python", "chosen_by", "version", "implementation", "prefix", "base_prefix", "is_venv",
                      "executable")
MAX_LISTED_FILES = 20  # modified files per package; the snapshot has them all
MAX_ROWS = 400  # rows of one generic section (a hostile snapshot can hold millions)


@dataclass
class Section:
    title: str
    rows: list[tuple[str, str]] = field(default_factory=list)
    table: list[list[str]] | None = None  # a header row, then data rows (kernel probes)
    lines: list[str] = field(default_factory=list)  # lines shown as they are ([pip3] name==version)
    note: str = ""


def environment_sections(facts: Facts) -> list[Section]:
    found = [_system(facts), _target_extra(facts), _container(facts), _python(facts), _pytorch(facts), _cuda(facts), _cutedsl(facts),
             _libraries(facts), _modified(facts), _env(facts), _kernels(facts), *_other_fields(facts), _errors(facts)]
    return [s for s in found if s is not None and (s.rows or s.table or s.lines or s.note)]


def label_lines(s: Section) -> list[str]:
    """A section's rows as `label : value` (labels padded, to 40 characters at most), then its lines."""
    width = min(max((len(label) for label, _ in s.rows), default=0), 40)
    return [f"{label:<{width}} : {value}" for label, value in s.rows] + s.lines


def _value(value: object) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(clip(v, 200) for v in value) or "none"
    return clip(value)


def _system(facts: Facts) -> Section:
    host = facts.host if isinstance(facts.host, dict) else {}
    rows = [("OS", text_of(host.get("os") or "unknown")), ("machine", text_of(host.get("machine") or "unknown")),
            ("kernel", text_of(host.get("kernel") or "unknown"))]
    for key, value in host.items():  # what a newer host collector adds (health readings): flattened
        if key not in ("os", "machine", "kernel"):
            rows += [(key if path == "value" else f"{key}.{path}", _value(leaf)) for path, leaf in _flatten(value)]
    if not host:
        rows = [("host", describe_host(facts))]
    return Section("System", rows)


def _target_extra(facts: Facts) -> Section | None:
    """What a target other than a plain venv adds (a container's name, engine and OS) or any key a
    newer target adds."""
    target = facts.target if isinstance(facts.target, dict) else {}
    rows = []
    for key, value in target.items():
        if key not in PYTHON_TARGET_KEYS:
            rows += [(key if path == "value" else f"{key}.{path}", _value(leaf)) for path, leaf in _flatten(value)]
    if target.get("kind") not in (None, "python"):
        rows.insert(0, ("target kind", _value(target.get("kind"))))
    return Section("Target", rows) if rows else None


# The container record (a container target): the rows a maintainer compares, in this order.
CONTAINER_ROWS = ("name", "engine", "image", "image_id", "platform", "runtime", "fingerprint", "config_digest", "image_error")


def _container(facts: Facts) -> Section | None:
    """The image the stack runs from: content fingerprint (platform + layers + config) first."""
    record = getattr(facts, "container", None)
    if not isinstance(record, dict):
        return None
    rows = [(key, _value(record[key])) for key in CONTAINER_ROWS if record.get(key) is not None]
    if isinstance(record.get("layers"), list):
        rows.append(("layers", f"{len(record['layers'])} layer digests (in the snapshot)"))
    if record.get("repo_digests"):
        rows.append(("repo digests", _value(record["repo_digests"])))
    rows += [(key, _value(value)) for key, value in record.items()
             if key not in (*CONTAINER_ROWS, "layers", "repo_digests") and not isinstance(value, (dict, list))]
    return Section("Container", rows)


def _python(facts: Facts) -> Section:
    t = facts.target if isinstance(facts.target, dict) else {}
    rows = [("Python version", f"{t.get('version') or 'unknown'} ({t.get('implementation') or 'implementation unknown'})"),
            ("interpreter", _value(t.get("python") or t.get("executable"))),
            ("virtual env", _value(t.get("is_venv")) if "is_venv" in t else "unknown"),
            ("prefix", _value(t.get("prefix")))]
    if t.get("chosen_by"):
        rows.append(("chosen by", _value(t.get("chosen_by"))))
    return Section("Python", rows)


def _pytorch(facts: Facts) -> Section:
    torch = facts.package("torch") if facts.packages is not None else None
    rows = [("PyTorch version", describe_package(facts, "torch"))]
    if torch:
        rows.append(("CUDA used to build PyTorch", _value(torch.get("cuda")) if torch.get("cuda") else
                     ("unknown" if torch.get("build_error") else "none (CPU build)")))
        if torch.get("git_version"):
            rows.append(("git version", _value(torch.get("git_version"))))
    return Section("PyTorch", rows)


def _cuda(facts: Facts) -> Section:
    d = facts.driver if isinstance(facts.driver, dict) else {}
    rows = [("GPU models", describe_gpus(facts)), ("arch", describe_arch(facts)), ("NVIDIA driver", describe_driver(facts))]
    if d.get("libcuda"):
        rows.append(("libcuda", _value(d["libcuda"])))
    if d.get("source"):
        rows.append(("driver read from", _value(d["source"])))
    for t in facts.toolkits or []:
        known = t.get("sm_121a")
        sm = "knows sm_121a" if known is True else "does NOT know sm_121a" if known is False else "sm_121a unknown"
        used = ", ".join(clip(u, 100) for u in t.get("used_by") or []) or "-"
        rows.append((f"{t.get('tool') or 'tool'} ({t.get('source') or '?'})",
                     f"{clip(t.get('version') or '?', 100)} · {sm} · used by {used} · {clip(t.get('path') or '?')}"))
    if facts.toolkits == []:
        rows.append(("ptxas", "none found"))
    return Section("CUDA / GPU", rows)


def _cutedsl(facts: Facts) -> Section | None:
    c = facts.cutedsl
    if c is None:
        return Section("cutlass-dsl", [("build", "unknown (not observed)")])
    if not c.get("active_build") and not c.get("installed_builds"):
        return Section("cutlass-dsl", [("build", "not installed")])
    rows = [("version", describe_package(facts, "nvidia-cutlass-dsl")), ("active build", _value(c.get("active_build"))),
            ("installed builds", _value(c.get("installed_builds"))), ("bundled CUDA", _value(c.get("bundled_cuda")))]
    if c.get("evidence"):
        rows.append(("evidence", _value(c["evidence"])))
    return Section("cutlass-dsl", rows)


def _libraries(facts: Facts) -> Section:
    if facts.packages is None:
        return Section("Versions of relevant libraries", note="unknown: the package list could not be read")
    rows = []
    for name, pkg in sorted(facts.packages.items()):
        if any(p in name for p in RELEVANT_PACKAGES):
            mark = ""
            if pkg.get("integrity") == "modified":
                mark = f"  ({len(pkg.get('files_modified') or [])} modified, {len(pkg.get('files_missing') or [])} missing)"
            source = " (direct URL)" if pkg.get("direct_url") else ""
            rows.append(f"[pip3] {clip(pkg.get('name') or name, 200)}=={clip(pkg.get('version'), 200)}{source}{mark}")
    return Section("Versions of relevant libraries", lines=rows, note="" if rows else "none installed")


def _modified(facts: Facts) -> Section | None:
    rows = []
    for name, pkg in sorted((facts.packages or {}).items()):
        for kind in ("files_modified", "files_missing"):
            files = pkg.get(kind) or []
            for path in files[:MAX_LISTED_FILES]:
                rows.append((f"{name} {kind[6:]}", clip(path)))
            if len(files) > MAX_LISTED_FILES:
                rows.append((f"{name} {kind[6:]}", f"... and {len(files) - MAX_LISTED_FILES} more"))
    return Section("Files that differ from their RECORD", rows) if rows else None


def _env(facts: Facts) -> Section:
    if facts.env is None:
        return Section("Environment variables", note="unknown (not observed)")
    rows = [(clip(k, 200), clip(v)) for k, v in sorted(facts.env.items())]
    return Section("Environment variables", rows, note="" if rows else "none of the watched variables is set")


def _kernels(facts: Facts) -> Section | None:
    rows = kernel_rows(facts)
    if not rows:
        return None
    mark = {True: "yes", False: "NO"}
    table = [["probe", "status", "ptxas", "arch", "compiled", "SASS", "ran", "verified", "note"]]
    for r in rows:
        note = r["note"] or (r["detail"] if r["first"] else "")
        table.append([r["probe"] if r["first"] else "", r["status"] if r["first"] else "", r["ptxas"] or "-",
                      r["arch"] or "-", *(mark.get(r[k], "-") for k in ("compiled", "sass_ok", "ran", "verified")),
                      clip(note, 300)])
    return Section("Kernel probes", table=table)


def _other_fields(facts: Facts) -> list[Section]:
    """Facts fields this module does not know by name (host health, fields of a newer sparkdoctor)."""
    out = []
    for f in fields(facts):
        value = getattr(facts, f.name)
        if f.name in KNOWN_FIELDS or value is None:
            continue
        rows = [(k, _value(v)) for k, v in _flatten(value)][:MAX_ROWS] if isinstance(value, (dict, list)) else [("value", _value(value))]
        out.append(Section(f.name.replace("_", " ").capitalize(), rows, note="" if rows else "observed, nothing to report"))
    return out


def _errors(facts: Facts) -> Section | None:
    rows = [(clip(e.get("collector") or "?", 100), clip(e.get("error") or "")) for e in facts.errors if isinstance(e, dict)]
    return Section("Could not observe", rows) if rows else None


def _flatten(value: object) -> list[tuple[str, object]]:
    """[("a.b", leaf), ("list[0].c", leaf)]: nested data as rows."""
    out: list[tuple[str, object]] = []
    stack: list[tuple[str, object]] = [("", value)]
    while stack and len(out) < MAX_ROWS:
        path, item = stack.pop()
        if isinstance(item, dict) and item:
            stack += [(f"{path}.{k}" if path else str(k), v) for k, v in reversed(list(item.items()))]
        elif isinstance(item, list) and item and not all(isinstance(v, (str, int, float, bool)) for v in item):
            stack += [(f"{path}[{i}]", v) for i, v in reversed(list(enumerate(item)))]
        else:
            out.append((path or "value", item))
    return out
