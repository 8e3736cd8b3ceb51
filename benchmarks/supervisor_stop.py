"""How long a launched server outlives a SIGKILLed sparkdoctor: N times, a driver process launches the fake server
(tests/serve/fake_server.py: an HTTP server and a worker child) through serve.launch, is SIGKILLed, and the time
until /proc shows nothing left in the server's process group is taken.

    .venv/bin/python benchmarks/supervisor_stop.py [N]
"""

from __future__ import annotations

import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sparkdoctor.serve.groups import members  # noqa: E402
from tests.serve.test_supervisor import driver  # noqa: E402


def main(n: int) -> None:
    took = []
    for _ in range(n):
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["SPARKDOCTOR_STATE_DIR"] = str(Path(tmp) / "state")
            p, pgid, _pid = driver(Path(tmp))
            t0 = time.monotonic()
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
            while members(pgid):
                time.sleep(0.01)
            took.append(time.monotonic() - t0)
    print(f"{n} kills: group gone after median {statistics.median(took):.2f} s, max {max(took):.2f} s "
          f"({', '.join(f'{t:.2f}' for t in took)})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
