"""The verbs that inspect (audit, diff, explain, mods, whatif, recipe, report, fleet, matrix track/verify/update): each
`run(options)` called directly, without typer or a subprocess: once succeeding (the Result's kind,
exit code and data) and once failing (the error class and its exit code). The command line's own behaviour is
walked in test_every_verb_json.py; these pin the layer below it (options -> run -> Result)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkdoctor.errors import InputError, SparkdoctorError, UsageError
from sparkdoctor.result import Format, Result
from tests.audit import builders
from tests.test_cli import snap
from tests.test_render import write_matrix

LOG = "INFO starting the server\nINFO ready\n"


def mod_and_site(tmp_path: Path) -> tuple[Path, Path]:
    """A unified diff and the folder (standing for site-packages) it applies to."""
    site = tmp_path / "site" / "pkg"
    site.mkdir(parents=True)
    (site / "m.py").write_text("a = 1\nb = 2\n")
    diff = tmp_path / "b3.diff"
    diff.write_text("--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n+b = 3\n")
    return diff, site.parent


def audit_sample(tmp_path: Path) -> Result:
    from sparkdoctor.commands.audit import AuditCommand, run

    return run(AuditCommand(str(builders.qwen3_8b(tmp_path / "qwen3-8b", None)), gpu="gb10", context=512))


def diff_sample() -> Result:
    from sparkdoctor.commands.diff import DiffCommand, run

    return run(DiffCommand(snap("gb10-broken"), snap("nogpu-clean")))


def explain_sample(tmp_path: Path) -> Result:
    from sparkdoctor.commands.explain import ExplainCommand, run

    log = tmp_path / "server.log"
    log.write_text(LOG)
    return run(ExplainCommand(str(log), matrix=write_matrix(tmp_path / "matrix")))


def mods_sample(tmp_path: Path) -> Result:
    from sparkdoctor.commands.mods import ModsCommand, run

    diff, site = mod_and_site(tmp_path)
    return run(ModsCommand([diff], site=[site]))


# ---- audit -------------------------------------------------------------------------------------------------
def test_audit_runs_without_typer(tmp_path):
    result = audit_sample(tmp_path)
    assert (result.command, result.kind, result.exit_code) == ("audit", "audit", 0)
    assert result.data.fit.fits and result.data.bytes_per_token > 0


def test_audit_refuses_before_reading(tmp_path):
    from sparkdoctor.commands.audit import AuditCommand, run

    with pytest.raises(UsageError, match="--set needs --recipe"):
        run(AuditCommand(str(tmp_path), sets=["port=1"]))
    with pytest.raises(UsageError, match="give MODEL"):
        run(AuditCommand())
    with pytest.raises(InputError, match="no such folder"):
        run(AuditCommand(str(tmp_path / "missing")))


# ---- diff --------------------------------------------------------------------------------------------------
def test_diff_runs_without_typer():
    result = diff_sample()
    assert (result.kind, result.exit_code) == ("diff", 1)
    doc = result.data.to_json()
    assert doc["verdict"] == "risky" and doc["a"]["file"].endswith("gb10-broken.json")


def test_diff_of_a_missing_snapshot_is_exit_2(tmp_path):
    from sparkdoctor.commands.diff import DiffCommand, run

    with pytest.raises(SparkdoctorError, match="missing.json") as caught:
        run(DiffCommand(tmp_path / "missing.json", snap("nogpu-clean")))
    assert caught.value.exit_code == 2
    with pytest.raises(UsageError, match="--format junit"):
        run(DiffCommand(snap("nogpu-clean"), snap("nogpu-clean"), Format.junit))


# ---- explain -----------------------------------------------------------------------------------------------
def test_explain_runs_without_typer(tmp_path):
    result = explain_sample(tmp_path)
    assert (result.kind, result.exit_code) == ("explain", 1)  # nothing known in two INFO lines
    assert result.data.to_json()["lines"] == 2 and result.data.matches == []


def test_explain_refuses_binary_and_a_bad_timeout(tmp_path):
    from sparkdoctor.commands.explain import ExplainCommand, run

    blob = tmp_path / "blob.log"
    blob.write_bytes(b"\x00\x01")
    with pytest.raises(InputError, match="binary data"):
        run(ExplainCommand(str(blob)))
    with pytest.raises(UsageError, match="--timeout 0"):
        run(ExplainCommand(str(blob), timeout=0))


# ---- mods --------------------------------------------------------------------------------------------------
def test_mods_runs_without_typer(tmp_path):
    result = mods_sample(tmp_path)
    assert (result.command, result.kind, result.exit_code) == ("mods check", "mods", 0)
    assert [m.verdict.value for m in result.data.mods] == ["applies"]


def test_mods_refuses_two_targets(tmp_path):
    from sparkdoctor.commands.mods import ModsCommand, run

    diff, site = mod_and_site(tmp_path)
    with pytest.raises(UsageError, match="exclude each other"):
        run(ModsCommand([diff], python="python3", site=[site]))
    with pytest.raises(UsageError, match="--site, --release, --container and --image exclude each other"):
        run(ModsCommand([diff], site=[site], image="some/image"))
    with pytest.raises(UsageError, match="--container-python needs --container or --image"):
        run(ModsCommand([diff], container_python="/usr/bin/python3"))


def whatif_sample(tmp_path: Path) -> Result:
    """A WhatIf with every part its renderers draw (findings, a recipe with mods, a stale conclusion, the probes),
    judged by the demo matrix of tests/test_whatif.py on hand-made Facts (no pip, no registry)."""
    from sparkdoctor.whatif.judge import (
        ModsDelta,
        ProbeComparison,
        RecipeRow,
        RecipeWhatIf,
        StaleConclusion,
        compare,
    )
    from sparkdoctor.whatif.probe import KernelVerdict, ProbeRun
    from sparkdoctor.whatif.ptx import PtxComparison, PtxKernel, PtxRow
    from sparkdoctor.whatif.resolve import Change
    from tests.test_whatif import facts_of, matrix

    whatif = compare(facts_of("0.1.0"), facts_of("0.2.0"), matrix(tmp_path), ["demo==0.2.0"], [Change("demo", "0.1.0", "0.2.0")],
                     ["a note"])
    mod = {"kind": "mod", "id": "mod-fails:x", "severity": "error", "title": "[x] fails", "evidence": [], "remedy": "r"}
    whatif.recipe = RecipeWhatIf("tiny", [RecipeRow("flag-unknown:--x", "flag", "error", "--x is gone")], mods=ModsDelta([mod]))
    whatif.stale = [StaleConclusion("b-vs-a", [{"text": "demo 0.1.0 -> 0.2.0"}])]
    run_ = ProbeRun("sm_121a", {"nvidia-cutlass-dsl": "4.5.2"}, "libs-cu13", [KernelVerdict("nvfp4-mma", "compiled", "ok", "")])
    whatif.probe = ProbeComparison("sm_121a", run_, ProbeRun("sm_121a", {}, None, error="could not run: uv is not installed"))
    member = "triton/backends/nvidia/bin/ptxas"
    whatif.probe.ptx = PtxComparison(
        "sm_121a", [{"name": "triton", "from": None, "to": "3.9.0"}], "compiled only: no GB10 ran the result",
        [PtxRow("triton", None, note="triton is not installed today")],
        [PtxRow("triton", "3.9.0", member, "12.9.86", [PtxKernel("nvfp4-mma", "sm_121a", "compiled", "a cubin")], listed=True,
                ran=True), PtxRow("triton", "3.9.0", member + "-blackwell", None, error="does not run here", listed=True, ran=True)])
    return Result("whatif", "whatif", whatif, exit_code=1 if whatif.gate() else 0)


def test_a_whatif_document_keeps_its_keys(tmp_path):
    doc = whatif_sample(tmp_path).data.to_json()
    assert list(doc) == ["schema", "kind", "specs", "matrix", "target", "installer", "pip_warnings", "changes", "fixed", "introduced",
                         "unchanged", "cannot_tell", "recipe", "stale_conclusions", "probe", "notes"]
    assert doc["introduced"] == [{"id": "demo-new-bug", "severity": "error", "title": "new bug", "evidence": doc["introduced"][0]["evidence"],
                                  "remedy": doc["introduced"][0]["remedy"]}]
    assert doc["recipe"]["mods"]["introduced"][0]["id"] == "mod-fails:x" and doc["stale_conclusions"][0]["conclusion"] == "b-vs-a"
    assert doc["probe"]["after"]["error"].startswith("could not run") and "error" not in doc["probe"]["today"]
    ptx = doc["probe"]["ptx"]
    assert list(ptx) == ["arch", "moved", "today", "after", "note"]
    assert ptx["today"] == [{"dist": "triton", "version": None, "note": "triton is not installed today"}]
    assert [list(row) for row in ptx["after"]] == [["dist", "version", "member", "ptxas_version", "kernels"],
                                                    ["dist", "version", "member", "ptxas_version", "error"]]
    assert ptx["after"][0]["kernels"] == [{"probe": "nvfp4-mma", "arch": "sm_121a", "verdict": "compiled", "detail": "a cubin"}]


# ---- recipe show | check -----------------------------------------------------------------------------------
def recipe_show_sample() -> Result:
    from sparkdoctor.commands.recipe import RecipeShowCommand, run_show

    return run_show(RecipeShowCommand("tiny-cpu", ["port=9000"]))


def recipe_check_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Result:
    """A recipe that asks for more GPU memory than GB10 leaves (a warning), judged against this interpreter."""
    import sys

    from sparkdoctor.commands.recipe_check import RecipeCheckCommand, run
    from tests.rerun.recipe_values import dense_config, model_folder, recipe_file

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-hub-cache"))
    folder = model_folder(tmp_path, "dense", dense_config())
    path = recipe_file(tmp_path, "sparkdoctor", str(folder), ["--gpu-memory-utilization", "0.95"])
    return run(RecipeCheckCommand(str(path), python=sys.executable, fail_on="warn"))


def test_recipe_show_runs_without_typer():
    result = recipe_show_sample()
    assert (result.command, result.kind, result.exit_code) == ("recipe show", "recipe", 0)
    assert result.data.port == 9000 and result.notes == []


def test_recipe_show_refuses_a_set_without_a_value_and_a_missing_file(tmp_path):
    from sparkdoctor.commands.recipe import RecipeShowCommand, run_show

    with pytest.raises(UsageError, match="--set 'port': write key=value"):
        run_show(RecipeShowCommand("tiny-cpu", ["port"]))
    with pytest.raises(InputError) as caught:
        run_show(RecipeShowCommand(str(tmp_path / "missing.toml")))
    assert caught.value.exit_code == 2


def test_recipe_check_runs_without_typer(tmp_path, monkeypatch):
    result = recipe_check_sample(tmp_path, monkeypatch)
    assert (result.kind, result.exit_code) == ("recipe-check", 1)
    assert "vllm-gpu-mem-util-above-uma-headroom" in {f["id"] for f in result.data.document["findings"]}


def test_recipe_check_refuses_a_bad_fail_on(tmp_path):
    from sparkdoctor.commands.recipe_check import RecipeCheckCommand, run

    with pytest.raises(UsageError, match="--fail-on fatal: choose one of info, warn, error"):
        run(RecipeCheckCommand("tiny-cpu", fail_on="fatal"))


# ---- report ------------------------------------------------------------------------------------------------
def report_sample() -> Result:
    from sparkdoctor.commands.report import ReportCommand, run

    return run(ReportCommand(facts_file=snap("gb10-broken")))


def test_report_runs_without_typer():
    result = report_sample()
    assert (result.command, result.kind, result.exit_code, result.errors) == ("report", "bug-report", 0, [])
    text = result.data.text(Format.github)
    assert text.endswith("\n") and "<details>" in text and result.data.whole is None


def test_report_of_an_unprobed_target_is_written_and_exit_3(tmp_path):
    from sparkdoctor.commands.report import ReportCommand, run
    from tests.gb10 import gb10_facts

    facts = gb10_facts(packages=None)
    facts.errors = [{"collector": "targetenv", "error": "python crashed"}]
    facts.save(tmp_path / "unprobed.json")
    result = run(ReportCommand(facts_file=tmp_path / "unprobed.json", fmt=Format.forum))
    assert result.exit_code == 3 and result.errors[0]["code"] == "unprobeable"
    assert "targetenv : python crashed" in result.data.text(Format.forum)
    with pytest.raises(UsageError, match="--facts and --python exclude each other"):
        run(ReportCommand(python="python3", facts_file=tmp_path / "unprobed.json"))


# ---- fleet check -------------------------------------------------------------------------------------------
def test_fleet_runs_without_typer_and_an_unreachable_node_is_in_the_result(tmp_path):
    """ssh reaches nothing (the config's ProxyCommand fails at once): the node is reported, exit 3, not raised."""
    from sparkdoctor.commands.fleet import FleetCommand, run

    config = tmp_path / "ssh_config"
    config.write_text("Host *\n  ProxyCommand false\n")
    result = run(FleetCommand(hosts="node-a", ssh_config=config, node_timeout=30))
    assert (result.command, result.kind, result.exit_code) == ("fleet check", "fleet", 3)
    [outcome] = result.data.outcomes
    assert outcome.node.name == "node-a" and not outcome.ok and outcome.problem


def test_fleet_refuses_without_nodes_and_with_two_sources():
    from sparkdoctor.commands.fleet import FleetCommand, run

    with pytest.raises(UsageError, match="give exactly one of --ray"):
        run(FleetCommand())
    with pytest.raises(UsageError, match=r"\(got --ray and --hosts\)"):
        run(FleetCommand(ray="auto", hosts="a"))


# ---- matrix track | verify | update (against a registry on 127.0.0.1: tests/test_tracking.py's demo releases) ----
def registry_samples(tmp_path: Path, registry: object, monkeypatch: pytest.MonkeyPatch) -> dict[str, Result]:
    """One Result per kind of `matrix track` and `matrix verify`, each from `run` on the demo matrix; --stacks
    (a pip dry run) is made of its result rows."""
    from sparkdoctor.commands.matrix_tracking import TrackCommand, run_track
    from sparkdoctor.commands.matrix_verify import VerifyCommand, run
    from sparkdoctor.verify.modes import Stacks
    from sparkdoctor.verify.stacks import StackResult
    from tests.test_tracking import write_matrix

    for name in ("SPARKDOCTOR_INDEX_URL", "PIP_INDEX_URL"):  # released files read remotely; pip's version lists
        monkeypatch.setenv(name, registry.url)  # type: ignore[attr-defined]
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    tmp_path.mkdir(exist_ok=True)
    matrix = write_matrix(tmp_path, ">=0.2.0")
    stacks = Stacks(str(matrix), [StackResult("demo-stack", "3.12", "resolves", "pip resolved it", {"demo": "0.3.0"})])
    return {
        "track": run_track(TrackCommand(matrix=matrix)),
        "verify": run(VerifyCommand(kind="files", matrix=matrix)),
        "verify-bisect": run(VerifyCommand(bisect="demo-gb10", matrix=matrix)),
        "verify-latest": run(VerifyCommand(latest=True, kind="files", matrix=matrix)),
        "bounds": run(VerifyCommand(bounds=True, matrix=matrix)),
        "stacks": Result("matrix verify", "stacks", stacks, exit_code=stacks.exit_code),
    }


def test_matrix_track_and_verify_run_without_typer(tmp_path, monkeypatch):
    from tests.released_server import Registry
    from tests.test_tracking import RELEASES, build_wheel

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with Registry() as registry:
        for version, body in RELEASES.items():
            registry.add("demo", build_wheel(wheels, "demo", version, {"demo/core.py": body}))
        found = registry_samples(tmp_path, registry, monkeypatch)
    track = found["track"]
    assert track.exit_code == 1 and track.data.document["summary"]["no-longer-affected"] == 1  # 0.4.0 no longer prints it
    assert found["verify"].exit_code == 0 and found["verify"].data.summary()["confirmed"] == 1
    assert found["verify-bisect"].data.found["id"] == "demo-gb10"
    assert found["bounds"].data.to_json()["kind"] == "bounds"


def test_matrix_verify_and_track_refuse_bad_options(tmp_path):
    from sparkdoctor.commands.matrix_tracking import (
        TrackCommand,
        UpdateCommand,
        run_track,
        run_update,
    )
    from sparkdoctor.commands.matrix_verify import VerifyCommand, run

    with pytest.raises(UsageError, match="--bounds and --latest exclude each other"):
        run(VerifyCommand(bounds=True, latest=True))
    with pytest.raises(UsageError, match="no matrix entry with id 'nope'"):
        run(VerifyCommand("nope", matrix=plain_matrix(tmp_path)))
    with pytest.raises(UsageError, match="'notaversion' is not a version"):
        run_track(TrackCommand(["demo=notaversion"]))
    with pytest.raises(InputError, match="no \\[tracked\\] table"):
        run_track(TrackCommand(matrix=plain_matrix(tmp_path)))
    with pytest.raises(UsageError, match="--rollback takes no SOURCE"):
        run_update(UpdateCommand("x.tar.gz", rollback=True))


def plain_matrix(tmp_path: Path) -> Path:
    return write_matrix(tmp_path / "plain")


def update_sample() -> Result:
    """`matrix update`'s document as update_matrix returns it (tests/test_matrix_update.py installs real ones)."""
    done = {"action": "update", "installed": "/data/matrix/current", "pin": {"sha256": "0" * 64}, "previous": "bundled",
            "entries": 3, "stacks": 1, "diff": ["+ demo-gb10"], "message": "installed the matrix (3 entries, 1 stack)"}
    from sparkdoctor.track.update import Updated

    return Result("matrix update", "matrix-update", Updated(done))


def test_matrix_verify_writes_its_document_with_o(tmp_path, monkeypatch):
    """`matrix verify -o FILE` through the real CLI: the document in the file, stdout empty."""
    import json
    import os
    import subprocess
    import sys

    from tests.released_server import Registry
    from tests.test_tracking import RELEASES, build_wheel, write_matrix

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    matrix = write_matrix(tmp_path, ">=0.2.0")
    out = tmp_path / "bounds.json"
    with Registry() as registry:
        for version, body in RELEASES.items():
            registry.add("demo", build_wheel(wheels, "demo", version, {"demo/core.py": body}))
        env = {**os.environ, "SPARKDOCTOR_INDEX_URL": registry.url, "PIP_INDEX_URL": registry.url,
               "PIP_CONFIG_FILE": "/dev/null", "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
        done = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "verify", "--bounds", "--matrix", str(matrix),
                               "--format", "json", "-o", str(out)], capture_output=True, text=True, timeout=300, env=env)
    assert done.stdout == "" and done.returncode in (0, 1), done.stderr
    doc = json.loads(out.read_text())
    assert doc["command"] == "matrix verify" and doc["kind"] == "bounds" and doc["exit_code"] == done.returncode
