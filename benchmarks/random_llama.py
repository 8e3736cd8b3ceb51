"""A Llama-shaped model with random weights, in a private Hugging Face cache, for benchmarks that need a real
GPU server and no model hub (bench_ab_noise.py on the H100 box: its restart noise under `transformers serve`).

The tokenizer is the tests' WordLevel one (every word `w0..w999` is one token). Generation is greedy with every
special token suppressed, so each request returns exactly max_tokens (`transformers serve` refuses ignore_eos).

    python benchmarks/random_llama.py HF_HOME ORG/NAME [--hidden 2048 --layers 16 --heads 32 --kv-heads 8
                                                      --intermediate 8192 --dtype bfloat16]
Then serve it with HF_HOME=HF_HOME HF_HUB_OFFLINE=1 (benchmarks/recipes/tfserve-gpu.toml).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def build(hf_home: Path, repo_id: str, args: argparse.Namespace) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        GenerationConfig,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
    )

    from tests.tiny_tokenizer import TOKENIZER_PRELUDE

    org, name = repo_id.split("/")
    repo = hf_home / "hub" / f"models--{org}--{name}"
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True, exist_ok=True)
    scope = {"sys": sys, "Path": Path, "torch": torch, "Tokenizer": Tokenizer, "models": models,
             "pre_tokenizers": pre_tokenizers}
    sys.argv = [sys.argv[0], str(snapshot)]  # the prelude writes to Path(sys.argv[1])
    exec(TOKENIZER_PRELUDE, scope)  # noqa: S102  (our own text: the tests' tokenizer, byte for byte)
    tok, vocab = scope["tok"], scope["vocab"]
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<unk>", chat_template=scope["template"])
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=args.hidden, intermediate_size=args.intermediate,
                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      num_key_value_heads=args.kv_heads, max_position_embeddings=4096, bos_token_id=1,
                      eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(getattr(torch, args.dtype))
    model.generation_config = GenerationConfig(do_sample=False, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                                               suppress_tokens=[0, 1, 2])
    model.save_pretrained(snapshot, safe_serialization=True)
    fast.save_pretrained(snapshot)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text("0" * 40)
    params = sum(p.numel() for p in model.parameters())
    print(f"{repo_id}: {params / 1e9:.2f} B parameters ({args.dtype}) in {snapshot}")
    return snapshot


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_home", type=Path)
    ap.add_argument("repo_id")
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--intermediate", type=int, default=8192)
    ap.add_argument("--dtype", default="bfloat16")
    args = ap.parse_args()
    build(args.hf_home, args.repo_id, args)


if __name__ == "__main__":
    main()
