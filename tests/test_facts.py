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
        ("{}", "field 'schema' is missing; this sparkdoctor reads schema 1"),  # was "is None": a Python word
        (json.dumps({"schema": None}), "field 'schema' is null; this sparkdoctor reads schema 1"),
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


@pytest.mark.parametrize("number", ["Infinity", "-Infinity", "NaN", "1e999"])
def test_a_snapshot_with_a_non_finite_number_is_refused_in_one_line(tmp_path, number):
    """Python's json reads NaN, Infinity and 1e999; `check --facts X --format json` then printed them back as
    `Infinity`, which no strict JSON reader takes (found by the fuzz suite under load)."""
    path = tmp_path / "snap.json"
    f = sample()
    f.save(path)
    path.write_text(path.read_text().replace('"gpu": 3.0', f'"gpu": {number}'))
    with pytest.raises(FactsError) as err:
        Facts.load(path)
    assert str(err.value) == f"{path}: not a snapshot: the number {number} is not finite"


def test_missing_snapshot(tmp_path):
    with pytest.raises(FactsError, match="cannot read snapshot"):
        Facts.load(tmp_path / "nope.json")


def test_newer_fields_are_ignored_not_fatal():
    data = sample().to_dict()
    data["from_the_future"] = {"x": 1}
    assert Facts.from_dict(data).packages["vllm"]["version"] == "0.22.0"


# ---- every field's shape is checked when a snapshot is read ---------------------------------------
GB10_BROKEN = __import__("pathlib").Path(__file__).parent / "data" / "facts" / "gb10-broken.json"


def broken(change) -> dict:
    doc = json.loads(GB10_BROKEN.read_text())
    change(doc)
    return doc


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda d: d["packages"]["torch"].update(version=12), "field 'packages.torch.version' should be a version string, got int"),
        (lambda d: d["packages"]["torch"].pop("version"), "field 'packages.torch' needs a 'version'"),
        (lambda d: d["packages"]["torch"].update(files_modified="a.py"), "field 'packages.torch.files_modified' should be a list"),
        (lambda d: d["packages"].update(torch=["2.9"]), "field 'packages.torch' should be an object, got a list"),
        (lambda d: d.update(arch={"value": 121}), "field 'arch.value' should be a GPU arch such as sm_121a, got int"),
        (lambda d: d.update(arch={"value": "sm_999", "source": "given"}), "field 'arch.value' is 'sm_999'"),
        (lambda d: d["gpus"][0].update(index="0"), "field 'gpus[0].index' should be an integer, got a string"),
        (lambda d: d["gpus"][0].update(unified="yes"), "field 'gpus[0].unified' should be true or false"),
        (lambda d: d["gpus"].append("GB10"), "field 'gpus[1]' should be an object, got a string"),
        (lambda d: d["driver"].update(version="5" * 5000), "field 'driver.version' has 5,000 characters"),
        (lambda d: d["env"].update(X=1), "field 'env.X' should be a string, got int"),
        (lambda d: d["errors"].append({"collector": "gpu"}), "needs a 'error'"),
        (lambda d: d.update(timings_ms={"gpu": "fast"}), "field 'timings_ms.gpu' should be a number"),
        (lambda d: d.update(schema=True), "field 'schema' is True"),
        # Found by mutating gb10-broken.json: each passed the old check and crashed the matrix or a renderer.
        (lambda d: d["env"].update(TORCH_CUDA_ARCH_LIST=None), "field 'env.TORCH_CUDA_ARCH_LIST' should be a string, got null"),
        (lambda d: d["packages"]["triton"].update(version=None), "field 'packages.triton.version' should be a version string, got null"),
        (lambda d: d.update(constraints=[{"file": "c.txt", "name": None}]), "field 'constraints[0].name' should be a string, got null"),
        (lambda d: d["kernels"]["e2m1-cvt"]["runs"][0].update(verified=[]), "field 'kernels.e2m1-cvt.runs[0].verified' should be true or false, got a list"),
    ],
)
def test_a_malformed_field_is_named_by_its_path(change, message):
    with pytest.raises(FactsError) as err:
        Facts.from_dict(broken(change), source="snap.json")
    assert str(err.value).startswith("snap.json: ") and message in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_the_bundled_snapshots_and_a_saved_one_pass(tmp_path):
    for path in (GB10_BROKEN.parent).glob("*.json"):
        Facts.load(path)
    f = sample()
    f.save(tmp_path / "x.json")
    assert Facts.load(tmp_path / "x.json").to_dict() == f.to_dict()


@pytest.mark.parametrize(
    "text,message",
    [
        ('{"schema": 1, "gpus": [' + "9" * 5000 + "]}", "not a snapshot"),
        ("[" * 100000 + "]" * 100000, "not a snapshot"),
        (b"\xff\xfe{}", "not UTF-8"),
    ],
)
def test_unreadable_json_is_one_line(tmp_path, text, message):
    path = tmp_path / "s.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(FactsError, match=message):
        Facts.load(path)


def test_unknown_keys_are_allowed_known_ones_are_checked():
    doc = broken(lambda d: d["packages"]["torch"].update(new_field={"x": [1]}))
    doc["something_new"] = 5
    assert Facts.from_dict(doc).packages["torch"]["new_field"] == {"x": [1]}


def test_fingerprint_survives_unknown_versions_and_names():
    # A broken ptxas (no version) next to a working one used to end the whole check with a TypeError.
    f = sample()
    f.toolkits = [{"tool": "ptxas", "version": "13.0.88", "used_by": ["triton"]}, {"tool": "ptxas", "version": None}]
    f.gpus = [{"name": "NVIDIA GB10", "cc": "12.1"}, {"name": None, "cc": None}]
    assert len(f.fingerprint()) == 16
    g = sample()
    g.toolkits = list(reversed(f.toolkits))
    g.gpus = list(reversed(f.gpus))
    assert g.fingerprint() == f.fingerprint()


def test_lone_surrogates_become_printable_text_on_the_way_in():
    # a file name that is not UTF-8 (os.listdir's surrogateescape) or a "\udcff" escape in a snapshot
    facts = Facts.from_dict({"schema": 1, "errors": [{"collector": "target", "error": "bad name x\udcffy"}]})
    text = facts.errors[0]["error"]
    assert text == "bad name x\\udcffy"
    text.encode("utf-8")  # before: UnicodeEncodeError in every renderer and file write


def test_a_field_name_with_a_line_break_is_named_on_one_line():
    with pytest.raises(FactsError) as info:
        Facts.from_dict({"schema": 1, "capabilities": {"a\nb": "not an object"}})
    assert "\n" not in str(info.value) and "a\\nb" in str(info.value)


def test_a_deeply_nested_free_form_value_is_one_line():
    deep: object = "x"
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(FactsError) as info:
        Facts.from_dict({"schema": 1, "capabilities": {"vllm.x": {"value": deep, "evidence": "f.py:1"}}})
    assert "nested too deeply" in str(info.value)


@pytest.mark.parametrize("schema", [10**5000, [[[[]]]]], ids=["5000-digit-int", "deep-list"])
def test_an_unprintable_schema_value_is_named_by_its_type(schema):
    deep = schema
    if isinstance(schema, list):
        for _ in range(5000):
            deep = [deep]
    with pytest.raises(FactsError) as info:
        Facts.from_dict({"schema": deep})
    assert f"a {type(deep).__name__}" in str(info.value)


@pytest.mark.parametrize("digits", [5_000, 10_000])
def test_a_snapshot_with_a_number_too_long_names_the_file_and_the_number_through_check(tmp_path, digits):
    """`check --facts` on a snapshot (perhaps from another box) holding a number of more digits than int() reads: before,
    Python's own words (`not a snapshot: Exceeds the limit (4300 digits) for integer string conversion ...`)."""
    import resource
    import subprocess
    import sys

    path = tmp_path / "s.json"
    path.write_text('{"schema": 1, "gpus": [' + "9" * digits + "]}")
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--facts", str(path)], capture_output=True,
                          text=True, check=False, cwd=tmp_path,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CPU, (60, 60)))
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr == (f"sparkdoctor: error: {path}: not a snapshot: a number longer than "
                           f"{sys.get_int_max_str_digits():,} digits (more than Python reads as an integer)\n")
