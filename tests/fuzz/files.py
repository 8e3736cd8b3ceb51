"""Writing generated documents out: as objects for Facts.from_dict, as JSON and TOML text, and as
damaged bytes (cut, spliced with invalid UTF-8, given a BOM). Markers become real deep nesting or
literal text here, last, because json.dumps and a recursive writer cannot carry them.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.values import BigNumber, Deep


def materialize(value: Any) -> Any:
    """Deep markers become real nested objects (for Facts.from_dict)."""
    if isinstance(value, Deep):
        inner: Any = "bottom"
        for _ in range(value.depth):
            inner = [inner] if value.kind == "list" else {"k": inner}
        return inner
    if isinstance(value, BigNumber):
        return int("1" * min(value.digits, 4000))  # a file can carry more; int() cannot
    if isinstance(value, dict):
        return {k: materialize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [materialize(v) for v in value]
    return value


def _marker_text(value: Deep | BigNumber, toml: bool) -> str:
    if isinstance(value, BigNumber):
        return "1" * value.digits
    if value.kind == "list":
        return "[" * value.depth + "]" * value.depth
    if toml:
        return "{a = " * value.depth + "1" + "}" * value.depth
    return '{"a": ' * value.depth + "1" + "}" * value.depth


def _with_placeholders(value: Any, found: list) -> Any:
    if isinstance(value, (Deep, BigNumber)):
        found.append(value)
        return f"@@MARK{len(found) - 1}@@"
    if isinstance(value, dict):
        return {k: _with_placeholders(v, found) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_placeholders(v, found) for v in value]
    return value


def json_text(doc: Any) -> str:
    """The snapshot file for `doc`, markers written as literal text."""
    found: list = []
    text = json.dumps(_with_placeholders(doc, found), allow_nan=True)
    for i, marker in enumerate(found):
        text = text.replace(f'"@@MARK{i}@@"', _marker_text(marker, toml=False))
    return text


# ---- TOML writing (the standard library reads TOML but does not write it) -------------------------


_TOML_ESCAPE = re.compile('["\\\\\x00-\x1f\x7f\ud800-\udfff]')


def _toml_escape(m: re.Match) -> str:
    ch = m.group()
    if ch in '"\\':
        return "\\" + ch
    if 0xD800 <= ord(ch) <= 0xDFFF:
        return "\ufffd"  # TOML cannot carry a lone surrogate
    return f"\\u{ord(ch):04x}"


def _toml_str(s: str) -> str:
    return '"' + _TOML_ESCAPE.sub(_toml_escape, s) + '"'


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_str(str(k))} = {_toml_value(x)}" for k, x in v.items()) + "}"
    if v is None:
        return '""'  # TOML has no null; None was dropped where it matters
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def toml_text(doc: dict) -> str:
    found: list = []
    doc = _with_placeholders(doc, found)
    text = "".join(f"{_toml_str(str(k))} = {_toml_value(v)}\n" for k, v in doc.items())
    for i, marker in enumerate(found):
        text = text.replace(f'"@@MARK{i}@@"', _marker_text(marker, toml=True))
    return text


# ---- byte-level damage ---------------------------------------------------------------------------

BAD_BYTES = [b"\xff", b"\xfe\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\xef\xbb\xbf", b"\x80abc", b"\r", b"\n\n["]


@st.composite
def damaged(draw, text: str) -> bytes:
    """`text` encoded, then maybe cut, spliced with invalid UTF-8, or given a BOM."""
    data = text.encode("utf-8", "surrogatepass")
    op = draw(st.sampled_from(["none"] * 9 + ["truncate", "insert", "bom", "replace"]))
    if op == "none" or not data:
        return data
    at = draw(st.integers(0, len(data)))
    if op == "truncate":
        return data[:at]
    if op == "bom":
        return b"\xef\xbb\xbf" + data
    chunk = draw(st.one_of(st.sampled_from(BAD_BYTES), st.binary(max_size=6)))
    if op == "insert":
        return data[:at] + chunk + data[at:]
    return data[:at] + chunk + data[at + len(chunk):]
