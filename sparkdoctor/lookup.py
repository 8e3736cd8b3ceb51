"""Name lookups with a time limit, and connections whose lookup is inside their timeout.

A socket's timeout bounds connecting and reading, never the name lookup before them (getaddrinfo): glibc's
resolver waits on unanswered name servers, search domains and NSS modules (mdns, sssd, ldap) for as long as
they take, and it does not return on a signal, so not even the run's --timeout (SIGALRM) could end it. Here
the lookup runs in a daemon thread that is left behind when its time is up; the caller gets TimeoutError.
"""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

# one row of socket.getaddrinfo: (family, type, proto, canonname, sockaddr)
AddrInfo = tuple[socket.AddressFamily, socket.SocketKind, int, str, tuple[str, int] | tuple[str, int, int, int] | tuple[int, bytes]]


def start(host: str, port: int | str | None, family: int = 0, kind: int = socket.SOCK_STREAM) -> Future[list[AddrInfo]]:
    """socket.getaddrinfo(host, port, family, kind) begun in a daemon thread: wait on it as long as you choose."""
    answer: Future[list[AddrInfo]] = Future()

    def look() -> None:
        try:
            answer.set_result(list(socket.getaddrinfo(host, port, family, kind)))
        except BaseException as exc:  # handed to the caller, whatever it is
            answer.set_exception(exc)

    threading.Thread(target=look, name="sparkdoctor-lookup", daemon=True).start()
    return answer


def getaddrinfo(host: str, port: int | str | None, timeout: float, family: int = 0,
                kind: int = socket.SOCK_STREAM) -> list[AddrInfo]:
    """socket.getaddrinfo(host, port, family, kind), or TimeoutError when it has not answered in `timeout` s."""
    try:
        return start(host, port, family, kind).result(max(0.0, timeout))
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
