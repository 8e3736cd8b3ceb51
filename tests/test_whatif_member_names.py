"""whatif lays out a new release's Python files (read member by member from its released wheel) in a site folder
under the cache. A wheel's member list is someone else's: a member named `vllm/../../../../ESCAPED.py` was written
outside that folder, wherever it pointed, as the user (a usercustomize.py in the user site would then run at every
Python start). Now such a name is never laid out. A real wheel on a registry on 127.0.0.1."""

from __future__ import annotations

from sparkdoctor.released import Index, Reader
from sparkdoctor.released.http import Client
from sparkdoctor.whatif.hypothetical import ScratchSite
from sparkdoctor.whatif.resolve import Change
from tests.released_server import Registry, build_wheel


def test_a_wheel_member_named_through_dot_dot_is_never_written_outside_the_site(tmp_path):
    folder = tmp_path / "deep" / "er"
    folder.mkdir(parents=True)
    members = {"vllm/envs.py": b"x = 1\n", "vllm/../../../../ESCAPED.py": b"planted\n",
               "vllm/./../../../../ESCAPED2.json": b"{}", "vllm//../../../../ESCAPED3.py": b"planted\n"}
    wheel = build_wheel(folder, "vllm", "0.2.0", members)
    with Registry() as reg:
        reg.add("vllm", wheel)
        reader = Reader(index=Index(Client(timeout=30), reg.url), root=folder / "cache")
        try:
            with ScratchSite(reader, Change("vllm", "0.1.0", "0.2.0")) as site:
                assert (site.path / "vllm" / "envs.py").read_bytes() == b"x = 1\n"
        finally:
            reader.close()
    assert not [p for p in tmp_path.rglob("ESCAPED*")], list(tmp_path.rglob("ESCAPED*"))
    assert site.members == 1


def test_a_sha256_from_the_index_that_is_a_path_never_names_a_folder_outside_the_cache(tmp_path):
    """The index's `hashes.sha256` named the release's cache folder and whatif's site folder: `../../../../x` from a
    hostile index put both (names.json, members, the laid-out site) outside the cache, where a damaged `.complete`
    there had the folder removed. Now only 64 hex digits count as a sha256."""
    import json

    folder = tmp_path / "deep" / "er" / "est"
    folder.mkdir(parents=True)
    wheel = build_wheel(folder, "vllm", "0.2.0", {"vllm/envs.py": b"x = 1\n"})
    page = {"meta": {"api-version": "1.1"}, "name": "vllm",
            "files": [{"filename": wheel.name, "url": f"../../files/{wheel.name}", "size": wheel.stat().st_size,
                       "hashes": {"sha256": "../../../../../ESCAPED"}}]}
    with Registry() as reg:
        reg.add("vllm", wheel)
        reg.pages["vllm"] = json.dumps(page).encode()
        reader = Reader(index=Index(Client(timeout=30), reg.url), root=folder / "cache")
        try:
            with ScratchSite(reader, Change("vllm", "0.1.0", "0.2.0")) as site:
                assert (site.path / "vllm" / "envs.py").read_bytes() == b"x = 1\n"
        finally:
            reader.close()
    assert not [p for p in tmp_path.rglob("ESCAPED*")], list(tmp_path.rglob("ESCAPED*"))
    assert site.path.resolve().is_relative_to((folder / "cache").resolve())
