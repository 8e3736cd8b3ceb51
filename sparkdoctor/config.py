"""User settings: permanent ignores and defaults, from a TOML file.

Looked up in order: --config FILE, ./sparkdoctor.toml, the user config dir
(~/.config/sparkdoctor/config.toml). Example:

    [check]
    fail_on = "warn"
    ignore = ["vllm-marlin-fp8-gate", { id = "torch-cc-warning", reason = "harmless, we know" }]
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from sparkdoctor.locations import config_file
from sparkdoctor.matrix import SEVERITIES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ConfigError(ValueError):
    pass


@dataclass
class Config:
    path: str | None = None
    ignore: dict[str, str] = field(default_factory=dict)  # id -> reason
    fail_on: str | None = None


def load_config(explicit: Path | None = None) -> Config:
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"{explicit}: no such config file")
        path = explicit
    else:
        path = next((p for p in (Path("sparkdoctor.toml"), config_file()) if p.is_file()), None)
        if path is None:
            return Config()
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from None
    check = doc.get("check", {})
    if not isinstance(check, dict):
        raise ConfigError(f"{path}: [check] must be a table")
    cfg = Config(path=str(path))
    for i, item in enumerate(check.get("ignore", [])):
        if isinstance(item, str):
            cfg.ignore[item] = ""
        elif isinstance(item, dict) and isinstance(item.get("id"), str):
            cfg.ignore[item["id"]] = str(item.get("reason", ""))
        else:
            raise ConfigError(f"{path}: check.ignore[{i}] must be an id or {{ id = \"...\", reason = \"...\" }}")
    fail_on = check.get("fail_on")
    if fail_on is not None and fail_on not in SEVERITIES:
        raise ConfigError(f"{path}: check.fail_on must be one of {', '.join(SEVERITIES)}")
    cfg.fail_on = fail_on
    return cfg
