"""sparkdoctor/cuda_driver.py runs as a script in a child process (`check`'s GPU runner): it imports the standard
library only, so it runs by an interpreter that cannot import sparkdoctor (a source checkout never installed). It
imported sparkdoctor.errors, and the child died with ModuleNotFoundError there."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

from sparkdoctor import cuda_driver


def test_it_imports_the_standard_library_only():
    tree = ast.parse(open(cuda_driver.__file__, encoding="utf-8").read())
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level}
    assert {name.split(".")[0] for name in names} - {"__future__"} <= sys.stdlib_module_names


def test_the_script_runs_where_sparkdoctor_cannot_be_imported(tmp_path):
    # -S: no site-packages, so no installed (or editable) sparkdoctor; no PYTHONPATH; a folder outside the checkout
    done = subprocess.run([sys.executable, "-S", "-B", cuda_driver.__file__, "--run-jobs"], cwd=tmp_path, env={},
                          input=json.dumps({"jobs": [], "library": str(tmp_path / "libcuda.so.1")}),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    assert reply["results"] == [] and reply["error"].startswith(f"cannot load {tmp_path / 'libcuda.so.1'}")
