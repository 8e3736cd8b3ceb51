"""The gates the sparkrun plugin runs before a launch (sparkdoctor.integrations.preflight), without sparkrun: real
`recipe check` and `mods check` subprocesses against a real venv whose vLLM is a toy (vllm/toy.py, no flags), read
into one-line reasons. tests/test_sparkrun_plugin.py runs them through real sparkrun."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from sparkdoctor.integrations.preflight import ALLOW_ENV, Settings, SettingsError, judge
from tests.container.test_mods_container import serving_venv
from tests.mods.test_mods_static import AFTER, BEFORE, make_diff


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("preflight")
    venv = serving_venv(root)
    (root / "applies.diff").write_text(make_diff(BEFORE, AFTER))
    (root / "gone.diff").write_text(make_diff(BEFORE.replace("    splits = 4", "    splits = 2"), AFTER))
    for name, command in (("clean", "vllm serve org/toy"), ("bad-flag", "vllm serve org/toy --no-such-flag")):
        (root / f"{name}.yaml").write_text(f'recipe_version: "2"\nmodel: org/toy\nruntime: vllm\ncommand: {command}\n')
    (root / "broken.yaml").write_text('recipe_version: "2"\nruntime: vllm\n')
    return {"python": str(venv / "bin" / "python"), "root": str(root)}


def test_the_item_is_true_or_a_mapping_and_a_bad_one_is_one_line():
    assert Settings.parse(True) == Settings() and Settings.parse(None) == Settings()
    s = Settings.parse({"fail_on": "warn", "python": "/x/bin/python", "allow": True, "timeout": 30})
    assert (s.fail_on, s.python, s.allow, s.timeout) == ("warn", "/x/bin/python", True, 30.0)
    assert Settings.parse(s.to_dict()) == s and Settings().to_dict() == {}
    for bad, said in (({"fail_on": "fatal"}, "sparkdoctor.fail_on: 'fatal'"), ({"allow": "yes"}, "sparkdoctor.allow"),
                      ({"timeout": 0}, "sparkdoctor.timeout"), ({"timeout": True}, "sparkdoctor.timeout"),
                      ({"python": ""}, "sparkdoctor.python"), ({"pyhton": "/x"}, "unknown key 'pyhton'"),
                      ("yes", "expected `true`, `false` (the gate off) or a mapping")):
        with pytest.raises(SettingsError) as err:
            Settings.parse(bad)
        assert said in str(err.value) and "\n" not in str(err.value)


def test_a_flag_the_targets_vllm_does_not_know_refuses_the_launch_in_one_line(toy):
    verdict = judge(f"{toy['root']}/bad-flag.yaml", [], None, Settings(python=toy["python"]))
    assert verdict.refused and verdict.reasons == [
        "recipe check: vLLM 0.20.0 does not know --no-such-flag: `vllm serve` would refuse to start "
        "[flag-unknown:--no-such-flag]"]
    assert [g["gate"] for g in verdict.ran] == ["recipe check"] and verdict.ran[0]["exit_code"] == 1
    assert "\n" not in verdict.message() and verdict.message().startswith("sparkdoctor refused the launch: ")


def test_a_clean_recipe_whose_mod_applies_passes_both_gates(toy):
    verdict = judge(f"{toy['root']}/clean.yaml", [f"{toy['root']}/applies.diff"], None, Settings(python=toy["python"]))
    assert verdict.reasons == [] and not verdict.refused
    assert [(g["gate"], g["exit_code"]) for g in verdict.ran] == [("recipe check", 0), ("mods check", 0)]


def test_a_mod_that_no_longer_applies_refuses_and_allow_only_lets_it_through(toy):
    args = (f"{toy['root']}/clean.yaml", [f"{toy['root']}/gone.diff"], None)
    verdict = judge(*args, Settings(python=toy["python"]))
    assert verdict.refused and len(verdict.reasons) == 1
    assert verdict.reasons[0].startswith(
        f"mods check: mod gone.diff does not apply to the environment of {toy['python']}: vllm/toy.py: hunk 1"), verdict.reasons
    by_env = judge(*args, Settings(python=toy["python"]), env={**_env(), ALLOW_ENV: "1"})
    by_item = judge(*args, Settings(python=toy["python"], allow=True))
    for allowed in (by_env, by_item):
        assert allowed.reasons == verdict.reasons and allowed.allowed and not allowed.refused


def test_a_gate_that_cannot_judge_refuses_and_says_why(toy):
    broken = judge(f"{toy['root']}/broken.yaml", [], None, Settings(python=toy["python"]))
    assert broken.refused and broken.reasons[0].startswith("recipe check could not judge: "), broken.reasons
    assert "model" in broken.reasons[0]
    slow = judge(f"{toy['root']}/clean.yaml", [], None, Settings(python=toy["python"], timeout=0.05))
    # the seconds it took are the clock's (0.0 s or 0.1 s, as the machine goes) and the child's name is the
    # interpreter's as the suite was started (python, python3, python3.11): only the shape is the contract
    assert slow.refused and len(slow.reasons) == 1, slow.reasons
    assert re.fullmatch(r"recipe check could not judge: python[\d.]* timed out after \d+\.\ds", slow.reasons[0]), slow.reasons
    absent = judge(f"{toy['root']}/clean.yaml", [], "sparkdoctor-no-such-image:1", Settings(),
                   env={**_env(), "DOCKER_HOST": "unix:///nonexistent.sock", "PATH": str(Path(toy["python"]).parent)})
    assert absent.refused and absent.reasons[0].startswith("recipe check could not judge: "), absent.reasons


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def test_the_plugin_finds_a_recipes_mods_where_sparkrun_looks_beside_it(tmp_path):
    """sparkrun core/mods.py _resolve_adjacent: REF and mods/REF beside the recipe (a leading mods/ stripped), a folder
    with run.sh; an absolute path as it is. Registry mods (@registry/...) and anything else are not judged here."""
    from types import SimpleNamespace

    from sparkdoctor.integrations.sparkrun_plugin import resolve_mods

    for folder in ("recipes/beside", "recipes/mods/in-mods", "elsewhere/absolute", "recipes/no-script"):
        (tmp_path / folder).mkdir(parents=True)
        if not folder.endswith("no-script"):
            (tmp_path / folder / "run.sh").write_text("#!/bin/sh\n")
    recipe = SimpleNamespace(source_path=str(tmp_path / "recipes" / "r.yaml"),
                             mods=["beside", "mods/in-mods", "in-mods", str(tmp_path / "elsewhere" / "absolute"),
                                   "@eugr/fix-x", "no-script", "not-there"])
    found, missing = resolve_mods(recipe)
    assert found == [str(tmp_path / p) for p in ("recipes/beside", "recipes/mods/in-mods", "recipes/mods/in-mods",
                                                  "elsewhere/absolute")]
    assert missing == ["@eugr/fix-x", "no-script", "not-there"]


def test_the_memory_verdict_refuses_a_launch_that_does_not_fit_now_whatever_fail_on_says(toy, tmp_path):
    """With the checkpoint (Qwen3-8B's real config and headers, sparse shards), recipe check judges the memory free
    now on a GB10 fixture box (SPARKDOCTOR_HOST_ROOT): with 64 GiB available the launch's 0.9 share does not fit as
    written, a warning that refuses it even at fail_on error (it would not start), the settings that fit in the
    reason; with 119 GiB available it fits (info) and passes."""
    from tests.audit import builders
    from tests.memory.test_verdict import box

    model = builders.qwen3_8b(tmp_path / "qwen3-8b", None)
    recipe = tmp_path / "qwen3.yaml"
    recipe.write_text(f'recipe_version: "2"\nmodel: {model}\nruntime: vllm\ncommand: vllm serve org/toy\n')
    tight = box(tmp_path / "tight", available_gib=64)
    refused = judge(str(recipe), [], None, Settings(python=toy["python"]), env={**_env(), "SPARKDOCTOR_HOST_ROOT": str(tight.root)},
                    model=str(model))
    assert refused.refused and len(refused.reasons) == 1, refused.reasons
    assert refused.reasons[0].startswith("recipe check: the launch does not fit as written"), refused.reasons
    assert "it fits with --gpu-memory-utilization 0.48" in refused.reasons[0] and refused.reasons[0].endswith("[memory-fits-with]")
    assert refused.reasons[0].count("--gpu-memory-utilization 0.48") == 1, refused.reasons  # the settings said once
    roomy = box(tmp_path / "roomy", available_gib=119)
    passed = judge(str(recipe), [], None, Settings(python=toy["python"]), env={**_env(), "SPARKDOCTOR_HOST_ROOT": str(roomy.root)},
                   model=str(model))
    assert passed.reasons == [] and not passed.refused
    unjudged = judge(str(recipe), [], None, Settings(python=toy["python"]), env={**_env(), "SPARKDOCTOR_HOST_ROOT": str(tight.root)})
    assert unjudged.reasons == []  # without the model the gate does not size the launch


def test_a_recipe_that_leaves_the_port_to_sparkrun_is_judged_not_refused(tmp_path, toy):
    """docs/sparkrun.md's own example (`--port {port}`, no `defaults.port`) was refused: "port '{port}' is not a
    number", though sparkrun serves it on 8000 (core/launcher.py). The exported recipe gets sparkrun's port; one
    the recipe or the run names is kept."""
    from types import SimpleNamespace

    from sparkdoctor.integrations.sparkrun_plugin import export_recipe

    for defaults, port in (({}, 8000), ({"port": 9123}, 9123)):
        data = {"recipe_version": "2", "model": "Qwen/Qwen3-0.6B", "runtime": "vllm",
                "command": "vllm serve {model} --port {port} --max-model-len 1024", **({"defaults": defaults} if defaults else {})}
        recipe = SimpleNamespace(name=f"p{port}", to_dict=lambda overrides, effective, data=data: json.loads(json.dumps(data)))
        path = export_recipe(recipe, None, tmp_path)
        verdict = judge(str(path), [], None, Settings.parse({"python": toy["python"]}), env=_env())
        # judged (the toy vLLM knows neither flag: that is its own finding), not "could not judge"
        assert not any("could not judge" in r or "is not a number" in r for r in verdict.reasons), verdict.message()
        assert any("does not know --port" in r for r in verdict.reasons), verdict.message()
        assert yaml.safe_load(path.read_text())["defaults"]["port"] == port


def test_an_sglang_recipe_is_not_refused_for_flags_vllm_does_not_have(tmp_path, toy):
    """sparkrun runs `runtime: sglang` recipes; judged against the target's vLLM, SGLang's own `--model-path` was
    refused as a flag vLLM does not know, so no SGLang recipe could pass the gate."""
    path = tmp_path / "sglang.yaml"
    path.write_text('recipe_version: "2"\nmodel: org/toy\nruntime: sglang\n'
                    "command: python3 -m sglang.launch_server --model-path {model} --tp-size 1\n")
    verdict = judge(str(path), [], None, Settings(python=toy["python"]), env=_env())
    assert not any("flag-unknown" in r for r in verdict.reasons), verdict.message()


def test_a_recipe_the_gate_cannot_read_is_named_by_its_own_path_not_the_scratch_copy(tmp_path, toy, monkeypatch):
    """The gate judges a scratch copy of the recipe as sparkrun resolved it; its "cannot read" line named that copy,
    a file deleted by the time the user reads the line."""
    from types import SimpleNamespace

    from sparkdoctor.integrations import sparkrun_plugin

    monkeypatch.setattr(sparkrun_plugin, "say", lambda line: None)
    data = {"recipe_version": "2", "model": "org/toy", "runtime": "vllm", "command": "vllm serve {model}",
            "defaults": {"extra": ["a", "b"]}}  # sparkrun takes a list default; sparkdoctor's reader does not
    recipe = SimpleNamespace(name="listdef", source_path=str(tmp_path / "listdef.yaml"), container=None, mods=[],
                             model="org/toy", plugin_items={"sparkdoctor": {"python": toy["python"]}},
                             to_dict=lambda overrides, effective: json.loads(json.dumps(data)))
    context = SimpleNamespace(plan=SimpleNamespace(recipe=recipe, host_list=[]), options=SimpleNamespace(overrides=None))
    with pytest.raises(sparkrun_plugin.LaunchRefused) as refused:
        sparkrun_plugin.preflight(context, None)
    said = str(refused.value)
    assert f"could not judge: {tmp_path / 'listdef.yaml'} (as sparkrun resolved it): field 'defaults.extra'" in said, said
    assert "sparkdoctor-sparkrun-" not in said


def _context(item: object, **recipe: object) -> object:
    """sparkrun 0.4.2's ExecutionContext as the step sees it (core/execution.py: options, plan, sctx; the plan an
    api/_models.py RunPlan whose host_list names the hosts the workload runs on)."""
    from types import SimpleNamespace

    fields = {"name": "r", "source_path": "/recipes/r.yaml", "container": None, "mods": [], "model": "org/toy",
              "plugin_items": {"sparkdoctor": item}, **recipe}
    return SimpleNamespace(plan=SimpleNamespace(recipe=SimpleNamespace(**fields), host_list=("localhost",)),
                           options=SimpleNamespace(overrides={}))


def test_sparkdoctor_false_turns_the_gate_off_for_that_recipe_and_says_so_in_one_line(monkeypatch):
    """`sparkdoctor: false` (the user turning the gate off for one recipe) was refused as a malformed item ("expected
    `true` or a mapping ... got bool"), so the recipe could not launch at all; and sparkrun's export of the item
    (`value or True`) would have written a `false` back as `true`."""
    from sparkdoctor.integrations import sparkrun_plugin as plugin

    said: list[str] = []
    monkeypatch.setattr(plugin, "say", said.append)
    monkeypatch.setattr(plugin, "judge", lambda *a, **k: pytest.fail("a gate ran though the recipe turned it off"))
    item = plugin.parse_item(False, None)  # type: ignore[arg-type]  # sparkrun's Recipe: not read for false
    assert plugin.validate_item(item, None) == [] and plugin.export_item(item, None) is False  # type: ignore[arg-type]
    receipt = plugin.preflight(_context(item, name="off"), {})
    assert said == ["sparkdoctor: gate turned off by the recipe off (sparkdoctor: false): nothing judged"]
    assert receipt == {"reasons": [], "gates": [], "allowed": False, "off": True}
    on = plugin.parse_item(True, None)  # type: ignore[arg-type]
    assert on == {} and plugin.export_item(on, None) is True  # type: ignore[arg-type]


def test_a_relative_python_is_refused_in_one_line_not_resolved_against_the_working_folder(tmp_path, monkeypatch):
    """A relative `python:` was passed on as it was, so `recipe check` ran whatever that path named under sparkrun's
    working folder: a cloned recipe repository, launched from its own folder, could name an interpreter of its own.
    The documentation promises no folder it is relative to, so a relative path is refused (a recipe error in
    sparkrun, before any launch); `~/...` is the user's home and stays allowed."""
    from sparkdoctor.integrations import sparkrun_plugin as plugin

    marker = tmp_path / "ran"
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    fake = tmp_path / "venv" / "bin" / "python"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    for relative in ("venv/bin/python", "./venv/bin/python", "venv"):
        with pytest.raises(SettingsError) as err:
            plugin.parse_item({"python": relative}, None)  # type: ignore[arg-type]
        said = str(err.value)
        assert said.startswith(f"sparkdoctor.python: {relative!r} is a relative path") and "\n" not in said, said
    assert not marker.exists()
    home = Settings.parse({"python": "~/vllm/bin/python"})
    assert home.python == str(Path.home() / "vllm" / "bin" / "python")
