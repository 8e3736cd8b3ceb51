"""Launch the server a recipe describes, wait until it answers, hand it to the caller, and always take
it down again.

The server runs in a session of its own (so its process group is its pid), bound to 127.0.0.1 on a free
port whatever the recipe says, with the recipe's environment, its output in `run_dir/server.log`, each
line scanned for the matrix's known symptoms as it arrives. Readiness is GET /health (else /v1/models)
answering 200 within `ready_timeout`; a server that dies first fails at once with its last log line and
the known problems it printed. On the way out, whatever happened (return, error, timeout, Ctrl-C,
SIGTERM), the whole group gets SIGTERM, then SIGKILL after a grace period, and /proc is checked for any
process left in the group.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from sparkdoctor import proc
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.serve import groups, readiness
from sparkdoctor.serve.binding import LOCALHOST, free_port, rebind
from sparkdoctor.serve.logpump import LogPump
from sparkdoctor.serve.logscan import Hit

POLL_S = 0.5
GRACE_S = 15.0
LOG_NAME = "server.log"


class LaunchError(RuntimeError):
    """The server could not be started, died, or never became ready. str() is one line: what happened, the
    last log line and the known problems matched; the attributes carry the rest."""

    def __init__(self, message: str, *, log_tail: Sequence[str] = (), findings: Sequence[Hit] = (),
                 log_path: Path | None = None, teardown: groups.Teardown | None = None):
        from sparkdoctor.text import one_line

        super().__init__(one_line(message))
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
    teardown: groups.Teardown | None = None
    _running: Any = field(default=None, repr=False)
    _pump: Any = field(default=None, repr=False)
    _t0: float = field(default=0.0, repr=False)

    def log_tail(self) -> list[str]:
        return self._pump.tail_lines() if self._pump else []

    def alive(self) -> bool:
        return self._running is not None and self._running.popen.poll() is None

    def check_alive(self) -> None:
        """Raise LaunchError (with the log tail and findings) if the server has exited."""
        if self.alive():
            return
        code = self._running.popen.returncode if self._running else None
        self._pump.join(2.0)
        raise LaunchError(_died(self.recipe.name, code, time.monotonic() - self._t0, "while it was serving", self._pump,
                                self.log_path), log_tail=self.log_tail(), findings=self.findings, log_path=self.log_path)

    def to_dict(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "model": self.model, "pid": self.pid, "pgid": self.pgid, "port": self.port,
                "argv": self.argv, "log_path": str(self.log_path), "started_at": self.started_at,
                "ready_after_s": round(self.ready_after_s, 3), "ready_path": self.ready_path,
                "findings": [h.to_dict() for h in self.findings],
                "teardown": self.teardown.to_dict() if self.teardown else None}


def symptom_entries(matrix: Any) -> list:
    """The matrix entries that list symptoms: a Matrix, a list of entries, or None (the shipped matrix)."""
    if matrix is None:
        from sparkdoctor.matrix import load

        matrix = load()
    entries = getattr(matrix, "entries", matrix)
    return [e for e in entries if getattr(e, "symptoms", None) and not getattr(e, "withdrawn", None)]


def _resolve_argv(argv: list[str], python: str | Path | None) -> tuple[list[str], dict[str, str]]:
    """argv with its program found in the target environment's bin/ (when `python` names one), and the PATH
    that puts that bin/ first, as an activated venv would."""
    env: dict[str, str] = {}
    if python is None:
        return argv, env
    bin_dir = Path(python).parent
    env["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    if os.sep not in argv[0] and (bin_dir / argv[0]).exists():
        argv = [str(bin_dir / argv[0]), *argv[1:]]
    return argv, env


def _died(name: str, code: int | None, after: float, when: str, pump: LogPump, log_path: Path) -> str:
    how = f"was killed by {proc.signal_name(-code)}" if code is not None and code < 0 else f"exited with status {code}"
    return f"{name}: the server {how} after {after:.1f}s {when}; {_evidence(pump, log_path)}"


def _evidence(pump: LogPump, log_path: Path) -> str:
    last = pump.last_line() or "(no output)"
    if len(last) > 300:
        last = last[:300] + "..."
    known = ", ".join(dict.fromkeys(h.entry_id for h in pump.hits))
    matched = f"known problems in its log: {known}" if known else "no known problem matched its log"
    return f"last log line: {last}; {matched} (log: {log_path})"


@contextlib.contextmanager
def launch(recipe: Recipe, *, run_dir: Path, matrix: Any = None, ready_timeout: float, local: bool = False,
           progress: Callable[[str], None] | None = None, python: str | Path | None = None,
           grace: float = GRACE_S) -> Iterator[Server]:
    """Start `recipe`'s server, yield it once ready, and always tear its process group down.

    run_dir: where server.log (and launch.json) go; created if missing.
    matrix: a Matrix or a list of entries whose `symptoms` are scanned for (None: the shipped matrix).
    ready_timeout: seconds from start until GET /health (or /v1/models) must answer 200.
    local: run a recipe that names a container directly in the target environment.
    progress: called with a one-line status while it starts.
    python: the target environment's interpreter; its bin/ is searched first for the command.
    grace: seconds between SIGTERM and SIGKILL at teardown.
    """
    say = progress or (lambda _msg: None)
    if recipe.container and not local:
        raise LaunchError(f"{recipe.name}: the recipe runs in container {recipe.container}; launching in a container is "
                          "not built yet: use --local to run its command in the target environment")
    entries = symptom_entries(matrix)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    log_path = run_dir / LOG_NAME
    port = free_port()
    argv, extra_env = _resolve_argv(rebind(recipe.argv, LOCALHOST, port), python)
    env = dict(os.environ)
    env.update(extra_env)
    env.update(recipe.env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    base_url = f"http://{LOCALHOST}:{port}"

    pump = LogPump(log_path, entries, on_hit=lambda h: say(f"known problem in the log: {h.entry_id}"))
    pump.add(f"[sparkdoctor] launching {recipe.name}: {' '.join(argv)}")
    t0 = time.monotonic()
    started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    running = proc.start(argv, env=env, cwd=str(run_dir))
    if running.popen is None:
        pump.close()
        raise LaunchError(f"{recipe.name}: {Path(argv[0]).name} could not start: {running.start_error}", log_path=log_path)
    pump.start(running.popen.stdout, running.popen.stderr)
    pid = running.popen.pid
    server = Server(recipe, base_url, recipe.served_model_name, pid, pid, port, argv, log_path, pump.hits, started_at,
                    _running=running, _pump=pump, _t0=t0)
    failed = False
    try:
        _wait_ready(server, recipe, running, pump, ready_timeout, say, t0)
        _write_launch(run_dir, server)
        yield server
    except BaseException:
        failed = True
        raise
    finally:
        server.teardown = _teardown(running, pid, pump, grace, say)
        if not server.teardown.clean:
            exc = sys.exc_info()[1]
            note = f"; teardown: {server.teardown.describe()}"
            if isinstance(exc, LaunchError):
                exc.args = (exc.args[0] + note,)
                exc.teardown = server.teardown
            elif not failed:
                raise LaunchError(f"{recipe.name}: could not take the server down: {server.teardown.describe()}",
                                  log_tail=server.log_tail(), findings=server.findings, log_path=log_path,
                                  teardown=server.teardown)
        elif isinstance(sys.exc_info()[1], LaunchError):
            sys.exc_info()[1].teardown = server.teardown


def _wait_ready(server: Server, recipe: Recipe, running: proc.Running, pump: LogPump, timeout: float,
                say: Callable[[str], None], t0: float) -> None:
    deadline = t0 + timeout
    while True:
        code = running.popen.poll()
        if code is not None:
            pump.join(3.0)
            raise LaunchError(_died(recipe.name, code, time.monotonic() - t0, "before it was ready", pump, server.log_path),
                              log_tail=pump.tail_lines(), findings=pump.hits, log_path=server.log_path)
        left = deadline - time.monotonic()
        path = readiness.ready(server.base_url, recipe.readiness_path, timeout=max(0.2, min(2.0, left)))
        if path:
            server.ready_after_s = time.monotonic() - t0
            server.ready_path = path
            pump.add(f"[sparkdoctor] ready after {server.ready_after_s:.1f}s (GET {path} answered 200)")
            say(f"{recipe.name} ready after {server.ready_after_s:.0f}s")
            return
        if time.monotonic() >= deadline:
            raise LaunchError(f"{recipe.name}: not ready after {timeout:.0f}s (GET {recipe.readiness_path} and "
                              f"{readiness.FALLBACK} never answered 200); {_evidence(pump, server.log_path)}",
                              log_tail=pump.tail_lines(), findings=pump.hits, log_path=server.log_path)
        say(f"starting {recipe.name} ({time.monotonic() - t0:.0f}s): {pump.last_line()[:100]}")
        time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))


def _teardown(running: proc.Running, pgid: int, pump: LogPump, grace: float, say: Callable[[str], None]) -> groups.Teardown:
    say("stopping the server")
    report = groups.terminate(pgid, running.popen, grace=grace)
    pump.join(3.0)
    running.cancel()  # unregister from proc's registry (and kill, if the leader somehow lives)
    pump.add(f"[sparkdoctor] teardown: {report.describe()}")
    pump.close()
    return report


def _write_launch(run_dir: Path, server: Server) -> None:
    from sparkdoctor.files import write_text

    doc = {"launch_version": 1, **server.to_dict(), "recipe": server.recipe.to_dict()}
    try:
        write_text(run_dir / "launch.json", json.dumps(doc, indent=1) + "\n")
    except OSError:
        pass  # a record for people; the launch itself does not depend on it
