"""A running container as the target: the serving stack inside it, probed through the container CLI.

Most Sparks serve from a container, so the stack to check lives there while the GPU, the driver and
the memory pressure belong to the host. A probe runs in the container as

    docker exec -i NAME PYTHON -S -B -c BOOTSTRAP   (stdin: a header line + the probe folder, zipped)

The bootstrap unpacks the probe into a fresh temporary folder inside the container, runs it with the
container's interpreter in its own session under a deadline of its own (killing the container CLI
does not stop what it started inside), and removes the folder: nothing is installed, nothing stays.
The host side goes through proc like every other child (timeout, process group, kill at the run's
deadline). Finding the container, its image and its interpreter lives in targets/container_inspect.py.

An interpreter that hangs before it reads the bootstrap never reaches that deadline, so every exec is bounded twice
more (exec_argv): in the container by its own sh under BOUNDED (where the image has a sh), and from this machine by
reap(), which stops what an exec that ran out of time left running (found by its SPARKDOCTOR_EXEC token) where this
machine sees the container's processes and may signal them (a local rootful runtime run as root, a rootless one).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import glob
import io
import json
import math
import re
import secrets
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from sparkdoctor import proc
from sparkdoctor.files import OutputError, write_text
from sparkdoctor.locations import data_dir
from sparkdoctor.targets import early
from sparkdoctor.targets.container_files import ContainerFiles
from sparkdoctor.targets.container_reap import TOKEN_ENV, reap, reaped
from sparkdoctor.targets.interface import FileTransport
from sparkdoctor.targets.local import Wrapped

# The longest a probe may run inside the container when its caller gives no timeout at start
# (start_script): the host stops waiting earlier; this bounds what is left behind in the container.
DEFAULT_INSIDE_TIMEOUT = 120.0
MAX_CACHE_BYTES = 5 * 1024 * 1024  # a bigger cache file is not carried (base64 on stderr must fit proc's 8 MiB head)
TMP = "@@SPARKDOCTOR_TMP@@"  # stands for the probe's temporary folder in the container, in its arguments and flags
INSIDE_MARGIN = 2.0  # the host gives up first; the container's own deadline follows shortly after
MARKER = "sparkdoctor-probe:"
STOPPED_CODES = (137, 143)  # the CLI's 128 + SIGKILL / SIGTERM: what an exec says when its container stops under it
INSPECT_TIMEOUT = 10.0  # seconds for asking the runtime whether the container still runs
# `sh -c BOUNDED sh SECONDS COMMAND...`: COMMAND under coreutils' timeout, else a POSIX-sh watchdog (the same text as
# fleet/on_node.BOUNDED, which is shipped to nodes without sparkdoctor; a test holds the two equal)
BOUNDED = ('s=$1; shift; if command -v timeout >/dev/null 2>&1; then exec timeout -k 5 "$s" "$@"; fi; '
           'exec 3<&0; "$@" <&3 3<&- & c=$!; exec 3<&-; '
           '(trap "" TERM; i=0; while kill -0 "$c" 2>/dev/null; do if [ "$i" -ge "$s" ]; then kill -TERM 0; sleep 5; '
           'kill -KILL 0; fi; sleep 1; i=$((i+1)); done) </dev/null >/dev/null 2>&1 & wait "$c"')

# Runs under the container's interpreter (Python 3.6+, standard library only).
BOOTSTRAP = r"""
import base64, io, json, os, shutil, signal, subprocess, sys, tempfile, zipfile
head = json.loads(sys.stdin.readline())
blob = base64.b64decode(sys.stdin.read())
tmp = tempfile.mkdtemp(prefix="sparkdoctor-probe-")
child = None
def stop(signum=None, frame=None):
    if child is not None:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            pass
    shutil.rmtree(tmp, ignore_errors=True)
    if signum is not None:
        os._exit(128 + signum)
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(s, stop)
code = 0
try:
    zipfile.ZipFile(io.BytesIO(blob)).extractall(tmp)
    os.mkdir(os.path.join(tmp, "carried"))
    for key, data in head["files"].items():
        with open(os.path.join(tmp, "carried", key), "wb") as fh:
            fh.write(base64.b64decode(data))
    env = dict(os.environ)
    env.update(head["env"])
    args = [a.replace(head["tmp"], tmp) for a in head["args"]]
    flags = [a.replace(head["tmp"], tmp) for a in head.get("flags", ["-B"])]
    argv = [sys.executable] + flags + [os.path.join(tmp, head["script"])] + args
    child = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        code = child.wait(timeout=head["timeout"])
    except subprocess.TimeoutExpired:
        stop()
        child.wait()
        sys.stderr.write("\n%s timeout %s\n" % (head["marker"], head["timeout"]))
        code = 124
    else:
        if code < 0:
            sys.stderr.write("\n%s signal %d\n" % (head["marker"], -code))
            code = 128 - code
    for name in sorted(os.listdir(os.path.join(tmp, "carried"))):
        path = os.path.join(tmp, "carried", name)
        if name.split(".")[0] in head["back"] and os.path.isfile(path) and os.path.getsize(path) <= head["max"]:
            with open(path, "rb") as fh:
                sys.stderr.write("\n%s file %s %s\n" % (head["marker"], name, base64.b64encode(fh.read()).decode()))
finally:
    stop()
sys.stderr.flush()
sys.exit(code)
"""


SIBLING = re.compile(r"""os\.path\.join\(os\.path\.dirname\(HERE\), ["']([A-Za-z0-9_]+)["']\)""")


def sibling_folders(folder: Path) -> list[Path]:
    """probes/shared/ and every probes/<name>/ the probe's __main__.py names as `os.path.join(os.path.dirname(HERE),
    "<name>")`: what it imports from beside itself."""
    entry = folder / "__main__.py"
    names = SIBLING.findall(entry.read_text(encoding="utf-8")) if entry.is_file() else []
    return [folder.parent / name for name in dict.fromkeys(["shared", *names])
            if name != folder.name and (folder.parent / name).is_dir()]


@functools.lru_cache(maxsize=16)
def probe_payload(script: str) -> tuple[str, str]:
    """(the script's path inside the payload, base64 of a zip holding what it needs): a probe folder
    (probes/<name>/) travels with probes/shared/ and the sibling folders its entry script puts on sys.path
    (vllm_flags reads capabilities/); any other script (fix's, whatif's) travels with shared/probe_site.py and the
    probe_io.py it reads with: either way probe_site.py is in the payload's shared/ (start_script names that folder)."""
    path = Path(script)
    root = data_dir("probes")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        try:
            inside = path.resolve().relative_to(root.resolve())
        except ValueError:
            inside = None
        if inside is not None and len(inside.parts) >= 2:
            for folder in (root / inside.parts[0], *sibling_folders(root / inside.parts[0])):
                for file in sorted(folder.rglob("*")):
                    if file.is_file() and "__pycache__" not in file.parts:
                        zf.write(file, file.relative_to(root).as_posix())
            entry = inside.as_posix()
        else:
            zf.write(path, path.name)
            for helper in ("probe_site.py", "probe_io.py"):  # it starts with -S too: the path rebuilt from files
                zf.write(root / "shared" / helper, "shared/" + helper)
            entry = path.name
    return entry, base64.b64encode(buf.getvalue()).decode("ascii")


@dataclass
class ContainerTarget:
    """A running container, reached through its container CLI (docker or podman)."""

    engine: list[str]  # argv prefix of the container CLI, e.g. ["docker"]
    name: str
    python: str  # the interpreter inside the container
    chosen_by: str  # "--container-python", "vLLM found in the container", "the container's PATH"
    info: dict[str, object] = field(default_factory=dict)  # id, image, image_id, fingerprint (container_inspect)
    kind: str = "container"
    shares_files: bool = False  # paths it reports are the container's: host caches and host tools do not apply
    cache_root: Path | None = None  # host folder of this container's probe caches, carried in and out per run
    shell: bool = False  # the container has a sh: every exec runs under BOUNDED there (container_inspect finds out)

    def describe(self) -> dict[str, object]:
        return {"kind": self.kind, "python": self.python, "chosen_by": self.chosen_by, "container": self.name,
                "engine": Path(self.engine[0]).name}

    def exec_argv(self, argv: list[str], stdin: bool = False, seconds: float | None = None, token: str | None = None,
                  env: tuple[str, ...] = ()) -> list[str]:
        """`RUNTIME exec` of argv in the container: under BOUNDED at `seconds` where it has a sh, with `token` (for
        reap()) and each `env` (K=V) in its environment."""
        inside = ["sh", "-c", BOUNDED, "sh", str(math.ceil(min(seconds, proc.MAX_WAIT))), *argv] if seconds is not None and self.shell else argv
        pairs = [*([f"{TOKEN_ENV}={token}"] if token else []), *env]
        return [*self.engine, "exec", *(["-i"] if stdin else []), *[a for kv in pairs for a in ("-e", kv)], self.name, *inside]

    def run_command(self, argv: list[str], timeout: float, input: str | None = None,
                    env: tuple[str, ...] = ()) -> proc.ProcResult:
        """A command inside the container (a tool such as ptxas; no shell unless argv names one; `env`: K=V pairs),
        bounded there and here: what it left running when it ran out of time is reaped."""
        token = secrets.token_hex(16)
        res = proc.run(self.exec_argv(argv, input is not None, timeout + INSIDE_MARGIN, token, env), timeout=timeout, input=input)
        return self.stopped_under(reaped(res, token))

    def stopped_under(self, res: proc.ProcResult) -> proc.ProcResult:
        """`res` said in plain words when the container stopped while it ran (`docker stop`, its main process ended):
        the CLI then exits 137 or 143 (128 + SIGKILL or SIGTERM) with no output, which read as "docker exited 137: no
        output". The runtime is asked whether the container still runs; one that runs keeps the exit as it was (the
        process itself was killed inside it, the bootstrap says how)."""
        if res.returncode not in STOPPED_CODES or res.timed_out or res.stopped:
            return res
        state = proc.run([*self.engine, "inspect", "--format", "{{.State.Running}}", self.name], timeout=INSPECT_TIMEOUT)
        if state.ok and state.stdout.strip() == "true":
            return res
        cli = Path(self.engine[0]).name
        now = "it is not running now" if state.ok else f"{cli} inspect: {state.describe_failure()}"
        return replace(res, returncode=None, ended=f"the container {self.name} stopped while it was being probed ({cli} "
                                                   f"exec exited {res.returncode}; {now}): start it and run again")

    def start_script(self, script: Path, args: list[str], env: dict[str, str] | None = None,
                     inside_timeout: float | None = None) -> proc.Running:
        entry, blob = probe_payload(str(script))
        limit = inside_timeout or DEFAULT_INSIDE_TIMEOUT
        left = proc.time_left()
        if left is not None:
            limit = min(limit, left)
        args, files, back = self._carry(list(args))
        # as on the host: no site, the path rebuilt from files by the payload's shared/probe_site.py
        flags = early.script_argv("python", entry, [], shared=f"{TMP}/shared")[1:-1]
        head = {"script": entry, "args": args, "env": dict(env or {}), "timeout": round(limit + INSIDE_MARGIN, 1),
                "marker": MARKER, "tmp": TMP, "files": files, "back": sorted(back), "max": MAX_CACHE_BYTES,
                "flags": flags}
        token = secrets.token_hex(16)
        argv = self.exec_argv([self.python, *early.NO_SITE, "-c", early.NO_CWD + BOOTSTRAP], stdin=True,  # the bootstrap: stdlib only
                              seconds=limit + 3 * INSIDE_MARGIN, token=token)  # after the bootstrap's own deadline
        return _InContainer(proc.start(argv, input=json.dumps(head) + "\n" + blob), back, token, self)

    def _carry(self, args: list[str]) -> tuple[list[str], dict[str, str], dict[str, Path]]:
        """Arguments naming a file under cache_root (a probe's cache) point at a copy in the probe's
        folder inside the container; the file goes in with the probe and comes back after it."""
        files: dict[str, str] = {}
        back: dict[str, Path] = {}
        if self.cache_root is None:
            return args, files, back
        root = self.cache_root.resolve()
        for i, arg in enumerate(args):
            path = Path(arg)
            if not path.is_absolute() or root not in path.resolve().parents:
                continue
            key = f"c{len(back)}"
            back[key] = path
            args[i] = f"{TMP}/carried/{key}"
            # the file and its sidecars (FILE.files beside a hash cache FILE)
            siblings = sorted(path.parent.glob(f"{glob.escape(path.name)}.*")) if path.parent.is_dir() else []
            for one in [path, *siblings]:
                with contextlib.suppress(OSError):  # an unreadable cache is a cold run, never a failure
                    if one.is_file() and one.stat().st_size <= MAX_CACHE_BYTES:
                        files[key + one.name[len(path.name):]] = base64.b64encode(one.read_bytes()).decode("ascii")
        return args, files, back

    def run_script(self, script: Path, args: list[str], timeout: float, env: dict[str, str] | None = None) -> proc.ProcResult:
        return self.start_script(script, args, env, inside_timeout=timeout).result(timeout)

    def file_transport(self) -> FileTransport:
        return ContainerFiles(self)


class _InContainer(Wrapped):
    """A probe's Running whose result speaks like a local process's: the bootstrap's own deadline is a
    timeout, a probe killed by a signal has a negative return code (not the CLI's 128+N)."""

    def __init__(self, inner: proc.Running, back: dict[str, Path], token: str, target: ContainerTarget):
        super().__init__(inner)
        self.back, self.token, self.target = back, token, target

    def result(self, timeout: float) -> proc.ProcResult:
        return self.target.stopped_under(translate(reaped(self.inner.result(timeout), self.token), self.back))

    def cancel(self) -> None:
        self.inner.cancel()
        reap(self.token)


def translate(res: proc.ProcResult, back: dict[str, Path] | None = None) -> proc.ProcResult:
    kept, note = [], None
    for line in res.stderr.splitlines():
        if not line.startswith(MARKER):
            kept.append(line)
            continue
        words = line[len(MARKER):].split()
        if words[:1] == ["file"] and len(words) == 3 and back and words[1].split(".")[0] in back:
            key, _, suffix = words[1].partition(".")
            _bring_back(back[key], suffix, words[2])
        else:
            note = words
    stderr = "\n".join(kept).rstrip("\n")
    if not note:
        return replace(res, stderr=stderr) if len(kept) != len(res.stderr.splitlines()) else res
    if note[0] == "signal" and len(note) > 1 and note[1].isdigit():
        return replace(res, returncode=-int(note[1]), stderr=stderr)
    if note[0] == "timeout":
        return replace(res, returncode=None, timed_out=True, stderr=stderr)
    return replace(res, stderr=stderr)


def _bring_back(home: Path, suffix: str, data: str) -> None:
    """A probe's cache file (JSON text) or its sidecar (HOME.SUFFIX), back from the container: written atomically; a
    bad copy, or a name that is not a sidecar's (a line of the image's own that looks like the bootstrap's), is
    dropped."""
    # UnicodeDecodeError and binascii.Error are ValueErrors; a bad copy costs the next run its cache, nothing else
    with contextlib.suppress(ValueError, OSError, OutputError):
        path = home.with_name(f"{home.name}.{suffix}") if suffix else home  # ValueError: a "/" in it
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, base64.b64decode(data, validate=True).decode("utf-8"))
