"""The commands that read the ledger start without the bench's HTTP client: `history` and `conclusions` make no
request, and importing aiohttp cost each start a quarter second of CPU (through bench/run.py's types)."""

from __future__ import annotations

import subprocess
import sys

from sparkdoctor.ledger import Ledger

READ = """
import sys
from sparkdoctor.cli import main
for args in (["history", "--ledger", sys.argv[1], "--format", "json"], ["history", "--ledger", sys.argv[1]],
             ["conclusions", "--ledger", sys.argv[1]]):
    sys.argv = ["sparkdoctor", *args]
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, (args, exc.code)
print("aiohttp loaded:", "aiohttp" in sys.modules)
"""


def test_history_and_conclusions_never_import_the_http_client(tmp_path):
    path = tmp_path / "ledger.sqlite"
    Ledger(path).close()
    p = subprocess.run([sys.executable, "-c", READ, str(path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.rstrip().endswith("aiohttp loaded: False"), p.stdout[-2000:]
