"""What a Ray task runs on its node: the node's serving interpreter (or a container on it) reading one
probe script on stdin. Standard library only and self-contained: it is shipped to the nodes by value
(ray.cloudpickle.register_pickle_by_value), so a node needs Ray but never sparkdoctor.
"""

import math
import os
import subprocess
import sys
import threading
import time

MAX_OUTPUT = 16 << 20
MAX_ERROR = 1 << 16
# the most a probe's record may hold as Ray stores it (its stdout and stderr bytes, and the rest of the record): the
# caller reads no larger answer (transport._RayRunning), whatever a broken or hostile node's worker returns
MAX_ANSWER = MAX_OUTPUT + MAX_ERROR + (1 << 16)
MAX_WAIT = 1e6  # seconds: a longer wait overflows poll()'s milliseconds (--node-timeout 1e8: OverflowError, no answer)
# How a node's interpreter starts a probe bundle: -S, so site never runs the node's .pth import lines or
# sitecustomize.py; the probe rebuilds the path site would have made from files (probes/shared/probe_site.py, carried
# in the bundle). transport.py and bundle.MULTI start it so too; early.SITE_XOPTION is the option's name.
NODE_FLAGS = ["-S", "-B", "-X", "sparkdoctor_site"]


# `sh -c BOUNDED sh SECONDS COMMAND...` on a node or in a container there: COMMAND under coreutils' timeout (TERM at
# SECONDS, KILL 5 s later). Where there is no `timeout` (a bare container, a minimal image), POSIX sh alone does the
# same: COMMAND runs in the background on the script's stdin (fd 3: an asynchronous command's own stdin is /dev/null),
# and a watchdog that holds none of the session's pipes looks once a second; at SECONDS it sends TERM to the process
# group (sshd's session, or a container exec's own: the command, its children, this shell; the watchdog ignores TERM),
# KILL 5 s later, as `timeout` does to its own group. It ends by itself within a second of COMMAND's end; the shell
# exits with COMMAND's status.
BOUNDED = ('s=$1; shift; if command -v timeout >/dev/null 2>&1; then exec timeout -k 5 "$s" "$@"; fi; '
           'exec 3<&0; "$@" <&3 3<&- & c=$!; exec 3<&-; '
           '(trap "" TERM; i=0; while kill -0 "$c" 2>/dev/null; do if [ "$i" -ge "$s" ]; then kill -TERM 0; sleep 5; '
           'kill -KILL 0; fi; sleep 1; i=$((i+1)); done) </dev/null >/dev/null 2>&1 & wait "$c"')
# `sh -c IN_CONTAINER sh RUNTIME CONTAINER SECONDS BOUNDED COMMAND...`: COMMAND in the container under BOUNDED, run by the
# container's own sh (a process the container CLI started there outlives the CLI: `docker exec` passes no end on); in an
# image without sh (distroless) COMMAND as it is, as before
IN_CONTAINER = ('r=$1; c=$2; s=$3; b=$4; shift 4; if "$r" exec "$c" sh -c : </dev/null >/dev/null 2>&1; '
                'then exec "$r" exec -i "$c" sh -c "$b" sh "$s" "$@"; fi; exec "$r" exec -i "$c" "$@"')


def in_container(runtime, container, argv, timeout):
    """The node's command line that runs `argv` in `container` under BOUNDED (see IN_CONTAINER)."""
    seconds = str(int(math.ceil(min(timeout, MAX_WAIT))))
    return ["sh", "-c", IN_CONTAINER, "sh", runtime or "docker", container, seconds, BOUNDED] + list(argv)


def serving_python(python, container):
    """The interpreter to run: the one named, else (as `check` picks) $VIRTUAL_ENV's, else this worker's."""
    if python:
        return python
    if container:
        return "python3"
    venv = os.environ.get("VIRTUAL_ENV")
    if venv:
        for name in ("bin/python", "bin/python3"):
            if os.path.exists(os.path.join(venv, name)):
                return os.path.join(venv, name)
    return sys.executable


def run_probe(script, args, python, container, runtime, timeout):
    """{"returncode", "stdout", "stderr", "seconds", "timed_out", "start_error", "python"} of one probe run; stdout and
    stderr as the bytes kept of them (at most MAX_OUTPUT and MAX_ERROR), decoded by the caller once it has checked them."""
    chosen = serving_python(python, container)
    argv = [chosen] + NODE_FLAGS + ["-"] + list(args)
    if container:
        argv = in_container(runtime, container, argv, timeout)
    return _run(argv, script.encode("utf-8"), timeout, chosen)


def run_command(argv, timeout):
    """The same record for a command line run on the node (its container CLI inspecting the image)."""
    return _run(list(argv), b"", timeout, argv[0] if argv else "")


def _run(argv, stdin, timeout, chosen):
    started = time.monotonic()
    out = {"returncode": None, "stdout": b"", "stderr": b"", "timed_out": False, "start_error": None, "python": chosen}
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except OSError as exc:
        out["start_error"] = exc.strerror or str(exc)
        out["seconds"] = time.monotonic() - started
        return out
    # read as it comes, keeping each stream's last bytes only: communicate() held all of it in the worker's memory
    # (the unified memory a node serves from) until the limit, however much a runaway command printed
    kept: list = [[bytearray(), 0], [bytearray(), 0]]
    threads = [threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True),
               threading.Thread(target=_tail, args=(proc.stdout, kept[0], MAX_OUTPUT), daemon=True),
               threading.Thread(target=_tail, args=(proc.stderr, kept[1], MAX_ERROR), daemon=True)]
    for thread in threads:
        thread.start()
    try:
        out["returncode"] = proc.wait(timeout=min(timeout, MAX_WAIT))
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, 9)
        except OSError:
            proc.kill()
        proc.wait()
        out["timed_out"] = True
    for thread in threads[1:]:
        thread.join(5)  # a child that left the session may hold the pipe open: what was read by then is the answer
    out["stdout"] = _kept(kept[0])  # bytes: decoded text with replacement characters can be three times as long
    out["stderr"] = _kept(kept[1])
    out["seconds"] = time.monotonic() - started
    return out


def _feed(stream, data):
    try:
        stream.write(data)
        stream.close()
    except OSError:  # the command exited without reading it all
        pass


def _tail(stream, kept, most):
    """Read `stream` to its end, keeping its last `most` bytes in kept = [ring, start]: a bytearray grown to `most`
    bytes at the most, then written over in place, and where its oldest byte sits. Chunks kept in a deque (or a
    bytearray trimmed from its front) left holes in malloc's arenas when the pipe gave small reads: 539-704 MiB peak
    for 300 MB printed on a loaded machine. The ring and one 64 KiB buffer are all this allocates."""
    ring, buffer = kept[0], memoryview(bytearray(1 << 16))
    try:
        while True:
            size = stream.readinto1(buffer)
            if not size:
                break
            data = buffer[:size]
            if len(ring) < most:  # still filling: appended
                take = min(size, most - len(ring))
                ring += data[:take]
                data = data[take:]
            while len(data):
                start = kept[1]
                take = min(len(data), most - start)
                ring[start:start + take] = data[:take]
                kept[1] = (start + take) % most
                data = data[take:]
    except (OSError, ValueError):
        pass


def _kept(kept):
    """The bytes a _tail kept, oldest first (one copy of them)."""
    ring, start = kept
    return b"".join((memoryview(ring)[start:], memoryview(ring)[:start]))
