"""What a launch needs: weights to the byte from the headers, the KV cache from config.json at the recipe's
settings, vLLM's defaults where the recipe is silent, and the reserve stated as an estimate with its source."""

from __future__ import annotations

import json

import pytest

from sparkdoctor.memory.need import GIB, NeedError, launch_need
from tests.memory.conftest import recipe

GB10_TOTAL = 125_511_680 * 1024  # MemTotal of the gb10 fixtures (tests/data/hostroots)


def header_bytes(folder) -> int:
    """Every tensor's bytes, read from the shards' headers here, independently of the audit."""
    total = 0
    for shard in folder.glob("*.safetensors"):
        with open(shard, "rb") as fh:  # the header only: the data region is a sparse hole of gigabytes
            header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
        total += sum(e["data_offsets"][1] - e["data_offsets"][0] for k, e in header.items() if k != "__metadata__")
    return total


def test_weights_exact_and_kv_at_the_recipe_settings(tmp_path, qwen3_8b):
    need = launch_need(recipe(tmp_path, qwen3_8b, "--max-model-len", "32768", "--max-num-seqs", "8",
                              "--kv-cache-dtype", "fp8", "--gpu-memory-utilization", "0.6"), qwen3_8b, GB10_TOTAL)
    assert need.part("weights") == header_bytes(qwen3_8b) == 16_381_470_720
    # 36 layers x (K + V) x 8 KV heads x 128 x 1 byte (fp8), one sequence of 32,768 tokens
    assert need.kv_bytes_per_token == 36 * 2 * 8 * 128 * 1
    # one sequence of 32,768 tokens, and the one 16-token block vLLM's pool keeps back (its null block)
    assert need.part("kv-cache") == 36 * 2 * 8 * 128 * (32768 + 16) and need.block_bytes == 36 * 2 * 8 * 128 * 16
    assert need.setting("max_num_seqs") == 8 and need.setting("gpu_memory_utilization") == 0.6
    assert need.settings["max_model_len"].source == "recipe probe (--max-model-len 32768)"
    assert need.part("sampler") == 8 * 151936 * 4 * 2
    estimates = {p.name for p in need.parts if p.how == "estimate"}
    assert estimates == {"activations", "sampler", "cuda-graphs", "cuda-context"}
    assert all(p.source for p in need.parts)
    assert need.least() == sum(p.bytes for p in need.parts)


def test_vllm_defaults_when_the_recipe_is_silent(tmp_path, qwen3_8b):
    need = launch_need(recipe(tmp_path, qwen3_8b), qwen3_8b, GB10_TOTAL)
    assert need.setting("max_model_len") == 40960  # config.json's max_position_embeddings
    assert need.setting("max_num_seqs") == 1024  # a GPU of 70 GiB or more, not an A100
    assert need.setting("gpu_memory_utilization") == 0.9 and need.setting("kv_cache_dtype") == "auto"
    assert need.setting("max_num_batched_tokens") == 8192
    assert need.kv_bytes_per_token == 36 * 2 * 8 * 128 * 2  # auto: the checkpoint's bf16
    assert "vLLM default" in need.settings["max_num_seqs"].source
    small = launch_need(recipe(tmp_path, qwen3_8b), qwen3_8b, 32 * GIB, "NVIDIA GeForce RTX 5090")
    assert small.setting("max_num_seqs") == 256 and small.setting("max_num_batched_tokens") == 2048


def test_dtype_eager_and_a_fixed_kv_pool(tmp_path, qwen3_8b):
    need = launch_need(recipe(tmp_path, qwen3_8b, "--dtype", "float32", "--enforce-eager", "--max-model-len", "1024",
                              "--kv-cache-memory-bytes", "134217728"), qwen3_8b, GB10_TOTAL)
    assert need.part("weights") == 2 * header_bytes(qwen3_8b)  # bf16 tensors cast to float32
    assert need.part("cuda-graphs") == 0 and need.part("kv-cache") == 134217728 == need.fixed_kv_bytes
    assert need.kv_bytes_per_token == 36 * 2 * 8 * 128 * 4


def test_kv_per_sequence_counts_whole_blocks(tmp_path, qwen3_8b):
    need = launch_need(recipe(tmp_path, qwen3_8b, "--max-model-len", "1000"), qwen3_8b, GB10_TOTAL)
    assert need.kv_per_seq(1000) == need.kv_per_seq(1008) == 1008 * need.kv_bytes_per_token
    cpu = launch_need(recipe(tmp_path, qwen3_8b, "--max-model-len", "1000", "--block-size", "128"), qwen3_8b, GB10_TOTAL)
    assert cpu.kv_per_seq(1000) == 1024 * cpu.kv_bytes_per_token and cpu.block_bytes == 128 * cpu.kv_bytes_per_token
    assert cpu.settings["block_size"].source == "recipe probe (--block-size 128)"


@pytest.mark.parametrize("flags, message", [
    (("--max-num-batched-tokens", "lots"), "--max-num-batched-tokens 'lots' is not a whole number"),
    (("--max-model-len", "x"), "--max-model-len 'x' is not a whole number"),
    (("--max-model-len", "1.5K"), "--max-model-len '1.5K' is not a whole number"),  # vLLM: no decimals with K
    (("--kv-cache-dtype", "int3"), "--kv-cache-dtype int3: vLLM refuses it"),
    (("--speculative-config", "{{bad"), "--speculative-config is not JSON"),
    # vLLM refuses a share outside (0, 1]: nan ended in an internal error, -1 and 1.5 were judged as shares
    (("--gpu-memory-utilization", "nan"), "--gpu-memory-utilization 'nan' is not a fraction above 0 and at most 1"),
    (("--gpu-memory-utilization", "-1"), "--gpu-memory-utilization '-1' is not a fraction above 0 and at most 1"),
    (("--gpu-memory-utilization", "1.5"), "--gpu-memory-utilization '1.5' is not a fraction above 0 and at most 1"),
    (("--gpu-memory-utilization", "0"), "--gpu-memory-utilization '0' is not a fraction above 0 and at most 1"),
])
def test_bad_values_are_one_line(tmp_path, qwen3_8b, flags, message):
    from sparkdoctor.audit.errors import AuditError

    with pytest.raises((NeedError, AuditError)) as info:
        launch_need(recipe(tmp_path, qwen3_8b, *flags), qwen3_8b, GB10_TOTAL)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_which_commands_launch_vllm():
    from sparkdoctor.memory.need import launches_vllm

    assert launches_vllm(["vllm", "serve", "/m"]) and launches_vllm(["/opt/venv/bin/vllm", "serve", "/m", "--port", "1"])
    assert launches_vllm(["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m"])
    assert not launches_vllm(["python3", "-m", "tests.bench.sse_server", "vllm"]) and not launches_vllm(["sglang", "serve"])


@pytest.mark.parametrize("flags, setting, value", [
    (("--max-model-len", "32k"), "max_model_len", 32_000), (("--max-model-len", "32K"), "max_model_len", 32_768),
    (("--max-num-batched-tokens", "16k"), "max_num_batched_tokens", 16_000),
    (("--kv-cache-memory-bytes", "4G"), None, 4 * GIB), (("--kv-cache-memory-bytes", "2.5g"), None, 2_500_000_000),
])
def test_integers_in_vllms_own_forms_are_read_as_vllm_reads_them(tmp_path, qwen3_8b, flags, setting, value):
    """vLLM 0.32 reads these flags with human_readable_int (vllm/utils/argparse_utils.py): 32k, 32K, 4G. They were
    "not a int" / "not a whole number", exit 2, for a recipe vLLM starts."""
    need = launch_need(recipe(tmp_path, qwen3_8b, *flags), qwen3_8b, GB10_TOTAL)
    assert (need.setting(setting) if setting else need.fixed_kv_bytes) == value


def test_max_model_len_auto_is_judged_at_the_models_own_length(tmp_path, qwen3_8b):
    """--max-model-len auto (or -1): vLLM fits the length to the memory. It was read as a length of -1 (a KV cache
    of nothing, "fits" with 0 full-length sequences); it is judged at the model's own length, and says so."""
    for spelled in ("auto", "-1"):
        need = launch_need(recipe(tmp_path, qwen3_8b, "--max-model-len", spelled), qwen3_8b, GB10_TOTAL)
        assert need.setting("max_model_len") == 40960
        assert "vLLM fits the length to the memory" in need.settings["max_model_len"].source


def test_underscored_flags_are_read_as_vllm_reads_them(tmp_path, qwen3_8b):
    """vLLM's FlexibleArgumentParser takes `--max_model_len` for `--max-model-len`. A recipe spelled that way was judged
    at vLLM's defaults (0.9 and the model's own length), so a launch asking for 0.95 was "fits"."""
    spelled = launch_need(recipe(tmp_path, qwen3_8b, "--max_model_len", "8192", "--gpu_memory_utilization=0.95",
                                 "--max_num_seqs", "4", "--enforce_eager", "--kv_cache_memory_bytes", "2G"), qwen3_8b, GB10_TOTAL)
    assert spelled.setting("max_model_len") == 8192 and spelled.setting("gpu_memory_utilization") == 0.95
    assert spelled.setting("max_num_seqs") == 4 and spelled.setting("enforce_eager") is True
    assert spelled.fixed_kv_bytes == 2 * GIB


def test_settings_from_a_config_file_are_sized_the_command_line_winning(tmp_path, qwen3_8b):
    """`--config FILE.yaml` made the launch unsized ("vLLM takes settings from that file that the memory verdict does
    not read"); vLLM puts the file's options before the command line's, so a flag on the command line wins."""
    from sparkdoctor.memory.need import Unsized

    (tmp_path / "serve.yaml").write_text("max-model-len: 2048\nmax_num_seqs: 3\ngpu-memory-utilization: 0.5\n")
    need = launch_need(recipe(tmp_path, qwen3_8b, "--config", str(tmp_path / "serve.yaml"), "--max-num-seqs", "2"),
                       qwen3_8b, GB10_TOTAL)
    assert need.setting("max_model_len") == 2048 and need.setting("gpu_memory_utilization") == 0.5
    assert need.setting("max_num_seqs") == 2
    assert "(--config " in need.settings["max_model_len"].source and "max-model-len 2048" in need.settings["max_model_len"].source
    with pytest.raises(Unsized, match=r"--config .*gone.yaml: no such file"):
        launch_need(recipe(tmp_path, qwen3_8b, "--config", str(tmp_path / "gone.yaml")), qwen3_8b, GB10_TOTAL)


@pytest.mark.parametrize("flags, message", [
    (("--max-model-len", "-5"), "--max-model-len -5 must be a whole number of at least 1"),
    (("--max-model-len", "0"), "--max-model-len 0 must be a whole number of at least 1"),
    (("--max-num-seqs", "-100000"), "--max-num-seqs -100000 must be a whole number of at least 1"),
])
def test_lengths_and_counts_below_one_are_refused(tmp_path, qwen3_8b, flags, message):
    """They were "fits; 0 sequence(s) of -5 tokens"."""
    with pytest.raises(NeedError, match=message):
        launch_need(recipe(tmp_path, qwen3_8b, *flags), qwen3_8b, GB10_TOTAL)


def test_a_model_with_attention_but_no_kv_heads_is_not_sized(tmp_path, qwen3_8b):
    broken = _with_config(tmp_path / "no-heads", qwen3_8b, head_dim=0)
    with pytest.raises(NeedError, match="no KV heads or a head size of 0"):
        launch_need(recipe(tmp_path, broken), broken, GB10_TOTAL)


def test_a_float32_checkpoint_is_sized_at_vllms_bfloat16(tmp_path, qwen3_8b):
    """vLLM's --dtype auto casts a float32 checkpoint to bfloat16 on CUDA (config/model.py _resolve_auto_dtype):
    its KV cache was sized at 4 bytes a value, half the sequences that fit."""
    f32 = _with_config(tmp_path / "f32", qwen3_8b, torch_dtype="float32")
    bf16 = launch_need(recipe(tmp_path, qwen3_8b), qwen3_8b, GB10_TOTAL)
    cast = launch_need(recipe(tmp_path, f32, name="f32"), f32, GB10_TOTAL)
    assert cast.kv_bytes_per_token == bf16.kv_bytes_per_token
    assert "cast to bfloat16" in cast.settings["dtype"].source


def test_sliding_window_layers_hold_the_window_and_a_prefill_chunk_as_vllm_sizes_them(tmp_path):
    """gpt-oss-20b: 12 full-attention layers and 12 of a 128-token window, 2,048 bytes a token a layer. vLLM sizes a
    sliding layer's sequence at cdiv(min(window - 1 + --max-num-batched-tokens, --max-model-len), block) + 1 blocks
    (SlidingWindowSpec.max_memory_usage_bytes): a prefill chunk is attended beside the window. It was sized at the
    window alone (128 tokens), 1.9 GiB short of what vLLM asks for one 8,192-token sequence here."""
    from tests.audit import builders

    model = builders.gpt_oss_20b(tmp_path / "gpt-oss-20b")
    need = launch_need(recipe(tmp_path, model, "--max-model-len", "8192"), model, GB10_TOTAL)
    assert need.setting("max_num_batched_tokens") == 8192
    window_tokens = (-(-min(128 - 1 + 8192, 8192) // 16) + 1) * 16  # 513 blocks
    assert need.kv_per_seq(8192) == 12 * 2048 * 8192 + 12 * 2048 * window_tokens
    small = launch_need(recipe(tmp_path, model, "--max-model-len", "8192", "--max-num-batched-tokens", "256", name="small"), model,
                        GB10_TOTAL)
    assert small.kv_per_seq(8192) == 12 * 2048 * 8192 + 12 * 2048 * (-(-(128 - 1 + 256) // 16) + 1) * 16


def test_an_auto_length_is_fitted_to_the_share_as_vllm_fits_it(tmp_path, qwen3_8b):
    """--max-model-len auto: vLLM fits the length to its KV pool and fails only when not one block fits
    (_auto_fit_max_model_len). It was judged at the model's own length and refused ("23.9 GiB asked, less than the
    24.2 GiB it needs") although vLLM starts with a shorter length."""
    from sparkdoctor.memory.findings import findings
    from sparkdoctor.memory.verdict import FITS, judge
    from tests.memory.test_verdict import box

    have = box(tmp_path, available_gib=64)
    need = launch_need(recipe(tmp_path, qwen3_8b, "--max-model-len", "auto", "--gpu-memory-utilization", "0.2"), qwen3_8b,
                       have.pool_bytes)
    assert need.auto_length and need.setting("max_model_len") == 40960
    verdict = judge(need, have)
    assert verdict.outcome == FITS, verdict.reasons
    assert 0 < verdict.max_model_len < 40960 and verdict.max_model_len % 16 == 0
    assert need.least(max_model_len=verdict.max_model_len) <= verdict.share_bytes < need.least(max_model_len=verdict.max_model_len + 16)
    assert f"sequence(s) of {verdict.max_model_len} tokens" in findings(verdict)[0]["title"]
    # the same length written out is not fitted: vLLM refuses it
    written = judge(launch_need(recipe(tmp_path, qwen3_8b, "--max-model-len", "40960", "--gpu-memory-utilization", "0.2",
                                       name="written"), qwen3_8b, have.pool_bytes), have)
    assert written.outcome != FITS


def _with_config(folder, model, **changes):
    """`model`'s shards (linked) under `folder`, with its config.json changed by `changes`."""
    folder.mkdir()
    for f in model.iterdir():
        if f.name != "config.json":
            (folder / f.name).symlink_to(f)
    (folder / "config.json").write_text(json.dumps({**json.loads((model / "config.json").read_text()), **changes}))
    return folder
