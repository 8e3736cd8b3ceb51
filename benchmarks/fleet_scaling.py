#!/usr/bin/env python3
"""Does `sparkdoctor fleet check` probe nodes in parallel? Time one node against eight.

Times `sparkdoctor fleet check --hosts ... --format json` over 1 node and over N nodes (fleet-0 ..
fleet-7), interleaved over --runs after one warm-up of each, each in a fresh process like a user's run.
Prints the transport that ran, the median, min and max of each, the ratio N/1 (parallel: well under 2;
serial: about N), the CPU each run used (getrusage of the run and every process it waited for) and what
one more node costs, the machine's CPU count and its load average before and after.

Transports (--transport):
  ssh    a real sshd on 127.0.0.1 (tests/fleet/sshd.py: generated host and user keys; --sshd PATH names the
         binary, else the one installed, else apt-get install openssh-server); every node alias reaches it.
  local  no ssh at all: an `ssh` stand-in first on PATH runs the node's command line here with sh, so the
         fleet check runs unchanged (one process per node, in parallel) minus the ssh hop. For a machine
         with no ssh client or server. The ssh client's own CPU (about 0.06 s per node) is not in it.
  auto   ssh when an sshd and an ssh client exist here, else local (the default).

The serving venv the nodes probe: --serving-venv PATH (a venv's folder), else one built here without
network (tests/fleet/nodes.py: a bare venv holding vllm, a real-ELF nvidia-nccl-cu13 and cutlass-dsl).

The interpreter that runs sparkdoctor: this one if it can import sparkdoctor's dependencies, else
--wheels DIR: a venv is built from that folder of wheels with pip --no-index (the pip wheel in DIR if
there is one, else this interpreter's pip), the checkout on its PYTHONPATH, and this script runs again
in it. Nothing is fetched from a network.

All the "nodes" are this machine: every node's probes compete for its cores, which a real fleet (one
machine per node) does not. The ratio measured here is therefore an upper bound on a real fleet's.

    python benchmarks/fleet_scaling.py [--nodes 8] [--runs 5] [--transport auto|ssh|local] [--sshd PATH]
                                       [--serving-venv DIR] [--wheels DIR] [--markdown]
"""

from __future__ import annotations

import argparse
import glob
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
REEXEC = "SPARKDOCTOR_FLEET_BENCH_VENV"
# what this script and `sparkdoctor fleet check` import (tests/fleet/nodes.py comes with the test helpers' pytest)
NEEDS = ["typer", "rich", "packaging", "platformdirs", "regex", "yaml", "pynvml", "pytest"]
REQUIREMENTS = ["packaging>=23.2", "platformdirs>=4.0", "typer>=0.15,<0.29", "rich>=13.7", "nvidia-ml-py>=12.535",
                "regex>=2022.1.18", "PyYAML>=6.0", "unidiff>=0.7", "pytest>=8"]

SSH_STANDIN = """#!/bin/sh
# `ssh [options] HOST COMMAND` run here: the fleet benchmark's local transport (no ssh client or server)
while [ $# -gt 0 ]; do
  case "$1" in
    -o|-F|-p|-i|-l) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
shift
exec sh -c "$*"
"""


def have_dependencies() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in NEEDS)


def build_venv(wheels: Path, folder: Path) -> Path:
    """A venv holding sparkdoctor's dependencies, from `wheels` only (pip --no-index)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=300)
    python = folder / "bin" / "python"
    pips = sorted(glob.glob(str(wheels / "pip-*.whl")))
    pip = [str(python), f"{pips[-1]}/pip"] if pips else [sys.executable, "-m", "pip", "--python", str(python)]
    started = time.monotonic()
    subprocess.run([*pip, "install", "-q", "--no-index", "--find-links", str(wheels), *REQUIREMENTS], check=True, timeout=900)
    print(f"venv for sparkdoctor built from {wheels} in {time.monotonic() - started:.1f} s ({folder})", flush=True)
    return python


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the run and of every process it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, cwd=HERE)
    took = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"fleet check failed (exit {done.returncode}): {(done.stderr or done.stdout).strip()[-600:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, cpu


def choose_transport(wanted: str, sshd: str | None) -> str:
    if wanted != "auto":
        return wanted
    found = sshd or shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
    return "ssh" if found and shutil.which("ssh") and shutil.which("ssh-keygen") else "local"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--transport", choices=("auto", "ssh", "local"), default="auto")
    parser.add_argument("--sshd", help="the sshd binary to run (ssh transport)")
    parser.add_argument("--serving-venv", help="a prebuilt serving venv's folder for the nodes to probe")
    parser.add_argument("--wheels", help="a folder of wheels to build sparkdoctor's venv from (pip --no-index)")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if args.nodes < 2 or args.runs < 1:
        parser.error("--nodes 2 or more (compared with 1 node) and --runs 1 or more")
    if not have_dependencies() and not os.environ.get(REEXEC):
        if not args.wheels:
            raise SystemExit("this interpreter lacks sparkdoctor's dependencies: run it from the project's venv, "
                             "or give --wheels DIR (a folder of wheels; docs/fleet.md, The scaling benchmark)")
        folder = Path(tempfile.mkdtemp(prefix="fleet-bench-venv-"))
        try:
            python = build_venv(Path(args.wheels).resolve(), folder)
            env = {**os.environ, REEXEC: str(folder), "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
            done = subprocess.run([str(python), *sys.argv], env=env)
        except subprocess.CalledProcessError as exc:
            raise SystemExit(f"building the venv from {args.wheels} failed (exit {exc.returncode}; pip's words above)") from None
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        raise SystemExit(done.returncode)
    run(args)


def run(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(HERE))
    from tests.fleet.nodes import serving_venv

    transport = choose_transport(args.transport, args.sshd)
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    hosts = [f"fleet-{i}" for i in range(args.nodes)]
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        root = Path(tmp)
        server = None
        if transport == "ssh":
            from tests.fleet.sshd import NoSshd, start_sshd

            try:
                server = start_sshd(root / "sshd", hosts, binary=args.sshd)
            except NoSshd as exc:
                raise SystemExit(f"--transport ssh: {exc} (--transport local runs without ssh)") from None
            config = ["--ssh-config", str(server.config)]
            what = f"ssh: a real sshd ({server.binary}) on 127.0.0.1, one ssh client per node"
        else:
            bin_dir = root / "bin"
            bin_dir.mkdir()
            (bin_dir / "ssh").write_text(SSH_STANDIN)
            (bin_dir / "ssh").chmod(0o755)
            env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
            config = []
            what = "local: no ssh; an `ssh` stand-in runs each node's command line here with sh (one process tree per node)"
        try:
            if args.serving_venv:
                python = Path(args.serving_venv) / "bin" / "python"
            else:
                python = serving_venv(root, "venv")
            base = [sys.executable, "-m", "sparkdoctor", "fleet", "check", *config, "--remote-python", str(python), "--format", "json"]
            one, many = base + ["--hosts", hosts[0]], base + ["--hosts", ",".join(hosts)]
            timed(one, env), timed(many, env)  # warm: page cache, sshd's first fork
            load_before = os.getloadavg()
            times: dict[str, list[float]] = {"1": [], str(args.nodes): []}
            cpus: dict[str, list[float]] = {"1": [], str(args.nodes): []}
            for _ in range(args.runs):
                for key, argv in (("1", one), (str(args.nodes), many)):
                    took, cpu = timed(argv, env)
                    times[key].append(took)
                    cpus[key].append(cpu)
            load_after = os.getloadavg()
        finally:
            if server is not None:
                server.stop()
    report(args, what, times, cpus, load_before, load_after)


def report(args: argparse.Namespace, what: str, times: dict[str, list[float]], cpus: dict[str, list[float]],
           load_before: tuple[float, float, float], load_after: tuple[float, float, float]) -> None:
    n = str(args.nodes)
    med = {k: statistics.median(v) for k, v in times.items()}
    cpu = {k: statistics.median(v) for k, v in cpus.items()}
    ratio = med[n] / med["1"]
    print(f"transport {what}")
    print(f"python {sys.version.split()[0]} ({sys.executable})")
    if args.markdown:
        print("| nodes | median s | min s | max s | CPU s (median) |\n|---|---|---|---|---|")
        for k, v in times.items():
            print(f"| {k} | {med[k]:.2f} | {min(v):.2f} | {max(v):.2f} | {cpu[k]:.2f} |")
    else:
        for k, v in times.items():
            print(f"{k:>3} node(s): median {med[k]:.2f} s (min {min(v):.2f}, max {max(v):.2f}); CPU {cpu[k]:.2f} s")
    print(f"ratio {n}/1: {ratio:.2f} (parallel: well under 2; serial: about {n})")
    per_node = (cpu[n] - cpu["1"]) / max(1, args.nodes - 1)
    print(f"CPU per extra node: {per_node:.2f} s (every process this machine ran for it; over ssh, sshd's side is not counted)")
    print(f"cpus {os.cpu_count()}; load average (1, 5, 15 min) before {load_before[0]:.2f} {load_before[1]:.2f} "
          f"{load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")


if __name__ == "__main__":
    main()
