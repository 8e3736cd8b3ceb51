"""Validators for the value shapes that several conditions share (a specifier, a list of names, a
table of package = specifier). Each returns why the TOML value is wrong, or None when it is right."""

from __future__ import annotations

from typing import Any

from sparkdoctor.matrix.versions import spec_problem
from sparkdoctor.names import name_problem


def as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def v_str_list(value: object) -> str | None:
    if isinstance(value, str):
        return None
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return None
    return "must be a string or a non-empty list of strings"


def v_spec_table(value: object) -> str | None:
    if not isinstance(value, dict) or not value:
        return "must be a table of package = \"specifier\""
    for name, spec in value.items():
        err = name_problem(name) or spec_problem(spec)
        if err:
            return f"{name}: {err}"
    return None


def v_scalar_table(value: object) -> str | None:
    if not isinstance(value, dict) or not value:
        return "must be a table of id = value"
    for k, v in value.items():
        if not isinstance(v, (str, bool, int, list)):
            return f"{k}: must be a string, boolean, integer or list"
    return None
