"""Hypothesis strategies for the fuzz suite (tests/test_fuzz.py): broken snapshots, matrices, configs.

Every input starts from something real (tests/data/facts/*.json, tests/gb10.py's builder,
matrix/*.toml) and is mutated at every depth, because a mutant of a real file reaches the deep code
paths that random data never gets past the first check. Values are the ones that broke tools like
this before: wrong types, empty and huge strings, 5000-digit versions, rich markup, control
characters, lone surrogates, NaN/inf, deep nesting.

Deep nesting and 5000-digit numbers cannot travel through json.dumps or a recursive TOML writer, so
they are drawn as markers (Deep, BigNumber) and written out last: as real nested objects for
Facts.from_dict, as literal text for files.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from sparkdoctor.matrix import CONDITIONS
from tests.gb10 import gb10_facts, pin

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
FACTS_DIR = REPO / "tests" / "data" / "facts"
MATRIX_DIR = REPO / "matrix"

# An env var whose value makes a backtracking regex explode: the facts the matrix fuzz uses carry it.
SLOW_ENV = {"FUZZ_SLOW": "a" * 48 + "!", "CUTE_DSL_ARCH": "a" * 48 + "!"}


@dataclass(frozen=True)
class Deep:
    """A value nested `depth` levels deep (lists or objects), written out last."""

    depth: int
    kind: str = "list"


@dataclass(frozen=True)
class BigNumber:
    """A number literal with `digits` digits: only a file can carry it (json/int refuse > 4300)."""

    digits: int


# ---- values ------------------------------------------------------------------------------------

class Huge(str):
    """A long string that reports itself in a few words: failure reports stay readable."""

    def __repr__(self) -> str:
        return f"<{len(self):,} chars: {str.__repr__(self[:24])}...>"

    def _repr_pretty_(self, p, cycle) -> None:  # hypothesis prints examples through this
        p.text(repr(self))


class Blob(bytes):
    """File contents that report themselves briefly once they are long."""

    def __repr__(self) -> str:
        return bytes.__repr__(self) if len(self) <= 2000 else f"<{len(self):,} bytes: {bytes.__repr__(self[:300])}...>"

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(repr(self))


MARKUP = ["[bold]", "[/]", "[/bold]", "[red]x", "[link=http://x]y[/link]", "[bold red]x[/bold red]", "[", "]", "\\[x]",
          ":warning:", "\x1b[31mred\x1b[0m", "\x1b]8;;http://evil\x07x\x1b]8;;\x07"]
CONTROL = ["", " ", "a\nb", "a\r\nb", "line\n", "\nlead", "\x00", "\x07\x08\x7f", "\t", "\u2028", "\u0085", "\ufeff",
           "\ud800", "x\udcffy", "\U0001f600", "e\u0301", "<b>x</b>", "]]>", "*x*", "|", "`", "``x``", "--", "&amp;"]
VERSIONS = [Huge("1" * 5000), Huge("1." + "0" * 5000), Huge("9" * 4301 + ".1"), "0", "0.0.0", "13.0", "580.95.05", "4.5.0", "2.13.0+cu130",
            "1.0.dev0", "1!2.0", "v1", "latest", "None", "12.1a", "1.2.3.4.5.6.7.8.9.10", "1.0+" + "a" * 300]
WORDS = ["sm_121a", "sm_999", "sm_121", "none", "unknown", "detected", "given", "assumed", "libs-base", "libs-cu13",
         "ok", "fail", "crash", "refused", "error", "timeout", "skipped", "modified", "unchecked", "no-record", "ptxas",
         "system", "pip", "triton", "torch", "vllm", "nvidia-cutlass-dsl", "error", "warn", "info", "fix", "*", "/"]


def _huge(n: int) -> str:
    return Huge(("word [bold] " * (n // 12 + 1))[:n])


# The strings that broke renderers and parsers, nastiest first (hypothesis favours the front).
SPECIAL = ["[/]", _huge(300_000), "a\nb", "\ud800", "[bold]x", "\x00", "x\r", *MARKUP, *CONTROL, *VERSIONS[:3], _huge(10_000)]


def scalars(huge: bool = True) -> st.SearchStrategy[Any]:
    strings = st.one_of(
        st.sampled_from(MARKUP + CONTROL + VERSIONS + WORDS),
        st.text(max_size=40),  # every code point, surrogates and controls included
        st.text(alphabet="0123456789.+-", max_size=12),
    )
    parts = [
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**64),
        st.floats(allow_nan=True, allow_infinity=True),
        strings,
        strings,
    ]
    if huge:
        parts.append(st.sampled_from([10_000, 300_000, 3_000_000]).map(_huge))
    return st.one_of(*parts)


def json_values(huge: bool = True) -> st.SearchStrategy[Any]:
    leaf = st.one_of(st.none(), scalars(huge))
    return st.one_of(
        leaf,
        leaf,
        st.recursive(leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=8),
        st.builds(Deep, st.sampled_from([50, 400, 3000, 100_000]), st.sampled_from(["list", "dict"])),
    )


def toml_values() -> st.SearchStrategy[Any]:
    leaf = st.one_of(scalars(), st.datetimes(), st.dates(), st.times())
    return st.one_of(
        leaf,
        leaf,
        st.sampled_from(SPECIFIERS + REGEXES + IDS),
        st.recursive(leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=8),
        st.builds(Deep, st.sampled_from([50, 400, 3000, 100_000]), st.sampled_from(["list", "dict"])),
        st.builds(BigNumber, st.sampled_from([20, 400, 5000])),
    )


# ---- mutation at every depth ---------------------------------------------------------------------

OPS = ("special", "replace", "special", "replace", "delete", "add", "rename", "wrap", "empty")
# Fields compared as versions: they get the versions that broke packaging and int() before.
VERSION_KEYS = frozenset({"version", "cuda", "ptxas_version", "libcuda", "bundled_cuda", "driver", "cuda_driver",
                          "torch_cuda", "specifier", "requirement", "vllm", "torch", "nvidia-cutlass-dsl", "triton"})


def _slots(doc: Any) -> list[list[tuple[Any, Any]]]:
    """(container, key) of every value in `doc`, grouped by depth (iteratively: no recursion limit)."""
    levels: list[list[tuple[Any, Any]]] = []
    frontier = [doc]
    while frontier:
        level, nxt = [], []
        for container in frontier:
            items = container.items() if isinstance(container, dict) else enumerate(container) if isinstance(container, list) else ()
            for key, value in items:
                level.append((container, key))
                if isinstance(value, (dict, list)):
                    nxt.append(value)
        if level:
            levels.append(level)
        frontier = nxt
    return levels


@st.composite
def mutated(draw, bases: list[Any], values: st.SearchStrategy[Any], keys: list[str], max_mutations: int = 4) -> Any:
    """A deep copy of one of `bases` with 1..max_mutations edits, each at a depth chosen first (so
    the top level is hit as often as the leaves)."""
    doc = copy.deepcopy(draw(st.sampled_from(bases)))
    for _ in range(draw(st.integers(1, max_mutations))):
        levels = _slots(doc)
        if not levels:
            break
        container, key = draw(st.sampled_from(draw(st.sampled_from(levels))))
        op = draw(st.sampled_from(OPS))
        if op == "replace":
            container[key] = draw(values)
        elif op == "special":
            container[key] = draw(st.sampled_from(VERSIONS if key in VERSION_KEYS else SPECIAL))
        elif op == "delete":
            del container[key]
        elif op == "empty":
            container[key] = draw(st.sampled_from([[], {}, "", 0]))
        elif op == "wrap":  # the right value inside the wrong shape
            container[key] = draw(st.sampled_from([[container[key]], {"value": container[key]}]))
        elif isinstance(container, dict):
            new = draw(st.one_of(st.sampled_from(keys), st.text(max_size=12)))
            if op == "rename":
                container[new] = container.pop(key)
            else:
                container[new] = draw(values)
        else:
            container.append(draw(values))
    return doc


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


# ---- snapshots -----------------------------------------------------------------------------------

FACT_KEYS = [
    "schema", "taken_at", "tool", "target", "host", "arch", "gpus", "driver", "toolkits", "packages", "cutedsl", "env",
    "constraints", "kernels", "capabilities", "recipe", "errors", "timings_ms", "value", "source", "detected", "why",
    "version", "cuda", "name", "status", "detail", "runs", "ptxas", "ptxas_version", "compiled", "sass_ok", "ran",
    "verified", "error", "run_note", "ms", "cached", "integrity", "files_modified", "files_missing", "active_build",
    "evidence", "requirement", "specifier", "file", "collector", "tool", "path", "used_by", "sm_121a", "cc", "arch",
    "memory_total_mib", "unified", "torch", "vllm", "nvidia-cutlass-dsl", "CUTE_DSL_ARCH", "machine", "kind", "python",
]


def snapshot_bases() -> list[dict]:
    docs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(FACTS_DIR.glob("*.json"))]
    runs = [{"ptxas": "/usr/local/cuda/bin/ptxas", "ptxas_version": "13.0.88", "arch": "sm_121a", "compiled": True,
             "sass_ok": False, "sass": "", "ran": None, "verified": None, "error": "line one\nline two", "ms": 3, "cached": False}]
    variants = [
        gb10_facts(),
        gb10_facts(arch={"value": None, "source": "none"}, gpus=[], driver={}),
        gb10_facts(modified={"vllm": ["vllm/a.py", "vllm/b.py"]}, torch_cuda=None, cutedsl_build="libs-base",
                   constraints=[pin("nvidia-cutlass-dsl==4.5.0"), pin("torch")]),
        gb10_facts(kernels={"e2m1-cvt": {"kind": "ptx", "status": "fail", "detail": "x\ny", "runs": runs}}, env=SLOW_ENV),
    ]
    return docs + [f.to_dict() for f in variants]


def snapshots(max_mutations: int = 4, huge: bool = True) -> st.SearchStrategy[Any]:
    """Mutated snapshot documents (JSON-shaped; may hold Deep/BigNumber markers)."""
    return mutated(snapshot_bases(), json_values(huge), FACT_KEYS, max_mutations)


# ---- matrices ------------------------------------------------------------------------------------

SPECIFIERS = ["", "*", " * ", ">=", "==1.*.2", "~=1", "<<1", "1.0", "==4.5.0", ">=4.5,<4.6", "!=", "===x", ">=1,", ",",
              "==" + "1" * 5000, ">=" + "9" * 4301, "<12.9", "== 1.0 ; python_version<'3'", "@ http://x", ">=1\n<2"]
REGEXES = ["(a+)+$", "(", "(a|aa)+$", "[", "*", "(?P<", "a{99999999999}", "(.*a){20}$", "(\\w+)+b", "^(1+)+$",
           "(?i)SM_121A", "\\", ".*", "[[:alpha:]]", "(?<=a+)b"]
IDS = ["A", "-x", "x-", "id\n", "id\t", "é", "a" * 1000, "a..b", "1", "x", "dup", "driver-cuda-below-129", ""]
MATRIX_KEYS = [*CONDITIONS, "id", "title", "severity", "action", "summary", "remedy", "when", "refs", "symptoms",
               "verified_by", "fix", "withdrawn", "verify", "component", "entry", "stack", "schema", "packages", "env",
               "driver", "notes", "probe", "expect", "affected", "fixed", "arch", "steps", "FUZZ_SLOW", "CUTE_DSL_ARCH"]
_TOML_VALUES = toml_values()


@functools.lru_cache(maxsize=None)
def matrix_bases() -> list[dict]:
    docs = []
    for path in sorted(MATRIX_DIR.glob("*.toml")):
        with open(path, "rb") as fh:
            docs.append(tomllib.load(fh))
    # one entry that reads an env var with a regex, so regex mutants are evaluated against SLOW_ENV
    docs.append({"component": "fuzz", "entry": [{
        "id": "fuzz-env-regex", "title": "t", "severity": "warn", "action": "configure", "summary": "s", "remedy": "r",
        "when": {"env_matches": {"FUZZ_SLOW": "^a+!$", "CUTE_DSL_ARCH": "^sm_1+"}}, "refs": ["https://example.org/x"]}]})
    return docs


@st.composite
def matrices(draw, max_mutations: int = 4) -> dict:
    """A mutated matrix document; one in four also gets an env regex condition on some entry, so
    bad and backtracking regexes meet the SLOW_ENV values they explode on."""
    doc = draw(mutated(matrix_bases(), _TOML_VALUES, MATRIX_KEYS, max_mutations))
    entries = doc.get("entry") if isinstance(doc, dict) else None
    if isinstance(entries, list) and entries and draw(st.integers(0, 3)) == 0:
        entry = draw(st.sampled_from(entries))
        if isinstance(entry, dict):
            when = entry.setdefault("when", {})
            if isinstance(when, dict):
                when["env_matches"] = {draw(st.sampled_from(sorted(SLOW_ENV))): draw(st.sampled_from(REGEXES))}
    return doc


@st.composite
def matrix_files(draw, max_mutations: int = 4) -> bytes:
    """The bytes of one mutated matrix file."""
    return Blob(draw(damaged(toml_text(draw(matrices(max_mutations))))))


# ---- configs -------------------------------------------------------------------------------------


def config_docs() -> st.SearchStrategy[dict]:
    ids = st.one_of(st.sampled_from(IDS + ["driver-590-graph-capture", "no-such-id"]), st.text(max_size=12))
    ignore_item = st.one_of(ids, st.fixed_dictionaries({"id": ids}, optional={"reason": toml_values()}), toml_values())
    check = st.fixed_dictionaries(
        {},
        optional={
            "ignore": st.one_of(st.lists(ignore_item, max_size=5), ids, toml_values()),
            "fail_on": st.one_of(st.sampled_from(["info", "warn", "error", "ERROR", "", "none"]), toml_values()),
            "extra": toml_values(),
        },
    )
    return st.one_of(
        st.fixed_dictionaries({"check": check}),
        st.fixed_dictionaries({"check": toml_values()}),
        st.dictionaries(st.sampled_from(["check", "matrix", "x"]), toml_values(), max_size=2),
    )


@st.composite
def config_files(draw) -> bytes:
    return Blob(draw(damaged(toml_text(draw(config_docs())))))


RAW_SNAPSHOTS = ["", "null", "[]", "{}", "NaN", "1" * 5000, "[" * 100_000 + "]" * 100_000, '{"schema": 1e400}',
                 '{"schema": 1, "packages": {"torch": {"version": 1e400}}}', '{"schema": 1, "schema": 2}',
                 '{"schema": 1, "packages": {"torch": {"version": ' + "1" * 5000 + "}}}", '{"schema": 1.0}',
                 '{"schema": true}', '{"schema": 1, "arch": {"value": 121}}']


@st.composite
def snapshot_files(draw, max_mutations: int = 4, huge: bool = True) -> bytes:
    """The bytes of one snapshot file: a mutated snapshot, maybe damaged, or a hand-made bad one."""
    if draw(st.integers(0, 19)) == 0:
        return Blob(draw(st.sampled_from(RAW_SNAPSHOTS)).encode())
    return Blob(draw(damaged(json_text(draw(snapshots(max_mutations, huge))))))
