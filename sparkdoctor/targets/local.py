"""The target environment: where the serving stack lives, not where sparkdoctor is installed.

Everything about the target's packages is read by probes (standard library only) run by the
target's own interpreter in a subprocess with a timeout. A probe is a folder, probes/<name>/, run as
its __main__.py with probes/shared/ beside it; the probes/ folder is the unit that ships. A
container target (targets/container.py) is another way to run a probe and a command;
nothing downstream changes.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkdoctor import proc
from sparkdoctor.inputs import NonFinite, NotJSON, NumberTooLong, json_answer
from sparkdoctor.locations import data_dir
from sparkdoctor.targets.interface import FileTransport, Target, TargetError  # noqa: F401 (re-exported)


@dataclass
class PythonTarget:
    """A Python interpreter (usually a venv's bin/python) on this machine."""

    python: str
    chosen_by: str  # "--python", "VIRTUAL_ENV", "current interpreter"
    kind: str = "python"

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "python": self.python, "chosen_by": self.chosen_by}

    def start_script(self, script: Path, args: list[str], env: dict[str, str] | None = None) -> proc.Running:
        """The script running: the entry point's early child when it is exactly this command with exactly this
        environment (sparkdoctor.targets.early), else a new one."""
        from sparkdoctor.targets import early

        # the user's PYTHONPATH is part of the target: the DSL it finds is the one the user's programs import
        base = early.third_party_env("PYTHONPATH") if probe_name(script) in early.THIRD_PARTY_PROBES else os.environ
        full_env = {**base, **(env or {})}
        argv = early.script_argv(self.python, str(script), args)  # -S -B: no site (no .pth code), no .pyc left behind
        started = early.take(probe_name(script), argv, full_env)
        with _LIVENESS_LOCK:
            liveness = _LIVENESS.setdefault(self.python, _Liveness(self.python))
        if liveness.dead:
            if started is not None:
                started.cancel()
            return proc.Running(argv, None, time.monotonic(), start_error=f"not started: {liveness.dead}")
        return _Watched(started or proc.start(argv, env=full_env), liveness, script.name)

    def run_script(self, script: Path, args: list[str], timeout: float, env: dict[str, str] | None = None) -> proc.ProcResult:
        return self.start_script(script, args, env).result(timeout)

    def run_command(self, argv: list[str], timeout: float, input: str | None = None) -> proc.ProcResult:
        return proc.run(argv, timeout=timeout, input=input)

    def file_transport(self) -> FileTransport:
        # imported on use: check loads sparkdoctor.targets.files only on the runs that get here
        from sparkdoctor.targets.files import LocalFiles

        return LocalFiles()


PING_TIMEOUT = 3.0


def ping_argv(python: str) -> list[str]:
    """Does the interpreter start at all? Started as the probes are (no site: no .pth file or sitecustomize runs)."""
    from sparkdoctor.targets import early

    return [python, *early.NO_SITE, "-c", "pass"]


class _Liveness:
    """What one interpreter has shown so far. When a script times out before the interpreter ever
    finished one, it is pinged (`-S -B -c pass`, the probes' startup path: no site, no .pth file runs); if
    that hangs too, the interpreter itself does not answer, its other scripts are stopped and no new
    one starts, so a dead target costs one probe timeout instead of the longest (76 s before)."""

    def __init__(self, python: str) -> None:
        self.python = python
        self.lock = threading.Lock()
        self.answered = False
        self.dead: str | None = None
        self.running: set[_Watched] = set()


_LIVENESS: dict[str, _Liveness] = {}
_LIVENESS_LOCK = threading.Lock()


class Wrapped(proc.Running):
    """A Running that stands for the `inner` one it wraps: killing or cancelling it kills or cancels that one."""

    def __init__(self, inner: proc.Running):
        super().__init__(inner.argv, inner.popen, inner.started, inner.input, inner.start_error, inner.max_output)
        self.inner = inner

    def kill(self) -> None:
        self.inner.kill()

    def cancel(self) -> None:
        self.inner.cancel()


class _Watched(Wrapped):
    """A target script's Running that reports how it ended to its interpreter's liveness."""

    def __init__(self, inner: proc.Running, liveness: _Liveness, name: str):
        super().__init__(inner)
        self.liveness, self.name = liveness, name
        with liveness.lock:
            liveness.running.add(self)

    def result(self, timeout: float) -> proc.ProcResult:
        res = self.inner.result(timeout)
        live = self.liveness
        with live.lock:
            live.running.discard(self)
            if live.dead and res.returncode is not None and res.returncode < 0:
                return dataclasses.replace(res, returncode=None, stopped=live.dead)
            if res.returncode is not None:
                live.answered = True
            suspect = res.timed_out and not res.out_of_budget and not live.answered and not live.dead
        if suspect and not proc.run(ping_argv(live.python), timeout=PING_TIMEOUT).ok:
            with live.lock:
                live.dead = live.dead or f"the interpreter does not answer ({self.name} timed out, `-c pass` too)"
                others = list(live.running)
            for other in others:
                other.inner.kill()
        return res

    def cancel(self) -> None:
        with self.liveness.lock:
            self.liveness.running.discard(self)
        super().cancel()


def resolve_python_target(python: str | None) -> PythonTarget:
    """--python PATH, else $VIRTUAL_ENV, else the interpreter running sparkdoctor."""
    if python:
        try:
            return PythonTarget(_interpreter_at(python), "--python")
        except OSError as exc:  # EACCES: a folder on the way the user cannot search
            raise TargetError(f"--python {python}: cannot look at it: {exc.strerror or exc}") from None
    venv = os.environ.get("VIRTUAL_ENV")
    if venv:
        for name in ("bin/python", "bin/python3", "Scripts/python.exe"):
            candidate = Path(venv) / name
            if candidate.exists():
                return PythonTarget(str(candidate), "VIRTUAL_ENV")
        # a venv deleted or moved while its shell still names it: judging sparkdoctor's own venv instead would pass on it
        _refuse_dangling(f"$VIRTUAL_ENV {venv}", Path(venv) / "bin" / "python")
        raise TargetError(f"$VIRTUAL_ENV {venv}: no bin/python there (a venv deleted or moved?); pass --python, "
                          "or deactivate it")
    return PythonTarget(sys.executable, "current interpreter")


def runs_elsewhere(program: Path, bin_dir: Path) -> str | None:
    """The interpreter a Python script's first line names, when that is outside `bin_dir` (a venv copied or moved
    keeps its scripts' first lines: they run the old place's interpreter and packages); else None."""
    python = script_python(program)
    if python is None:
        return None
    try:
        return None if os.path.samefile(os.path.dirname(python), bin_dir) else python
    except OSError:  # that folder is gone: the venv was moved
        return python


def script_python(program: Path) -> str | None:
    """The absolute Python a script's first line runs (`#!/opt/venv/bin/python3`); also pip's form for long paths: a
    `#!/bin/sh` line, then `'''exec' PYTHON "$0" "$@"`. None for anything else (an ELF interpreter, a shell wrapper)."""
    try:
        with program.open("rb") as fh:
            head = os.fsdecode(fh.read(4096)).splitlines()[:2]  # the file system's own decoding: a path round-trips
    except OSError:
        return None
    if not head or not head[0].startswith("#!"):
        return None
    words = head[0][2:].split()
    if words[:1] == ["/bin/sh"] and len(head) > 1 and head[1].startswith("'''exec' "):
        try:  # a shell line: pip quotes a path with a space in it ("/opt/my venv/bin/python")
            words = shlex.split(head[1])[1:]
        except ValueError:
            return None
    if not words or not os.path.isabs(words[0]) or not os.path.basename(words[0]).startswith("python"):
        return None
    return words[0]


def scripts_elsewhere(python: str, most: int = 2000) -> dict[str, str]:
    """The scripts in the bin/ folder of the venv of `python` that run another interpreter: name -> the interpreter
    named (the first `most` entries of the folder are read, 4 KiB each). Nothing for an interpreter outside a venv:
    a system bin/ (/usr/bin) holds other programs' scripts with interpreters of their own."""
    bin_dir = Path(python).parent
    try:
        if not (bin_dir.parent / "pyvenv.cfg").is_file():
            return {}
        entries = sorted(bin_dir.iterdir())[:most]
    except OSError:
        return {}
    found = {entry.name: runs_elsewhere(entry, bin_dir) for entry in entries if not entry.is_symlink() and entry.is_file()}
    return {name: python for name, python in found.items() if python}


def _interpreter_at(python: str) -> str:
    path = Path(python)
    if path.is_dir():  # a venv folder given instead of its interpreter
        for name in ("bin/python", "bin/python3", "python", "python3"):  # a venv, or its bin/ folder
            if (path / name).exists():  # absolute, as for an interpreter: a snapshot names it read from anywhere
                return os.path.abspath(path / name)
        for link in (path / "bin" / "python", path / "python"):
            _refuse_dangling(f"--python {python}", link)
        raise TargetError(f"--python {python}: a folder without bin/python")
    found = shutil.which(python) if os.sep not in python else None  # a bare name is a PATH lookup
    if found:
        return found
    if path.exists():  # absolute: the probes run it from another working folder
        if not os.access(path, os.X_OK):
            raise TargetError(f"--python {python}: not executable")
        runs = script_python(path) if path.is_file() else None
        if runs:  # bin/pip, bin/vllm: a console script, which would be handed the probes' -S
            raise TargetError(f"--python {python}: a Python script, not an interpreter (its first line runs {runs}): "
                              f"pass --python {runs}")
        return os.path.abspath(path)
    _refuse_dangling(f"--python {python}", path)
    raise TargetError(f"--python {python}: no such interpreter")


def _refuse_dangling(given: str, link: Path) -> None:
    """A venv whose base Python was removed or upgraded away keeps bin/python as a link to nothing (in a venv made
    by `python -m venv`: python -> python3 -> the base's python3): say that, naming the missing file at the end of
    the chain, not "no such interpreter" (the file is right there in `ls`)."""
    if not (link.is_symlink() and not link.exists()):
        return
    here = link
    for _hop in range(40):  # the kernel's own limit on links followed (a loop of links ends here too)
        target = here.parent / os.readlink(here)
        if not os.path.lexists(target):
            via = "" if here == link else f" (through {here})"
            raise TargetError(f"{given}: {link} is a link{via} to {os.readlink(here)}, which does not exist "
                              "(the Python this environment was made with is gone: recreate the environment)")
        if not target.is_symlink():
            break
        here = target
    raise TargetError(f"{given}: {link} is a link that never reaches a file (a loop of links, or a "
                      "chain that ends at a missing one)")


def probe_entry(name: str) -> Path:
    """The script that runs probe `name` (probes/<name>/__main__.py, in a checkout or a wheel)."""
    return data_dir("probes") / name / "__main__.py"


def probe_name(script: Path) -> str:
    """'target_env' for probes/target_env/__main__.py: what an error line calls the probe."""
    return script.parent.name if script.name == "__main__.py" else script.name


def parse_json_probe(target: Target, script: Path, result: proc.ProcResult) -> dict[str, Any]:
    """The one JSON object a probe printed as its last line (a .pth file of the target may print
    before it); TargetError with one clear line otherwise."""
    name = probe_name(script)
    if not result.ok:
        _refuse_too_old(target, result)
        raise TargetError(f"probe {name} in {target.describe().get('python')}: {result.describe_failure()}")
    lines = result.stdout.strip().splitlines()
    try:
        data = json_answer(lines[-1], finite=True) if lines else None
    except NonFinite as exc:  # NaN, Infinity, 1e999: no reading a report can carry (--format json is strict)
        raise TargetError(f"probe {name} printed JSON with a non-finite number: {exc}") from None
    except NumberTooLong as exc:  # a number past int()'s digit limit: JSON, just not one a report can hold
        raise TargetError(f"probe {name} printed JSON that {exc}") from None
    except NotJSON:  # not JSON, or arrays in arrays thousands deep
        data = None
    if data is None:
        _refuse_not_python(target)  # `--python /bin/true` exits 0 and prints nothing: not a probe that went wrong
        if result.dropped:  # past the bytes read of it (proc's head and tail): the JSON line lost its middle
            raise TargetError(f"probe {name} printed more than is read of it ({result.dropped:,} bytes in its middle "
                              "were dropped): no JSON is left to read")
        first = (lines or ["no output"])[-1][:200]
        raise TargetError(f"probe {name} printed no JSON: {first}")
    if not isinstance(data, dict):
        raise TargetError(f"probe {name} printed JSON that is not an object")
    return data


def _refuse_too_old(target: Target, result: proc.ProcResult) -> None:
    """A probe that an old interpreter could not run is not a probe failure: the target is a Python the probes do not
    support, and the error line says that, with its version. Python 2.7 fails the probes with an ImportError
    (`importlib.machinery`), older source would be a SyntaxError: any failure that ended with an exit code asks. A
    program that answers no version at all (`--python /bin/ls`, a wrapper that runs something else) is named as one
    that does not run as Python, with what it said, not as a probe that failed."""
    if not isinstance(target, PythonTarget) or result.returncode is None or result.returncode <= 0:
        return
    version = _refuse_not_python(target)
    if version and tuple(int(part) for part in version.split(".")[:2] if part.isdigit()) < (3, 6):
        raise TargetError(f"{target.python} is Python {version}, which sparkdoctor cannot probe: it needs Python 3.6 or later")


def _refuse_not_python(target: Target) -> str:
    """The version `target` answers when asked as a Python is (`3.12.1`; "" when the question timed out or was not
    asked); TargetError, in words a user reads as "that is not Python", when it answers none: a program that
    exits 0 printing nothing (`/bin/true`), one that echoes its arguments (`/bin/echo`), one that fails on `-c`."""
    if not isinstance(target, PythonTarget):
        return ""
    from sparkdoctor.targets import early

    asked = proc.run([target.python, *early.NO_SITE, "-c", "import sys; sys.stdout.write('%d.%d.%d' % sys.version_info[:3])"],
                     timeout=PING_TIMEOUT, max_output=(64, 64))
    version = asked.stdout.strip() if asked.ok else ""
    if asked.returncode is not None and not asked.timed_out and not re.fullmatch(r"\d+\.\d+\.\d+", version):
        said = [ln.strip() for ln in f"{asked.stderr}\n{asked.stdout}".splitlines() if ln.strip()]
        if asked.returncode == 0:
            answer = f"it exited 0 and printed {said[0][:200]!r}" if said else "it exited 0 without printing anything"
            raise TargetError(f"{target.python} does not run as a Python interpreter: asked for its version (-c), "
                              f"{answer} (another program, not Python?)")
        raise TargetError(f"{target.python} does not run as a Python interpreter: asked for its version (-c), it "
                          f"exited {asked.returncode}: {(said or ['no output'])[0][:200]}")
    return version
