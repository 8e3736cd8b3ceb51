"""The node probe (probes/fleet_node/) and the bundle that carries it: run for real by a venv's interpreter
reading the bundled script on stdin, as ssh and Ray run it on a node."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkdoctor.fleet import on_node
from sparkdoctor.fleet.bundle import MULTI, TAIL, bundle, multi_bundle
from sparkdoctor.fleet.on_node import NODE_FLAGS
from sparkdoctor.fleet.transport import Node, SshTransport
from sparkdoctor.locations import data_dir
from tests.fleet.nodes import ELF_SOURCES, NCCL_VERSION, nccl_library, serving_venv
from tests.probe_modules import probe_module
from tests.test_targetenv import site_of


def run_bundled(python, probe: str, *args: str, env: dict | None = None) -> dict:
    """As ssh and Ray start it on a node: without site (on_node.NODE_FLAGS), the path rebuilt by the probe."""
    done = subprocess.run([str(python), *NODE_FLAGS, "-", *args], input=bundle(probe), capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def readelf_build_id(path) -> str:
    out = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True, timeout=30).stdout
    return out.split("Build ID:")[1].split()[0]


@pytest.fixture(scope="module")
def node_venv(tmp_path_factory):
    return serving_venv(tmp_path_factory.mktemp("fleet-probe"), "node", nccl_build="b")


def test_bundled_node_probe_finds_the_pip_nccl_by_build_id_and_inner_version(node_venv):
    data = run_bundled(node_venv, "fleet_node", env={"NCCL_IB_HCA": "rocep1s0f0", "NCCL_SECRET_TOKEN": "x"})
    [pip] = [c for c in data["nccl"]["candidates"] if c["source"] == "pip"]
    assert pip["path"].startswith(str(site_of(node_venv)))
    assert pip["version"] == f"{NCCL_VERSION}+cuda13.0"  # read inside the binary, not from the dist name
    if shutil.which("readelf"):
        assert pip["build_id"] == readelf_build_id(ELF_SOURCES["b"])
    assert data["nccl"]["loaded"]["path"] == pip["path"] or data["nccl"]["loaded"]["source"] == "process"
    assert data["env"]["NCCL_IB_HCA"] == "rocep1s0f0" and data["env"]["NCCL_SECRET_TOKEN"] == "<redacted>"
    assert data["host"]["kernel"] == os.uname().release
    assert data["python"] == str(node_venv)
    assert isinstance(data["memory"]["total_kib"], int) and data["memory"]["total_kib"] > 0


def test_the_bundle_leaves_nothing_on_the_node(node_venv, tmp_path):
    before = sorted(p.name for p in tmp_path.iterdir())
    done = subprocess.run([str(node_venv), *NODE_FLAGS, "-"], input=bundle("fleet_node"), capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert not list(node_venv.parent.parent.rglob("__pycache__"))


def test_target_probe_runs_bundled_like_from_its_folder(node_venv):
    """check's own target probe gives the same packages and cutlass-dsl build whether run from probes/ or
    read on stdin from the bundle (what a fleet node gets)."""
    bundled = run_bundled(node_venv, "target_env", "--hash-budget", "8")
    direct = subprocess.run([str(node_venv), "-B", str(data_dir("probes") / "target_env"), "--hash-budget", "8"],
                            capture_output=True, text=True, timeout=120)
    direct_data = json.loads(direct.stdout.strip().splitlines()[-1])
    assert bundled["packages"] == direct_data["packages"]
    assert bundled["cutedsl"]["active_build"] == direct_data["cutedsl"]["active_build"] == "libs-cu13"


def test_pip_and_system_nccl_of_one_version_and_two_builds_are_named(tmp_path, monkeypatch):
    fleetnode_nccl = probe_module("fleet_node", "fleetnode_nccl")
    pip = nccl_library(tmp_path / "site" / "nvidia" / "nccl" / "lib" / "libnccl.so.2", "a")
    system = nccl_library(tmp_path / "usr" / "lib" / "libnccl.so.2", "b")
    monkeypatch.setattr(fleetnode_nccl, "pip_candidates", lambda: [str(pip)])
    monkeypatch.setattr(fleetnode_nccl, "mapped_by_processes", lambda: {})
    monkeypatch.setattr(fleetnode_nccl, "system_candidates", lambda: [str(system)])
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.delenv("VLLM_NCCL_SO_PATH", raising=False)
    found = fleetnode_nccl.nccl_libraries([])
    assert found["pip_system_same_version_other_build"] is True
    assert found["loaded"]["source"] == "pip"
    # the same bytes under both names are one build
    system.write_bytes(pip.read_bytes())
    assert fleetnode_nccl.nccl_libraries([])["pip_system_same_version_other_build"] is False
    # LD_PRELOAD decides over the wheel
    monkeypatch.setenv("LD_PRELOAD", str(system))
    assert fleetnode_nccl.nccl_libraries([])["loaded"]["source"] == "LD_PRELOAD"


def test_a_library_with_a_build_id_is_read_only_to_its_banner_and_one_without_is_hashed_whole(tmp_path, monkeypatch):
    """A real libnccl is ~300 MB: with a build-id, reading stops at the version banner (no sha256); without,
    the whole file is hashed; one file reached by two names is read once."""
    import hashlib

    fleetnode_nccl = probe_module("fleet_node", "fleetnode_nccl")
    lib = nccl_library(tmp_path / "elf" / "libnccl.so.2", "a")
    lib.write_bytes(lib.read_bytes() + os.urandom(1 << 20))  # the rest of a library after its banner
    plain = tmp_path / "plain" / "libnccl.so.2"
    plain.parent.mkdir()
    plain.write_bytes(b"not ELF\0NCCL version 2.28.9+cuda13.0\0" + os.urandom(1 << 20))
    (tmp_path / "alias.so").symlink_to(lib)
    reads: list[int] = []
    real_open = fleetnode_nccl.open_regular

    def counting(path):
        fh, st = real_open(path)
        read = fh.read

        def counted(size=-1):
            block = read(size)
            reads.append(len(block))
            return block

        fh.read = counted
        return fh, st

    monkeypatch.setattr(fleetnode_nccl, "open_regular", counting)
    monkeypatch.setattr(fleetnode_nccl, "CHUNK", 4096)
    known: dict = {}
    with_id = fleetnode_nccl.identify(str(lib), "pip", [], known)
    assert with_id["build_id"] and with_id["sha256"] is None and with_id["version"] == f"{NCCL_VERSION}+cuda13.0"
    assert sum(reads) < lib.stat().st_size // 4, "read past the banner"
    reads.clear()
    again = fleetnode_nccl.identify(str(tmp_path / "alias.so"), "system", [], known)
    assert not reads and again["build_id"] == with_id["build_id"] and again["source"] == "system"
    without = fleetnode_nccl.identify(str(plain), "system", [], known)
    assert without["build_id"] is None and without["sha256"] == hashlib.sha256(plain.read_bytes()).hexdigest()
    assert without["version"] == "2.28.9+cuda13.0"


def test_a_node_runs_no_pth_import_line_nor_sitecustomize_and_every_start_says_so(node_venv, tmp_path):
    """As check's probes on the host (tests/test_probes_no_site_code.py): the node's interpreter starts the bundle
    with -S, so its venv's .pth import lines and sitecustomize.py never run, and the probe still finds the pip
    NCCL in the venv's site-packages (the path rebuilt from files). Every way a bundle is started says so."""
    site = site_of(node_venv)
    marker = tmp_path / "ran"
    (site / "zz-evil.pth").write_text(f"import os; open({str(marker)!r}, 'a').write('pth ')\n")
    (site / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'a').write('sitecustomize ')\n")
    try:
        data = run_bundled(node_venv, "fleet_node")
    finally:
        (site / "zz-evil.pth").unlink()
        (site / "sitecustomize.py").unlink()
    assert not marker.exists(), marker.read_text()
    [pip] = [c for c in data["nccl"]["candidates"] if c["source"] == "pip"]  # found through the rebuilt path
    assert pip["path"].startswith(str(site)), data["nccl"]
    for argv in (SshTransport().remote_argv(Node("n", python="/p"), ["x"], 60),
                 SshTransport().remote_argv(Node("n", container="c", runtime="docker"), ["x"], 60)):
        assert argv[argv.index("-"):][:1] == ["-"] and argv[argv.index("-") - 4:argv.index("-")] == NODE_FLAGS, argv
    assert "-S -B -X sparkdoctor_site -" in " ".join(SshTransport().remote_argv(Node("n"), ["x"], 60))
    assert '"-S", "-B", "-X", "sparkdoctor_site", "-"' in MULTI


def test_a_module_in_the_nodes_working_folder_never_runs_in_the_probes(node_venv, tmp_path):
    """`python3 -` puts its working folder first on sys.path, and an ssh login starts in the user's home (a Ray worker
    in its job's folder): a json.py or subprocess.py there (a user's scratch file, or one planted) ran in place of the
    standard module as the bundle started, and broke the node's answer. Both scripts a node is sent leave it out."""
    marker = tmp_path / "ran"
    home = tmp_path / "home"
    home.mkdir()
    for module in ("json", "subprocess", "base64", "zlib", "os", "re", "struct", "hashlib", "platform", "threading"):
        (home / f"{module}.py").write_text(f"open({str(marker)!r}, 'a').write('{module} ')\n")
    batch = multi_bundle([("fleet_node", [])], 60)
    for script in (bundle("fleet_node"), batch):
        done = subprocess.run([str(node_venv), *NODE_FLAGS, "-"], input=script, capture_output=True, text=True, timeout=120,
                              cwd=home)
        assert not marker.exists(), marker.read_text()
        assert done.returncode == 0, done.stderr[-2000:]
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        if script is batch:
            answer = json.loads(answer["sparkdoctor_multi"][0]["stdout"].strip().splitlines()[-1])
        assert answer["probe"] == "fleet_node"


def test_a_node_limit_of_years_still_runs_the_probes_there(node_venv):
    """`--node-timeout 1e8` (a user's "no limit"): the batch's subprocess.run(timeout=1e8) on the node raised
    OverflowError in each thread, every part came back null, and every node read "answered something that is not the
    node probe's report". The node's own limit is kept within what its waits can take."""
    done = subprocess.run([str(node_venv), *NODE_FLAGS, "-"], input=multi_bundle([("fleet_node", [])], 1e8),
                          capture_output=True, text=True, timeout=120)
    part = json.loads(done.stdout.strip().splitlines()[-1])["sparkdoctor_multi"][0]
    assert part is not None and part["returncode"] == 0, done.stderr[-2000:]
    assert json.loads(part["stdout"].strip().splitlines()[-1])["probe"] == "fleet_node"


def test_a_ray_task_keeps_only_the_tail_of_a_runaway_commands_output():
    """on_node._run (a Ray task's body) read a command's output with communicate(): 300 MB printed within the node's
    limit was all held in the worker's memory (~630 MiB peak) before its last 16 MiB were kept. Then a deque of its
    chunks peaked at 539 MiB of RSS in a loaded CI run; the ring it reads into now allocates nothing per read. The
    verdict counts what Python allocated (tracemalloc's peak), which the machine's load cannot change: holding it
    all (communicate) peaks at 576 MiB; the ring as it grew and one copy of its bytes (the task answers bytes) at
    59 MiB at the most."""
    code = ("import json, resource, tracemalloc\nfrom sparkdoctor.fleet import on_node\n"
            "r = on_node.run_command(['sh', '-c', 'head -c 300000000 /dev/zero; echo; echo LAST; "
            "head -c 300000 /dev/zero >&2'], 600)\n"
            "print(json.dumps([len(r['stdout']), len(r['stderr']), r['stdout'][-5:].decode(), r['returncode'], "
            "tracemalloc.get_traced_memory()[1] >> 20, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10]))\n")
    done = subprocess.run([sys.executable, "-X", "tracemalloc", "-c", code], capture_output=True, text=True,
                          timeout=600)
    out, err, tail, returncode, peak_mib, rss_mib = json.loads(done.stdout)
    assert (out, err, tail, returncode) == (16 << 20, 1 << 16, "LAST\n", 0), done.stderr
    assert peak_mib < 128, f"{peak_mib} MiB allocated ({rss_mib} MiB resident) for 300 MB of output"


def test_a_batch_on_the_node_keeps_only_the_tail_of_a_runaway_probes_output():
    """bundle.MULTI (the batch a node runs, over ssh and Ray) held all of a probe's output in the node's memory: a
    serving interpreter that printed 300 MB peaked the batch at 869 MiB there, whatever ssh keeps on this side."""
    runaway = ("import sys\nfor _ in range(300):\n    sys.stdout.buffer.write(b'A' * 1000000)\n"
               "sys.stdout.write('\\nLAST\\n')\n")
    script = MULTI.format(jobs=json.dumps([[runaway, []]]), limit=600.0, most=16 << 20, tail=TAIL)
    code = ("import json, resource, subprocess, sys\n"
            "done = subprocess.run([sys.executable, '-'], input=sys.stdin.buffer.read(), capture_output=True)\n"
            "part = json.loads(done.stdout.splitlines()[-1])['sparkdoctor_multi'][0]\n"
            "print(json.dumps([len(part['stdout']), part['stdout'][-6:], part['returncode'], "
            "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024]))\n")
    done = subprocess.run([sys.executable, "-c", code], input=script, capture_output=True, text=True, timeout=600)
    size, tail, returncode, peak_mib = json.loads(done.stdout)
    assert (size, tail, returncode) == (16 << 20, "\nLAST\n", 0), done.stderr
    assert peak_mib < 250, f"{peak_mib} MiB held on the node for 300 MB of output"


class _Pieces(io.RawIOBase):
    """A pipe that hands its data out in the given pieces, one per read, as a loaded machine's pipe does."""

    def __init__(self, pieces):
        self.pieces = list(pieces)

    def readable(self):
        return True

    def readinto(self, buffer):
        if not self.pieces:
            return 0
        piece = self.pieces.pop(0)
        size = min(len(piece), len(buffer))
        buffer[:size], rest = piece[:size], piece[size:]
        if rest:
            self.pieces.insert(0, rest)
        return size


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=200), max_size=40), st.integers(min_value=1, max_value=300))
def test_the_ring_keeps_exactly_the_last_bytes_whatever_the_pieces(pieces, most):
    kept: list = [bytearray(), 0]
    on_node._tail(io.BufferedReader(_Pieces(pieces), buffer_size=16), kept, most)
    assert on_node._kept(kept) == b"".join(pieces)[-most:]
    assert len(kept[0]) <= most
