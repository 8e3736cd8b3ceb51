"""A container target's files come out (fix's journal copies, downloaded wheels) as a tar stream the container CLI
writes straight into a file on the host. The stream had a time limit and no byte limit: a container sending
without end filled the journal's disk. Now the file is written under RLIMIT_FSIZE at the disk's free space less a
reserve, and the copy is refused in one line. A stand-in for the container CLI that writes 20 MB, no container."""

from __future__ import annotations

import pytest

from sparkdoctor.targets import container_files
from sparkdoctor.targets.container_files import ContainerFiles
from sparkdoctor.targets.files import FileError


def test_a_container_that_sends_without_end_fills_no_disk(tmp_path, monkeypatch):
    canary = tmp_path / "sent-it-all"
    files = ContainerFiles.__new__(ContainerFiles)
    files.where = "container hostile"
    monkeypatch.setattr(files, "_argv", lambda mode, timeout, token: ["sh", "-c", f"head -c 20000000 /dev/zero && touch {canary}"],
                        raising=False)
    monkeypatch.setattr(container_files, "export_cap", lambda dest: 1 << 20, raising=False)
    dest = tmp_path / "journal"
    dest.mkdir()
    with pytest.raises(FileError) as err:
        files.export(["/x/y.whl"], dest)
    assert not canary.exists(), "the whole stream was written"
    assert "sent more than 1,048,576 bytes" in str(err.value), err.value
    assert not list(dest.iterdir())


def test_the_bound_leaves_a_reserve_and_room_to_unpack(tmp_path, monkeypatch):
    """The stream and the files unpacked from it are on the same disk: together they leave the reserve."""
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    for free in (100 * 2**30, 3 * 2**30, 2**30, 4096):
        monkeypatch.setattr(shutil, "disk_usage", lambda _path, free=free: usage(free, 0, free))
        cap = container_files.export_cap(tmp_path)
        assert 0 < cap and 2 * cap <= free - min(container_files.RESERVE, free // 2), (free, cap)


def test_a_sparse_member_is_not_unpacked_to_the_size_it_claims(tmp_path, monkeypatch):
    """A GNU sparse member of a few KB in the stream claims any size (64 MiB here, a terabyte as easily): it is not a
    file the container sent whole, and unpacking it wrote all it claimed."""
    made = tmp_path / "made"
    made.mkdir()
    with open(made / "0", "wb") as fh:
        fh.truncate(64 * 2**20)
        fh.seek(0, 2)
        fh.write(b"x")
    files = ContainerFiles.__new__(ContainerFiles)
    files.where = "container hostile"
    script = f"cd {made} && exec tar --sparse --format=gnu -cf - 0"
    monkeypatch.setattr(files, "_argv", lambda mode, timeout, token: ["sh", "-c", script], raising=False)
    dest = tmp_path / "journal"
    dest.mkdir()
    assert files.export(["/x/y.whl"], dest) == {}
    assert not list(dest.iterdir())


def test_link_members_are_not_unpacked_to_copies_of_what_they_name(tmp_path, monkeypatch):
    """A hard link or symlink member costs 512 bytes in the stream and unpacked to a whole copy of the file it names:
    a stream of one file and five links took six times its size on the journal's disk."""
    import io
    import tarfile

    made = tmp_path / "stream.tar"
    with tarfile.open(made, "w") as tar:
        body = b"x" * 65536
        head = tarfile.TarInfo("0")
        head.size = len(body)
        tar.addfile(head, io.BytesIO(body))
        for i, kind in ((1, tarfile.LNKTYPE), (2, tarfile.SYMTYPE)):
            link = tarfile.TarInfo(str(i))
            link.type, link.linkname = kind, "0"
            tar.addfile(link)
        alias = tarfile.TarInfo("00")  # a second name for path 0, which left a file behind
        alias.size = len(body)
        tar.addfile(alias, io.BytesIO(body))
    files = ContainerFiles.__new__(ContainerFiles)
    files.where = "container hostile"
    monkeypatch.setattr(files, "_argv", lambda mode, timeout, token: ["cat", str(made)], raising=False)
    dest = tmp_path / "journal"
    dest.mkdir()
    got = files.export(["/a", "/b", "/c"], dest)
    assert list(got) == ["/a"] and sorted(p.name for p in dest.iterdir()) == ["0"]
