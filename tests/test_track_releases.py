"""`matrix track` sees every kind of release a box can run: pre-releases (FlashInfer's rc's, cutlass-dsl's .dev0,
which `check` judges by the same bounds), yanked releases (pip still installs one pinned with ==), and a
--through version however it is spelled (0.4 is 0.4.0). Against a real HTTP server on 127.0.0.1 serving real
wheels (tests/released_server.py); the matrix is tests/test_tracking.py's."""

from __future__ import annotations

from sparkdoctor.matrix import load
from sparkdoctor.track.run import track
from tests.released_server import Registry, build_wheel
from tests.test_tracking import RELEASES, reader_for, write_matrix

HOLDS, FIXED = RELEASES["0.2.0"], RELEASES["0.4.0"]


def _registry(tmp_path, reg: Registry, extra: list[tuple[str, bytes, str, str | None]]) -> None:
    """demo 0.1.0-0.4.0 uploaded in order in 2026, then `extra`: (version, body, day, yank reason or None)."""
    wheels = tmp_path / "w"
    wheels.mkdir(exist_ok=True)
    days = {"0.1.0": "2026-01-01", "0.2.0": "2026-02-01", "0.3.0": "2026-03-01", "0.4.0": "2026-04-01"}
    for version, body, day, yanked in [*((v, RELEASES[v], d, None) for v, d in days.items()), *extra]:
        reg.add("demo", build_wheel(wheels, "demo", version, {"demo/core.py": body}), uploaded=f"{day}T01:02:03Z", yanked=yanked)


def test_a_pre_release_newer_than_the_tracked_one_is_rechecked(tmp_path):
    """FlashInfer publishes its rc's on the registry and `check` judges an installed rc by the entries' bounds
    (pre-releases compared, never skipped): track listed only final releases, so an rc where the bug is back was
    never read, and the daily job said nothing new."""
    with Registry() as reg:
        _registry(tmp_path, reg, [("0.5.0rc1", HOLDS, "2026-06-01", None)])
        result = track(load(write_matrix(tmp_path, ">=0.2.0,<0.4.0", tracked="0.4.0")), reader_for(reg, tmp_path))
    [row] = result.packages
    assert row["releases"] == ["0.5.0rc1"]
    [e] = result.entries
    assert e.verdict == "upper-bound-moves" and e.proposal["to"] == ">=0.2.0", e.why
    assert any(p["field"] == "tracked.demo" and p["to"] == "0.5.0rc1" for p in result.proposals)


def test_a_pre_release_uploaded_after_the_tracked_day_is_a_backport(tmp_path):
    """FlashInfer 0.7.2rc5 and rc6 were uploaded after 0.7.2 itself: below the tracked-through version, after the day."""
    with Registry() as reg:
        _registry(tmp_path, reg, [("0.3.0rc9", FIXED, "2026-07-08", None)])
        folder = write_matrix(tmp_path, ">=0.2.0", tracked="0.4.0")
        (folder / "tracking.toml").write_text('component = "tracking"\ntracked_on = "2026-07-01"\n[tracked]\ndemo = "0.4.0"\n')
        result = track(load(folder), reader_for(reg, tmp_path))
    [row] = result.packages
    assert row["releases"] == ["0.3.0rc9"] and row["backports"] == ["0.3.0rc9"]
    [e] = result.entries
    assert e.verdict == "no-longer-affected" and e.proposal["to"] == ">=0.2.0,<0.3.0rc9", e.why


def test_a_yanked_release_is_read_and_said(tmp_path):
    """pip installs a yanked release when it is pinned with == (PEP 592), and a box that installed it before the
    yank keeps it: track left yanked releases out, and reading one failed (its wheels were not listed)."""
    with Registry() as reg:
        _registry(tmp_path, reg, [("0.5.0", HOLDS, "2026-06-01", "broken build")])
        result = track(load(write_matrix(tmp_path, ">=0.2.0,<0.4.0", tracked="0.4.0")), reader_for(reg, tmp_path))
    [row] = result.packages
    assert row["releases"] == ["0.5.0"] and row["yanked"] == ["0.5.0"]
    [e] = result.entries
    assert e.verdict == "upper-bound-moves", e.why
    assert [(r.version, r.holds, r.error) for r, _ in e.runs] == [("0.5.0", True, None)]


def test_a_through_version_is_compared_as_a_version_not_as_text(tmp_path):
    """`--through demo=0.4` said "demo 0.4 does not exist on the registry; read up to 0.4.0": 0.4 is 0.4.0."""
    with Registry() as reg:
        _registry(tmp_path, reg, [])
        result = track(load(write_matrix(tmp_path, ">=0.2.0", tracked="0.2.0")), reader_for(reg, tmp_path), {"demo": "0.4"})
    [row] = result.packages
    assert row["note"] == "" and row["releases"] == ["0.3.0", "0.4.0"]
    with Registry() as reg:
        _registry(tmp_path, reg, [])
        result = track(load(write_matrix(tmp_path, ">=0.2.0", tracked="0.2.0")), reader_for(reg, tmp_path), {"demo": "0.3.5"})
    assert result.packages[0]["note"] == "demo 0.3.5 does not exist on the registry; read up to 0.3.0"


def test_the_console_and_markdown_say_which_new_release_is_yanked(tmp_path):
    from rich.console import Console

    from sparkdoctor.views.track import render_track, track_markdown

    with Registry() as reg:
        _registry(tmp_path, reg, [("0.5.0", HOLDS, "2026-06-01", "broken build")])
        doc = track(load(write_matrix(tmp_path, ">=0.2.0", tracked="0.4.0")), reader_for(reg, tmp_path)).to_dict()
    console = Console(record=True, width=300)
    render_track(doc, console)
    assert "demo: tracked through 0.4.0, new: 0.5.0; yanked (pip installs one only when pinned ==): 0.5.0" in console.export_text()
    assert "| demo | 0.4.0 | newest | 0.5.0 (yanked (pip installs one only when pinned ==): 0.5.0) |" in track_markdown(doc)


def test_an_also_wheel_released_as_a_pre_release_is_read_with_it(tmp_path):
    """nvidia-cutlass-dsl 4.8.0.dev0 ships its Python package in libs-core 4.8.0.dev0: the `also` wheel was looked up
    among final releases only, so it was skipped, the file looked gone, and the run on the registry said three
    entries' bounds move (two "upper-bound-moves", one check broken) on a release whose files agree with them."""
    from tests.test_tracking import _moved_to_core

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with Registry() as reg:
        _registry(tmp_path, reg, [])
        folder = _moved_to_core(tmp_path, reg, ">=0.2.0,<0.4.0")
        reg.add("demo", build_wheel(wheels, "demo", "0.5.0.dev0", {"demo_stub.txt": b""}))
        reg.add("demo-core", build_wheel(wheels, "demo-core", "0.5.0.dev0", {"demo/core.py": FIXED}))
        result = track(load(folder), reader_for(reg, tmp_path))
    [e] = result.entries
    run = next(r for r, _ in e.runs if r.version == "0.5.0.dev0")
    assert any("demo_core-0.5.0.dev0" in ev for ev in run.evidence) and run.holds is False, run.evidence
    assert e.verdict == "still-affected", e.why


def test_a_release_that_does_not_hold_between_two_that_do_does_not_close_the_bound(tmp_path):
    """On the registry, nvidia-cutlass-dsl 4.8.0.dev0 failed a METADATA check that 4.7.1, 4.8.0 and 4.8.1 pass, and track
    proposed `>=4.6.0,<4.8.0.dev0`: an edit that would silence the entry on 4.8.0 and 4.8.1, where its checks hold.
    Only the releases in the gap leave the range."""
    with Registry() as reg:
        _registry(tmp_path, reg, [("0.3.0rc1", FIXED, "2026-02-15", None)])
        result = track(load(write_matrix(tmp_path, ">=0.2.0", tracked="0.2.0")), reader_for(reg, tmp_path))
    [e] = result.entries
    assert [(r.version, r.holds) for r, _ in e.runs] == [("0.3.0rc1", False), ("0.3.0", True), ("0.4.0", False)]
    assert e.verdict == "no-longer-affected" and e.proposal["to"] == ">=0.2.0,!=0.3.0rc1,<0.4.0", e.why
    assert "hold again on 0.3.0" in e.why


# nvidia-cutlass-dsl's Requires-Dist lines as its wheels' METADATA give them (read from pypi.org on 2026-12-01)
CUTLASS_DSL_REQUIRES = {
    "4.5.3": ("nvidia-cutlass-dsl-libs-base==4.5.3", 'nvidia-cutlass-dsl-libs-cu13==4.5.3; extra == "cu13"'),
    "4.8.0.dev0": ("nvidia-cutlass-dsl-libs-base==4.8.0.dev0", "nvidia-cutlass-dsl-libs-cu12==4.8.0.dev0",
                   'nvidia-cutlass-dsl-libs-cu13==4.8.0.dev0; extra == "cu13"'),
    "4.8.1": ("nvidia-cutlass-dsl-libs-base==4.8.1", "nvidia-cutlass-dsl-libs-cu12==4.8.1", 'nvidia-cutlass-dsl-libs-cu13==4.8.1; extra == "cu13"',
              'nvidia-cutlass-dsl-libs-qnx-cu12==4.8.1; extra == "qnx"', 'nvidia-cutlass-dsl-libs-qnx-cu13==4.8.1; extra == "qnx-cu13"'),
}


def test_the_plain_install_entry_reads_a_pre_release_pin_as_a_pin(tmp_path):
    """cutedsl-plain-install-cu12 matched `libs-cu12==[0-9.]+` and so missed 4.8.0.dev0's `==4.8.0.dev0`: the track run
    on the registry proposed closing its bound there, though that release requires libs-cu12 as 4.8.0 and 4.8.1 do."""
    from sparkdoctor.verify.files import remote_run, tables_of

    [table] = tables_of(load().get("cutedsl-plain-install-cu12"))
    wheels = tmp_path / "w"
    wheels.mkdir()
    with Registry() as reg:
        for version, requires in CUTLASS_DSL_REQUIRES.items():
            reg.add("nvidia-cutlass-dsl", build_wheel(wheels, "nvidia-cutlass-dsl", version, {}, requires=requires))
        reader = reader_for(reg, tmp_path)
        holds = {v: remote_run(reader, table.package, table.checks, v, "probe").holds for v in CUTLASS_DSL_REQUIRES}
    assert holds == {"4.5.3": False, "4.8.0.dev0": True, "4.8.1": True}


# Requires-Dist of the cutlass-dsl 4.8.1 family's wheels that name the family (read from pypi.org on 2026-12-01)
FAMILY_481 = {
    "nvidia-cutlass-dsl": CUTLASS_DSL_REQUIRES["4.8.1"],
    "nvidia-cutlass-dsl-libs-base": ("typing-extensions>=4.10.0", "nvidia-cutlass-dsl-libs-core==4.8.1",
                                     'nvidia-cuda-nvdisasm<14,>=13.4.0rc1; extra == "sass"'),
    "nvidia-cutlass-dsl-libs-cu12": ("nvidia-cutlass-dsl-libs-base==4.8.1",),
    "nvidia-cutlass-dsl-libs-cu13": ("nvidia-cutlass-dsl-libs-base==4.8.1",),
    "nvidia-cutlass-dsl-libs-core": ("typing-extensions>=4.10.0",),
}


def test_the_cutedsl_probe_installs_the_wheel_that_holds_the_dsl(tmp_path):
    """From 4.6.0 the DSL's Python package is in libs-core, which libs-base requires (nvidia-cutlass-dsl itself does
    not name it). The probe's builds were read from nvidia-cutlass-dsl's METADATA alone, installed with --no-deps, so
    `import cutlass.cute` failed: every probe of every release from 4.6.0 on was "could not run" (4.7.1-4.8.1, run here)."""
    from sparkdoctor.track.probe import cutedsl_builds

    wheels = tmp_path / "w"
    wheels.mkdir()
    with Registry() as reg:
        for name, requires in FAMILY_481.items():
            reg.add(name, build_wheel(wheels, name, "4.8.1", {}, requires=requires))
        builds = cutedsl_builds(reader_for(reg, tmp_path), "4.8.1")
    family = "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-core"
    assert builds == {"libs-base": dict.fromkeys((*family, "nvidia-cutlass-dsl-libs-cu12"), "4.8.1"),
                      "libs-cu13": dict.fromkeys((*family, "nvidia-cutlass-dsl-libs-cu12", "nvidia-cutlass-dsl-libs-cu13"), "4.8.1")}


# ---- local builds (2.15.0+cu130): an index such as download.pytorch.org's or FlashInfer's own lists them ----------


def test_the_local_builds_of_a_release_are_one_release_and_the_build_read_is_named(tmp_path):
    """An index that lists local builds (0.4.0+cu126, 0.4.0+cu130, and no plain 0.4.0) had each build read as a
    release of its own, newer than 0.4.0 by PEP 440, and proposed a tracked-through move naming a build
    (0.4.0+cu130) and a bound that closes at one (<0.5.0+cu126). A release is its public version; the build read
    is named in the evidence and the builds listed in the package row."""
    wheels = tmp_path / "w"
    with Registry() as reg:
        _registry(tmp_path, reg, [])
        for version, body in (("0.4.1+cu130", HOLDS), ("0.4.1+cu126", HOLDS), ("0.5.0+cu126", FIXED), ("0.5.0+cu130", FIXED)):
            reg.add("demo", build_wheel(wheels, "demo", version, {"demo/core.py": body}))
        result = track(load(write_matrix(tmp_path, ">=0.2.0,<0.4.0", tracked="0.4.0")), reader_for(reg, tmp_path))
    [row] = result.packages
    assert row["releases"] == ["0.4.1", "0.5.0"], row
    assert row["builds"] == {"0.4.1": ["0.4.1+cu126", "0.4.1+cu130"], "0.5.0": ["0.5.0+cu126", "0.5.0+cu130"]}
    [e] = result.entries
    assert [(r.version, r.holds) for r, _ in e.runs] == [("0.4.1", True), ("0.5.0", False)], e.why
    assert e.verdict == "upper-bound-moves" and e.proposal["to"] == ">=0.2.0,<0.5.0", e.why
    assert e.runs[0][0].evidence[0] == ("demo-0.4.1+cu130-py3-none-any.whl (build +cu130 of 0.4.1, of 2: +cu126, +cu130; "
                                        "the wheel CPython 3.12 on linux-aarch64 installs)")
    assert [p["to"] for p in result.proposals if p["field"] == "tracked.demo"] == ["0.5.0"]


def test_the_plain_build_is_read_first_then_the_newest_cuda_build_by_number(tmp_path):
    """cu99 is older than cu130 (PEP 440 compares the local labels as text, which puts cu99 last)."""
    from sparkdoctor.released.wheel import pick_wheel

    wheels = tmp_path / "w"
    with Registry() as reg:
        _registry(tmp_path, reg, [])
        for version in ("0.6.0+cu99", "0.6.0+cu130", "0.6.0+cu118"):
            reg.add("demo", build_wheel(wheels, "demo", version, {"demo/core.py": FIXED}))
        reader = reader_for(reg, tmp_path)
        assert pick_wheel(reader.index.wheels("demo", "0.6.0")).file.filename == "demo-0.6.0+cu130-py3-none-any.whl"
        assert reader.index.builds("demo")["0.6.0"] == ["0.6.0+cu99", "0.6.0+cu118", "0.6.0+cu130"]
        reg.add("demo", build_wheel(wheels, "demo", "0.6.0", {"demo/core.py": FIXED}))
        reader = reader_for(reg, tmp_path)
        pick = pick_wheel(reader.index.wheels("demo", "0.6.0"))
        assert pick.file.filename == "demo-0.6.0-py3-none-any.whl" and "the plain build of 0.6.0, of 4" in pick.why, pick.why
        assert [f.filename for f in reader.index.wheels("demo", "0.6.0+cu99")] == ["demo-0.6.0+cu99-py3-none-any.whl"]


def test_a_tracked_or_through_version_naming_a_build_is_its_release(tmp_path):
    """A matrix tracked through 0.4.0+cu130 (written by the run that named builds) re-read 0.4.0's other builds
    as new releases, and `--through demo=0.5.0+cu130` said 0.5.0+cu130 does not exist."""
    wheels = tmp_path / "w"
    with Registry() as reg:
        _registry(tmp_path, reg, [])
        for version, body in (("0.4.0+cu126", FIXED), ("0.4.0+cu130", FIXED), ("0.5.0+cu126", FIXED), ("0.6.0+cu126", FIXED)):
            reg.add("demo", build_wheel(wheels, "demo", version, {"demo/core.py": body}))
        result = track(load(write_matrix(tmp_path, ">=0.2.0,<0.4.0", tracked="0.4.0+cu130")), reader_for(reg, tmp_path),
                       {"demo": "0.5.0+cu130"})
    [row] = result.packages
    assert row["releases"] == ["0.5.0"] and row["note"] == "", row


def test_a_release_is_yanked_only_when_every_build_is(tmp_path):
    wheels = tmp_path / "w"
    with Registry() as reg:
        _registry(tmp_path, reg, [])
        reg.add("demo", build_wheel(wheels, "demo", "0.5.0+cu130", {"demo/core.py": HOLDS}), yanked="broken build")
        reg.add("demo", build_wheel(wheels, "demo", "0.5.0+cu126", {"demo/core.py": FIXED}))
        reg.add("demo", build_wheel(wheels, "demo", "0.6.0+cu126", {"demo/core.py": FIXED}), yanked="broken")
        result = track(load(write_matrix(tmp_path, ">=0.2.0,<0.4.0", tracked="0.4.0")), reader_for(reg, tmp_path))
    [row] = result.packages
    assert row["releases"] == ["0.5.0", "0.6.0"] and row["yanked"] == ["0.6.0"], row
    [e] = result.entries
    assert "demo-0.5.0+cu126" in e.runs[0][0].evidence[0] and e.runs[0][0].holds is False, e.runs[0][0].evidence


def test_an_upload_time_that_is_no_date_is_not_read_as_after_the_tracked_day(tmp_path):
    """A broken or hostile index whose PEP 700 upload-time is free text ("not a date") had every older release,
    the tracked one included, compared as text, read as uploaded after the tracked day and re-read as a backport."""
    wheels = tmp_path / "w"
    wheels.mkdir()
    with Registry() as reg:
        for version, body in RELEASES.items():
            reg.add("demo", build_wheel(wheels, "demo", version, {"demo/core.py": body}), uploaded="not a date at all")
        folder = write_matrix(tmp_path, ">=0.2.0,<0.4.0", tracked="0.4.0")
        (folder / "tracking.toml").write_text('component = "tracking"\ntracked_on = "2026-07-01"\n[tracked]\ndemo = "0.4.0"\n')
        result = track(load(folder), reader_for(reg, tmp_path))
    [row] = result.packages
    assert row["releases"] == [] and row["backports"] == [] and row["uploaded"] == {}, row


def test_an_index_listing_thousands_of_builds_of_a_release_names_a_bounded_few(tmp_path):
    """An index listing 3,000 local builds of one release printed every one on the package's console line (a line of
    ~27 KB here, 890 KB for 100,000) and in the JSON: the newest few are named, the rest counted."""
    import json

    from rich.console import Console

    from sparkdoctor.views.track import render_track

    wheels = tmp_path / "w"
    wheels.mkdir()
    plain = build_wheel(wheels, "demo", "0.5.0+b2999", {"demo/core.py": FIXED})
    files = [{"filename": f"demo-0.5.0+b{i}-py3-none-any.whl", "url": f"../../files/{plain.name}", "size": plain.stat().st_size}
             for i in range(3000)]
    with Registry() as reg:
        reg.add("demo", plain)
        reg.pages["demo"] = json.dumps({"meta": {"api-version": "1.1"}, "name": "demo", "files": files}).encode()
        doc = track(load(write_matrix(tmp_path, ">=0.2.0,<0.4.0", tracked="0.4.0")), reader_for(reg, tmp_path)).to_dict()
    [row] = doc["packages"]
    assert row["builds"]["0.5.0"] == [f"0.5.0+b{i}" for i in range(2984, 3000)] and row["builds_more"] == {"0.5.0": 2984}, row["builds_more"]
    console = Console(record=True, width=300)
    render_track(doc, console, verbose=True)
    line = next(x for x in console.export_text().splitlines() if x.startswith("demo: tracked through"))
    assert line.endswith("+b2998, +b2999 and 2,984 older)") and len(line) < 400, line


def test_one_file_entry_whose_url_cannot_be_joined_leaves_the_others_read(tmp_path):
    """A page with one file whose URL urljoin refuses ("//[::1", ValueError) was "not a PEP 691 project page" as a
    whole: the project could not be listed and track exited 2. That entry is passed over; the others are read."""
    import hashlib
    import json

    wheels = tmp_path / "w"
    wheels.mkdir()
    good = build_wheel(wheels, "demo", "0.5.0", {"demo/core.py": FIXED})
    files = [{"filename": "demo-0.6.0-py3-none-any.whl", "url": "//[::1", "size": 10},
             {"filename": good.name, "url": f"../../files/{good.name}", "size": good.stat().st_size,
              "hashes": {"sha256": hashlib.sha256(good.read_bytes()).hexdigest()}}]
    with Registry() as reg:
        reg.add("demo", good)
        reg.pages["demo"] = json.dumps({"meta": {"api-version": "1.1"}, "name": "demo", "files": files}).encode()
        result = track(load(write_matrix(tmp_path, ">=0.2.0,<0.4.0", tracked="0.4.0")), reader_for(reg, tmp_path))
    [row] = result.packages
    assert not row.get("error") and row["releases"] == ["0.5.0"], row
    [e] = result.entries
    assert e.runs[0][0].holds is False and e.runs[0][0].error is None, e.runs[0][0].error
