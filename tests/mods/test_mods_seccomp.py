"""The seccomp filter read instruction by instruction, for both machines sparkdoctor knows: the DGX Spark (aarch64)
cannot be run here, so its program is run through a small classic-BPF interpreter, as the kernel would run it
(x86_64's program is also run for real by bwrap in test_mods_sandbox)."""

from __future__ import annotations

import struct

import pytest

from sparkdoctor.mods import seccomp

ALLOW, EPERM, KILL = seccomp.RET_ALLOW, seccomp.RET_EPERM, seccomp.RET_KILL_PROCESS
SOCK_DGRAM, SOCK_CLOEXEC, AF_INET = 2, 0o2000000, 2


def run(program: bytes, arch: int, nr: int, *args: int) -> int:
    """What the filter returns for one system call (seccomp_data: nr, arch, ip, args; little endian)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    code = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    acc, pc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == seccomp.LD_W_ABS:
            acc = struct.unpack_from("<I", data, k)[0]
        elif op == seccomp.ALU_AND:
            acc &= k
        elif op == seccomp.RET:
            return k
        elif op in (seccomp.JEQ, seccomp.JSET):
            hit = acc == k if op == seccomp.JEQ else bool(acc & k)
            pc += jt if hit else jf
        else:
            raise AssertionError(f"unknown instruction {op:#x}")
        pc += 1


@pytest.mark.parametrize("machine", ["aarch64", "x86_64"])
def test_the_filter_refuses_unix_sockets_and_nothing_else_a_mod_needs(machine):
    program = seccomp.program(machine)
    assert program is not None and len(program) % 8 == 0
    arch = seccomp.AUDIT_ARCH[machine]
    socket_nr, pair_nr, *uring = seccomp.SYSCALLS[machine]
    assert run(program, arch, socket_nr, seccomp.AF_UNIX, seccomp.SOCK_STREAM) == EPERM
    assert run(program, arch, socket_nr, seccomp.AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC) == EPERM
    assert run(program, arch, socket_nr, AF_INET, seccomp.SOCK_STREAM) == ALLOW
    assert run(program, arch, pair_nr, seccomp.AF_UNIX, seccomp.SOCK_STREAM | SOCK_CLOEXEC) == ALLOW
    assert run(program, arch, pair_nr, seccomp.AF_UNIX, SOCK_DGRAM) == EPERM
    for nr in uring:
        assert run(program, arch, nr) == EPERM
    for nr in (0, 1, 56, 57, 59, 63, 64, 221):  # read, write, openat/clone, execve...: whatever they are here
        if nr not in (socket_nr, pair_nr):
            assert run(program, arch, nr, seccomp.AF_UNIX) == ALLOW
    other = next(a for m, a in seccomp.AUDIT_ARCH.items() if m != machine)
    assert run(program, other, 0) == KILL  # another ABI's numbers mean other calls
    assert run(program, 0x40000003, socket_nr) == KILL  # i386 (socketcall)


def test_x32_calls_are_killed_on_x86_64():
    program = seccomp.program("x86_64")
    assert program is not None
    assert run(program, seccomp.AUDIT_ARCH["x86_64"], seccomp.X32_BIT | 41, seccomp.AF_UNIX) == KILL


def test_an_unknown_machine_gets_no_filter():
    assert seccomp.program("riscv64") is None


def test_on_an_unknown_machine_no_script_is_run(tmp_path, monkeypatch, sandbox_tools):
    from sparkdoctor.mods.judge import judge_mod
    from sparkdoctor.mods.model import Verdict
    from sparkdoctor.mods.trees import SiteTree

    monkeypatch.setattr(seccomp.platform, "machine", lambda: "riscv64")
    flag = tmp_path / "ran"
    script = tmp_path / "s.sh"
    script.write_text(f"touch {flag}\n")
    (tmp_path / "site").mkdir()
    result = judge_mod(script, SiteTree([tmp_path / "site"], "site"))
    assert result.verdict is Verdict.CANNOT_TELL and "seccomp" in result.detail
    assert not flag.exists()


KEYRING_CALLS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}  # add_key, request_key, keyctl


@pytest.mark.parametrize("machine", ["aarch64", "x86_64"])
def test_the_filter_refuses_the_keyring_calls(machine):
    """A script inherited the caller's session keyring and read its keys; request_key's upcall runs outside the
    sandbox. Checked against the kernel's own numbers, not the module's table."""
    program = seccomp.program(machine)
    assert program is not None
    for nr in KEYRING_CALLS[machine]:
        assert run(program, seccomp.AUDIT_ARCH[machine], nr) == EPERM


AF_NETLINK, AF_VSOCK, AF_PACKET, AF_XDP, AF_ALG, NETLINK_AUDIT = 16, 40, 17, 44, 38, 9


@pytest.mark.parametrize("machine", ["aarch64", "x86_64"])
def test_only_the_families_a_network_namespace_confines_are_made(machine):
    """AF_VSOCK is not confined by the sandbox's network namespace (on a virtual machine it reaches the hypervisor's
    services): socket() is allowed for AF_INET, AF_INET6 and NETLINK_ROUTE (getaddrinfo's) and nothing else."""
    program = seccomp.program(machine)
    assert program is not None
    arch = seccomp.AUDIT_ARCH[machine]
    socket_nr, pair_nr, *_ = seccomp.SYSCALLS[machine]
    for family in (AF_INET, 10):
        assert run(program, arch, socket_nr, family, seccomp.SOCK_STREAM) == ALLOW
        assert run(program, arch, socket_nr, family, SOCK_DGRAM | SOCK_CLOEXEC) == ALLOW
    assert run(program, arch, socket_nr, AF_NETLINK, 3 | SOCK_CLOEXEC, 0) == ALLOW
    assert run(program, arch, socket_nr, AF_NETLINK, 3, NETLINK_AUDIT) == EPERM
    for family in (AF_VSOCK, AF_PACKET, AF_XDP, AF_ALG, 0, 46, 0x10002):  # the kernel reads the low 32 bits
        assert run(program, arch, socket_nr, family, seccomp.SOCK_STREAM) == EPERM, family
        assert run(program, arch, pair_nr, family, seccomp.SOCK_STREAM) == EPERM, family
