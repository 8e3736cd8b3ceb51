"""podman, for real (tests/container/podman_runtime.py): a container recipe launched and benched through it,
a server that dies at start, and `check --container` through it, chosen by $SPARKDOCTOR_CONTAINER_RUNTIME."""

from __future__ import annotations

import json
import os
import re

import pytest

from sparkdoctor.serve import LaunchError, launch
from tests.container.test_container_launch import (
    FAKE,
    PYTHON,
    REPO,
    SSE,
    FakeEntry,
    fake,
    sd,
)

pytestmark = pytest.mark.slow


def mounts() -> list[tuple[str, str, str]]:
    base = os.path.realpath(os.path.dirname(os.path.dirname(PYTHON)))
    found = [("/usr", "/usr", "ro"), (str(REPO), str(REPO), "ro")]
    return found + ([(base, base, "ro")] if not base.startswith("/usr") else [])


def test_bench_through_podman_answers_records_the_image_and_leaves_nothing(podman, tmp_path):
    recipe = tmp_path / "in-podman.toml"
    argv = [PYTHON, str(SSE), "--host", "0.0.0.0", "--port", "8000"]
    recipe.write_text(f'schema = 1\nname = "in-podman"\nmodel = "tiny"\ncontainer = "sparkdoctor-skeleton:1"\n'
                      f'command = {json.dumps(argv)}\nreadiness_path = "/v1/models"\n')
    env = {**os.environ, "SPARKDOCTOR_CONTAINER_RUNTIME": str(podman.cli), "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache"),
           "SPARKDOCTOR_CONTAINER_MOUNTS": ",".join(f"{s}:{d}:{m}" for s, d, m in mounts())}
    p = sd("bench", str(recipe), "--rounds", "2", "--concurrency", "1", "--max-tokens", "8", "--warmup", "0",
           "--ready-timeout", "60", "--no-store", "--format", "json", env=env, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)
    assert doc["levels"][0]["client"]["output_tokens"] == 8
    image_id = podman.must("image", "inspect", "--format", "{{.Id}}", "sparkdoctor-skeleton:1")
    assert doc["container"]["engine"] == "podman" and doc["container"]["image_id"].removeprefix("sha256:") == image_id
    assert re.fullmatch(r"[0-9a-f]{16}", doc["container"]["fingerprint"])
    assert podman.must("ps", "-a", "-q") == ""


def test_a_server_that_dies_at_start_under_podman_is_a_finding_and_leaves_nothing(podman, tmp_path):
    with pytest.raises(LaunchError) as caught:
        with launch(fake("sparkdoctor-skeleton:1", "symptom"), run_dir=tmp_path, matrix=[FakeEntry("fake-entry", ["FAKE-SYMPTOM-42"])],
                    ready_timeout=60, runtime=str(podman.cli), mounts=mounts()):
            pass
    assert "exited with status 3" in str(caught.value) and "known problems in its log: fake-entry" in str(caught.value)
    assert caught.value.teardown.clean and podman.must("ps", "-a", "-q") == ""
    assert FAKE.exists()


def test_check_container_through_podman(podman, tmp_path):
    extra = [a for src, dst, mode in mounts() for a in ("-v", f"{src}:{dst}:{mode}")]
    podman.must("run", "-d", "--init", "--network", "none", "--name", "sd-pod", *extra, "sparkdoctor-skeleton:1", "sleep", "infinity")
    try:
        env = {**os.environ, "SPARKDOCTOR_CONTAINER_RUNTIME": str(podman.cli), "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
        p = sd("check", "--container", "sd-pod", "--container-python", PYTHON, "--no-kernels", "--format", "json",
               env=env, cwd=tmp_path, timeout=300)
        assert p.returncode in (0, 1), p.stderr[-3000:]
        facts = json.loads(p.stdout)["facts"]
        assert facts["target"]["kind"] == "container" and facts["container"]["engine"] == "podman"
        assert facts["container"]["image"].endswith("sparkdoctor-skeleton:1") and facts["target"]["python"] == PYTHON
    finally:
        podman("rm", "-f", "-t", "0", "sd-pod")
