"""Pins that steer pip in the target: constraints files from PIP_CONSTRAINT or pip's config, plus --constraints FILE.

Which constraints pip really applies follows pip's own precedence (pip/_internal/cli/parser.py):
a non-empty PIP_CONSTRAINT wins over the config files; among config files a later file wins over
an earlier one, and [install] wins over [global]. Only the option name `constraint` counts: pip
silently ignores a `constraints` key, which is worth telling the user. Files named with
--constraints are read as well (they may be requirements files).

Each file is read like pip reads a requirements file: `\\` continuations, comments, ${VAR}
expansion, `-c`/`-r` includes relative to the including file (cycles stopped), per-requirement
options such as --hash ignored, one packaging Requirement per logical line. A bad line is reported
as FILE:LINE in facts.errors and reading goes on.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from sparkdoctor.collect import Collector, Context
from sparkdoctor.errors import InputError
from sparkdoctor.inputs import read_bytes

NAME = "constraints"
SOURCE_ENV = "PIP_CONSTRAINT"
SOURCE_CLI = "--constraints"

_COMMENT_RE = re.compile(r"(^|\s+)#.*$")
_ENV_VAR_RE = re.compile(r"\$\{([A-Z0-9_]+)\}")
_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_ARCHIVES = (".whl", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz", ".tar", ".zip")
MAX_FILE = 16 * 1024 * 1024  # one constraints or requirements file (an include, PIP_CONSTRAINT's, -c's)
_INCLUDE_OPTS = {"-c": "constraint", "--constraint": "constraint", "-r": "requirement", "--requirement": "requirement"}


# ---- where the constraints files come from ------------------------------------------------------------
def _config_key(raw: str) -> str:
    """pip's normalisation of config keys: case, '_' for '-', an optional leading '--'."""
    key = raw.lower().replace("_", "-")
    return key[2:] if key.startswith("--") else key


# pip's precedence among config files, lowest first (pip/_internal/configuration.py OVERRIDE_ORDER):
# the file PIP_CONFIG_FILE names beats the site file, which beats the user's, which beats the global ones.
_KIND_RANK = {"global": 0, "user": 1, "site": 2, "env": 3}


def _in_pip_order(items: Sequence[object]) -> list[dict[str, Any]]:
    """The target probe lists files as it finds them; a stable sort by kind gives pip's override order."""
    usable = [i for i in items if isinstance(i, dict) and isinstance(i.get("text"), str)]
    if all(i.get("kind") in _KIND_RANK for i in usable):
        usable.sort(key=lambda i: _KIND_RANK[i["kind"]])
    return usable  # without kinds, the order given is taken as pip's


def pip_config_constraints(ctx: Context) -> tuple[str, list[str]] | None:
    """(source, files) that pip's config files give the `constraint` option, after pip's overrides."""
    chosen: dict[str, tuple[str, str]] = {}  # section -> (config path, value); later files replace earlier
    items = _in_pip_order(ctx.scratch.get("pip_config_files") or [])
    if items:
        import configparser  # only where pip has config files (~1-3 ms of imports otherwise)
    for item in items:
        path = str(item.get("path", "?"))
        parser = configparser.RawConfigParser()
        try:
            parser.read_string(item["text"], source=path)
        except configparser.Error as exc:
            ctx.facts.add_error(NAME, f"{path}: not a valid pip config file: {str(exc).splitlines()[0]}")
            continue
        for section in ("global", "install"):
            if not parser.has_section(section):
                continue
            for raw_key, value in parser.items(section):
                key = _config_key(raw_key)
                if key == "constraints":
                    ctx.facts.add_error(NAME, f"{path}: [{section}] {raw_key} = {value.strip()}: pip reads the key 'constraint', so pip ignores this one")
                elif key == "constraint" and value.strip():  # pip drops empty values
                    chosen[section] = (path, value)
    for section in ("install", "global"):
        if section in chosen:
            path, value = chosen[section]
            return f"pip-config: {path}", value.split()
    return None


def sources(ctx: Context) -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    env_value = ctx.target_env("PIP_CONSTRAINT")
    if env_value and env_value.split():
        found.append((SOURCE_ENV, env_value.split()))
    else:
        from_config = pip_config_constraints(ctx)
        if from_config:
            found.append(from_config)
    if ctx.constraint_files:
        found.append((SOURCE_CLI, [str(p) for p in ctx.constraint_files]))
    return found


# ---- reading one requirements/constraints file ------------------------------------------------------------
def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first physical line number, logical line) with continuations joined and comments removed."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), 1):
        if line.endswith("\\") and not _COMMENT_RE.match(line):
            if not buf:
                start = number
            buf.append(line.strip("\\"))
            continue
        if _COMMENT_RE.match(line):
            line = " " + line  # a comment line ends a continuation and is then dropped whole
        if buf:
            out.append((start, "".join(buf) + line))
            buf = []
        else:
            out.append((number, line))
    if buf:
        out.append((start, "".join(buf)))
    cleaned = [(n, _COMMENT_RE.sub("", line).strip()) for n, line in out]
    return [(n, line) for n, line in cleaned if line]


def split_options(line: str) -> tuple[str, str]:
    """pip's rule: the requirement is everything before the first space-separated token that starts with '-'."""
    tokens = line.split(" ")
    for i, token in enumerate(tokens):
        if token.startswith("-"):
            return " ".join(tokens[:i]).strip(), " ".join(tokens[i:])
    return line.strip(), ""


class BadLine(InputError, ValueError):
    code = "constraints"


def _looks_unnamed(text: str) -> bool:
    head = text.split(";", 1)[0].strip()
    if "@" in head.split("://", 1)[0]:
        return False  # "name @ url"
    return bool(_URL_RE.match(head)) or head.startswith((".", "/", "~")) or "/" in head or "\\" in head or head.lower().endswith(_ARCHIVES)


def parse_requirement(text: str) -> dict[str, object] | None:
    """The pin a requirement line makes, or None for an unnamed one (a local folder, a VCS URL without #egg=)."""
    # packaging's parser (~40 ms of imports) loads only when some constraints file has a line.
    from packaging.markers import InvalidMarker, Marker
    from packaging.requirements import InvalidRequirement, Requirement

    if not _looks_unnamed(text):
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            raise BadLine(f"not a requirement: {str(exc).splitlines()[0]}") from None
        return {
            "name": req.name,
            "specifier": str(req.specifier),
            "marker": str(req.marker) if req.marker else None,
            "extras": sorted(req.extras),
            "url": req.url,
        }
    location, _, marker_text = text.partition(";")
    location = location.strip()
    marker = None
    if marker_text.strip():
        try:
            marker = str(Marker(marker_text.strip()))
        except InvalidMarker as exc:
            raise BadLine(f"bad environment marker: {str(exc).splitlines()[0]}") from None
    name, version = _name_from_location(location)
    if name is None:
        return None
    return {"name": name, "specifier": f"=={version}" if version else "", "marker": marker, "extras": [], "url": location}


def _name_from_location(location: str) -> tuple[str | None, str | None]:
    """A wheel or sdist file name carries name and version; a URL may carry #egg=name."""
    # imported on use: check loads packaging.utils only on the runs that get here
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        parse_sdist_filename,
        parse_wheel_filename,
    )

    try:
        parts = urlsplit(location)
    except ValueError as exc:  # a broken IPv6 host: "http://[::1/x.whl"
        raise BadLine(f"not a URL: {exc}") from None
    egg = re.search(r"(?:^|&)egg=([^&]+)", parts.fragment)
    filename = unquote(os.path.basename(parts.path if _URL_RE.match(location) else location))
    with contextlib.suppress(InvalidWheelFilename, InvalidSdistFilename):
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
            return str(name), str(version)
        if filename.lower().endswith(_ARCHIVES):
            name, version = parse_sdist_filename(filename)
            return str(name), str(version)
    if egg:
        return egg.group(1).split("[")[0], None
    return None, None


class Reader:
    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.entries: list[dict[str, Any]] = []
        self.seen: set[str] = set()

    def error(self, message: str) -> None:
        self.ctx.facts.add_error(NAME, message)

    def read_top(self, name: str, source: str) -> None:
        path = self._local(name, base=None, where=source)
        if path is not None:
            self.read(path, source, stack=(), included_from=None, where=source)

    def _local(self, name: str, base: Path | None, where: str) -> Path | None:
        """The local path a file reference means; URLs other than file:// are noted, not fetched."""
        if _URL_RE.match(name):
            try:
                parts = urlsplit(name)
            except ValueError as exc:
                self.error(f"{where}: {name} is not a URL: {exc}")
                return None
            if parts.scheme.lower() != "file":
                self.error(f"{where}: {name} is a URL; sparkdoctor does not download it, so the pins in it are unknown")
                return None
            return Path(unquote(parts.path))
        path = Path(os.path.expanduser(name))
        if not path.is_absolute() and base is not None:
            path = base / path  # pip: includes are relative to the file that includes them
        return path

    def read(self, path: Path, source: str, stack: tuple[str, ...], included_from: str | None, where: str) -> None:
        real = os.path.realpath(path)
        if real in stack:
            self.error(f"{where}: includes {path}, which is already being read (a cycle); not read again")
            return
        if real in self.seen:
            return  # the same file reached by another route: its pins are already listed
        self.seen.add(real)
        try:
            text = read_bytes(path, MAX_FILE).decode("utf-8-sig", errors="replace")  # a regular file only, bounded
        except OSError as exc:
            self.error(f"{where}: cannot read {path}: {exc.strerror or exc}")
            return
        for number, line in logical_lines(text):
            here = f"{path}:{number}"
            line = _ENV_VAR_RE.sub(lambda m: self.ctx.target_env(m.group(1)) or m.group(0), line)
            if line.startswith("-"):
                self._option_line(line, path, source, stack + (real,), here)
                continue
            requirement, _options = split_options(line)  # --hash=... and friends change nothing about the pin
            if not requirement:
                continue
            try:
                parsed = parse_requirement(requirement)
            except BadLine as exc:
                self.error(f"{here}: {exc}")
                continue
            if parsed is not None:
                self.entries.append(
                    {"file": str(path), "line": number, "source": source, "requirement": requirement, **parsed, "included_from": included_from}
                )

    def _option_line(self, line: str, path: Path, source: str, stack: tuple[str, ...], here: str) -> None:
        try:
            tokens = shlex.split(line)
        except ValueError as exc:
            self.error(f"{here}: cannot split the options: {exc}")
            return
        i = 0
        while i < len(tokens):
            token = tokens[i]
            opt, value = token, None
            if token.startswith("--") and "=" in token:
                opt, value = token.split("=", 1)
            elif token[:2] in ("-c", "-r") and len(token) > 2:
                opt, value = token[:2], token[2:]
            if opt in _INCLUDE_OPTS:
                if value is None:
                    i += 1
                    if i >= len(tokens):
                        self.error(f"{here}: {opt} needs a file name")
                        return
                    value = tokens[i]
                target = self._local(value, base=path.parent, where=here)
                if target is not None:
                    self.read(target, source, stack, included_from=here, where=here)
            i += 1  # every other option (-e, --index-url, --hash, ...) pins nothing


def run(ctx: Context) -> dict[str, object]:
    reader = Reader(ctx)
    for source, files in sources(ctx):
        for name in files:
            reader.read_top(name, source)
    return {"constraints": reader.entries}


COLLECTOR = Collector(NAME, run, needs=("target",), timeout=5)
