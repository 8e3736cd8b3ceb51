"""On a real GPU box: what the memory preflight reads from NVML, and its verdict for a sparse Qwen3-8B at TP 1 and 2."""
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.getcwd())
from sparkdoctor.memory.findings import findings, preflight  # noqa: E402
from sparkdoctor.memory.have import read_have  # noqa: E402
from sparkdoctor.recipes import load  # noqa: E402
from tests.audit import builders  # noqa: E402

have = read_have()
print("nvml:", have.nvml, "unified:", have.unified, "devices:", [(t // 2**20, u // 2**20) for t, u in have.gpu_devices],
      "pool GiB:", round((have.pool_bytes or 0) / 2**30, 1), "usable GiB:", round((have.usable_bytes or 0) / 2**30, 1))
tmp = Path(tempfile.mkdtemp())
model = builders.qwen3_8b(tmp / "qwen3-8b", None)
for name, flags in (("tp1", ["--max-model-len", "32768"]), ("tp2", ["--max-model-len", "32768", "-tp", "2"]),
                    ("tp1-150G", ["--max-model-len", "32768", "--kv-cache-memory-bytes", "150G"]),
                    ("tp2-150G", ["--max-model-len", "32768", "--kv-cache-memory-bytes", "150G", "-tp", "2"])):
    path = tmp / f"{name}.toml"
    path.write_text(f'schema = 1\nname = "{name}"\nmodel = {json.dumps(str(model))}\n'
                    f'command = {json.dumps(["vllm", "serve", str(model), *flags])}\n')
    verdict = preflight(load(path), model, have)
    (finding,) = findings(verdict)
    print(name, verdict.outcome, "share GiB", round(verdict.share_bytes / 2**30, 1), "|", finding["title"][:160])
    print("   ", [r[:160] for r in verdict.reasons])
