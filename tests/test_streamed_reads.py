"""An sdist read as a stream over range requests against a real HTTP server on 127.0.0.1: a check
that names its members exactly stops once it met them, and every byte is counted."""

from __future__ import annotations

import os

import pytest

from sparkdoctor.released import Index, Reader
from sparkdoctor.released.http import Client
from tests.released_server import Registry, build_sdist

CMAKE = b'cuda_archs_loose_intersection(FP4_ARCHS "12.0a;12.1a" "${CUDA_ARCHS}")\n'


def test_an_sdist_is_read_only_until_the_members_a_check_names(tmp_path):
    # the build file first, then 12 MB that do not compress (sources, vendored code)
    sdist = build_sdist(tmp_path, "demo", "1.0", {"CMakeLists.txt": CMAKE, "third_party/blob.bin": os.urandom(12 << 20),
                                                  "demo/core.py": b"x = 1\n"})
    with Registry() as reg:
        reg.add("demo", sdist)
        client = Client(timeout=30)
        reader = Reader(index=Index(client, reg.url), root=tmp_path / "cache")
        archive = reader.sdist("demo", "1.0")
        archive.find(["CMakeLists.txt"])
        assert archive.text("CMakeLists.txt") == CMAKE.decode()
        assert archive.names == ["PKG-INFO", "CMakeLists.txt"]  # what was met: the rest was never read
        assert client.bytes_read == reg.sent and client.bytes_read < sdist.stat().st_size / 4
        # a name the archive lacks: read to the end, and that listing is complete
        other = Reader(index=Index(Client(timeout=30), reg.url), root=tmp_path / "cache2").sdist("demo", "1.0")
        other.find(["CMakeLists.txt", "cmake/missing.cmake"])
        assert other.names == ["PKG-INFO", "CMakeLists.txt", "third_party/blob.bin", "demo/core.py"]
        assert "cmake/missing.cmake" not in other.names
        reader.close()


def test_bounds_says_what_it_read_per_bound_and_in_all(tmp_path):
    """`matrix verify --bounds` against a real registry on 127.0.0.1: the console's last line and the JSON
    give the bytes the server sent, and the bounds' own counts add up to the run's."""
    import json
    import subprocess
    import sys

    from tests.test_tracking import RELEASES, build_wheel, write_matrix

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    matrix = write_matrix(tmp_path, ">=0.2.0")
    with Registry() as registry:
        for version, body in RELEASES.items():
            registry.add("demo", build_wheel(wheels, "demo", version, {"demo/core.py": body}))
        env = {**os.environ, "SPARKDOCTOR_INDEX_URL": registry.url, "PIP_INDEX_URL": registry.url,
               "PIP_CONFIG_FILE": "/dev/null", "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}
        base = [sys.executable, "-m", "sparkdoctor", "matrix", "verify", "--bounds", "--matrix", str(matrix)]
        cold = subprocess.run([*base, "--format", "json"], capture_output=True, text=True, timeout=300, env=env)
        sent = registry.sent
        warm = subprocess.run(base, capture_output=True, text=True, timeout=300, env=env)
        warm_sent = registry.sent - sent
    doc = json.loads(cold.stdout)
    assert doc["bytes_read"] == sent and sum(b["bytes_read"] for b in doc["bounds"]) == sent, cold.stderr
    assert doc["requests"] == sum(b["requests"] for b in doc["bounds"]) > 0
    last = warm.stdout.strip().splitlines()[-1]
    assert last.startswith(f"read {warm_sent / 1e6:.1f} MB from the registry in ") and " requests, " in last, warm.stdout


def test_a_deflated_bomb_in_a_wheel_is_refused_by_its_declared_size_before_a_byte_is_fetched(tmp_path, monkeypatch):
    """A member of 64 MiB of one repeated line deflates to ~64 kB: it was fetched, inflated whole into memory and
    written to the cache, then judged too large (a 2.7 MB wheel held 600 MiB). The central directory's size is
    judged first now: nothing of it is fetched or cached, and `mods check --release` says "too large"."""
    from sparkdoctor.mods.model import Verdict
    from sparkdoctor.mods.trees import MAX_FILE, NotPatchable, ReleaseTree
    from sparkdoctor.released.http import TooLarge
    from sparkdoctor.released.wheel import member_path
    from tests.released_server import build_wheel

    bomb = b"a = 1\n" * ((64 << 20) // 6)
    wheel = build_wheel(tmp_path, "demo", "1.0", {"demo/x.py": bomb, "demo/ok.py": b"b = 2\n"})
    with Registry() as reg:
        reg.add("demo", wheel)
        client = Client(timeout=30)
        remote = Reader(index=Index(client, reg.url), root=tmp_path / "cache").release("demo", "1.0")
        assert remote.read("demo/ok.py") == b"b = 2\n"
        before = client.bytes_read
        with pytest.raises(TooLarge, match="over the") as refused:
            remote.read("demo/x.py", MAX_FILE)
        assert refused.value.size == len(bomb)
        assert client.bytes_read - before < 64 << 10  # not the member's 60 kB of deflate, nor its 64 MiB
        assert not member_path(remote.dir, "demo/x.py").exists()
        monkeypatch.setenv("SPARKDOCTOR_INDEX_URL", reg.url)
        monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", str(tmp_path / "cache2"))
        with pytest.raises(NotPatchable) as judged:
            ReleaseTree([("demo", "1.0")]).read("demo/x.py")
        assert judged.value.verdict is Verdict.CANNOT_TELL and f"is {len(bomb)} bytes, too large" in judged.value.why
