"""`sparkdoctor matrix update` / `--rollback` and the loader's preference for the installed matrix:
a real local git repository, real tarballs (good, damaged, with path traversal, with a symlink)."""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from sparkdoctor.locations import data_dir
from sparkdoctor.matrix import load
from sparkdoctor.track.update import UpdateError, rollback_matrix, update_matrix


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKDOCTOR_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def newer_matrix(folder: Path) -> Path:
    """The bundled matrix with one entry's title changed and one new entry."""
    shutil.copytree(data_dir("matrix"), folder / "matrix")
    host = folder / "matrix" / "host.toml"
    text = host.read_text()
    first_title = text.index("title = ")
    host.write_text(text[:first_title] + 'title = "a corrected title"\n' + text[text.index("\n", first_title) + 1 :] + """
[[entry]]
id = "new-entry-from-update"
title = "t"
severity = "info"
action = "monitor"
summary = "s"
remedy = "r"
when.gpu_arch = ["sm_121a"]
refs = ["https://example.org/x"]
""")
    return folder / "matrix"


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def make_repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    repo.mkdir()
    newer_matrix(repo)
    git("init", "-q", cwd=repo)
    (repo / ".git" / "hooks" / "post-checkout").write_text("#!/bin/sh\ntouch ../HOOK-RAN\n")
    (repo / ".git" / "hooks" / "post-checkout").chmod(0o755)
    git("add", "-A", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "newer matrix", cwd=repo)
    return repo, git("rev-parse", "HEAD", cwd=repo)


def tarball(tmp_path: Path, name: str, build) -> tuple[Path, str]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        build(tar)
    path = tmp_path / name
    path.write_bytes(buf.getvalue())
    return path, hashlib.sha256(buf.getvalue()).hexdigest()


def test_git_update_diff_loader_preference_and_rollback(tmp_path, data_home):
    repo, commit = make_repo(tmp_path)
    assert load().source == "bundled"
    result = update_matrix(str(repo), commit=commit)
    assert "+ new-entry-from-update (added)" in result["diff"]
    assert any(line.startswith("~ ") and line.endswith(": title") for line in result["diff"])
    m = load()
    assert m.source.startswith("installed ") and m.get("new-entry-from-update") is not None
    assert not (tmp_path / "HOOK-RAN").exists()  # nothing from the source ran
    back = rollback_matrix()
    assert back["installed"] == "bundled" and "- new-entry-from-update (removed)" in back["diff"]
    assert load().source == "bundled" and load().get("new-entry-from-update") is None
    rollback_matrix()  # rolling back again restores the update
    assert load().get("new-entry-from-update") is not None


def test_git_needs_a_pinned_commit_that_exists(tmp_path):
    repo, commit = make_repo(tmp_path)
    with pytest.raises(UpdateError, match="must be pinned: give --commit"):
        update_matrix(str(repo))
    with pytest.raises(UpdateError, match="is not in the repository"):
        update_matrix(str(repo), commit="0" * 40)
    with pytest.raises(UpdateError, match="git clone failed"):
        update_matrix("ext::sh -c touch% /tmp/sparkdoctor-pwned", commit=commit)
    assert not Path("/tmp/sparkdoctor-pwned").exists()
    # a source that looks like an option is a path that does not exist, not an option of git clone (it used to be
    # one, and the error named sparkdoctor's temporary folder as the missing repository)
    odd = f"--upload-pack=touch {tmp_path / 'PWNED'}"
    with pytest.raises(UpdateError, match=f"repository '{re.escape(odd)}' does not exist"):
        update_matrix(odd, commit=commit)
    assert not (tmp_path / "PWNED").exists()


def test_a_git_source_that_is_no_repository_names_gits_reason(tmp_path):
    """git's error ends with advice ("Please make sure you have the correct access rights / and the repository
    exists."): the one line said "git clone failed: and the repository exists." instead of git's reason."""
    source = (tmp_path / "nothing-here.git").as_uri()
    with pytest.raises(UpdateError) as info:
        update_matrix(source, commit="0" * 40)
    assert "does not appear to be a git repository" in str(info.value), str(info.value)
    assert "\n" not in str(info.value)


def test_an_invalid_matrix_changes_nothing(tmp_path, data_home):
    repo, _ = make_repo(tmp_path)
    (repo / "matrix" / "host.toml").write_text('component = "host"\n[[entry]]\nid = "BAD ID"\n')
    git("add", "-A", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "broken", cwd=repo)
    with pytest.raises(UpdateError, match="does not validate, nothing changed: .*host.toml"):
        update_matrix(str(repo), commit=git("rev-parse", "HEAD", cwd=repo))
    assert load().source == "bundled" and not (data_home / "matrix" / "current").exists()


def test_tarball_update_with_sha256_and_local_overrides_kept(tmp_path, data_home):
    folder = newer_matrix(tmp_path / "src")
    path, digest = tarball(tmp_path, "m.tar.gz", lambda tar: tar.add(folder, arcname="matrix-1.2/matrix"))
    local = data_home / "matrix" / "local"
    local.mkdir(parents=True)
    (local / "mine.toml").write_text('component = "mine"\n[[entry]]\nid = "my-own-entry"\ntitle = "t"\nseverity = "info"\naction = "monitor"\n'
                                     'summary = "s"\nremedy = "r"\nwhen.gpu_arch = ["sm_121a"]\nrefs = ["https://example.org/x"]\n')
    with pytest.raises(UpdateError, match="sha256 is .*not the pinned"):
        update_matrix(str(path), sha256="0" * 64)
    update_matrix(str(path), sha256=digest)
    m = load()
    assert m.get("new-entry-from-update") and m.get("my-own-entry") and "local overrides" in m.source
    assert (local / "mine.toml").is_file()


def test_sha256_with_a_file_that_is_not_a_tarball_says_what_the_file_is_and_what_was_expected(tmp_path, data_home):
    """It answered "a git source is pinned with --commit": no git source was given, a file was."""
    notes = tmp_path / "matrix.zip"
    notes.write_bytes(b"PK\x03\x04 not a tarball")
    with pytest.raises(UpdateError) as info:
        update_matrix(str(notes), sha256="0" * 64)
    assert str(info.value) == (f"{notes}: a file whose name ends in none of .tar.gz, .tgz, .tar, so not a matrix tarball; "
                               "--sha256 pins a tarball (a git repository is pinned with --commit)")
    with pytest.raises(UpdateError, match="a git source is pinned with --commit, not --sha256"):
        update_matrix(str(tmp_path), sha256="0" * 64)  # a folder is a git repository's place
    assert not (data_home / "matrix" / "current").exists()


@pytest.mark.parametrize("kind", ["damaged", "traversal", "symlink"])
def test_bad_tarballs_are_refused_whole(tmp_path, data_home, kind):
    folder = newer_matrix(tmp_path / "src")

    def build(tar):
        tar.add(folder, arcname="matrix")
        if kind == "traversal":
            data = b"x"
            info = tarfile.TarInfo("matrix/../../evil.toml")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if kind == "symlink":
            info = tarfile.TarInfo("matrix/passwd.toml")
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)

    path, digest = tarball(tmp_path, "m.tgz", build)
    if kind == "damaged":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    why = {"damaged": "not a readable tarball|cannot be read", "traversal": "points outside the archive", "symlink": "is a link or device"}[kind]
    with pytest.raises(UpdateError, match=why):
        update_matrix(str(path), sha256=digest)
    assert load().source == "bundled" and not (data_home / "matrix" / "current").exists()
    assert not (tmp_path / "evil.toml").exists()


def test_the_cli_says_one_line(tmp_path, data_home):
    import os
    import sys

    env = {**os.environ, "SPARKDOCTOR_DATA_DIR": str(data_home)}
    res = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "update", "--rollback"], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "no installed matrix to roll back" in res.stderr, res.stderr


def test_an_installed_matrix_that_no_longer_loads_falls_back_to_the_bundled_one_and_says_why(tmp_path, data_home):
    repo, commit = make_repo(tmp_path)
    update_matrix(str(repo), commit=commit)
    installed = (data_home / "matrix" / "current").resolve()
    (installed / "host.toml").write_text('component = "host"\nschema = 99\n')  # e.g. a newer format than this sparkdoctor reads
    m = load()
    assert m.source.startswith("bundled (the installed matrix does not load:") and "schema" in m.source
    assert m.get("new-entry-from-update") is None


def test_a_git_source_is_bounded_in_size_and_installs_the_bytes_committed(tmp_path, data_home, monkeypatch):
    """A clone took the whole source with no byte cap (150 MB of other files landed in TMPDIR; a remote one could fill
    the disk within git's 300 s); and a matrix file's bytes were read as text, so a byte that is not UTF-8 was
    installed as U+FFFD where the commit has it (the tarball path refuses such a file)."""
    from sparkdoctor.track import sources

    repo, _ = make_repo(tmp_path)
    (repo / "big.bin").write_bytes(os.urandom(3 * 1024 * 1024))  # random: git cannot compress it
    git("add", "-A", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "big", cwd=repo)
    commit = git("rev-parse", "HEAD", cwd=repo)
    monkeypatch.setattr(sources, "MAX_CLONE", 2 * 1024 * 1024)
    with pytest.raises(UpdateError, match="the clone passed 2 MiB; refusing the source"):
        update_matrix(str(repo), commit=commit)
    assert not data_home.exists() or not any(data_home.rglob("*.toml"))
    monkeypatch.setattr(sources, "MAX_CLONE", 64 * 1024 * 1024)
    driver = repo / "matrix" / "driver.toml"
    driver.write_bytes(driver.read_bytes() + b"# \xff not utf-8\n")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qam", "odd byte", cwd=repo)
    with pytest.raises(UpdateError, match="driver.toml is not UTF-8 text"):
        update_matrix(str(repo), commit=git("rev-parse", "HEAD", cwd=repo))
    assert load().source == "bundled"


def test_a_data_folder_that_cannot_hold_a_matrix_is_one_line_before_anything_is_fetched(tmp_path, monkeypatch):
    """SPARKDOCTOR_DATA_DIR naming a file was an internal error (NotADirectoryError), after the whole source was
    cloned: it is refused first, with the folder and the reason."""
    afile = tmp_path / "afile"
    afile.write_text("")
    monkeypatch.setenv("SPARKDOCTOR_DATA_DIR", str(afile))
    with pytest.raises(UpdateError, match=r"matrix/versions: cannot make the matrix folder: Not a directory; nothing changed"):
        update_matrix(str(tmp_path / "no-such-repo"), commit="0" * 40)  # the source is never reached
