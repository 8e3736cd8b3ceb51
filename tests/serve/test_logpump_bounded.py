"""A launched server's output is kept in its run's log up to a bound: a server stuck printing a warning in a loop
wrote to the state folder until the disk was full. Past the bound its lines are still scanned and the last ones
kept; sparkdoctor's own notes are still written. A real pipe, fed from a thread."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

from sparkdoctor.serve import logpump
from sparkdoctor.serve.logpump import LogPump


@dataclass
class Entry:
    id: str
    symptoms: list[str] = field(default_factory=list)


def test_a_server_that_floods_its_output_fills_no_disk_and_is_still_scanned(tmp_path, monkeypatch):
    monkeypatch.setattr(logpump, "MAX_LOG_BYTES", 64 * 1024, raising=False)
    log = tmp_path / "server.log"
    pump = LogPump(log, [Entry("late-entry", ["LATE-SYMPTOM-7"])])
    read_end, write_end = os.pipe()
    reader = os.fdopen(read_end, "rb")

    def flood() -> None:
        with os.fdopen(write_end, "wb") as out:
            for i in range(2000):
                out.write(b"WARNING spam %06d " % i + b"x" * 1000 + b"\n")
            out.write(b"ERROR LATE-SYMPTOM-7 here\n")

    writer = threading.Thread(target=flood, daemon=True)
    writer.start()
    pump.start(reader)
    assert pump.join(60), "the pump did not reach the end of its stream"
    pump.add("[sparkdoctor] a note after the cut")
    pump.close()
    reader.close()
    size = log.stat().st_size
    text = log.read_text()
    assert size < 64 * 1024 + 1024, size
    assert text.count("is not kept here") == 1 and text.endswith("[sparkdoctor] a note after the cut\n")
    assert [h.entry_id for h in pump.hits] == ["late-entry"]
    assert pump.last_line() == "[sparkdoctor] a note after the cut" and pump.lines == 2002
