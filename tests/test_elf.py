"""What the file checks read of a compiled library: its ELF sections (a real .so built here with cc and
one with device code built with nvcc), the host part a message check reads, and what streaming a
library member out of a remote wheel costs in bytes (counted by the client, checked against what a real
HTTP server on 127.0.0.1 sent)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from sparkdoctor.released import Index, Reader
from sparkdoctor.released.elf import ElfError, host_part, sections
from sparkdoctor.released.http import Client
from tests.released_server import Registry, build_wheel
from tests.test_cubins import build_tiny_so

MESSAGE = "sparkdoctor test: no kernel image for sm_121a"
SOURCE = f'#include <stdio.h>\nint probe(int x) {{ if (x) {{ puts("{MESSAGE}"); }} return x + 1; }}\n'


@pytest.fixture(scope="module")
def plain_so(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("elf")
    out = folder / "libprobe.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-x", "c", "-", "-o", str(out)], input=SOURCE, text=True, check=True, timeout=60)
    return out


@pytest.fixture(scope="module")
def cuda_so(tmp_path_factory) -> Path:
    return build_tiny_so(tmp_path_factory.mktemp("elf-cuda"))


def _readelf(path: Path) -> dict[str, tuple[int, int]]:
    """Section name -> (offset, size) as binutils' readelf reads them."""
    out = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True, check=True, timeout=60).stdout
    rows = re.findall(r"\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)", out)
    return {name: (int(off, 16), int(size, 16)) for name, off, size in rows if name != "NULL"}  # section 0 has no name


def section_bytes(data: bytes, name: str) -> bytes:
    found = next(s for s in sections(lambda o, n: data[o : o + n]) if s.name == name)
    return data[found.offset : found.offset + found.size]


def test_section_headers_of_a_real_so_agree_with_readelf(plain_so):
    data = plain_so.read_bytes()
    read = {s.name: (s.offset, s.size) for s in sections(lambda o, n: data[o : o + n]) if s.name}
    assert read == _readelf(plain_so)
    assert MESSAGE.encode() in section_bytes(data, ".rodata") and b"puts" in section_bytes(data, ".dynstr")


def test_not_an_elf_file_is_one_line(plain_so):
    with pytest.raises(ElfError, match="^not an ELF file$"):
        sections(lambda o, n: b"PK\x03\x04" + bytes(60))
    data = plain_so.read_bytes()
    with pytest.raises(ElfError, match="^the section header table at .* is cut short$"):
        sections(lambda o, n: data[o : o + n][:100])


def test_the_host_part_ends_where_the_device_code_begins(cuda_so, plain_so):
    data = cuda_so.read_bytes()
    table = {s.name: s for s in sections(lambda o, n: data[o : o + n])}
    chunks = (data[i : i + 1000] for i in range(0, len(data), 1000))
    host = host_part(chunks, len(data))
    assert len(host) == table[".nv_fatbin"].offset  # .dynstr and .rodata come before it
    assert table[".rodata"].offset + table[".rodata"].size <= len(host)
    plain = plain_so.read_bytes()
    assert host_part([plain], len(plain)) == plain  # no device code: all of it
    with pytest.raises(ElfError):
        host_part([data], 100)


def test_a_library_member_costs_its_host_part_and_every_byte_is_counted(tmp_path, cuda_so):
    """A 24 MB library (the real CUDA .so with incompressible bytes after its device code, as a
    non-loaded symbol table sits): its message and its cubins read a fraction of it, and the client's
    byte count is exactly what the server sent."""
    library = cuda_so.read_bytes() + os.urandom(24 << 20)
    wheel = build_wheel(tmp_path, "demo-lib", "1.0", {"demo/libtwice.so": library, "demo/__init__.py": b"x = 1\n"},
                        tag="cp312-cp312-manylinux_2_28_aarch64")
    with Registry() as reg:
        reg.add("demo-lib", wheel)
        client = Client(timeout=30)
        reader = Reader(index=Index(client, reg.url), root=tmp_path / "cache")
        remote = reader.release("demo-lib", "1.0")
        text = remote.text("demo/libtwice.so")
        listing = remote.cubins("demo/libtwice.so")
        reader.close()
        assert listing.archs == ("sm_90", "sm_120", "sm_120a") and listing.complete
        assert "_Z5twicePf" in text.splitlines()  # the kernel's host stub, from .dynstr
        assert client.bytes_read == reg.sent  # every body byte counted, nothing counted twice
        assert client.bytes_read < 6 << 20 < wheel.stat().st_size  # the wheel's tail, the index and two short streams
        # a second reader answers both from the cache: not one request to the file
        before = len(reg.log)
        again = Reader(index=Index(Client(timeout=30), reg.url), root=tmp_path / "cache").release("demo-lib", "1.0")
        assert again.text("demo/libtwice.so") == text and again.cubins("demo/libtwice.so") == listing
        assert not [p for p, _ in reg.log[before:] if p.startswith("/files/")]


def test_a_stored_library_is_read_by_its_section_headers(tmp_path, cuda_so):
    """A library stored uncompressed in a wheel: its section headers are read by range requests, then only
    the part before .nv_fatbin for its strings and only .nv_fatbin for its cubins. The answers are those
    of the same library deflated, and the 24 MB between its fatbin and its section headers are never fetched."""
    import zipfile

    library = cuda_so.read_bytes()
    fat = {s.name: s for s in sections(lambda o, n: library[o : o + n])}[".nv_fatbin"]
    shoff = int.from_bytes(library[0x28:0x30], "little")
    shnum = int.from_bytes(library[0x3C:0x3E], "little")
    # 24 MB that do not compress, then the section header table moved after them (e_shoff pointed there)
    data = library + os.urandom(24 << 20)
    data = data[:0x28] + len(data).to_bytes(8, "little") + data[0x30:] + library[shoff : shoff + 64 * shnum]
    tag = "cp312-cp312-manylinux_2_28_aarch64"
    (tmp_path / "deflated").mkdir()
    deflated = build_wheel(tmp_path / "deflated", "demo-lib", "1.0", {"demo/libtwice.so": data}, tag=tag)
    stored = tmp_path / deflated.name
    with zipfile.ZipFile(deflated) as src, zipfile.ZipFile(stored, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            out.writestr(info.filename, src.read(info), compress_type=zipfile.ZIP_STORED if info.filename.endswith(".so") else None)
    answers = {}
    for kind, wheel in (("stored", stored), ("deflated", deflated)):
        with Registry() as reg:
            reg.add("demo-lib", wheel)
            client = Client(timeout=30)
            remote = Reader(index=Index(client, reg.url), root=tmp_path / f"cache-{kind}").release("demo-lib", "1.0")
            answers[kind] = (remote.text("demo/libtwice.so"), remote.cubins("demo/libtwice.so").archs)
            if kind == "stored":
                assert client.bytes_read == reg.sent < fat.offset + fat.size + (1 << 20)  # never the 24 MB
    assert answers["stored"] == answers["deflated"]
    assert answers["stored"][1] == ("sm_90", "sm_120", "sm_120a") and "_Z5twicePf" in answers["stored"][0].splitlines()
