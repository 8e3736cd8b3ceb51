"""Validators for the value shapes that several conditions share (a specifier, a list of names, a
table of package = specifier). Each returns why the TOML value is wrong, or None when it is right."""

from __future__ import annotations

from collections.abc import Callable
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


def v_table(value: object, shape: str, item: Callable[[str, object], str | None]) -> str | None:
    """A non-empty table (`must be a table of SHAPE` otherwise) whose every item passes `item(key, value)`: the
    first that does not, as `KEY: why`."""
    if not isinstance(value, dict) or not value:
        return f"must be a table of {shape}"
    return next((f"{k}: {err}" for k, v in value.items() if (err := item(k, v))), None)


def v_spec_table(value: object) -> str | None:
    return v_table(value, 'package = "specifier"', lambda name, spec: name_problem(name) or spec_problem(spec))


def v_scalar_table(value: object) -> str | None:
    return v_table(value, "id = value", lambda _, v: None if isinstance(v, (str, bool, int, list))
                   else "must be a string, boolean, integer or list")
