"""The roofline in a bench report: the headline decode tok/s per stream at concurrency 1 as a share of the
audit's ceiling for the model folder served (a real-shape sparse checkpoint), from a recipe whose model is
that folder or from --url with --model-dir. A folder the audit cannot read never fails the bench."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.audit import builders
from tests.bench.test_bench_recipe import QUICK, REPO, SERVER

SLOW = ["--delay", "0.01"]  # a token every 10 ms: about 100 tok/s per stream
FAST = ["--delay", "0.001"]  # a token every millisecond: far above any ceiling, however late a busy machine wakes it


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return builders.qwen3_8b(tmp_path_factory.mktemp("models") / "qwen3-8b-nvfp4", "nvfp4")


@pytest.fixture
def run(tmp_path):
    bin_dir = tmp_path / "bin"  # no nvidia-smi: the bandwidth is the assumed GB10's
    bin_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"),
               COLUMNS="160", PATH=f"{bin_dir}{os.pathsep}{os.path.dirname(sys.executable)}{os.pathsep}/usr/bin:/bin")

    def call(*args, timeout=300):
        return subprocess.run([sys.executable, "-m", "sparkdoctor", "bench", *map(str, args), "--no-store", *QUICK], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=timeout)

    return call


def recipe(tmp_path: Path, model: Path | str, *server_args: str, flags: tuple[str, ...] = ()) -> Path:
    argv = [sys.executable, str(SERVER), "--host", "0.0.0.0", "--port", "8000", *server_args]
    path = tmp_path / "r.toml"
    path.write_text(f'schema = 1\nname = "roof"\nmodel = {json.dumps(str(model))}\nserved_model_name = "tiny"\n'
                    f"command = {json.dumps(argv + list(flags))}\nreadiness_path = \"/v1/models\"\n"
                    '[env]\nPYTHONPATH = "' + str(REPO) + '"\n')
    return path


def test_a_recipe_serving_a_local_folder_shows_the_share_of_the_ceiling(run, tmp_path, checkpoint):
    # --kv-cache-dtype is read from the recipe's argv (the stand-in server ignores flags it does not know)
    out = run(recipe(tmp_path, checkpoint, *SLOW, flags=("--kv-cache-dtype", "fp8")), "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    roof = doc["roofline"]
    assert roof["missing"] is None and roof["model_dir"] == str(checkpoint)
    assert roof["bandwidth_source"] == "no GPU detected: GB10 assumed" and roof["bandwidth_gbs"] == 273
    assert roof["kv_cache_dtype"] == "fp8"
    assert roof["context"] == 5 + 24 // 2  # the stand-in's usage says 5 prompt tokens; half of 24 output tokens
    # Qwen3-8B NVFP4: 52.6 tok/s at 512 tokens of context (tests/audit); a 17-token context reads less KV cache
    assert 52.6 < roof["ceiling_tok_s"] < 60
    head = doc["headline"]["decode_tps_per_stream"]
    assert roof["achieved_tok_s"] == pytest.approx(head, abs=0.01)
    assert roof["share"] == pytest.approx(head / roof["ceiling_tok_s"], rel=1e-3)
    assert doc["bench_version"] == 1
    assert (roof["warning"] is not None) == (roof["share"] > 1)  # a stand-in 'faster than physics' is called out

    # a token every millisecond: about 1,000 tok/s against a ~53 tok/s ceiling. At a token every 10 ms (~100 tok/s) a
    # loaded machine's late wake-ups (9 ms each) were enough to bring it under the ceiling and take the warning away
    text = run(recipe(tmp_path, checkpoint, *FAST), "--format", "console")
    assert text.returncode == 0, text.stderr
    assert "roofline: " in text.stdout and "tok/s ceiling" in text.stdout and "bandwidth: no GPU detected: GB10 assumed" in text.stdout
    assert "above the ceiling: the folder is not the model served" in text.stdout, text.stdout


def test_the_kv_cache_dtype_of_a_config_file_sizes_the_ceiling(run, tmp_path, checkpoint):
    """`vllm serve --config serve.yaml` whose file sets kv-cache-dtype: the roofline read the flag from the command
    only, and sized an fp8 cache as the model's 16-bit one; the command line still wins over the file."""
    (tmp_path / "serve.yaml").write_text("kv-cache-dtype: fp8\n")
    out = run(recipe(tmp_path, checkpoint, *SLOW, "--config", "serve.yaml"), "--format", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["roofline"]["kv_cache_dtype"] == "fp8", out.stdout
    out = run(recipe(tmp_path, checkpoint, *SLOW, "--config", "serve.yaml", "--kv-cache-dtype", "auto"), "--format", "json")
    assert json.loads(out.stdout)["roofline"]["kv_cache_dtype"] == "auto", out.stdout


def test_url_with_model_dir(run, tmp_path, checkpoint):
    from tests.ports import dies_with_me, start_on_a_free_port

    # waited for until it listens there itself (a port picked free may be taken first; ~30 s of waiting then went
    # on regardless on a busy machine)
    server, port = start_on_a_free_port(lambda port: subprocess.Popen(
        dies_with_me([sys.executable, str(SERVER), "--host", "127.0.0.1", "--port", str(port), *SLOW]),
        env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True))
    try:
        url = f"http://127.0.0.1:{port}"
        out = run("--url", url, "--model-dir", checkpoint, "--format", "json")
        assert out.returncode == 0, out.stderr
        roof = json.loads(out.stdout)["roofline"]
        assert roof["missing"] is None and roof["kv_cache_dtype"] == "auto" and roof["share"] > 0
        plain = json.loads(run("--url", url, "--format", "json").stdout)
        assert plain["roofline"] is None  # no folder named: no block at all
    finally:
        server.kill()
        server.wait(timeout=10)


def test_url_with_model_dir_sizes_the_kv_cache_the_server_says(run, checkpoint):
    """A server at --url says its KV cache dtype on /metrics (vllm:cache_config_info cache_dtype): the roofline sized
    an fp8 cache as the model's 16-bit one ("auto") all the same."""
    from tests.ports import dies_with_me, start_on_a_free_port

    server, port = start_on_a_free_port(lambda port: subprocess.Popen(
        dies_with_me([sys.executable, str(SERVER), "--host", "127.0.0.1", "--port", str(port), *SLOW, "--kv-cache-dtype", "fp8"]),
        env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True))
    try:
        out = run("--url", f"http://127.0.0.1:{port}", "--model-dir", checkpoint, "--format", "json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["roofline"]["kv_cache_dtype"] == "fp8", out.stdout
    finally:
        server.kill()
        server.wait(timeout=10)


def test_an_unreadable_folder_never_fails_the_bench(run, tmp_path, checkpoint):
    empty = tmp_path / "empty-model"
    empty.mkdir()
    (empty / "config.json").write_text((checkpoint / "config.json").read_text())
    out = run(recipe(tmp_path, empty, *SLOW), "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["headline"]["decode_tps_per_stream"] > 0
    assert doc["roofline"]["ceiling_tok_s"] is None and doc["roofline"]["missing"].startswith(f"audit of {empty} failed: ")

    corrupt = tmp_path / "corrupt-model"
    corrupt.mkdir()
    (corrupt / "config.json").write_text((checkpoint / "config.json").read_text())
    (corrupt / "model.safetensors").write_bytes((10**12).to_bytes(8, "little") + b"{}")  # header longer than the file
    text = run(recipe(tmp_path, corrupt, *SLOW))
    assert text.returncode == 0, text.stderr
    said = " ".join(text.stdout.split())  # a piped console line ends in no space: the wrap at COLUMNS is a line break
    assert f"roofline: not shown: audit of {corrupt} failed: " in said and "model.safetensors" in said

    hub = run(recipe(tmp_path, "org/not-a-folder", *SLOW), "--format", "json")
    assert json.loads(hub.stdout)["roofline"]["missing"] == ("the recipe's model org/not-a-folder is not a local folder "
                                                             "(bench --model-dir DIR names one)")


# ---- the dtype the weights are served at (docs/evidence/benchdt-2026-12-02.md) ----------------------------------
@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Qwen3-8B unquantized twice: as published (bfloat16) and as a float32 export of the same weights."""
    root = tmp_path_factory.mktemp("dtype-models")
    cfg = builders.load_config("qwen3-8b")
    cfg["torch_dtype"] = "float32"
    wide = [(name, "F32" if dtype == "BF16" else dtype, shape) for name, dtype, shape in builders.qwen3_dense(cfg, "bf16")]
    return {"bfloat16": builders.qwen3_8b(root / "bf16", None), "float32": builders.write_checkpoint(root / "f32", cfg, wide)}


def _roof(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["roofline"]


def test_a_recipe_is_sized_at_the_dtype_it_serves(run, tmp_path, checkpoints):
    """The ceiling of a launch with --dtype float32 was that of a 16-bit one: the weights are read at the dtype the
    server casts them to (the audit's rule: auto serves a float32 checkpoint in bfloat16)."""
    def bench(folder: str, dtype: str | None) -> dict:
        flags = ("--dtype", dtype) if dtype else ()
        roof = _roof(run(recipe(tmp_path, checkpoints[folder], *SLOW, flags=flags), "--format", "json"))
        assert roof["missing"] is None and roof["dtype"] == (dtype or "auto") and roof["dtype_assumed"] is None, roof
        return roof

    narrow = bench("bfloat16", None)["bytes_per_token"]
    assert bench("bfloat16", "float32")["bytes_per_token"] == pytest.approx(2 * narrow, rel=1e-3)
    assert bench("float32", None)["bytes_per_token"] == pytest.approx(narrow, rel=1e-3)  # auto: bfloat16
    assert bench("float32", "half")["bytes_per_token"] == pytest.approx(narrow, rel=1e-3)
    assert bench("float32", "float32")["bytes_per_token"] == pytest.approx(2 * narrow, rel=1e-3)


def test_url_sizes_at_the_dtype_the_server_says_and_says_when_it_assumed_one(run, checkpoints):
    """`bench --url` sized every server at --dtype auto. A vLLM server says its dtype at /server_info (with
    VLLM_SERVER_DEV_MODE=1, `dtype=torch.float32` in its engine configuration); one that does not say it is sized at
    auto, and the report says the dtype was assumed, in JSON and on the console."""
    from tests.ports import dies_with_me, start_on_a_free_port

    def serve(dev_mode: bool):
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env.pop("VLLM_SERVER_DEV_MODE", None)
        if dev_mode:
            env["VLLM_SERVER_DEV_MODE"] = "1"
        return start_on_a_free_port(lambda port: subprocess.Popen(
            dies_with_me([sys.executable, str(SERVER), "--host", "127.0.0.1", "--port", str(port), *SLOW, "--dtype", "float32"]),
            env=env, start_new_session=True))

    folder = checkpoints["bfloat16"]
    said, said_port = serve(True)
    quiet, quiet_port = serve(False)
    try:
        wide = _roof(run("--url", f"http://127.0.0.1:{said_port}", "--model-dir", folder, "--format", "json"))
        assert wide["dtype"] == "float32" and wide["dtype_assumed"] is None, wide
        assumed = _roof(run("--url", f"http://127.0.0.1:{quiet_port}", "--model-dir", folder, "--format", "json"))
        assert assumed["dtype"] == "auto" and assumed["dtype_assumed"].startswith("the server does not say it"), assumed
        assert wide["bytes_per_token"] == pytest.approx(2 * assumed["bytes_per_token"], rel=1e-3)
        text = run("--url", f"http://127.0.0.1:{quiet_port}", "--model-dir", folder)
        assert text.returncode == 0, text.stderr
        said_text = " ".join(text.stdout.split())
        assert "--dtype assumed: the server does not say it (vLLM does at /server_info when started with " \
               "VLLM_SERVER_DEV_MODE=1)" in said_text, text.stdout
        told = run("--url", f"http://127.0.0.1:{said_port}", "--model-dir", folder)
        assert told.returncode == 0 and "--dtype float32;" in told.stdout and "--dtype assumed" not in told.stdout, told.stdout
    finally:
        for server in (said, quiet):
            server.kill()
            server.wait(timeout=10)
