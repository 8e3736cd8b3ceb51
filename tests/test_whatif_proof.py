"""What-if proved against a real upgrade (issue 24 item 5): predict nvidia-cutlass-dsl 4.5.0 (libs-base)
-> 4.5.2 [cu13] in a scratch venv, perform that upgrade in the same venv, run check's collection
again, and require every field the prediction claimed to equal what the real upgrade produced."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from sparkdoctor.check import CheckRequest, collect
from sparkdoctor.matrix import evaluate_all, load
from sparkdoctor.released import Reader
from sparkdoctor.targets.local import resolve_python_target
from sparkdoctor.whatif.hypothetical import hypothetical_facts
from sparkdoctor.whatif.resolve import resolve_upgrade

pytestmark = pytest.mark.slow


def facts_of(python: str):
    """The target read as check reads it, every file hashed. On a busy machine (load 4) one read may stop hashing at
    its time budget and leave files unverified, which makes the entries on them unknown: the proofs below would then
    fail on the load, not on a prediction. So it reads again, going on from the hash cache as a user's next check
    does (probes/target_env), until nothing is left unverified."""
    for _ in range(10):
        facts = collect(CheckRequest(target=resolve_python_target(python), arch="sm_121a", kernels=False))
        if not any((p or {}).get("files_unverified") for p in (facts.packages or {}).values()):
            return facts
    raise AssertionError(f"{python}: files still unverified after 10 reads")


def matched(matrix, facts, host_of=None) -> set[str]:
    """The entries that match `facts`, judged with the live host readings of `host_of` when given: host health
    (memory pressure, page cache) is the machine's at the moment it was read, which an upgrade does not change and
    which moves under the suite's other workers between the two reads (host-uma-memory-pressure matched in one)."""
    if host_of is not None:
        facts = dataclasses.replace(facts, host_health=host_of.host_health)
    return {ev.entry.id for ev in evaluate_all(matrix, facts) if ev.outcome == "match"}


def test_cutlass_dsl_450_base_to_452_cu13_prediction_equals_the_real_upgrade(tmp_path):
    from tests import venvs

    python = str(venvs.copy_of(venvs.cutedsl450(), tmp_path / "venv"))  # `pip install nvidia-cutlass-dsl==4.5.0`
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "-q"]
    today = facts_of(python)
    assert today.packages["nvidia-cutlass-dsl"]["version"] == "4.5.0"
    spec = "nvidia-cutlass-dsl[cu13]==4.5.2"
    changes = resolve_upgrade(resolve_python_target(python), python, [spec], today)
    notes: list[str] = []
    reader = Reader("linux-x86_64" if today.host.get("machine") == "x86_64" else "linux-aarch64", f"{sys.version_info[0]}.{sys.version_info[1]}")
    try:
        predicted = hypothetical_facts(today, changes, reader, notes)
    finally:
        reader.close()
    subprocess.run([*pip, spec], check=True, timeout=1800)  # the real upgrade, in the same venv
    after = facts_of(python)
    claims = {c.name: c.new for c in changes}
    real = {name: (after.packages.get(name) or {}).get("version") for name in claims}
    assert claims == real, (claims, real)
    for name, row in after.packages.items():  # nothing the prediction left alone changed
        if name not in claims:
            assert (today.packages.get(name) or {}).get("version") == row.get("version"), name
    assert (predicted.cutedsl or {}).get("active_build") == (after.cutedsl or {}).get("active_build"), (predicted.cutedsl, after.cutedsl)
    matrix = load()
    assert matched(matrix, predicted, host_of=after) == matched(matrix, after)
    print(f"\npredicted = real: {claims}; cutlass-dsl build {after.cutedsl.get('active_build')}; "
          f"{len(matched(matrix, after))} matching entries: {sorted(matched(matrix, after))}")


def test_vllm_032_to_033_prediction_equals_the_real_upgrade():
    """vLLM 0.32.0 -> 0.33.0 on the suite's --no-deps file set (tests/venvs.py, a uv venv without pip): resolved by
    sparkdoctor's pip's dry run with --no-deps (the way the set was installed), predicted from the released files, and compared with the same set
    really upgraded by `uv pip install --no-deps` (vllm033_upgraded, cached like vllm032)."""
    from tests import venvs

    base, upgraded = str(venvs.vllm032()), str(venvs.vllm033_upgraded())
    today = facts_of(base)
    assert today.packages["vllm"]["version"] == "0.32.0"
    changes = resolve_upgrade(resolve_python_target(base), base, venvs.VLLM_033, today, no_deps=True)
    notes: list[str] = []
    reader = Reader("linux-x86_64" if today.host.get("machine") == "x86_64" else "linux-aarch64", f"{sys.version_info[0]}.{sys.version_info[1]}")
    try:
        predicted = hypothetical_facts(today, changes, reader, notes)
    finally:
        reader.close()
    after = facts_of(upgraded)
    claims = {c.name: c.new for c in changes}
    assert claims.keys() == {"vllm", "flashinfer-python"}, claims  # what vLLM 0.33.0's pins move in this set
    real = {name: (after.packages.get(name) or {}).get("version") for name in claims}
    assert claims == real, (claims, real)
    for name, row in after.packages.items():
        if name not in claims:
            assert (today.packages.get(name) or {}).get("version") == row.get("version"), name
    assert (predicted.cutedsl or {}).get("active_build") == (after.cutedsl or {}).get("active_build")
    # every capability the prediction claims (read from the released files) equals what check reads after
    ours = {k: v for k, v in (predicted.capabilities or {}).items() if k.startswith(("vllm.", "flashinfer."))}
    claimed = {k: v for k, v in ours.items() if (v or {}).get("value") is not None}  # value None: unknown, said
    unknown = sorted(set(ours) - set(claimed))
    assert claimed, notes
    wrong = {k: (v, (after.capabilities or {}).get(k)) for k, v in claimed.items() if (after.capabilities or {}).get(k) != v}
    assert not wrong, wrong
    # every matrix entry the prediction can tell equals the real outcome; the ones it cannot tell are counted
    matrix = load()
    real_outcome = {ev.entry.id: ev.outcome for ev in evaluate_all(matrix, after)}
    told = {ev.entry.id: ev.outcome for ev in evaluate_all(matrix, predicted) if ev.outcome != "unknown"}
    differ = {i: (o, real_outcome.get(i)) for i, o in told.items() if real_outcome.get(i) != o}
    assert not differ, differ
    print(f"\npredicted = real: {claims}; {len(claimed)} capabilities equal, unknown: {unknown}; {len(told)} of {len(real_outcome)} entries told, "
          f"all equal ({sum(o == 'match' for o in told.values())} match); cannot tell: "
          f"{sorted(i for i in real_outcome if i not in told)}; real outcome of those: "
          f"{ {i: real_outcome[i] for i in real_outcome if i not in told} }")


def test_probe_compiles_the_cutedsl_kernels_with_the_proposed_set_and_the_answer_differs(tmp_path):
    """whatif --probe on a real release pair: nvidia-cutlass-dsl 4.5.0 with libs-base (ptxas refuses the NVFP4
    `_mma` for sm_121a) -> 4.5.2 [cu13] (compiles). Both sets installed by uv in throwaway venvs, compiled for real."""
    from types import SimpleNamespace

    from sparkdoctor.whatif.probe import probe_cutedsl

    def facts(version: str, build: str):  # the family as pip installs it: libs-base always, libs-cu13 with [cu13]
        libs = {f"nvidia-cutlass-dsl-{b}": {"version": version} for b in {"libs-base", build}}
        return SimpleNamespace(packages={"nvidia-cutlass-dsl": {"version": version}, **libs}, cutedsl={"active_build": build})

    before = {k.kernel: k.verdict for k in probe_cutedsl(facts("4.5.0", "libs-base"), "sm_121a").kernels}
    after = {k.kernel: k.verdict for k in probe_cutedsl(facts("4.5.2", "libs-cu13"), "sm_121a").kernels}
    assert before["nvfp4-mma"] == "refused" and after["nvfp4-mma"] == "compiled", (before, after)
    assert after == {k: "compiled" for k in after}, after
    print(f"\n4.5.0 libs-base: {before}\n4.5.2 libs-cu13: {after}")


def test_probe_installs_trust_the_systems_certificates_as_pip_does(monkeypatch):
    """uv trusts only its own bundled roots unless told otherwise; pip (truststore) trusts the system's store. Where TLS
    is intercepted by a proxy the machine trusts (a company network, this CI's) and no SSL_CERT_FILE is set, the probe's
    installs failed with uv's `UnknownIssuer` while the user's pip worked. Without a proxy this passes either way."""
    from types import SimpleNamespace

    from sparkdoctor.whatif.probe import probe_cutedsl

    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "UV_SYSTEM_CERTS", "UV_NATIVE_TLS"):
        monkeypatch.delenv(name, raising=False)
    libs = {f"nvidia-cutlass-dsl-{b}": {"version": "4.5.2"} for b in ("libs-base", "libs-cu13")}
    facts = SimpleNamespace(packages={"nvidia-cutlass-dsl": {"version": "4.5.2"}, **libs}, cutedsl={"active_build": "libs-cu13"})
    run = probe_cutedsl(facts, "sm_121a")
    assert run.error is None and run.kernels, run.error


def test_whatif_probe_verb_reports_the_kernels_today_and_after(tmp_path, monkeypatch):
    """The verb end to end with --probe: a venv holding nvidia-cutlass-dsl 4.5.0 (libs-base), cached (tests/venvs.py)."""
    import json

    from typer.testing import CliRunner

    from sparkdoctor.cli import app
    from tests import venvs

    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))  # no ledger: said in a note
    python = str(venvs.cutedsl450())  # whatif --probe reads it, never changes it
    res = CliRunner().invoke(app, ["whatif", "nvidia-cutlass-dsl[cu13]==4.5.2", "--python", python, "--arch", "sm_121a", "--probe",
                                   "--format", "json"], catch_exceptions=False)
    doc = json.loads(res.stdout[res.stdout.index("{"):])
    verdict = {w: {k["kernel"]: k["verdict"] for k in doc["probe"][w]["kernels"]} for w in ("today", "after")}
    assert verdict["today"]["nvfp4-mma"] == "refused" and verdict["after"]["nvfp4-mma"] == "compiled", verdict


def test_whatif_probe_compiles_an_upgrade_that_leaves_a_mixed_family(tmp_path, monkeypatch):
    """Today a mixed family (a plain 4.8.1 downgraded by `pip install nvidia-cutlass-dsl==4.5.0`, built the ordinary
    way), after `pip install nvidia-cutlass-dsl-libs-base==4.5.1` still a mixed one: no resolver accepts either set,
    so the probe lays the files out as pip leaves them (each wheel by itself, --no-deps) and compiles both sides."""
    import json

    from typer.testing import CliRunner

    from sparkdoctor.cli import app
    from tests import venvs

    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    python = str(venvs.cutedsl_downgraded())
    res = CliRunner().invoke(app, ["whatif", "nvidia-cutlass-dsl-libs-base==4.5.1", "--python", python, "--arch", "sm_121a",
                                   "--probe", "--no-read", "--format", "json"], catch_exceptions=False)
    doc = json.loads(res.stdout[res.stdout.index("{"):])
    assert [(c["name"], c["from"], c["to"]) for c in doc["changes"] if c["name"].startswith("nvidia-cutlass-dsl")] == [
        ("nvidia-cutlass-dsl-libs-base", "4.5.0", "4.5.1")]
    assert "cutedsl-mixed-family" in {f["id"] for f in doc["unchanged"]}
    for side in ("today", "after"):
        run = doc["probe"][side]
        assert "error" not in run and run["kernels"], (side, run)
    verdict = {w: {k["kernel"]: k["verdict"] for k in doc["probe"][w]["kernels"]} for w in ("today", "after")}
    assert verdict["today"]["nvfp4-mma"] == "refused" and verdict["after"]["nvfp4-mma"] == "compiled", verdict


def test_probe_compiles_the_ptx_probes_with_the_ptxas_a_triton_upgrade_moves():
    """triton 3.5.0 -> 3.9.0 moves Triton's bundled ptxas from CUDA 12.8 (it does not know sm_121a) to 12.9, and
    adds ptxas-blackwell (13.x): the PTX probes are refused by today's and compiled by the new ones. The ptxas
    binaries are read out of the released x86_64 wheels (members only), compiled here for real."""
    from sparkdoctor.whatif.ptx import probe_ptx
    from sparkdoctor.whatif.resolve import Change

    out = probe_ptx([Change("triton", "3.5.0", "3.9.0")], "sm_121a", "3.11").to_json()
    (today,) = out["today"]
    assert today["member"] == "triton/backends/nvidia/bin/ptxas" and today["ptxas_version"].startswith("12.8")
    assert {k["verdict"] for k in today["kernels"]} == {"refused"}, today
    assert all("does not know sm_121a" in k["detail"] for k in today["kernels"])
    after = {row["member"]: row for row in out["after"]}
    assert set(after) == {"triton/backends/nvidia/bin/ptxas", "triton/backends/nvidia/bin/ptxas-blackwell"}
    assert after["triton/backends/nvidia/bin/ptxas"]["ptxas_version"].startswith("12.9")
    for row in after.values():
        assert row["kernels"] and {k["verdict"] for k in row["kernels"]} == {"compiled"}, row
    assert {k["probe"] for k in today["kernels"]} >= {"nvfp4-mma", "e2m1-cvt"}
    assert "no GB10 ran the result" in out["note"]


def test_whatif_probe_says_which_ptxas_compiled_and_when_none_moves(tmp_path, monkeypatch):
    """The verb end to end in a uv venv: a triton install brings a ptxas (today none, after compiled, named in
    the output); an upgrade of a package without one says the PTX probes' answer is unchanged, and why."""
    import json
    import os

    from tests import venvs

    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    venv = tmp_path / "uvvenv"
    subprocess.run([venvs.uv(), "venv", "-q", "--python", sys.executable, str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    env = {**os.environ, "COLUMNS": "250"}

    def whatif(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "sparkdoctor", "whatif", *args, "--python", python, "--arch", "sm_121a",
                               "--no-read", "--probe"], capture_output=True, text=True, env=env, timeout=900)

    res = whatif("triton==3.9.0", "-f", "json")
    assert res.returncode in (0, 1), res.stderr
    ptx = json.loads(res.stdout)["probe"]["ptx"]
    assert ptx["today"] == [{"dist": "triton", "version": None, "note": "triton is not installed today"}]
    assert {row["ptxas_version"][:2] for row in ptx["after"]} == {"12", "13"}
    assert all(k["verdict"] == "compiled" for row in ptx["after"] for k in row["kernels"])
    console = whatif("triton==3.9.0").stdout
    assert "by triton 3.9.0 triton/backends/nvidia/bin/ptxas-blackwell (ptxas 13." in console and "no GB10 ran the result" in console
    res = whatif("idna==3.7", "-f", "json")
    assert res.returncode in (0, 1), res.stderr
    ptx = json.loads(res.stdout)["probe"]["ptx"]
    assert ptx["moved"] == [] and "moves no ptxas" in ptx["note"] and "answer is today's" in ptx["note"]


def test_probe_compiles_the_ptx_probes_with_the_ptxas_an_nvcc_wheel_upgrade_moves():
    """nvidia-cuda-nvcc-cu12 12.8.93 -> 12.9.86: the CUDA wheel's ptxas (nvidia/cuda_nvcc/bin/ptxas) learns sm_121a."""
    from sparkdoctor.whatif.ptx import probe_ptx
    from sparkdoctor.whatif.resolve import Change

    out = probe_ptx([Change("nvidia-cuda-nvcc-cu12", "12.8.93", "12.9.86")], "sm_121a", "3.11").to_json()
    verdicts = {w: [(row["member"], row["ptxas_version"], {k["verdict"] for k in row["kernels"]}) for row in out[w]]
                for w in ("today", "after")}
    assert verdicts == {"today": [("nvidia/cuda_nvcc/bin/ptxas", "12.8.93", {"refused"})],
                        "after": [("nvidia/cuda_nvcc/bin/ptxas", "12.9.86", {"compiled"})]}, verdicts


def test_whatif_probe_compiles_the_collision_cases_after_state(tmp_path, monkeypatch):
    """The collision venv (the cu13 build, then libs-base 4.5.0 written over it) and `nvidia-cutlass-dsl==4.5.3`: pip moves
    nvidia-cutlass-dsl and libs-base and leaves libs-cu13 at 4.5.0, a mixed family no resolver installs; the probe lays it
    out as pip would and compiles it (the 4.5.3 libs-base compiles the one-warp NVFP4 MMA that 4.5.0's refuses)."""
    import json

    from typer.testing import CliRunner

    from sparkdoctor.cli import app
    from tests import venvs

    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    python = str(venvs.cutedsl_collision())
    res = CliRunner().invoke(app, ["whatif", "nvidia-cutlass-dsl==4.5.3", "--python", python, "--arch", "sm_121a", "--probe",
                                   "--no-read", "--format", "json"], catch_exceptions=False)
    doc = json.loads(res.stdout[res.stdout.index("{"):])
    assert {c["name"]: c["to"] for c in doc["changes"]} == {"nvidia-cutlass-dsl": "4.5.3", "nvidia-cutlass-dsl-libs-base": "4.5.3"}
    assert "cutedsl-mixed-family" in {f["id"] for f in doc["introduced"]}
    after = doc["probe"]["after"]
    assert "error" not in after and after["dists"]["nvidia-cutlass-dsl-libs-cu13"] == "4.5.0", after
    verdict = {w: {k["kernel"]: k["verdict"] for k in doc["probe"][w]["kernels"]} for w in ("today", "after")}
    assert verdict["today"]["nvfp4-mma"] == "refused" and verdict["after"]["nvfp4-mma"] == "compiled", verdict


def test_undoing_a_downgrade_prediction_equals_the_real_upgrade(tmp_path):
    """A plain 4.8.1 install downgraded by `pip install nvidia-cutlass-dsl==4.5.0` (pip venv, the ordinary way), then
    `whatif nvidia-cutlass-dsl==4.8.1` and that upgrade really done by the venv's pip: the predicted versions, the
    active build (libs-cu12: 4.8.1's .pth puts dsl_packages first; not the libs-base wheel written last) and the
    matching entries equal what check reads after it."""
    from tests import venvs

    python = str(venvs.copy_of(venvs.cutedsl_downgraded(), tmp_path / "venv"))  # changed below: a copy of its own
    today = facts_of(python)
    assert today.cutedsl["active_build"] == "libs-base"
    changes = resolve_upgrade(resolve_python_target(python), python, ["nvidia-cutlass-dsl==4.8.1"], today)
    predicted = hypothetical_facts(today, changes, None, [])
    venvs.pip(python, "install", "nvidia-cutlass-dsl==4.8.1")
    real = facts_of(python)
    versions = {n: p["version"] for n, p in real.packages.items() if n.startswith("nvidia-cutlass-dsl")}
    assert versions == {n: p["version"] for n, p in predicted.packages.items() if n.startswith("nvidia-cutlass-dsl")}, versions
    assert real.cutedsl["active_build"] == predicted.cutedsl["active_build"] == "libs-cu12", (real.cutedsl, predicted.cutedsl)
    matrix = load()
    assert matched(matrix, real) == matched(matrix, predicted, host_of=real)


def test_the_probes_scratch_install_never_builds_a_source_distribution(tmp_path):
    """The resolution is wheels only, but the probe's scratch install resolved the umbrella's dependencies again
    with uv's defaults: a release with only an sdist would be built there, running its backend."""
    import io
    import tarfile

    from sparkdoctor.whatif.probe import layout_steps
    from tests.fix.scenario import uv

    marker, links = tmp_path / "code-ran", tmp_path / "links"
    links.mkdir()
    files = {"nvidia_cutlass_dsl-9.9/pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
             "nvidia_cutlass_dsl-9.9/backend.py": f"open({str(marker)!r}, 'w').write('ran')\n",
             "nvidia_cutlass_dsl-9.9/PKG-INFO": "Metadata-Version: 2.1\nName: nvidia-cutlass-dsl\nVersion: 9.9\n"}
    with tarfile.open(links / "nvidia_cutlass_dsl-9.9.tar.gz", "w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    venv = tmp_path / "scratch"
    subprocess.run([uv(), "venv", "--quiet", str(venv)], check=True, timeout=300)
    first = layout_steps(uv(), str(venv / "bin" / "python"), {"nvidia-cutlass-dsl": "9.9"}, None)[0]
    env = {**os.environ, "UV_OFFLINE": "1", "UV_NO_INDEX": "1", "UV_FIND_LINKS": str(links)}
    subprocess.run(first, capture_output=True, text=True, env=env, timeout=300)
    assert not marker.exists(), "the sdist's build backend ran"
