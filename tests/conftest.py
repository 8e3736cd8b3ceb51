import shutil
import subprocess

import pytest


def _has_nvidia_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        return subprocess.run([smi, "-L"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pytest_collection_modifyitems(config, items):
    if _has_nvidia_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU and driver (run on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
