"""Today's Facts moved to a predicted set of distributions, without installing them.

- versions: each changed distribution at its new version, its files as released (a reinstall replaces
  modified files, so integrity findings about the old files do not carry over);
- cutlass-dsl: the build that would be active is the libs wheel pip would write last of those
  installed (pip installs in dependency order; the cu13 and base libs wheels share their paths, so
  whichever is written last is the one on disk), else today's;
- capabilities: vLLM's and FlashInfer's (flags, env vars read, their defaults) read by the same probe
  as `check` (probes/capabilities/) from the new release's own Python files, fetched member by member
  from the released wheel (sparkdoctor.released) into a scratch folder. Capabilities that need a
  compiled library (vllm.cubin_archs) are left unknown and said so.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from sparkdoctor import proc
from sparkdoctor.whatif.resolve import Change

PROBED = {"vllm": "vllm", "flashinfer-python": "flashinfer"}  # distribution -> top-level package the probe reads
CUTEDSL_LIBS = {"nvidia-cutlass-dsl-libs-cu13": "libs-cu13", "nvidia-cutlass-dsl-libs-base": "libs-base", "nvidia-cutlass-dsl-libs-cu12": "libs-cu12"}
MAX_MEMBER = 2 * 1024 * 1024
PROBE_TIMEOUT = 120.0


def hypothetical_facts(facts: Any, changes: list[Change], reader: Any | None, notes: list[str]) -> Any:
    new = copy.deepcopy(facts)
    packages = dict(new.packages or {})
    for c in changes:
        row = dict(packages.get(c.name) or {"name": c.name})
        for key in [k for k in row if k.startswith("files_") or k in ("integrity", "direct_url", "metadata_error")]:
            row.pop(key)
        row["version"] = c.new
        row["predicted"] = True
        packages[c.name] = row
    new.packages = packages
    torch = next((c for c in changes if c.name == "torch"), None)
    if torch is not None and reader is not None:
        try:
            packages["torch"]["cuda"] = torch_cuda(reader.release("torch", torch.new).text("torch/version.py"))
        except Exception as exc:  # noqa: BLE001 - unknown, said
            packages["torch"].pop("cuda", None)
            packages["torch"]["build_error"] = f"torch/version.py of {torch.new} not read: {exc}"
            notes.append(f"torch {torch.new}: its CUDA build is unknown ({exc})")
    libs = [CUTEDSL_LIBS[c.name] for c in changes if c.name in CUTEDSL_LIBS]
    if libs:
        cute = dict(new.cutedsl or {})
        cute["active_build"] = libs[-1]
        cute["evidence"] = f"predicted: the upgrade writes {', '.join(libs)}; the last written is on disk"
        new.cutedsl = cute
    probed = [c for c in changes if c.name in PROBED]
    if probed and reader is not None:
        caps = dict(new.capabilities or {})
        for c in probed:
            prefix = PROBED[c.name] + "."
            for key in [k for k in caps if k.startswith(prefix)]:
                caps.pop(key)
            try:
                caps.update(released_capabilities(reader, c, notes))
            except Exception as exc:  # noqa: BLE001 - a release that cannot be read leaves its capabilities unknown, said
                notes.append(f"{c.name} {c.new}: capabilities not read ({type(exc).__name__}: {exc}); entries that need them cannot tell")
        new.capabilities = caps
    elif probed:
        notes.append("capabilities of the new releases were not read (no registry reader)")
    return new


def torch_cuda(version_py: str) -> str | None:
    """torch/version.py's `cuda` value: "12.8", or None for a CPU build."""
    import re

    m = re.search(r"^cuda\s*(?::[^=]*)?=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", version_py, re.M)
    if not m:
        raise ValueError("no `cuda = ...` line in torch/version.py")
    return m.group(1) or m.group(2) or None


def released_capabilities(reader: Any, change: Change, notes: list[str]) -> dict[str, Any]:
    """Run the capabilities probe over a scratch folder holding the new release's Python files."""
    from sparkdoctor.locations import data_dir

    wheel = reader.release(change.name, change.new)
    top = PROBED[change.name]
    wanted = [n for n in wheel.names if n.startswith(top + "/") and (n.endswith(".py") or n.endswith(".json"))]
    wheel.prefetch(wanted)
    with tempfile.TemporaryDirectory(prefix="sparkdoctor-whatif-site-") as site:
        for name in wanted:
            dest = Path(site) / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(wheel.read(name))
        info = Path(site) / f"{change.name.replace('-', '_')}-{change.new}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {change.name}\nVersion: {change.new}\n", encoding="utf-8")
        probe = data_dir("probes") / "capabilities" / "__main__.py"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env["PYTHONPATH"] = site
        result = proc.run([sys.executable, "-S", "-B", str(probe)], timeout=PROBE_TIMEOUT, env=env)
    lines = [x for x in (result.stdout or "").splitlines() if x.strip()]
    if not result.ok or not lines:
        raise RuntimeError(f"the capabilities probe failed: {result.describe_failure()}")
    caps = json.loads(lines[-1]).get("capabilities") or {}
    prefix = top + "."
    out = {k: v for k, v in caps.items() if k.startswith(prefix)}
    notes.append(f"{change.name} {change.new}: {len(out)} capabilities read from {wheel.file.filename} ({len(wanted)} members, "
                 f"{wheel.requests} requests, {wheel.bytes_read} bytes this run); compiled-library ones stay unknown")
    return out
