""".github/workflows/track.yml run as GitHub's runner runs a job (as tests/test_action.py runs action.yml): each `run:`
step through `bash --noprofile --norc -eo pipefail` in the checkout, `${{ }}` expressions in `env:`/`if:`/`with:`
evaluated, GITHUB_ENV carried to the next step and GITHUB_OUTPUT read back. The steps really run sparkdoctor
(`matrix track --apply`, `matrix verify --bounds`, `matrix validate`) against a registry on 127.0.0.1 serving real
wheels (tests/released_server.py). The `uses:` steps that need GitHub are stood in for: checkout (the folder is
the checkout), setup-python and cache (this interpreter, no cache), create-pull-request (its `if:` evaluated and
what it would commit read from the folder: the edited matrix files and the day's documents)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from tests.released_server import Registry, build_wheel
from tests.test_tracking import RELEASES, write_matrix

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = yaml.safe_load((REPO / ".github" / "workflows" / "track.yml").read_text())
EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
NAME = re.compile(r"\b(steps|github)\.([A-Za-z0-9_\-]+(?:\.outputs\.[A-Za-z0-9_\-]+)?)")
STANDINS = ("actions/checkout", "actions/setup-python", "actions/cache", "peter-evans/create-pull-request")


class JobRunner:
    def __init__(self, checkout: Path, env: dict[str, str]):
        self.checkout, self.temp = checkout, checkout.parent / "runner-temp"
        self.temp.mkdir(exist_ok=True)
        self.base_env, self.env = env, {}
        self.outputs: dict[str, dict[str, str]] = {}
        self.failed = False
        self.log: list[tuple[str, int]] = []
        self.pull_request: dict | None = None

    def value(self, expr: str):
        def lookup(m: re.Match) -> str:
            scope, name = m.group(1), m.group(2)
            if scope == "github":
                return repr({"run_id": "1"}[name])
            step, _, out = name.partition(".outputs.")
            return repr(self.outputs.get(step, {}).get(out, ""))

        py = NAME.sub(lookup, expr).replace("&&", " and ").replace("||", " or ").replace("always()", "True")
        return eval(py, {"__builtins__": {}}, {})  # the workflow file is this repository's own

    def text(self, template: str) -> str:
        return EXPR.sub(lambda m: str(self.value(m.group(1))), str(template))

    def run(self, skip: tuple[str, ...] = ()) -> None:
        for step in WORKFLOW["jobs"]["track"]["steps"]:
            if step.get("name") in skip:
                continue
            cond = step.get("if")
            if cond and not self.value(EXPR.sub(r"\1", cond) if "${{" in cond else cond):
                continue
            if not cond and self.failed:
                continue
            if "uses" in step:
                action = step["uses"].split("@")[0]
                assert action in STANDINS, action
                if action == "peter-evans/create-pull-request":
                    self.pull_request = {k: self.text(v) for k, v in step["with"].items()}
                continue
            code = self._shell(step)
            self.log.append((step["name"], code))
            self.failed = self.failed or code != 0

    def _shell(self, step: dict) -> int:
        assert step["shell"] == "bash"
        script = self.temp / "step.sh"
        script.write_text(step["run"])
        genv, gout = self.temp / "github_env", self.temp / "github_output"
        genv.write_text("")
        gout.write_text("")
        env = {**self.base_env, **self.env, "RUNNER_TEMP": str(self.temp), "GITHUB_ENV": str(genv), "GITHUB_OUTPUT": str(gout),
               **{k: self.text(v) for k, v in (step.get("env") or {}).items()}}
        p = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], env=env, cwd=self.checkout,
                           check=False, capture_output=True, text=True, timeout=600)
        for line in genv.read_text().splitlines():
            key, _, val = line.partition("=")
            self.env[key] = val
        if step.get("id"):
            self.outputs[step["id"]] = dict(line.partition("=")[::2] for line in gout.read_text().splitlines())
        if p.returncode:
            print(step["name"], p.stdout[-2000:], p.stderr[-2000:])
        return p.returncode


def test_the_workflow_runs_daily_and_only_its_pr_step_needs_github():
    assert WORKFLOW[True if True in WORKFLOW else "on"]["schedule"][0]["cron"].split()[2:] == ["*", "*", "*"]  # daily
    steps = WORKFLOW["jobs"]["track"]["steps"]
    assert [s["uses"].split("@")[0] for s in steps if "uses" in s] == list(STANDINS)
    for step in steps:  # values reach scripts through env only: no ${{ }} inside a script
        assert "${{" not in step.get("run", ""), step.get("name")
    install = next(s for s in steps if s.get("name") == "Install sparkdoctor")
    assert 'python3 -m venv "$RUNNER_TEMP/sd"' in install["run"] and "pip\" install -q ." in install["run"]


def test_the_workflow_tracks_applies_brackets_and_opens_a_pull_request(tmp_path):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    write_matrix(checkout, ">=0.2.0")  # demo's message is gone from 0.4.0 on: the bound closes there
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    bin_dir = Path(sys.executable).parent
    with Registry() as reg:
        for version, body in RELEASES.items():
            reg.add("demo", build_wheel(wheels, "demo", version, {"demo/core.py": body}))
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("SPARKDOCTOR_", "VIRTUAL_ENV", "GITHUB_"))},
               "SPARKDOCTOR_INDEX_URL": reg.url, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
        runner = JobRunner(checkout, env)
        runner.env["SPARKDOCTOR_BIN"] = str(bin_dir / "sparkdoctor")  # what the install step leaves (this checkout, installed)
        runner.run(skip=("Install sparkdoctor",))
    assert runner.log == [("Track new releases", 0), ("Bracket the bounds", 0), ("Validate the edited matrix", 0)], runner.log
    day = runner.outputs["track"]["day"]
    assert runner.outputs["track"]["exit-code"] == "1"  # edits proposed
    assert '"demo" = ">=0.2.0,<0.4.0"' in (checkout / "matrix" / "demo.toml").read_text()
    tracking = (checkout / "matrix" / "tracking.toml").read_text()
    assert 'demo = "0.4.0"' in tracking and f'tracked_on = "{day}"' in tracking
    bounds = json.loads((checkout / "docs" / "evidence" / f"bounds-{day}.json").read_text())
    assert bounds["bounds"][0]["verdict"] == "bracketed"
    track_doc = json.loads((checkout / "docs" / "evidence" / f"track-{day}.json").read_text())
    assert any("when.packages.demo: >=0.2.0 -> >=0.2.0,<0.4.0" in a for a in track_doc["applied"])
    pr = runner.pull_request
    assert pr is not None and pr["branch"] == f"matrix-track/{day}" and pr["body-path"] == f"docs/evidence/track-{day}.md"
    assert (checkout / pr["body-path"]).is_file() and "matrix/*.toml" in pr["add-paths"]


def test_nothing_to_change_opens_no_pull_request(tmp_path):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    folder = write_matrix(checkout, ">=0.2.0,<0.4.0", tracked="0.4.0")
    (folder / "tracking.toml").write_text('component = "tracking"\ntracked_on = "2999-01-01"\n[tracked]\ndemo = "0.4.0"\n')
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with Registry() as reg:
        for version, body in RELEASES.items():
            reg.add("demo", build_wheel(wheels, "demo", version, {"demo/core.py": body}))
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("SPARKDOCTOR_", "VIRTUAL_ENV", "GITHUB_"))},
               "SPARKDOCTOR_INDEX_URL": reg.url, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
        runner = JobRunner(checkout, env)
        runner.env["SPARKDOCTOR_BIN"] = str(Path(sys.executable).parent / "sparkdoctor")
        runner.run(skip=("Install sparkdoctor",))
    assert [code for _, code in runner.log] == [0, 0, 0] and runner.outputs["track"]["exit-code"] == "0"
    assert runner.pull_request is None


def test_new_releases_that_change_no_entry_still_open_a_pull_request_moving_tracked(tmp_path):
    """A release that every entry's checks still hold on needs no entry edit, but `--apply` moves tracked-through and
    tracked_on: those edits (and the day's documents) reach a pull request, or the next day re-reads the same
    releases and the matrix never records them as seen."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    write_matrix(checkout, ">=0.2.0")  # tracked through 0.2.0; 0.3.0 still raises the message: still-affected
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with Registry() as reg:
        for version in ("0.1.0", "0.2.0", "0.3.0"):
            reg.add("demo", build_wheel(wheels, "demo", version, {"demo/core.py": RELEASES[version]}))
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("SPARKDOCTOR_", "VIRTUAL_ENV", "GITHUB_"))},
               "SPARKDOCTOR_INDEX_URL": reg.url, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
        runner = JobRunner(checkout, env)
        runner.env["SPARKDOCTOR_BIN"] = str(Path(sys.executable).parent / "sparkdoctor")
        runner.run(skip=("Install sparkdoctor",))
    assert runner.log == [("Track new releases", 0), ("Bracket the bounds", 0), ("Validate the edited matrix", 0)], runner.log
    day = runner.outputs["track"]["day"]
    track_doc = json.loads((checkout / "docs" / "evidence" / f"track-{day}.json").read_text())
    assert [e["verdict"] for e in track_doc["entries"]] == ["still-affected"]
    tracking = (checkout / "matrix" / "tracking.toml").read_text()
    assert 'demo = "0.3.0"' in tracking and f'tracked_on = "{day}"' in tracking
    assert runner.outputs["track"]["exit-code"] == "1"  # an edit was applied: tracked-through moved
    assert runner.pull_request is not None and runner.pull_request["branch"] == f"matrix-track/{day}"
