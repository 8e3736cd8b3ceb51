"""The file transport `fix` uses on a target (sparkdoctor/target_files.py): a local PythonTarget's,
and the container one's wire protocol (targets/fileops.py as a script, JSON and tar streams) driven
through a stand-in container CLI that runs `exec` here: every byte and every error crosses the same
pipes as with docker. The real docker daemon runs it in tests/container/test_fix_container.py."""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from pathlib import Path

import pytest

from sparkdoctor.targets.container import ContainerTarget
from sparkdoctor.targets.files import FileError, LocalFiles, hashes
from sparkdoctor.targets.local import PythonTarget

# `docker exec -i -e K=V NAME ARGV...` run here, while the "container" (a marker file) exists.
FAKE_CLI = """#!/bin/sh
[ "$1" = exec ] || exit 2
shift; [ "$1" = -i ] && shift
while [ "$1" = -e ]; do export "$2"; shift 2; done
if [ ! -e "$MARKERS/$1" ]; then echo "Error response from daemon: No such container: $1" >&2; exit 1; fi
shift
exec "$@"
"""


@pytest.fixture
def container(tmp_path, monkeypatch):
    markers = tmp_path / "containers"
    markers.mkdir()
    (markers / "c1").write_text("")
    cli = tmp_path / "fake-docker"
    cli.write_text(FAKE_CLI)
    cli.chmod(0o755)
    monkeypatch.setenv("MARKERS", str(markers))
    return ContainerTarget([str(cli)], "c1", sys.executable, "--container-python")


def transports(container_target):
    return {"local": PythonTarget(sys.executable, "--python").file_transport(), "container": container_target.file_transport()}


@pytest.mark.parametrize("kind", ["local", "container"])
def test_a_write_keeps_the_owner_and_writes_through_a_link(tmp_path, container, kind):
    """fix's edit of an env file owned by another user left it root's (that user could no longer read it), and an
    env file that is a link was replaced by a regular file while the file the server reads kept the stale line;
    rollback wrote the same way."""
    files = transports(container)[kind]
    owned = tmp_path / "owned.env"
    owned.write_bytes(b"A=1\n")
    owned.chmod(0o600)
    os.chown(owned, 65534, 65534)  # nobody (the tests run as root, as CI does)
    files.write(str(owned), b"A=2\n")
    st = owned.stat()
    assert owned.read_bytes() == b"A=2\n" and (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (65534, 65534, 0o600)
    real = tmp_path / "real" / "server.env"
    real.parent.mkdir()
    real.write_bytes(b"STALE=1\n")
    link = tmp_path / "link.env"
    link.symlink_to(real)
    files.write(str(link), b"FRESH=1\n")
    assert link.is_symlink() and real.read_bytes() == b"FRESH=1\n"
    assert sorted(os.listdir(real.parent)) == ["server.env"]  # no temporary left


@pytest.mark.parametrize("kind", ["local", "container"])
def test_info_read_write_keep_bytes_and_mode(tmp_path, container, kind):
    files = transports(container)[kind]
    f = tmp_path / "pins.txt"
    f.write_bytes(b"six==1.16.0\r\n")
    f.chmod(0o640)
    row = files.info([str(f), str(tmp_path / "absent")], with_hash=True)
    assert row[str(tmp_path / "absent")] is None
    assert row[str(f)]["sha256"] == hashlib.sha256(b"six==1.16.0\r\n").hexdigest() and row[str(f)]["mode"] == 0o640
    assert row[str(f)]["kind"] == "file" and row[str(f)]["writable"] and not row[str(f)]["read_only_fs"]
    assert files.read(str(f)) == b"six==1.16.0\r\n"
    files.write(str(f), b"\x00binary\xff")
    assert f.read_bytes() == b"\x00binary\xff" and stat.S_IMODE(f.stat().st_mode) == 0o640  # the mode is kept
    files.write(str(tmp_path / "new" / "deep" / "f"), b"x", 0o600)
    assert stat.S_IMODE((tmp_path / "new" / "deep" / "f").stat().st_mode) == 0o600
    assert sorted(os.listdir(tmp_path)) == ["containers", "fake-docker", "new", "pins.txt"]  # no temporary left


@pytest.mark.parametrize("kind", ["local", "container"])
def test_bulk_copies_out_and_in_byte_for_byte(tmp_path, container, kind):
    files = transports(container)[kind]
    src = tmp_path / "site"
    (src / "pkg").mkdir(parents=True)
    blobs = {"pkg/a.py": b"print(1)\n", "pkg/lib.so": os.urandom(3 * 1024 * 1024 + 7), "pkg/empty": b""}
    for rel, data in blobs.items():
        (src / rel).write_bytes(data)
    (src / "pkg" / "lib.so").chmod(0o755)
    paths = [str(src / rel) for rel in blobs] + [str(src / "missing.py"), str(src / "pkg")]
    out = tmp_path / "journal"
    out.mkdir()
    got = files.export(paths, out)
    assert set(got) == {str(src / rel) for rel in blobs}  # a missing file and a folder are not copied
    for rel, data in blobs.items():
        assert (out / got[str(src / rel)]["name"]).read_bytes() == data
    assert got[str(src / "pkg/lib.so")]["mode"] & 0o777 == 0o755
    for rel in blobs:
        (src / rel).write_bytes(b"changed")
    files.import_files([(out / got[str(src / rel)]["name"], str(src / rel), got[str(src / rel)]["mode"]) for rel in blobs])
    assert {rel: (src / rel).read_bytes() for rel in blobs} == blobs
    assert stat.S_IMODE((src / "pkg/lib.so").stat().st_mode) == 0o755


@pytest.mark.parametrize("kind", ["local", "container"])
def test_remove_prunes_emptied_folders_and_scratch_goes_away(tmp_path, container, kind):
    files = transports(container)[kind]
    pkg = tmp_path / "pkg" / "sub"
    (pkg / "__pycache__").mkdir(parents=True)
    (pkg / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"pyc")
    (pkg / "m.py").write_text("x")
    (tmp_path / "pkg" / "keep.py").write_text("kept")
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "keep.cpython-311.pyc").write_bytes(b"keep's pyc")
    assert files.remove([str(pkg / "m.py"), str(tmp_path / "pkg" / "gone.py")], prune=True) == 1
    assert not pkg.exists() and (tmp_path / "pkg" / "keep.py").exists()
    # the folder that stays keeps its byte-code cache: those .pyc are its other modules' (site-packages/__pycache__)
    assert (tmp_path / "pkg" / "__pycache__" / "keep.cpython-311.pyc").read_bytes() == b"keep's pyc"
    with files.scratch() as tmp:
        files.write(f"{tmp}/report.json", b"{}")
        assert files.listdir(tmp) == ["report.json"]
    assert not Path(tmp).exists()
    assert hashes(files, [str(tmp_path / "pkg" / "keep.py")]) == {str(tmp_path / "pkg" / "keep.py"): hashlib.sha256(b"kept").hexdigest()}


@pytest.mark.parametrize("kind", ["local", "container"])
def test_failures_are_one_line_and_leave_the_old_bytes(tmp_path, container, kind):
    if os.geteuid() == 0:
        ro = None  # root writes through permissions; the read-only case is a real ro mount in the container test
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        (ro / "f").write_text("old")
        ro.chmod(0o555)
    files = transports(container)[kind]
    with pytest.raises(FileError) as err:
        files.read(str(tmp_path / "absent.txt"))
    assert "absent.txt: cannot read" in str(err.value) and "\n" not in str(err.value)
    (tmp_path / "a-file").write_text("")
    with pytest.raises(FileError) as err:
        files.write(str(tmp_path / "a-file" / "under-a-file"), b"x")  # a file where a folder must be
    assert "cannot write" in str(err.value) and "\n" not in str(err.value)
    if ro is not None:
        with pytest.raises(FileError, match="Permission denied"):
            files.write(str(ro / "f"), b"new")
        assert (ro / "f").read_text() == "old" and os.listdir(ro) == ["f"]


def test_a_container_that_went_away_is_one_line_naming_it(tmp_path, container):
    files = container.file_transport()
    f = tmp_path / "f"
    f.write_text("x")
    assert files.info([str(f)])[str(f)]["kind"] == "file"
    os.unlink(os.environ["MARKERS"] + "/c1")  # removed between two calls of one fix
    for call in (lambda: files.info([str(f)], True), lambda: files.write(str(f), b"y"), lambda: files.export([str(f)], tmp_path),
                 lambda: files.import_files([(f, str(f), None)])):
        with pytest.raises(FileError) as err:
            call()
        assert str(err.value).startswith("container c1: ") and "No such container: c1" in str(err.value), err.value
        assert "\n" not in str(err.value)
    assert f.read_text() == "x"


def test_a_local_target_is_local_files():
    assert isinstance(PythonTarget(sys.executable, "--python").file_transport(), LocalFiles)
