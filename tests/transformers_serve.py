"""A real non-vLLM OpenAI-compatible server for tests: Hugging Face `transformers serve` (transformers 5.23.0 on
torch 2.13.0+cpu), installed once, serving a tiny Llama built locally from a private HF cache (no model hub).

Why and how: /work/shared/research/real-server-for-tests.md. This server streams the "other" style a client
must tolerate: no `data: [DONE]` (the stream ends at EOF), `usage` inside the last chunk together with
`finish_reason`, and vLLM-only request fields refused. `ignore_eos` is refused too, so the model's
generation_config is greedy with every special token suppressed: each request returns exactly `max_tokens`.

Importable by any test module: `python()`, `hf_home()`, `serve_argv()`, `SERVE_ENV`, `MODEL`. Everything is
cached under SPARKDOCTOR_TEST_VENVS like the other test venvs.
"""

from __future__ import annotations

import os
from pathlib import Path

from sparkdoctor import proc
from tests import venvs
from tests.tiny_tokenizer import TOKENIZER_PRELUDE

VERSION = "5.23.0"
TORCH = "2.13.0"
MODEL = "sparkdoctor-tests/tiny-llama"  # the repo id it is served under (ORG/NAME in the private cache)
SERVE_FLAGS = ["--device", "cpu", "--dtype", "float32"]
_MODELS_VERSION = 1  # bump when _BUILD changes what it writes


def python() -> Path:
    """The python of a venv with transformers[serving] 5.23.0 and torch 2.13.0+cpu (about 45 s once)."""
    steps = [[*venvs.torch_cpu_source(TORCH), f"torch=={TORCH}+cpu", f"transformers[serving]=={VERSION}"]]
    return venvs.uv_venv("tfserve523", steps)


def bin_dir() -> Path:
    """The venv's bin/ (holds the `transformers` command)."""
    return python().parent


_BUILD = r'''
import sys
from pathlib import Path
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

''' + TOKENIZER_PRELUDE + r'''fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                               pad_token="<unk>", chat_template=template)
cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048, bos_token_id=1,
                  eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)
model = LlamaForCausalLM(cfg)
# Greedy, every special id suppressed (EOS included): each request returns exactly max_tokens.
model.generation_config = GenerationConfig(do_sample=False, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                                           suppress_tokens=[0, 1, 2])
model.save_pretrained(out, safe_serialization=True)
fast.save_pretrained(out)
print("ok")
'''


def hf_home() -> Path:
    """A private HF_HOME whose hub cache holds only MODEL (refs/main -> a snapshot of 40 zeros); built once."""
    py = python()

    def build(root: Path) -> None:
        org, name = MODEL.split("/")
        repo = root / "hub" / f"models--{org}--{name}"
        snapshot = repo / "snapshots" / ("0" * 40)
        snapshot.mkdir(parents=True)
        script = root / "build_model.py"
        script.write_text(_BUILD)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        done = proc.run([str(py), str(script), str(snapshot)], timeout=600, env=env)
        if not done.ok:
            raise RuntimeError(f"building the tiny model: {done.describe_failure()}\n{done.stderr[-3000:]}")
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text("0" * 40)

    return venvs.built_once(venvs.ROOT / f"tfserve-hfhome-v{_MODELS_VERSION}", build)


def serve_env() -> dict[str, str]:
    """The environment every launch needs: the private cache, offline."""
    return {"HF_HOME": str(hf_home()), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def serve_argv(*extra: str) -> list[str]:
    """`transformers serve MODEL ...` with the flags every test launch needs (the launcher adds --host/--port)."""
    return [str(bin_dir() / "transformers"), "serve", MODEL, *SERVE_FLAGS, *extra]
