"""Carry a server's output into its log file, line by line, and scan each line as it arrives.

One thread per stream (stdout, stderr) reads lines from the pipe, appends them to one log file, keeps the
last lines for error messages, and hands each to the symptom matcher (sparkdoctor.serve.logscan). A
hit is recorded the moment the line is printed, so a server that dies at startup is explained by the
known problem it printed, not just by its exit code.

What the server prints is kept in the log up to MAX_LOG_BYTES: a server stuck printing a warning in a loop wrote
to the state folder until the disk was full. Past that, its lines are still scanned and the last ones kept for
the error message; one line in the log says where it was cut, and sparkdoctor's own notes are still written.

The last line an error quotes is what a terminal would show: the text after a line's last carriage return (a
progress bar redraws itself with `\r`: its latest state, not its first), and a line still being printed (a bar that
has not reached its newline, as a server stuck loading its weights leaves it) counts too.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from sparkdoctor.matrix.symptoms import HasSymptoms, strip_ansi
from sparkdoctor.serve.logscan import Hit, match_line

TAIL_LINES = 40
MAX_LINE_BYTES = 256 * 1024  # a longer "line" (output with no newline) is read in pieces, never all at once
MAX_LOG_BYTES = 512 * 2**20  # of the server's own output kept in the log file


class LogPump:
    """Reads a child's streams into `log_path`; `hits` grows live (one hit per entry and symptom)."""

    def __init__(self, log_path: Path, entries: Sequence[HasSymptoms]):
        self.log_path = log_path
        self.entries = list(entries)
        self.hits: list[Hit] = []
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.lines = 0
        self.kept = 0  # bytes of the server's output written to the log
        self._seen: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._file = open(log_path, "a", encoding="utf-8", errors="replace")
        self._threads: list[threading.Thread] = []
        self._partial: dict[IO[bytes], tuple[int, str]] = {}  # per stream, the line it is still printing

    def start(self, *streams: IO[bytes] | None) -> None:
        for stream in filter(None, streams):
            thread = threading.Thread(target=self._read, args=(stream,), name="sparkdoctor-logpump", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _read(self, stream: IO[bytes]) -> None:
        pending = b""  # the line being printed: no newline yet
        with contextlib.suppress(OSError, ValueError):  # the pipe was closed under us at teardown
            read = getattr(stream, "read1", stream.read)  # what the pipe holds now, without waiting for more
            for chunk in iter(lambda: read(MAX_LINE_BYTES), b""):
                *lines, pending = (pending + chunk).split(b"\n")
                while len(pending) >= MAX_LINE_BYTES:  # a longer "line" is taken in pieces
                    lines.append(pending[:MAX_LINE_BYTES])
                    pending = pending[MAX_LINE_BYTES:]
                for raw in lines:
                    self.add(raw.decode("utf-8", errors="replace"), from_server=True)
                with self._lock:  # with the count of lines before it: newer than every line only while that holds
                    self._partial[stream] = (self.lines, pending.decode("utf-8", errors="replace"))
        with self._lock:
            self._partial.pop(stream, None)
        if pending:
            self.add(pending.decode("utf-8", errors="replace"), from_server=True)

    def add(self, line: str, from_server: bool = False) -> None:
        """Record one line of output (also used for sparkdoctor's own notes in the log)."""
        text = line.rstrip("\r\n")
        hits = match_line(text, self.entries) if self.entries else []
        with self._lock:
            self.lines += 1
            self.tail.append(strip_ansi(text))
            written = text + "\n"
            if from_server:
                size = len(written.encode("utf-8", errors="replace"))
                if self.kept + size > MAX_LOG_BYTES:
                    cut = self.kept <= MAX_LOG_BYTES
                    self.kept = MAX_LOG_BYTES + 1
                    written = (f"[sparkdoctor] the server's output past {MAX_LOG_BYTES >> 20} MiB is not kept here "
                               "(still scanned for known problems)\n") if cut else ""
                else:
                    self.kept += size
            with contextlib.suppress(OSError, ValueError):
                if written:
                    self._file.write(written)
                    self._file.flush()
            for hit in hits:
                if (hit.entry_id, hit.symptom) not in self._seen:
                    self._seen.add((hit.entry_id, hit.symptom))
                    self.hits.append(hit)

    def last_line(self) -> str:
        """The last non-empty line printed so far, one still being printed first ('' when none)."""
        with self._lock:
            printing = [text for after, text in self._partial.values() if after == self.lines]
            return next((line.strip() for line in map(_shown, [*printing, *reversed(self.tail)]) if line.strip()), "")

    def tail_lines(self) -> list[str]:
        with self._lock:
            return list(self.tail)

    def join(self, timeout: float) -> bool:
        """Wait until every stream reached EOF (the whole group closed its ends); False when one has not."""
        for thread in self._threads:
            thread.join(timeout)
        return not any(t.is_alive() for t in self._threads)

    def close(self) -> None:
        with self._lock:
            with contextlib.suppress(OSError):
                self._file.close()


def _shown(text: str) -> str:
    """`text` as a terminal shows it: its colour codes dropped, only what follows its last carriage return."""
    text = strip_ansi(text)
    return next((part for part in reversed(text.split("\r")) if part.strip()), text)
