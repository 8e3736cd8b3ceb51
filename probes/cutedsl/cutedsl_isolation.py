"""Every kernel in its own process: a compiler that segfaults or hangs on one kernel takes only that
kernel's result down.

The probe (cheap, never imports cutlass) starts one compile server: a fresh interpreter that imports
the DSL once (most of a compile's cost) and forks a child per kernel. Where forking is unsafe (the
import initialised the CUDA driver, which a forked child cannot use: 4.4/4.5 query the GPU at
import) or unavailable, the server runs a fresh `--kernel` interpreter per kernel instead.
"""

import json
import os
import sys
import time

from cutedsl_kernels import compile_one, import_failure
from probe_site import child_flags  # the compiles start as this probe did

# The compile server and its `--kernel` children are this probe again, in other modes.
PROBE_MAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")



def compile_with_server(kernels, arch, timeout):
    """{kernel: result} from a compile server given `timeout` seconds in all (its kernels compile at
    once); at the deadline the server and its children are killed, and what finished is kept."""
    import subprocess

    t0 = time.time()
    cmd = [sys.executable, "-B"] + child_flags() + [PROBE_MAIN, "--arch", arch, "--compile", ",".join(kernels), "--timeout", "%g" % timeout]
    try:
        # Its own session, so the deadline kills the forked compiles with it.
        server = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, errors="replace", start_new_session=True)
    except OSError as exc:
        return {k: {"kernel": k, "arch": arch, "status": "error", "detail": "could not start the compile: %s" % exc} for k in kernels}
    try:
        out, err = server.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        kill_group(server)
        out, err = server.communicate()
        timed_out = True
    seconds = time.time() - t0
    results = {}
    for kernel in kernels:
        result = interpret(kernel, arch, None if timed_out else server.returncode, out, err, seconds)
        if timed_out and result.get("status") == "error" and "without a result" in result.get("detail", ""):
            result = {"kernel": kernel, "arch": arch, "status": "error", "detail": "compile timed out after %gs" % timeout, "ms": round(seconds * 1000)}
        results[kernel] = result
    return results


def kill_group(child):
    import signal

    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        child.kill()


SCRATCH_PREFIX = "sparkdoctor-cutedsl-"


def scratch():
    """This process's scratch folder; those of servers ended by SIGKILL (Ctrl-C on `check`, or its deadline) go
    first (probes/shared/probe_scratch.py)."""
    from probe_scratch import scratch as named_scratch

    return named_scratch(SCRATCH_PREFIX)


def serve(kernels, arch, timeout, emit):
    """The compile server: import once, then each kernel in a forked child (or a fresh interpreter)."""
    import shutil

    os.environ["CUTE_DSL_ARCH"] = arch  # older DSLs read the arch from here when an op is built
    os.environ.setdefault("CUTE_DSL_NO_CACHE", "1")  # never answer from a previous compile
    base = scratch()
    os.environ["CUTE_DSL_CACHE_DIR"] = base  # some DSLs read it once, at import
    try:
        if fork_is_safe():
            t0 = time.time()
            failure = import_failure()
            if failure:
                for kernel in kernels:
                    emit({"kernel": kernel, "arch": arch, "status": "error", "detail": failure, "admissible_archs": None, "instruction": None, "ms": round((time.time() - t0) * 1000)})
                return
            if cuda_initialized() is False:
                compile_forked(kernels, arch, base, emit)
                return
        compile_execd(kernels, arch, timeout, emit)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def fork_is_safe():
    return hasattr(os, "fork") and not os.environ.get("SPARKDOCTOR_CUTEDSL_NO_FORK")


def cuda_initialized():
    """Whether this process has initialised the CUDA driver (a forked child could not use it then);
    None when it cannot tell. Without libcuda loaded it cannot have; with it, cuDeviceGetCount answers
    CUDA_ERROR_NOT_INITIALIZED (3) until cuInit, without initialising anything itself."""
    try:
        with open("/proc/self/maps") as fh:
            if "libcuda.so" not in fh.read():
                return False
    except OSError:
        return None
    try:
        import ctypes

        count = ctypes.c_int(0)
        return ctypes.CDLL("libcuda.so.1").cuDeviceGetCount(ctypes.byref(count)) != 3
    except (OSError, AttributeError):
        return None


def compile_forked(kernels, arch, base, emit):
    import warnings

    children = {}
    for kernel in kernels:
        dump_dir = os.path.join(base, kernel)
        os.mkdir(dump_dir)
        out_path = os.path.join(base, kernel + ".json")
        t0 = time.time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: an idle BLAS thread is no hazard here
            pid = os.fork()
        if pid == 0:  # the child: compile, leave the result in a file, exit without teardown
            code = 0
            try:
                os.dup2(2, 1)  # whatever the DSL prints must not pass for the server's output
                os.environ["CUTE_DSL_CACHE_DIR"] = dump_dir
                result = compile_one(kernel, arch, dump_dir)
                result["isolation"] = "fork"
                with open(out_path, "w") as fh:
                    fh.write(json.dumps(result))
            except BaseException:
                code = 70
            finally:
                os._exit(code)
        children[pid] = (kernel, out_path, t0)
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid not in children:
            continue
        kernel, out_path, t0 = children.pop(pid)
        try:
            with open(out_path) as fh:
                text = fh.read()
        except OSError:
            text = ""
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        result = interpret(kernel, arch, code, text, "", time.time() - t0)
        result.setdefault("isolation", "fork")
        emit(result)


def compile_execd(kernels, arch, timeout, emit):
    """Each kernel in a fresh interpreter (`--kernel`), all at once; in this server's process group,
    so the deadline that kills the server kills them too."""
    import subprocess
    import threading

    def one(kernel):
        t0 = time.time()
        cmd = [sys.executable, "-B"] + child_flags() + [PROBE_MAIN, "--arch", arch, "--kernel", kernel]
        try:
            child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, errors="replace")
            try:
                out, err = child.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                child.kill()
                child.communicate()
                emit({"kernel": kernel, "arch": arch, "status": "error", "detail": "compile timed out after %gs" % timeout, "ms": round((time.time() - t0) * 1000), "isolation": "exec"})
                return
            result = interpret(kernel, arch, child.returncode, out, err, time.time() - t0)
        except Exception as exc:  # e.g. no process could be started: evidence, not a traceback
            result = {"kernel": kernel, "arch": arch, "status": "error", "detail": "could not run the compile: %s: %s" % (type(exc).__name__, exc)}
        result["isolation"] = "exec"
        emit(result)

    threads = [threading.Thread(target=one, args=(k,)) for k in kernels]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def interpret(kernel, arch, returncode, stdout, stderr, seconds):
    """Turn a child's exit into one result: its JSON if it printed one, else crash / error."""
    for line in reversed((stdout or "").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and data.get("kernel") == kernel:
                return data
    tail = [ln for ln in (stderr or "").strip().splitlines() if ln.strip()]
    ms = round(seconds * 1000)
    if returncode is not None and returncode < 0:
        return {"kernel": kernel, "arch": arch, "status": "crash", "detail": "the CuTe DSL compiler was killed by %s%s" % (signal_name(-returncode), ": " + tail[-1][:300] if tail else ""), "ms": ms}
    return {"kernel": kernel, "arch": arch, "status": "error", "detail": "probe exited %s without a result%s" % (returncode, ": " + tail[-1][:300] if tail else ""), "ms": ms}


def signal_name(number):
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return "signal %d" % number
