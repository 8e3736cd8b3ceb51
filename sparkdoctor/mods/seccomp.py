"""The seccomp filter a mod's script runs under (handed to bubblewrap as `--seccomp FD`): no unix sockets, no keyrings.

A network namespace cuts a script off TCP/UDP and abstract unix sockets, but not off a socket *file*: anything
that can see /var/run/docker.sock, a D-Bus or systemd socket under /run/user, podman's or an ssh agent's can
connect() to it. The sandbox hides those folders; this filter closes the class whatever is visible:

  - socket() is allowed for AF_INET and AF_INET6 (they end in the sandbox's own network namespace, where a
    download fails as "Network is unreachable" and the verdict can say so) and for AF_NETLINK's NETLINK_ROUTE
    (glibc's getaddrinfo asks it; it is the namespace's own); every other family fails (EPERM): AF_UNIX, so no
    unix socket can be made and none can connect, and the families a network namespace does not confine, such
    as AF_VSOCK (on a virtual machine, the hypervisor's services), whatever the kernel has;
  - socketpair(AF_UNIX, ...) is allowed for SOCK_STREAM only (Python's asyncio makes one for itself): a stream
    pair is connected from birth and the kernel refuses connect() and sendto() with an address on it; a datagram
    pair could be re-pointed at any socket file, so it fails, as every other family does;
  - io_uring_setup/enter/register fail: io_uring makes and connects sockets without these system calls;
  - add_key, request_key and keyctl fail: the kernel's keyrings are not namespaced by bubblewrap, so a script
    inherited the caller's session keyring and read its keys (as `nobody` too: a possessor's permission), and
    request_key's upcall runs /sbin/request-key outside the sandbox (a dns_resolver key looks a name up on the
    host's network);
  - a system call of another ABI (32-bit on a 64-bit kernel, x32) kills the process: those number their calls
    differently, and i386's socketcall() multiplexes every socket call.

The program is classic BPF built here with `struct` (about 25 instructions): libseccomp's Python binding is not
on PyPI as a wheel and needs the C library, and a filter this small is easier to read than to depend on.
Only the machines sparkdoctor runs on are known (aarch64: the DGX Spark; x86_64: CI and H100 boxes); elsewhere
`program()` returns None and no script is run.
"""

from __future__ import annotations

import errno
import platform
import struct
from typing import Any

Line = tuple[Any, ...]  # (code, k, jump-if-true label, jump-if-false label) or ("label", name)

# linux/audit.h, linux/filter.h, linux/seccomp.h
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
SYSCALLS = {  # socket, socketpair, then refused: io_uring_setup, io_uring_enter, io_uring_register, add_key,
    # request_key, keyctl
    "x86_64": (41, 53, 425, 426, 427, 248, 249, 250),
    "aarch64": (198, 199, 425, 426, 427, 217, 218, 219),
}
X32_BIT = 0x40000000
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, NETLINK_ROUTE = 1, 2, 10, 16, 0
SOCK_STREAM, SOCK_TYPE_MASK = 1, 0xF
LD_W_ABS, JEQ, JSET, ALU_AND, RET = 0x20, 0x15, 0x45, 0x54, 0x06
RET_ALLOW, RET_KILL_PROCESS = 0x7FFF0000, 0x80000000
RET_EPERM = 0x00050000 | errno.EPERM
NR, ARCH, ARG0, ARG1, ARG2 = 0, 4, 16, 24, 32  # offsets in struct seccomp_data (the low 32 bits of an argument: little endian)


def _assemble(lines: list[Line]) -> bytes:
    """Classic BPF from (code, k, jump-if-true label, jump-if-false label) and ("label", name) lines."""
    where: dict[str, int] = {}
    code: list[Line] = []
    for line in lines:
        if line[0] == "label":
            where[line[1]] = len(code)
        else:
            code.append(line)
    out = b""
    for at, (op, k, *jumps) in enumerate(code):
        jt, jf = (where[j] - at - 1 if j else 0 for j in (jumps + [None, None])[:2])
        out += struct.pack("=HBBI", op, jt, jf, k)
    return out


def program(machine: str | None = None) -> bytes | None:
    """The filter for this machine (`platform.machine()`), or None where sparkdoctor does not know its ABI."""
    machine = machine or platform.machine()
    if machine not in AUDIT_ARCH:
        return None
    socket, socketpair, *refused = SYSCALLS[machine]
    lines: list[Line] = [
        (LD_W_ABS, ARCH), (JEQ, AUDIT_ARCH[machine], None, "kill"),
        (LD_W_ABS, NR),
    ]
    if machine == "x86_64":
        lines.append((JSET, X32_BIT, "kill", None))
    lines += [(JEQ, socket, "socket", None), (JEQ, socketpair, "pair", None)]
    lines += [(JEQ, nr, "deny", None) for nr in refused]
    lines += [
        (RET, RET_ALLOW),
        ("label", "socket"), (LD_W_ABS, ARG0), (JEQ, AF_INET, "allow", None), (JEQ, AF_INET6, "allow", None),
        (JEQ, AF_NETLINK, None, "deny"), (LD_W_ABS, ARG2), (JEQ, NETLINK_ROUTE, "allow", "deny"),
        ("label", "pair"), (LD_W_ABS, ARG0), (JEQ, AF_UNIX, None, "deny"),
        (LD_W_ABS, ARG1), (ALU_AND, SOCK_TYPE_MASK), (JEQ, SOCK_STREAM, "allow", "deny"),
        ("label", "allow"), (RET, RET_ALLOW),
        ("label", "deny"), (RET, RET_EPERM),
        ("label", "kill"), (RET, RET_KILL_PROCESS),
    ]
    return _assemble(lines)
