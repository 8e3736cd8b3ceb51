"""Launch the server a recipe describes, wait until it answers, hand it to the caller, and always take
it down again, whatever happened (return, error, timeout, Ctrl-C, SIGTERM).

Locally (LocalServer) the server runs in a session of its own, bound to 127.0.0.1 on a free port, its output in
`run_dir/server.log` scanned for known symptoms as it arrives; one that dies before GET /health (else
/v1/models) answers 200 fails at once with its last log line and the known problems it printed. Teardown: its
process group (serve/groups.py), then what it started outside the group (serve/reaper.py). A recipe that names a
container runs in it unless `local` (serve/container_launch.py: the same start, exited, teardown).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkdoctor import proc
from sparkdoctor.errors import BenchFailure
from sparkdoctor.files import write_text
from sparkdoctor.matrix.model import Matrix
from sparkdoctor.matrix.symptoms import HasSymptoms
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.recipes.vllm_config import launched_argv
from sparkdoctor.serve import container_launch, groups, readiness, reaper, registry
from sparkdoctor.serve.binding import LOCALHOST, exposed, free_port, listener_of, rebind
from sparkdoctor.serve.container_launch import ContainerLaunchError, ContainerServer
from sparkdoctor.serve.ending import died, evidence
from sparkdoctor.serve.logpump import LogPump
from sparkdoctor.serve.logscan import Hit, symptom_entries
from sparkdoctor.serve.memwatch import MemoryWatch
from sparkdoctor.serve.supervisor import start_time
from sparkdoctor.targets.local import runs_elsewhere
from sparkdoctor.text import one_line

POLL_S = 0.5
GRACE_S = 15.0
LOG_NAME = "server.log"
# vLLM binds its ZeroMQ unix sockets at VLLM_RPC_BASE_PATH/<uuid4> (default: the temp folder) and leaves them there.
IPC_ENV = "VLLM_RPC_BASE_PATH"
SOCKET_PATH_MAX = 107  # bytes of a unix socket's path (sun_path holds 108 with the final NUL)


class LaunchError(BenchFailure, RuntimeError):
    """The server could not be started, died, or never became ready. str() is one line: what happened, the
    last log line and the known problems matched; the attributes carry the rest."""

    code = "launch"

    def __init__(self, message: str, *, log_tail: Sequence[str] = (), findings: Sequence[Hit] = (),
                 log_path: Path | None = None, teardown: groups.Teardown | container_launch.ContainerTeardown | None = None,
                 returncode: int | None = None, not_ready: bool = False, pids: set[int] | None = None,
                 samples: Sequence[tuple[float, int | None, int | None]] = (), memory: dict[str, object] | None = None):
        super().__init__(one_line(message))
        self.returncode = returncode  # the server died with this status (None: it did not die)
        self.not_ready = not_ready  # it lived but never answered (the post-mortem's "hang")
        self.pids = pids  # the server's processes seen while it ran (None: not known, e.g. in a container)
        self.samples = list(samples)  # (seconds since launch, MemAvailable, the group's resident bytes) through the run
        self.memory = memory  # serve/memwatch.py's record: the high-water mark, the lowest MemAvailable, the series
        self.log_tail = list(log_tail)
        self.findings = list(findings)
        self.log_path = log_path
        self.teardown = teardown


@dataclass
class Server:
    """A running server. `findings` keeps growing while it runs (live log-scan hits); `teardown` is set
    once the launcher has taken the group down."""

    recipe: Recipe
    base_url: str
    model: str | None
    pid: int
    pgid: int
    port: int
    argv: list[str]
    log_path: Path
    findings: list[Hit]
    started_at: str  # UTC, ISO 8601
    ready_after_s: float = 0.0
    ready_path: str = ""
    teardown: groups.Teardown | container_launch.ContainerTeardown | None = None
    container: dict[str, Any] | None = None  # engine, name, id, image, image_id, fingerprint (None: not in a container)
    watch: MemoryWatch | None = None  # memory sampled from launch to teardown (local only: serve/memwatch.py)
    _child: LocalServer | ContainerServer | None = field(default=None, repr=False)
    _pump: LogPump | None = field(default=None, repr=False)
    _t0: float = field(default=0.0, repr=False)

    def memory(self) -> dict[str, object] | None:
        """The memory record of the run so far (serve/memwatch.py), None for a server in a container."""
        return self.watch.record() if self.watch else None

    def _died_error(self, message: str, pump: LogPump, returncode: int | None = None, not_ready: bool = False) -> LaunchError:
        watch = self.watch
        return LaunchError(message, log_tail=pump.tail_lines(), findings=pump.hits, log_path=self.log_path,
                           pids=(watch.processes() or None) if watch else None, samples=watch.points() if watch else (),
                           memory=self.memory(), returncode=returncode, not_ready=not_ready)

    def alive(self) -> bool:
        return self._child is not None and self._child.exited() is None

    def check_alive(self) -> None:
        """Raise LaunchError (with the log tail and findings) if the server has exited."""
        if self.alive():
            return
        code = self._child.exited() if self._child else None
        assert self._pump is not None  # launch() gives every Server its pump
        self._pump.join(2.0)
        raise self._died_error(died(self.recipe.name, code, time.monotonic() - self._t0, "while it was serving",
                                     self._pump, self.log_path), self._pump, returncode=code)

    def to_dict(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "model": self.model, "pid": self.pid, "pgid": self.pgid, "port": self.port,
                "argv": self.argv, "log_path": str(self.log_path), "started_at": self.started_at,
                "ready_after_s": round(self.ready_after_s, 3), "ready_path": self.ready_path,
                "findings": [h.to_dict() for h in self.findings],
                "teardown": self.teardown.to_dict() if self.teardown else None, "container": self.container}


def _resolve_argv(argv: list[str], python: str | Path | None) -> tuple[list[str], dict[str, str]]:
    """argv with its program found in the target environment's bin/ (when `python` names one), and the PATH
    that puts that bin/ first, as an activated venv would."""
    if python is None:
        return argv, {}
    bin_dir = Path(python).parent
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    if os.sep not in argv[0] and (bin_dir / argv[0]).exists():
        program = bin_dir / argv[0]
        # A venv copied or moved elsewhere keeps its scripts' first line: `bin/vllm` would run the old place's
        # interpreter (and its packages) while the run is stored with this one's toolchain.
        argv = [str(python), str(program), *argv[1:]] if runs_elsewhere(program, bin_dir) else [str(program), *argv[1:]]
    return argv, env


class LocalServer:
    """The recipe's command on this machine, in a session (so a process group) of its own."""

    def __init__(self, recipe: Recipe, port: int, run_dir: Path, python: str | Path | None, grace: float = GRACE_S):
        self.recipe, self.run_dir, self.grace = recipe, run_dir, grace
        self.argv, extra_env = _resolve_argv(rebind(launched_argv(recipe), LOCALHOST, port), python)
        self.bin_dir = Path(python).parent if python is not None else None
        self.env = {**os.environ, **extra_env, **recipe.env}
        self.env.setdefault("PYTHONUNBUFFERED", "1")
        self.running: proc.Running | None = None
        self.pid = self.pgid = 0
        self.info: dict[str, Any] | None = None
        self.record: Path | None = None
        self.ipc_dir: str | None = None
        self.token = secrets.token_hex(8)  # every process of the server carries it (serve/supervisor.py)
        self.reaping: str | None = None  # set once held: '' (a child subreaper) or why not (serve/reaper.py)
        self.floor: int | None = None  # the supervisor's start time: nothing of the server started before it

    def _private_ipc_dir(self) -> list[list[str]]:
        """A folder of its own for vLLM's IPC sockets (unless the recipe or the user names one): removed at teardown,
        or by the supervisor if sparkdoctor dies. Returns the supervisor's cleanup command for it."""
        if IPC_ENV in self.env:
            return []
        for parent in (tempfile.gettempdir(), "/tmp"):  # a deep TMPDIR would make the sockets' paths too long
            if len(os.fsencode(parent)) + len("/sd-ipc-12345678/") + 36 <= SOCKET_PATH_MAX:
                try:
                    self.ipc_dir = tempfile.mkdtemp(prefix="sd-ipc-", dir=parent)
                except OSError:
                    continue  # vLLM's own default then: it fails there too, and says so in its log
                self.env[IPC_ENV] = self.ipc_dir
                return [["rm", "-rf", "--", self.ipc_dir]]
        return []

    def describe(self) -> str:
        return " ".join(self.argv)

    def start(self, pump: LogPump, say: Callable[[str], None]) -> None:
        """The command under serve/supervisor.py (so it dies with sparkdoctor, SIGKILL included), recorded in the
        state folder (so a leftover is swept at the next launch)."""
        run_id = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.record = registry.record_path(run_id) or self.run_dir / "server-record.json"
        argv = registry.supervised(self.argv, self.record, self.token, self.grace, self._private_ipc_dir())
        self.reaping = reaper.hold(self.token)  # before the start: a daemon may leave the group at once
        self.running = proc.start(argv, env=self.env, cwd=str(self.run_dir))
        if self.running.popen is None:
            raise LaunchError(self._start_failed(self.running.start_error))
        popen = self.running.popen
        start = start_time(popen.pid)  # our unreaped child: the pid cannot be another process yet
        self.floor = int(start) if start and start.isdigit() else None
        pump.start(popen.stdout, popen.stderr)
        self.pgid = popen.pid  # the supervisor leads the group the server runs in
        doc = registry.wait_record(self.record, lambda: popen.poll() is None) or {}
        if doc.get("start_error"):
            raise LaunchError(self._start_failed(doc["start_error"]))
        server = doc.get("server")
        self.pid = int((server.get("pid") if isinstance(server, dict) else None) or popen.pid)

    def _start_failed(self, why: object) -> str:
        """One line: the program could not start; for a program looked up by name that is not there, where it
        was looked for (a --python venv without vLLM is the usual reason)."""
        line = f"{self.recipe.name}: {Path(self.argv[0]).name} could not start: {why}"
        if "No such file" in str(why) and os.sep not in self.argv[0]:
            where = f"in {self.bin_dir} (the --python environment) nor on PATH" if self.bin_dir else "on PATH"
            line += f": no `{self.argv[0]}` {where}"
        return line

    def exited(self) -> int | None:
        return self.running.popen.poll() if self.running and self.running.popen else -1

    def teardown(self, grace: float, pump: LogPump, say: Callable[[str], None]) -> groups.Teardown:
        try:
            report = self._teardown(grace, pump, say)
        except (KeyboardInterrupt, proc.Interrupted):
            raise  # nothing released: launch()'s forced teardown follows, and the orphans it stops must come here
        except BaseException:
            self._release()
            raise
        self._release()
        return report

    def _release(self) -> None:
        if self.reaping is not None:
            reaper.release(self.token)
        if self.ipc_dir:
            shutil.rmtree(self.ipc_dir, ignore_errors=True)

    def _teardown(self, grace: float, pump: LogPump, say: Callable[[str], None]) -> groups.Teardown:
        if self.running is None or self.running.popen is None or not self.pgid:
            return groups.Teardown(self.pgid)  # it never started: nothing to stop (and pgid 0 means our own group)
        say("stopping the server")
        report = groups.terminate(self.pgid, self.running.popen, grace=grace)
        if self.reaping == "":  # before the pump's join: a daemon may hold the output pipes open
            reaper.settle(report, self.token, self.floor, {self.running.popen.pid}, grace=min(grace, reaper.GRACE_S))
        elif self.reaping:
            report.note = self.reaping
        if pump.join(3.0):
            self.running.cancel()  # unregister from proc's registry (and kill, if the leader somehow lives)
        else:  # a process that left the group and could not be stopped holds the output pipes open
            self.running.forget()
        if report.clean:
            registry.forget(self.record)
        return report


def _child_for(recipe: Recipe, port: int, run_dir: Path, local: bool, python: str | Path | None,
               runtime: str | None, mounts: list[tuple[str, str, str]] | None, grace: float) -> LocalServer | ContainerServer:
    try:  # before anything starts: a command whose --host/--port cannot be placed never runs
        if not recipe.container or local:
            return LocalServer(recipe, port, run_dir, python, grace)
        return ContainerServer(recipe, port, runtime=runtime, mounts=mounts, grace=grace)
    except BenchFailure as exc:  # ContainerLaunchError, binding.RebindRefused: one line each
        raise LaunchError(f"{recipe.name}: {exc}") from None


@contextlib.contextmanager
def launch(recipe: Recipe, *, run_dir: Path, matrix: Matrix | Sequence[HasSymptoms] | None = None, ready_timeout: float, local: bool = False,
           progress: Callable[[str], None] | None = None, python: str | Path | None = None,
           grace: float = GRACE_S, runtime: str | None = None,
           mounts: list[tuple[str, str, str]] | None = None) -> Iterator[Server]:
    """Start `recipe`'s server, yield it once ready, and always take it down (its process group, or its
    container: stopped and removed).

    run_dir: where server.log (and launch.json) go; created if missing.
    matrix: a Matrix or a list of entries whose `symptoms` are scanned for (None: the shipped matrix).
    ready_timeout: seconds from start until GET /health (or /v1/models) must answer 200.
    local: run a recipe that names a container directly in the target environment.
    progress: called (in this thread) with a one-line status while it starts and stops.
    python: the target environment's interpreter; its bin/ is searched first for the command (local only).
    grace: seconds between SIGTERM and SIGKILL at teardown (a container's `stop -t`).
    runtime: the container CLI (docker, podman, a path; default $SPARKDOCTOR_CONTAINER_RUNTIME, else docker).
    mounts: extra (src, dst, ro|rw) mounts for a container, beside the local model folder.
    """
    say = progress or (lambda _msg: None)
    entries = symptom_entries(matrix)
    run_dir = Path(run_dir)
    log_path = run_dir / LOG_NAME
    port = free_port()
    child = _child_for(recipe, port, run_dir, local, python, runtime, mounts, grace)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        pump = LogPump(log_path, entries)
    except OSError as exc:
        raise LaunchError(f"{recipe.name}: cannot write the server log {log_path}: {exc.strerror or exc}") from None
    base_url = f"http://{LOCALHOST}:{port}"
    t0 = time.monotonic()
    started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    server = Server(recipe, base_url, recipe.served_model_name, 0, 0, port, [], log_path, pump.hits, started_at,
                    _child=child, _pump=pump, _t0=t0)
    error: BaseException | None = None
    try:
        if isinstance(child, LocalServer):
            pump.add(f"[sparkdoctor] launching {recipe.name}: {child.describe()}")
        else:
            pump.add(f"[sparkdoctor] launching {recipe.name} in container image {recipe.container}")
        _sweep(pump)
        try:
            child.start(pump, say)
        except ContainerLaunchError as exc:
            raise LaunchError(f"{recipe.name}: {exc}", log_path=log_path) from None
        server.pid, server.pgid, server.argv, server.container = child.pid, child.pgid, list(child.argv), child.info or None
        if isinstance(child, LocalServer) and server.pgid > 0:
            server.watch = MemoryWatch(server.pgid, server.pid, t0).start()
        _wait_ready(server, recipe, child, pump, ready_timeout, say, t0)
        with contextlib.suppress(OSError):  # launch.json: a record for people; the launch does not depend on it
            doc = {"launch_version": 1, **server.to_dict(), "recipe": server.recipe.to_dict()}
            write_text(run_dir / "launch.json", json.dumps(doc, indent=1) + "\n")
        yield server
    except BaseException as exc:  # Ctrl-C and SIGTERM (proc.Interrupted) included: the server goes down first
        error = exc
        raise
    finally:
        late = _take_down(server, child, grace, pump, say)
        assert server.teardown is not None  # _take_down always sets it
        pump.add(f"[sparkdoctor] teardown: {server.teardown.describe()}")
        pump.close()
        if isinstance(error, LaunchError):
            error.teardown = server.teardown
            if not server.teardown.clean:
                error.args = (f"{error.args[0]}; teardown: {server.teardown.describe()}",)
        elif error is None and not server.teardown.clean:
            raise LaunchError(f"{recipe.name}: could not take the server down: {server.teardown.describe()}",
                              log_tail=pump.tail_lines(), findings=server.findings, log_path=log_path,
                              teardown=server.teardown)
        if late is not None and not isinstance(error, (KeyboardInterrupt, proc.Interrupted)):  # else that one goes on
            raise late


def _take_down(server: Server, child: LocalServer | ContainerServer, grace: float, pump: LogPump,
               say: Callable[[str], None]) -> BaseException | None:
    """Stop the server (into server.teardown). A second Ctrl-C or SIGTERM meanwhile cuts the grace short, never the
    teardown: all of it gets SIGKILL at once, further signals held till then; that interrupt is returned, else None."""
    late: BaseException | None = None
    for seconds in (grace, 0.0):  # the second time round: forced, with signals held
        try:
            with proc.signals_held() if late else contextlib.nullcontext():
                if server.watch:
                    server.watch.stop()
                server.teardown = child.teardown(seconds, pump, say)
            return late
        except (KeyboardInterrupt, proc.Interrupted) as exc:  # a third one is held until the forced teardown was done
            late = exc
    return late


def _sweep(pump: LogPump) -> None:
    """Stop what a killed sparkdoctor's launches left running (its memory is what this launch needs)."""
    swept = registry.sweep()
    if swept:
        note = one_line(f"stopped {len(swept)} server(s) left by a sparkdoctor that was killed: {'; '.join(swept)}")
        pump.add(f"[sparkdoctor] {note}")
        sys.stderr.write(f"sparkdoctor: {note}\n")  # a lasting line, not only the progress status


def _wait_ready(server: Server, recipe: Recipe, child: LocalServer | ContainerServer, pump: LogPump, timeout: float,
                say: Callable[[str], None], t0: float) -> None:
    deadline, foreign = t0 + timeout, False
    while True:
        code = child.exited()
        if code is not None:
            pump.join(3.0)
            raise server._died_error(died(recipe.name, code, time.monotonic() - t0, "before it was ready", pump,
                                           server.log_path), pump, returncode=code)
        left = deadline - time.monotonic()
        path = readiness.ready(server.base_url, recipe.readiness_path, timeout=max(0.2, min(2.0, left)))
        # its processes: the group, and the server itself should it have left it (setsid)
        ours = [*groups.members(child.pgid), child.pid] if isinstance(child, LocalServer) else []
        if path and ours and listener_of(server.port, ours) is False:
            # another program took the port after it was chosen: its 200 is not this server's, which will fail to bind
            if not foreign:
                pump.add(f"[sparkdoctor] port {server.port} answers, but not from this server's processes: waiting")
            foreign, path = True, None
        # every process under the supervisor (a daemon's own session too), or a container's (--network host: ours too);
        # looked at while it starts too: a server binds its port long before it answers (vLLM: before loading the model)
        tree = groups.tree(child.pgid if isinstance(child, LocalServer) else child.pid)
        wide = exposed(server.port, [*ours, *tree]) if ours or tree else None
        if path and not wide and isinstance(child, ContainerServer):
            wide = child.exposed_inside(server.port, tree)  # processes this machine cannot read: the container is asked
        if wide:  # it would answer other machines while it is measured: --host ignored, or a side port on 0.0.0.0
            raise server._died_error(f"{recipe.name}: {wide}: not measured; {evidence(pump, server.log_path)}", pump)
        if path:
            server.ready_after_s = time.monotonic() - t0
            server.ready_path = path
            pump.add(f"[sparkdoctor] ready after {server.ready_after_s:.1f}s (GET {path} answered 200)")
            say(f"{recipe.name} ready after {server.ready_after_s:.0f}s")
            return
        if time.monotonic() >= deadline:
            asked = " and ".join(dict.fromkeys((recipe.readiness_path, readiness.FALLBACK)))
            raise server._died_error(f"{recipe.name}: not ready after {timeout:.0f}s (GET {asked} never answered 200); "
                                     f"{evidence(pump, server.log_path)}",
                                     pump, not_ready=True)
        known = f" [known problems so far: {', '.join(dict.fromkeys(h.entry_id for h in pump.hits))}]" if pump.hits else ""
        say(f"starting {recipe.name} ({time.monotonic() - t0:.0f}s){known}: {pump.last_line()[:100]}")
        time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
