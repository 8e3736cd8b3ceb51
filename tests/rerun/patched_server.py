"""The streaming stand-in of tests/bench/sse_server.py with vLLM's eager/compile switch, for the fast rerun
tests: `--fast S` is the token interval when compiled, `--delay S` when eager. Compiled means no
`--enforce-eager`, unless the environment has VLLM_SDTEST_PATCH set (a stand-in for a local patch that
turns compile off: a VLLM_* env var, so it is in the Facts fingerprint): then it streams as slowly as eager."""

from __future__ import annotations

import os
import sys

from tests.bench import sse_server

if __name__ == "__main__":
    args = sys.argv[1:]
    eager = "--enforce-eager" in args
    args = [a for a in args if a != "--enforce-eager"]
    i = args.index("--fast")
    fast = args[i + 1]
    del args[i:i + 2]
    if not eager and not os.environ.get("VLLM_SDTEST_PATCH"):
        args[args.index("--delay") + 1] = fast
    sse_server.main(args)
