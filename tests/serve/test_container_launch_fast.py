"""The container launcher's decisions that need no daemon: the `run` argv, GPU flags per runtime, extra
mounts, who owns a leftover container, and one-line errors for a runtime that is not there. The real
launches are in tests/container/test_container_launch.py (docker) and test_container_podman.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import replace

import pytest

from sparkdoctor.exitcodes import EXIT_UNPROBEABLE
from sparkdoctor.serve import container_launch as cl
from sparkdoctor.serve.container_env import container_env


def test_run_argv_binds_the_host_network_passes_env_by_name_and_mounts_read_only():
    argv = cl.run_argv(["docker"], "sparkdoctor-x", {"sparkdoctor.run": "x"}, ["--runtime", "nvidia", "--gpus", "all"],
                       ["HF_TOKEN", "PYTHONUNBUFFERED"], [("/models/m", "/models/m", "ro")], "vllm-node:1",
                       ["vllm", "serve", "/models/m", "--host", "127.0.0.1", "--port", "5"])
    assert argv == ["docker", "run", "-d", "--init", "--name", "sparkdoctor-x", "--label", "sparkdoctor.run=x",
                    "--runtime", "nvidia", "--gpus", "all", "--network", "host", "--ipc", "host", "-e", "HF_TOKEN", "-e", "PYTHONUNBUFFERED",
                    "-v", "/models/m:/models/m:ro", "vllm-node:1", "vllm", "serve", "/models/m", "--host", "127.0.0.1",
                    "--port", "5"]


@pytest.mark.parametrize("engine, gpu, runtimes, cdi, flags, noted", [
    ("docker", False, ["nvidia", "runc"], True, [], False),  # no GPU on the host: nothing, and nothing to say
    ("docker", True, ["nvidia", "runc"], False, ["--runtime", "nvidia", "--gpus", "all"], False),
    ("docker", True, ["runc"], True, ["--device", "nvidia.com/gpu=all"], False),
    ("docker", True, ["runc"], False, [], True),  # a GPU docker cannot hand over: said, not failed
    ("podman", True, [], True, ["--device", "nvidia.com/gpu=all"], False),
    ("podman", True, [], False, [], True),
])
def test_gpu_flags_only_where_the_host_has_a_gpu_and_the_runtime_can_pass_it(engine, gpu, runtimes, cdi, flags, noted):
    got, note = cl.gpu_args(engine, gpu, runtimes, cdi)
    assert got == flags and bool(note) == noted


def test_extra_mounts_parse_and_bad_ones_are_one_line(tmp_path, monkeypatch):
    assert cl.parse_mounts("/a, /b:/c ,/d:/e:rw,/f:ro,") == [("/a", "/a", "ro"), ("/b", "/c", "ro"), ("/d", "/e", "rw"), ("/f", "/f", "ro")]
    monkeypatch.setenv("HOME", str(tmp_path))  # `~` is the user's home, as a shell expands it
    cache = tmp_path / ".cache" / "huggingface"
    assert cl.parse_mounts("~/.cache/huggingface:/models-cache") == [(str(cache), "/models-cache", "ro")]
    for bad in ("relative/path", "/a:/b:/c", "/a:b"):
        with pytest.raises(cl.ContainerLaunchError, match=rf"^{cl.MOUNTS_ENV}: '{bad}': give SRC\[:DST\[:ro\|rw\]\] with absolute paths$"):
            cl.parse_mounts(bad)


def test_the_model_folder_is_mounted_only_when_it_is_a_local_folder(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert cl.model_mount(str(tmp_path)) == (str(tmp_path), str(tmp_path), "ro")
    assert cl.model_mount("Qwen/Qwen3-0.6B") is None and cl.model_mount(str(tmp_path / "missing")) is None
    assert cl.model_mount(None) is None
    colon = tmp_path / "Qwen3:8B"
    colon.mkdir()
    (colon / "config.json").write_text("{}")
    (colon / "model-00001-of-00002.safetensors").write_bytes(b"")
    with pytest.raises(cl.ContainerLaunchError, match=r"^model folder '.*Qwen3:8B': a ':' in its path cannot be mounted"):
        cl.model_mount(str(colon))


@pytest.mark.parametrize("model", ["/", "~", "~/.docker", "{home}/.docker", "{home}/models/m/../../.ssh", "/etc", "/proc"])
def test_a_model_folder_that_holds_no_model_is_never_mounted_into_the_container(tmp_path, monkeypatch, model):
    """The recipe's model, when a local folder, is mounted into its container, whose image runs the third-party code the
    container is there to keep apart, on the host's network. `model: /` or `model: ~` mounted this machine's whole file
    system or the user's home (~/.ssh with it); `~/.docker` has a config.json and holds registry credentials. A folder
    is mounted only when it holds a model: a config.json (or params.json) and weights."""
    home = tmp_path / "home"
    (home / ".docker").mkdir(parents=True)
    (home / ".docker" / "config.json").write_text('{"auths": {}}')
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("key")
    (home / "models" / "m").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(cl.ContainerLaunchError, match=r"^model folder '.*': it holds no model \(a config.json and "):
        cl.model_mount(model.format(home=home))


def test_owner_of_a_leftover_alive_gone_or_not_ours_to_judge():
    assert cl.owner_alive(cl.owner_label()) is True  # this very process
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    label = cl.owner_label(child.pid)
    child.wait()
    assert cl.owner_alive(label) is False  # it exited: its container is a leftover
    host, boot, pid, started = cl.owner_label().split("/")
    assert cl.owner_alive(f"{host}/{boot}/{pid}/{int(started) + 1}") is False  # the pid now belongs to another process
    assert cl.owner_alive(f"{host}/another-boot/{pid}/{started}") is False  # rebooted since
    assert cl.owner_alive(f"not-{socket.gethostname()}/{boot}/{pid}/{started}") is None  # another host's: left alone
    assert cl.owner_alive("garbage") is False


def test_runtime_choice_and_missing_runtimes_are_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv(cl.RUNTIME_ENV, "sparkdoctor-no-such-runtime")
    with pytest.raises(cl.ContainerLaunchError, match=r"^SPARKDOCTOR_CONTAINER_RUNTIME=sparkdoctor-no-such-runtime: no such program on PATH$"):
        cl.runtime_cli()
    fake = tmp_path / "podman"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    assert cl.runtime_cli(str(fake)) == [str(fake)] and cl.engine_of([str(fake)]) == "podman"
    monkeypatch.delenv(cl.RUNTIME_ENV)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(cl.ContainerLaunchError, match=r"neither docker nor podman is on PATH \(use --local"):
        cl.runtime_cli()


def test_check_runtime_that_is_not_there_is_one_line_exit_3(tmp_path):
    env = {**os.environ, "SPARKDOCTOR_CACHE_DIR": str(tmp_path)}
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--container", "c", "--runtime", "sparkdoctor-no-such-cli"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == EXIT_UNPROBEABLE, p.stderr
    assert p.stderr.strip() == "sparkdoctor: error: --runtime sparkdoctor-no-such-cli: no such program on PATH"


def test_a_container_cli_that_hangs_is_one_line_and_killed(monkeypatch, tmp_path):
    from sparkdoctor.recipes.model import Recipe
    from sparkdoctor.serve import LaunchError, launch
    from sparkdoctor.serve.groups import members

    hang = tmp_path / "docker"
    hang.write_text(f"#!/bin/sh\necho $$ >> {tmp_path}/pids\nexec sleep 600\n")
    hang.chmod(0o755)
    monkeypatch.setattr(cl, "CLI_TIMEOUT", 1.0)  # the real one is 30 s; the behaviour is the same
    recipe = Recipe(name="hung", source_path="t", format="sparkdoctor", argv=["vllm", "serve", "m"], container="vllm-node")
    with pytest.raises(LaunchError, match=r"^hung: `docker image inspect vllm-node` did not answer within 1s; is the container daemon up\?$"):
        with launch(recipe, run_dir=tmp_path / "run", matrix=[], ready_timeout=5, runtime=str(hang)):
            pass
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    assert len(pids) == 2 and all(members(pid) == [] for pid in pids)  # `ps` (the sweep) and `image inspect`, both killed


def test_a_recipes_env_reaches_its_container_and_never_the_cli_on_this_machine(monkeypatch, tmp_path):
    """A real sparkrun recipe sets PATH for inside its image; others set HOME, TMPDIR or LD_PRELOAD for it. Given to the
    container CLI's own environment, PATH decides which conmon/crun podman runs, HOME which config and context the CLI
    reads, LD_PRELOAD which library is loaded into it, DOCKER_HOST which daemon runs the container. They go to the
    container as NAME=VALUE; the CLI keeps this machine's own. Any other variable is passed by name, its value only in
    the CLI's environment (a token never shows in a process list)."""
    from sparkdoctor.recipes.loader import load

    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    for name in ("DOCKER_HOST", "LD_PRELOAD", "TMPDIR"):
        monkeypatch.delenv(name, raising=False)
    mine = dict(os.environ)
    recipe = load(os.path.join(os.path.dirname(__file__), "..", "data", "recipes", "mfellner-glm-5.2-vision-348k.yaml"))
    container_path = recipe.env["PATH"]
    assert container_path.startswith("/opt/vllm/.venv/bin:") and container_path != mine["PATH"]
    env = {**recipe.env, "HOME": "/home/in-the-image", "TMPDIR": "/cache/tmp", "LD_PRELOAD": "./mods/x.so",
           "DOCKER_HOST": "tcp://203.0.113.9:2375", "HF_TOKEN": "hf_secret", "pythonstartup": "x.py"}
    server = cl.ContainerServer(replace(recipe, env=env), 8000, runtime=str(fake))
    for name in ("PATH", "HOME"):
        assert server.env[name] == mine[name] and f"{name}={env[name]}" in server.env_names
    for name in ("TMPDIR", "LD_PRELOAD", "DOCKER_HOST", "pythonstartup"):
        assert name not in server.env and f"{name}={env[name]}" in server.env_names
    assert server.env["HF_TOKEN"] == "hf_secret" and "HF_TOKEN" in server.env_names  # by name: the value not in argv
    assert not any(arg.startswith("HF_TOKEN=") for arg in server.env_names)
    assert server.env["NCCL_DEBUG"] == recipe.env["NCCL_DEBUG"] and "NCCL_DEBUG" in server.env_names
    assert server.env["PYTHONUNBUFFERED"] == mine.get("PYTHONUNBUFFERED", "1") and "PYTHONUNBUFFERED" in server.env_names


def test_a_variable_the_cli_reads_goes_by_name_when_the_recipe_gives_this_machines_own_value():
    cli_env, args = container_env({"PATH": "/usr/bin", "XDG_RUNTIME_DIR": "/run/x", "VLLM_X": "1"},
                                     {"PATH": "/usr/bin", "HOME": "/home/u"})
    assert cli_env == {"PATH": "/usr/bin", "HOME": "/home/u", "VLLM_X": "1", "PYTHONUNBUFFERED": "1"}
    assert args == ["PATH", "PYTHONUNBUFFERED", "VLLM_X", "XDG_RUNTIME_DIR=/run/x"]


@pytest.mark.parametrize("program", ["/bin/sh", "/bin/true"])
def test_a_runtime_that_is_not_docker_or_podman_is_not_told_to_docker_pull(program):
    """`bench --runtime /bin/sh`: `sh image inspect -- img` fails "No such file", and the advice was `docker pull img`."""
    with pytest.raises(cl.ContainerLaunchError) as info:
        cl.image_record([program], "img:1")
    assert "docker pull" not in str(info.value) and "is not docker or podman" in str(info.value), str(info.value)
    assert os.path.basename(program) in str(info.value) and "\n" not in str(info.value)
