"""The head start of `sparkdoctor check` and `sparkdoctor recipe check`: the target probe (which also answers
for the capabilities probe), the GPU helper and, for a recipe, the vLLM flags probe, started before the rest of
sparkdoctor is imported.

The target probe is the long pole of a warm check. The console entry point calls `start(sys.argv)`
first thing, and this module needs only the standard library and `sparkdoctor.proc` (every child still
gets its own process group, a registration and the run's limits); a recipe check also reads its recipe here,
through the recipes' own reader (PyYAML), because its probes run with the recipe's env (the capabilities part
reports the `VLLM_*` variables it sees). This module also owns how those children's command lines are built
(`target_probe_args`, `with_capabilities`, `probe_env`, `flags_probe_args`, `gpu_helper_argv`): the ordinary
path (targets/local.py's start_script, collect/gpu.py) builds them with the same functions, and takes an early
child only when its command line AND its whole environment are exactly the ones it would start it with;
otherwise the early one is cancelled. So a head start can be wasted, never wrong.

Only the plain cases start early: `check` with `--python FILE`, or no --python ($VIRTUAL_ENV's
interpreter, else this one); `recipe check RECIPE` without --set, --container or --image, with --python FILE
or none (the recipe command's venv, else as check). A venv folder or a bare name given to --python is resolved
by the ordinary path after parsing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from sparkdoctor import proc

# A recipe is someone else's file: of its env, what makes the interpreter, the loader or a shell run code of the
# recipe's choosing when the probes start (PYTHONPATH to a folder with a sitecustomize.py, PYTHONWARNINGS naming a
# module to import, PYTHONSTARTUP, LD_PRELOAD, LD_AUDIT, BASH_ENV; HOME at a folder whose
# .local/lib/pythonX.Y/site-packages holds a usercustomize.py or a .pth file, which a Python outside a venv runs;
# OPENSSL_CONF loading an engine when hashlib starts; GLIBC_TUNABLES) never reaches a probe, early or not: the probes
# keep the user's own HOME. Nor does sparkdoctor's own SPARKDOCTOR_* (SPARKDOCTOR_PROBE_PYCACHE names the folder the
# probes' Python reads compiled modules from; SPARKDOCTOR_EXEC the token a container's stray probe is found by). The
# server's launch (bench) still gets the recipe's env whole.
CODE_LOADING_PREFIXES = ("PYTHON", "LD_", "DYLD_", "OPENSSL_", "SPARKDOCTOR_")
CODE_LOADING_NAMES = ("GCONV_PATH", "BASH_ENV", "ENV", "HOME", "GLIBC_TUNABLES")


def loads_code(name: str) -> bool:
    return name.upper().startswith(CODE_LOADING_PREFIXES) or name.upper() in CODE_LOADING_NAMES


# A child that runs third-party code (the target's nvidia-cutlass-dsl compiling probes/cutedsl/, in the target or in
# whatif's throwaway venv) gets these of the environment, never os.environ whole: no HF_TOKEN, GITHUB_TOKEN, AWS_*,
# OPENAI_API_KEY or SSH_AUTH_SOCK reaches it. CUTE_DSL_* decide what the DSL compiles (the probe's cache key holds them).
THIRD_PARTY_PROBES = frozenset({"cutedsl"})
KEPT = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR", "LD_LIBRARY_PATH", "LC_", "CUDA_",
        "NVIDIA_", "CUTE_DSL_", "SPARKDOCTOR_CUTEDSL_")
INSTALLER = ("UV_", "SSL_CERT_", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY")  # + uv: an index


def third_party_env(*also: str) -> dict[str, str]:
    """The part of this environment in KEPT or `also` (a name, or a prefix ending in "_") for third-party code."""
    return {k: v for k, v in os.environ.items() if any(k.upper() == n or n[-1] == "_" and k.upper().startswith(n) for n in (*KEPT, *also))}


HASH_BUDGET = 8.0
"""A cold run hashes ~0.7 GB on a full vLLM venv (2-3 s here). On a slow disk the probe stops hashing
at this budget, reports the rest as unverified and goes on from the cache next time, rather than
losing every package fact to the timeout."""

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # sparkdoctor/
PIP_NO_SITE = os.path.join(_PKG, "targets", "target_pip_dry.py")
"""pip without site (its module doc says how): whatif's dry runs and every pip call of fix's, the install and uninstall included."""
OLD_PIP = ("no such option: --dry-run", "no such option: --report")
"""What a pip older than 22.2 (Ubuntu 22.04's venvs bring 22.0.2) answers to the dry run: no resolution report."""


def own_pip_folder() -> str | None:
    """The folder holding sparkdoctor's own `pip` package (its site-packages), found without importing pip: run from
    there by a target's interpreter (PIP_NO_SITE's --pip-from) when the target has no pip or one too old to dry-run."""
    import importlib.util

    spec = importlib.util.find_spec("pip")
    origin = spec.origin if spec is not None else None
    return os.path.dirname(os.path.dirname(origin)) if origin else None
def own_pip_misfit(version: str) -> str | None:
    """Why sparkdoctor's own pip cannot run on a target's Python `version` ("3.8"): its Requires-Python leaves that out
    (pip 26 needs 3.10; run by a 3.9 interpreter it stops on a TypeError of its own); None when it can, or when either
    is not known."""
    from importlib import metadata

    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    folder = own_pip_folder()
    dist = next(iter(metadata.distributions(name="pip", path=[folder])), None) if folder else None
    needs = (dist.metadata.get_all("Requires-Python") or [None])[0] if dist is not None else None
    try:
        if dist is not None and needs and not SpecifierSet(needs).contains(Version(version), prereleases=True):
            return f"sparkdoctor's own pip {dist.version} needs Python {needs}, not {version}"
    except (InvalidSpecifier, InvalidVersion):
        pass
    return None


TARGET, CAPABILITIES, GPU = "target_env", "capabilities", "gpu"

RAW: dict[str, tuple[proc.Running, dict[str, str]]] = {}
"""What started early: name -> (the running child, the whole environment it runs with)."""


def probes_folder() -> str:
    """probes/, in a wheel (sparkdoctor/_data/) or a checkout (as locations.data_dir)."""
    real = os.path.realpath(_PKG)  # locations.data_dir() starts from the resolved package folder
    for folder in (os.path.join(real, "_data", "probes"), os.path.join(os.path.dirname(real), "probes")):
        if os.path.isdir(folder):
            return folder
    return os.path.join(real, "_data", "probes")


def probe_script(name: str) -> str:
    return os.path.join(probes_folder(), name, "__main__.py")


def default_cache_dir() -> str:
    """sparkdoctor's cache folder as locations.cache_dir() names it (platformdirs' rule on Linux),
    without importing platformdirs; a test holds the two equal."""
    override = os.environ.get("SPARKDOCTOR_CACHE_DIR")
    if override:
        return override
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return os.path.join(xdg or os.path.expanduser("~/.cache"), "sparkdoctor")


def _per_python(python: str) -> str:
    return hashlib.sha256(os.fsencode(python)).hexdigest()[:16] + ".json"  # a path's bytes: any, not only UTF-8


def hash_cache_file(cache_root: str, python: str) -> str:
    """One hash cache per interpreter: two targets never share (or clobber) entries."""
    return os.path.join(cache_root, "hashes", _per_python(python))


def target_probe_args(python: str, cache_root: str | None, use_cache: bool, local: bool) -> tuple[list[str], str | None]:
    """The target probe's arguments, and a warning when its cache folder cannot be made."""
    budget = ["--hash-budget", str(HASH_BUDGET)]
    if cache_root is None:
        return budget, None
    path = hash_cache_file(cache_root, python)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    except OSError as exc:
        return budget, f"hash cache folder {os.path.dirname(path)}: {exc.strerror or exc}; hashing without a cache"
    # The parsed RECORDs (probes/target_env/targetenv_records.py), for a local interpreter only: a
    # container's caches travel in and out with each probe, and this one is the largest.
    records = ["--records", path + ".records"] if local else []
    return budget + ["--cache", path] + records + ([] if use_cache else ["--no-cache"]), None


def capabilities_cache_file(cache_root: str | None, python: str, use_cache: bool) -> str | None:
    """The capabilities probe's cache of derived facts, one per interpreter (None: no cache)."""
    if cache_root is None or not use_cache:
        return None
    return os.path.join(cache_root, "capabilities", _per_python(python))


def with_capabilities(args: list[str], python: str, cache_root: str | None, use_cache: bool) -> list[str]:
    """The target probe's arguments when it also answers for the capabilities probe (a local check:
    the target's interpreter starts once for both)."""
    return [*args, "--capabilities", capabilities_cache_file(cache_root, python, use_cache) or "-"]


def probe_env(cache_root: str | None, local: bool) -> dict[str, str] | None:
    """Where a local probe keeps its compiled modules (our cache dir, never the target or the probe
    folder); none for a container, whose file system does not hold our cache dir."""
    if cache_root is None or not local:
        return None
    return {"SPARKDOCTOR_PROBE_PYCACHE": os.path.join(cache_root, "pycache")}


SITE_XOPTION = "sparkdoctor_site"
"""probes/shared/probe_site.py's XOPTION (a test holds the two equal): the probe rebuilds the import path site would
have made, from files only. Its value is the folder holding probe_site.py (probes/shared/): a script outside probes/
(fix's target_dists.py and target_stat.py, target_pip_dry.py) imports it from there; a probe finds it beside
its own folder, so the bare option does for a fleet node's in-memory bundle."""
NO_SITE = ["-S", "-B"]
"""How the target's interpreter starts for anything sparkdoctor runs in it to read files (a probe, the liveness ping):
-S, so `site` never runs the target's .pth import lines, sitecustomize.py or usercustomize.py (a package's code: the
probes read files, they never run it); -B, no .pyc left in the probes folder or the target."""
NO_CWD = 'import sys\nif sys.path[:1] == [""]:\n    del sys.path[0]\n'  # starts each script run by `-c` in a container or `-`: the working folder (the image's, a node's) off sys.path


def script_argv(python: str, script: str, args: list[str], shared: str | None = None) -> list[str]:
    """How a target runs a script: NO_SITE, and -X SITE_XOPTION=SHARED so that the script puts on sys.path, from the
    files alone, what site would have (probe_site.py in `shared`: this installation's probes/shared/ unless the
    script runs elsewhere, as in a container). Every script, fix's pip install and uninstall included."""
    folder = shared if shared is not None else os.path.join(probes_folder(), "shared")
    return [python, *NO_SITE, "-X", f"{SITE_XOPTION}={folder}", script, *args]


def gpu_helper_argv(args: list[str]) -> list[str]:
    helper = os.path.join(_PKG, "collect", "gpu_query.py")
    return [sys.executable, "-I", "-B", helper, *args]


def gpu_helper_env() -> dict[str, str]:
    return {**os.environ, "PYTHONIOENCODING": "utf-8"}


def _given_python(args: list[str]) -> tuple[bool, str | None]:
    """(plain?, the --python interpreter as an absolute path, None when not given). Not plain: a venv folder,
    a name on PATH or an error, which the ordinary path resolves (or reports) after parsing."""
    python = None
    for i, a in enumerate(args):
        if a == "--python" and i + 1 < len(args):
            python = args[i + 1]
        elif a.startswith("--python="):
            python = a.split("=", 1)[1]
    if python is None:
        return True, None
    if os.sep not in python or not os.path.isfile(python) or not os.access(python, os.X_OK):
        return False, None
    return True, os.path.abspath(python)


def _default_python() -> str | None:
    """$VIRTUAL_ENV's interpreter, else this one (as targets.local.resolve_python_target); None for a $VIRTUAL_ENV with
    no interpreter, which the ordinary path refuses."""
    venv = os.environ.get("VIRTUAL_ENV")
    if venv:
        found = (os.path.join(venv, name) for name in ("bin/python", "bin/python3"))
        return next((path for path in found if os.path.exists(path)), None)
    return sys.executable


def plain_check_target(argv: list[str]) -> tuple[str, bool] | None:
    """(interpreter, use the cache?) for `sparkdoctor check ...` in the plain cases; None otherwise."""
    if len(argv) < 2 or argv[1] != "check":
        return None
    args = argv[2:]
    if any(a in ("--help", "-h") or a.startswith(("--facts", "--container")) for a in args):
        return None  # a snapshot, or a container (found through its CLI, after parsing)
    plain, python = _given_python(args)
    if not plain:
        return None
    chosen = python or _default_python()
    return (chosen, "--no-cache" not in args) if chosen else None


RECIPE_VALUE_OPTIONS = ("--python", "--matrix", "--fail-on", "--format", "-f", "--output", "-o", "--model")
"""`recipe check`'s options that take a value and leave the target and the recipe's env alone."""
EARLY_RECIPE_BYTES = 64 * 1024
"""A recipe is a few KB: a larger file is read by the ordinary path only (the head start stays cheap)."""
FLAGS = "vllm_flags"


def plain_recipe_check(argv: list[str]) -> tuple[str, list[str]] | None:
    """(the recipe argument, the other arguments) for `sparkdoctor recipe check RECIPE ...` in the plain cases;
    None for --set (it can change the env), --container, --image, --help and anything this does not know."""
    if argv[1:3] != ["recipe", "check"]:
        return None
    args, positional, i = argv[3:], [], 0
    while i < len(args):
        arg = args[i]
        if arg in RECIPE_VALUE_OPTIONS:
            i += 2
            continue
        if arg.startswith("--") and arg.split("=", 1)[0] in RECIPE_VALUE_OPTIONS:
            i += 1
            continue
        if arg.startswith("-"):
            return None
        positional.append(arg)
        i += 1
    return (positional[0], args) if len(positional) == 1 else None


def flags_probe_args(cache_root: str, python: str) -> list[str]:
    """The flags probe's arguments for a local interpreter: its per-file cache (recipe_check.start_vllm_flags)."""
    key = hashlib.sha256(python.encode()).hexdigest()[:16]
    return ["--cache", os.path.join(cache_root, FLAGS, key + ".json")]


RecipeReader = Callable[[str], "tuple[list[str], dict[str, str]] | None"]
"""A recipe's command line and env from its reference, or None when it should not be read this early (the entry
point passes one that reads through the recipes' own reader: sparkdoctor/launch.py; this base module imports no
pipeline)."""


def recipe_check_target(argv: list[str], read_recipe: RecipeReader) -> tuple[str, dict[str, str]] | None:
    """(interpreter, the recipe's env) for a plain `recipe check`, the recipe read through `read_recipe` (the same
    reader as the ordinary path, bounded: EARLY_RECIPE_BYTES); None otherwise. The interpreter is chosen as the
    ordinary path chooses it: --python, else the recipe command's venv, else $VIRTUAL_ENV's, else this one."""
    found = plain_recipe_check(argv)
    if found is None:
        return None
    ref, args = found
    plain, python = _given_python(args)
    if not plain:
        return None
    read = read_recipe(ref)
    if read is None:
        return None
    command_argv, env = read
    env = {k: v for k, v in env.items() if not loads_code(k)}  # as EnvTarget passes it
    if python is None:
        command = python_of_command(command_argv)
        if command is not None:
            python = os.path.abspath(command)
            if not os.path.isfile(python) or not os.access(python, os.X_OK):
                return None  # the ordinary path says why
    chosen = python or _default_python()
    return (chosen, env) if chosen else None


def start(argv: list[str], read_recipe: RecipeReader | None = None) -> None:
    """Start the probes a plain `check` or `recipe check` (given `read_recipe`) will wait for; any surprise just
    leaves them to the ordinary path."""
    root = default_cache_dir()
    recipe = recipe_check_target(argv, read_recipe) if read_recipe is not None else None
    if recipe is not None:
        python, env = recipe
        if _start_target(python, True, root, env):
            _start(FLAGS, script_argv(python, probe_script(FLAGS), flags_probe_args(root, python)), {**os.environ, **env})
            _start(GPU, gpu_helper_argv(["--with-health"]), gpu_helper_env())
        return
    chosen = plain_check_target(argv)
    if chosen is not None and _start_target(*chosen, root, {}):
        _start(GPU, gpu_helper_argv(["--with-health"]), gpu_helper_env())


def _start(name: str, argv: list[str], env: dict[str, str]) -> None:
    RAW[name] = (proc.start(argv, env=env), env)


def _start_target(python: str, use_cache: bool, root: str, env: dict[str, str]) -> bool:
    """The target probe, also answering for the capabilities probe; `env`: the recipe's, on top of ours. False when
    its cache folder cannot be made (the ordinary path reports it)."""
    args, warning = target_probe_args(python, root, use_cache, local=True)
    if warning is not None:
        return False
    args = with_capabilities(args, python, root, use_cache)
    _start(TARGET, script_argv(python, probe_script(TARGET), args), {**os.environ, **env, **(probe_env(root, local=True) or {})})
    return True


def take(name: str, argv: list[str], env: dict[str, str]) -> proc.Running | None:
    """The early child `name` if its command line is `argv` and its environment `env` (the whole of it); else
    None (and a mismatched one is cancelled)."""
    early = RAW.pop(name, None)
    if early is None:
        return None
    running, started_env = early
    if running.argv == argv and started_env == env:
        return running
    running.cancel()
    return None


def drop(name: str | None = None) -> None:
    """Cancel early children nobody will use (all, or one)."""
    for key in [name] if name else list(RAW):
        early = RAW.pop(key, None)
        if early is not None:
            early[0].cancel()


def python_of_command(argv: list[str]) -> Path | None:
    """The interpreter of the venv a command lives in (…/bin/vllm -> …/bin/python), if there is one. A relative path
    (`tools/bin/vllm`) is not followed: it names a file of wherever sparkdoctor runs, often the recipe's own cloned
    repository, whose `tools/bin/python` would run as the target's interpreter (a program of the recipe's choosing);
    the launch itself runs in a folder of its own, where that path names nothing."""
    if not argv:
        return None
    if os.sep in argv[0] and not os.path.isabs(argv[0]):
        return None
    exe = Path(argv[0])
    if os.sep not in argv[0]:  # a bare name: the one on PATH, as the launcher would run it
        found = shutil.which(argv[0])
        if not found:
            return None
        exe = Path(found)
    if exe.name.startswith("python") and exe.exists():
        return exe
    for name in ("python", "python3"):
        candidate = exe.parent / name
        if exe.parent != Path(".") and candidate.exists():
            return candidate
    return None
