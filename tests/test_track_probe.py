"""`matrix track --probe`: each new release's compiler or kernel source compiled (or read) for sm_121a, compared with
the previous release, and an entry proposed where a release starts or stops refusing the arch.

Fast: the proposal logic on recorded probe outcomes (the real outcomes of triton 3.5.1 / 3.6.0 and cutlass-dsl
4.4.2 / 4.5.0 / 4.5.2, cut to what decides), the arch-list reader, and the command end to end against a local
registry serving two flashinfer-python wheels. Slow: the real releases, compiled here (docs/evidence/track-probe-2026-11-28.md).
"""

from __future__ import annotations

import json
import textwrap

import pytest

from sparkdoctor.track.archlists import _lists
from sparkdoctor.track.probe import Outcome, ReleaseProbe
from sparkdoctor.track.transitions import Transition, known_by, proposal, transitions
from tests.released_server import Registry, build_wheel


def rel(package: str, version: str, kind: str, *outcomes: tuple[str, str, str]) -> ReleaseProbe:
    return ReleaseProbe(package, version, kind, [Outcome(g, p, v, f"{v} by {version}") for g, p, v in outcomes])


def test_a_release_that_stops_refusing_is_one_transition_per_group():
    """triton 3.5.1's ptxas (12.8) refuses all four PTX probes; 3.6.0 runs ptxas-blackwell for sm_121a, which compiles
    them: one transition for the ptxas Triton runs, none for the old ptxas that still refuses."""
    probes = ("e2m1-cvt", "nvfp4-mma")
    found = transitions([
        rel("triton", "3.5.1", "ptx", *((g, p, "refused") for g in ("ptxas", "the ptxas Triton runs") for p in probes)),
        rel("triton", "3.6.0", "ptx", *(("ptxas", p, "refused") for p in probes),
            *((g, p, "compiled") for g in ("ptxas-blackwell", "the ptxas Triton runs") for p in probes)),
    ])
    assert [(t.group, t.before, t.after, t.change, t.probes) for t in found] == [
        ("the ptxas Triton runs", "3.5.1", "3.6.0", "stops refusing", list(probes))]


def test_could_not_run_is_crossed_to_the_last_answer_and_a_new_refusal_is_a_breakage():
    """cutlass-dsl libs-cu13: nvfp4-mma-tile refused by 4.4.2's DSL, its compiler crashed in 4.5.0 (no answer),
    compiled by 4.5.2: the flip is between 4.4.2 and 4.5.2. A probe that compiled and then is refused starts
    refusing: a breakage, proposed as an open range from that release."""
    found = transitions([
        rel("nvidia-cutlass-dsl", "4.4.2", "cutedsl", ("libs-cu13", "nvfp4-mma", "refused"), ("libs-cu13", "nvfp4-mma-tile", "refused")),
        rel("nvidia-cutlass-dsl", "4.5.0", "cutedsl", ("libs-cu13", "nvfp4-mma", "compiled"), ("libs-cu13", "nvfp4-mma-tile", "could not run")),
        rel("nvidia-cutlass-dsl", "4.5.2", "cutedsl", ("libs-cu13", "nvfp4-mma", "compiled"), ("libs-cu13", "nvfp4-mma-tile", "compiled")),
        rel("nvidia-cutlass-dsl", "4.6.0", "cutedsl", ("libs-cu13", "nvfp4-mma", "refused"), ("libs-cu13", "nvfp4-mma-tile", "compiled")),
    ])
    got = [(t.probes, t.before, t.after, t.change) for t in found]
    assert got == [(["nvfp4-mma"], "4.4.2", "4.5.0", "stops refusing"), (["nvfp4-mma-tile"], "4.4.2", "4.5.2", "stops refusing"),
                   (["nvfp4-mma"], "4.5.2", "4.6.0", "starts refusing")]
    broke = proposal(found[-1], "sm_121a", "cutedsl")
    assert broke["to"] == ">=4.6.0" and broke["field"] == "when.packages.nvidia-cutlass-dsl" and broke["file"] == "matrix/cutlass-dsl.toml"
    assert set(broke) == {"entry", "file", "field", "from", "to", "because"}  # matrix track's proposal shape
    assert proposal(found[0], "sm_121a", "cutedsl")["to"] == "<4.5.0"


def test_a_transition_the_bundled_matrix_already_bounds_is_known_not_proposed():
    """cutlass-dsl 4.4.2 -> 4.5.0 (the DSL admits sm_121a from 4.5.0) is cutedsl-sm121a-not-admissible's `<4.5.0`,
    4.5.0 -> 4.5.2 (libs-base compiles the NVFP4 MMA again) is cutedsl-450-libs-base-mma's `==4.5.0`; FlashInfer
    0.7.2.post1 -> 0.7.4 (moe_utils lists major 12 again) is fi-moe-utils-jit-sm12x's `<0.7.4` since that bound was
    closed from the released 0.7.4 file (before that, the probe proposed it); a transition no bound brackets is
    proposed (test_matrix_track_probe_proposes_an_entry_when_a_release_stops_refusing)."""
    from sparkdoctor.matrix import load

    matrix = load(None)
    family = matrix.tracking.family("nvidia-cutlass-dsl")
    dsl = Transition("nvidia-cutlass-dsl", "libs-cu13", ["nvfp4-mma"], "4.4.2", "4.5.0", "stops refusing", "")
    assert "cutedsl-sm121a-not-admissible" in known_by(list(matrix.entries), family, dsl)
    base = Transition("nvidia-cutlass-dsl", "libs-base", ["nvfp4-mma"], "4.5.0", "4.5.2", "stops refusing", "")
    assert "cutedsl-450-libs-base-mma" in known_by(list(matrix.entries), family, base)
    fi = Transition("flashinfer-python", "flashinfer/jit/moe_utils.py:gen_moe_utils_module", ["arch list"], "0.7.2.post1", "0.7.4", "stops refusing", "")
    assert known_by(list(matrix.entries), matrix.tracking.family("flashinfer-python"), fi) == ["fi-moe-utils-jit-sm12x"]


def test_arch_lists_are_read_per_module_without_running_the_source():
    source = textwrap.dedent("""
        import os
        os.system("echo never run")
        def gen_a():
            return gen_jit_spec("a", [], supported_major_versions=[9, 10])
        def gen_b():
            x = f(supported_major_versions=None)
            y = f(supported_major_versions=[
                12,
            ])
            return f(supported_major_versions=MAJORS)
        """)
    lists = {a.key: a for a in _lists("flashinfer/jit/x.py", source)}
    assert {k: (a.majors, a.admits(12)) for k, a in lists.items()} == {
        "flashinfer/jit/x.py:gen_a": ((9, 10), False), "flashinfer/jit/x.py:gen_b": (None, True),
        "flashinfer/jit/x.py:gen_b#2": ((12,), True), "flashinfer/jit/x.py:gen_b#3": (None, None)}
    assert lists["flashinfer/jit/x.py:gen_b#3"].shown() == "not a literal list"


def _fi_matrix(tmp_path):
    folder = tmp_path / "matrix"
    folder.mkdir()
    (folder / "tracking.toml").write_text('component = "tracking"\n[tracked]\nflashinfer-python = "0.1.0"\n')
    return folder


def test_matrix_track_probe_proposes_an_entry_when_a_release_stops_refusing(tmp_path, monkeypatch):
    """End to end against a local registry: flashinfer-python 0.1.0's moe module lists majors [9, 10], 0.2.0 adds
    12, 0.3.0 drops it again. --probe reads the arch lists of 0.1.0 (tracked through) and the new releases and
    proposes both edges; the exit code is 1 (an edit proposed); without --probe there is no probe section."""
    from typer.testing import CliRunner

    from sparkdoctor.cli import app

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    lists = {"0.1.0": "[9, 10]", "0.2.0": "[9, 10, 12]", "0.3.0": "[10]"}
    with Registry() as reg:
        for version, majors in lists.items():
            body = f"def gen_moe_utils_module():\n    return spec(supported_major_versions={majors})\n".encode()
            reg.add("flashinfer-python", build_wheel(wheels, "flashinfer-python", version, {"flashinfer/jit/moe_utils.py": body}))
        monkeypatch.setenv("SPARKDOCTOR_INDEX_URL", reg.url)
        monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
        args = ["matrix", "track", "--matrix", str(_fi_matrix(tmp_path)), "--format", "json"]
        res = CliRunner().invoke(app, [*args, "--probe"])
        plain = CliRunner().invoke(app, args)
        console = CliRunner().invoke(app, [*args[:-2], "--probe"], env={"COLUMNS": "400"})
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    got = [(t["before"], t["after"], t["change"]) for t in doc["probe"]["transitions"]]
    assert got == [("0.1.0", "0.2.0", "stops refusing"), ("0.2.0", "0.3.0", "starts refusing")]
    proposed = [p for p in doc["proposals"] if p.get("entry", "").startswith("probe-")]
    assert [(p["field"], p["to"]) for p in proposed] == [("when.packages.flashinfer-python", "<0.2.0"), ("when.packages.flashinfer-python", ">=0.3.0")]
    assert "majors [9, 10, 12]" in proposed[0]["because"]
    plain_doc = json.loads(plain.stdout)  # without --probe: no probe section; the tracked-through move is still an edit
    assert "probe" not in plain_doc and [p["field"] for p in plain_doc["proposals"]] == ["tracked.flashinfer-python", "tracked_on"]
    assert plain.exit_code == 1, plain.output
    assert "probe: flashinfer-python 0.2.0 -> 0.3.0: flashinfer/jit/moe_utils.py:gen_moe_utils_module: arch list starts refusing sm_121a" in console.output


def test_a_cutedsl_probe_that_could_not_start_is_said_and_never_cached(tmp_path, monkeypatch):
    """Over the download limit (the wheels' sizes from the index) nothing is installed; with no uv nothing can be:
    both are the release's error, and neither is cached (the next run probes again)."""
    import sparkdoctor.track.probe as probe
    import sparkdoctor.whatif.probe as whatif_probe
    from sparkdoctor.released import Index, Reader
    from sparkdoctor.released.http import Client

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    with Registry() as reg:
        for name in ("nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base"):
            reg.add(name, build_wheel(wheels, name, "9.0.0", {f"{name.replace('-', '_')}/x.py": b"x = 1\n" * 2000}))
        monkeypatch.setattr(probe, "cutedsl_builds", lambda reader, v: {"libs-base": {"nvidia-cutlass-dsl": v, "nvidia-cutlass-dsl-libs-base": v}})
        reader = Reader(index=Index(Client(timeout=30), reg.url), root=tmp_path / "released")
        try:
            monkeypatch.setattr(probe, "INSTALL_BYTES_LIMIT", 100)
            big = probe.probe_release(reader, "nvidia-cutlass-dsl", "9.0.0", "sm_121a")
            monkeypatch.setattr(probe, "INSTALL_BYTES_LIMIT", 2**30)
            monkeypatch.setattr(whatif_probe, "uv_binary", lambda: None)
            no_uv = probe.probe_release(reader, "nvidia-cutlass-dsl", "9.0.0", "sm_121a")
        finally:
            reader.close()
    assert big.error and "over the 0 MiB limit" in big.error and not big.outcomes, big.to_json()
    assert no_uv.error and "uv is not installed" in no_uv.error, no_uv.to_json()
    assert not (tmp_path / "cache" / "track-probe").exists()


@pytest.mark.parametrize("damage", ["folder", "wrong-types", "not-dicts", "truncated"])
def test_a_kept_probe_that_is_damaged_or_cannot_be_written_is_probed_again(tmp_path, monkeypatch, damage):
    """A kept outcome file of another shape was trusted (wrong types reached the proposals); a folder in its place
    made the write after a whole probe an internal error (its temporary file had one fixed name, too, which two
    runs at once shared). Now: probed again, the same outcomes, nothing left beside the entry."""
    import sparkdoctor.track.probe as probe
    from sparkdoctor.released import Index, Reader
    from sparkdoctor.released.http import Client

    monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    body = b"def gen_moe_utils_module():\n    return spec(supported_major_versions=[9, 10, 12])\n"
    with Registry() as reg:
        reg.add("flashinfer-python", build_wheel(wheels, "flashinfer-python", "0.2.0", {"flashinfer/jit/moe_utils.py": body}))
        reader = Reader(index=Index(Client(timeout=30), reg.url), root=tmp_path / "released")
        try:
            fresh = probe.probe_release(reader, "flashinfer-python", "0.2.0", "sm_121a")
            (kept,) = (tmp_path / "cache" / "track-probe").iterdir()
            if damage == "folder":
                kept.unlink()
                (kept / "x").mkdir(parents=True)
            else:
                text = {"wrong-types": '{"outcomes": [{"group": 1, "probe": [], "verdict": null, "detail": 2}], "notes": []}',
                        "not-dicts": '{"outcomes": ["admits"], "notes": [3]}', "truncated": kept.read_text()[:40]}[damage]
                kept.write_text(text)
            again = probe.probe_release(reader, "flashinfer-python", "0.2.0", "sm_121a")
        finally:
            reader.close()
    assert fresh.outcomes and not fresh.cached and not again.cached
    assert again.outcomes == fresh.outcomes and again.notes == fresh.notes
    assert sorted(p.name for p in (tmp_path / "cache" / "track-probe").iterdir()) == [kept.name]


def test_probe_with_an_arch_that_does_not_exist_is_one_line_exit_2(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "c")}
    env.pop("SPARKDOCTOR_DEBUG", None)
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "track", "--matrix", str(_fi_matrix(tmp_path)), "--probe",
                           "--arch", "sm_999a", "--format", "json"], capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("sparkdoctor: error: --arch sm_999a: no CUDA GPU has arch sm_999") and done.stderr.count("\n") == 1
    assert json.loads(done.stdout)["errors"][0]["code"] != "internal"


# ---- the real releases (slow: read from PyPI, compiled here) ---------------------------------------------------
@pytest.fixture
def fresh_probe_cache(tmp_path, monkeypatch):
    """The probes' outcome cache emptied (every release really compiled); the released-member cache stays shared."""
    import sparkdoctor.track.probe as probe

    real = probe._cache_file
    monkeypatch.setattr(probe, "_cache_file", lambda *a: tmp_path / "probe-cache" / real(*a).name)


def _probe(package: str, versions: list[str]) -> tuple[list[ReleaseProbe], list[Transition]]:
    from sparkdoctor.released import Reader
    from sparkdoctor.track.probe import probe_release

    reader = Reader()
    try:
        probed = [probe_release(reader, package, v, "sm_121a") for v in versions]
    finally:
        reader.close()
    for r in probed:
        assert r.error is None and not r.cached, r.to_json()
    return probed, transitions(probed)


@pytest.mark.slow
def test_triton_36_ptxas_stops_refusing_sm121a(fresh_probe_cache):
    """triton 3.5.1 bundles ptxas 12.8.93 (does not know sm_121a); 3.6.0 adds ptxas-blackwell 12.9, which Triton runs
    for sm_100 and newer: the PTX probes stop being refused at 3.6.0, and 3.6.0's old ptxas still refuses them."""
    probed, found = _probe("triton", ["3.5.1", "3.6.0"])
    (t,) = found
    assert (t.group, t.before, t.after, t.change) == ("the ptxas Triton runs", "3.5.1", "3.6.0", "stops refusing")
    assert {"nvfp4-mma", "e2m1-cvt"} <= set(t.probes)
    assert "does not know sm_121a" in t.detail and "ptxas-blackwell 12.9" in t.detail
    assert {o.verdict for o in probed[1].outcomes if o.group == "ptxas"} == {"refused"}


@pytest.mark.slow
def test_nvcc_cu12_129_ptxas_stops_refusing_sm121a_and_is_proposed(fresh_probe_cache):
    """nvidia-cuda-nvcc-cu12 12.8.93's ptxas does not know sm_121a, 12.9.86's assembles every PTX probe; no entry bounds
    the nvcc wheels, so the edge is proposed for the CUDA toolkit's file."""
    from sparkdoctor.matrix import load

    _probed, found = _probe("nvidia-cuda-nvcc-cu12", ["12.8.93", "12.9.86"])
    (t,) = found
    assert (t.group, t.before, t.after, t.change) == ("ptxas", "12.8.93", "12.9.86", "stops refusing")
    assert {"nvfp4-mma", "e2m1-cvt"} <= set(t.probes)
    matrix = load(None)
    assert known_by(list(matrix.entries), matrix.tracking.family(t.package), t) == []
    assert proposal(t, "sm_121a", "ptx")["file"] == "matrix/cuda-toolkit.toml"
    assert "nvidia-cuda-nvcc-cu12" in matrix.tracking.tracked  # `matrix track --probe` follows it


@pytest.mark.slow
def test_cutlass_dsl_442_450_452_transitions(fresh_probe_cache):
    """4.4.2's DSL refuses sm_121a for the NVFP4 MMAs (both builds); 4.5.0 [cu13] compiles nvfp4-mma while plain 4.5.0
    (libs-base) is still refused, by ptxas (`_mma`), and 4.5.2 compiles everything in both builds."""
    probed, found = _probe("nvidia-cutlass-dsl", ["4.4.2", "4.5.0", "4.5.2"])
    got = {(t.group, p, t.before, t.after, t.change) for t in found for p in t.probes}
    assert ("libs-cu13", "nvfp4-mma", "4.4.2", "4.5.0", "stops refusing") in got, found
    assert ("libs-base", "nvfp4-mma", "4.5.0", "4.5.2", "stops refusing") in got, found  # 4.5.0's plain build: ptxas refuses
    assert not any(t.change == "starts refusing" for t in found), found
    last = {(o.group, o.probe): o.verdict for o in probed[-1].outcomes}
    assert {v for (g, _), v in last.items() if g == "libs-cu13"} == {"compiled"}, last
    from sparkdoctor.matrix import load

    matrix = load(None)  # both edges are in the matrix already: cutedsl-sm121a-not-admissible <4.5.0, cutedsl-450-libs-base-mma ==4.5.0
    for t in found:
        assert known_by(list(matrix.entries), matrix.tracking.family("nvidia-cutlass-dsl"), t), t


@pytest.mark.slow
def test_flashinfer_074_moe_utils_admits_sm12x_again(fresh_probe_cache):
    """FlashInfer 0.7.2.post1's gen_moe_utils_module lists majors [9, 10]; 0.7.4 lists 8-12: read from the released
    sources. The probe proposed it while fi-moe-utils-jit-sm12x's bound was open; that bound is now `<0.7.4` (closed
    from the same released file), so the transition is known by it."""
    from sparkdoctor.matrix import load

    _probed, found = _probe("flashinfer-python", ["0.7.2.post1", "0.7.4"])
    moe = [t for t in found if t.group == "flashinfer/jit/moe_utils.py:gen_moe_utils_module"]
    assert [(t.before, t.after, t.change) for t in moe] == [("0.7.2.post1", "0.7.4", "stops refusing")]
    assert "majors [9, 10]" in moe[0].detail and "majors [8, 9, 10, 11, 12]" in moe[0].detail
    matrix = load(None)
    assert known_by(list(matrix.entries), matrix.tracking.family("flashinfer-python"), moe[0]) == ["fi-moe-utils-jit-sm12x"]
