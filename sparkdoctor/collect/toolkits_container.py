"""ptxas inside a container target: found, asked and used for the kernel probes in the container.

A container's serving stack compiles with the ptxas in the container (its CUDA toolkit, its Triton,
its nvidia-cuda-nvcc wheel), not with the host's. The same places as collect/toolkits.py are looked
at, but through the container CLI: one `sh` run lists the candidates with their real paths and
prints each binary's --version and --help; the parsing and judging are toolkits.py's own. The PTX
kernel probes then compile inside the container too (the PTX goes in on stdin, the cubin comes back
base64-encoded, the temporary folder is removed) and are judged on the host like every other cubin.
Compile results are cached in the container image's own cache folder (keyed by the ptxas's real path
and version inside it, the probe source and the arch). SASS is not read and nothing is launched:
the disassembler and the GPU run are the host's, the cubin's validity is still checked.
"""

from __future__ import annotations

import base64
import json
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sparkdoctor import proc
from sparkdoctor.collect import Collector, CollectorError, Context
from sparkdoctor.collect.toolkits import (
    TRITON_BLACKWELL_NAME,
    TRITON_ENV_VARS,
    Ptxas,
    judge_target,
    mark_triton,
    parse_gpu_names,
    parse_version,
)
from sparkdoctor.inputs import NotJSON, NumberTooLong, json_answer
from sparkdoctor.kernels import assemble, tools, verdict
from sparkdoctor.kernels.assemble import Job
from sparkdoctor.kernels.cache import Cache
from sparkdoctor.kernels.collector import compile_arch, selected_probes, target_arch
from sparkdoctor.kernels.cubin import cubin_problem
from sparkdoctor.kernels.probes import load_probes
from sparkdoctor.targets.early import NO_CWD
from sparkdoctor.targets.interface import Target

LIST_TIMEOUT = 20.0
SEP = "@@sparkdoctor@@"

# argv after `sh -c SCRIPT sh`: candidate "path|source|package|version|envvar" records. Prints, for
# each existing one, its real path; then, once per real binary, its --version and --help output.
LIST_SCRIPT = r"""
SEP='@@sparkdoctor@@'
for c in /usr/local/cuda*/bin/ptxas; do set -- "$@" "$c|system|||"; done
seen=' '
for rec in "$@"; do
  p=${rec%%|*}
  [ -f "$p" ] || continue
  r=$(readlink -f "$p" 2>/dev/null || echo "$p")
  echo "$SEP found $r $rec"
  case "$seen" in *" $r "*) continue;; esac
  seen="$seen$r "
  [ -x "$r" ] || { echo "$SEP noexec $r"; continue; }
  echo "$SEP version $r"; "$r" --version 2>&1; echo "$SEP rc $?"
  echo "$SEP help $r"; "$r" --help 2>&1; echo "$SEP rc $?"
done
"""

# Runs under the container's Python: compiles the PTX on stdin with one ptxas, prints one JSON line.
COMPILE_SCRIPT = r"""
import base64, json, os, shutil, subprocess, sys, tempfile
job = json.loads(sys.stdin.read())
d = tempfile.mkdtemp(prefix="sparkdoctor-ptx-")
try:
    ptx, cubin = os.path.join(d, "in.ptx"), os.path.join(d, "out.cubin")
    with open(ptx, "w") as fh:
        fh.write(job["ptx"])
    p = subprocess.Popen([job["ptxas"], "-arch=" + job["arch"], "-o", cubin, ptx], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(timeout=job["timeout"])
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, err = p.communicate()
        rc = None
    blob = None
    if rc == 0 and os.path.isfile(cubin):
        with open(cubin, "rb") as fh:
            blob = base64.b64encode(fh.read()).decode()
    print(json.dumps({"rc": rc, "stdout": out.decode("utf-8", "replace"), "stderr": err.decode("utf-8", "replace"), "cubin": blob}))
finally:
    shutil.rmtree(d, ignore_errors=True)
"""


def candidates(ctx: Context) -> list[str]:
    env = ctx.facts.env or {}  # the container's view only: the host's variables are not the container's
    recs = [f"{env[var]}|env|||{var}" for var in TRITON_ENV_VARS if env.get(var)]
    if env.get("CUDA_HOME"):
        recs.append(f"{env['CUDA_HOME'].rstrip('/')}/bin/ptxas|system|||")
    for folder in str(ctx.scratch.get("path_env") or "").split(":"):
        if folder:
            recs.append(f"{folder.rstrip('/')}/ptxas|system|||")
    recs.append("/usr/local/bin/ptxas|system|||")
    for item in ctx.scratch.get("ptxas_candidates") or []:
        if isinstance(item, dict) and isinstance(item.get("path"), str):
            source = item.get("source") if item.get("source") in ("pip", "triton") else "pip"
            tail = f"|{source}|{item.get('package') or ''}|{item.get('version_of_package') or ''}|"
            recs.append(item["path"] + tail)
            if source == "triton":
                recs.append(str(Path(item["path"]).with_name(TRITON_BLACKWELL_NAME)) + tail)
    return [r for r in recs if "\n" not in r]


def parse_listing(text: str) -> list[Ptxas]:
    found: dict[str, Ptxas] = {}
    outputs: dict[tuple[str, str], list[str]] = {}
    current: tuple[str, str] | None = None
    codes: dict[tuple[str, str], str] = {}
    for line in text.splitlines():
        if not line.startswith(SEP):
            if current is not None:
                outputs[current].append(line)
            continue
        words = line[len(SEP):].strip().split(" ", 2)
        if words[0] == "found" and len(words) == 3:
            path, source, package, version, env_var = (words[2].split("|") + [""] * 5)[:5]
            entry = found.setdefault(words[1], Ptxas(words[1]))
            entry.add(path, source or "system", package or None, version or None, env_var or None)
            current = None
        elif words[0] == "noexec" and len(words) >= 2 and words[1] in found:
            found[words[1]].error = f"{found[words[1]].paths[0]} is not executable"
        elif words[0] in ("version", "help") and len(words) >= 2:
            current = (words[1], words[0])
            outputs[current] = []
        elif words[0] == "rc" and current is not None:
            codes[current] = words[1] if len(words) > 1 else "?"
            current = None
    for real, entry in found.items():
        if entry.error:
            continue
        out = "\n".join(outputs.get((real, "version"), []))
        entry.version = parse_version(out)
        if entry.version is None:
            first = (out.strip().splitlines() or ["no output"])[0]
            entry.error = f"{entry.paths[0]} --version printed no CUDA release: {first[:200]}"
            continue
        helped = codes.get((real, "help")) == "0"
        entry.archs = parse_gpu_names("\n".join(outputs.get((real, "help"), []))) if helped else []
        entry.sm_121a, entry.sm_121a_by = judge_target(entry.version, entry.archs)
    return list(found.values())


def run(ctx: Context) -> dict[str, object]:
    target = ctx.target
    res = target.run_command(["sh", "-c", LIST_SCRIPT, "sh", *candidates(ctx)], timeout=LIST_TIMEOUT)
    if not res.ok:
        raise CollectorError(f"listing ptxas in container {getattr(target, 'name', '?')}: {res.describe_failure()}")
    entries = parse_listing(res.stdout)
    mark_triton(entries)
    return {"toolkits": [{**e.as_fact(), "where": "container"} for e in entries]}


COLLECTOR = Collector("toolkits", run, needs=("target",), timeout=LIST_TIMEOUT + 5)


# ---- the PTX kernel probes, compiled inside the container --------------------------------------------------
def container_runner(target: Target):
    """A kernels.assemble runner: ptxas runs in the container; the cubin lands at the host path asked for."""

    def run_ptxas(ptxas, arch: str, ptx: Path, cubin: Path, timeout: float):
        job = {"ptxas": ptxas.path, "arch": arch, "ptx": ptx.read_text(encoding="utf-8"), "timeout": timeout}
        res = target.run_command([target.python, "-S", "-B", "-c", NO_CWD + COMPILE_SCRIPT], timeout=timeout + 10,  # stdlib: no site
                                 input=json.dumps(job))
        if not res.ok:
            return res, None
        try:
            reply = json_answer((res.stdout.strip().splitlines() or [""])[-1])
        except NotJSON as exc:
            reply = exc
        if not isinstance(reply, dict):
            said = f"the compile helper's answer {reply}" if isinstance(reply, NumberTooLong) else "the compile helper printed no JSON"
            return proc.ProcResult(res.argv, 1, res.stdout, said, res.seconds), None
        if reply.get("rc") is None:
            return proc.ProcResult(res.argv, None, "", "", res.seconds, timed_out=True), None
        if reply.get("cubin"):
            cubin.write_bytes(base64.b64decode(reply["cubin"]))
        done = proc.ProcResult([ptxas.path], reply["rc"], reply.get("stdout") or "", reply.get("stderr") or "", res.seconds)
        return done, cubin_problem(cubin, arch) if done.ok else None

    return run_ptxas


def run_kernels(ctx: Context) -> dict[str, object]:
    if not ctx.kernels:
        return {}
    arch_value, source, note = target_arch(ctx.facts)
    probes = selected_probes(load_probes(), arch_value)
    usable = [tools.Tool(t["path"], t.get("version"), str(t.get("source") or "unknown"), f"{t.get('realpath')}|{t.get('version')}",
                         tuple(t.get("used_by") or ()), tuple(t.get("archs") or ()), str(t.get("realpath") or t["path"]))
              for t in ctx.facts.toolkits or [] if t.get("path") and not t.get("error")]
    if not usable:
        why = "no usable ptxas found in the container" if ctx.facts.toolkits is not None else "ptxas in the container unknown"
        return {"kernels": {p.id: verdict.skipped(p, compile_arch(p, arch_value)[0], why) for p in probes}}
    jobs, notes = [], {}
    for probe in probes:
        arch, arch_note = compile_arch(probe, arch_value)
        notes[probe.id] = (arch_note, "home") if arch_note else (note, source)
        for rank, tool in enumerate(tools.preferred(usable, arch)):
            jobs.append(Job(probe, tool, arch, "target", primary=rank == 0))
    hung: set[str] = set()
    lock = threading.Lock()
    runner = container_runner(ctx.target)
    # ctx.cache_dir is this container image's own folder (container_inspect.cache_root_for)
    cache = Cache(Path(ctx.cache_dir) / "kernels" if ctx.cache_dir else None, read=ctx.use_cache)
    pending = cache.lookup(jobs)
    with tempfile.TemporaryDirectory(prefix="sparkdoctor-kernels-") as workdir:
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda j: assemble.compile_job(j, Path(workdir), hung, lock, runner), pending))
    cache.store(pending)
    for job in jobs:
        if job.record["compiled"]:
            job.record["sass"] = "SASS not read: compiled inside the container (the disassembler is the host's)"
            job.record["run_note"] = "not run: compiled inside the container"
    return {"kernels": {p.id: verdict.entry(p, [j.record for j in jobs if j.probe is p], *notes[p.id]) for p in probes}}


KERNELS_COLLECTOR = Collector("kernels", run_kernels, needs=("toolkits", "gpu", "target", "capabilities"), timeout=60)
