"""The sparkrun plugin through real sparkrun 0.4.2 (from the registry, in a Python 3.12 venv with this checkout
installed as `sparkdoctor-gb10[sparkrun]`): sparkrun's own loader finds and loads it, and `sparkrun run` refuses a
recipe whose gate fails and goes on with a clean one.

How far a launch gets here: without a GPU, sparkrun's planning refuses a real (non-dry) run before preparation
("only 0 accelerator slot(s) available"), so the launches are `--dry-run`s, which plan on the platform's assumed
hardware and do run the preparation steps. A clean recipe then goes past preparation ("[1/6] Preparing") to
"[3/6] Distributing resources", where it stops because its image is not on this machine (`--offline`: no pull).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from sparkdoctor.integrations.preflight import ALLOW_ENV
from tests import venvs

pytestmark = pytest.mark.slow
IMAGE = "sparkdoctor-test/vllm:absent"
REFUSED = "Error: launch preparation failed: sparkdoctor refused the launch: "
INVENTORY = """
import json
from dataclasses import asdict
from sparkrun.core.bootstrap import init_sparkrun
init_sparkrun()
from sparkrun.core.installed_plugins import installed_plugin_inventory
from sparkrun.core.recipe_items import registered_recipe_items
print(json.dumps({"inventory": [asdict(r) for r in installed_plugin_inventory()],
                  "items": [[r.key, r.owner, r.preparation_steps is not None] for r in registered_recipe_items()]}))
"""


def run(argv: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=env["HOME"])


def home(root: Path) -> dict[str, str]:
    """sparkrun's config and caches (and sparkdoctor's) under a scratch HOME, with no recipe registries: without a
    registries.yaml, sparkrun clones its default registries from GitHub on first use (core/registry.py
    _default_registries); a test reaches no network beyond the package index."""
    (root / ".config" / "sparkrun").mkdir(parents=True, exist_ok=True)
    (root / ".config" / "sparkrun" / "registries.yaml").write_text("config_version: 1\nregistries: []\n")
    env = {k: v for k, v in os.environ.items() if k not in (ALLOW_ENV, "VIRTUAL_ENV")}
    return {**env, "HOME": str(root), "COLUMNS": "200", "NO_COLOR": "1"}


def no_network_noise(out: str) -> None:
    assert "git clone" not in out and "Manifest discovery" not in out, out[-2000:]


@pytest.fixture(scope="module")
def sparkrun(tmp_path_factory) -> SimpleNamespace:
    python = venvs.sparkrun_venv()
    root = tmp_path_factory.mktemp("sparkrun")
    env = home(root / "home")
    enabled = run([python.parent / "sparkrun", "plugins", "enable", "sparkdoctor"], env)
    assert enabled.returncode == 0 and "sparkdoctor: enabled" in enabled.stdout + enabled.stderr, enabled
    vllm = venvs.vllm032()
    recipes = {}
    for name, extra in (("clean", ""), ("bad-flag", " --no-such-flag-at-all")):
        recipes[name] = root / f"{name}.yaml"
        recipes[name].write_text(
            f'recipe_version: "2"\nmodel: Qwen/Qwen3-0.6B\nruntime: vllm\ncontainer: {IMAGE}\n'
            "defaults:\n  port: 8000\n  max_model_len: 2048\n"
            f"command: vllm serve {{model}} --port {{port}} --max-model-len {{max_model_len}}{extra}\n"
            f"sparkdoctor:\n  python: {vllm}\n")
    from tests.audit import builders

    model = builders.qwen3_8b(root / "qwen3-8b", None)  # real config and headers, sparse shards
    recipes["local-model"] = root / "local-model.yaml"
    recipes["local-model"].write_text(
        f'recipe_version: "2"\nmodel: {model}\nruntime: vllm\ncontainer: {IMAGE}\n'
        "defaults:\n  port: 8000\n  max_model_len: 32768\n"
        "command: vllm serve {model} --port {port} --max-model-len {max_model_len}\n"
        f"sparkdoctor:\n  python: {vllm}\n")
    for name, item in (("off", "false"), ("relative", "\n  python: venv/bin/python")):
        recipes[name] = root / f"{name}.yaml"
        recipes[name].write_text(recipes["clean"].read_text().split("sparkdoctor:")[0] + f"sparkdoctor: {item}\n")
    return SimpleNamespace(python=python, cli=python.parent / "sparkrun", env=env, root=root, recipes=recipes)


def launch(sparkrun: SimpleNamespace, recipe: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run([sparkrun.cli, "run", sparkrun.recipes[recipe], "-H", "localhost", "--dry-run", "--offline",
                "--no-auto-detect"], {**sparkrun.env, **env})


def test_sparkruns_loader_finds_the_installed_plugin_and_loads_it_only_when_selected(sparkrun):
    done = run([sparkrun.python, "-c", INVENTORY], sparkrun.env)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    row = next(r for r in doc["inventory"] if r["name"] == "sparkdoctor")
    assert row["loaded"] is True and row["failure"] is None and row["selected"] is True, row
    assert (row["module"], row["package"]) == ("sparkdoctor.integrations.sparkrun_plugin", "sparkdoctor-gb10")
    assert ["sparkdoctor", "sparkdoctor", True] in doc["items"]  # the recipe item, with its preparation step
    listed = run([sparkrun.cli, "plugins", "list", "--json"], sparkrun.env)
    shown = next(r for r in json.loads(listed.stdout) if r["name"] == "sparkdoctor")
    assert shown["compatibility"]["status"] == "compatible", shown  # plugin.toml's range, SPARKRUN_PLUGIN_API_VERSION
    # installed but not selected (a fresh config): sparkrun never loads it, so installing changes no launch
    fresh = run([sparkrun.python, "-c", INVENTORY], home(sparkrun.root / "fresh"))
    row = next(r for r in json.loads(fresh.stdout)["inventory"] if r["name"] == "sparkdoctor")
    assert row["loaded"] is False and row["selected"] is False, row
    assert not any(key == "sparkdoctor" for key, _, _ in json.loads(fresh.stdout)["items"])


def test_the_context_the_step_reads_is_the_one_sparkrun_passes(sparkrun):
    """The step reads context.plan.recipe, context.plan.host_list and context.options.overrides (and the tests' fakes
    stand for them): the names of real sparkrun 0.4.2's ExecutionContext (core/execution.py), RunPlan and RunOptions
    (api/_models.py)."""
    names = ("from dataclasses import fields\nfrom sparkrun.core.execution import ExecutionContext\n"
             "from sparkrun.api._models import RunOptions, RunPlan\n"
             "print([[f.name for f in fields(c)] for c in (ExecutionContext, RunPlan, RunOptions)])")
    done = run([sparkrun.python, "-c", names], sparkrun.env)
    assert done.returncode == 0, done.stderr[-3000:]
    context, plan, options = json.loads(done.stdout.replace("'", '"'))
    assert context == ["options", "plan", "sctx"] and {"recipe", "host_list"} <= set(plan) and "overrides" in options


def test_sparkdoctor_false_launches_without_the_gate_and_says_so(sparkrun):
    done = launch(sparkrun, "off")
    out = done.stdout + done.stderr
    assert "sparkdoctor: gate turned off by the recipe off (sparkdoctor: false): nothing judged" in out, out[-3000:]
    assert "[1/6] Preparing" in out and "[3/6] Distributing resources" in out, out[-3000:]
    assert "refused the launch" not in out and "could not parse" not in out


def test_a_relative_python_is_a_recipe_error_before_anything_is_prepared(sparkrun):
    done = launch(sparkrun, "relative")
    out = done.stdout + done.stderr
    assert done.returncode != 0 and "sparkdoctor.python: 'venv/bin/python' is a relative path" in out, out[-3000:]
    assert "[1/6] Preparing" not in out and "judging" not in out


def test_a_launch_whose_gate_fails_is_refused_before_sparkrun_prepares_anything(sparkrun):
    done = launch(sparkrun, "bad-flag")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    assert (REFUSED + "recipe check: vLLM 0.32.0 does not know --no-such-flag-at-all: `vllm serve` would refuse to "
            "start [flag-unknown:--no-such-flag-at-all]") in out, out[-3000:]
    assert "[1/6] Preparing" not in out and IMAGE not in out.split(REFUSED)[1]
    no_network_noise(out)


def test_a_clean_launch_passes_the_gate_and_goes_on_to_the_image(sparkrun):
    done = launch(sparkrun, "clean")
    out = done.stdout + done.stderr
    assert "sparkdoctor: every gate passed" in out and "[1/6] Preparing" in out, out[-3000:]
    # Qwen/Qwen3-0.6B is in no Hugging Face cache under this HOME: sparkrun fetches it later, so memory is not sized
    assert "sparkdoctor: memory not judged: the model Qwen/Qwen3-0.6B is not on this machine yet" in out, out[-3000:]
    assert "[3/6] Distributing resources" in out and f"Failed to pull or locate image: {IMAGE}" in out, out[-3000:]
    assert "refused the launch" not in out


def test_allow_prints_the_reasons_and_lets_the_launch_go_on(sparkrun):
    done = launch(sparkrun, "bad-flag", **{ALLOW_ENV: "1"})
    out = done.stdout + done.stderr
    assert ("sparkdoctor (allowed, not enforced): recipe check: vLLM 0.32.0 does not know --no-such-flag-at-all"
            in out), out[-3000:]
    assert "refused the launch" not in out and "[3/6] Distributing resources" in out, out[-3000:]


def test_a_launch_that_does_not_fit_in_the_memory_free_now_is_refused_with_the_settings_that_fit(sparkrun, tmp_path):
    """The recipe's model is a local folder and the launch runs here (-H localhost): the gate sizes it against the
    memory free now, on a GB10 fixture box with 64 GiB available (SPARKDOCTOR_HOST_ROOT, which sparkrun's process
    passes on to the gate): 0.9 of it does not fit as written, and the refusal names the settings that do."""
    from tests.memory.test_verdict import box

    tight = box(tmp_path, available_gib=64)
    done = launch(sparkrun, "local-model", SPARKDOCTOR_HOST_ROOT=str(tight.root))
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    assert (REFUSED + "recipe check: the launch does not fit as written") in out, out[-3000:]
    assert "it fits with --gpu-memory-utilization 0.48 --max-model-len 32768" in out and "[memory-fits-with]" in out
    assert "launch with --gpu-memory-utilization" not in out  # the settings said once
    assert "[1/6] Preparing" not in out
    no_network_noise(out)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a full tmpfs")
def test_a_full_disk_under_the_scratch_folder_refuses_in_one_line_naming_it_and_allow_lets_it_through(sparkrun, tmp_path):
    """The step writes the recipe as sparkrun resolved it under $TMPDIR: on a full disk sparkrun ended the launch as
    "launch preparation failed: [Errno 28] No space left on device", naming neither sparkdoctor nor a way through, and
    SPARKDOCTOR_SPARKRUN_ALLOW=1 did not let it through. A gate that did not run is no pass: refused in one line that
    names the cause and `allow`; with `allow` the line is printed and the launch goes on."""
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(full)], check=True, timeout=30)
    try:  # one page left: Python's tempfile still picks the folder (its 4-byte probe fits), the recipe does not
        (full / "fill").write_bytes(b"\0" * 12 * 1024)
        recipe = sparkrun.root / "big.yaml"
        recipe.write_text(sparkrun.recipes["clean"].read_text().replace("runtime: vllm\n",
                                                                         f"runtime: vllm\ndescription: {'d' * 12000}\n"))
        sparkrun.recipes["big"] = recipe
        done = launch(sparkrun, "big", TMPDIR=str(full))
        out = done.stdout + done.stderr
        assert done.returncode == 1, out[-3000:]
        assert (f"{REFUSED}the gate could not run: cannot write the recipe as sparkrun resolved it under {full}: "
                "[Errno 28] No space left on device (to launch anyway: allow: true in the recipe's sparkdoctor item, "
                f"or {ALLOW_ENV}=1)") in out, out[-3000:]
        assert "[1/6] Preparing" not in out
        allowed = launch(sparkrun, "big", TMPDIR=str(full), **{ALLOW_ENV: "1"})
        out = allowed.stdout + allowed.stderr
        assert "sparkdoctor (allowed, not enforced): the gate could not run: cannot write the recipe" in out, out[-3000:]
        assert "[1/6] Preparing" in out and "launch preparation failed" not in out, out[-3000:]
    finally:
        subprocess.run(["umount", "-l", str(full)], check=False, timeout=30)
