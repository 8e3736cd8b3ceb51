"""The scratch environments `matrix verify` installs into: one per step list and Python version,
under <cache>/verify-venvs (or $SPARKDOCTOR_VERIFY_VENVS), built with real pip (its wheel cache
makes a rebuild cheap), locked so two runs never build one at once, marked ready only when every
step succeeded."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from sparkdoctor import proc
from sparkdoctor.errors import SparkdoctorError
from sparkdoctor.exitcodes import EXIT_VERIFY_ERROR
from sparkdoctor.files import file_lock
from sparkdoctor.locations import cache_dir
from sparkdoctor.matrix.verify_table import Env
from sparkdoctor.targets.early import own_pip_folder

PIP_TIMEOUT = 1800.0
VENV_TIMEOUT = 300.0
READY = ".sparkdoctor-ready"
# The most pip may write to one file while `matrix verify` downloads or installs (RLIMIT_FSIZE; pip dies by SIGXFSZ
# past it). Every file of a released wheel is far smaller (a whole torch wheel: ~1 GB); an index that answers with an
# endless wheel wrote 115 MB/s into a temp folder until the download's time limit (900 s: ~100 GB).
FILE_LIMIT = 8 * 1024**3
# The address space of a pip that only reads an index page (`pip index versions`, RLIMIT_AS): it holds the page whole,
# and an endless one grew it by 130 MB/s until its 120 s limit; the real pages of torch and vllm need about 55 MB.
INDEX_MEMORY = 1024**3
# The same bound for the pip that installs a verify step and resolves a stack (`--kind installs`, `--stacks`): it reads
# index pages the same way (a dry run of a vLLM stack peaked at 300 MB of address space, an install of the CuTe DSL
# family with the nvcc wheels (603 MB) went through under 1 GiB); an endless page grew it as `pip index versions` did.
INSTALL_MEMORY = 2 * 1024**3
_BOUNDED_PIP = ("import resource, runpy, signal, sys; n, m = int(sys.argv.pop(1)), int(sys.argv.pop(1)); "
                "resource.setrlimit(resource.RLIMIT_FSIZE, (n, n)); m and resource.setrlimit(resource.RLIMIT_AS, (m, m)); "
                "signal.signal(signal.SIGXFSZ, signal.SIG_DFL); sys.argv[0] = 'pip'; runpy.run_module('pip', run_name='__main__', alter_sys=True)")


def bounded_pip(python: str | Path, memory: int = 0) -> list[str]:
    """`python -m pip` whose every written file stops at FILE_LIMIT bytes (and its address space at `memory`, if given)."""
    return [str(python), "-c", _BOUNDED_PIP, str(FILE_LIMIT), str(memory)]


def run_pip(argv: list[str], timeout: float, beside: Path) -> proc.ProcResult:
    """Run pip with its temporary files in a folder of its own beside `beside`, removed after: a pip stopped at
    FILE_LIMIT (or at its timeout) leaves its partial download there, never gigabytes in the system's /tmp."""
    with tempfile.TemporaryDirectory(prefix=".pip-", dir=beside, ignore_cleanup_errors=True) as scratch:
        return proc.run(argv, timeout=timeout, env={**os.environ, "TMPDIR": scratch})


class BuildError(SparkdoctorError, RuntimeError):
    """An environment that could not be built; the message is pip's (or venv's) last error line."""

    exit_code = EXIT_VERIFY_ERROR
    code = "verify-build"


def venv_root() -> Path:
    override = os.environ.get("SPARKDOCTOR_VERIFY_VENVS")
    return Path(override) if override else cache_dir() / "verify-venvs"


def venv_path(root: Path, env: Env) -> Path:
    key = json.dumps([list(s) for s in env.steps] + [sys.version_info[:2]], sort_keys=True)
    return root / f"env-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def ensure_venv(root: Path, env: Env, log: Callable[[str], None] | None = None) -> tuple[Path, bool]:
    """The python of a ready environment for `env`, building it if needed; (python, built now)."""
    venv = venv_path(root, env)
    python = venv / "bin" / "python"
    root.mkdir(parents=True, exist_ok=True)
    # two verify runs must not build one venv at once: one beside a build waits as long as that build may take (its
    # own limits; $SPARKDOCTOR_LOCK_WAIT when set), so only a holder stopped (Ctrl-Z) or hung ends in one line, exit 2
    build_limit = VENV_TIMEOUT + PIP_TIMEOUT * len(env.steps)
    with file_lock(root / f"{venv.name}.lock", "matrix verify", venv, build_limit):
        if (venv / READY).is_file() and python.exists():
            return python, False
        shutil.rmtree(venv, ignore_errors=True)
        if log:
            log(f"building {venv.name}: {env.label}")
        # With our own pip the venv needs none of its own (saves seconds per venv); else it brings one.
        made = proc.run([sys.executable, "-m", "venv", *(["--without-pip"] if own_pip() else []), str(venv)], timeout=VENV_TIMEOUT)
        if not made.ok:
            raise BuildError(f"python -m venv failed: {made.describe_failure()}")
        for step in env.steps:
            result = run_pip(pip_install(python, step), PIP_TIMEOUT, root)
            if not result.ok:
                shutil.rmtree(venv, ignore_errors=True)
                raise BuildError(f"pip install {' '.join(step)} failed: {pip_error(result)}")
        (venv / READY).write_text(json.dumps([list(s) for s in env.steps]) + "\n", encoding="utf-8")
        return python, True


_OWN_PIP: list[bool] = []


def own_pip() -> bool:
    """Can sparkdoctor's own pip install into another environment (pip >= 22.3 has --python)?"""
    if not _OWN_PIP:
        version = own_pip_version(own_pip_folder())
        _OWN_PIP.append(version is not None and version >= (22, 3))
    return _OWN_PIP[0]


def own_pip_version(folder: str | None) -> tuple[int, int] | None:
    """(major, minor) of the pip in `folder`, from its dist-info; only where it has none, from `python -m pip
    --version`, which cost every whatif of a venv without pip 0.4 s of CPU for its answer."""
    from importlib import metadata

    dist = next(iter(metadata.distributions(name="pip", path=[folder])), None) if folder else None
    if dist is not None:
        found = re.match(r"(\d+)\.(\d+)", dist.version or "")
    else:
        ran = proc.run([sys.executable, "-m", "pip", "--version"], timeout=60)
        found = re.match(r"pip (\d+)\.(\d+)", ran.stdout or "") if ran.ok else None
    return (int(found.group(1)), int(found.group(2))) if found else None


def pip_install(python: Path, step: tuple[str, ...]) -> list[str]:
    # sparkdoctor's own pip installs into the scratch venv (pip --python): no pip bootstrap per venv.
    pip = [*bounded_pip(sys.executable, INSTALL_MEMORY), "--python", str(python)] if own_pip() else bounded_pip(python, INSTALL_MEMORY)
    # the step's options (verify_table.ALLOWED_OPTIONS), then `--`: a requirement is never read as an option
    options, reqs = [a for a in step if a.startswith("-")], [a for a in step if not a.startswith("-")]
    # wheels only: an sdist's build backend is code from the index, and a matrix can come from someone else
    return [*pip, "--disable-pip-version-check", "--no-input", "-q", "install", *options, "--only-binary=:all:", "--", *reqs]


def pip_error(result: proc.ProcResult) -> str:
    if result.signal == signal.SIGXFSZ and not result.timed_out:
        return f"pip wrote a file past {FILE_LIMIT:,} bytes and was stopped (no released wheel file is that large: the index's answer is not one)"
    if result.timed_out or result.start_error or result.signal:
        return result.describe_failure()
    if "MemoryError" in (result.stderr or ""):
        return "pip ran out of the memory it may use and was stopped (an index page that large is not one)"
    lines = [x.strip() for x in (result.stderr or result.stdout).splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1][:400]
