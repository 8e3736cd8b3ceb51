"""A component whose Requires-Dist the target does not satisfy is a finding (sparkdoctor/requires.py): a venv made
with `pip install --no-deps` fails the gate instead of passing it, and a healthy venv gets no such finding."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sparkdoctor.facts import Facts
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import load
from tests import venvs
from tests.probe_modules import probe_module

LINUX_X86 = {"implementation_name": "cpython", "implementation_version": "3.11.7", "os_name": "posix",
             "platform_machine": "x86_64", "platform_release": "6.8.0", "platform_system": "Linux", "platform_version": "#1",
             "python_full_version": "3.11.7", "platform_python_implementation": "CPython", "python_version": "3.11",
             "sys_platform": "linux"}


def facts(packages: dict[str, dict[str, object]], markers: dict[str, str] | None = LINUX_X86) -> Facts:
    target: dict[str, object] = {"kind": "python", "python": "/venv/bin/python"}
    if markers is not None:
        target["markers"] = markers
    rows = {name: {"name": name, "version": "0", "location": "/venv", **row} for name, row in packages.items()}
    return Facts.from_dict({"schema": 1, "target": target, "packages": rows})


def requires_findings(f: Facts, ignore: set[str] | None = None):
    report = build_report(f, load(), ignore=ignore)
    return report, {x.id: x for x in report.findings if x.id.startswith("requires-")}


def test_missing_is_an_error_and_outside_the_specifier_a_warning_only_for_what_applies():
    vllm = {"version": "0.33.0", "requires": [
        "torch==2.14.0",
        "numpy",
        "regex>=2024",
        'xgrammar==0.1.21; platform_machine == "x86_64" or platform_machine == "aarch64"',
        'intel-extension; platform_machine == "ppc64le"',  # not this interpreter
        'pytest; extra == "test"',  # extras are not asked for
        "not a requirement ((",  # cannot be judged: nothing said
    ]}
    report, found = requires_findings(facts({"vllm": vllm, "numpy": {"version": "2.1.0"}, "regex": {"version": "2023.1"}}))
    assert set(found) == {"requires-vllm-missing", "requires-vllm-version"}
    missing, version = found["requires-vllm-missing"], found["requires-vllm-version"]
    assert (missing.severity, version.severity) == ("error", "warn")
    assert missing.evidence == ["vllm 0.33.0 requires torch==2.14.0; installed: none",
                                'vllm 0.33.0 requires xgrammar==0.1.21; platform_machine == "x86_64" or '
                                'platform_machine == "aarch64"; installed: none']
    assert version.evidence == ["vllm 0.33.0 requires regex>=2024; installed: 2023.1"]
    assert report.exit_code() == 1 and report.verdict() == "fail"
    assert report.to_dict()["summary"]["error"] >= 1


def test_a_met_set_a_snapshot_without_requirements_and_one_without_markers_give_nothing():
    torch = {"version": "2.14.0", "requires": ["filelock", 'sympy>=1.13; python_version >= "3.9"']}
    assert requires_findings(facts({"torch": torch, "filelock": {"version": "3.16.1"}, "sympy": {"version": "1.13.3"}}))[1] == {}
    assert requires_findings(facts({"torch": {"version": "2.14.0"}}))[1] == {}  # an older snapshot: no requires
    # no marker variables: a marked requirement is not judged; an unmarked one still is
    found = requires_findings(facts({"torch": torch}, markers=None))[1]
    assert found["requires-torch-missing"].evidence == ["torch 2.14.0 requires filelock; installed: none"]


def test_ignore_takes_the_finding_like_any_engine_finding():
    report, found = requires_findings(facts({"triton": {"version": "3.9.0", "requires": ["setuptools>=40.8.0"]}}),
                                      ignore={"requires-triton-missing"})
    assert found == {} and report.ignored == ["requires-triton-missing"] and report.exit_code() == 0


def check(python, *args: str) -> tuple[int, dict]:
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--python", str(python), "--arch", "sm_121a",
                           "--format", "json", *args], capture_output=True, text=True, timeout=300, env=env)
    assert "no matrix entry has this id" not in done.stderr, done.stderr  # an engine id is always accepted
    return done.returncode, json.loads(done.stdout)


@pytest.mark.slow
def test_a_real_no_deps_install_fails_the_gate_and_a_real_healthy_one_does_not():
    code, doc = check(venvs.cutedsl_no_deps())  # `pip install --no-deps nvidia-cutlass-dsl==4.8.1`
    found = {f["id"]: f for f in doc["findings"]}
    assert code == 1 and doc["summary"]["verdict"] == "fail", doc["summary"]
    assert found["requires-nvidia-cutlass-dsl-missing"]["severity"] == "error"
    assert "nvidia-cutlass-dsl 4.8.1 requires nvidia-cutlass-dsl-libs-base==4.8.1; installed: none" in \
        found["requires-nvidia-cutlass-dsl-missing"]["evidence"]
    code, doc = check(venvs.cutedsl_no_deps(), "--ignore", "requires-nvidia-cutlass-dsl-missing")
    assert code == 0 and doc["ignored"] == ["requires-nvidia-cutlass-dsl-missing"], doc["summary"]

    code, doc = check(venvs.cutedsl450())  # `pip install nvidia-cutlass-dsl==4.5.0`: its requirements all there
    pkg = doc["facts"]["packages"]["nvidia-cutlass-dsl"]
    assert "nvidia-cutlass-dsl-libs-base==4.5.0" in pkg["requires"]
    assert any("extra ==" in line for line in pkg["requires"])  # the cu13 extra is read, and not asked for
    assert doc["facts"]["target"]["markers"]["python_version"] == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert not [f["id"] for f in doc["findings"] if f["id"].startswith("requires-")], doc["findings"]


def test_diff_does_not_report_the_marker_variables_again():
    """They restate target.version and the host: a snapshot from before they were read, or a node with another kernel
    release, is no new difference (`diff` judges the version and the host by themselves)."""
    from sparkdoctor.diff.compare import compare

    before = facts({"triton": {"version": "3.9.0"}}, markers=None)
    after = facts({"triton": {"version": "3.9.0"}}, markers={**LINUX_X86, "platform_release": "6.11.0"})
    found = compare(before, after).differences
    assert not [d for d in found if "markers" in str(d)], found


EGG_REQUIRES = """nosuchdep-alpha>=1.0
nosuchdep-beta @ https://example.invalid/beta.tar.gz

[dev]
pytest>=8

[:sys_platform == "win32"]
nosuchdep-win

[gpu:platform_machine == "aarch64" or platform_machine == "x86_64"]
nosuchdep-gpu
"""


def egg_info(site, name: str = "vllm", version: str = "0.22.0", requires: str | None = EGG_REQUIRES):
    """An .egg-info folder as setuptools writes it: PKG-INFO without Requires-Dist, requires.txt beside it."""
    info = site / f"{name}-{version}-py3.12.egg-info"
    info.mkdir(parents=True)
    (info / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    if requires is not None:
        (info / "requires.txt").write_text(requires)
    return info


def probe_dists():
    return probe_module("target_env", "targetenv_dists")


def test_an_egg_info_gives_the_requires_dist_importlib_metadata_gives(tmp_path):
    """requires.txt's sections become markers as importlib.metadata converts them."""
    import importlib.metadata

    dists = probe_dists()
    with_file = egg_info(tmp_path / "a")
    without = egg_info(tmp_path / "b", requires=None)  # setuptools writes no requires.txt for a dist that needs nothing
    for info in (with_file, without):
        dist = dists.Dist("vllm", "0.22.0", str(info.parent), str(info), False)
        # importlib.metadata leaves a space after an unmarked URL requirement; it means nothing and is not kept
        assert dists.read_requires(dist) == [line.rstrip() for line in importlib.metadata.PathDistribution(info).requires or []]
    dist = dists.Dist("vllm", "0.22.0", str(with_file.parent), str(with_file), False)
    assert dists.read_requires(dist)[-1] == \
        'nosuchdep-gpu; (platform_machine == "aarch64" or platform_machine == "x86_64") and extra == "gpu"'


def test_an_egg_info_install_is_judged_like_a_dist_info_one(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True, timeout=120)
    site = next((tmp_path / "venv").glob("lib/python*/site-packages"))
    egg_info(site)
    (site / "vllm").mkdir()
    (site / "vllm" / "__init__.py").write_text("")
    code, doc = check(tmp_path / "venv" / "bin" / "python", "--no-kernels")
    assert code == 1, doc["summary"]
    found = {f["id"]: f for f in doc["findings"]}
    assert found["requires-vllm-missing"]["evidence"] == [
        "vllm 0.22.0 requires nosuchdep-alpha>=1.0; installed: none",
        "vllm 0.22.0 requires nosuchdep-beta @ https://example.invalid/beta.tar.gz; installed: none"]


def test_a_long_list_of_missing_requirements_is_folded_on_the_console_and_whole_in_json():
    """A `pip install --no-deps vllm` leaves ~70 requirements missing: the console shows a bounded number of them."""
    import io

    from rich.console import Console

    from sparkdoctor.views.console import render_console

    requires = [f"nosuchdep-{i}>=1" for i in range(70)]
    report = build_report(facts({"vllm": {"version": "0.32.0", "requires": requires}}), load())
    buf = io.StringIO()
    render_console(report, Console(file=buf, width=200, color_system=None))
    out = buf.getvalue()
    shown = [line for line in out.splitlines() if "requires nosuchdep-" in line]
    assert 3 <= len(shown) <= 12
    assert f"… and {70 - len(shown)} more (--format json lists all)" in out
    missing = next(f for f in report.to_dict()["findings"] if f["id"] == "requires-vllm-missing")
    assert len(missing["evidence"]) == 70
    # a short list is shown whole, with no fold line
    report = build_report(facts({"vllm": {"version": "0.32.0", "requires": requires[:3]}}), load())
    buf = io.StringIO()
    render_console(report, Console(file=buf, width=200, color_system=None))
    assert buf.getvalue().count("requires nosuchdep-") == 3 and "more (--format json" not in buf.getvalue()
