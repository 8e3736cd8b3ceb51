"""Attacks on `matrix update` and the HTTP client it shares with verify, track, whatif and `mods --release`
(issue 40, items 9 and 11 and the tarball findings): FIFOs and oversized files as sources, servers on 127.0.0.1
whose answers never end, trickle or redirect with endless bodies, tarballs with 20,001 members or a member that
expands to 300 MiB, matrix files under two top folders, killed updates' staging folders, a reinstall of the pin
in use, an install with a file missing, a git blob over the size limit. Each is refused in one line, in bounded
time (hang_guard turns a hang into a failure), and nothing in use is changed."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from sparkdoctor import proc
from sparkdoctor.matrix import MatrixError, load
from sparkdoctor.released.http import Client, RemoteError
from sparkdoctor.track import sources
from sparkdoctor.track.update import UpdateError, rollback_matrix, update_matrix
from tests.hostile import HostileServer, hang_guard
from tests.test_matrix_update import git, make_repo, newer_matrix, tarball

GUARD_S = 20


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKDOCTOR_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


@pytest.fixture
def server():
    s = HostileServer()
    yield s
    s.close()


def good_tarball(tmp_path: Path, name: str = "m.tar.gz", top: str = "matrix-1.2") -> tuple[Path, str]:
    folder = newer_matrix(tmp_path / f"src-{name}")
    return tarball(tmp_path, name, lambda tar: tar.add(folder, arcname=f"{top}/matrix"))


# ---- the local source: a regular file, bounded ------------------------------------------------------------


def test_a_fifo_as_the_tarball_is_refused_at_once_not_waited_on(tmp_path):
    fifo = tmp_path / "m.tar.gz"
    os.mkfifo(fifo)
    with hang_guard(GUARD_S), pytest.raises(UpdateError, match="FIFO.*not a regular file"):
        update_matrix(str(fifo), sha256="0" * 64)


def test_a_local_tarball_over_the_limit_is_refused_without_reading_it_whole(tmp_path):
    big = tmp_path / "big.tar"
    with open(big, "wb") as fh:  # sparse: no disk used
        fh.truncate(sources.MAX_TARBALL + 1)
    with hang_guard(GUARD_S), pytest.raises(UpdateError, match="larger than 64 MiB"):
        update_matrix(str(big), sha256="0" * 64)


# ---- HTTP: one deadline, byte caps, bodies of redirects and errors never read whole -------------------------


def test_an_endless_404_body_is_not_read(server):
    with hang_guard(GUARD_S), pytest.raises(UpdateError, match="HTTP 404"):
        update_matrix(f"{server.url}/missing?x.tar.gz", sha256="0" * 64)
    client = Client()
    with hang_guard(GUARD_S):
        resp = client.get(f"{server.url}/missing")
    assert resp.status == 404 and len(resp.body) <= 64 * 1024


def test_a_redirect_with_an_endless_body_is_followed_without_reading_it(tmp_path, server, data_home):
    path, digest = good_tarball(tmp_path)
    server.files["ok"] = path.read_bytes()
    with hang_guard(GUARD_S):
        result = update_matrix(f"{server.url}/moved?m.tar.gz", sha256=digest)
    assert load().get("new-entry-from-update") is not None and result["pin"] == digest


def test_an_endless_body_stops_at_the_byte_cap(server):
    client = Client()
    for route in ("endless", "lying"):
        with hang_guard(GUARD_S), pytest.raises(RemoteError, match="larger than 1,048,576 bytes"):
            client.get(f"{server.url}/{route}", limit=1024 * 1024)
        with hang_guard(GUARD_S), pytest.raises(RemoteError, match="larger than 1000 bytes"):
            client.download(f"{server.url}/{route}", io.BytesIO(), 1000)


@pytest.mark.parametrize("route", ["trickle", "slow-headers"])
def test_a_trickling_server_is_cut_off_by_the_runs_deadline(server, route):
    """Every byte comes within the per-read timeout, so only an overall deadline ends the request."""
    proc.set_deadline(time.monotonic() + 1.5)
    try:
        client = Client()
        calls = [lambda: client.get(f"{server.url}/{route}"), lambda: client.download(f"{server.url}/{route}", io.BytesIO(), 1 << 20)]
        if route == "slow-headers":  # (the trickled body comes with a 200, which a range request refuses at once)
            calls.append(lambda: client.get_range(f"{server.url}/{route}", 0, 10))
        for call in calls:
            with hang_guard(GUARD_S), pytest.raises(RemoteError, match="no complete answer within"):
                call()
            proc.set_deadline(time.monotonic() + 1.5)
        with hang_guard(GUARD_S), pytest.raises(UpdateError, match="no complete answer within"):
            update_matrix(f"{server.url}/{route}?m.tar.gz", sha256="0" * 64)
    finally:
        proc.set_deadline(None)


# ---- tarballs: bounded while read, unambiguous ---------------------------------------------------------------


def test_a_tarball_of_too_many_members_is_refused_while_it_is_read(tmp_path):
    def build(tar):
        for i in range(sources.MAX_MEMBERS + 1):
            tar.addfile(tarfile.TarInfo(f"x/{i}"), io.BytesIO(b""))

    path, digest = tarball(tmp_path, "many.tar.gz", build)
    with hang_guard(GUARD_S), pytest.raises(UpdateError, match="more than 20,000 members; refusing"):
        update_matrix(str(path), sha256=digest)


def test_a_gzip_bomb_is_refused_at_the_member_not_after_expanding_it(tmp_path, monkeypatch):
    class Zeros(io.RawIOBase):
        def __init__(self, n):
            self.left = n

        def readable(self):
            return True

        def readinto(self, b):
            k = min(len(b), self.left)
            b[:k] = bytes(k)
            self.left -= k
            return k

    size = 300 * 1024 * 1024

    def build(tar):
        info = tarfile.TarInfo("x/zeros")
        info.size = size
        tar.addfile(info, io.BufferedReader(Zeros(size)))

    path, digest = tarball(tmp_path, "bomb.tar.gz", build)
    assert path.stat().st_size < 1024 * 1024  # 300 MiB expanded, under 1 MiB as given
    expanded = []
    real = sources._Expanded.read
    monkeypatch.setattr(sources._Expanded, "read", lambda self, size=-1: expanded.append(1) or real(self, size))
    with hang_guard(GUARD_S), pytest.raises(UpdateError, match="reaches past 256 MiB expanded"):
        update_matrix(str(path), sha256=digest)
    assert len(expanded) < 10  # stopped at the member's header: its 300 MiB were never expanded


@pytest.mark.parametrize("tops", [("a", "b"), ("", "a")])
def test_matrix_files_under_two_tops_are_refused_as_ambiguous(tmp_path, data_home, tops):
    one, two = newer_matrix(tmp_path / "one"), newer_matrix(tmp_path / "two")
    (two / "host.toml").unlink()

    def build(tar):
        tar.add(one, arcname=f"{tops[0]}/matrix".lstrip("/"))
        tar.add(two, arcname=f"{tops[1]}/matrix".lstrip("/"))

    path, digest = tarball(tmp_path, "two.tar.gz", build)
    with pytest.raises(UpdateError, match=r"under more than one top folder \(.*matrix/.*matrix/\); refusing the ambiguous tarball"):
        update_matrix(str(path), sha256=digest)
    assert not (data_home / "matrix" / "current").exists()


def test_killed_updates_staging_folders_are_removed_by_the_next_update(tmp_path, data_home):
    left = [data_home / "matrix" / ".staging-killed1", data_home / "matrix" / "versions" / ".staging-killed2"]
    for folder in left:
        folder.mkdir(parents=True)
        (folder / "host.toml").write_text("half")
    path, digest = good_tarball(tmp_path)
    update_matrix(str(path), sha256=digest)
    assert not any(f.exists() for f in left)
    assert not list((data_home / "matrix").rglob(".staging-*"))


# ---- the pin in use, damaged installs, oversized blobs --------------------------------------------------------


def test_reinstalling_the_pin_in_use_keeps_the_way_back_and_never_rewrites_the_folder_in_use(tmp_path, data_home):
    a, digest_a = good_tarball(tmp_path, "a.tar.gz", "a")
    repo, commit = make_repo(tmp_path)
    update_matrix(str(a), sha256=digest_a)
    folder_a = (data_home / "matrix" / "current").resolve()
    update_matrix(str(repo), commit=commit)
    in_use = (data_home / "matrix" / "current").resolve()
    again = update_matrix(str(repo), commit=commit)
    assert (data_home / "matrix" / "current").resolve() != in_use  # a fresh folder, swapped in
    assert not in_use.exists()  # the replaced install of the same pin is gone, nothing else is
    assert again["previous"] == str(folder_a) and again["message"].endswith("restores the one before it)")
    back = rollback_matrix()
    assert back["installed"] == str(folder_a)  # the way back is the matrix before, not the same pin again


def test_an_installed_matrix_with_a_file_missing_does_not_load(tmp_path, data_home):
    repo, commit = make_repo(tmp_path)
    update_matrix(str(repo), commit=commit)
    installed = (data_home / "matrix" / "current").resolve()
    listed = json.loads((installed / "SOURCE.json").read_text())["files"]
    assert len(listed) > 2
    (installed / listed[0]).unlink()  # what a kill half-way through the old in-place reinstall left
    with pytest.raises(MatrixError, match=f"1 of the {len(listed)} files SOURCE.json lists are missing .*{listed[0]}"):
        load(installed)
    m = load()
    assert m.source.startswith("bundled (the installed matrix does not load:") and "missing" in m.source
    env = {**os.environ, "SPARKDOCTOR_DATA_DIR": str(data_home)}
    res = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "validate"], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "SOURCE.json lists are missing" in res.stderr, (res.returncode, res.stderr)
    (installed / listed[0]).write_text('component = "x"\n')
    (installed / "planted.toml").write_text('component = "x"\n')
    with pytest.raises(MatrixError, match="planted.toml is not in SOURCE.json's file list"):
        load(installed)


def test_an_installed_matrix_whose_folder_is_gone_is_said_not_silently_replaced(tmp_path, data_home):
    """`matrix/current` pointing at a folder that is gone (removed by hand, a cleaned disk): the bundled matrix was
    used with nothing said, so a check judged by an older knowledge base looked like one judged by the installed
    one, and `matrix validate` passed. Now the source says so and `matrix validate` is one line, exit 2."""
    import shutil

    repo, commit = make_repo(tmp_path)
    update_matrix(str(repo), commit=commit)
    installed = (data_home / "matrix" / "current").resolve()
    shutil.rmtree(installed)
    m = load()
    assert m.source.startswith("bundled (the installed matrix is gone:") and installed.name in m.source
    env = {**os.environ, "SPARKDOCTOR_DATA_DIR": str(data_home)}
    res = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "validate"], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "the installed matrix is gone" in res.stderr, (res.returncode, res.stderr)
    snapshot = Path(__file__).parent / "data" / "facts" / "nogpu-clean.json"
    checked = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--facts", str(snapshot)], capture_output=True, text=True,
                             env=env, timeout=120)
    assert "the installed matrix is not in use: judged by the bundled (the installed matrix is gone:" in checked.stderr, checked.stderr


def test_a_git_blob_over_the_size_limit_is_refused_not_cut_and_installed(tmp_path, data_home):
    repo, _ = make_repo(tmp_path)
    big = repo / "matrix" / "big.toml"
    big.write_text('component = "big"\n' + ("# padding\n" * (9 * 1024 * 1024 // 10)))
    git("add", "-A", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "big", cwd=repo)
    with hang_guard(120), pytest.raises(UpdateError, match=r"matrix/big.toml is \d+ bytes, over 4194304; refusing it"):
        update_matrix(str(repo), commit=git("rev-parse", "HEAD", cwd=repo))
    assert not (data_home / "matrix" / "current").exists()
    shutil.rmtree(repo)


KILLER = """
import os, shutil, sys, tempfile

at, seen = int(sys.argv[3]), [0]


def step():
    seen[0] += 1
    if seen[0] == at:
        os._exit(137)  # as SIGKILL: no finally block, no cleanup


def counted(real):
    def call(*args, **kwargs):
        step()
        return real(*args, **kwargs)
    return call


for owner, name in ((os, "replace"), (os, "symlink"), (shutil, "rmtree"), (tempfile, "mkdtemp")):
    setattr(owner, name, counted(getattr(owner, name)))
from sparkdoctor.track.update import update_matrix

update_matrix(sys.argv[1], commit=sys.argv[2])
"""


def test_a_kill_at_every_step_of_reinstalling_the_pin_in_use_leaves_a_whole_matrix(tmp_path, data_home):
    """The finding: a kill during `matrix update` of the pin in use left 7 of 14 files that validated. Here the
    update is killed (os._exit, no cleanup) before each step that changes folders or links (a folder made, renamed,
    removed, a link made or swapped), one kill point per run, until it completes."""
    repo, commit = make_repo(tmp_path)
    update_matrix(str(repo), commit=commit)
    whole = len(load().entries)
    env = {**os.environ, "SPARKDOCTOR_DATA_DIR": str(data_home)}
    kills = 0
    for at in range(1, 200):
        res = subprocess.run([sys.executable, "-c", KILLER, str(repo), commit, str(at)], env=env, capture_output=True, text=True, timeout=120)
        m = load()
        assert m.source.startswith("installed ") and len(m.entries) == whole, (at, m.source)
        if res.returncode == 0:
            break
        assert res.returncode == 137, res.stderr
        kills += 1
    assert kills >= 5  # the update has that many steps at least; each was a kill point
    update_matrix(str(repo), commit=commit)
    assert not list((data_home / "matrix").rglob(".staging-*"))
    assert len(list((data_home / "matrix" / "versions").iterdir())) == 1  # one folder for the pin, the rest removed


def test_a_git_update_killed_mid_way_leaves_no_scratch_folder_once_the_next_one_runs(tmp_path, data_home):
    """The finding: each `matrix update` from git ended by SIGKILL left a /tmp/sparkdoctor-matrix-git-* folder (the
    bare clone) for good. Scratch folders carry their owner's pid; the next update removes those whose owner is gone,
    never a live one's."""
    repo, commit = make_repo(tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "SPARKDOCTOR_DATA_DIR": str(data_home), "TMPDIR": str(tmp)}
    killed_after_clone = ("import os, sys\nfrom sparkdoctor.track import sources\n"
                          "sources._blob = lambda *args: os._exit(137)  # as SIGKILL: no finally\n"
                          "sources.from_git(sys.argv[1], sys.argv[2])\n")
    killed = subprocess.run([sys.executable, "-c", killed_after_clone, str(repo), commit], env=env, capture_output=True,
                            text=True, timeout=120)
    assert killed.returncode == 137, killed.stderr
    assert len(list(tmp.glob("sparkdoctor-matrix-git-*"))) == 1  # the killed update's clone, nothing could remove it
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        lives = tmp / f"sparkdoctor-matrix-git-{live.pid}-x"  # an update still running
        lives.mkdir()
        done = subprocess.run([sys.executable, "-c", "import sys\nfrom sparkdoctor.track.update import update_matrix\n"
                               "update_matrix(sys.argv[1], commit=sys.argv[2])\n", str(repo), commit], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert list(tmp.iterdir()) == [lives]
    finally:
        live.communicate(b"")
