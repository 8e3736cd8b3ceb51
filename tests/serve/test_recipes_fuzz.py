"""Whatever a recipe file holds, reading it gives a Recipe or one RecipeError line, never a traceback: generated
documents of every shape the three readers see (hypothesis), written as real files."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkdoctor import recipes
from sparkdoctor.recipes import RecipeError
from sparkdoctor.recipes.resolve import format_strict, split_command, substitute_lenient

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 70000), st.floats(allow_nan=False, width=32),
                    st.text(max_size=12), st.sampled_from(["{model}", "{port}", "{{x}}", "{", "}", "{0}", "{a.b}", "'", "\\"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=8)
keys = st.sampled_from(["recipe_version", "name", "container", "command", "defaults", "env", "model", "mods",
                        "build_args", "cluster_only", "benchmark", "metadata", "runtime", "workarounds", "needs",
                        "schema", "port", "host", "served_model_name", "readiness_path", "workload", "description"])
commands = st.one_of(st.text(max_size=40), st.lists(st.text(max_size=10), max_size=4),
                     st.sampled_from(["vllm serve {model} --port {port}", "vllm serve m '{{\"a\":1}}'", "vllm serve {x",
                                      "vllm serve m \\\n --a 'b", "  # only a comment\n"]))
BASES = [
    {"recipe_version": "1", "name": "e", "container": "c", "defaults": {"port": 8000, "tp": 1},
     "command": "vllm serve m --port {port} -tp {tp}"},
    {"model": "org/m", "defaults": {"port": 8000, "max_model_len": 1024}},
    {"model": "org/m", "command": "vllm serve {model} --port {port} --x '{\"a\":{n}}'", "defaults": {"port": 1, "n": 2}},
]
# A valid recipe of each format with up to three fields replaced: most examples get past the first check.
documents = st.tuples(st.sampled_from(BASES), st.dictionaries(keys, st.one_of(values, commands), max_size=3)).map(
    lambda pair: {**pair[0], **pair[1]})


def _read(suffix: str, text: str, overrides=None):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"r{suffix}"
        path.write_text(text)
        try:
            recipe = recipes.load(path, overrides)
        except RecipeError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)
            return None
        json.dumps(recipe.to_dict())  # whatever was read can be stored
        assert recipe.fingerprint() and isinstance(recipe.argv, list)
        return recipe


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents, st.sampled_from([None, {"port": "1"}, {"env.X": "1"}, {"nope": "1"}]))
def test_any_yaml_recipe_reads_or_fails_in_one_line(doc, overrides):
    _read(".yaml", yaml.safe_dump(doc), overrides)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_any_toml_recipe_reads_or_fails_in_one_line(doc):
    def toml_value(v):
        return json.dumps(v) if isinstance(v, (str, int, bool)) else None

    doc = {k: v for k, v in doc.items() if k not in ("recipe_version", "defaults")}
    doc.setdefault("command", ["vllm", "serve", "{model}"])
    if isinstance(doc["command"], str):
        doc["command"] = doc["command"].split()
    lines = [f"{k} = {toml_value(v)}" for k, v in doc.items() if toml_value(v) is not None]
    lines += [f"command = {json.dumps(doc['command'])}"] if isinstance(doc["command"], list) else []
    _read(".toml", "\n".join(lines) + "\n")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), st.dictionaries(st.sampled_from(["model", "port", "x"]), st.text(max_size=5)))
def test_templating_and_splitting_never_raise_anything_else(template, params):
    try:
        format_strict(template, params, "f")
    except RecipeError:
        pass
    text, unresolved = substitute_lenient(template, params)
    assert not unresolved & set(params)
    try:
        split_command(text, "f")
    except RecipeError:
        pass
