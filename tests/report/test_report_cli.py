"""`sparkdoctor report`, the real command in a subprocess: both formats from a real snapshot and from
a live probe of a real interpreter, the folded snapshot re-evaluates to the same verdict, -o writes
the file, and every bad input is one line and exit 2 (3 when the target cannot be probed)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.facts import Facts
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import load
from sparkdoctor.report.sections import environment_sections
from tests.gb10 import gb10_facts
from tests.report.bug_report import whole_report

REPO = Path(__file__).resolve().parents[2]
BROKEN = REPO / "tests" / "data" / "facts" / "gb10-broken.json"


@pytest.fixture
def run(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "SPARKDOCTOR_DEBUG")}
    user_config = tmp_path / "user-config.toml"
    user_config.write_text("")
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_CONFIG=str(user_config), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"),
               SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), COLUMNS="100")
    work = tmp_path / "cwd"
    work.mkdir()

    def call(*args: object, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], cwd=work, env=env,
                              capture_output=True, text=True, timeout=timeout)

    return call


def one_line_error(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sparkdoctor: error: "), done.stderr
    assert done.stdout == ""
    return lines[0]


def one_line_stderr(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_github_report_from_a_snapshot_folds_the_long_parts_and_its_snapshot_re_evaluates(run, tmp_path):
    done = run("report", "--facts", BROKEN)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith("### sparkdoctor report\n")
    assert "FAIL (exit 1)" in text
    for wanted in ("`cutedsl-wheel-collision`", "== Versions of relevant libraries ==", "[pip3] vllm==0.22.0  (1 modified",
                   "== cutlass-dsl ==", "active build     : libs-base", "<summary>Kernel probes</summary>",
                   "== Files that differ from their RECORD ==", "HF_TOKEN                    : <redacted>", "Anonymized by sparkdoctor"):
        assert wanted in text, wanted
    assert text.count("<details>") == text.count("</details>") >= 4
    # the folded snapshot is a real snapshot: check --facts judges it as it judged the original
    snapshot = re.search(r"```json\n(.*?)\n```", text, re.S).group(1)
    saved = tmp_path / "from-report.json"
    saved.write_text(snapshot)
    again, original = run("check", "--facts", saved, "--format", "json"), run("check", "--facts", BROKEN, "--format", "json")
    assert again.returncode == original.returncode == 1
    ids = [sorted(f["id"] for f in json.loads(d.stdout)["findings"]) for d in (again, original)]
    assert ids[0] == ids[1]


def test_forum_report_is_plain_text(run):
    done = run("report", "--facts", BROKEN, "--format", "forum")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "<details>" not in text and "|---" not in text and "```" not in text
    assert re.search(r"^=+\n\s+Findings\n=+$", text, re.M)
    assert "[error] cutedsl-wheel-collision:" in text
    assert "e2m1-cvt           ok      13.0.88 system" in text  # the kernel table, aligned


def test_output_file_is_written_and_equals_stdout(run, tmp_path):
    out = tmp_path / "bug.md"
    done = run("report", "--facts", BROKEN, "-o", out)
    assert done.returncode == 0 and done.stdout == ""
    assert out.read_text() == run("report", "--facts", BROKEN).stdout
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".bug.md")] == []  # no temporary left behind


def test_live_report_on_a_real_interpreter(run):
    done = run("report", "--python", sys.executable, "--no-kernels", "--format", "forum")
    assert done.returncode == 0, done.stderr
    assert "Python version" in done.stdout and f"{sys.version_info[0]}.{sys.version_info[1]}" in done.stdout
    assert "[pip3] typer==" not in done.stdout  # only the relevant libraries are listed
    assert "Versions of relevant libraries" in done.stdout


@pytest.mark.parametrize("args, words", [
    (["--format", "markdown"], "--format markdown: choose one of github, forum"),
    (["--python", sys.executable], "--facts and --python exclude each other"),
    (["--timeout", "0"], "--timeout 0.0: give a number of seconds above 0"),
    (["--arch", "sm_999z"], "--arch 'sm_999z'"),
])
def test_bad_options_are_one_line_and_exit_2(run, args, words):
    done = run("report", "--facts", BROKEN, *args)
    assert done.returncode == 2
    assert words in one_line_error(done)


def test_a_file_that_is_not_a_snapshot_is_one_line_naming_it(run, tmp_path):
    bad = tmp_path / "notes.json"
    bad.write_text('{"schema": 1, "packages": {"torch": {"version": 5}}}')
    done = run("report", "--facts", bad)
    assert done.returncode == 2
    assert f"{bad}: field 'packages.torch.version'" in one_line_error(done)


def test_output_to_a_directory_is_refused_before_anything_runs(run, tmp_path):
    done = run("report", "--facts", BROKEN, "-o", tmp_path)
    assert done.returncode == 2
    assert "is a directory" in one_line_error(done)


def test_an_unprobed_target_still_gets_its_report_and_exit_3(run, tmp_path):
    snapshot = tmp_path / "unprobed.json"
    facts = gb10_facts(packages=None)
    facts.errors = [{"collector": "targetenv", "error": "python crashed"}]
    facts.save(snapshot)
    done = run("report", "--facts", snapshot, "--format", "forum")
    assert done.returncode == 3
    assert "targetenv : python crashed" in done.stdout
    assert "packages could not be read" in one_line_stderr(done)


def test_a_python_that_names_no_interpreter_still_gets_its_report_with_the_reason_and_exit_3(run, tmp_path):
    done = run("report", "--python", "NOSUCH", "--format", "forum", "-o", tmp_path / "bug.txt")
    assert done.returncode == 3
    written = (tmp_path / "bug.txt").read_text()
    assert "target : --python NOSUCH: no such interpreter" in written
    assert "target could not be probed (exit 3)" in written
    assert one_line_stderr(done) == ("sparkdoctor: error: --python NOSUCH: no such interpreter: the report holds only what"
                                     " was observed")


def test_container_target_and_fields_of_a_newer_sparkdoctor_are_shown():
    """The container helper's facts (target kind, the container record with the image fingerprint, host
    health) and a field nobody knows yet are shown without the report depending on their code."""
    future = dataclasses.make_dataclass("FutureFacts", [("container", object, None), ("host_health", object, None),
                                                        ("future_thing", object, None)], bases=(Facts,))
    base = gb10_facts()
    facts = future(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)
                      if f.name not in ("container", "host_health")},  # in Facts once the container target lands
                   container={"name": "vllm_node", "engine": "docker", "image": "vllm:spark", "image_id": "sha256:abc",
                              "platform": "linux/arm64", "layers": ["sha256:1", "sha256:2"], "fingerprint": "f00dfeed"},
                   host_health={"memory": {"available_kib": 1024}, "pressure": {"some_avg10": 3.5},
                                "links": [{"name": "enp1s0f1np1", "speed_mbps": 100000, "mtu": 9000}]},
                   future_thing={"x": 1})
    facts.target = {**facts.target, "kind": "container", "container": "vllm_node", "engine": "docker"}
    facts.host = {**facts.host, "memory": {"swap_used_kib": 0}}  # or health read into the host record itself
    titles = {s.title: s for s in environment_sections(facts)}
    assert ("memory.swap_used_kib", "0") in titles["System"].rows
    assert titles["Target"].rows[:2] == [("target kind", "container"), ("container", "vllm_node")]
    assert ("fingerprint", "f00dfeed") in titles["Container"].rows
    assert ("layers", "2 layer digests (in the snapshot)") in titles["Container"].rows
    assert ("pressure.some_avg10", "3.5") in titles["Host health"].rows
    assert ("links[0].mtu", "9000") in titles["Host health"].rows
    assert ("x", "1") in titles["Future thing"].rows
    for fmt in ("github", "forum"):
        text = whole_report(build_report(facts, load(None)), fmt)
        assert "f00dfeed" in text and "some_avg10" in text and "vllm_node" in text
    assert "| image | vllm\\_node · vllm:spark · fingerprint f00dfeed |" in whole_report(build_report(facts, load(None)), "github")
