"""A warm `check` is fast because it trusts its caches only as far as the files say it may: these
tests change one byte of a package that the caches have already seen as clean, in the ways people
(and mods, and patch tools) change files, and expect the finding from the very next warm run.

Real venv (the shared small one, copied), a real tracked distribution written with a real RECORD,
the real CLI in a fresh process with its own cache folder, and a user matrix folder (`--matrix`)
holding one entry on that distribution's integrity.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import venvs
from tests.test_targetenv import SMALL, record_row, same_size_edit, site_of

MATRIX = '''component = "local"

[[entry]]
id = "quack-hand-modified"
title = "Files of quack-kernels differ from what pip installed"
severity = "warn"
action = "monitor"
summary = "A hand edit in quack-kernels (a tracked package)."
remedy = "pip install --force-reinstall --no-deps quack-kernels==0.3.0"
when.modified = { "quack-kernels" = "*" }
refs = ["https://example.org/a-local-entry"]
evidence = "reported"
'''


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    src = venvs.shared_venv("targetenv-small", SMALL).parent.parent
    venv = tmp_path / "venv"
    shutil.copytree(src, venv, symlinks=True)
    site = site_of(venv / "bin" / "python")
    pkg = site / "quack"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("TILE = 'eeee'\nDEFAULT = 128\n")
    (pkg / "gemm.py").write_text("def gemm(a, b):\n    return 'eager'\n")
    info = site / "quack_kernels-0.3.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: quack-kernels\nVersion: 0.3.0\n")
    rows = [record_row(site, "quack/__init__.py"), record_row(site, "quack/gemm.py"), "quack_kernels-0.3.0.dist-info/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    matrix = tmp_path / "matrix"
    matrix.mkdir()
    (matrix / "local.toml").write_text(MATRIX)
    return {"python": venv / "bin" / "python", "site": site, "matrix": matrix, "cache": tmp_path / "cache"}


def check(world: dict[str, Path]) -> dict:
    env = {**os.environ, "SPARKDOCTOR_CACHE_DIR": str(world["cache"])}
    done = subprocess.run(
        [sys.executable, "-m", "sparkdoctor", "check", "--no-kernels", "--format", "json", "--python", str(world["python"]),
         "--matrix", str(world["matrix"])],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def finding_ids(report: dict) -> set[str]:
    return {f["id"] for f in report["findings"] if f.get("status", "fired") == "fired"}


def quack(report: dict) -> dict:
    return report["facts"]["packages"]["quack-kernels"]


def warm_and_clean(world: dict[str, Path]) -> None:
    for _ in range(2):  # the second run is warm: every cache (hashes, RECORDs, matrix) was written by the first
        report = check(world)
        assert quack(report)["integrity"] == "ok" and "quack-hand-modified" not in finding_ids(report)
    cache = world["cache"] / "hashes"
    assert list(cache.glob("*.json.records")), "the RECORD cache is in use"


def test_a_same_size_edit_is_found_by_the_next_warm_check(world):
    warm_and_clean(world)
    same_size_edit(world["site"] / "quack" / "__init__.py")
    report = check(world)
    assert quack(report)["files_modified"] == ["quack/__init__.py"]
    assert "quack-hand-modified" in finding_ids(report)


def test_a_same_size_edit_with_its_mtime_put_back_is_found_too(world):
    """`touch -r` / os.utime can restore a file's mtime, not its ctime: the warm check reads it again."""
    warm_and_clean(world)
    target = world["site"] / "quack" / "gemm.py"
    st = target.stat()
    with open(target, "r+b") as fh:  # in place: the folder's mtime does not move either
        data = fh.read()
        fh.seek(data.index(b"eager"))
        fh.write(b"EAGER")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert target.stat().st_mtime_ns == st.st_mtime_ns and target.stat().st_size == st.st_size
    report = check(world)
    assert quack(report)["files_modified"] == ["quack/gemm.py"]
    assert "quack-hand-modified" in finding_ids(report)


def test_a_record_rewritten_with_its_mtime_put_back_is_read_again(world):
    """The parsed RECORD is cached; a RECORD changed in place (here: it now states another size for a
    file, as a half-finished reinstall would leave it) with its mtime restored is read again."""
    warm_and_clean(world)
    record = world["site"] / "quack_kernels-0.3.0.dist-info" / "RECORD"
    st = record.stat()
    text = record.read_text()
    row = next(line for line in text.splitlines() if line.startswith("quack/gemm.py,"))
    path, digest, size = row.rsplit(",", 2)
    changed = text.replace(row, f"{path},{digest},{int(size) + 1:0{len(size)}d}")
    assert len(changed) == len(text)
    with open(record, "r+") as fh:
        fh.write(changed)
    os.utime(record, ns=(st.st_atime_ns, st.st_mtime_ns))
    report = check(world)
    assert quack(report)["files_modified"] == ["quack/gemm.py"]


@pytest.mark.parametrize("damage", [b"", b"garbage", b"\xe3\x00\x00\x00not marshal"])
def test_a_damaged_record_cache_is_ignored_and_rewritten(world, damage):
    warm_and_clean(world)
    cache = next((world["cache"] / "hashes").glob("*.json.records"))
    cache.write_bytes(damage)
    report = check(world)
    assert quack(report)["integrity"] == "ok" and report["facts"]["packages"]["six"]["name"] == "six"
    assert cache.stat().st_size > 100, "rewritten"
    same_size_edit(world["site"] / "quack" / "__init__.py")
    assert "quack-hand-modified" in finding_ids(check(world))


def test_a_copied_venv_is_said_to_run_another_interpreter(world):
    """`cp -a` of a venv keeps its scripts' first lines: the copy's bin/pip (and a bin/vllm) run the first venv's
    interpreter and packages. check judges the copy's files and says so on stderr; the venv it came from gets no
    such word."""
    original = venvs.shared_venv("targetenv-small", SMALL)
    env = {**os.environ, "SPARKDOCTOR_CACHE_DIR": str(world["cache"])}

    def warned(python: Path) -> str:
        done = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--no-kernels", "--format", "json",
                               "--python", str(python), "--matrix", str(world["matrix"])],
                              capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode in (0, 1), done.stderr
        return " ".join(done.stderr.split())

    copied = warned(world["python"])
    assert f"in {world['python'].parent} run another interpreter ({original.parent}/python" in copied, copied
    assert "e.g. pip" in copied and "this venv was copied or moved" in copied, copied
    assert "run another interpreter" not in warned(original)


def test_a_copied_venv_whose_first_path_had_a_space_is_seen(tmp_path):
    """A venv made at a path with a space gets pip's `#!/bin/sh` + `\'\'\'exec' "/path/my venv/bin/python"` scripts
    (the path quoted): a copy of it was not seen to run the first venv's interpreter (the quoted path was split)."""
    from sparkdoctor.targets.local import scripts_elsewhere

    first = tmp_path / "my venv é"
    subprocess.run([sys.executable, "-m", "venv", str(first)], check=True, timeout=300, capture_output=True)
    assert (first / "bin" / "pip").read_text().startswith("#!/bin/sh\n")
    copy = tmp_path / "copy"
    shutil.copytree(first, copy, symlinks=True)
    assert scripts_elsewhere(str(first / "bin" / "python")) == {}
    found = scripts_elsewhere(str(copy / "bin" / "python"))
    assert "pip" in found and Path(found["pip"]).parent == first / "bin", found


def test_only_a_venvs_scripts_are_read_for_another_interpreter(tmp_path):
    """A system bin/ (/usr/bin) holds other programs' scripts with interpreters of their own: no word on them."""
    from sparkdoctor.targets.local import scripts_elsewhere

    for venv in (False, True):
        root = tmp_path / ("venv" if venv else "usr")
        (root / "bin").mkdir(parents=True)
        (root / "bin" / "tool").write_text("#!/opt/other/bin/python3\nprint('hi')\n")
        if venv:
            (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
        assert scripts_elsewhere(str(root / "bin" / "python")) == ({"tool": "/opt/other/bin/python3"} if venv else {})
