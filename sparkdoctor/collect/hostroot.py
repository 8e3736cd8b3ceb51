"""Where the host's /proc, /sys and /etc are read: "/" on a live box, or a fixture tree.

SPARKDOCTOR_HOST_ROOT points the host collectors at another root (tests feed real-shaped /proc and
/sys trees from tests/data/hostroots/). NVML is asked only when the root is the real one: a fixture
tree has no driver, and the GPU readings of this machine must not be mixed into another tree's.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "SPARKDOCTOR_HOST_ROOT"


def host_root() -> Path:
    return Path(os.environ.get(ENV) or "/")


def is_live_root() -> bool:
    return os.path.realpath(host_root()) == "/"
