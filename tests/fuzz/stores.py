"""The inputs of the second half of sparkdoctor, for tests/test_fuzz_inputs.py: recipe files in the three formats,
ledger files, fix journals, safetensors headers and logs. As for snapshots (inputs.py), every one starts from
something real (the repository's recipes, a ledger written by the ledger's own code, a journal laid out as
fix/journal.py writes it, headers built as tests/audit/builders.py builds a real export, the matrix's own
symptom strings) and is mutated with the values of values.py, then written out and maybe damaged (files.py).
"""

from __future__ import annotations

import copy
import functools
import json
import sys
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from tests.fuzz.files import damaged, json_text, materialize, toml_text
from tests.fuzz.mutate import mutated
from tests.fuzz.values import SPECIAL, BigNumber, Blob, Deep, Huge, json_values

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
RECIPE_DIRS = [REPO / "recipes", REPO / "tests" / "data" / "recipes"]

# ---- recipes -------------------------------------------------------------------------------------------

RECIPE_KEYS = ["recipe_version", "name", "container", "command", "defaults", "env", "model", "mods", "build_args",
               "cluster_only", "solo_only", "benchmark", "metadata", "runtime", "workarounds", "needs", "schema", "port",
               "host", "served_model_name", "readiness_path", "workload", "description", "args", "tg", "pp", "flag",
               "because", "max_model_len", "tensor_parallel", "<<"]


@functools.cache
def recipe_bases() -> tuple[tuple[str, Any], ...]:
    """(suffix, document) of every real recipe: ours (TOML), eugr v1 and sparkrun v2 (YAML)."""
    out = []
    for folder in RECIPE_DIRS:
        for path in sorted(folder.iterdir()):
            if path.suffix == ".toml":
                out.append((".toml", tomllib.loads(path.read_text(encoding="utf-8"))))
            elif path.suffix in (".yaml", ".yml"):
                out.append((".yaml", yaml.safe_load(path.read_text(encoding="utf-8"))))
    assert {s for s, _ in out} == {".toml", ".yaml"} and len(out) >= 8, out
    return tuple(out)


def _laughs(levels: int) -> str:
    lines = ["lol0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"lol{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + f"\nmods: *l{levels - 1}\n"


# What only YAML can say: aliases, merge keys, tags, several documents, and the values it cannot build.
YAML_EXTRAS = [
    "", "", "", _laughs(4), _laughs(7), _laughs(9), "base: &b {port: 9000, tp: 2}\ndefaults:\n  <<: *b\n  tp: 1\n",
    "defaults:\n  <<: [{a: 1}, {b: 2}]\n", "self: &s [*s]\n", "defaults: &d {<<: *d}\n", "k: &k {*k : 1}\n",
    "x: !!python/object/apply:os.system [true]\n", "---\nsecond: doc\n", "when: 2026-13-45\n", "port: " + "9" * 5000 + "\n",
    "bad: \x01\n", "? [a, b]\n: 1\n", "%YAML 1.1\n---\n", "env: {A: *undefined}\n", "!!binary x: 1\n", "t: !!timestamp x\n",
    "f: !!float 1e999\n", "i: 0x" + "f" * 4000 + "\n", "defaults:\n  <<: *nope\n", "defaults: {<<: 5}\n",
]


def _yaml_text(doc: Any, style: int) -> str:
    if style == 0:
        return json_text(doc)  # JSON is YAML's flow style: markers go in as literal deep brackets and long digits
    plain = materialize(_cap(doc))
    try:
        return yaml.safe_dump(plain, default_flow_style=style == 2, allow_unicode=True, sort_keys=False)
    except (yaml.YAMLError, RecursionError, ValueError):
        return json_text(doc)


def _cap(value: Any) -> Any:
    """Markers made shallow enough for PyYAML's recursive dumper (the JSON style carries the deep ones)."""
    if isinstance(value, Deep):
        return Deep(min(value.depth, 200), value.kind)
    if isinstance(value, dict):
        return {k: _cap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cap(v) for v in value]
    return value


@st.composite
def recipe_files(draw) -> tuple[str, bytes]:
    """(suffix, bytes) of one mutated recipe file."""
    suffix, base = draw(st.sampled_from(recipe_bases()))
    doc = draw(mutated([base], json_values(), RECIPE_KEYS, 4))
    if suffix == ".toml":
        text = toml_text(doc) if isinstance(doc, dict) else json_text(doc)
    else:
        style = draw(st.integers(0, 2))
        text = _yaml_text(doc, style)
        extra = draw(st.sampled_from(YAML_EXTRAS))
        text = (extra + text) if extra.startswith("%") else (text + ("\n" if not text.endswith("\n") else "") + extra)
    return suffix, Blob(draw(damaged(text)))


# ---- ledgers -------------------------------------------------------------------------------------------

LEDGER_COLUMNS = [("runs", "summary_json"), ("runs", "findings_json"), ("runs", "facts_json"), ("runs", "recipe_json"),
                  ("runs", "workload_json"), ("runs", "server_json"), ("samples", "sample_json"),
                  ("comparisons", "result_json"), ("conclusions", "data_json"), ("runs", "memory_json")]
RAW_JSON = ["", "{", "[]", "null", "5", '"x"', "{}", '{"levels": 5}', '{"levels": [{}]}', '{"levels": [{"concurrency": "1"}]}',
            '{"headline": []}', "9" * 5000, "[" * 50_000 + "]" * 50_000, "NaN", '{"a": 1e999}', "\x00", "\udcff"]
PRAGMAS = [("user_version", v) for v in (-1, -2**31, 0, 2, 5, 2**31 - 1)] + [("application_id", v) for v in (0, 1, -1)]


@functools.cache
def template_ledger() -> tuple[Path, dict[tuple[str, str], list[Any]]]:
    """A real ledger, written by the ledger's own code: an A/B with its conclusion, a plain run with samples;
    and the JSON each column of it holds (what the damage starts from)."""
    import sqlite3
    import tempfile

    from sparkdoctor.ledger import Ledger
    from tests.ledger.test_ledger import record
    from tests.rerun.ledgerdata import add_ab, write_recipe

    folder = Path(tempfile.mkdtemp(prefix="fuzz-ledger-"))
    paths = {"A": write_recipe(folder, "one-seq", ', "--max-num-seqs", "1"'), "B": write_recipe(folder, "default")}
    path = folder / "template.sqlite"
    with Ledger(path) as led:
        add_ab(led, paths, LEDGER_FACTS, {"A": [40.0, 41.0, 40.5], "B": [100.0, 99.0, 101.0]}, "default-vs-one-seq")
        led.add_run(record(name="plain", samples=4, memory={"high_water_bytes": 2**30, "high_water_at_s": 3.5,
                                                            "lowest_available_bytes": 2**33, "samples_taken": 8,
                                                            "every_s": 0.5, "processes": 2, "cgroup_limit_bytes": None,
                                                            "series": [[0.0, 2**33, 2**29], [3.5, 2**33, 2**30]]}))
        led.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db = sqlite3.connect(path)
    stored = {(t, c): [json.loads(v) for (v,) in db.execute(f"SELECT {c} FROM {t}") if v] for t, c in LEDGER_COLUMNS}
    db.close()
    return path, stored


LEDGER_FACTS = {"schema": 1, "packages": {"vllm": {"version": "0.31.0"}}, "target": {"kind": "local"}}


@st.composite
def ledger_damage(draw) -> list[tuple]:
    """1-3 damages to the template ledger: a JSON column of one row (its own JSON mutated, raw text, bytes,
    NULL or a number), a schema pragma, bytes overwritten or cut off, or rows deleted."""
    _, stored = template_ledger()
    out: list[tuple] = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["column"] * 5 + ["pragma", "bytes", "truncate", "delete"]))
        if kind == "column":
            table, column = draw(st.sampled_from(LEDGER_COLUMNS))
            how = draw(st.integers(0, 3))
            if how == 0:
                value: Any = draw(st.sampled_from(RAW_JSON))
            elif how == 1:
                value = draw(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.binary(max_size=20), st.floats()))
            else:
                value = json_text(draw(mutated(stored[(table, column)], json_values(), LEDGER_KEYS, 3)))
            out.append(("column", table, column, draw(st.integers(1, 4)), value))
        elif kind == "pragma":
            out.append(("pragma", *draw(st.sampled_from(PRAGMAS))))
        elif kind == "bytes":
            out.append(("bytes", draw(st.floats(0, 1)), draw(st.binary(min_size=1, max_size=64))))
        elif kind == "truncate":
            out.append(("truncate", draw(st.floats(0, 1))))
        else:
            out.append(("delete", draw(st.sampled_from(["runs", "samples", "comparisons", "conclusions"])), draw(st.integers(1, 4))))
    return out


LEDGER_KEYS = ["high_water_bytes", "series", "levels", "headline", "concurrency", "decode_tps_per_stream", "round_output_tps", "a", "b", "path", "label",
               "runs", "A", "B", "fingerprints", "recipe_hashes", "ratio", "ci_low", "ci_high", "verdict", "previous",
               "sets", "workload", "packages", "version", "argv", "env", "model", "client", "server", "median"]


# ---- fix journals --------------------------------------------------------------------------------------

JOURNAL_KEYS = ["journal_version", "id", "created", "target", "installer", "plan", "packages_before", "touched_before",
                "hashes_before", "files", "dist_files", "wheels", "path", "side", "existed", "sha256", "copy", "kind",
                "python", "steps", "op", "name", "version", "source", "size"]


JOURNAL = REPO / "tests" / "data" / "journals" / "uv-apply.json"  # written by `fix --yes` on a real uv venv
# (tests/fix/test_fix_apply.py::test_plan_apply_rollback_byte_for_byte[uv]); dist_files and hashes_before cut
# to a few entries each, the temporary folder renamed


@functools.cache
def journal_base() -> dict[str, Any]:
    return json.loads(JOURNAL.read_text(encoding="utf-8"))


MARKERS = ["COMPLETE", "applying", "applied", "rolling-back", "rolled-back"]


@st.composite
def journal_dirs(draw, base: dict[str, Any]) -> dict[str, Any]:
    """What a journal folder holds: journal.json's bytes, whether COMPLETE matches them, and the markers."""
    doc = draw(mutated([base], json_values(), JOURNAL_KEYS, 4)) if draw(st.integers(0, 9)) else draw(json_values())
    body = draw(damaged(json_text(doc) + "\n"))
    complete = draw(st.sampled_from(["match"] * 6 + ["absent", "wrong", "garbage"]))
    markers = draw(st.lists(st.sampled_from(MARKERS[1:]), max_size=3, unique=True))
    marker_body = draw(st.sampled_from(["{}", "", "[", '{"at": 5}', "null", json.dumps({"at": "x", "done": [1]}),
                                        json.dumps({"at": "2026-11-26T13:09:59Z", "ok": True, "packages": 4, "files": 78})]))
    return {"body": Blob(body), "complete": complete, "markers": markers, "marker_body": marker_body}


# ---- safetensors headers -------------------------------------------------------------------------------

HEADER_KEYS = ["dtype", "shape", "data_offsets", "__metadata__", "format", "weight", "bias"]
DTYPES = ["BF16", "F8_E4M3", "F4", "U8", "F32", "I64", "F6_E2M3", "bf16", "", "F128"]
# shapes and offsets whose products no file holds: 2**63, 2**64 and numbers of 2,200 and 4,200 digits (two of
# which multiply past Python's 4,300-digit limit for printing), as a hostile header writes them
HUGE_INTS = [BigNumber(4200), BigNumber(2200), 2**64, 2**63 - 1, 2**31]  # hypothesis favours the front
SHAPES = st.one_of(st.lists(st.sampled_from([*HUGE_INTS, 3]), min_size=2, max_size=4),
                   st.tuples(st.just(0), st.sampled_from(HUGE_INTS)).map(list))


@functools.cache
def header_bases() -> list[dict[str, Any]]:
    from tests.audit import builders

    tiny = [("model.embed_tokens.weight", "BF16", [100, 64])] + builders.linear("model.layers.0.mlp.up_proj", 128, 64, "nvfp4") \
        + builders.linear("model.layers.0.self_attn.q_proj", 64, 64, "fp8-block") + [("lm_head.weight", "BF16", [100, 64])]
    out = []
    for entries in (tiny, tiny[:1], []):
        raw, _ = builders.header_bytes(entries)
        out.append(json.loads(raw))
    return out


@st.composite
def safetensors_files(draw) -> bytes:
    """The bytes of one safetensors file: a mutated real-shaped header, its length field maybe wrong, its data
    region maybe short or long (the data itself is never read)."""
    if draw(st.integers(0, 4)) == 0:  # a well-formed file but for one tensor's shape or offsets, as a hostile writer sets them
        doc = copy.deepcopy(header_bases()[0])
        entry = doc[draw(st.sampled_from(sorted(k for k in doc if k != "__metadata__")))]
        entry[draw(st.sampled_from(["shape", "shape", "data_offsets"]))] = draw(SHAPES)
        raw = json_text(doc).encode()
        data = max(e["data_offsets"][1] for k, e in header_bases()[0].items() if k != "__metadata__")
        return Blob(len(raw).to_bytes(8, "little") + raw + b"\0" * data)
    doc = draw(mutated(header_bases(), st.one_of(json_values(), st.sampled_from(DTYPES), SHAPES), HEADER_KEYS, 3))
    raw = draw(damaged(json_text(doc)))
    ends = [e["data_offsets"][1] for e in (doc.values() if isinstance(doc, dict) else [])
            if isinstance(e, dict) and isinstance(e.get("data_offsets"), list) and len(e["data_offsets"]) == 2
            and isinstance(e["data_offsets"][1], int) and 0 <= e["data_offsets"][1] < 10**7]
    data = max(ends, default=0) + draw(st.sampled_from([0, 0, 0, 1, -1, 7]))
    length = len(raw) + draw(st.sampled_from([0] * 8 + [1, -1, 2**40, 2**64 - 1]))
    return Blob(max(0, length % 2**64).to_bytes(8, "little") + raw + b"\0" * max(0, data))


# ---- logs ----------------------------------------------------------------------------------------------


@functools.cache
def symptom_strings() -> tuple[str, ...]:
    from sparkdoctor.matrix import load

    found = sorted({s for e in load(None).entries for s in e.symptoms if s.strip()})
    assert found
    return tuple(found)


LOG_NOISE = ["INFO 11-26 12:00:00 [core.py:123] loading weights", "\x1b[31mERROR\x1b[0m worker died", "", " ", "\t",
             "Traceback (most recent call last):", '  File "/usr/lib/python3.12/site-packages/vllm/x.py", line 1234, in f',
             "C:\\models\\x", "/" * 1000, "a:" * 500, '{"k": "' + "v" * 5000 + '"}', "\x00\x01\x02", "\r", "\u2028x",
             "[bold]markup[/]", "9" * 5000]


@st.composite
def log_files(draw) -> bytes:
    """A server log or a pasted error: noise, real symptom strings (whole, wrapped at any character, recoloured,
    with other paths and numbers), huge lines, invalid UTF-8."""
    lines = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.integers(0, 5))
        if kind <= 1:
            s = draw(st.sampled_from(symptom_strings()))
            if kind == 1 and len(s) > 2:
                at = draw(st.integers(1, len(s) - 1))
                s = s[:at] + draw(st.sampled_from(["\n", "\n  ", "\x1b[0m\n", " "])) + s[at:]
            lines.append(s)
        elif kind == 2:
            lines.append(draw(st.sampled_from(LOG_NOISE)))
        elif kind == 3:
            lines.append(draw(st.sampled_from(SPECIAL)))
        elif kind == 4:
            lines.append(Huge(draw(st.sampled_from(["a", "/a", "1.", "x/", "\x1b[", "é"])) * draw(st.sampled_from([10_000, 200_000]))))
        else:
            lines.append(draw(st.text(max_size=60)))
    text = draw(st.sampled_from(["\n", "\r\n", "\r"])).join(lines)
    return Blob(draw(damaged(text)))
