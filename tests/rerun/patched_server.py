"""The streaming stand-in of tests/bench/sse_server.py with a "compile" switch whose worth depends on the
toolchain, for the fast rerun tests: `--compiled` streams a token every --fast seconds, unless the
environment has VLLM_SDTEST_PATCH set (a stand-in for a local patch that turns compile off: a VLLM_* env
var, so it is in the Facts fingerprint), in which case it streams as slowly as the eager arm (--delay)."""

from __future__ import annotations

import os
import sys

from tests.bench import sse_server

if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--enforce-eager"]  # eager is what the stand-in always does
    fast = None
    if "--compiled" in args:
        i = args.index("--compiled")
        fast = args[i + 1]
        del args[i:i + 2]
    if fast is not None and not os.environ.get("VLLM_SDTEST_PATCH"):
        i = args.index("--delay")
        args[i + 1] = fast
    sse_server.main(args)
