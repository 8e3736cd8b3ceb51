"""The real command, end to end, in a subprocess: exit codes, formats, files, errors as one line.

Runs `python -m sparkdoctor` from a scratch folder (no stray ./sparkdoctor.toml) with the user's
config and cache pointed into tmp, against the snapshots in tests/data/facts and a matrix written
by the test.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import signal
import stat
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.test_render import ENTRIES, FACTS_DIR, write_matrix

REPO = Path(__file__).resolve().parent.parent
CUTEDSL = "cutedsl-libs-base-mma"


@pytest.fixture
def run(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "SPARKDOCTOR_DEBUG")}
    user_config = tmp_path / "empty-user-config.toml"  # a named config file must exist
    user_config.write_text("")
    env.update(
        PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
        SPARKDOCTOR_CONFIG=str(user_config),
        SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"),
        SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"),
        COLUMNS="100",
    )
    work = tmp_path / "cwd"
    work.mkdir()

    def call(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:  # a safety net; a loaded start is ~7 s
        return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], cwd=work, env=env,
                              capture_output=True, text=True, timeout=timeout)

    call.env, call.cwd = env, work  # for tests that start the command themselves
    return call


@pytest.fixture
def matrix(tmp_path) -> Path:
    return write_matrix(tmp_path / "matrix")


def snap(name: str) -> Path:
    return FACTS_DIR / f"{name}.json"


def assert_one_line_error(p: subprocess.CompletedProcess, *needles: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("sparkdoctor: error: "), p.stderr
    assert "Traceback" not in p.stderr
    for needle in needles:
        assert needle in lines[0]
    assert p.stdout == ""


# ---- exit codes -----------------------------------------------------------------------------------


def test_clean_snapshot_exits_0(run, matrix):
    p = run("check", "--facts", snap("nogpu-clean"), "--matrix", matrix)
    assert p.returncode == 0, p.stderr
    assert "fail-on error → PASS (exit 0)" in p.stdout
    assert "\x1b[" not in p.stdout  # a pipe gets no colour codes
    assert max(len(line) for line in p.stdout.splitlines()) <= 100
    assert p.stderr == ""


def test_errors_exit_1(run, matrix):
    p = run("check", "--facts", snap("gb10-broken"), "--matrix", matrix)
    assert p.returncode == 1, p.stderr
    assert CUTEDSL in p.stdout
    assert " ".join(p.stdout.split()).endswith("fail-on error → FAIL (exit 1)")


def test_no_gpu_and_no_arch_is_judged_as_an_assumed_gb10_not_a_pass(run, matrix, tmp_path):
    # The same broken environment seen from a builder with no GPU: it used to read "clear" and exit 0.
    doc = json.loads(snap("gb10-broken").read_text())
    doc.update(gpus=[], arch={"value": None, "source": "none"})
    builder = tmp_path / "builder.json"
    builder.write_text(json.dumps(doc))
    p = run("check", "--facts", builder, "--matrix", matrix)
    assert p.returncode == 1, p.stdout
    assert CUTEDSL in p.stdout and "no known problem" not in p.stdout
    assert "sm_121a (assumed: no GPU detected; pass --arch to choose)" in p.stdout
    report = json.loads(run("check", "--facts", builder, "--matrix", matrix, "-f", "json").stdout)
    assert report["facts"]["arch"]["source"] == "assumed"
    [finding] = [f for f in report["findings"] if f["id"] == CUTEDSL]
    assert any("assumed" in line for line in finding["evidence"])


def test_warnings_fail_only_when_strict(run, tmp_path):
    warn_only = write_matrix(tmp_path / "warn-only", ["triton-ptxas-sm121a", "vllm-files-modified"])
    # Nothing in this matrix explains the snapshot's failing CuTe DSL probe: that is an error of its own.
    base = ("check", "--facts", snap("gb10-broken"), "--matrix", warn_only, "--ignore", "probe-cutedsl-nvfp4-mma")
    assert run(*base).returncode == 0
    assert run(*base, "--strict").returncode == 1
    assert run(*base, "--fail-on", "warn").returncode == 1
    assert run(*base, "--fail-on", "info").returncode == 1


def test_strict_never_takes_info_out_of_the_gate(run, tmp_path):
    """`--strict --fail-on info` was taken as warn: a finding of severity info that `--fail-on info` fails on passed
    once `--strict` was added. Strict adds the warnings; it never makes the gate weaker (flag or config)."""
    base = ("check", "--facts", snap("gb10-broken"))
    found = json.loads(run(*base, "--format", "json").stdout)["findings"]
    assert {f["severity"] for f in found} >= {"error", "info"}, found
    ignore = [a for f in found if f["severity"] != "info" for a in ("--ignore", f["id"])]
    only_info = (*base, *ignore)
    assert run(*only_info).returncode == 0
    assert run(*only_info, "--strict").returncode == 0
    assert run(*only_info, "--fail-on", "info").returncode == 1
    assert run(*only_info, "--fail-on", "info", "--strict").returncode == 1
    config = tmp_path / "info.toml"
    config.write_text('[check]\nfail_on = "info"\n')
    assert run(*only_info, "--config", config, "--strict").returncode == 1


def test_ignore_flag_and_config_file(run, matrix, tmp_path):
    base = ("check", "--facts", snap("gb10-broken"), "--matrix", matrix)
    p = run(*base, "--ignore", CUTEDSL)
    assert p.returncode == 0, p.stdout
    assert f"ignored: {CUTEDSL}" in p.stdout
    config = tmp_path / "sparkdoctor.toml"
    config.write_text(f'[check]\nignore = [{{ id = "{CUTEDSL}", reason = "fixed in our image build" }}]\n')
    assert run(*base, "--config", config).returncode == 0
    config.write_text(f'[check]\nignore = [{{ id = "{CUTEDSL}", reason = "fixed in our image build" }}]\nfail_on = "warn"\n')
    assert run(*base, "--config", config).returncode == 1  # the warning now fails


def test_unprobed_target_exits_3(run, matrix):
    p = run("check", "--facts", snap("unprobed"), "--matrix", matrix)
    assert p.returncode == 3
    assert "target could not be probed (exit 3)" in p.stdout


# ---- usage and input errors: exit 2, one line, no traceback ----------------------------------------


def test_bad_format_exits_2(run, matrix):
    assert_one_line_error(run("check", "--facts", snap("gb10-broken"), "--matrix", matrix, "--format", "yaml"), "--format yaml")


def test_malformed_matrix_exits_2_naming_file_and_field(run, tmp_path):
    bad = write_matrix(tmp_path / "bad", ["driver-before-580"], stack=False)
    bad.write_text(bad.read_text().replace('severity = "error"', 'severity = "fatal"'))
    p = run("check", "--facts", snap("gb10-broken"), "--matrix", bad)
    assert_one_line_error(p, str(bad), "driver-before-580", "severity")
    not_toml = tmp_path / "broken.toml"
    not_toml.write_text("component = \n")
    assert_one_line_error(run("check", "--facts", snap("gb10-broken"), "--matrix", not_toml), str(not_toml), "not valid TOML")


def test_malformed_snapshot_exits_2(run, matrix, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": 1, "gpus": ')
    assert_one_line_error(run("check", "--facts", broken, "--matrix", matrix), str(broken), "not valid JSON")
    future = tmp_path / "future.json"
    future.write_text(json.dumps({**json.loads(snap("nogpu-clean").read_text()), "schema": 99}))
    assert_one_line_error(run("check", "--facts", future, "--matrix", matrix), "schema")
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({**json.loads(snap("nogpu-clean").read_text()), "gpus": "GB10"}))
    assert_one_line_error(run("check", "--facts", wrong, "--matrix", matrix), "gpus")
    assert_one_line_error(run("check", "--facts", tmp_path / "missing.json", "--matrix", matrix), "missing.json")


def test_facts_and_python_exclude_each_other(run, matrix):
    assert_one_line_error(run("check", "--facts", snap("nogpu-clean"), "--python", sys.executable, "--matrix", matrix), "--facts")


def test_bad_arch_and_fail_on_exit_2(run, matrix):
    base = ("check", "--facts", snap("nogpu-clean"), "--matrix", matrix)
    assert_one_line_error(run(*base, "--arch", "gb10"), "--arch 'gb10'")
    assert_one_line_error(run(*base, "--fail-on", "fatal"), "--fail-on fatal")


def test_unknown_option_is_a_one_line_usage_error(run):
    assert_one_line_error(run("check", "--no-such-option"), "--no-such-option")


def test_a_mistyped_command_names_the_nearest_one(run):
    """`sparkdoctor chek` said only "No such command 'chek'." while `matrix lst` got click's "Did you mean 'list'?"."""
    assert run("chek").stderr == "sparkdoctor: error: No such command 'chek'. Did you mean 'check'?\n"
    assert run("matrix", "lst").stderr == "sparkdoctor: error: No such command 'lst'. Did you mean 'list'?\n"
    assert run("zzz").stderr == "sparkdoctor: error: No such command 'zzz'.\n"
    assert run("chek").returncode == 2


def test_unwritable_output_is_a_one_line_error(run, matrix, tmp_path):
    p = run("check", "--facts", snap("nogpu-clean"), "--matrix", matrix, "--format", "json", "-o", tmp_path / "no" / "x.json")
    assert_one_line_error(p, "--output", "No such file or directory")
    # a new FILE in a folder that is there but takes no new file (/proc answers ENOENT): the folder is named as such
    p = run("check", "--facts", snap("nogpu-clean"), "--matrix", matrix, "--format", "json", "-o", "/proc/sparkdoctor.json")
    assert_one_line_error(p, "--output /proc/sparkdoctor.json: no file can be made in /proc (")
    # a FILE that exists in a folder where no file can be made (/proc): the folder is named, not "no such file"
    p = run("check", "--facts", snap("nogpu-clean"), "--matrix", matrix, "--format", "json", "-o", "/proc/version")
    assert_one_line_error(p, "--output /proc/version: no file can be made beside it in /proc")


def test_bad_matrix_list_format_is_a_one_line_usage_error(run):
    assert_one_line_error(run("matrix", "list", "--format", "yaml"), "--format yaml")


# ---- document formats -----------------------------------------------------------------------------


def test_json_on_stdout_is_pure_and_versioned(run, matrix):
    p = run("check", "--facts", snap("gb10-broken"), "--matrix", matrix, "--format", "json")
    assert p.returncode == 1
    doc = json.loads(p.stdout)  # nothing but the document on stdout
    assert doc["schema"] == 1
    assert doc["exit_code"] == 1
    assert [f["id"] for f in doc["findings"]] == [CUTEDSL, "triton-ptxas-sm121a", "vllm-files-modified"]
    assert doc["summary"]["unknown"] == 1
    assert doc["facts"]["arch"] == {"value": "sm_121a", "source": "detected"}
    assert p.stderr == ""


def test_junit_on_stdout_parses(run, matrix):
    p = run("check", "--facts", snap("gb10-broken"), "--matrix", matrix, "--format", "junit", "--strict")
    assert p.returncode == 1
    suite = ET.fromstring(p.stdout.encode()).find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == (str(len(ENTRIES)), "2", "2")


def test_markdown_on_stdout(run, matrix):
    p = run("check", "--facts", snap("nogpu-clean"), "--matrix", matrix, "--format", "markdown")
    assert p.returncode == 0
    assert p.stdout.startswith("## sparkdoctor report")
    assert "<details>" in p.stdout


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_output_writes_a_file_and_keeps_stdout_empty(run, matrix, tmp_path, fmt):
    out = tmp_path / f"report.{fmt}"
    p = run("check", "--facts", snap("gb10-broken"), "--matrix", matrix, "--format", fmt, "--output", out)
    assert p.returncode == 1
    assert p.stdout == ""
    text = out.read_text(encoding="utf-8")
    if fmt == "json":
        assert json.loads(text)["exit_code"] == 1
    else:
        assert CUTEDSL in text and "\x1b[" not in text
    assert not list(tmp_path.glob(".report.*.tmp"))  # the atomic write left nothing behind


def test_arch_given_on_a_snapshot(run, matrix):
    p = run("check", "--facts", snap("nogpu-clean"), "--arch", "sm_121a", "--matrix", matrix, "--format", "json")
    assert p.returncode == 0
    assert json.loads(p.stdout)["facts"]["arch"] == {"value": "sm_121a", "source": "given"}
    console = run("check", "--facts", snap("nogpu-clean"), "--arch", "sm_121a", "--matrix", matrix)
    assert "sm_121a (given via --arch; no GPU detected)" in console.stdout
    # Evaluated as another GPU, the sm_121a-only error no longer applies; what was detected is kept.
    other = run("check", "--facts", snap("gb10-broken"), "--arch", "sm_120a", "--matrix", matrix, "--format", "json")
    assert other.returncode == 0
    doc = json.loads(other.stdout)
    assert doc["facts"]["arch"] == {"value": "sm_120a", "source": "given", "detected": "sm_121a"}
    assert CUTEDSL not in [f["id"] for f in doc["findings"]]


# ---- matrix commands ------------------------------------------------------------------------------


def test_matrix_list_show_validate(run, matrix):
    p = run("matrix", "list", "--matrix", matrix)
    assert p.returncode == 0 and CUTEDSL in p.stdout and "b12x-cu13" in p.stdout
    rows = json.loads(run("matrix", "list", "--matrix", matrix, "--format", "json").stdout)
    assert {r["id"] for r in rows} == {*ENTRIES, "b12x-cu13"}
    p = run("matrix", "show", CUTEDSL, "--matrix", matrix)
    assert p.returncode == 0 and "cutlass-dsl-cu13-clean-reinstall" in p.stdout
    shown = json.loads(run("matrix", "show", "b12x-cu13", "--matrix", matrix, "-f", "json").stdout)
    assert shown["kind"] == "stack" and shown["env"] == {"CUTE_DSL_ARCH": "sm_121a"}
    p = run("matrix", "validate", matrix)
    assert p.returncode == 0
    assert p.stdout.startswith(f"ok: {len(ENTRIES)} entries, 1 known-good stack")


def test_matrix_show_unknown_id_and_validate_bad_file_exit_2(run, matrix, tmp_path):
    assert_one_line_error(run("matrix", "show", "nope", "--matrix", matrix), "'nope'")
    bad = write_matrix(tmp_path / "bad", ["driver-before-580"], stack=False)
    bad.write_text(bad.read_text().replace('refs = ["https://github.com/NVIDIA/dgx-spark-playbooks"]', "refs = []"))
    assert_one_line_error(run("matrix", "validate", bad), "refs")


def test_matrix_validate_checks_probe_ids_and_verify_tables(run, tmp_path):
    bundled = REPO / "matrix"
    assert run("matrix", "validate", bundled).returncode == 0
    for name, old, new, needle in (
        ("probe", 'probe = "e2m1-cvt", expect = "fail" }', 'probe = "e2m1-cvtx", expect = "fail" }', "'e2m1-cvtx', which is no probe"),
        ("verify", 'verify.affected = [["nvidia-cuda-nvcc-cu12==12.8.93"]]', "verify.affected = []", "verify.affected"),
    ):
        folder = tmp_path / name
        folder.mkdir()
        for f in bundled.glob("*.toml"):
            (folder / f.name).write_text(f.read_text())
        triton = folder / "triton.toml"
        assert old in triton.read_text()
        triton.write_text(triton.read_text().replace(old, new))
        assert_one_line_error(run("matrix", "validate", folder), "triton.toml", "triton-ptxas-no-sm121a", needle)


# ---- live: the real collectors on this very interpreter -------------------------------------------


def _collectors_present() -> bool:
    names = ("targetenv", "gpu", "toolkits", "constraints", "capabilities")
    return all(importlib.util.find_spec(f"sparkdoctor.collect.{n}") is not None for n in names)


live = pytest.mark.skipif(not _collectors_present(), reason="the collectors (sparkdoctor.collect.targetenv, ...) are not written yet")


def _live_check(run, *extra: str) -> dict:
    p = run("check", "--no-kernels", "--format", "json", "--python", sys.executable, *extra, timeout=180)
    assert p.returncode in (0, 1), p.stderr  # never 2 (usage/internal) or 3 (unprobeable)
    doc = json.loads(p.stdout)
    assert doc["schema"] == 1 and doc["exit_code"] == p.returncode
    return doc


@live
def test_live_check_of_this_interpreter_gives_json(run, matrix):
    facts = _live_check(run, "--matrix", str(matrix))["facts"]
    assert Path(facts["target"]["python"]).resolve() == Path(sys.executable).resolve()
    assert isinstance(facts["packages"], dict)  # the target's packages were read
    assert facts["kernels"] in (None, {})  # --no-kernels compiled nothing


@live
@pytest.mark.skipif(not list((REPO / "matrix").glob("*.toml")), reason="the bundled matrix has no entries yet")
def test_live_check_against_the_bundled_matrix(run):
    doc = _live_check(run)
    assert doc["summary"]["evaluated"] > 0


# ---- the run's budget, its children, signals ------------------------------------------------------


def hanging_python(folder: Path) -> tuple[Path, Path]:
    """A target interpreter that never answers and leaves a grandchild: every pid lands in a file."""
    pids = folder / "pids"
    script = folder / "python"
    script.write_text(f"#!/bin/sh\necho $$ >> {pids}\nsleep 300 &\necho $! >> {pids}\nwait\n")
    script.chmod(0o755)
    return script, pids


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _left_alive(path: Path, limit_s: float = 60.0) -> list[int]:
    """The pids in `path` still alive once they had `limit_s` to die: a killed process still has to be scheduled to
    exit, which a loaded machine can put off past a short sleep. A safety net, far under their `sleep 300`."""
    until = time.monotonic() + limit_s
    while (alive := [pid for pid in _pids(path) if _alive(pid)]) and time.monotonic() < until:
        time.sleep(0.05)
    return alive


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "-inf"])
def test_timeout_must_be_a_positive_number(run, matrix, value):
    assert_one_line_error(run("check", "--facts", snap("nogpu-clean"), "--matrix", matrix, "--timeout", value), "--timeout")


def test_timeout_bounds_the_whole_run_and_leaves_no_child(run, matrix, tmp_path):
    python, pids = hanging_python(tmp_path)
    started = time.monotonic()
    p = run("check", "--python", python, "--no-kernels", "--matrix", matrix, "--timeout", "2", "-f", "json")
    took = time.monotonic() - started
    # it used to take 16 s whatever --timeout said (76 s on this target). The bound only has to tell those apart: a
    # loaded start alone took ~7 s, so a tight one (it was 12) failed on a busy machine
    assert took < 45, took
    assert p.returncode == 3, p.stderr
    errors = json.loads(p.stdout)["facts"]["errors"]
    assert any(e["collector"] == "target" and "time budget" in e["error"] for e in errors), errors
    assert len(_pids(pids)) >= 2 and not _left_alive(pids)


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_every_child_and_exits_with_one_line(run, matrix, tmp_path, sig, code):
    python, pids = hanging_python(tmp_path)
    p = subprocess.Popen([sys.executable, "-m", "sparkdoctor", "check", "--python", str(python), "--no-kernels", "--matrix", str(matrix),
                          "--format", "json"],
                         cwd=run.cwd, env=run.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as from a terminal
    deadline = time.monotonic() + 120  # a safety net: a loaded start alone took ~7 s
    while len(_pids(pids)) < 2 and time.monotonic() < deadline:  # the probe (and its grandchild) are running
        time.sleep(0.05)
    time.sleep(0.5)  # let the CLI get past its imports into the collectors
    assert _pids(pids), "the probe never started"
    p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    assert p.returncode == code, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sparkdoctor: error: interrupted"), err
    # the JSON error names the interruption and its code (it used to say code "internal", message "2", exit 2)
    doc = json.loads(out)
    assert doc["exit_code"] == code and doc["errors"] == [
        {"code": "interrupted", "type": doc["errors"][0]["type"], "message": f"interrupted ({sig.name})", "exit_code": code}], doc
    assert not _left_alive(pids)


# ---- where the report goes --------------------------------------------------------------------------


def test_output_refuses_special_files(run, matrix, tmp_path):
    base = ("check", "--facts", snap("nogpu-clean"), "--matrix", matrix, "-f", "json")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "stdout-link"
    link.symlink_to("/proc/self/fd/1")
    # a device node of the test's own (the null device's numbers), never the machine's /dev/null:
    # a regression would replace whatever device it was given
    device = tmp_path / "null-device"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:  # not root: a FIFO and a link still cover the rule
        device = fifo
    for path in (device, fifo, link):
        for option in ("-o", "--save-facts"):
            p = run(*base, option, path) if option == "-o" else run("check", "--python", sys.executable, "--no-kernels",
                                                                      "--matrix", matrix, option, path)
            assert_one_line_error(p, str(path), "regular file")
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and link.is_symlink()
    assert stat.S_ISCHR(device.lstat().st_mode) or device == fifo


def test_output_to_dev_null_is_discarded_and_the_facts_still_saved(run, matrix, tmp_path):
    """`--save-facts f.json -o /dev/null`: the document is discarded (the null device is left as it is, through a
    link too) and the facts are saved; before, /dev/null was refused as a device."""
    link = tmp_path / "null-link"
    link.symlink_to(os.devnull)
    for target in (os.devnull, link):
        facts = tmp_path / f"facts-{target == link}.json"
        p = run("check", "--python", sys.executable, "--no-kernels", "--matrix", matrix, "--save-facts", facts,
                "-f", "json", "-o", target)
        assert p.returncode in (0, 1) and p.stdout == "" and "error" not in p.stderr, (p.returncode, p.stderr)
        assert json.loads(facts.read_text())["schema"]
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode) and link.is_symlink()


def test_output_to_a_folder_or_empty_name_is_one_line_and_leaves_nothing(run, matrix, tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    for fmt in ("json", "console"):
        assert_one_line_error(run("check", "--facts", snap("nogpu-clean"), "--matrix", matrix, "-f", fmt, "-o", folder), "is a directory")
        assert_one_line_error(run("check", "--facts", snap("nogpu-clean"), "--matrix", matrix, "-f", fmt, "-o", ""), "--output '': give a file name")
        assert_one_line_error(run("check", "--facts", snap("nogpu-clean"), "--matrix", matrix, "-f", fmt, "-o", "."), "is a directory")
    assert not list(tmp_path.glob(".*.tmp")) and not list(folder.iterdir())


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_output_through_a_symlink_writes_the_file_and_keeps_the_link(run, matrix, tmp_path, fmt):
    real = tmp_path / "real.txt"
    real.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    p = run("check", "--facts", snap("nogpu-clean"), "--matrix", matrix, "-f", fmt, "-o", link)
    assert p.returncode == 0, p.stderr
    assert link.is_symlink()
    assert ('"exit_code": 0' if fmt == "json" else "PASS") in real.read_text()


def test_console_output_file_is_written_atomically(run, matrix, tmp_path):
    # A console report used to be rendered straight into the file: a reader (or a failure) saw half of it.
    # Atomic means a new file renamed over the old one: the old inode is never written into.
    out = tmp_path / "report.txt"
    out.write_text("previous report\n")
    out.chmod(0o640)
    before = out.stat().st_ino
    p = run("check", "--facts", snap("gb10-broken"), "--matrix", matrix, "-o", out)
    assert p.returncode == 1
    assert CUTEDSL in out.read_text() and stat.S_IMODE(out.stat().st_mode) == 0o640
    assert out.stat().st_ino != before and not list(tmp_path.glob(".report.txt*"))


def test_broken_pipe_is_quiet_and_keeps_the_exit_code(run, matrix):
    # `sparkdoctor check | head -1`: the reader leaves early; no "--output None: Broken pipe".
    for fmt in ("console", "json"):
        p = subprocess.run(f"{sys.executable} -m sparkdoctor check --facts {snap('gb10-broken')} --matrix {matrix} -v -f {fmt}"
                           " | true; echo \"rc=${PIPESTATUS[0]}\"",
                           shell=True, executable="/bin/bash", cwd=run.cwd, env=run.env, capture_output=True, text=True, timeout=60)
        assert p.stdout.strip().endswith("rc=1"), p.stdout
        assert p.stderr == "", p.stderr


def test_closed_stdout_is_one_line_not_a_lost_report(run, matrix, tmp_path):
    p = subprocess.run(f"{sys.executable} -m sparkdoctor check --facts {snap('gb10-broken')} --matrix {matrix} >&-",
                       shell=True, cwd=run.cwd, env=run.env, capture_output=True, text=True, timeout=60)
    assert_one_line_error(p, "stdout is closed")
    out = tmp_path / "r.json"
    p = subprocess.run(f"{sys.executable} -m sparkdoctor check --facts {snap('gb10-broken')} --matrix {matrix} -f json -o {out} >&-",
                       shell=True, cwd=run.cwd, env=run.env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and json.loads(out.read_text())["exit_code"] == 1


def test_ascii_stdout_gets_a_report_not_a_crash(run, matrix):
    env = {**run.env, "PYTHONIOENCODING": "ascii"}
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--facts", str(snap("gb10-broken")), "--matrix", str(matrix), "-v"],
                       cwd=run.cwd, env=env, capture_output=True, timeout=60)
    assert p.returncode == 1, p.stderr
    assert p.stderr == b""
    p.stdout.decode("ascii")  # pure ASCII
    assert CUTEDSL.encode() in p.stdout and b"FAIL (exit 1)" in p.stdout


# ---- silent misconfiguration --------------------------------------------------------------------------


def test_empty_python_is_refused(run, matrix):
    assert_one_line_error(run("check", "--python", "", "--no-kernels", "--matrix", matrix), "--python ''")


def test_unknown_ignore_id_warns(run, matrix, tmp_path):
    p = run("check", "--facts", snap("gb10-broken"), "--matrix", matrix, "--ignore", "no-such-id", "--ignore", CUTEDSL, "--ignore", "probe-e2m1-cvt")
    assert p.returncode == 1 or p.returncode == 0
    assert p.stderr.strip().splitlines() == [
        "sparkdoctor: warning: --ignore 'no-such-id': no matrix entry has this id; it ignores nothing (see `sparkdoctor matrix list`)"
    ]
    config = tmp_path / "c.toml"
    config.write_text('[check]\nignore = ["nope"]\n')
    p = run("check", "--facts", snap("nogpu-clean"), "--matrix", matrix, "--config", config)
    assert p.returncode == 0 and "'nope'" in p.stderr and str(config) in p.stderr


def test_error_lines_escape_newlines_from_user_input(run, matrix):
    p = run("check", "--facts", "bad\nname.json", "--matrix", matrix)
    assert_one_line_error(p, "bad\\nname.json")
    p = run("matrix", "show", "x\ny\rz", "--matrix", matrix)
    assert_one_line_error(p, "x\\ny\\rz")


@pytest.mark.parametrize("args", [(), ("matrix",)])
def test_bare_command_prints_help_without_a_stray_error_line(run, args):
    p = run(*args)
    assert p.returncode == 2
    assert "Usage:" in p.stdout and "error" not in p.stderr and p.stderr == ""


def test_a_relative_python_path_is_made_absolute(run, matrix):
    # `--python ./py` used to run "py" looked up on PATH: "py could not start".
    (run.cwd / "py").symlink_to(sys.executable)
    p = run("check", "--python", "./py", "--no-kernels", "--matrix", matrix, "-f", "json", timeout=120)
    facts = json.loads(p.stdout)["facts"]
    assert facts["target"]["python"] == str(run.cwd / "py")
    assert not [e for e in facts["errors"] if "could not start" in e["error"]], facts["errors"]


def test_a_ptxas_that_floods_its_output_is_cheap(run, matrix, tmp_path):
    # It used to cost 92 s (every byte kept in memory); now its output is capped and it times out alone.
    folder = tmp_path / "flood"
    folder.mkdir()
    (folder / "ptxas").write_text('#!/bin/sh\nexec yes "ptxas flood flood flood flood flood flood flood flood"\n')
    (folder / "ptxas").chmod(0o755)
    run.env["PATH"] = f"{folder}{os.pathsep}{run.env.get('PATH', '')}"
    p = run("check", "--python", sys.executable, "--matrix", matrix, "--no-cache", "-f", "json", "--timeout", "80", timeout=240)
    assert p.returncode in (0, 1), p.stderr
    facts = json.loads(p.stdout)["facts"]
    [flood] = [t for t in facts["toolkits"] if t["path"] == str(folder / "ptxas")]
    assert flood["version"] is None and "timed out" in flood["error"]
    # ended by its own limit, not by the run's: no collector ran out of the --timeout budget (a verdict that a
    # loaded machine cannot fake, unlike the wall-clock bound this test had)
    assert not [e for e in facts["errors"] if "time budget" in e["error"]], facts["errors"]


def test_a_dead_target_interpreter_costs_one_probe_timeout(run, matrix, tmp_path):
    # With the default budget a hanging interpreter cost 76 s: every script waited out its own limit.
    python, pids = hanging_python(tmp_path)
    started = time.monotonic()
    p = run("check", "--python", python, "--matrix", matrix, "-f", "json", timeout=120)
    assert time.monotonic() - started < 60  # not the 76 s of every script waiting out its limit; room for a loaded start
    assert p.returncode == 3, p.stderr
    kernels = json.loads(p.stdout)["facts"]["kernels"]
    assert "the interpreter does not answer" in kernels["cutedsl-nvfp4-mma"]["detail"]
    assert not _left_alive(pids)


def test_verbs_load_only_when_called_and_help_lists_them_all():
    # `check` must not pay for fix, bench, ...: their modules load on first use (LazyVerbs).
    code = ("import sys\nfrom sparkdoctor.cli import app\n"
            "try:\n    app(['check', '--help'], standalone_mode=False)\nexcept SystemExit:\n    pass\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('sparkdoctor.commands.'))\n"
            "app(['diff', '--help'], standalone_mode=False)\n"
            "print('LOADED', loaded, sorted(m for m in sys.modules if m.startswith('sparkdoctor.commands.')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "120"})
    # check's own module and the shared options load; no other verb's
    assert ("LOADED ['sparkdoctor.commands.check', 'sparkdoctor.commands.options'] "
            "['sparkdoctor.commands.check', 'sparkdoctor.commands.diff', 'sparkdoctor.commands.options']") in done.stdout, done.stderr
    from sparkdoctor.commands import VERBS

    helped = subprocess.run([sys.executable, "-m", "sparkdoctor", "--help"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "COLUMNS": "120"})
    listed = [line.split()[1] for line in helped.stdout.splitlines() if line.startswith("│ ") and line[2].isalpha()]
    assert listed[:2] == ["check", "matrix"] and [v for v in listed if v in VERBS] == VERBS


@pytest.mark.parametrize("size", [{"COLUMNS": "0"}, {"COLUMNS": "99999999999"}, {"COLUMNS": "\u00b2"},
                                  {"LINES": "\u00b2"}])
def test_a_terminal_size_no_terminal_has_still_prints_the_report(run, size):
    """COLUMNS=0 made rich draw at width 0 (check and matrix list printed nothing at all, exit code unchanged);
    COLUMNS=99999999999 was an internal MemoryError, and a superscript digit (str.isdigit, but not int()) an internal
    ValueError. Each is ignored now, as rich ignores COLUMNS=abc."""
    for args, want in ((["check", "--facts", snap("gb10-broken")], 1), (["matrix", "list"], 0)):
        p = subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], cwd=run.cwd, capture_output=True,
                           text=True, timeout=120, env={**run.env, **size})
        assert p.returncode == want and "internal error" not in p.stderr, (p.returncode, p.stderr)
        assert 1000 < len(p.stdout) < 200_000, len(p.stdout)
        assert max(len(line) for line in p.stdout.splitlines()) <= 200


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_a_console_report_to_stdout_that_is_full_is_one_line(run):
    """`sparkdoctor check > /dev/full`: the JSON document said "cannot write the report to stdout", but a console
    report was an internal error (rich flushes the stream it was given when a capture ends), and so was `--help`."""
    # block-buffered (a user's default) and unbuffered (PYTHONUNBUFFERED=1): a buffered stdout kept what the failed
    # write left, and the interpreter's final flush failed again: "Exception ignored ...", exit 120
    buffered = {k: v for k, v in run.env.items() if k != "PYTHONUNBUFFERED"}
    for args, env in itertools.product((["check", "--facts", snap("gb10-broken")], ["matrix", "list"],
                                        ["check", "--facts", snap("gb10-broken"), "--format", "json"]),
                                       (buffered, {**buffered, "PYTHONUNBUFFERED": "1"})):
        with open("/dev/full", "w") as full:
            p = subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], cwd=run.cwd, stdout=full,
                               stderr=subprocess.PIPE, text=True, timeout=120, env=env)
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        assert p.stderr == "sparkdoctor: error: cannot write the report to stdout: No space left on device (use -o FILE)\n"
    with open("/dev/full", "w") as full:  # click writes --help itself
        p = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--help"], cwd=run.cwd, stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=120, env=run.env)
    assert p.returncode == 2 and p.stderr == "sparkdoctor: error: cannot write: No space left on device\n", p.stderr


@pytest.mark.parametrize("verb", [["bench", "--url", "http://127.0.0.1:9"], ["rerun", "--dry-run"]])
@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_a_ready_timeout_that_is_no_positive_number_is_refused_before_anything_starts(tmp_path, verb, value):
    """`--ready-timeout nan` was accepted: the launch's wait `t0 + nan` never ran out, and bench spun on sleep(0) with a
    server that never got ready until something killed it."""
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", *verb, "--ready-timeout", value, "--ledger", str(tmp_path / "l.sqlite")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--ready-timeout" in p.stderr, p.stderr
