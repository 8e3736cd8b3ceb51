"""A SIGTERM (or Ctrl-C) that arrives while the bench's event loop is inside a transport callback is still the
signal: the run ends as interrupted (proc.Interrupted, exit 128+N at the entry point), never as the server's failure.

asyncio lets only KeyboardInterrupt and SystemExit out of its transports: the Interrupted the handler raised there
became the transport's fatal error (logged with a traceback), so a request cut "in the middle of the answer", and
`bench` exited 4 blaming the server. Here the signal is sent to this very process from inside aiohttp's
data_received, where one in five SIGTERMs sent to a running `bench` landed."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator

import aiohttp.client_proto
import pytest

from sparkdoctor import proc
from sparkdoctor.bench.measure import measure_url
from sparkdoctor.bench.workload import Workload
from tests.bench.sse_server import Style, serve

WORK = Workload(max_tokens=8, prompt_words=5, concurrency=(1,), rounds=3, warmup=0, request_timeout=30)


@pytest.fixture
def handlers() -> Iterator[None]:
    """sparkdoctor's own signal handlers, as its entry point installs them (the test process's put back after)."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a runner started in the background may inherit it ignored
    proc.install_signal_handlers()
    try:
        yield
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)


def _signal_in_data_received(monkeypatch: pytest.MonkeyPatch, sig: int, body: bool) -> list[bytes]:
    """Send `sig` to this process from inside the transport's first call of data_received (with `body`: the first
    that brings a stream's events without the answer's head, so in the middle of a streamed answer)."""
    original = aiohttp.client_proto.ResponseHandler.data_received
    calls: list[bytes] = []

    def data_received(self: aiohttp.client_proto.ResponseHandler, data: bytes) -> None:
        by_transport = sys._getframe(1).f_code.co_name == "_read_ready__data_received"  # not a task's resume_reading
        if by_transport and not calls and (not body or (b"data:" in data and not data.startswith(b"HTTP/"))):
            calls.append(data)
            os.kill(os.getpid(), sig)  # its handler runs here, inside the transport's callback
        original(self, data)

    monkeypatch.setattr(aiohttp.client_proto.ResponseHandler, "data_received", data_received)
    return calls


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_inside_a_streamed_answer_is_the_signal_not_a_failed_request(handlers, monkeypatch, caplog, sig):
    with serve(Style(delay=0.002)) as (url, _style):  # paced: the events come in reads of their own
        calls = _signal_in_data_received(monkeypatch, sig, body=True)
        with pytest.raises(proc.Interrupted) as raised:
            measure_url(url, None, WORK)
    assert raised.value.signum == sig and calls
    # no "Fatal error: protocol.data_received() call failed." with the signal's traceback
    assert not [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], proc.Interrupted)]

