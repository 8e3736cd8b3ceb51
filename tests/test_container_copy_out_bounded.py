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
    monkeypatch.setattr(files, "_argv", lambda mode, timeout: ["sh", "-c", f"head -c 20000000 /dev/zero && touch {canary}"],
                        raising=False)
    monkeypatch.setattr(container_files, "export_cap", lambda dest: 1 << 20, raising=False)
    dest = tmp_path / "journal"
    dest.mkdir()
    with pytest.raises(FileError) as err:
        files.export(["/x/y.whl"], dest)
    assert not canary.exists(), "the whole stream was written"
    assert "sent more than 1,048,576 bytes" in str(err.value), err.value
    assert not list(dest.iterdir())


def test_the_bound_leaves_a_reserve(tmp_path):
    cap = container_files.export_cap(tmp_path)
    import shutil

    free = shutil.disk_usage(tmp_path).free
    assert 0 < cap < free and free - cap <= container_files.RESERVE
