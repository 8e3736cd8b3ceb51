"""Target interpreters: how --python is resolved, and how a dead interpreter is told from a slow script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkdoctor.targets import local as target_mod
from sparkdoctor.targets.local import PythonTarget


def script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(body)
    return path


def test_a_slow_script_on_a_live_interpreter_stops_nothing(tmp_path, monkeypatch):
    # The interpreter answers `-c pass`: a timed-out script is that script's problem alone.
    # The ping's 3 s is wall-clock: on a loaded machine a live interpreter's start must not read as a dead one.
    monkeypatch.setattr(target_mod, "PING_TIMEOUT", 600.0)
    python = str(tmp_path / "python")
    Path(python).symlink_to(sys.executable)
    t = PythonTarget(python, "test")
    slow = script(tmp_path, "slow.py", "import time; time.sleep(30)\n")
    other = t.start_script(script(tmp_path, "other.py", "import time; time.sleep(1.5); print('done')\n"), [])
    assert t.run_script(slow, [], timeout=0.5).timed_out
    assert other.result(60).stdout == "done\n"  # limits that a loaded machine's interpreter start cannot reach
    assert t.run_script(script(tmp_path, "later.py", "print('later')\n"), [], timeout=60).stdout == "later\n"


def test_a_dead_interpreter_stops_its_other_scripts_and_starts_none(tmp_path, monkeypatch):
    monkeypatch.setattr(target_mod, "PING_TIMEOUT", 0.5)
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexec sleep 60\n")  # hangs before running any Python
    python.chmod(0o755)
    t = PythonTarget(str(python), "test")
    long = t.start_script(tmp_path / "long.py", [])
    started = time.monotonic()
    first = t.run_script(tmp_path / "first.py", [], timeout=0.5)
    assert first.timed_out
    stopped = long.result(60)  # its own limit is a minute; the dead interpreter ends it now
    assert time.monotonic() - started < 45  # not its minute (the message below says why it ended); room for load
    assert "was stopped: the interpreter does not answer" in stopped.describe_failure()
    late = t.run_script(tmp_path / "late.py", [], timeout=60)
    assert late.start_error and "does not answer" in late.describe_failure()


def test_a_venv_whose_base_python_is_gone_says_so(tmp_path):
    """The classic broken venv after a Python upgrade: bin/python is a link to nothing. It used to be "no such
    interpreter" for the link (which `ls` shows) and "a folder without bin/python" for the folder."""
    import pytest

    from sparkdoctor.targets.interface import TargetError

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to("/nonexistent/python3.11")
    for given in (venv / "bin" / "python", venv):
        with pytest.raises(TargetError) as info:
            target_mod.resolve_python_target(str(given))
        message = str(info.value)
        assert "is a link to /nonexistent/python3.11, which does not exist" in message and "\n" not in message, message
    with pytest.raises(TargetError, match="no such interpreter"):  # a plain typo keeps its message
        target_mod.resolve_python_target(str(tmp_path / "nope" / "python"))


def test_a_loop_of_links_is_called_a_loop_not_a_missing_file(tmp_path):
    """bin/python -> python3 -> python (a hand-made venv gone wrong): both links exist, so "a link to X, which does
    not exist" points the user at a file that `ls` shows."""
    import pytest

    from sparkdoctor.targets.interface import TargetError

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to("python3")
    (venv / "bin" / "python3").symlink_to("python")
    for given in (venv / "bin" / "python", venv):
        with pytest.raises(TargetError) as info:
            target_mod.resolve_python_target(str(given))
        message = str(info.value)
        assert "never reaches a file" in message and "which does not exist" not in message, message
        assert "\n" not in message


def test_a_folder_the_user_cannot_search_is_one_line(tmp_path):
    """`--python venv` where venv is mode 000: looking inside raises EACCES, which was an internal error. Run as an
    unprivileged user (root reads everything) inside a user namespace, as bubblewrap does for mod scripts."""
    import os
    import subprocess

    from tests.debian import tool_or_skip

    bwrap = tool_or_skip("bwrap", "bubblewrap")  # it runs the CLI without root's right to read everything
    locked = tmp_path / "venv"
    (locked / "bin").mkdir(parents=True)
    locked.chmod(0)
    try:
        p = subprocess.run([bwrap, "--unshare-user", "--uid", "1000", "--gid", "1000", "--bind", "/", "/", "--dev", "/dev",
                            "--proc", "/proc", sys.executable, "-m", "sparkdoctor", "check", "--python", str(locked)],
                           capture_output=True, text=True, timeout=300, env=dict(os.environ, COLUMNS="200"),
                           cwd=Path(__file__).resolve().parents[1])
    finally:
        locked.chmod(0o700)
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert p.stderr.count("\n") == 1 and "internal error" not in p.stderr and "Permission denied" in p.stderr, p.stderr


@pytest.mark.parametrize("failure", [
    "  File \\\"__main__.py\\\", line 40\\nSyntaxError: invalid syntax",
    # what a real Python 2.7.18 prints on today's probes: they parse, and the first Python 3 import fails
    "Traceback (most recent call last):\\nImportError: No module named machinery",
])
def test_a_python_2_target_is_named_unsupported_with_its_version_not_a_probe_error(tmp_path, failure):
    """`check --python python2.7` said "python exited 1: ImportError: No module named machinery" (and, before the
    probes parsed under Python 2, "SyntaxError: invalid syntax"): true, but it did not say that the target is a Python
    sparkdoctor does not support. An interpreter that answers like Python 2 does (its version to -c, one of the two
    failures on the probes' source)."""
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\n"
                      "case \" $* \" in *\" -c \"*) printf 2.7.18; exit 0;; esac\n"  # -S -B -c: asked without site
                      f"printf '{failure}\\n' >&2; exit 1\n")
    python.chmod(0o755)
    env = {**os.environ, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache"), "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--python", str(python), "--no-kernels",
                           "--format", "json"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, done.stderr
    errors = {e["collector"]: e["error"] for e in json.loads(done.stdout)["facts"]["errors"]}
    assert errors["target"] == f"{python} is Python 2.7.18, which sparkdoctor cannot probe: it needs Python 3.6 or later"


def test_a_venv_at_a_path_that_is_not_utf8_is_checked_in_every_format(tmp_path):
    """A venv under a folder named with a byte that is not UTF-8 (`w\\xff`) was an internal error (UnicodeEncodeError:
    the hash cache's file name was made from the path's text) in console, json, junit and sarif alike."""
    import shutil

    plain = tmp_path / "plain"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(plain)], check=True, timeout=120)
    odd = os.fsdecode(os.fsencode(str(tmp_path)) + b"/w\xff")
    shutil.copytree(plain, odd, symlinks=True)
    env = {**os.environ, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache"), "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state")}
    for fmt in ("console", "json", "junit", "sarif"):
        done = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--no-kernels", "--python", odd, "-f", fmt],
                              env=env, capture_output=True, timeout=300)
        assert done.returncode in (0, 1) and b"internal error" not in done.stderr and done.stdout, (fmt, done.stderr[-500:])


def test_check_with_stderr_closed_still_writes_its_document():
    """`check -f json 2>&-` (a service manager, a CI step that closes stderr) was an internal error every time: the
    progress display asked the closed stderr whether it is a terminal."""
    done = subprocess.run(["sh", "-c", f'exec "{sys.executable}" -m sparkdoctor check --no-kernels --python "{sys.executable}" -f json 2>&-'],
                          capture_output=True, text=True, timeout=300)
    doc = json.loads(done.stdout)
    assert done.returncode in (0, 1) and doc["kind"] != "error" and doc["exit_code"] == done.returncode, done.stdout[-500:]


def test_a_venv_made_by_python_m_venv_whose_base_python_is_gone_names_the_missing_file(tmp_path):
    """`python -m venv` links bin/python -> python3 -> the base's python3. With the base removed (a pyenv version
    uninstalled, a conda prefix deleted) the line said "a loop of links, or a chain that ends at a missing one"
    and named neither; it names the missing base interpreter now."""
    import pytest

    from sparkdoctor.targets.interface import TargetError

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python3").symlink_to("/nonexistent/base/bin/python3")
    (venv / "bin" / "python").symlink_to("python3")
    for given in (venv / "bin" / "python", venv):
        with pytest.raises(TargetError) as info:
            target_mod.resolve_python_target(str(given))
        message = str(info.value)
        assert "to /nonexistent/base/bin/python3, which does not exist" in message and "recreate the environment" in message
        assert "loop" not in message and "\n" not in message, message


@pytest.mark.parametrize("answer", ["echo 'frob: unknown option -S' >&2; exit 2", "echo 'usage: frob FILE'; exit 0"])
def test_a_program_that_is_no_python_is_named_so_not_as_a_failed_probe(tmp_path, answer):
    """`--python /bin/ls` (or a wrapper that runs something else) said "probe target_env in /bin/ls: ls exited 2: Try
    '/bin/ls --help' for more information.": true, but not what is wrong. Asked for its version, it gives none."""
    from sparkdoctor import proc
    from sparkdoctor.targets.interface import TargetError

    program = tmp_path / "frob"
    program.write_text(f"#!/bin/sh\n{answer}\n")
    program.chmod(0o755)
    failed = proc.ProcResult([str(program)], 2, "", "frob: unknown option -S\n", 0.1)
    with pytest.raises(TargetError) as info:
        target_mod.parse_json_probe(PythonTarget(str(program), "--python"), target_mod.probe_entry("target_env"), failed)
    message = str(info.value)
    assert message.startswith(f"{program} does not run as a Python interpreter: asked for its version (-c), it exited "), message
    assert "frob" in message.split(": ", 1)[1] and "\n" not in message, message


def test_a_venvs_bin_folder_is_taken_as_the_venv_and_a_dangling_virtual_env_says_why(tmp_path, monkeypatch):
    """`--python venv/bin` was "a folder without bin/python" (python is right there); with $VIRTUAL_ENV naming a venv
    whose base Python is gone, check said "no bin/python there (a venv deleted or moved?)" for a bin/python `ls`
    shows."""
    from sparkdoctor.targets.interface import TargetError

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    assert target_mod.resolve_python_target(str(venv / "bin")).python == str(venv / "bin" / "python")
    gone = tmp_path / "gone"
    (gone / "bin").mkdir(parents=True)
    (gone / "bin" / "python3").symlink_to("/nonexistent/base/bin/python3")
    (gone / "bin" / "python").symlink_to("python3")
    monkeypatch.setenv("VIRTUAL_ENV", str(gone))
    with pytest.raises(TargetError) as info:
        target_mod.resolve_python_target(None)
    assert str(info.value).startswith(f"$VIRTUAL_ENV {gone}: ") and "/nonexistent/base/bin/python3, which does not exist" in str(info.value)
    with pytest.raises(TargetError, match="which does not exist"):
        target_mod.resolve_python_target(str(gone / "bin"))


def test_a_venv_folder_given_relative_is_named_by_its_absolute_interpreter(tmp_path, monkeypatch):
    """`--python venv` kept the path as typed (`venv/bin/python` in the report, a saved snapshot and diff), while
    `--python venv/bin/python` was made absolute: a snapshot read from another folder named a path that is not there."""
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.chdir(tmp_path)
    for given in ("venv", "venv/bin", "venv/bin/python"):
        assert target_mod.resolve_python_target(given).python == str(tmp_path / "venv" / "bin" / "python"), given


@pytest.mark.parametrize("answer, words", [
    ("exit 0", "it exited 0 without printing anything (another program, not Python?)"),
    ("echo \"$@\"", 'it exited 0 and printed "-S -B -c import sys'),
])
def test_a_program_that_exits_0_is_named_as_no_python_not_as_a_probe_that_printed_no_json(tmp_path, answer, words):
    """`--python /bin/true` said "probe target_env printed no JSON: no output", which reads as sparkdoctor's own bug;
    `/bin/echo` quoted the probe's argv. Both exit 0: asked for a version, they give none."""
    from sparkdoctor import proc
    from sparkdoctor.targets.interface import TargetError

    program = tmp_path / "frob"
    program.write_text(f"#!/bin/sh\n{answer}\n")
    program.chmod(0o755)
    printed = proc.ProcResult([str(program)], 0, "-S -B probes/target_env\n" if "echo" in answer else "", "", 0.1)
    with pytest.raises(TargetError) as info:
        target_mod.parse_json_probe(PythonTarget(str(program), "--python"), target_mod.probe_entry("target_env"), printed)
    message = str(info.value)
    assert message.startswith(f"{program} does not run as a Python interpreter: asked for its version (-c), "), message
    assert words in message and "printed no JSON" not in message and "\n" not in message, message


def test_a_python_whose_probe_prints_no_json_is_still_said_so(tmp_path):
    """A real interpreter (it answers its version) whose probe printed something else keeps "printed no JSON"."""
    from sparkdoctor import proc
    from sparkdoctor.targets.interface import TargetError

    printed = proc.ProcResult([sys.executable], 0, "hello from a .pth file\n", "", 0.1)
    with pytest.raises(TargetError, match="probe target_env printed no JSON: hello from a .pth file"):
        target_mod.parse_json_probe(PythonTarget(sys.executable, "--python"), target_mod.probe_entry("target_env"), printed)


@pytest.mark.parametrize("folder, first_lines", [  # pip writes the /bin/sh form where the path has a space
    ("venv", "#!{python}\n"), ("my venv", "#!/bin/sh\n'''exec' '{python}' \"$0\" \"$@\"\n' '''\n")])
def test_a_venvs_console_script_is_named_with_the_interpreter_to_pass(tmp_path, folder, first_lines):
    """`check --python venv/bin/pip` (or bin/vllm) ran the probes through pip: "probe target_env in .../pip: pip exited
    2: no such option: -S", after a report with "host unknown". The script's first line names the interpreter."""
    from sparkdoctor.targets.interface import TargetError

    python = tmp_path / folder / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    pip = python.parent / "pip"
    pip.write_text(first_lines.format(python=python) + "import sys\nfrom pip._internal.cli.main import main\n")
    pip.chmod(0o755)
    with pytest.raises(TargetError) as info:
        target_mod.resolve_python_target(str(pip))
    assert str(info.value) == (f"--python {pip}: a Python script, not an interpreter (its first line runs {python}): "
                               f"pass --python {python}")
    assert target_mod.resolve_python_target(str(python)).python == str(python)  # the interpreter itself still resolves
