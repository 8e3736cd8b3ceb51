"""Parsers for the output of the fabric tools `fleet check --measure` runs: perftest's ib_write_bw and
nccl-tests' all_reduce_perf. Pure functions over text: a line they do not know is skipped, never an exception.
(The node probe reads devices and GID tables from sysfs; tests/fleet/toolformats.py reads ibv_devinfo and
show_gids output to check that the probe sees what those tools see.)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TypedDict

MIB_PER_S_TO_GBPS = 8 * 1.048576 / 1000  # perftest's "MB/sec" is MiB/s


@dataclass
class WriteBw:
    device: str | None
    gid_index: int | None
    average_gbps: float | None
    peak_gbps: float | None
    message_bytes: int | None
    qps: int | None


def parse_ib_write_bw(text: str) -> WriteBw:
    """perftest `ib_write_bw` (client or server side): the result row under the `#bytes` header, in Gb/s
    whether it was run with --report_gbits or in MB/sec (MiB/s)."""
    device = _field(text, "Device")
    gid = _int(_field(text, "GID index"))
    qps = _int(_field(text, "Number of qps"))
    unit, result = None, None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("#bytes"):
            unit = "gbit" if "Gb/sec" in line else "mib"
            for row in lines[i + 1:]:
                cols = row.split()
                if len(cols) >= 4 and cols[0].isdigit():
                    result = cols
                    break
    if result is None:
        return WriteBw(device, gid, None, None, None, qps)
    scale = 1.0 if unit == "gbit" else MIB_PER_S_TO_GBPS
    peak, average = _float(result[2]), _float(result[3])
    return WriteBw(device, gid, None if average is None else average * scale, None if peak is None else peak * scale,
                   _int(result[0]), qps)


class Row(TypedDict):
    bytes: int
    busbw_gbs: float | None  # out-of-place
    algbw_gbs: float | None
    wrong: int | None


@dataclass
class AllReduce:
    rows: list[Row] = field(default_factory=list)
    average_busbw_gbs: float | None = None
    ranks: int = 0

    @property
    def peak_busbw_gbs(self) -> float | None:
        values = [busbw for r in self.rows if (busbw := r["busbw_gbs"]) is not None]
        return max(values) if values else None

    @property
    def wrong(self) -> int:
        return sum(wrong for r in self.rows if (wrong := r["wrong"]) is not None)

    @property
    def largest_bytes(self) -> int | None:
        return max((r["bytes"] for r in self.rows), default=None)


def parse_all_reduce_perf(text: str) -> AllReduce:
    """nccl-tests `all_reduce_perf` (2.x): the data rows (size count type redop root, then out-of-place
    time algbw busbw #wrong and in-place time algbw busbw #wrong), "# Avg bus bandwidth" and the ranks."""
    found = AllReduce()
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#  Rank") or stripped.startswith("#   Rank"):
            found.ranks += 1
        elif stripped.startswith("# Avg bus bandwidth"):
            found.average_busbw_gbs = _float(stripped.rsplit(":", 1)[-1])
        elif stripped and not stripped.startswith("#"):
            cols = stripped.split()
            size = _int(cols[0]) if len(cols) >= 9 and cols[0].isdigit() and cols[1].isdigit() else None  # int() refuses "²"
            if size is not None:
                found.rows.append({"bytes": size, "busbw_gbs": _float(cols[7]), "algbw_gbs": _float(cols[6]),
                                   "wrong": _int(cols[8]) if cols[8] != "N/A" else None})
    return found


def _field(text: str, name: str) -> str | None:
    m = re.search(rf"{re.escape(name)}\s*:\s*(\S+)", text)
    return m.group(1) if m else None


def _int(text: object) -> int | None:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


def _float(text: object) -> float | None:
    """A finite number, or None: a tool's (or a node's) "nan" or "inf" is no measurement."""
    try:
        value = float(str(text).strip())
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None
