"""What every part of the target probe shares: which packages are tracked, which files are hashed,
and the one list of partial failures that ends up in the probe's "errors".
"""

import re

from probe_cutlass import CUTLASS_IR_RE  # noqa: F401  (re-exported: the target probe's modules import it from here)

# Mirrors sparkdoctor.facts.TRACKED_PREFIXES (a probe cannot import sparkdoctor).
TRACKED_PREFIXES = (
    "torch",
    "triton",
    "vllm",
    "flashinfer",
    "nvidia-cutlass-dsl",
    "cuda-python",
    "cuda-bindings",
    "quack-kernels",
    "b12x",
)


# Files a person edits by hand (patches, "mods"); binaries are checked by size only.
HASHABLE_SUFFIXES = (
    ".py", ".pyi", ".json", ".toml", ".yaml", ".yml", ".cfg", ".ini", ".txt", ".sh", ".cuh", ".h", ".cu", ".jinja",
)


# Larger "editable" files are checked by size only: nobody hand-edits a 16 MB file, and hashing a
# 200 GB sparse file listed in a RECORD would outlast any budget.
MAX_EDITABLE_BYTES = 16 << 20
# The compiler library is hashed for its identity (~190 MB a build); past this, it is no real one.
MAX_IDENTITY_BYTES = 2 << 30
# Not checked at all: torch's C++ SDK (9k+ headers, 60% of torch's RECORD) is there to build
# extensions against; patching it changes no serving behaviour, and stat-ing it costs a third of a
# warm run.
SKIPPED_PREFIXES = ("torch/include/", "torch/share/cmake/")


# The CuTe DSL compiler (MLIR/LLVM, libNVVM and the PTX compiler in one extension module): CUTLASS_IR_RE,
# imported above from probes/shared (one pattern for every probe).


# The PTX compiler inside it announces its CUDA release like ptxas --version does.
CUDA_RELEASE_MARK = b"Cuda compilation tools, release "


CUDA_RELEASE_RE = re.compile(rb"Cuda compilation tools, release (\d+)\.(\d+)")


ERRORS = []


class HashBudgetSpent(Exception):
    """The run's time budget for hashing is used up; what is left waits for the next run."""


def error(message):
    ERRORS.append({"collector": "target_env", "error": message})


def canonical(name):
    """PEP 503 normalised name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def is_tracked(name, extra):
    if name in extra:
        return True
    return name == "torch" or any(name == p or name.startswith(p + "-") for p in TRACKED_PREFIXES)
