"""Recipes that name a container, launched in one by a real dockerd (one per session, tests/container/conftest.py).

The image is the skeleton (no registry): the host's /usr and the test Python's base prefix are mounted
read-only, and so is this repository, so the server inside is a real small server (tests/bench/sse_server.py,
tests/serve/fake_server.py) run by the host's own Python. After every launch, whatever happened, the
daemon must hold no container at all (`docker ps -a`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sparkdoctor.exitcodes import EXIT_BENCH_FAILED
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.serve import LaunchError, launch
from tests.container.docker_daemon import skeleton_tar
from tests.container.test_container_cli import one_line, sd

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SSE = REPO / "tests" / "bench" / "sse_server.py"
FAKE = REPO / "tests" / "serve" / "fake_server.py"
PYTHON = str(Path(os.path.realpath(sys.base_prefix)) / "bin" / "python3")  # the host's, seen inside through the mounts


@dataclass
class FakeEntry:
    id: str
    symptoms: list[str] = field(default_factory=list)


def mounts(daemon) -> list[tuple[str, str, str]]:
    return [(src, dst, "ro") for src, dst in daemon.host_mounts()] + [(str(REPO), str(REPO), "ro")]


def everything(daemon) -> list[str]:
    """Every container the daemon holds, running or not."""
    return daemon.must("ps", "-a", "-q").split()


def fake(image: str, mode: str, name: str = "") -> Recipe:
    return Recipe(name=name or f"fake-{mode}", source_path="test", format="sparkdoctor", container=image,
                  argv=[PYTHON, str(FAKE), mode, "--host", "0.0.0.0", "--port", "8000"])


def test_bench_launches_a_container_recipe_measures_it_records_the_image_and_leaves_nothing(docker_env, docker_daemon, skeleton, tmp_path):
    recipe = tmp_path / "in-container.toml"
    argv = [PYTHON, str(SSE), "--host", "0.0.0.0", "--port", "8000", "--delay", "0.002"]
    recipe.write_text(f'schema = 1\nname = "in-container"\nmodel = "tiny"\nserved_model_name = "tiny"\ncontainer = "{skeleton}"\n'
                      f'command = {json.dumps(argv)}\nreadiness_path = "/v1/models"\n[env]\nSD_TEST_SECRET = "s3cret"\n')
    env = {**docker_env, "SPARKDOCTOR_CONTAINER_MOUNTS": ",".join(f"{s}:{d}:{m}" for s, d, m in mounts(docker_daemon)),
           "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    p = sd("bench", str(recipe), "--runtime", "docker", "--rounds", "2", "--concurrency", "1", "--max-tokens", "16",
           "--warmup", "1", "--ready-timeout", "60", "--ledger", str(tmp_path / "l.sqlite"), "--format", "json",
           env=env, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)
    assert doc["levels"][0]["client"]["output_tokens"] == 16  # bench's client got real answers from inside
    image = json.loads(docker_daemon.must("image", "inspect", skeleton))[0]
    container = doc["container"]
    assert container["image"] == skeleton and container["image_id"] == image["Id"] and container["engine"] == "docker"
    assert container["layers"] == image["RootFS"]["Layers"] and len(container["fingerprint"]) == 16
    assert container["name"].startswith("sparkdoctor-")
    assert doc["recipe"]["container"] == skeleton and "127.0.0.1" in doc["recipe"]["argv"]
    # the number is tied to the image: the run's fingerprint holds the image's
    from sparkdoctor.ledger import Ledger

    led = Ledger(tmp_path / "l.sqlite")
    try:
        stored = led.run(doc["run_id"])
    finally:
        led.close()
    assert stored["facts"]["container"]["fingerprint"] == container["fingerprint"]
    assert stored["fingerprint"] == doc["fingerprint"]
    assert everything(docker_daemon) == []
    log = next(Path(os.environ["SPARKDOCTOR_STATE_DIR"]).glob("runs/*-in-container-*/server.log")).read_text()
    assert log and "sse_server listening on 127.0.0.1:" in log  # the container's own output, followed into the run's log
    assert "s3cret" not in log and "-e SD_TEST_SECRET " in log  # env passed by name, never its value in argv
    assert "teardown: container sparkdoctor-" in log and "nothing left" in log


def test_a_server_that_dies_at_start_is_a_finding_and_leaves_nothing(docker_daemon, docker_env, skeleton, tmp_path):
    entries = [FakeEntry("fake-entry", ["FAKE-SYMPTOM-42"])]
    with pytest.raises(LaunchError) as caught:
        with launch(fake(skeleton, "symptom"), run_dir=tmp_path, matrix=entries, ready_timeout=60, runtime="docker",
                    mounts=mounts(docker_daemon)):
            pass
    message = str(caught.value)
    assert "\n" not in message and "the server exited with status 3" in message and "before it was ready" in message
    assert "known problems in its log: fake-entry" in message and "last log line: fake server giving up" in message
    assert [h.entry_id for h in caught.value.findings] == ["fake-entry"]
    assert caught.value.teardown.clean and caught.value.teardown.exit_code == 3
    assert everything(docker_daemon) == []


CHILD = """
import sys, time
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.serve import launch
recipe = Recipe(name="victim", source_path="t", format="sparkdoctor", container=sys.argv[1],
                argv=[sys.argv[2], sys.argv[3], "ready"])
mounts = [tuple(m.split("|")) for m in sys.argv[4:]]
with launch(recipe, run_dir=__import__("pathlib").Path("RUNDIR"), matrix=[], ready_timeout=60,
            runtime="docker", mounts=mounts) as s:
    print("READY", s.container["name"], flush=True)
    time.sleep(600)
"""


def test_a_container_left_by_a_killed_sparkdoctor_is_removed_at_the_next_launch(docker_daemon, docker_env, skeleton, tmp_path):
    script = CHILD.replace("RUNDIR", str(tmp_path / "killed"))
    child = subprocess.Popen([sys.executable, "-c", script, skeleton, PYTHON, str(FAKE),
                              *("|".join(m) for m in mounts(docker_daemon))],
                             stdout=subprocess.PIPE, text=True, env={**docker_env, "PYTHONPATH": str(REPO)}, cwd=REPO)
    try:
        line = child.stdout.readline()
        assert line.startswith("READY sparkdoctor-"), line
        left = line.split()[1]
    finally:
        child.send_signal(signal.SIGKILL)  # no finally, no teardown: the container stays
        child.wait(30)
    assert docker_daemon.must("ps", "-a", "--format", "{{.Names}}").split() == [left]
    with launch(fake(skeleton, "ready"), run_dir=tmp_path / "next", matrix=[], ready_timeout=60, runtime="docker",
                mounts=mounts(docker_daemon)) as s:
        assert docker_daemon.must("ps", "-a", "--format", "{{.Names}}").split() == [s.container["name"]]
        # the leftover is gone (the launch registry's sweep or the label sweep removed it, and said so in the log)
        assert left not in docker_daemon.must("ps", "-a", "--format", "{{.Names}}").split()
    log = (tmp_path / "next" / "server.log").read_text()
    assert "left by an earlier sparkdoctor" in log or "left " in log  # the sweep says it removed a leftover
    assert everything(docker_daemon) == []


def test_a_container_of_a_sparkdoctor_that_still_runs_is_left_alone(docker_daemon, docker_env, skeleton, tmp_path):
    with launch(fake(skeleton, "ready", "outer"), run_dir=tmp_path / "a", matrix=[], ready_timeout=60, runtime="docker",
                mounts=mounts(docker_daemon)) as outer:
        with launch(fake(skeleton, "ready", "inner"), run_dir=tmp_path / "b", matrix=[], ready_timeout=60,
                    runtime="docker", mounts=mounts(docker_daemon)) as inner:
            names = set(docker_daemon.must("ps", "--format", "{{.Names}}").split())
            assert names == {outer.container["name"], inner.container["name"]}
        assert outer.alive()
    assert "removed" not in (tmp_path / "b" / "server.log").read_text()
    assert everything(docker_daemon) == []


def test_an_image_that_is_not_here_is_one_line_and_never_pulled(docker_env, docker_daemon, tmp_path):
    recipe = tmp_path / "missing.toml"
    recipe.write_text('schema = 1\nname = "missing"\nmodel = "tiny"\ncontainer = "sparkdoctor-no-such-image:1"\n'
                      'command = ["vllm", "serve", "tiny"]\n')
    p = sd("bench", str(recipe), "--no-store", "--ready-timeout", "30", env={**docker_env, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "c")},
           cwd=tmp_path, timeout=300)
    one_line(p, EXIT_BENCH_FAILED, "missing: image sparkdoctor-no-such-image:1 is not on this machine; sparkdoctor never pulls",
             "`docker pull sparkdoctor-no-such-image:1`")
    assert docker_daemon.must("images", "-q", "sparkdoctor-no-such-image") == ""
    assert everything(docker_daemon) == []


def test_ctrl_c_inside_the_block_still_stops_and_removes_the_container(docker_daemon, docker_env, skeleton, tmp_path):
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with launch(fake(skeleton, "ready"), run_dir=tmp_path, matrix=[], ready_timeout=60, runtime="docker",
                    mounts=mounts(docker_daemon)) as s:
            raise KeyboardInterrupt
    assert s.teardown.clean and s.teardown.steps[0].startswith("docker stop -t")
    assert everything(docker_daemon) == []
    assert time.monotonic() - t0 < 60


def test_sigterm_to_a_bench_mid_run_stops_and_removes_its_container(docker_env, docker_daemon, skeleton, tmp_path):
    recipe = tmp_path / "slow.toml"
    argv = [PYTHON, str(SSE), "--host", "0.0.0.0", "--port", "8000", "--delay", "0.05"]
    recipe.write_text(f'schema = 1\nname = "slow"\nmodel = "tiny"\ncontainer = "{skeleton}"\ncommand = {json.dumps(argv)}\n'
                      'readiness_path = "/v1/models"\n')
    env = {**docker_env, "SPARKDOCTOR_CONTAINER_MOUNTS": ",".join(f"{s}:{d}:{m}" for s, d, m in mounts(docker_daemon)),
           "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    bench = subprocess.Popen([sys.executable, "-m", "sparkdoctor", "bench", str(recipe), "--rounds", "50", "--max-tokens", "200",
                              "--no-store", "--ready-timeout", "60", "--format", "json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # wait until its server is ready, then a moment into the measurement
            logs = list(Path(os.environ["SPARKDOCTOR_STATE_DIR"]).glob("runs/*-slow-*/server.log"))
            if logs and "[sparkdoctor] ready after" in logs[0].read_text() or bench.poll() is not None:
                break
            time.sleep(0.2)
        time.sleep(1.0)
        assert bench.poll() is None, bench.stderr.read()[-2000:]
        assert len(docker_daemon.must("ps", "-q").split()) == 1
        bench.send_signal(signal.SIGTERM)
        out, err = bench.communicate(timeout=90)
    finally:
        if bench.poll() is None:
            bench.kill()
    assert bench.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert len(err.strip().splitlines()) == 1 and "interrupted (SIGTERM)" in err, err[-2000:]
    # --format json: the interruption is the one JSON document on stdout (the command contract), with its exit code
    doc = json.loads(out)
    assert doc["kind"] == "error" and doc["exit_code"] == 128 + signal.SIGTERM
    assert everything(docker_daemon) == []


def test_a_container_removed_while_it_serves_is_a_clear_error(docker_daemon, docker_env, skeleton, tmp_path):
    with pytest.raises(LaunchError) as caught:
        with launch(fake(skeleton, "ready"), run_dir=tmp_path, matrix=[], ready_timeout=60, runtime="docker",
                    mounts=mounts(docker_daemon)) as s:
            docker_daemon.must("rm", "-f", s.container["name"])
            deadline = time.monotonic() + 120  # a safety net for a loaded machine, not a verdict
            while s.alive() and time.monotonic() < deadline:
                time.sleep(0.1)
            s.check_alive()
    message = str(caught.value)
    # `rm -f` kills, then removes: the launcher sees either the kill's status or the container gone
    assert "while it was serving" in message
    assert f"container {s.container['name']} is gone: removed while it ran" in message or "status 137 (SIGKILL)" in message, message
    assert caught.value.teardown is None or caught.value.teardown.clean
    assert everything(docker_daemon) == []


def test_a_conclusion_measured_in_a_container_goes_stale_when_its_image_changes(docker_env, docker_daemon, skeleton, tmp_path):
    docker_daemon.must("tag", skeleton, "sd-served:1")
    # a 10x effect made of sleeps: under other load the re-measured A/B of 2 ms against 4 ms came out inconclusive
    for arm, delay in (("a", "0.004"), ("b", "0.04")):
        argv = [PYTHON, str(SSE), "--host", "0.0.0.0", "--port", "8000", "--delay", delay]
        (tmp_path / f"{arm}.toml").write_text(f'schema = 1\nname = "{arm}"\nmodel = "tiny"\ncontainer = "sd-served:1"\n'
                                              f'command = {json.dumps(argv)}\nreadiness_path = "/v1/models"\n')
    env = {**docker_env, "SPARKDOCTOR_CONTAINER_MOUNTS": ",".join(f"{s}:{d}:{m}" for s, d, m in mounts(docker_daemon)),
           "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    ledger = str(tmp_path / "l.sqlite")
    ab = sd("bench", str(tmp_path / "a.toml"), "--vs", str(tmp_path / "b.toml"), "--pairs", "1", "--rounds", "2",
            "--concurrency", "1", "--max-tokens", "8", "--warmup", "0", "--ready-timeout", "60", "--conclude", "a-vs-b",
            "--allow-load-difference", "--ledger", ledger, "--format", "json", env=env, cwd=tmp_path, timeout=300)
    assert ab.returncode == 0, ab.stderr[-3000:]

    def plan() -> dict:
        p = sd("rerun", "--dry-run", "--ledger", ledger, "--format", "json", env=env, cwd=tmp_path, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        (item,) = json.loads(p.stdout)["conclusions"]
        return item

    assert plan()["state"] == "fresh"  # the same image behind the tag: nothing changed
    before = json.loads(docker_daemon.must("image", "inspect", "sd-served:1"))[0]["Id"]
    # another image (one more folder) under the same tag: an image upgrade
    other = skeleton_tar(tmp_path / "other.tar", ("proc", "sys", "dev", "tmp", "etc", "usr", "opt", "root", "run", "var", "srv"))
    docker_daemon.must("import", str(other), "sd-served:1")
    assert json.loads(docker_daemon.must("image", "inspect", "sd-served:1"))[0]["Id"] != before
    item = plan()
    assert item["state"] == "stale", item
    assert [c["what"] for c in item["changes"]] == ["image"], item["changes"]
    # re-measured in the new image: the new runs carry its fingerprint, and the conclusion is fresh again
    done = sd("rerun", "--allow-load-difference", "--ledger", ledger, "--format", "json", env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (result,) = json.loads(done.stdout)["results"]
    assert result["outcome"] in ("holds", "changed", "flipped"), result
    new_id = json.loads(docker_daemon.must("image", "inspect", "sd-served:1"))[0]["Id"]
    from sparkdoctor.ledger import Ledger

    led = Ledger(Path(ledger))
    try:
        newest = led.run(max(r["id"] for r in led.runs()))
    finally:
        led.close()
    assert newest["facts"]["container"]["image_id"] == new_id
    assert plan()["state"] == "fresh"
    assert everything(docker_daemon) == []


def test_a_container_server_listening_beyond_loopback_is_not_measured_and_leaves_nothing(docker_daemon, docker_env, skeleton,
                                                                                         tmp_path, monkeypatch):
    """`--network host`: the container's sockets are the host's, its processes the host's too (under the runtime's
    State.Pid). A side port of its worker, a real 127.0.0.1 listener judged as 0.0.0.0 (no test binds beyond
    loopback), fails the launch as a local server's does. Before, a container launch was never looked at."""
    from sparkdoctor.serve import binding

    side = binding.free_port()
    real = binding.all_listeners

    def judged(root: Path = Path("/proc")) -> dict[int, tuple[str, int]]:
        return {inode: ("0.0.0.0" if at == side else address, at) for inode, (address, at) in real(root).items()}

    monkeypatch.setattr(binding, "all_listeners", judged)
    recipe = Recipe(name="side", source_path="test", format="sparkdoctor", container=skeleton,
                    argv=[PYTHON, str(FAKE), "ready"], env={"FAKE_SERVER_SIDE_PORT": str(side)})
    with pytest.raises(LaunchError) as raised:
        with launch(recipe, run_dir=tmp_path, matrix=[], ready_timeout=60, runtime="docker", mounts=mounts(docker_daemon)):
            pytest.fail("a container server with a side port beyond loopback must never be handed over")
    message = str(raised.value)
    assert f"also listens on 0.0.0.0 port {side}" in message and "not measured" in message and "\n" not in message
    assert everything(docker_daemon) == []


def test_a_container_whose_processes_this_machine_cannot_read_is_asked_what_it_listens_on(docker_daemon, docker_env,
                                                                                            skeleton, tmp_path, monkeypatch):
    """A rootless runtime's server (its State.Pid not this machine's to read, or its processes another user's): the
    loopback check saw no process and reported nothing. Now the container's own python3, as root in it, says which
    sockets its processes listen on. Here this machine's view is taken away (no process tree), and every address is
    judged beyond loopback (no test binds beyond it): the worker's side port fails the launch."""
    from sparkdoctor.serve import binding, groups

    side = binding.free_port()
    monkeypatch.setattr(groups, "tree", lambda pid: [])
    monkeypatch.setattr(binding, "_loopback", lambda address: False)
    recipe = Recipe(name="rootless", source_path="test", format="sparkdoctor", container=skeleton,
                    argv=[PYTHON, str(FAKE), "ready"], env={"FAKE_SERVER_SIDE_PORT": str(side)})
    with pytest.raises(LaunchError) as raised:
        with launch(recipe, run_dir=tmp_path, matrix=[], ready_timeout=60, runtime="docker", mounts=mounts(docker_daemon)):
            pytest.fail("a container server whose processes cannot be read here must still be looked at")
    message = str(raised.value)
    assert f"also listens on 127.0.0.1 port {side}" in message and "not measured" in message and "\n" not in message
    assert everything(docker_daemon) == []


def test_a_users_container_carrying_sparkdoctors_labels_is_never_swept(docker_daemon, docker_env, skeleton):
    """`docker commit` of a launch (or an image built to look like one) passes sparkdoctor's labels, its owner long
    dead, to every container of it: the next launch's sweep removed the user's `vllm_node`. Only a container with
    the name sparkdoctor gave it (sparkdoctor-RUN, sparkdoctor-mods-...) is a leftover."""
    from sparkdoctor.serve import container_launch as cl

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    dead = cl.owner_label(child.pid)
    child.wait()
    users = docker_daemon.run_container("vllm_node", skeleton, [], "--label", f"{cl.LABEL_RUN}=20261130120000-abcdef",
                                        "--label", f"{cl.LABEL_OWNER}={dead}")
    named = docker_daemon.run_container("sd-named-as-run", skeleton, [], "--label", f"{cl.LABEL_RUN}=sd-named-as-run",
                                        "--label", f"{cl.LABEL_OWNER}={dead}")
    left = docker_daemon.run_container("sparkdoctor-20261130120000-fedcba", skeleton, [],
                                       "--label", f"{cl.LABEL_RUN}=20261130120000-fedcba", "--label", f"{cl.LABEL_OWNER}={dead}")
    try:
        assert cl.sweep_leftovers(["docker"]) == [left]
        assert sorted(docker_daemon.must("ps", "-a", "--format", "{{.Names}}").split()) == sorted([users, named])
    finally:
        for name in (users, named, left):
            docker_daemon.docker("rm", "-f", name, timeout=60)
