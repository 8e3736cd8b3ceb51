import json

import pytest

from sparkdoctor.facts import SCHEMA, Facts, FactsError


def sample() -> Facts:
    return Facts(
        target={"kind": "python", "python": "/opt/venv/bin/python", "version": "3.12.3"},
        arch={"value": "sm_121a", "source": "detected"},
        gpus=[{"index": 0, "name": "NVIDIA GB10", "cc": "12.1", "arch": "sm_121a"}],
        driver={"version": "580.95.05", "cuda": "13.0", "source": "nvml"},
        packages={
            "vllm": {"name": "vllm", "version": "0.22.0", "files_modified": []},
            "six": {"name": "six", "version": "1.16.0"},
        },
        cutedsl={"active_build": "libs-cu13"},
        env={"CUTE_DSL_ARCH": "sm_121a", "HOME": "/root"},
        timings_ms={"gpu": 3.0},
    )


def test_json_round_trip_is_exact(tmp_path):
    f = sample()
    path = tmp_path / "facts.json"
    f.save(path)
    again = Facts.load(path)
    assert again.to_dict() == f.to_dict()
    assert again.fingerprint() == f.fingerprint()
    assert not list(tmp_path.glob(".*.tmp")), "atomic save leaves no temp file behind"


def test_fingerprint_tracks_what_decides_behaviour_only():
    base = sample().fingerprint()
    f = sample()
    f.packages["six"]["version"] = "1.17.0"  # untracked package
    f.timings_ms = {"gpu": 99.0}
    f.env["HOME"] = "/home/x"
    assert f.fingerprint() == base
    for change in (
        lambda x: x.packages["vllm"].__setitem__("version", "0.22.1"),
        lambda x: x.packages["vllm"].__setitem__("files_modified", ["vllm/envs.py"]),
        lambda x: x.cutedsl.__setitem__("active_build", "libs-base"),
        lambda x: x.driver.__setitem__("version", "590.48.01"),
        lambda x: x.env.__setitem__("CUTE_DSL_ARCH", "sm_120a"),
        lambda x: x.env.__setitem__("VLLM_NVFP4_GEMM_BACKEND", "marlin"),
        lambda x: x.arch.__setitem__("value", "sm_120a"),
    ):
        g = sample()
        change(g)
        assert g.fingerprint() != base


def test_unknown_differs_from_absent():
    assert Facts().packages is None
    assert Facts(packages={}).package("vllm") is None


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON (line 1"),
        ("[1, 2]", "expected a JSON object"),
        (json.dumps({"schema": 99}), "field 'schema' is 99"),
        (json.dumps({"schema": SCHEMA, "packages": []}), "field 'packages' should be an object"),
        (json.dumps({"schema": SCHEMA, "packages": {"vllm": {}}}), "field 'packages.vllm' needs a 'version'"),
    ],
)
def test_malformed_snapshot_names_file_and_field(tmp_path, content, message):
    path = tmp_path / "snap.json"
    path.write_text(content)
    with pytest.raises(FactsError) as err:
        Facts.load(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_missing_snapshot(tmp_path):
    with pytest.raises(FactsError, match="cannot read snapshot"):
        Facts.load(tmp_path / "nope.json")


def test_newer_fields_are_ignored_not_fatal():
    data = sample().to_dict()
    data["from_the_future"] = {"x": 1}
    assert Facts.from_dict(data).packages["vllm"]["version"] == "0.22.0"
