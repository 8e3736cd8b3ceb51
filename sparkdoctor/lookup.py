"""Name lookups with a time limit, and connections whose lookup is inside their timeout.

A socket's timeout bounds connecting and reading, never the name lookup before them (getaddrinfo): glibc's
resolver waits on unanswered name servers, search domains and NSS modules (mdns, sssd, ldap) for as long as
they take, and it does not return on a signal, so not even the run's --timeout (SIGALRM) could end it. Here
the lookup runs in a daemon thread that is left behind when its time is up; the caller gets TimeoutError.

A daemon thread never holds the process at its exit. While a name's lookup is unanswered, every other caller asking
for the same name waits on that one lookup, counted from when it began: a run asking again and again (matrix track,
one request per package) neither starts a thread per request nor waits its full timeout again each time.
"""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

# one row of socket.getaddrinfo: (family, type, proto, canonname, sockaddr)
AddrInfo = tuple[socket.AddressFamily, socket.SocketKind, int, str, tuple[str, int] | tuple[str, int, int, int] | tuple[int, bytes]]


class Lookup(Future[list[AddrInfo]]):
    """One name lookup under way in a daemon thread, shared by every caller that asks for the same name meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.began = time.monotonic()

    def left(self, timeout: float) -> float:
        """What is left of `timeout` counted from when the lookup began (a caller that joined it late waits less)."""
        return max(0.0, self.began + timeout - time.monotonic())

    def cancel(self) -> bool:
        return False  # one waiter giving up (asyncio.wrap_future cancels on its timeout) never ends it for the others

    def set_running_or_notify_cancel(self) -> bool:
        return False  # what wrap_future asks before it cancels; on a lookup already shared it raised RuntimeError


_pending: dict[tuple[str, int | str | None, int, int], Lookup] = {}
_pending_lock = threading.Lock()


def start(host: str, port: int | str | None, family: int = 0, kind: int = socket.SOCK_STREAM) -> Lookup:
    """socket.getaddrinfo(host, port, family, kind) begun in a daemon thread, or the one already under way for the
    same name: wait on it as long as you choose (its `left(timeout)`)."""
    key = (host, port, family, kind)
    with _pending_lock:
        if (answer := _pending.get(key)) is not None:
            return answer
        answer = _pending[key] = Lookup()

    def look() -> None:
        try:
            rows: list[AddrInfo] | BaseException = list(socket.getaddrinfo(host, port, family, kind))
        except UnicodeError:  # Python's idna codec: a part of the name empty or over 63 characters; an OSError as any
            rows = socket.gaierror(socket.EAI_NONAME, "not a host name (a part of it is empty or longer than 63 "
                                   "characters)")
        except BaseException as exc:  # handed to the caller, whatever it is
            rows = exc
        with _pending_lock:
            _pending.pop(key, None)  # answered: the next caller asks afresh
        if isinstance(rows, BaseException):
            answer.set_exception(rows)
        else:
            answer.set_result(rows)

    try:
        threading.Thread(target=look, name="sparkdoctor-lookup", daemon=True).start()
    except RuntimeError as exc:  # no thread to be had (a pids limit): the lookup fails, not the caller
        with _pending_lock:
            _pending.pop(key, None)
        answer.set_exception(OSError(f"looking up the name {host[:200]!r}: {exc}"))
    return answer


def getaddrinfo(host: str, port: int | str | None, timeout: float, family: int = 0,
                kind: int = socket.SOCK_STREAM) -> list[AddrInfo]:
    """socket.getaddrinfo(host, port, family, kind), or TimeoutError when it has not answered in `timeout` s (counted
    from when the name's lookup under way began)."""
    try:
        ask = start(host, port, family, kind)
        return ask.result(ask.left(timeout))
    except FutureTimeout:
        raise TimeoutError(f"looking up the name {host[:200]!r} took more than {timeout:g} s") from None


def create_connection(address: tuple[str, int], timeout: float, source_address: tuple[str, int] | None = None,
                      *_: object) -> socket.socket:
    """socket.create_connection, with the name lookup and every connect attempt within `timeout` in all (the
    socket keeps `timeout` for its own waits). The signature fits http.client's _create_connection."""
    until = time.monotonic() + timeout
    error: OSError | None = None
    for family, kind, proto, _name, sockaddr in getaddrinfo(address[0], address[1], timeout):
        left = until - time.monotonic()
        if left <= 0:
            break
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(left)
            if source_address:
                sock.bind(source_address)
            sock.connect(sockaddr)
            sock.settimeout(timeout)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
    raise error or TimeoutError(f"connecting to {address[0][:200]} took more than {timeout:g} s")


def getfqdn(timeout: float) -> str | None:
    """socket.getfqdn() (a reverse lookup of this machine's name, as unbounded as any), or None when it has not
    answered in `timeout` s."""
    answer: Future[str] = Future()

    def look() -> None:
        try:
            answer.set_result(socket.getfqdn())
        except BaseException as exc:  # handed to the caller, whatever it is
            answer.set_exception(exc)

    threading.Thread(target=look, name="sparkdoctor-lookup", daemon=True).start()
    try:
        return answer.result(max(0.0, timeout))
    except FutureTimeout:
        return None
