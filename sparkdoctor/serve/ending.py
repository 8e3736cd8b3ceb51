"""How a launched server's end is told in one line: how it exited, its last log line and the known problems its
log matched (serve/launch.py's errors)."""

from __future__ import annotations

from pathlib import Path

from sparkdoctor import proc
from sparkdoctor.serve.logpump import LogPump


def died(name: str, code: int | None, after: float, when: str, pump: LogPump, log_path: Path) -> str:
    if code is not None and code < 0:
        how = f"was killed by {proc.signal_name(-code)}"
    elif code is not None and code > 128:  # a container's main process killed by a signal
        how = f"exited with status {code} ({proc.signal_name(code - 128)})"
    else:
        how = f"exited with status {code}"
    return f"{name}: the server {how} after {after:.1f}s {when}; {evidence(pump, log_path)}"


def evidence(pump: LogPump, log_path: Path) -> str:
    last = pump.last_line() or "(no output)"
    if len(last) > 300:
        last = last[:300] + "..."
    known = ", ".join(dict.fromkeys(h.entry_id for h in pump.hits))
    matched = f"known problems in its log: {known}" if known else "no known problem matched its log"
    return f"last log line: {last}; {matched} (log: {log_path})"
