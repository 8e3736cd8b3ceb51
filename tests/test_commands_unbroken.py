"""A remedy's shell command at an 80-column terminal: wrapped as prose, `pip install torch --index-url` went on one
line and the URL on the next, so the command copied from the terminal broke. Each command is now printed whole on a
line of its own (check, explain, fix's plan, recipe check); the prose around it still wraps."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from rich.console import Console

from sparkdoctor.views.commands import split_commands
from tests.pty_terminal import at_terminal

TORCH = "pip install torch --index-url https://download.pytorch.org/whl/cu130"
KERNELS = "does not include kernels for this GPU. Reinstall the same version against a CUDA build that does"


@pytest.fixture(scope="module")
def cu126(tmp_path_factory) -> Path:
    """A venv whose torch is a CUDA 12.6 build (torch-cuda-below-128 on GB10, the arch assumed without a GPU)."""
    root = tmp_path_factory.mktemp("cu126") / "env"
    venv.create(root, with_pip=False)
    site = next(root.glob("lib/python3*/site-packages"))
    dist = site / "torch-2.7.0+cu126.dist-info"
    (site / "torch").mkdir()
    dist.mkdir()
    (site / "torch" / "__init__.py").write_text("")
    (site / "torch" / "version.py").write_text("__version__ = '2.7.0+cu126'\ncuda = '12.6'\n")
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.7.0+cu126\n")
    (dist / "RECORD").write_text("torch/__init__.py,,\ntorch/version.py,,\ntorch-2.7.0+cu126.dist-info/METADATA,,\n")
    return root / "bin" / "python"


def whole(text: str, command: str) -> bool:
    return any(line.strip() == command for line in text.splitlines())


@pytest.mark.parametrize(("remedy", "commands"), [
    (f"{TORCH} (the version your vLLM pins), then reinstall packages built against torch.", [TORCH]),
    ('pip install --force-reinstall --no-deps "flashinfer-python==<installed version>", rm -rf ~/.cache/flashinfer, '
     "and benchmark the NVFP4 path again.",
     ['pip install --force-reinstall --no-deps "flashinfer-python==<installed version>"', "rm -rf ~/.cache/flashinfer"]),
    ("Before starting the server: `sync; echo 3 | sudo tee /proc/sys/vm/drop_caches` (eugr's images run this).",
     ["sync; echo 3 | sudo tee /proc/sys/vm/drop_caches"]),
    ("size it with sparkdoctor recipe check RECIPE --model PATH and lower it; sparkdoctor explain reads it",
     ["sparkdoctor recipe check RECIPE --model PATH"]),
    ("Find the victim in `dmesg`; report it with `sparkdoctor report`.", ["sparkdoctor report"]),
    ("the pip settings and uv's cache are kept", []),
    # piped into: where the command starts is not known, so none is cut out of it (the memory verdict's remedy)
    ("drop it first (sync; echo 3 | sudo tee /proc/sys/vm/drop_caches)", []),
    ("Stop the other server; pip install vllm==0.32.0 then relaunch", ["pip install vllm==0.32.0"]),
    # the memory verdict's leftover container (fleet check's `do:` line); a container option named in prose is none
    ("if container 3f2a9c1b7d4e is a server's whose server died, remove it: docker rm -f 3f2a9c1b7d4e (or podman)",
     ["docker rm -f 3f2a9c1b7d4e"]),
    ("raise the memory limit of the cgroup this runs in (docker run --memory, systemd MemoryMax= and MemoryHigh=)", []),
])
def test_the_commands_in_a_remedy(remedy, commands):
    assert [piece for piece, is_command in split_commands(remedy) if is_command] == commands


def test_check_prints_the_remedys_command_whole_at_80_columns(cu126, tmp_path):
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--python", str(cu126), "--no-kernels"],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, COLUMNS="80"), cwd=tmp_path)
    assert p.returncode == 1 and "torch-cuda-below-128" in p.stdout, (p.returncode, p.stdout, p.stderr)
    assert whole(p.stdout, f"what to do  {TORCH}"), p.stdout
    assert "(the version your vLLM pins), then reinstall" in p.stdout  # the prose, after it


def test_explain_prints_it_whole_too(tmp_path):
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "explain"], input=KERNELS, capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, COLUMNS="80"), cwd=tmp_path)
    assert p.returncode == 0 and whole(p.stdout, f"what to do  {TORCH}"), p.stdout


def test_fix_plan_at_an_80_column_terminal_prints_it_whole(cu126, tmp_path):
    seen = at_terminal([sys.executable, "-m", "sparkdoctor", "fix", "--python", str(cu126), "--no-kernels"], 80,
                       dict(os.environ, SPARKDOCTOR_STATE_DIR=str(tmp_path / "state")), cwd=str(tmp_path))
    assert seen.code == 1 and "Not fixed by sparkdoctor: torch-cuda-below-128" in seen.text, seen.text
    # the terminal folds a line wider than itself: what it shows of the command is one line, then its rest
    joined = [a + b for a, b in zip(seen.lines, seen.lines[1:], strict=False) if len(a) == 80] + seen.lines
    assert any(line.strip() == TORCH for line in joined), seen.text


def test_recipe_checks_fitted_remedy_prints_it_whole():
    from sparkdoctor.views.conclusions import recipe_check

    doc = {"recipe": {"name": "r", "format": "toml", "path": "r.toml"}, "target": "/env/bin/python", "vllm": {"version": "0.32.0"},
           "findings": [{"id": "torch-cuda-below-128", "title": "torch was built for a CUDA older than 12.8", "severity": "error",
                         "evidence": ["torch 2.7.0+cu126"], "remedy": f"{TORCH} (the version your vLLM pins), then reinstall."}]}
    console = Console(width=80, color_system=None)
    with console.capture() as captured:
        recipe_check(console, doc, fitted=True)
    assert whole(captured.get(), f"remedy:   {TORCH}"), captured.get()


def test_matrix_show_prints_it_whole_too(tmp_path):
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "show", "torch-cuda-below-128"], capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, COLUMNS="80"), cwd=tmp_path)
    assert p.returncode == 0 and whole(p.stdout, f"what to do     {TORCH}"), p.stdout
    assert "component      torch" in p.stdout  # the rows after it keep their column
