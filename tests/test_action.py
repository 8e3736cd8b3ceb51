"""The GitHub Action (action.yml, issue 28 item 2) run as the runner runs a composite action: each `run:` step
through `bash --noprofile --norc -eo pipefail`, with `${{ }}` expressions in `env:`/`if:`/`with:` evaluated,
GITHUB_ENV carried to the next step and GITHUB_OUTPUT read back. The install step really pip-installs this
checkout into a fresh venv (the registry is the only network), `check` and `recipe check` really run, and the
upload step (`uses:` github/codeql-action/upload-sarif, which needs GitHub) is stood in for by validating
what it would upload against the SARIF 2.1.0 schema. The job fails by sparkdoctor's exit code."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.rerun.recipe_values import (  # noqa: F401
    dense_config,
    model_folder,
    no_hub_cache,
    recipe_file,
)

REPO = Path(__file__).resolve().parents[1]
ACTION = yaml.safe_load((REPO / "action.yml").read_text())
SCHEMA = json.loads((REPO / "tests" / "data" / "sarif" / "sarif-schema-2.1.0.json").read_text())
EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
NAME = re.compile(r"\b(inputs|github|runner|env|steps)\.([A-Za-z0-9_\-]+(?:\.outputs\.[A-Za-z0-9_\-]+)?)")


class Runner:
    """A composite action's steps, run in order as GitHub's runner would."""

    def __init__(self, tmp: Path, inputs: dict[str, str]):
        self.temp = tmp / "runner-temp"
        self.temp.mkdir(exist_ok=True)
        defaults = {k: str(v.get("default", "")) for k, v in ACTION["inputs"].items()}
        assert set(inputs) <= set(defaults), "an input the action does not declare"
        self.inputs = {**defaults, **inputs}
        self.env: dict[str, str] = {}
        self.outputs: dict[str, dict[str, str]] = {}
        self.uploaded: list[Path] = []
        self.failed = False
        self.log: list[tuple[str, int]] = []

    def value(self, expr: str):
        def lookup(m: re.Match) -> str:
            scope, name = m.group(1), m.group(2)
            if scope == "inputs":
                return repr(self.inputs[name])
            if scope == "github":
                return repr({"action_path": str(REPO)}[name])
            if scope == "runner":
                return repr({"temp": str(self.temp)}[name])
            if scope == "env":
                return repr(self.env.get(name, ""))
            step, _, out = name.partition(".outputs.")
            return repr(self.outputs.get(step, {}).get(out, ""))

        py = NAME.sub(lookup, expr).replace("&&", " and ").replace("||", " or ").replace("always()", "True")
        py = py.replace("success()", repr(not self.failed)).replace("failure()", repr(self.failed))
        return eval(py, {"__builtins__": {}}, {})  # the action file is this repository's own

    def text(self, template: str) -> str:
        return EXPR.sub(lambda m: str(self.value(m.group(1))), str(template))

    def run(self, skip: tuple[str, ...] = ()) -> None:
        for step in ACTION["runs"]["steps"]:
            if step.get("name") in skip:
                continue
            cond = step.get("if")
            go = bool(self.value(EXPR.sub(r"\1", cond) if "${{" in cond else cond)) if cond else not self.failed
            if not go:
                continue
            if "uses" in step:
                assert step["uses"].startswith("github/codeql-action/upload-sarif@")
                folder = Path(self.text(step["with"]["sarif_file"]))
                self.uploaded = sorted(folder.glob("*.sarif"))
                # upload-sarif fails on a path without a SARIF file ("No SARIF files found to upload")
                self.log.append((step["name"], 0 if self.uploaded else 1))
                self.failed = self.failed or not self.uploaded
                continue
            code = self._shell(step)
            self.log.append((step.get("name", "?"), code))
            self.failed = self.failed or code != 0

    def _shell(self, step: dict) -> int:
        assert step["shell"] == "bash"
        script = self.temp / "step.sh"
        script.write_text(step["run"])
        genv, gout = self.temp / "github_env", self.temp / "github_output"
        genv.write_text("")
        gout.write_text("")
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("SPARKDOCTOR_", "VIRTUAL_ENV"))},
               **self.env, "RUNNER_TEMP": str(self.temp), "GITHUB_ENV": str(genv), "GITHUB_OUTPUT": str(gout),
               **{k: self.text(v) for k, v in (step.get("env") or {}).items()}}
        p = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], env=env, check=False,
                           capture_output=True, text=True, timeout=900)
        for line in genv.read_text().splitlines():
            key, _, val = line.partition("=")
            self.env[key] = val
        if step.get("id"):
            self.outputs[step["id"]] = dict(line.partition("=")[::2] for line in gout.read_text().splitlines())
        if p.returncode and step.get("id") != "gate":
            print(p.stdout[-3000:], p.stderr[-3000:])
        return p.returncode


def valid(path: Path) -> dict:
    doc = json.loads(path.read_text())
    errors = list(jsonschema.validators.validator_for(SCHEMA)(SCHEMA).iter_errors(doc))
    assert errors == [], [e.message[:200] for e in errors[:3]]
    return doc


def test_the_action_is_a_composite_action_that_uploads_and_gates():
    assert ACTION["runs"]["using"] == "composite"
    steps = ACTION["runs"]["steps"]
    assert [s.get("uses", "").split("@")[0] for s in steps if "uses" in s] == ["github/codeql-action/upload-sarif"]
    assert steps[-1]["id"] == "gate" and steps[-1]["if"] == "always()"
    for step in steps:  # inputs reach scripts through env only: no ${{ }} inside a script (script injection)
        assert "${{" not in step.get("run", ""), step["name"]


@pytest.mark.slow
def test_the_action_installs_checks_uploads_and_fails_by_the_exit_code(tmp_path):
    target = tmp_path / "target"
    venv.create(target, with_pip=False)  # the runner's environment under check: a bare venv
    folder = model_folder(tmp_path, "dense", dense_config())
    recipe = recipe_file(tmp_path, "sparkdoctor", str(folder), ["--gpu-memory-utilization", "0.95", "--max-model-len", "32768"])
    inputs = {"python": str(target / "bin" / "python"), "recipes": f"{recipe}\n", "arch": "sm_121a", "kernels": "false",
              "fail-on": "warn"}
    runner = Runner(tmp_path, inputs)
    runner.run()
    assert runner.log[0] == ("Install sparkdoctor", 0), runner.log
    assert Path(runner.env["SPARKDOCTOR_BIN"]).is_file()
    sarif = Path(runner.env["SPARKDOCTOR_SARIF_DIR"])
    assert [p.name for p in runner.uploaded] == ["check.sarif", "recipe-1.sarif"]
    check, recipe_log = valid(sarif / "check.sarif"), valid(sarif / "recipe-1.sarif")
    assert check["runs"][0]["automationDetails"]["id"] == "sparkdoctor/check/"
    assert recipe_log["runs"][0]["automationDetails"]["id"] == "sparkdoctor/recipe-check/values/"
    assert any(r["ruleId"] == "vllm-gpu-mem-util-above-uma-headroom" for r in recipe_log["runs"][0]["results"])
    assert runner.env["SPARKDOCTOR_RECIPE_EXIT"] == "1"  # a warning at --fail-on warn
    assert runner.outputs["gate"]["exit-code"] == "1" and runner.log[-1] == ("Gate on the exit code", 1)
    # the same steps at --fail-on error (the install kept): the warning no longer fails the job
    again = Runner(tmp_path, {**inputs, "fail-on": "error", "upload": "false"})
    again.env = {k: v for k, v in runner.env.items() if k in ("SPARKDOCTOR_BIN", "SPARKDOCTOR_SARIF_DIR")}
    again.run(skip=("Install sparkdoctor",))
    # ... but the target has no vLLM: the recipe is judged by the matrix only, no pass (6), and the job still fails
    assert again.uploaded == [] and again.env["SPARKDOCTOR_CHECK_EXIT"] == "0"
    assert again.env["SPARKDOCTOR_RECIPE_EXIT"] == again.outputs["gate"]["exit-code"] == "6", again.outputs
    assert again.log[-1] == ("Gate on the exit code", 6)


def test_a_step_that_fails_to_install_skips_the_checks_but_still_gates(tmp_path):
    runner = Runner(tmp_path, {"sparkdoctor": str(tmp_path / "no-such-package-dir"), "upload": "false"})
    runner.run()
    names = [name for name, _ in runner.log]
    assert names == ["Install sparkdoctor", "Gate on the exit code"] and runner.log[0][1] != 0
    assert runner.failed  # the job fails by the failed step (pip found no such folder: nothing was fetched)


def test_a_target_that_cannot_be_probed_fails_the_job_by_its_gate_not_by_an_empty_upload(tmp_path):
    """`python:` naming an interpreter that does not exist (a typo): check exits 3 and writes no SARIF (nor does a
    recipe that cannot be read). The upload step ran on the empty folder, where upload-sarif fails with "No SARIF
    files found to upload" before the gate says why; the gate alone fails the job, with exit 3."""
    runner = Runner(tmp_path, {"python": str(tmp_path / "no-such-venv" / "bin" / "python"),
                               "recipes": str(tmp_path / "no-such-recipe.toml")})
    runner.env = {"SPARKDOCTOR_BIN": str(Path(sys.executable).parent / "sparkdoctor"),
                  "SPARKDOCTOR_SARIF_DIR": str(tmp_path / "sarif")}
    runner.run(skip=("Install sparkdoctor",))
    assert runner.env["SPARKDOCTOR_CHECK_EXIT"] == "3" and runner.env["SPARKDOCTOR_SARIF_FILES"] == "0"
    assert [name for name, _ in runner.log] == ["sparkdoctor check", "sparkdoctor recipe check", "Gate on the exit code"]
    assert runner.outputs["gate"]["exit-code"] == "3" and runner.log[-1] == ("Gate on the exit code", 3)
    # a folder with a log is uploaded as before
    again = Runner(tmp_path, {"python": sys.executable, "kernels": "false"})
    again.env = {k: v for k, v in runner.env.items() if k in ("SPARKDOCTOR_BIN", "SPARKDOCTOR_SARIF_DIR")}
    again.run(skip=("Install sparkdoctor",))
    assert [p.name for p in again.uploaded] == ["check.sarif"] and ("Upload SARIF to code scanning", 0) in again.log


def test_a_recipe_line_that_starts_with_a_dash_is_a_recipe_never_an_option(tmp_path):
    """`recipes:` lines went to `recipe check` as they were: a line `--help` printed the help and exited 0, so the
    gate passed with no recipe checked. Each line now comes after `--`: a recipe of that name, which is not there
    (exit 2)."""
    runner = Runner(tmp_path, {"python": sys.executable, "recipes": "--help\n", "kernels": "false", "upload": "false"})
    runner.env = {"SPARKDOCTOR_BIN": str(Path(sys.executable).parent / "sparkdoctor"),
                  "SPARKDOCTOR_SARIF_DIR": str(tmp_path / "sarif")}
    runner.run(skip=("Install sparkdoctor", "sparkdoctor check"))
    assert runner.env["SPARKDOCTOR_RECIPE_EXIT"] == "2", runner.env
    assert runner.outputs["gate"]["exit-code"] == "2"
