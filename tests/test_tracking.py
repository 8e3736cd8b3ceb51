"""`matrix verify --bounds`, `matrix track` and the tracking metadata, against a real HTTP server on
127.0.0.1 serving real wheels of a made-up package (tests/released_server.py), and once against the
real registry (slow). The matrix used is written here."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from sparkdoctor.matrix import MatrixError, load
from sparkdoctor.released import Index, Reader, RemoteError
from sparkdoctor.released.http import Client
from sparkdoctor.track.run import track
from sparkdoctor.verify.bounds import verify_bounds
from tests.released_server import Registry, build_wheel

# demo 0.1.0 lacks the message, 0.2.0 and 0.3.0 print it, 0.4.0 no longer does
RELEASES = {"0.1.0": b"print('ok')\n", "0.2.0": b"raise RuntimeError('GB10 is not supported')\n",
            "0.3.0": b"raise RuntimeError('GB10 is not supported')\n", "0.4.0": b"print('GB10 supported')\n"}


def write_matrix(tmp_path: Path, bound: str, tracked: str = "0.2.0", evidence: str = "checked", files: bool = True) -> Path:
    folder = tmp_path / "matrix"
    folder.mkdir(exist_ok=True)
    table = ('files = { package = "demo", affected = ["0.2.0"], fixed = ["0.1.0"], '
             'checks = [{ path = "demo/*.py", contains = "is not supported" }] }') if files else ""
    (folder / "demo.toml").write_text(textwrap.dedent(f"""
        component = "demo"
        [[entry]]
        id = "demo-gb10"
        title = "t"
        severity = "error"
        action = "configure"
        summary = "s"
        remedy = "r"
        evidence = "{evidence}"
        when.packages = {{ "demo" = "{bound}" }}
        refs = ["https://example.org/x"]
        {table}
        """))
    (folder / "tracking.toml").write_text(f'component = "tracking"\n[tracked]\ndemo = "{tracked}"\n')
    return folder


@pytest.fixture
def registry(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with Registry() as reg:
        for version, body in RELEASES.items():
            reg.add("demo", build_wheel(wheels, "demo", version, {"demo/core.py": body}))
        yield reg


def reader_for(reg, tmp_path) -> Reader:
    return Reader(index=Index(Client(timeout=30), reg.url), root=tmp_path / "cache")


def test_a_bound_with_both_sides_is_bracketed(tmp_path, registry):
    [r] = verify_bounds(load(write_matrix(tmp_path, ">=0.2.0,<0.4.0")), reader_for(registry, tmp_path))
    assert r.verdict == "bracketed", r.why
    assert (r.first, r.last, r.below, r.above) == ("0.2.0", "0.3.0", "0.1.0", "0.4.0")
    assert "fails on 0.1.0 below" in r.why and "fails on 0.4.0 above" in r.why


def test_a_bound_wider_than_the_released_files_is_contradicted(tmp_path, registry):
    [r] = verify_bounds(load(write_matrix(tmp_path, "<0.4.0")), reader_for(registry, tmp_path))
    assert r.verdict == "contradicted" and "affected 0.1.0" in r.why
    [r] = verify_bounds(load(write_matrix(tmp_path, ">=0.2.0,<0.3.0")), reader_for(registry, tmp_path))
    assert r.verdict == "contradicted" and "fixed 0.3.0" in r.why and "still holds" in r.why


def test_a_bound_without_a_file_check_is_not_bracketed_and_not_checked(tmp_path, registry):
    with pytest.raises(MatrixError, match="'evidence' is 'checked' but the entry has no check"):
        load(write_matrix(tmp_path, ">=0.2.0", files=False))
    folder = write_matrix(tmp_path, ">=0.2.0")  # a files table on another package brackets nothing on demo
    (folder / "demo.toml").write_text((folder / "demo.toml").read_text().replace('package = "demo"', 'package = "other"'))
    with pytest.raises(MatrixError, match="evidence' is \"checked\" but its bound demo >=0.2.0 cannot be bracketed .its files table reads other"):
        load(folder)
    [r] = verify_bounds(load(write_matrix(tmp_path, ">=0.2.0", evidence="reported", files=False)), reader_for(registry, tmp_path))
    assert r.verdict == "not-bracketed" and "no files table" in r.why


def test_track_closes_an_open_bound_and_cites_the_release(tmp_path, registry):
    result = track(load(write_matrix(tmp_path, ">=0.2.0")), reader_for(registry, tmp_path))
    [e] = result.entries
    assert e.verdict == "no-longer-affected" and "0.4.0" in e.why
    assert e.proposal["to"] == ">=0.2.0,<0.4.0"
    assert [p["releases"] for p in result.packages] == [["0.3.0", "0.4.0"]]
    assert any(p["field"] == "tracked.demo" and p["to"] == "0.4.0" for p in result.proposals)
    json.dumps(result.to_dict())  # JSON for a CI job


def test_track_moves_an_upper_bound_that_the_files_outgrew(tmp_path, registry):
    result = track(load(write_matrix(tmp_path, ">=0.2.0,<0.3.0")), reader_for(registry, tmp_path), {"demo": "0.3.0"})
    [e] = result.entries
    assert e.verdict == "upper-bound-moves" and e.proposal["to"] == ">=0.2.0"
    assert result.packages[0]["releases"] == ["0.3.0"]


def test_track_says_a_missing_through_version_and_a_broken_check(tmp_path, registry):
    folder = write_matrix(tmp_path, ">=0.2.0")
    text = (folder / "demo.toml").read_text().replace("demo/*.py", "demo/moved/*.py")
    (folder / "demo.toml").write_text(text.replace('affected = ["0.2.0"], fixed = ["0.1.0"], ', 'affected = ["0.2.0"], '))
    result = track(load(folder), reader_for(registry, tmp_path), {"demo": "0.9.0"})
    assert "demo 0.9.0 does not exist on the registry; read up to 0.4.0" in result.packages[0]["note"]
    assert result.entries[0].verdict == "check-broken" and "no member matches" in result.entries[0].why


def test_matrix_track_command_writes_json_and_exits_1_on_a_proposal(tmp_path, registry, monkeypatch):
    from typer.testing import CliRunner

    from sparkdoctor.cli import app

    monkeypatch.setenv("SPARKDOCTOR_INDEX_URL", registry.url)
    monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", str(tmp_path / "c"))
    out = tmp_path / "track.json"
    res = CliRunner().invoke(app, ["matrix", "track", "--matrix", str(write_matrix(tmp_path, ">=0.2.0")), "-o", str(out), "-f", "markdown"])
    assert res.exit_code == 1, res.output
    assert "| demo-gb10 | demo | >=0.2.0 | no-longer-affected |" in res.output
    assert json.loads(out.read_text())["summary"]["no-longer-affected"] == 1



def test_a_registry_that_cannot_be_listed_is_an_error_entry_and_a_stderr_line(tmp_path, monkeypatch):
    """Exit 2 came with `errors: []` and nothing on stderr: a CI job saw the code with no reason beside it."""
    from typer.testing import CliRunner

    from sparkdoctor.cli import app

    monkeypatch.setenv("SPARKDOCTOR_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens on the discard port
    monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", str(tmp_path / "c"))
    out = tmp_path / "track.json"
    res = CliRunner().invoke(app, ["matrix", "track", "--matrix", str(write_matrix(tmp_path, ">=0.2.0")), "--format", "json",
                                   "-o", str(out)])
    assert res.exit_code == 2, res.output
    for doc in (json.loads(res.stdout), json.loads(out.read_text())):
        [error] = doc["errors"]
        assert doc["exit_code"] == 2 and error["code"] == "registry" and "could not be listed" in error["message"]
    assert "matrix track: 1 package(s) could not be listed from the registry: http://127.0.0.1:9/simple/demo/" in res.stderr
    bounds = CliRunner().invoke(app, ["matrix", "verify", "--bounds", "--matrix", str(write_matrix(tmp_path, ">=0.2.0")),
                                      "--format", "json"])  # the daily workflow's next step: the same gap
    [error] = json.loads(bounds.stdout)["errors"]
    assert bounds.exit_code == 2 and error["code"] == "verify-error" and "demo-gb10: http://127.0.0.1:9/simple/demo/" in error["message"]
    assert "matrix verify: 1 could not be built, downloaded or probed" in bounds.stderr

def _track_through(tmp_path, registry, through: str):
    """`matrix track --through THROUGH --format json` as a user runs it (a process of its own, no debug tracebacks)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "SPARKDOCTOR_INDEX_URL": registry.url, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "c")}
    env.pop("SPARKDOCTOR_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "track", "--matrix", str(write_matrix(tmp_path, ">=0.2.0")),
                           "--through", through, "--format", "json"], capture_output=True, text=True, timeout=120, env=env, check=False)


def test_a_through_version_that_is_no_version_is_one_line_exit_2(tmp_path, registry):
    """`--through vllm=notaversion` used to end in "internal error: InvalidVersion" (exit 2 by accident)."""
    done = _track_through(tmp_path, registry, "demo=notaversion")
    assert done.returncode == 2, done.stderr
    assert done.stderr == "sparkdoctor: error: --through demo=notaversion: 'notaversion' is not a version (e.g. vllm=0.33.0)\n"
    assert json.loads(done.stdout)["errors"][0]["code"] != "internal"


def test_the_bundled_matrix_has_tracking_metadata():
    m = load()
    assert "vllm" in m.tracking.tracked and "nvidia-cutlass-dsl-libs-base" in m.tracking.family("nvidia-cutlass-dsl")


@pytest.mark.slow
def test_bounds_and_track_on_the_real_registry(tmp_path):
    """One real entry of the bundled matrix, bracketed on vLLM's released wheels; track through 0.33.0."""
    m = load()
    reader = Reader(root=tmp_path / "cache")
    try:
        [r] = verify_bounds(m, reader, "vllm-sparse-topk-smem-sm12x")
        from sparkdoctor.matrix import version_in

        assert r.verdict == "bracketed", r.why  # on the entry's bound as the matrix has it now
        assert r.below is not None and not version_in(r.below, r.spec) and version_in(r.first, r.spec), r.why
        one = [e for e in m.entries if e.id == "vllm-sparse-topk-smem-sm12x"]
        m.entries = one
        m.tracking.tracked["vllm"] = "0.20.0"  # the bundled matrix is tracked through a newer release now
        result = track(m, reader, {"vllm": "0.21.0", "flashinfer-python": "0.6.7", "nvidia-cutlass-dsl": "4.5.0", "torch": "2.11.0",
                                   "triton": "3.6.0", "nvidia-nccl-cu13": "2.30.4", "nvidia-nccl-cu12": "2.30.4"})
        [e] = result.entries
        assert [r.version for r, _ in e.runs] == ["0.20.1", "0.20.2", "0.21.0"] and e.verdict == "still-affected", e.why
    finally:
        reader.close()


def test_track_proposes_a_bound_for_an_unbounded_entry_whose_files_moved_on(tmp_path, registry):
    result = track(load(write_matrix(tmp_path, "*")), reader_for(registry, tmp_path))
    [e] = result.entries
    assert e.spec is None and e.verdict == "no-longer-affected" and e.proposal["to"] == "<0.4.0", e.why
    assert "hold on 0.3.0; not on 0.4.0" in e.why


def test_an_open_lower_side_gets_the_release_where_the_claim_starts(tmp_path, registry):
    [r] = verify_bounds(load(write_matrix(tmp_path, "<0.4.0")), reader_for(registry, tmp_path))
    assert r.verdict == "contradicted" and r.proposal == ">=0.2.0,<0.4.0", r.why
    assert "first hold on 0.2.0" in r.why


def test_track_moves_a_lower_bound_that_the_files_precede(tmp_path, registry):
    result = track(load(write_matrix(tmp_path, ">=0.3.0,<0.4.0", tracked="0.1.0")), reader_for(registry, tmp_path))
    [e] = result.entries
    assert e.verdict == "lower-bound-moves" and e.proposal["to"] == ">=0.2.0,<0.4.0", e.why


def test_a_file_not_yet_there_before_the_entrys_releases_is_not_a_broken_check(tmp_path, registry):
    folder = write_matrix(tmp_path, ">=0.3.0", tracked="0.0.1")
    text = (folder / "demo.toml").read_text().replace('affected = ["0.2.0"], fixed = ["0.1.0"]', 'affected = ["0.3.0"], fixed = ["0.2.0"]')
    (folder / "demo.toml").write_text(text.replace("demo/*.py", "demo/core.py"))
    wheels = tmp_path / "wheels"
    registry.projects["demo"][0] = build_wheel(wheels, "demo", "0.1.0", {"demo/other.py": b""})  # 0.1.0 lacks demo/core.py
    result = track(load(folder), reader_for(registry, tmp_path))
    [e] = result.entries
    assert e.verdict != "check-broken", e.why


def test_a_file_that_moved_to_a_lockstep_wheel_is_named(tmp_path, registry):
    folder = write_matrix(tmp_path, ">=0.2.0")
    (folder / "tracking.toml").write_text('component = "tracking"\n[tracked]\ndemo = "0.2.0"\n[lockstep]\ndemo = ["demo-core"]\n')
    wheels = tmp_path / "wheels"
    for i, v in enumerate(("0.3.0", "0.4.0")):  # from 0.3.0 the module ships in demo-core
        registry.projects["demo"][i + 2] = build_wheel(wheels, "demo", v, {"demo_stub.txt": b""})
        registry.add("demo-core", build_wheel(wheels, "demo-core", v, {"demo/core.py": RELEASES[v]}))
    [e] = track(load(folder), reader_for(registry, tmp_path)).entries
    assert e.verdict == "check-broken" and "moved: demo/*.py is in demo-core 0.3.0 (re-point files.package, or read it with files.also)" in e.why, e.why


def _moved_to_core(tmp_path, registry, bound: str) -> Path:
    """demo's module moves to a lockstep demo-core wheel from 0.3.0; the files table reads both."""
    folder = write_matrix(tmp_path, bound)
    (folder / "tracking.toml").write_text('component = "tracking"\n[tracked]\ndemo = "0.2.0"\n[lockstep]\ndemo = ["demo-core"]\n')
    (folder / "demo.toml").write_text((folder / "demo.toml").read_text().replace('package = "demo", ', 'package = "demo", also = ["demo-core"], '))
    wheels = tmp_path / "wheels"
    for i, v in enumerate(("0.3.0", "0.4.0")):
        registry.projects["demo"][i + 2] = build_wheel(wheels, "demo", v, {"demo_stub.txt": b""})
        registry.add("demo-core", build_wheel(wheels, "demo-core", v, {"demo/core.py": RELEASES[v]}))
    return folder


def test_files_also_follows_a_file_into_a_lockstep_wheel(tmp_path, registry):
    folder = _moved_to_core(tmp_path, registry, ">=0.2.0")
    [e] = track(load(folder), reader_for(registry, tmp_path)).entries
    # 0.3.0 holds (its demo-core wheel has the message), 0.4.0 does not: the bound closes there, nothing is broken
    assert e.verdict == "no-longer-affected" and e.proposal["to"] == ">=0.2.0,<0.4.0", e.why
    [r] = verify_bounds(load(_moved_to_core(tmp_path, registry, ">=0.2.0,<0.4.0")), reader_for(registry, tmp_path))
    assert r.verdict == "bracketed" and (r.first, r.last, r.above) == ("0.2.0", "0.3.0", "0.4.0"), r.why
    assert any("demo_core-0.3.0" in ev for run in r.runs if run.version == "0.3.0" for ev in run.evidence)


def test_files_also_may_not_repeat_the_package(tmp_path):
    folder = write_matrix(tmp_path, ">=0.2.0")
    (folder / "demo.toml").write_text((folder / "demo.toml").read_text().replace('package = "demo", ', 'package = "demo", also = ["Demo"], '))
    with pytest.raises(MatrixError, match="also' repeats files.package"):
        load(folder)


def _two_tables(tmp_path, registry, pin_table: bool = True, same_package: bool = False, evidence: str = "checked") -> Path:
    """demo-gb10 with a second bound in when.constraints (a pin on `pin`) and one files table per
    package as an array of tables; pin 1.0 has the old API, 2.0 the new one."""
    folder = write_matrix(tmp_path, ">=0.2.0,<0.4.0", evidence="reported", files=False)
    wheels = tmp_path / "wheels"
    for v, body in (("1.0", b"class Old: pass\n"), ("2.0", b"class New: pass\n")):
        registry.add("pin", build_wheel(wheels, "pin", v, {"pin/api.py": body}))
    second = textwrap.dedent(f"""
        [[entry.files]]
        package = "{'demo' if same_package else 'pin'}"
        affected = ["1.0"]
        fixed = ["2.0"]
        checks = [{{ path = "pin/api.py", contains = "class Old" }}]
        """) if pin_table else ""
    text = (folder / "demo.toml").read_text().replace('evidence = "reported"', f'evidence = "{evidence}"')
    text = text.replace('refs = ["https://example.org/x"]', 'when.constraints = { "pin" = "<2.0" }\nrefs = ["https://example.org/x"]')
    text += textwrap.dedent("""
        [[entry.files]]
        package = "demo"
        affected = ["0.2.0"]
        fixed = ["0.1.0"]
        checks = [{ path = "demo/*.py", contains = "is not supported" }]
        """) + second
    (folder / "demo.toml").write_text(text)
    return folder


def test_a_constraint_bound_is_bracketed_by_its_own_files_table(tmp_path, registry):
    from sparkdoctor.verify.bounds import side_counts

    results = verify_bounds(load(_two_tables(tmp_path, registry)), reader_for(registry, tmp_path))
    assert [(r.package, r.spec, r.source, r.verdict) for r in results] == [
        ("demo", ">=0.2.0,<0.4.0", "packages", "bracketed"), ("pin", "<2.0", "constraints", "bracketed")], [r.why for r in results]
    assert results[1].reads == "pin" and "fails on 2.0 above" in results[1].why
    assert side_counts(results) == {"sides": 3, "bracketed": 3}
    assert results[1].to_dict()["source"] == "constraints"


def test_a_constraint_bound_without_a_table_is_counted_not_bracketed(tmp_path, registry):
    from sparkdoctor.verify.bounds import side_counts

    folder = _two_tables(tmp_path, registry, pin_table=False, evidence="reported")
    results = verify_bounds(load(folder), reader_for(registry, tmp_path))
    assert results[1].verdict == "not-bracketed" and "no file check on pin: the files table reads demo" in results[1].why
    assert side_counts(results) == {"sides": 3, "bracketed": 2}


def test_two_files_tables_may_not_read_the_same_package(tmp_path, registry):
    with pytest.raises(MatrixError, match="two tables reading 'demo'"):
        load(_two_tables(tmp_path, registry, same_package=True))


def test_track_runs_every_files_table(tmp_path, registry):
    result = track(load(_two_tables(tmp_path, registry)), reader_for(registry, tmp_path))
    assert [e.package for e in result.entries] == ["demo"]  # pin is not tracked: its table is not re-run
    assert not result.untracked


@pytest.mark.parametrize(("spec", "sides"), [("==0.2.0", 2), (">=1.0,!=1.5.*,<2.0", 2), ("<2.0", 1), (">=1.0", 1), ("!=1.0", 0), ("~=1.2", 2)])
def test_sides_of_counts_lower_and_upper_sides(spec, sides):
    from sparkdoctor.verify.bounds import sides_of

    assert sides_of(spec) == sides


def _sdist_matrix(tmp_path, registry, bound: str) -> Path:
    """demo's build file (only in its sdists): 0.2.0 and 0.3.0 lack the 12.1a guard, 0.4.0 has it,
    0.1.0 has no SM12x step at all."""
    from tests.released_server import build_sdist

    sdists = tmp_path / "sdists"
    sdists.mkdir(exist_ok=True)
    builds = {"0.1.0": b"set(ARCHS \"10.0a\")\n", "0.2.0": b"set(ARCHS \"12.0a\")\n", "0.3.0": b"set(ARCHS \"12.0a\")\n",
              "0.4.0": b"set(ARCHS \"12.0a;12.1a\")\n"}
    for v, body in builds.items():
        registry.add("demo", build_sdist(sdists, "demo", v, {"CMakeLists.txt": body, "demo/core.py": RELEASES[v]}))
    folder = write_matrix(tmp_path, bound)
    table = ('files = { package = "demo", dist = "sdist", affected = ["0.2.0"], fixed = ["0.1.0", "0.4.0"], checks = ['
             '{ path = "CMakeLists.txt", contains = "12.0a" }, { path = "CMakeLists.txt", lacks = "12.1a" }] }')
    text = (folder / "demo.toml").read_text()
    (folder / "demo.toml").write_text(text[: text.index("files = {")] + table + "\n")
    return folder


def test_a_bound_only_a_source_build_shows_is_bracketed_on_the_sdists(tmp_path, registry):
    folder = _sdist_matrix(tmp_path, registry, ">=0.2.0,<0.4.0")
    reader = reader_for(registry, tmp_path)
    [r] = verify_bounds(load(folder), reader)
    assert r.verdict == "bracketed" and (r.below, r.above) == ("0.1.0", "0.4.0"), r.why
    assert any("demo-0.2.0.tar.gz (the sdist)" in ev for run in r.runs for ev in run.evidence)
    gets = [path for path, _ in registry.log if path.endswith(".tar.gz")]
    assert sorted(gets) == sorted(f"/files/demo-{v}.tar.gz" for v in ("0.1.0", "0.2.0", "0.3.0", "0.4.0")), gets  # each downloaded once
    reader.close()
    before = len(registry.log)
    [again] = verify_bounds(load(folder), reader_for(registry, tmp_path))  # members come from the cache
    assert again.verdict == "bracketed"
    assert not any(path.endswith(".tar.gz") for path, _ in registry.log[before:])


def test_a_damaged_sdist_is_one_line_error(tmp_path, registry):
    folder = _sdist_matrix(tmp_path, registry, ">=0.2.0,<0.4.0")
    bad = tmp_path / "sdists" / "demo-0.3.0.tar.gz"
    bad.write_bytes(b"not a gzip file")
    [r] = verify_bounds(load(folder), reader_for(registry, tmp_path))
    assert r.verdict == "error" and "demo-0.3.0.tar.gz: not a readable sdist" in r.why and "\n" not in r.why, r.why


def test_an_sdist_table_refuses_cubin_checks(tmp_path):
    folder = write_matrix(tmp_path, ">=0.2.0")
    text = (folder / "demo.toml").read_text().replace('package = "demo", ', 'package = "demo", dist = "sdist", ')
    (folder / "demo.toml").write_text(text.replace('contains = "is not supported"', 'cubins = ["sm_120"]'))
    with pytest.raises(MatrixError, match="dist' \"sdist\" reads one source archive"):
        load(folder)


def test_an_entry_says_why_its_bound_cannot_be_bracketed(tmp_path, registry):
    folder = write_matrix(tmp_path, ">=0.2.0", evidence="reported", files=False)
    text = (folder / "demo.toml").read_text()
    (folder / "demo.toml").write_text(text.replace('refs = [', 'unbracketable = "a runtime hang; no file differs"\nrefs = ['))
    [r] = verify_bounds(load(folder), reader_for(registry, tmp_path))
    assert r.verdict == "not-bracketed" and r.why == "unbracketable (the entry says): a runtime hang; no file differs", r.why
    assert load(folder).get("demo-gb10").unbracketable == "a runtime hang; no file differs"
    [row] = track(load(folder), reader_for(registry, tmp_path)).untracked
    assert row["why"] == "no file check on demo (no files table); the entry says why: a runtime hang; no file differs", row


@pytest.mark.parametrize(("evidence", "bound", "why", "message"), [
    ("checked", ">=0.2.0", "x", "'unbracketable' says the bound cannot be bracketed, so evidence cannot be \"checked\""),
    ("reported", "*", "x", "'unbracketable' explains a version bound, but the entry has none"),
    ("reported", ">=0.2.0", " ", "'unbracketable' must say why"),
])
def test_unbracketable_is_refused_where_it_cannot_be_true(tmp_path, evidence, bound, why, message):
    folder = write_matrix(tmp_path, bound, evidence=evidence, files=evidence == "checked")
    text = (folder / "demo.toml").read_text()
    (folder / "demo.toml").write_text(text.replace('refs = [', f'unbracketable = "{why}"\nrefs = ['))
    with pytest.raises(MatrixError, match=re.escape(message)):
        load(folder)


def test_an_sdist_is_read_in_one_pass_and_refuses_a_huge_member(tmp_path, registry, monkeypatch):
    from sparkdoctor.released import sdist as sdist_module
    from tests.released_server import build_sdist

    members = {f"src/m{i}.py": f"VALUE = {i}\n".encode() for i in range(40)}
    registry.add("many", build_sdist(tmp_path, "many", "1.0", members))
    reader = reader_for(registry, tmp_path)
    archive = reader.sdist("many", "1.0")
    archive.prefetch(sorted(members, reverse=True))  # any order asked: read in the archive's order
    assert [archive.text(n) for n in sorted(members)] == [members[n].decode() for n in sorted(members)]
    assert archive.names[:1] == ["PKG-INFO"] and "src/m7.py" in archive.names
    monkeypatch.setattr(sdist_module, "MEMBER_LIMIT", 4)
    fresh = reader_for(registry, tmp_path / "other").sdist("many", "1.0")
    with pytest.raises(RemoteError, match="member src/m1.py is 10 bytes, over the 4-byte limit"):
        fresh.read("src/m1.py")


def test_a_checked_entry_must_bracket_its_constraint_too(tmp_path, registry):
    with pytest.raises(MatrixError, match="its bound pin <2.0 cannot be bracketed .its files table reads demo"):
        load(_two_tables(tmp_path, registry, pin_table=False))


# ---- every release seen: by upload time as well as by version; the console leads with proposals ----------

def _backport_registry(tmp_path, reg) -> None:
    """demo 0.2.0-0.4.0 uploaded in order, then 0.2.1 (a patch of the old line, fixed) uploaded after 0.4.0."""
    wheels = tmp_path / "bp"
    wheels.mkdir()
    for version, body, day in (("0.1.0", RELEASES["0.1.0"], "2026-01-01"), ("0.2.0", RELEASES["0.2.0"], "2026-02-01"),
                               ("0.3.0", RELEASES["0.3.0"], "2026-03-01"), ("0.4.0", RELEASES["0.4.0"], "2026-04-01"),
                               ("0.2.1", b"print('GB10 supported')\n", "2026-07-08")):
        reg.add("demo", build_wheel(wheels, "demo", version, {"demo/core.py": body}), uploaded=f"{day}T01:02:03.000000Z")


def test_track_rechecks_a_backport_uploaded_after_the_tracked_release(tmp_path):
    with Registry() as reg:
        _backport_registry(tmp_path, reg)
        folder = write_matrix(tmp_path, ">=0.2.0,<0.3.0", tracked="0.4.0")
        result = track(load(folder), reader_for(reg, tmp_path))
        [row] = result.packages
        assert row["backports"] == ["0.2.1"] and row["releases"] == ["0.2.1"]
        [e] = result.entries
        assert e.verdict == "no-longer-affected" and e.proposal["to"] == ">=0.2.0,<0.3.0,<0.2.1"
        assert not any(p["field"] == "tracked.demo" for p in result.proposals)  # 0.4.0 is still the newest
        # the matrix tracked on a day after the backport: it was seen then, nothing new
        (folder / "tracking.toml").write_text('component = "tracking"\ntracked_on = "2026-07-09"\n[tracked]\ndemo = "0.4.0"\n')
        assert track(load(folder), reader_for(reg, tmp_path)).packages[0]["releases"] == []
        # tracked on the backport's own day (a morning run; it was uploaded later that day): still re-checked
        (folder / "tracking.toml").write_text('component = "tracking"\ntracked_on = "2026-07-08"\n[tracked]\ndemo = "0.4.0"\n')
        assert track(load(folder), reader_for(reg, tmp_path)).packages[0]["backports"] == ["0.2.1"]
        # --since reaches back before it
        again = track(load(folder), reader_for(reg, tmp_path), since="2026-07-01")
        assert again.packages[0]["releases"] == ["0.2.1"] and any(p["field"] == "tracked_on" for p in again.proposals)


def test_a_bad_tracked_on_is_one_line(tmp_path):
    folder = write_matrix(tmp_path, ">=0.2.0")
    (folder / "tracking.toml").write_text('component = "tracking"\ntracked_on = "last week"\n[tracked]\ndemo = "0.2.0"\n')
    with pytest.raises(MatrixError, match="'tracked_on' must be a date YYYY-MM-DD"):
        load(folder)


def test_track_console_prints_proposals_first_and_the_rest_with_v(tmp_path, registry, monkeypatch):
    from typer.testing import CliRunner

    from sparkdoctor.cli import app

    monkeypatch.setenv("SPARKDOCTOR_INDEX_URL", registry.url)
    monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", str(tmp_path / "c"))
    folder = write_matrix(tmp_path, ">=0.2.0")
    demo = folder / "demo.toml"
    quiet = demo.read_text().replace('id = "demo-gb10"', 'id = "demo-quiet"').replace('"demo" = ">=0.2.0"', '"demo" = "<0.2.0"')
    quiet = quiet.replace('component = "demo"\n', "").replace('contains = "is not supported"', 'contains = "text no release prints"')
    demo.write_text(demo.read_text() + quiet)
    res = CliRunner().invoke(app, ["matrix", "track", "--matrix", str(folder)], env={"COLUMNS": "80"})
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert res.exit_code == 1 and lines[0].startswith("propose: demo-gb10: when.packages.demo: >=0.2.0 -> >=0.2.0,<0.4.0")
    assert "demo-quiet" not in res.output and "-v lists them" in res.output
    verbose = CliRunner().invoke(app, ["matrix", "track", "--matrix", str(folder), "-v"], env={"COLUMNS": "80"})
    assert "demo-quiet" in verbose.output and verbose.output.index("propose:") < verbose.output.index("demo-quiet")


def test_track_reads_extras_pins_and_names_the_stack_pip_cannot_install(tmp_path):
    """The shape of vLLM 0.33.0 and flashinfer-python 0.7.2.post1 (their real METADATA): vLLM pins the FlashInfer
    release and cutlass-dsl 4.8.0, FlashInfer's [b12x] extra pins cutlass-dsl 4.7.1."""
    wheels = tmp_path / "pins"
    wheels.mkdir()
    with Registry() as reg:
        reg.add("eng", build_wheel(wheels, "eng", "1.0.0", {"eng/x.py": b""}, requires=("kern==0.7.2.post1", "dsl[cu13]==4.8.0")))
        reg.add("kern", build_wheel(wheels, "kern", "0.7.2.post1", {"kern/x.py": b""},
                                    requires=("dsl>=4.6.2a0", 'dsl==4.7.1; extra == "b12x"', 'torch>=2.12; extra == "b12x"')))
        reg.add("dsl", build_wheel(wheels, "dsl", "4.8.0", {"dsl/x.py": b""}))
        folder = tmp_path / "m"
        folder.mkdir()
        (folder / "tracking.toml").write_text('component = "tracking"\n[tracked]\neng = "1.0.0"\nkern = "0.7.2.post1"\ndsl = "4.8.0"\n')
        result = track(load(folder), reader_for(reg, tmp_path))
    assert {"package": "kern", "version": "0.7.2.post1", "extra": "b12x", "requires": "dsl", "spec": "==4.7.1"} in result.pins
    [conflict] = result.pin_conflicts
    assert conflict["release"] == "eng 1.0.0" and conflict["with"] == "kern[b12x] 0.7.2.post1" and conflict["specs"] == "==4.8.0 against ==4.7.1"
    assert "pip cannot install eng==1.0.0 with kern[b12x]" in conflict["why"]


def test_a_file_gone_from_a_release_above_a_closed_range_agrees_with_the_bound(tmp_path, registry):
    """vllm-early-nvfp4-moe (>=0.10.1,<0.11.1) reads a module vLLM later removed: its absence from 0.20.x is the
    code being gone, not a broken check. Inside the range, a missing file still is one."""
    wheels = tmp_path / "gone"
    wheels.mkdir()
    registry.projects["demo"][3] = build_wheel(wheels, "demo", "0.4.0", {"other/x.py": b""})  # 0.4.0 has no demo/*.py
    folder = write_matrix(tmp_path, ">=0.2.0,<0.4.0", tracked="0.3.0")
    [e] = track(load(folder), reader_for(registry, tmp_path)).entries
    assert e.verdict == "unchanged", e.why
    [e] = track(load(write_matrix(tmp_path, ">=0.2.0", tracked="0.3.0")), reader_for(registry, tmp_path)).entries
    assert e.verdict == "check-broken" and "no member matches" in e.why


def _track_eng_kern_dsl(reg, tmp_path: Path):
    """`track` of a matrix tracking eng 1.0.0, kern 0.7.4 and dsl 4.8.0 against `reg`."""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "tracking.toml").write_text('component = "tracking"\n[tracked]\neng = "1.0.0"\nkern = "0.7.4"\ndsl = "4.8.0"\n')
    return track(load(folder), reader_for(reg, tmp_path))


def test_a_conflict_is_read_on_the_release_pinned_not_the_newest(tmp_path):
    """vLLM 0.33.0 pins flashinfer-python 0.7.2.post1 although 0.7.4 is out: the [b12x] pin of 0.7.2.post1 is what a
    pip install of that vLLM meets."""
    wheels = tmp_path / "pins"
    wheels.mkdir()
    with Registry() as reg:
        reg.add("eng", build_wheel(wheels, "eng", "1.0.0", {"eng/x.py": b""}, requires=("kern==0.7.2.post1", "dsl==4.8.0")))
        reg.add("kern", build_wheel(wheels, "kern", "0.7.2.post1", {"kern/x.py": b""}, requires=('dsl==4.7.1; extra == "b12x"',)))
        reg.add("kern", build_wheel(wheels, "kern", "0.7.4", {"kern/x.py": b""}, requires=('dsl>=4.8.0; extra == "b12x"',)))
        reg.add("dsl", build_wheel(wheels, "dsl", "4.8.0", {"dsl/x.py": b""}))
        result = _track_eng_kern_dsl(reg, tmp_path)
    [conflict] = result.pin_conflicts
    assert conflict["with"] == "kern[b12x] 0.7.2.post1" and conflict["specs"] == "==4.8.0 against ==4.7.1"


def test_a_pin_on_a_release_the_index_does_not_list_is_a_stack_pip_cannot_install(tmp_path):
    """vLLM 0.34.0 pins flashinfer-python==0.7.3, which PyPI never listed (0.7.2.post1, then 0.7.4): `pip install
    vllm==0.34.0` finds no distribution. That is said beside the conflicts, not only as a METADATA read error."""
    wheels = tmp_path / "pins"
    wheels.mkdir()
    with Registry() as reg:
        reg.add("eng", build_wheel(wheels, "eng", "1.0.0", {"eng/x.py": b""}, requires=("kern==0.7.3", "dsl==4.8.0")))
        reg.add("kern", build_wheel(wheels, "kern", "0.7.4", {"kern/x.py": b""}, requires=('dsl>=4.8.0; extra == "b12x"',)))
        reg.add("dsl", build_wheel(wheels, "dsl", "4.8.0", {"dsl/x.py": b""}))
        result = _track_eng_kern_dsl(reg, tmp_path)
    [conflict] = result.pin_conflicts
    assert conflict["release"] == "eng 1.0.0" and conflict["with"] == "kern 0.7.3" and conflict["specs"] == "==0.7.3 (not on the index)"
    assert conflict["why"].endswith("pip cannot install eng==1.0.0")
    assert [e.split(":")[0] for e in result.pin_errors] == ["kern 0.7.3"]


@pytest.mark.parametrize(("pin", "conflict"), [("kern===0.7.2.post1", True), ("kern===0.7.2-evil", False)])
def test_an_arbitrary_equality_pin_in_a_release_is_read_never_a_crash(tmp_path, pin, conflict):
    """A release's METADATA may pin with PEP 440's arbitrary equality (`===`, any string): its "version" was the text
    after "==" (`=0.7.2-evil`), and reading that release ended the whole track run in "internal error:
    InvalidVersion". `===V` of a real version is that pin; a string that is no version pins no release to read."""
    wheels = tmp_path / "pins"
    wheels.mkdir()
    with Registry() as reg:
        reg.add("eng", build_wheel(wheels, "eng", "1.0.0", {"eng/x.py": b""}, requires=(pin, "dsl==4.8.0")))
        reg.add("kern", build_wheel(wheels, "kern", "0.7.2.post1", {"kern/x.py": b""}, requires=('dsl==4.7.1; extra == "b12x"',)))
        reg.add("kern", build_wheel(wheels, "kern", "0.7.4", {"kern/x.py": b""}, requires=('dsl>=4.8.0; extra == "b12x"',)))
        reg.add("dsl", build_wheel(wheels, "dsl", "4.8.0", {"dsl/x.py": b""}))
        result = _track_eng_kern_dsl(reg, tmp_path)
    assert [c["with"] for c in result.pin_conflicts] == (["kern[b12x] 0.7.2.post1"] if conflict else [])
    assert result.pin_errors == []


def test_a_registry_that_cannot_be_reached_is_said_not_read_as_nothing_new(tmp_path):
    """The console said "demo: tracked through 0.1.0, new: none (... Connection refused)" and "1 no-new-release",
    with exit 2: a reader saw a clean answer. It says the package could not be listed."""
    from typer.testing import CliRunner

    from sparkdoctor.cli import app

    env = {"SPARKDOCTOR_INDEX_URL": "http://127.0.0.1:1/simple/", "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "c"), "COLUMNS": "200"}
    res = CliRunner().invoke(app, ["matrix", "track", "--matrix", str(write_matrix(tmp_path, ">=0.2.0"))], env=env)
    assert res.exit_code == 2, res.output
    assert "new: none" not in res.output and "demo: tracked through 0.2.0, could not be listed: " in res.output
    assert "1 package(s) could not be listed from the registry: demo" in res.output


def test_a_through_package_the_matrix_does_not_track_is_one_line_exit_2(tmp_path, registry):
    """`--through vlm=0.34.0` (a typo) was ignored: exit 0, every release read through the newest. It is refused,
    naming the packages tracked; a lockstep member of a tracked family is taken."""
    done = _track_through(tmp_path, registry, "demoo=0.3.0")
    assert done.returncode == 2, done.stderr
    assert done.stderr == "sparkdoctor: error: --through demoo=0.3.0: demoo is not a package this matrix tracks (tracked: demo)\n"
    assert json.loads(done.stdout)["exit_code"] == 2


def test_an_index_listing_thousands_of_releases_is_read_up_to_the_cap_and_says_so(tmp_path, monkeypatch):
    """An index that lists 20,000 releases of a tracked package had every one read and checked: the daily gate
    read for hours. The newest MAX_RELEASES are checked, the rest is said (package, how many), exit codes as
    documented (0 here: the checks still hold), and the tracked-through version is not moved past releases
    no check read. The cap is lowered to 30 here to keep the test short: the cost is the same per release read
    (the real 300 took 8 s of CPU in this test)."""
    import hashlib
    import time

    from typer.testing import CliRunner

    from sparkdoctor.cli import app
    from sparkdoctor.track import run
    from sparkdoctor.views.track import track_markdown

    cap = 30
    monkeypatch.setattr(run, "MAX_RELEASES", cap)
    wheels = tmp_path / "many"
    wheels.mkdir()
    versions = [f"1.{i}" for i in range(20_000)]
    newest = versions[-cap:]
    files = [{"filename": f"demo-{v}-py3-none-any.whl", "url": f"../../files/demo-{v}-py3-none-any.whl", "hashes": {"sha256": "0" * 64}}
             for v in versions[:-cap]]  # listed, never served: reading one is a 404
    with Registry() as reg:
        for v in newest:
            wheel = build_wheel(wheels, "demo", v, {"demo/core.py": RELEASES["0.2.0"]})
            reg.add("demo", wheel)
            files.append({"filename": wheel.name, "url": f"../../files/{wheel.name}", "size": wheel.stat().st_size,
                          "hashes": {"sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}})
        reg.pages["demo"] = json.dumps({"meta": {"api-version": "1.0"}, "name": "demo", "files": files}).encode()
        monkeypatch.setenv("SPARKDOCTOR_INDEX_URL", reg.url)
        monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", str(tmp_path / "c"))
        out = tmp_path / "track.json"
        started = time.process_time()  # CPU seconds (this process: the registry's thread too); the machine may be busy
        res = CliRunner().invoke(app, ["matrix", "track", "--matrix", str(write_matrix(tmp_path, ">=0.2.0")), "-o", str(out)],
                                 env={"COLUMNS": "200"})
        spent = time.process_time() - started
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    [row] = doc["packages"]
    assert row["releases"] == newest and row["left_out"] == 20_000 - cap
    assert "20,000 new releases listed, more than the 30 a run reads: 19,970 older ones left out (1.0 to 1.19969)" in row["note"]
    [entry] = doc["entries"]
    assert entry["verdict"] == "still-affected" and [r["version"] for r in entry["releases"]] == newest
    assert not any(p["field"] in ("tracked.demo", "tracked_on") for p in doc["proposals"])
    read = {path for path, _ in reg.log if path.startswith("/files/")}
    assert read == {f"/files/demo-{v}-py3-none-any.whl" for v in newest}  # nothing left out was fetched
    assert "new: the newest 30, 1.19970 to 1.19999" in res.output
    assert "19,970 older new release(s) of demo left out, not checked" in res.output
    markdown = track_markdown(doc)
    assert "| the newest 30, 1.19970 to 1.19999 |" in markdown and "19,970 older new release(s) of demo left out" in markdown
    assert spent < 20, spent  # measured 1.5 s (about 25 ms of CPU a release read): all 20,000 would be several minutes
