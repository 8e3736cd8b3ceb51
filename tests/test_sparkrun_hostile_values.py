"""Recipe values sparkrun hands the plugin's preparation step that name no file this machine can look up: a `model`
or a mod of `~nosuchuser/...` (no home to expand) or with a name past NAME_MAX. The step raised RuntimeError or
OSError out of pathlib, and sparkrun ended the launch on it ("launch preparation failed: Could not determine home
directory."), though no gate had refused it; `sparkdoctor audit` said "internal error". Now the model is "not on this
machine" (memory not judged), the mod "not beside the recipe", and audit says one line about the name."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.locate import resolve_model
from sparkdoctor.integrations.sparkrun_plugin import memory_model, resolve_mods

HOSTILE = ["~sparkdoctor-no-such-user/model", "x" * 5000, "/" + "y" * 300 + "/z"]


@pytest.mark.parametrize("ref", HOSTILE)
def test_a_model_that_names_no_readable_folder_is_not_judged_and_the_launch_goes_on(ref):
    model, why = memory_model(SimpleNamespace(model=ref), [])
    assert model is None and why is not None and "is not on this machine" in why and len(why) < 400, why
    with pytest.raises(AuditError):
        resolve_model(ref)


@pytest.mark.parametrize("ref", HOSTILE)
def test_a_mod_that_names_no_readable_folder_is_not_beside_the_recipe(tmp_path, ref):
    recipe = SimpleNamespace(source_path=str(tmp_path / "r.yaml"), mods=[ref])
    assert resolve_mods(recipe) == ([], [ref])  # type: ignore[arg-type]


def test_audit_of_such_a_model_is_one_line_not_an_internal_error():
    env = {k: v for k, v in os.environ.items() if k != "SPARKDOCTOR_DEBUG"}
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "audit", HOSTILE[0]], capture_output=True, text=True,
                          timeout=120, env=env, check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "internal error" not in done.stderr and HOSTILE[0] in done.stderr, done.stderr


def _unwritable(tmp_path):
    """sparkrun 0.4.2's ExecutionContext (core/execution.py) for a recipe whose to_dict holds a value yaml.safe_dump
    cannot write: the step's own failure, not a gate's verdict."""
    recipe = SimpleNamespace(name="odd", source_path=str(tmp_path / "odd.yaml"), container=None, mods=[], model="org/x",
                             plugin_items={"sparkdoctor": True},
                             to_dict=lambda overrides, effective: {"model": "org/x", "defaults": {"when": object()}})
    return SimpleNamespace(plan=SimpleNamespace(recipe=recipe, host_list=[]), options=SimpleNamespace(overrides=None))


def test_the_steps_own_failure_refuses_the_launch_in_one_line_naming_the_cause_and_allow(tmp_path, monkeypatch):
    """The step raised yaml's RepresenterError, and sparkrun ended the launch as "launch preparation failed:
    ('cannot represent an object', <object object at 0x...>)": no word of sparkdoctor, no way through. A gate that
    did not run is no pass: the launch is refused, in one line naming the cause and `allow`."""
    from sparkdoctor.integrations import sparkrun_plugin as plugin

    monkeypatch.setattr(plugin, "say", lambda line: None)
    monkeypatch.delenv("SPARKDOCTOR_SPARKRUN_ALLOW", raising=False)
    with pytest.raises(plugin.LaunchRefused) as refused:
        plugin.preflight(_unwritable(tmp_path), None)
    said = str(refused.value)
    assert said.startswith("sparkdoctor refused the launch: the gate could not run: cannot write the recipe as "
                           "sparkrun resolved it"), said
    assert "cannot represent an object" in said and "SPARKDOCTOR_SPARKRUN_ALLOW=1" in said and "\n" not in said, said


def test_with_allow_the_steps_own_failure_is_said_and_the_launch_goes_on(tmp_path, monkeypatch):
    """`allow` (here SPARKDOCTOR_SPARKRUN_ALLOW=1) lets through every gate that could not judge; the step's own
    failure ended the launch whatever it said."""
    from sparkdoctor.integrations import sparkrun_plugin as plugin

    said: list[str] = []
    monkeypatch.setattr(plugin, "say", said.append)
    monkeypatch.setenv("SPARKDOCTOR_SPARKRUN_ALLOW", "1")
    receipt = plugin.preflight(_unwritable(tmp_path), None)
    assert receipt["allowed"] is True and receipt["gates"] == [], receipt
    assert any(line.startswith("sparkdoctor (allowed, not enforced): the gate could not run: cannot write the recipe")
               for line in said), said
