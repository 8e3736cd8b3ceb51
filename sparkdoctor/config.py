"""User settings: permanent ignores and defaults, from a TOML file.

Looked up in order: --config FILE, $SPARKDOCTOR_CONFIG, ./sparkdoctor.toml, the user config dir
(~/.config/sparkdoctor/config.toml): what the operator names wins over a file in the working folder (a pull
request's checkout may bring one). Example:

    [check]
    fail_on = "warn"
    ignore = ["vllm-marlin-fp8-gate", { id = "torch-cc-warning", reason = "harmless, we know" }]

Strict on purpose: a setting that is silently not applied is worse than an error. A file named by
--config or $SPARKDOCTOR_CONFIG must exist; unknown sections and keys are refused with the list of
known ones (a typo such as `fail-on` would otherwise do nothing); `ignore = "id"` is one id.
Whether an ignored id exists depends on the matrix, so check tells that (a warning); ignoring an
error-severity entry needs a reason (refuse_bare_errors()).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sparkdoctor.errors import InputError, OneLine
from sparkdoctor.inputs import read_toml
from sparkdoctor.locations import config_file
from sparkdoctor.matrix import SEVERITIES, Matrix
from sparkdoctor.matrix.loader import MAX_TOML_BYTES

ENV_VAR = "SPARKDOCTOR_CONFIG"
SECTIONS = {"check": {"ignore", "fail_on"}}
_IGNORE_KEYS = {"id", "reason"}


class ConfigError(OneLine, InputError, ValueError):
    """A config file that cannot be used; the message names the file and the key, in one line."""

    code = "config"


@dataclass
class Config:
    path: str | None = None
    ignore: dict[str, str] = field(default_factory=dict)  # id -> reason
    fail_on: str | None = None


def find_config(explicit: Path | None = None) -> Path | None:
    """The config file in use, or None; a file that is named but missing is an error."""
    if explicit is not None:
        if not explicit.exists():  # one that exists but is no file (a FIFO, a folder) is refused by read_toml
            raise ConfigError(f"--config {explicit}: no such config file")
        return explicit
    named = os.environ.get(ENV_VAR)
    if named:  # the operator's choice, over ./sparkdoctor.toml; one that is no regular file is refused by read_toml
        if not Path(named).exists():
            raise ConfigError(f"{ENV_VAR}={named}: no such config file")
        return Path(named)
    for candidate in (Path("sparkdoctor.toml"), config_file()):
        try:
            if candidate.is_file():
                return candidate
        except OSError as exc:  # another user's config folder: its ignores and fail_on unread would change verdicts
            raise ConfigError(f"{candidate}: cannot be read ({exc.strerror or type(exc).__name__}); name a config with "
                              f"--config or {ENV_VAR}") from None
    return None


def load_config(explicit: Path | None = None) -> Config:
    path = find_config(explicit)
    if path is None:
        return Config()
    doc = read_toml(path, MAX_TOML_BYTES, ConfigError)
    _refuse_unknown(doc, path)
    check = section if isinstance(section := doc.get("check", {}), dict) else {}  # _refuse_unknown said it is a table
    return Config(path=str(path), ignore=_ignores(check.get("ignore", []), path), fail_on=_fail_on(check.get("fail_on"), path))


def _refuse_unknown(doc: Mapping[str, object], path: Path) -> None:
    for section, value in doc.items():
        if section not in SECTIONS:
            raise ConfigError(f"{path}: unknown section {section!r} (known: {', '.join(f'[{s}]' for s in SECTIONS)})")
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: [{section}] must be a table")
        unknown = sorted(set(value) - SECTIONS[section])
        if unknown:
            raise ConfigError(f"{path}: unknown key {section}.{unknown[0]!r} (known: {', '.join(sorted(SECTIONS[section]))})")


def _ignores(value: object, path: Path) -> dict[str, str]:
    if isinstance(value, str):  # one id, not a list of its letters
        value = [value]
    if not isinstance(value, list):
        raise ConfigError(f"{path}: check.ignore must be an id or a list of ids / {{ id = \"...\", reason = \"...\" }}")
    out: dict[str, str] = {}
    for i, item in enumerate(value):
        if isinstance(item, str):
            out[item] = ""
        elif isinstance(item, dict) and isinstance(item.get("id"), str) and isinstance(item.get("reason", ""), str) and set(item) <= _IGNORE_KEYS:
            out[item["id"]] = item.get("reason", "")
        else:
            raise ConfigError(f"{path}: check.ignore[{i}] must be an id or {{ id = \"...\", reason = \"...\" }}")
    return out


def _fail_on(value: object, path: Path) -> str | None:
    if value is not None and value not in SEVERITIES:
        raise ConfigError(f"{path}: check.fail_on must be one of {', '.join(SEVERITIES)}, not {value!r}")
    return value


def refuse_bare_errors(cfg: Config, matrix: Matrix) -> None:
    """ConfigError when the config ignores an error-severity entry without saying why: a file that silences
    errors (one brought by a pull request, say) has to say so in words the output can show."""
    errors = {e.id for e in matrix.entries if e.severity == "error"}
    for entry_id, reason in cfg.ignore.items():
        if entry_id in errors and not reason.strip():
            raise ConfigError(f"{cfg.path}: check.ignore {entry_id!r} is an error; ignoring it needs a reason: "
                              f"{{ id = \"{entry_id}\", reason = \"...\" }}")
