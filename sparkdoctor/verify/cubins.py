"""The cubin archs a shared object ships, read with `cuobjdump --list-elf`: the material of the
`cubins` / `lacks_cubins` file checks (what GPU code a released wheel really carries).

cuobjdump is found like ptxas: on PATH, under $CUDA_HOME/bin (or $CUDA_PATH, /usr/local/cuda), or
from the nvidia-cuda-cuobjdump wheel beside sparkdoctor. Without one the check is an error, never a
pass. Known caveat, said in every result: cuobjdump names a family cubin (sm_120f) by its plain
arch (sm_120), so `sm_120` in a listing means "sm_120 or the sm_120f family"; an arch-specific
cubin keeps its suffix (sm_120a).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from sparkdoctor import proc
from sparkdoctor.errors import SparkdoctorError
from sparkdoctor.exitcodes import EXIT_VERIFY_ERROR

LIST_TIMEOUT = 300.0
FAMILY_CAVEAT = "cuobjdump lists family cubins (sm_XXXf) as plain sm_XXX"
_ELF_LINE = re.compile(r"^ELF file\s+\d+:\s+\S*?\.(sm_\d+[a-z]?)\.cubin\s*$")
_NO_DEVICE_CODE = "does not contain device code"


class CubinError(SparkdoctorError, RuntimeError):
    """cuobjdump missing or failing; one line."""

    exit_code = EXIT_VERIFY_ERROR
    code = "verify-cubin"


def find_cuobjdump() -> str | None:
    """The cuobjdump to use: PATH, then $CUDA_HOME / $CUDA_PATH / /usr/local/cuda, then the wheel."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    folders = [Path(h) / "bin" for h in homes if h]
    from sparkdoctor.kernels.tools import nvidia_wheel_bins

    folders += nvidia_wheel_bins()
    for folder in folders:
        candidate = folder / "cuobjdump"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def parse_list_elf(text: str) -> tuple[str, ...]:
    """The distinct arch names of `cuobjdump --list-elf` output, by arch number (sm_90 < sm_90a < sm_120)."""
    archs = {m.group(1) for line in text.splitlines() if (m := _ELF_LINE.match(line.strip()))}
    return tuple(sorted(archs, key=lambda a: (int(re.sub(r"\D", "", a)), a)))


def list_cubins(path: Path, tool: str | None = None) -> tuple[str, ...]:
    """The cubin archs embedded in one ELF file (empty when it has no device code)."""
    tool = tool or find_cuobjdump()
    if tool is None:
        raise CubinError("no cuobjdump found (PATH, $CUDA_HOME/bin, the nvidia-cuda-cuobjdump wheel): cannot list cubins")
    result = proc.run([tool, "--list-elf", str(path)], timeout=LIST_TIMEOUT)
    out = (result.stdout or "") + (result.stderr or "")
    if _NO_DEVICE_CODE in out:
        return ()
    if not result.ok:
        last = next((x.strip() for x in reversed(out.splitlines()) if x.strip()), f"exit status {result.returncode}")
        raise CubinError(f"cuobjdump --list-elf {path.name} failed: {last}")
    return parse_list_elf(result.stdout or "")


def list_member_cubins(zip_file, name: str, tool: str | None = None) -> tuple[str, ...]:
    """The cubin archs of one member of an open wheel zip, copied to a temp file (cuobjdump wants a path)."""
    with tempfile.TemporaryDirectory(prefix="sparkdoctor-cubins-") as tmp:
        dest = Path(tmp) / Path(name).name
        with zip_file.open(name) as src, open(dest, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        return list_cubins(dest, tool)
