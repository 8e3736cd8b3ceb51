"""The released-file reader against a real HTTP server on 127.0.0.1 serving real wheels built here
(range support on and off, zip64, compressed members, a compiled library's strings), and once against
the real registry (slow)."""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager

import pytest

from sparkdoctor.released import Index, Reader, RemoteError, pick_wheel, printable_runs
from sparkdoctor.released.http import Client
from sparkdoctor.released.wheel import RemoteWheel
from tests.released_server import ELF_SO, Registry, build_wheel

ENVS_OLD = b'environment_variables = {\n    "VLLM_USE_FLASHINFER_MOE_FP4": lambda: bool(int(os.getenv("VLLM_USE_FLASHINFER_MOE_FP4", "0"))),\n}\n'
ENVS_NEW = ENVS_OLD.replace(b'"0"', b'"1"')
FILLER = os.urandom(3 * 1024 * 1024)  # incompressible: the wheel is bigger than the reader's tail read


def _wheels(tmp_path, zip64=False):
    old = build_wheel(tmp_path, "vllm", "0.1.0", {"vllm/envs.py": ENVS_OLD, "vllm/big.bin": FILLER, "vllm/_C.abi3.so": ELF_SO},
                      tag="cp38-abi3-manylinux_2_28_aarch64", zip64=zip64)
    x86 = build_wheel(tmp_path, "vllm", "0.1.0", {"vllm/envs.py": b"x86 build"}, tag="cp38-abi3-manylinux_2_28_x86_64")
    new = build_wheel(tmp_path, "vllm", "0.2.0", {"vllm/envs.py": ENVS_NEW, "vllm/big.bin": FILLER}, tag="cp38-abi3-manylinux_2_28_x86_64")
    return old, x86, new


def _reader(reg, tmp_path):
    return Reader(index=Index(Client(timeout=30), reg.url), root=tmp_path / "cache")


@contextmanager
def _serving_both_releases(tmp_path):
    """A reader of a local registry holding both vllm releases (0.1.0 for aarch64 and x86_64, 0.2.0), closed after."""
    with Registry() as reg:
        for w in _wheels(tmp_path):
            reg.add("vllm", w)
        reader = _reader(reg, tmp_path)
        try:
            yield reader
        finally:
            reader.close()


@pytest.mark.parametrize("zip64", [False, True])
def test_reads_single_members_by_range_and_caches_them(tmp_path, zip64):
    old, x86, new = _wheels(tmp_path, zip64)
    with Registry() as reg:
        for w in (old, x86, new):
            reg.add("vllm", w)
        reader = _reader(reg, tmp_path)
        assert reader.versions("vllm") == ["0.1.0", "0.2.0"]
        wheel = reader.release("vllm", "0.1.0")
        assert wheel.file.filename == old.name  # the aarch64 wheel, not the x86_64 one
        assert "linux-aarch64" in reader.picks[("vllm", "0.1.0")]
        assert wheel.read("vllm/envs.py") == ENVS_OLD
        assert wheel.how == "range"
        assert wheel.bytes_read < old.stat().st_size / 2  # the 3 MiB member was never fetched
        assert all(r is not None for p, r in reg.log if p.startswith("/files/"))
        # a compiled library reads as its printable strings
        text = wheel.text("vllm/_C.abi3.so")
        assert "CUDA error: no kernel image is available" in text.splitlines()
        assert "sm_121a not supported by this build" in text
        reader.close()
        # a second reader finds the listing and the members in the cache: no file request at all
        before = len([p for p, _ in reg.log if p.startswith("/files/")])
        again = _reader(reg, tmp_path).release("vllm", "0.1.0")
        assert "vllm/envs.py" in again.names and again.read("vllm/envs.py") == ENVS_OLD
        assert len([p for p, _ in reg.log if p.startswith("/files/")]) == before


@pytest.mark.parametrize("listing", ["[]", '{"vllm/envs.py": 1}', "[1, 2]", '["vllm/envs.py"', ""])
def test_a_kept_member_list_of_another_shape_is_read_again_from_the_wheel(tmp_path, listing):
    """names.json was trusted whatever it held: `[]` made every member of the release look absent (a file check's
    verdict, whatif's hypothetical files), a dict or numbers reached the callers. Now it is a miss."""
    old, x86, new = _wheels(tmp_path)
    with Registry() as reg:
        for w in (old, x86, new):
            reg.add("vllm", w)
        first = _reader(reg, tmp_path)
        wheel = first.release("vllm", "0.1.0")
        real = list(wheel.names)
        first.close()
        (wheel.dir / "names.json").write_text(listing)
        again = _reader(reg, tmp_path)
        try:
            assert again.release("vllm", "0.1.0").names == real
        finally:
            again.close()
    assert "vllm/envs.py" in real


def test_a_big_compressed_member_reads_whole(tmp_path):
    old, x86, new = _wheels(tmp_path)
    with Registry() as reg:
        reg.add("vllm", old)
        wheel = _reader(reg, tmp_path).release("vllm", "0.1.0")
        assert hashlib.sha256(wheel.read("vllm/big.bin")).digest() == hashlib.sha256(FILLER).digest()


def test_falls_back_to_the_platform_it_has_and_says_so(tmp_path):
    old, x86, new = _wheels(tmp_path)
    with Registry() as reg:
        reg.add("vllm", new)
        reader = _reader(reg, tmp_path)
        wheel = reader.release("vllm", "0.2.0")
        assert "no wheel for CPython 3.12 on linux-aarch64" in reader.picks[("vllm", "0.2.0")]
        assert wheel.read("vllm/envs.py") == ENVS_NEW


def test_a_server_that_ignores_range_downloads_small_wheels_and_refuses_big_ones(tmp_path):
    old, x86, new = _wheels(tmp_path)
    with Registry(ranges=False) as reg:
        reg.add("vllm", old)
        reader = _reader(reg, tmp_path)
        files = reader.index.wheels("vllm", "0.1.0")
        big = RemoteWheel(files[0], reader.client, tmp_path / "c1", full_limit=1024 * 1024)
        with pytest.raises(RemoteError, match="ignores HTTP range requests.*over the 1048576-byte limit"):
            big.read("vllm/envs.py")
        small = RemoteWheel(files[0], reader.client, tmp_path / "c2", full_limit=64 * 1024 * 1024)
        assert small.read("vllm/envs.py") == ENVS_OLD and small.how == "download"
        assert (small.dir / "wheel.whl").stat().st_size == old.stat().st_size


def test_errors_are_one_line(tmp_path):
    old, x86, new = _wheels(tmp_path)
    with Registry() as reg:
        reg.add("vllm", old)
        reader = _reader(reg, tmp_path)
        with pytest.raises(RemoteError, match="no project 'torch'"):
            reader.versions("torch")
        with pytest.raises(RemoteError, match="no wheel of this release"):
            reader.release("vllm", "9.9")
        with pytest.raises(RemoteError, match="no member vllm/nope.py"):
            reader.release("vllm", "0.1.0").read("vllm/nope.py")
    with pytest.raises(RemoteError, match="127.0.0.1"):  # the server is gone
        Index(Client(timeout=5), reg.url).files("vllm")


@pytest.mark.parametrize("page", [
    b'{"files": "nope"}', b'{"files": {"a": 1}}', b'[1, 2]', b"[" * 100_000 + b"]" * 100_000,
    b'{"files": [{"filename": "vllm-9.9.9-py3-none-any.whl", "url": "x.whl", "hashes": [1], "size": 5}]}',
])
def test_a_hostile_index_page_is_a_remote_error_not_a_crash_or_nothing_new(tmp_path, page):
    """`files` that is no list (it was read as no releases: track said nothing was new), a deep page (RecursionError)
    and `hashes` that is no object (AttributeError): each one RemoteError, which track reports as a registry error."""
    with Registry() as reg:
        reg.pages["vllm"] = page
        with pytest.raises(RemoteError, match="not a PEP 691 project page"):
            Index(Client(timeout=10), reg.url).versions("vllm")


@pytest.mark.parametrize("name", ["vllm-1.{}-py3-none-any.whl", "vllm-1.{}.tar.gz"])
def test_one_file_named_with_a_5000_digit_version_is_passed_over_not_the_whole_page(tmp_path, name):
    """int() refuses a number of more than 4,300 digits (ValueError, neither InvalidVersion nor InvalidWheelFilename):
    one such file name made the whole page "not a PEP 691 project page", and track could list none of the package's
    releases. It is a name that is no release, passed over as any other."""
    old, _x86, _new = _wheels(tmp_path)
    files = [{"filename": old.name, "url": f"../../files/{old.name}", "size": old.stat().st_size},
             {"filename": name.format("9" * 5000), "url": "../../files/x", "size": 5}]
    with Registry() as reg:
        reg.add("vllm", old)
        reg.pages["vllm"] = json.dumps({"meta": {"api-version": "1.1"}, "files": files}).encode()
        index = Index(Client(timeout=10), reg.url)
        assert index.versions("vllm") == ["0.1.0"] and index.versions("vllm", dist="sdist") == []


def test_a_file_that_changed_under_the_index_is_refused(tmp_path):
    old, x86, new = _wheels(tmp_path)
    with Registry() as reg:
        reg.add("vllm", old)
        reader = _reader(reg, tmp_path)
        files = reader.index.wheels("vllm", "0.1.0")
        old.write_bytes(old.read_bytes() + b"\0" * 10)  # the server now has 10 more bytes than the index said
        with pytest.raises(RemoteError, match="the index says"):
            RemoteWheel(files[0], reader.client, tmp_path / "c").read("vllm/envs.py")


def test_pick_wheel_prefers_the_platform_and_python():
    from sparkdoctor.released.index import _file

    names = ["torch-2.10.0-cp311-cp311-manylinux_2_28_aarch64.whl", "torch-2.10.0-cp312-cp312-manylinux_2_28_aarch64.whl",
             "torch-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl", "torch-2.10.0-cp312-cp312-win_amd64.whl"]
    files = [_file({"filename": n, "url": n}, "https://x/") for n in names]
    assert pick_wheel(files).file.filename == names[1]
    assert pick_wheel(files, "linux-x86_64").file.filename == names[2]
    assert pick_wheel(files, python="3.11").file.filename == names[0]
    assert pick_wheel([]) is None


def test_printable_runs_are_strings():
    assert printable_runs(b"\x00ab\x00abcd\x01hello world\xff") == ["abcd", "hello world"]


@pytest.mark.slow
def test_the_real_registry_gives_two_releases_of_vllm_envs(tmp_path):
    reader = Reader(root=tmp_path / "cache")
    try:
        new, old = reader.release("vllm", "0.33.0"), reader.release("vllm", "0.32.0")
        assert "aarch64" in new.file.filename and "aarch64" in old.file.filename
        a, b = new.text("vllm/envs.py"), old.text("vllm/envs.py")
        assert "environment_variables" in a and "environment_variables" in b and a != b
        assert new.bytes_read < 5 * 1024 * 1024 < new.file.size  # a 300+ MB wheel, a few MB read
    finally:
        reader.close()


@pytest.mark.parametrize("marker", ["", "x\x00", "folder"])
def test_whatifs_kept_site_with_a_damaged_marker_is_made_again(tmp_path, marker):
    """whatif keeps the files it read of a release as a site under the cache, marked complete by `.complete` (its
    member count). An empty marker was trusted as a site of 0 files, garbage ended whatif with an internal error
    (int() of it), and a folder in its place was never repaired. Now the site is made again from the release."""
    from sparkdoctor.whatif.hypothetical import ScratchSite
    from sparkdoctor.whatif.resolve import Change

    with _serving_both_releases(tmp_path) as reader:
        with ScratchSite(reader, Change("vllm", "0.1.0", "0.2.0")) as site:
            first = site.members
        done = site.path / ".complete"
        done.unlink()
        done.mkdir() if marker == "folder" else done.write_text(marker)
        with ScratchSite(reader, Change("vllm", "0.1.0", "0.2.0")) as again:
            assert again.members == first and (again.path / "vllm" / "envs.py").read_bytes() == ENVS_NEW
    assert first == 1 and (site.path / ".complete").read_text() == "1"


def test_a_read_in_a_worker_thread_ends_at_the_runs_time_limit():
    """whatif's and check's collectors read released files in worker threads (collect/constraints.py): a server that
    accepts and never answers is given up at the run's --timeout there too, not at the client's own 600 s wait (the
    request's deadline is the run's, proc.time_left(), in any thread)."""
    import socket
    import threading
    import time

    from sparkdoctor.released.http import Client, RemoteError
    from sparkdoctor.runlimit import OutOfTime, run_limit

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(server.accept()[0]), daemon=True).start()
    out: dict[str, object] = {}

    def read() -> None:
        try:
            Client(timeout=600).get(f"http://127.0.0.1:{server.getsockname()[1]}/x")
        except RemoteError as exc:
            out["error"] = str(exc)

    worker = threading.Thread(target=read, daemon=True)
    with pytest.raises(OutOfTime), run_limit(1.0, "whatif"):
        worker.start()
        while True:  # not join(): an exception inside join() marks the thread stopped while it still runs (CPython)
            time.sleep(0.05)
    for _ in range(1200):  # a hang guard only: the client's own wait is 600 s
        if "error" in out:
            break
        time.sleep(0.05)
    server.close()
    assert "no complete answer" in str(out.get("error")), out


def test_whatifs_site_finished_by_another_run_in_the_last_moment_is_used(tmp_path, monkeypatch):
    """Two whatif runs building the same release's site: the other run's rename could land between this run's
    "does it exist?" and its own rename, which then failed with "Directory not empty" (an internal error). Now the
    rename is tried and a complete site already in its place is taken as the other run's."""
    import os
    import shutil

    from sparkdoctor.whatif import hypothetical
    from sparkdoctor.whatif.hypothetical import ScratchSite
    from sparkdoctor.whatif.resolve import Change

    with _serving_both_releases(tmp_path) as reader:
        with ScratchSite(reader, Change("vllm", "0.1.0", "0.2.0")) as site:
            aside = tmp_path / "other-runs-site"
            shutil.copytree(site.path, aside)
        shutil.rmtree(site.path)
        real_replace = os.replace

        def the_other_run_lands_first(src, dst):  # the other run's rename, just before this run's
            shutil.copytree(aside, dst)
            return real_replace(src, dst)

        monkeypatch.setattr(hypothetical.os, "replace", the_other_run_lands_first)
        with ScratchSite(reader, Change("vllm", "0.1.0", "0.2.0")) as again:
            assert again.members == 1 and (again.path / "vllm" / "envs.py").read_bytes() == ENVS_NEW
    assert not [p for p in site.path.parent.iterdir() if p.name.startswith(".site-")]  # its own copy removed


def test_a_redirect_from_https_down_to_http_is_refused(tmp_path, monkeypatch):
    """An index or a files host that answers an https request with a redirect to plain http: the reader followed it,
    and the page or wheel bytes read over that hop could be changed on the way (only matrix tarballs are pinned by
    sha256). The downgrade is refused in one line; an http -> http redirect is still followed."""
    import http.server
    import ssl
    import subprocess
    import threading

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                           "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out",
                           str(cert)], capture_output=True, timeout=120)
    assert made.returncode == 0, made.stderr

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path == "/moved":
                self.send_response(302)
                self.send_header("Location", f"http://127.0.0.1:{plain.server_address[1]}/body")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", "4")
            self.end_headers()
            self.wfile.write(b"body")

        def log_message(self, *args):
            pass

    plain = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    tls = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    tls.socket = context.wrap_socket(tls.socket, server_side=True)
    for server in (plain, tls):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    client = Client(timeout=30)
    try:
        assert client.get(f"https://127.0.0.1:{tls.server_address[1]}/body").body == b"body"  # the TLS path works
        assert client.get(f"http://127.0.0.1:{plain.server_address[1]}/moved").body == b"body"
        with pytest.raises(RemoteError, match="redirected from https to plain http"):
            client.get(f"https://127.0.0.1:{tls.server_address[1]}/moved")
    finally:
        client.close()
        for server in (plain, tls):
            server.shutdown()
            server.server_close()
