"""A write under the target's roots follows no link (targets/fileops.py: write_under), for a local target and through
the container's wire protocol (the stand-in container CLI of test_target_files): every folder is opened from the root
down with O_NOFOLLOW, the file made under a temporary name by the folder's fd and renamed there; a link on the way, in
the file's place, or a path outside the roots is refused in one line and nothing is written through it."""

from __future__ import annotations

import os
import stat

import pytest

from sparkdoctor.targets.files import FileError, LinkRefused
from tests.test_target_files import container, transports  # noqa: F401 (the fixture)


@pytest.mark.parametrize("kind", ["local", "container"])
def test_a_write_under_the_roots_refuses_every_link_and_writes_the_rest(tmp_path, container, kind):  # noqa: F811
    files = transports(container)[kind]
    root, outside = tmp_path / "venv", tmp_path / "outside"
    (root / "lib" / "pkg").mkdir(parents=True)
    (outside / "pkg").mkdir(parents=True)
    (outside / "pkg" / "core.py").write_bytes(b"outside\n")
    src = tmp_path / "copy"
    src.write_bytes(b"journal's copy\n")
    (root / "lib" / "pkg" / "core.py").write_bytes(b"reinstalled\n")
    os.chown(root / "lib" / "pkg" / "core.py", 65534, 65534)  # nobody (the tests run as root, as CI does)

    assert files.import_files([(src, str(root / "lib" / "pkg" / "core.py"), 0o4755),
                               (src, str(root / "lib" / "new" / "deep.py"), None)], roots=[str(root)]) == 2
    st = (root / "lib" / "pkg" / "core.py").stat()
    assert (root / "lib" / "pkg" / "core.py").read_bytes() == b"journal's copy\n"
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (65534, 0o4755)  # the owner kept, then the mode set (by fd)
    assert (root / "lib" / "new" / "deep.py").read_bytes() == b"journal's copy\n"
    assert sorted(os.listdir(root / "lib" / "pkg")) == ["core.py"]  # no temporary left

    was = sorted(os.listdir(root / "lib"))
    (root / "lib" / "pkg").rename(tmp_path / "moved")
    (root / "lib" / "pkg").symlink_to(outside / "pkg")  # a folder on the way, linked out of the root
    (root / "lib" / "one.py").symlink_to(outside / "pkg" / "core.py")  # the file itself a link
    cases = {str(root / "lib" / "pkg" / "core.py"): f"{root}/lib/pkg is a symbolic link",
             str(root / "lib" / "pkg" / "sub" / "new.py"): f"{root}/lib/pkg is a symbolic link",
             str(root / "lib" / "one.py"): "it is a symbolic link",
             str(outside / "pkg" / "core.py"): f"it lies outside {root}",
             str(root / "lib" / ".." / "x.py"): "its path is not normal"}
    for path, why in cases.items():
        with pytest.raises(LinkRefused) as err:
            files.import_files([(src, path, None)], roots=[str(root)])
        assert f"{path}: not written: {why}, and this write follows no link" in str(err.value), err.value
        assert "\n" not in str(err.value)
    assert (outside / "pkg" / "core.py").read_bytes() == b"outside\n" and os.listdir(outside / "pkg") == ["core.py"]
    assert sorted(os.listdir(root / "lib")) == sorted([*was, "one.py"])


@pytest.mark.parametrize("kind", ["local", "container"])
def test_a_write_under_the_roots_that_fails_otherwise_is_a_file_error(tmp_path, container, kind):  # noqa: F811
    files = transports(container)[kind]
    (tmp_path / "a-file").write_text("")
    src = tmp_path / "copy"
    src.write_bytes(b"x")
    with pytest.raises(FileError) as err:
        files.import_files([(src, str(tmp_path / "a-file" / "under"), None)], roots=[str(tmp_path)])
    assert not isinstance(err.value, LinkRefused) and "cannot write" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("kind", ["local", "container"])
def test_a_removal_under_the_roots_follows_no_link_and_prunes_by_fd(tmp_path, container, kind):  # noqa: F811
    """A rollback's removals (the files an offline reinstall added, a file the apply created) went by path: a folder
    on the way linked out of the venv made it unlink a file of the same name elsewhere."""
    from sparkdoctor.targets import fileops

    files = transports(container)[kind]
    root, outside = tmp_path / "venv", tmp_path / "outside"
    for folder in (root / "lib" / "pkg" / "__pycache__", root / "lib" / "keep", outside / "pkg"):
        folder.mkdir(parents=True)
    (root / "lib64").symlink_to("lib")  # a venv's own link: removals through it land inside the root, and go
    (root / "lib" / "pkg" / "REQUESTED").write_bytes(b"")
    (root / "lib" / "pkg" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"")
    (root / "lib" / "keep" / "a.py").write_bytes(b"")
    (outside / "pkg" / "REQUESTED").write_bytes(b"outside\n")
    assert files.remove([str(root / "lib64" / "pkg" / "REQUESTED"), str(root / "lib" / "keep" / "gone.py")],
                        prune=True, roots=[str(root)]) == 1
    assert not (root / "lib" / "pkg").exists() and (root / "lib" / "keep" / "a.py").exists()  # pruned, by fd

    (root / "lib" / "pkg").symlink_to(outside / "pkg")  # linked out before the removal resolves its folder
    with pytest.raises(LinkRefused) as err:
        files.remove([str(root / "lib" / "pkg" / "REQUESTED")], prune=True, roots=[str(root)])
    assert f"{outside}/pkg/REQUESTED: not removed: it lies outside {root}, and this removal follows no link" \
        in str(err.value), err.value
    with pytest.raises(fileops.LinkError) as walked:  # linked out after it resolved: the walk from the root meets it
        fileops._at([str(root)], str(root / "lib" / "pkg" / "REQUESTED"), fileops._unlink)
    assert f"not removed: {root}/lib/pkg is a symbolic link, and this removal follows no link" in str(walked.value)
    assert (outside / "pkg" / "REQUESTED").read_bytes() == b"outside\n"
    assert files.remove([str(outside / "pkg" / "REQUESTED")]) == 1  # without roots (apply's removals), as before


def test_pruning_never_takes_a_root_nor_fails_a_removal_there(tmp_path):
    from sparkdoctor.targets import fileops

    root = tmp_path / "venv"
    root.mkdir()
    (root / "new.cfg").write_bytes(b"")  # a file straight under the root: its folder is the root, never pruned
    assert fileops.remove([str(root / "new.cfg")], prune=True, roots=[str(root)]) == 1
    assert root.is_dir()
