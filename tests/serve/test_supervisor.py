"""A launched server does not outlive sparkdoctor (issue 20, item 13): SIGKILL of `sparkdoctor bench` takes the
server's group down through the supervisor; a launch from a thread that ends is not mistaken for sparkdoctor's
death; the server gets SIGTERM when its supervisor is SIGKILLed, and what survives that (the supervisor and
sparkdoctor both SIGKILLed: the server's children) is swept at the next launch, by identity
(pid + start time, or the launch's token), never by a bare pid that may have been recycled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sparkdoctor.serve import registry
from sparkdoctor.serve.groups import members
from sparkdoctor.serve.supervisor import start_time

REPO = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).resolve().parent / "fake_server.py"
SSE = REPO / "tests" / "bench" / "sse_server.py"
LIMIT_S = 60.0  # generous: the supervisor polls every 0.5 s and gives SIGTERM a 2 s grace here


def wait_for(predicate, limit: float = LIMIT_S, what: str = "") -> None:
    until = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < until, f"not within {limit:.0f}s: {what}"
        time.sleep(0.1)


def records(state: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((state / "servers").glob("*.json"))]


def a_local_record(state: Path) -> dict:
    wait_for(lambda: any("server" in r for r in records(state)), what="the supervisor's launch record")
    return next(r for r in records(state) if "server" in r)


# ---- the real CLI, SIGKILLed -------------------------------------------------------------------------------------
def test_sigkill_of_sparkdoctor_bench_takes_the_server_group_down(tmp_path):
    state = tmp_path / "state"
    argv = [sys.executable, str(SSE), "--host", "0.0.0.0", "--port", "8000", "--delay", "0.05"]
    recipe = tmp_path / "slow.toml"
    recipe.write_text(f'schema = 1\nname = "slow"\nmodel = "tiny"\nserved_model_name = "tiny"\n'
                      f'command = {json.dumps(argv)}\nreadiness_path = "/v1/models"\n[env]\nPYTHONPATH = "{REPO}"\n')
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPARKDOCTOR_STATE_DIR": str(state),
           "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    bench = subprocess.Popen([sys.executable, "-m", "sparkdoctor", "bench", str(recipe), "--rounds", "50", "--max-tokens",
                              "400", "--warmup", "0", "--concurrency", "1", "--ledger", str(tmp_path / "l.sqlite")],
                             cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        rec = a_local_record(state)
        pgid, server = rec["pgid"], rec["server"]["pid"]
        assert server in members(pgid) and rec["owner"]["pid"] == bench.pid
        wait_for(lambda: _bench_is_measuring(tmp_path), what="the bench measuring")
        bench.send_signal(signal.SIGKILL)
        bench.wait(timeout=30)
        wait_for(lambda: members(pgid) == [], what=f"server group {pgid} gone after SIGKILL of sparkdoctor")
    finally:
        if bench.poll() is None:
            bench.kill()
    # the record outlived both (the supervisor never deletes it); the next launch's sweep finds nothing alive and drops it
    assert registry.sweep(state / "servers") == [] and records(state) == []


def _bench_is_measuring(tmp_path: Path) -> bool:
    logs = list(tmp_path.rglob("server.log"))
    return any("ready after" in p.read_text(errors="replace") for p in logs)


# ---- the launcher in a driver process -----------------------------------------------------------------------------
DRIVER = """
import sys, threading, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.serve import launch
r = Recipe(name="fake", source_path="t", format="sparkdoctor", argv=[sys.executable, {fake!r}, {mode!r}])
cm = launch(r, run_dir=Path({run_dir!r}), matrix=[], ready_timeout=30, grace=2)
if {in_thread!r}:
    box = []
    t = threading.Thread(target=lambda: box.append(cm.__enter__()))  # started from a thread that then ends
    t.start(); t.join()
    s = box[0]
else:
    s = cm.__enter__()
print(s.pgid, s.pid, flush=True)
sys.stdin.readline()  # the test says when to leave
cm.__exit__(None, None, None)
print("left", flush=True)
time.sleep(120)
"""


def driver(tmp_path: Path, mode: str = "ready", in_thread: bool = False) -> tuple[subprocess.Popen, int, int]:
    script = DRIVER.format(repo=str(REPO), fake=str(FAKE), mode=mode, run_dir=str(tmp_path), in_thread=in_thread)
    p = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    assert line, p.stderr.read()
    pgid, pid = map(int, line.split())
    return p, pgid, pid


def test_sigkill_of_the_launching_process_takes_the_server_and_its_worker_down(tmp_path):
    p, pgid, pid = driver(tmp_path)
    try:
        assert len(members(pgid)) == 3 and pid in members(pgid)  # supervisor, server, the server's worker child
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        wait_for(lambda: members(pgid) == [], what="the group gone")
    finally:
        p.kill()


def test_the_end_of_the_launching_thread_is_not_the_end_of_sparkdoctor(tmp_path):
    """PR_SET_PDEATHSIG fires when the parent THREAD ends: the supervisor must check, not obey."""
    p, pgid, pid = driver(tmp_path, in_thread=True)
    try:
        time.sleep(2.5)  # several of the supervisor's polls after the signal
        assert pid in members(pgid) and pgid in members(pgid), "the server went down while sparkdoctor lived"
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "left"
        assert members(pgid) == []
    finally:
        p.kill()
        p.wait(timeout=30)


def test_what_outlives_its_supervisor_is_swept_at_the_next_launch(tmp_path, monkeypatch):
    state = Path(os.environ["SPARKDOCTOR_STATE_DIR"])
    p, pgid, pid = driver(tmp_path)
    try:
        rec = a_local_record(state)
        assert rec["server"]["pid"] == pid
        os.kill(pgid, signal.SIGKILL)  # the supervisor first, then sparkdoctor
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        # the server itself gets SIGTERM from its parent-death signal; its worker child is orphaned to init
        wait_for(lambda: pid not in members(pgid), what="the server stopped by its parent-death signal")
        left = members(pgid)
        assert len(left) == 1, "with its supervisor and sparkdoctor SIGKILLed the worker is orphaned: the sweep's case"
        ipc = [Path(argv[3]) for argv in rec["cleanup"] if argv[:3] == ["rm", "-rf", "--"]]
        assert len(ipc) == 1 and ipc[0].is_dir(), rec["cleanup"]  # the private socket folder nobody removed
        swept = registry.sweep(state / "servers", grace=2)
        assert len(swept) == 1 and f"process group {pgid}" in swept[0]
        wait_for(lambda: members(pgid) == [], what="the orphaned group swept")  # LIMIT_S: a safety net, not 10 s
        assert records(state) == []
        assert not ipc[0].exists(), "the dead supervisor's socket folder was left in the temporary folder"
    finally:
        p.kill()
        for q in members(pgid):
            os.kill(q, signal.SIGKILL)


def test_the_sweep_never_kills_a_pid_that_is_not_the_recorded_process(tmp_path):
    folder = tmp_path / "servers"
    folder.mkdir()
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)  # an unrelated process of the same user
    dead_owner = {"pid": 2**22 + 7, "start": "1", "boot": registry.boot_id()}
    try:
        wait_for(lambda: start_time(other.pid) is not None, what="sleep started")
        real = start_time(other.pid)
        recycled = {"record_version": 1, "kind": "local", "token": "t0k", "pgid": other.pid, "owner": dead_owner,
                    "supervisor": {"pid": other.pid, "start": str(int(real) - 5)},  # same pid, an earlier process
                    "server": {"pid": other.pid, "start": str(int(real) - 3)}}
        # a record's cleanup is never run: of it only a private socket folder (sd-ipc-*) of this user is removed
        keep = [tmp_path / "precious", tmp_path / "sd-ipc-link"]
        keep[0].mkdir()
        keep[1].symlink_to(keep[0])
        recycled["cleanup"] = [["rm", "-rf", "--", str(p)] for p in keep] + [["sh", "-c", f"rm -rf {keep[0]}"]]
        (folder / "recycled.json").write_text(json.dumps(recycled))
        assert registry.sweep(folder, grace=1) == []
        assert all(p.exists() for p in keep)
        assert other.poll() is None, "a recycled pid was killed"
        assert not (folder / "recycled.json").exists()  # nothing of that launch is alive: the record goes
        # the positive control: the same process, recorded with its own start time, IS swept
        mine = {**recycled, "supervisor": {"pid": other.pid, "start": real}, "server": {"pid": other.pid, "start": real}}
        (folder / "mine.json").write_text(json.dumps(mine))
        assert len(registry.sweep(folder, grace=1)) == 1
        other.wait(timeout=10)
        assert not (folder / "mine.json").exists()
    finally:
        other.kill()


def test_a_live_owners_launch_is_left_alone_and_a_damaged_record_only_when_stale(tmp_path):
    folder = tmp_path / "servers"
    folder.mkdir()
    other = subprocess.Popen(["sleep", "60"])
    try:
        wait_for(lambda: start_time(other.pid) is not None)
        doc = {"kind": "local", "token": "x", "pgid": other.pid, "owner": registry.me(),
               "supervisor": {"pid": other.pid, "start": start_time(other.pid)}}
        (folder / "live.json").write_text(json.dumps(doc))
        (folder / "damaged.json").write_text("{not json")
        assert registry.sweep(folder, grace=1) == [] and other.poll() is None
        assert (folder / "live.json").exists() and (folder / "damaged.json").exists()
        old = time.time() - 3600
        os.utime(folder / "damaged.json", (old, old))
        registry.sweep(folder, grace=1)
        assert not (folder / "damaged.json").exists() and (folder / "live.json").exists()
    finally:
        other.kill()


FAKE_CLI = """#!{python}
import json, sys
db = {db!r}
state = json.load(open(db))
args = sys.argv[1:]
if args[:2] == ["container", "inspect"]:
    c = state.get(args[2])
    if c is None:
        print("Error: No such container: " + args[2], file=sys.stderr); sys.exit(1)
    print(json.dumps([{{"Name": "/" + args[2], "Config": {{"Labels": c}}}}]))
elif args[:2] == ["rm", "-f"]:
    state.pop(args[-1], None); json.dump(state, open(db, "w"))
"""


def test_a_dead_owners_container_is_removed_and_a_namesake_is_not(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")  # this fake docker is the one on PATH
    db = tmp_path / "containers.json"
    db.write_text(json.dumps({"sparkdoctor-a": {"sparkdoctor.owner": "h/b/1/2"},
                              "sparkdoctor-b": {"sparkdoctor.owner": "someone else's"}}))
    cli = tmp_path / "docker"
    cli.write_text(FAKE_CLI.format(python=sys.executable, db=str(db)))
    cli.chmod(0o755)
    folder = tmp_path / "servers"
    folder.mkdir()
    dead = {"pid": 2**22 + 9, "start": "1", "boot": registry.boot_id()}
    for name in ("sparkdoctor-a", "sparkdoctor-b", "sparkdoctor-gone"):
        (folder / f"{name}.json").write_text(json.dumps({"kind": "container", "owner": dead, "cli": [str(cli)],
                                                         "name": name, "owner_label": "h/b/1/2"}))
    assert registry.sweep(folder) == ["container sparkdoctor-a"]
    assert json.loads(db.read_text()) == {"sparkdoctor-b": {"sparkdoctor.owner": "someone else's"}}
    assert list(folder.iterdir()) == []


def test_a_container_record_naming_another_program_never_runs_it(tmp_path, monkeypatch):
    """The sweep ran the record's `cli` to inspect and remove a dead owner's container: a record naming any program
    (a damaged one, or one someone else wrote into a shared state folder) had it run. Now only the container CLI this
    machine would pick (docker, podman, or the runtime its environment names) is run; the record is kept."""
    canary = tmp_path / "canary"
    evil = tmp_path / "not-docker"
    evil.write_text(f"#!/bin/sh\ntouch {canary}\n")
    evil.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("SPARKDOCTOR_CONTAINER_RUNTIME", raising=False)
    monkeypatch.delenv("SPARKDOCTOR_CONTAINER_CLI", raising=False)
    folder = tmp_path / "servers"
    folder.mkdir()
    doc = {"kind": "container", "owner": {"pid": 2**22 + 9, "start": "1", "boot": registry.boot_id()}, "cli": [str(evil)],
           "name": "sparkdoctor-x", "owner_label": "l"}
    (folder / "x.json").write_text(json.dumps(doc))
    assert registry.sweep(folder) == [] and not canary.exists() and (folder / "x.json").exists()


def test_a_container_record_waits_for_a_cli_that_is_not_here(tmp_path):
    folder = tmp_path / "servers"
    folder.mkdir()
    doc = {"kind": "container", "owner": {"pid": 2**22 + 9, "start": "1"}, "cli": [str(tmp_path / "no-such-docker")],
           "name": "sparkdoctor-x", "owner_label": "l"}
    (folder / "x.json").write_text(json.dumps(doc))
    assert registry.sweep(folder) == [] and (folder / "x.json").exists()


CLEANUP_DRIVER = """
import sys, time
sys.path.insert(0, {repo!r})
from pathlib import Path
from sparkdoctor import proc
from sparkdoctor.serve import registry
argv = registry.supervised(["sleep", "600"], Path({record!r}), "tok-cleanup", 1.0,
                           [["sh", "-c", "echo stopped > {marker}"]])
running = proc.start(argv)
print(running.popen.pid, flush=True)
time.sleep(120)
"""


def test_a_container_style_cleanup_runs_when_sparkdoctor_dies(tmp_path):
    """The supervisor of a container's `logs -f` runs `stop` and `rm` when sparkdoctor is killed: here a cleanup
    that leaves a mark stands in for them (tests/container has the real daemon)."""
    marker = tmp_path / "stopped"
    script = CLEANUP_DRIVER.format(repo=str(REPO), record=str(tmp_path / "rec.json"), marker=str(marker))
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pgid = int(p.stdout.readline())
        wait_for(lambda: len(members(pgid)) == 2, what="supervisor and its sleep up")
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        wait_for(lambda: marker.exists() and members(pgid) == [], what="cleanup ran and the group is gone")
        assert marker.read_text().strip() == "stopped"
    finally:
        p.kill()
