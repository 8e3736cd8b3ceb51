"""Probe definitions: the hand-written PTX programs in probes/kernels/ and the TOML header that
describes each (see sparkdoctor.kernels). Loading is cheap on purpose: it runs on every `check`."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from sparkdoctor.arch import FIRST_PTX, parse_arch
from sparkdoctor.errors import InputError
from sparkdoctor.inputs import toml_module
from sparkdoctor.locations import data_dir
from sparkdoctor.patterns import regex_error
from sparkdoctor.ptxas import version_tuple

tomllib = toml_module()

ARCH_PLACEHOLDER = "@ARCH@"


class ProbeError(InputError, ValueError):
    """A probe file that cannot be used; the message names the file and the field."""

    code = "probe-definition"


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
        found = re.search(r"^[ \t]*\.version[ \t]+(\S+)", self.source, re.MULTILINE)
        return found.group(1) if found else "?"

    def ptx_version_for(self, arch: str) -> str:
        own = version_tuple(self.ptx_version, parts=2)
        number, suffix = parse_arch(arch)
        first = FIRST_PTX.get(number, (0, 0))
        if suffix == "f":
            first = max(first, (8, 8))
        return ".".join(map(str, max(own, first)))

    def ptx_for(self, arch: str) -> str:
        source = re.sub(r"^([ \t]*\.version[ \t]+)\S+", lambda m: m.group(1) + self.ptx_version_for(arch), self.source, count=1, flags=re.MULTILINE)
        return source.replace(ARCH_PLACEHOLDER, arch)

    def body(self) -> str:
        """The source after its module directives, for building one module out of several probes."""
        match = re.search(r"^[ \t]*\.address_size[ \t]+64[ \t]*$", self.source, re.MULTILINE)
        return self.source[match.end():] if match else ""


_FIELDS: dict[str, type] = {
    "id": str, "title": str, "instruction": str, "family": list, "home_arch": str, "needs_suffix": bool,
    "always": bool, "sass": str, "entry": str, "threads": int, "params": list, "inputs": str, "reference": str,
}


def probes_dir() -> Path:
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
    err = regex_error(meta["sass"])
    if err:
        raise ProbeError(f"{path}: header field 'sass' is not a regex: {err}")
    for arch in [*meta["family"], meta["home_arch"]]:
        try:
            parse_arch(arch)
        except ValueError as exc:
            raise ProbeError(f"{path}: {exc}") from None
    fields = {name: meta[name] for name in _FIELDS}
    fields.update(family=tuple(meta["family"]), params=tuple(meta["params"]))
    return Probe(**fields, path=path, source=source, sha256=hashlib.sha256(source.encode()).hexdigest())


def load_probes(folder: Path | None = None) -> list[Probe]:
    folder = folder or probes_dir()
    probes = [parse_probe(p) for p in sorted(folder.glob("*.ptx"))]
    twice = next((p for i, p in enumerate(probes) if p.id in {q.id for q in probes[:i]}), None)  # a few probes: quadratic is fine
    if twice:
        raise ProbeError(f"{twice.path}: probe id '{twice.id}' is used twice")
    return probes
