"""Reading the SASS: the probes of one (ptxas, arch, disassembler) group assembled into one module
and disassembled once (nvdisasm costs ~0.6 s of CPU per call, whatever the cubin's size), then each
probe's kernel searched for the instruction its header names. A kernel whose SASS lacks it did not
really compile the probe: the verdict (kernels.verdict) is a fail."""

from __future__ import annotations

import re
from pathlib import Path

from sparkdoctor import proc
from sparkdoctor.kernels import assemble
from sparkdoctor.kernels.assemble import Job
from sparkdoctor.kernels.probes import Probe
from sparkdoctor.kernels.tools import Tool
from sparkdoctor.ptxas import version_tuple

DISASSEMBLE_TIMEOUT = 20.0

_SASS_ADDRESS = re.compile(r"/\*[0-9a-f]{4,}\*/")
MAX_SASS_LINE = 4096  # no instruction line is longer; a longer one is not read (and cannot cost time)
_FUNCTION = re.compile(r"(?:\.text\.|Function\s*:\s*)([A-Za-z_$][\w$]*)")

Functions = dict[str, list[str]]


def split_sass(text: str) -> Functions:
    """Instructions per kernel from nvdisasm or cuobjdump -sass output."""
    out: Functions = {}
    current: str | None = None
    for line in text.splitlines():
        if len(line) > MAX_SASS_LINE:
            continue
        header = _FUNCTION.search(line)
        if header and "/*" not in line.split(header.group(0))[0]:
            current = header.group(1)
            out.setdefault(current, [])
            continue
        address = _SASS_ADDRESS.search(line)
        if address and current:
            rest = line[address.end():]
            body, semicolon, _ = rest.partition(";")
            if semicolon and rest[:1].isspace() and body.strip():
                out[current].append(" ".join(body.split()))
    return out


def disassemble(tool: Tool, cubin: Path) -> tuple[Functions | None, str | None]:
    argv = [tool.path, "-c", str(cubin)] if Path(tool.path).name.startswith("nvdisasm") else [tool.path, "-sass", str(cubin)]
    result = proc.run(argv, timeout=DISASSEMBLE_TIMEOUT)
    if not result.ok:
        return None, result.describe_failure()
    return split_sass(result.stdout), None


def check_sass(probe: Probe, instructions: list[str] | None, why_not: str | None) -> tuple[bool | None, str]:
    if instructions is None:
        return None, f"SASS not checked: {why_not}"
    pattern = re.compile(probe.sass)
    for ins in instructions:
        if pattern.search(ins):
            return True, ins
    if not instructions:
        return False, f"kernel {probe.entry} is not in the disassembly: no instruction matches /{probe.sass}/"
    seen = sorted({ins.split()[0] for ins in instructions if re.search(r"MMA|F2FP", ins.split()[0])})
    return False, f"no instruction matches /{probe.sass}/; tensor/convert instructions: {', '.join(seen) or 'none'}"


def read_sass(jobs: list[Job], workdir: Path, tag: str) -> tuple[Functions | None, str | None]:
    """Instructions per kernel of one module holding every probe of the group (same ptxas, arch and
    disassembler), assembled and disassembled once."""
    first = jobs[0]
    assert first.disassembler is not None
    version = max((j.probe.ptx_version_for(j.arch) for j in jobs), key=version_tuple)
    module = f".version {version}\n.target {first.arch}\n.address_size 64\n" + "\n".join(j.probe.body() for j in jobs)
    folder = workdir / f"sass-{tag}-{first.key[:24]}"
    folder.mkdir()
    (folder / "all.ptx").write_text(module, encoding="utf-8")
    result, bad_output = assemble.run_ptxas(first.ptxas, first.arch, folder / "all.ptx", folder / "all.cubin", assemble.COMPILE_TIMEOUT)
    if not result.ok:
        return None, f"the combined module did not assemble: {result.describe_failure()}"
    if bad_output:
        return None, f"the combined module did not assemble: ptxas exited 0 but {bad_output}"
    return disassemble(first.disassembler, folder / "all.cubin")


def apply_sass(jobs: list[Job], functions: Functions | None, why_not: str | None) -> None:
    if functions == {}:  # a disassembler that printed no kernel at all is broken: the SASS is unknown
        functions, why_not = None, "the disassembler printed no kernel it could read"
    for job in jobs:
        instructions = None if functions is None else functions.get(job.probe.entry, [])
        ok, text = check_sass(job.probe, instructions, why_not)
        tool = Path(job.disassembler.path).name if job.disassembler else None
        job.record["sass_ok"], job.record["sass"] = ok, f"{tool}: {text}" if ok is not None else text
