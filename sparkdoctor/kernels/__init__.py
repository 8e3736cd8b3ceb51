"""Kernel probes: the hand-written PTX programs in probes/kernels/, compiled with every ptxas the
toolkits collector found, for the target arch; the SASS checked for the expected instruction where
a disassembler exists; run on the GPU and compared exactly with sparkdoctor.fp_reference where the
GPU's arch matches. "X does not compile on Spark" is settled by compiling X, here, with these tools.

One module per job, imported in this order (each only from those before it):
  probes     the probe files and their TOML header
  tools      ptxas (wrappers resolved to the binary they run) and disassembler discovery
  cubin      is a ptxas output really a cubin for the arch (ELF, EM_CUDA, the SM in e_flags)
  assemble   one probe, one ptxas, one arch: a Job, its cache key, why ptxas said no
  sass       the disassembly, searched for the probe's instruction
  cache      results under <cache>/kernels/
  gpu_run    running the cubins on a matching GPU, outputs checked against fp_reference
  verdict    one probe's status and detail from its runs
  collector  the plan and the wiring: the COLLECTOR `check` runs

Each .ptx file opens with a TOML header in `//` comments (the fields: probes/kernels/README.md, "Writing a
probe"; checked by probes.parse_probe). Its `.target @ARCH@` gets the arch at compile time, and `.version` is
raised to the first PTX ISA that knows that arch: a probe written for 8.7 then still assembles for sm_120a with
CUDA 12.8.

Results are cached by (the ptxas binary's realpath, size, mtime and version, and every wrapper
script's realpath, size, mtime and bytes; probe source; arch; disassembler); a GPU run additionally
by (GPU name, cc, driver version). An unreadable entry is recomputed, and nothing that did not
finish cleanly (timeout, crash, an output that is not a cubin for the arch) is cached.
"""

from sparkdoctor.kernels.assemble import (
    CACHE_VERSION,
    COMPILE_TIMEOUT,
    Job,
    compile_job,
    job_key,
    new_record,
    ptxas_errors,
)
from sparkdoctor.kernels.cache import Cache
from sparkdoctor.kernels.collector import (
    COLLECTOR,
    compile_arch,
    plain_sm12x_settings,
    run,
    selected_probes,
    target_arch,
)
from sparkdoctor.kernels.cubin import cubin_arch, cubin_problem
from sparkdoctor.kernels.gpu_run import (
    matching_gpu,
    probe_buffers,
    reference_function,
    run_on_gpu,
    verify_outputs,
)
from sparkdoctor.kernels.probes import Probe, ProbeError, load_probes, probes_dir
from sparkdoctor.kernels.sass import check_sass, split_sass
from sparkdoctor.kernels.tools import Tool, find_disassembler, preferred, ptxas_knows

__all__ = [
    "CACHE_VERSION", "COLLECTOR", "COMPILE_TIMEOUT", "Cache", "Job", "Probe", "ProbeError", "Tool", "check_sass",
    "compile_arch", "compile_job", "cubin_arch", "cubin_problem", "find_disassembler", "job_key", "load_probes",
    "matching_gpu", "new_record", "plain_sm12x_settings", "preferred", "probe_buffers", "probes_dir", "ptxas_errors",
    "ptxas_knows", "reference_function", "run", "run_on_gpu", "selected_probes", "split_sass", "target_arch",
    "verify_outputs",
]
