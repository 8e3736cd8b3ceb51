"""The inputs the fuzz suite feeds to sparkdoctor: snapshots, matrix files and config files.

Every one starts from something real (tests/data/facts/*.json, tests/gb10.py's builder,
matrix/*.toml) and is mutated (tests/fuzz/mutate.py) with the values of tests/fuzz/values.py.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from sparkdoctor.matrix import CONDITIONS
from tests.fuzz.files import damaged, json_text, toml_text
from tests.fuzz.mutate import mutated
from tests.fuzz.values import IDS, REGEXES, Blob, json_values, toml_values
from tests.gb10 import gb10_facts, pin

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
FACTS_DIR = REPO / "tests" / "data" / "facts"
MATRIX_DIR = REPO / "matrix"

# An env var whose value makes a backtracking regex explode: the facts the matrix fuzz uses carry it.
SLOW_ENV = {"FUZZ_SLOW": "a" * 48 + "!", "CUTE_DSL_ARCH": "a" * 48 + "!"}


# ---- snapshots -----------------------------------------------------------------------------------

FACT_KEYS = [
    "schema", "taken_at", "tool", "target", "host", "arch", "gpus", "driver", "toolkits", "packages", "cutedsl", "env",
    "constraints", "kernels", "capabilities", "recipe", "errors", "timings_ms", "value", "source", "detected", "why",
    "version", "cuda", "name", "status", "detail", "runs", "ptxas", "ptxas_version", "compiled", "sass_ok", "ran",
    "verified", "error", "run_note", "ms", "cached", "integrity", "files_modified", "files_missing", "active_build",
    "evidence", "requirement", "specifier", "file", "collector", "tool", "path", "used_by", "sm_121a", "cc", "arch",
    "memory_total_mib", "unified", "torch", "vllm", "nvidia-cutlass-dsl", "CUTE_DSL_ARCH", "machine", "kind", "python",
]


@functools.cache
def snapshot_bases() -> list[dict]:
    docs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(FACTS_DIR.glob("*.json"))]
    assert docs, f"no snapshots in {FACTS_DIR}"
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


@functools.cache
def snapshots(max_mutations: int = 4, huge: bool = True) -> st.SearchStrategy[Any]:
    """Mutated snapshot documents (JSON-shaped; may hold Deep/BigNumber markers)."""
    return mutated(snapshot_bases(), json_values(huge), FACT_KEYS, max_mutations)


# ---- matrices ------------------------------------------------------------------------------------

MATRIX_KEYS = [*CONDITIONS, "id", "title", "severity", "action", "summary", "remedy", "when", "refs", "symptoms",
               "verified_by", "fix", "withdrawn", "verify", "component", "entry", "stack", "schema", "packages", "env",
               "driver", "notes", "probe", "expect", "affected", "fixed", "arch", "steps", "FUZZ_SLOW", "CUTE_DSL_ARCH"]
_TOML_VALUES = toml_values()


@functools.cache
def matrix_bases() -> list[dict]:
    docs = []
    for path in sorted(MATRIX_DIR.glob("*.toml")):
        with open(path, "rb") as fh:
            docs.append(tomllib.load(fh))
    assert docs, f"no matrix files in {MATRIX_DIR}"
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


@functools.cache
def config_docs() -> st.SearchStrategy[dict]:
    ids = st.one_of(st.sampled_from(IDS + ["driver-590-graph-capture", "no-such-id"]), st.text(max_size=12))
    ignore_item = st.one_of(ids, st.fixed_dictionaries({"id": ids}, optional={"reason": _TOML_VALUES}), _TOML_VALUES)
    check = st.fixed_dictionaries(
        {},
        optional={
            "ignore": st.one_of(st.lists(ignore_item, max_size=5), ids, _TOML_VALUES),
            "fail_on": st.one_of(st.sampled_from(["info", "warn", "error", "ERROR", "", "none"]), _TOML_VALUES),
            "extra": _TOML_VALUES,
        },
    )
    return st.one_of(
        st.fixed_dictionaries({"check": check}),
        st.fixed_dictionaries({"check": _TOML_VALUES}),
        st.dictionaries(st.sampled_from(["check", "matrix", "x"]), _TOML_VALUES, max_size=2),
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
