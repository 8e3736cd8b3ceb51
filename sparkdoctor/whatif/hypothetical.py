"""Today's Facts moved to a predicted set of distributions, without installing them.

- versions: each changed distribution at its new version, its files as released (a reinstall replaces
  modified files: integrity ok, nothing modified or missing);
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
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.version import Version

from sparkdoctor import proc
from sparkdoctor.facts import Facts
from sparkdoctor.inputs import NotJSON, json_answer
from sparkdoctor.locations import data_dir
from sparkdoctor.matrix.versions import parse_version
from sparkdoctor.released import Reader, cache_root
from sparkdoctor.targets.early import loads_code
from sparkdoctor.text import shell_word
from sparkdoctor.whatif.probe import LIBS
from sparkdoctor.whatif.resolve import Change

PROBED = {"vllm": "vllm", "flashinfer-python": "flashinfer"}  # distribution -> top-level package the probe reads
PROBE_TIMEOUT = 120.0


def hypothetical_facts(facts: Facts, changes: list[Change], reader: Reader | None, notes: list[str],
                       env: dict[str, str] | None = None) -> Facts:
    """env: variables set for the probe of the new releases' files (a recipe's VLLM_* names, judged as `recipe check` does)."""
    new = copy.deepcopy(facts)
    packages = dict(new.packages or {})
    for c in changes:
        row = dict(packages.get(c.name) or {"name": c.name})
        origin = row.get("direct_url")
        if isinstance(origin, dict) and origin.get("url"):  # PEP 610: a build from source, a local wheel, a VCS checkout
            how = "an editable install of" if origin.get("editable") else "an install from"
            notes.append(f"{c.name} {c.old} is {how} {origin['url']}, not the registry's: the upgrade replaces that build with "
                         f"the registry's {c.new} (fix refuses this without --allow-replace {c.name})")
        # requires: today's release's Requires-Dist, not the new one's (the resolver judges those)
        for key in [k for k in row if k.startswith("files_") or k in ("integrity", "direct_url", "metadata_error", "requires")]:
            row.pop(key)
        # written as released: the files match the new RECORD (a hand mod of today's files is gone)
        row.update(version=c.new, integrity="ok", files_modified=[], files_missing=[], files_unreadable=[], predicted=True)
        if row.get("no_record"):  # pip stops at uninstalling today's release ("Cannot uninstall ... RECORD file not found")
            row.update(version=c.old, integrity="no-record")
            notes.append(f"{c.name} {c.old} has no RECORD: pip cannot uninstall it, so the upgrade would stop there; write "
                         f"it again first (`python -m pip install --ignore-installed --no-deps {shell_word(f'{c.name}=={c.old}')}`)")
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
    if any(c.name.startswith("nvidia-cutlass-dsl") for c in changes):
        build, why = cutedsl_build_after(packages, changes, new.driver)
        if build is not None:
            new.cutedsl = {**(new.cutedsl or {}), "active_build": build, "evidence": f"predicted: {why}"}
    probed = [c for c in changes if c.name in PROBED]
    if probed and reader is not None:
        caps = dict(new.capabilities or {})
        for c in probed:
            prefix = PROBED[c.name] + "."
            for key in [k for k in caps if k.startswith(prefix)]:
                caps.pop(key)
            try:
                caps.update(released_capabilities(reader, c, notes, env))
            except Exception as exc:  # noqa: BLE001 - a release that cannot be read leaves its capabilities unknown, said
                notes.append(f"{c.name} {c.new}: capabilities not read ({type(exc).__name__}: {exc}); entries that need them cannot tell")
        new.capabilities = caps
    elif probed:
        notes.append("capabilities of the new releases were not read (no registry reader)")
    return new


def cutedsl_build_after(packages: Mapping[str, Mapping[str, object]], changes: list[Change],
                        driver: Mapping[str, object] | None) -> tuple[str | None, str]:
    """The libs build `import cutlass` would load after the upgrade, by the rule check's probe follows on disk
    (probes/shared/probe_cutlass.py): from 4.6 nvidia-cutlass-dsl's own .pth puts dsl_packages/ first on sys.path,
    where each libs-cu<N> wheel of 4.6+ has its compiler and the loader takes the newest the driver supports; below
    4.6 the libs wheels' .pth names python_packages/, whose compiler is the libs wheel written last (None: today's)."""

    def version(name: str) -> Version | None:
        return parse_version(str((packages.get(name) or {}).get("version")))

    umbrella = version("nvidia-cutlass-dsl")
    if umbrella is not None and umbrella >= Version("4.6"):
        flavours = {int(m.group(1)): n for n in packages if (m := re.fullmatch(r"nvidia-cutlass-dsl-libs-cu(\d+)", n))
                    and (version(n) or Version("0")) >= Version("4.6")}
        cuda = str((driver or {}).get("cuda") or "")
        major = int(cuda.split(".")[0]) if cuda.split(".")[0].isdigit() else None
        fit = [f for f in flavours if major is None or f <= major]
        if not fit:
            return "unknown", f"nvidia-cutlass-dsl {umbrella} loads a libs-cu<N> compiler; none installed fits the driver"
        pick = max(fit)
        how = f"the driver's CUDA {cuda} picks cu{pick}" if major is not None else f"no driver known: the newest, cu{pick}"
        return f"libs-cu{pick}", (f"nvidia-cutlass-dsl {umbrella}'s .pth puts dsl_packages first on sys.path; "
                                  f"its compilers: {', '.join(f'cu{f}' for f in sorted(flavours))}; {how}")
    libs = [build for c in changes for build, dist in LIBS.items() if dist == c.name]
    if libs:
        return libs[-1], f"the upgrade writes {', '.join(libs)}; the last written is on disk"
    return None, ""


def torch_cuda(version_py: str) -> str | None:
    """torch/version.py's `cuda` value: "12.8", or None for a CPU build."""
    m = re.search(r"^cuda\s*(?::[^=]*)?=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", version_py, re.MULTILINE)
    if not m:
        raise ValueError("no `cuda = ...` line in torch/version.py")
    return m.group(1) or m.group(2) or None


def laid_out_safely(name: str) -> bool:
    """A wheel member's name is a path under the site folder: no `..`, `.` or empty part (a wheel's member list is
    someone else's: `vllm/../../../x.py` was written wherever it pointed, as the user)."""
    return not any(part in ("", ".", "..") for part in name.split("/"))


class ScratchSite:
    """A folder laid out like site-packages holding one new release's Python files (read member by member
    from its released wheel) and a dist-info: what the file-reading probes (capabilities, vllm_flags) need.
    Kept in the user cache dir by the wheel's sha256 (released files never change), so a warm what-if
    does not lay out thousands of files again."""

    def __init__(self, reader: Reader, change: Change):
        self.reader, self.change = reader, change
        self.top = PROBED[change.name]
        self.members = 0

    def __enter__(self) -> ScratchSite:
        self.wheel = wheel = self.reader.release(self.change.name, self.change.new)
        self.path = (self.reader.root or cache_root()) / "sites" / wheel.dir.name  # the release's own key, never a path
        done = self.path / ".complete"
        try:
            self.members = int(done.read_text())
            return self
        except FileNotFoundError:
            pass
        except (OSError, ValueError):  # a damaged site (its marker cut short, garbage, a folder): made again
            shutil.rmtree(self.path, ignore_errors=True)
        wanted = [n for n in wheel.names if n.startswith(self.top + "/") and (n.endswith(".py") or n.endswith(".json"))
                  and laid_out_safely(n)]
        wheel.prefetch(wanted)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".site-", dir=self.path.parent))
        try:
            for name in wanted:
                dest = tmp / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(wheel.read(name))
            info = tmp / f"{self.change.name.replace('-', '_')}-{self.change.new}.dist-info"
            info.mkdir()
            (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {self.change.name}\nVersion: {self.change.new}\n", encoding="utf-8")
            (tmp / ".complete").write_text(str(len(wanted)))
            try:
                os.replace(tmp, self.path)
            except OSError:  # another run may have finished it meanwhile: its site serves this run as well
                if not done.is_file():
                    raise
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.members = len(wanted)
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def probe(self, name: str, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
        """Run probes/<name>/ with only this folder on its path (-S: no site-packages of any interpreter). Of
        `extra_env` (a recipe's), what makes an interpreter or the loader run code (PYTHONHOME at a planted
        encodings package, PYTHONWARNINGS importing a module of the release, LD_PRELOAD) is left out, as for
        `recipe check`'s probes: the recipe's variables only ever judge capabilities."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env.update({k: v for k, v in (extra_env or {}).items() if not loads_code(k)})
        env["PYTHONPATH"] = str(self.path)
        result = proc.run([sys.executable, "-S", "-B", str(data_dir("probes") / name / "__main__.py")], timeout=PROBE_TIMEOUT, env=env)
        lines = [x for x in (result.stdout or "").splitlines() if x.strip()]
        if not result.ok or not lines:
            raise RuntimeError(f"the {name} probe failed: {result.describe_failure()}")
        try:
            return json_answer(lines[-1])  # type: ignore[return-value]
        except NotJSON as exc:
            raise RuntimeError(f"the {name} probe's answer {exc}") from None


def released_capabilities(reader: Reader, change: Change, notes: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """The capabilities probe over the new release's Python files (env: variables set for it, a recipe's)."""
    with ScratchSite(reader, change) as site:
        caps = site.probe("capabilities", env).get("capabilities") or {}
        out = {k: v for k, v in caps.items() if k.startswith(site.top + ".")}
        notes.append(f"{change.name} {change.new}: {len(out)} capabilities read from {site.wheel.file.filename} ({site.members} members, "
                     f"{site.wheel.requests} requests, {site.wheel.bytes_read} bytes this run); compiled-library ones stay unknown")
    return out


def released_flags(reader: Reader, change: Change) -> dict[str, object] | None:
    """The `vllm serve` flags the new vLLM release knows (probes/vllm_flags over its files); None if unread."""
    try:
        with ScratchSite(reader, change) as site:
            return site.probe("vllm_flags")
    except Exception:  # noqa: BLE001 - unknown flags are not judged (the recipe check skips a None)
        return None
