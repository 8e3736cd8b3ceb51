"""`matrix track` end to end, once its options are checked (sparkdoctor/commands/matrix_tracking.py): the matrix
loaded, the new releases read, every entry judged; the answer its views draw (console, JSON, markdown) with the
exit code it earns: 0 nothing to change; 1 an edit is proposed (an entry's, or moving tracked-through) or a check is
broken; 2 a registry read failed."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkdoctor.errors import InputError
from sparkdoctor.exitcodes import EXIT_OK, EXIT_VERIFY_CONTRADICTED, EXIT_VERIFY_ERROR
from sparkdoctor.matrix import load
from sparkdoctor.released import Reader
from sparkdoctor.track.run import NEEDS_EDIT, track
from sparkdoctor.track.transitions import probe_track
from sparkdoctor.verify.modes import terminal_log


@dataclass
class TrackAnswer:
    """The tracking result (TrackResult.to_dict) and what reading it cost."""

    document: dict[str, Any]

    @property
    def exit_code(self) -> int:
        if any(p.get("error") for p in self.document["packages"]):
            return EXIT_VERIFY_ERROR
        # Any proposed edit earns 1: an entry's, --probe's new entry, and moving tracked-through or tracked_on (new
        # releases every entry still holds on), which the daily job only keeps through the pull request exit 1 opens.
        proposed = self.document["proposals"]
        return EXIT_VERIFY_CONTRADICTED if proposed or any(e["verdict"] in NEEDS_EDIT for e in self.document["entries"]) else EXIT_OK

    def to_json(self) -> dict[str, object]:
        return self.document


def track_matrix(matrix_path: Path | None, through: dict[str, str], platform: str, python: str, since: str | None = None,
                 probe: str | None = None) -> TrackAnswer:
    """A MatrixError or RemoteError (exit 2) says itself; a matrix with nothing tracked is an InputError (2)."""
    matrix = load(matrix_path)
    if not matrix.tracking or not matrix.tracking.tracked:
        raise InputError(f"{matrix.source}: the matrix has no [tracked] table (package = \"tracked-through version\"); nothing to track")
    reader = Reader(platform, python)
    started = time.monotonic()
    try:
        result = track(matrix, reader, through, terminal_log(), since)
        if probe:  # `--probe`: the new releases' compilers and kernel sources, compiled for the arch (sparkdoctor.track.transitions)
            probed = probe_track(matrix, reader, result.packages, probe, terminal_log())
            result.proposals += probed.proposals
    finally:
        reader.close()
    doc = result.to_dict()
    if probe:
        doc["probe"] = probed.to_json()
    doc["cost"] = {"seconds": round(time.monotonic() - started, 1), "requests": reader.client.requests,
                   "bytes_read": reader.client.bytes_read}
    return TrackAnswer(doc)
