"""Unified memory: will this launch fit now, and with what settings; and why did a launch die.

The pipeline, one module per question, each returning a typed document (dataclasses with `to_dict()`):
  need.py        what a recipe's launch needs: the checkpoint's weights (exact, from the safetensors headers),
                 the KV cache at its --max-model-len, the reserve vLLM keeps beside them (each part says whether
                 it is exact, computed or an estimate, and from what), the --gpu-memory-utilization share;
  have.py        what the box has now: /proc/meminfo, the processes holding /dev/nvidia* open, NVML's compute
                 processes where it answers, containers' memory, a stated OS reserve (read under
                 SPARKDOCTOR_HOST_ROOT, so tests feed fixture trees);
  verdict.py     fits / fits with these settings / does not fit, with the numbers and what holds the rest;
  pernode.py     one launch split per node by its TP x PP and judged on every node's memory (`fleet check --recipe`);
  postmortem.py  a dead launch classified from the kernel log, the server's last lines and memory sampled
                 through the run: CUDA out of memory / OOM-killed / driver NO_MEMORY / hang / crash.
Nothing here renders or writes stdout: `recipe check`, `bench` and `explain` turn these documents into findings
(findings.py). Import the modules themselves: the launcher samples memory through have.py without loading the rest.
"""
