"""What a mod's texts name is found in time linear in the text: an 80 KB comment of `/a/a/a...` took 78 s of CPU
(the site-folder expression backtracked over every start in one long path), and 32 MiB would take days. The linear
reading finds exactly what the regular expressions found, checked here on generated texts."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

from sparkdoctor.mods import named
from sparkdoctor.mods.sandbox import referenced_files, site_paths

# the expressions as they were (sparkdoctor/mods/sandbox.py before): the reference for what is found
SITE_PATH = re.compile(r"(/[\w.+-]+(?:/[\w.+-]+)*/(?:site|dist)-packages)(?=[/\s\"']|$)")
PKG_FILE = re.compile(r"(?:(?:site|dist)-packages/|\b)((?:vllm|flashinfer|cutlass|triton|torch|transformers|"
                      r"compressed_tensors|nvidia)/[\w/.-]+\.(?:py|pyi|json|jinja|txt|cfg|toml|yaml))")
CPU_BOUND_S = 5.0
PIECES = ["/", "//", "a", "x.y", "-", "+", "site-packages", "dist-packages", "vllm/", "torch/", "nvidia", ".py",
          ".pyi", ".pyc", ".json", ".", " ", "\n", "'", '"', ":", "é", "usr/local/lib/python3.12/", "..", "_"]


def texts(n: int) -> list[str]:
    rng = random.Random(1130)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 40))) for _ in range(n)]


def test_the_linear_reading_finds_what_the_expressions_found():
    for text in texts(20_000):
        assert named.site_folders(text) == [m.group(1) for m in SITE_PATH.finditer(text)], text
        assert named.package_files(text) == [m.group(1) for m in PKG_FILE.finditer(text)], text


def test_real_mod_texts_read_as_before():
    run_sh = ("#!/bin/bash\nset -e\npatch -p1 -d / < glm4_moe.patch\n"
              "F=/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/glm4_moe.py\n"
              "grep -q k_scale \"$F\" || sed -i 's/x/y/' $F\n"
              "python3 -c \"import sys; sys.path.insert(0, '/opt/venv/lib/python3.12/site-packages')\"\n")
    assert site_paths([run_sh]) == ["/usr/local/lib/python3.12/dist-packages", "/opt/venv/lib/python3.12/site-packages"]
    assert referenced_files([run_sh]) == ["vllm/model_executor/models/glm4_moe.py"]


LONG = ["/a" * 400_000, "vllm/" * 200_000, "/a/site-packages" * 60_000 + ":", "torch/" + "a." * 400_000]
PROBE = ("import resource, sys\n"
         "resource.setrlimit(resource.RLIMIT_CPU, ({limit}, {limit}))\n"  # killed by SIGXCPU past it, never a hang
         "from sparkdoctor.mods.sandbox import referenced_files, site_paths\n"
         "from tests.mods.test_mods_named import LONG\n"
         "for text in LONG:\n"
         "    site_paths([text]); referenced_files([text])\n")


def test_long_paths_are_read_in_bounded_cpu_time():
    """In a child whose CPU time is limited, so that the old reading is killed rather than left to run for days."""
    done = subprocess.run([sys.executable, "-c", PROBE.format(limit=int(CPU_BOUND_S) + 5)], capture_output=True,
                          text=True, cwd=Path(__file__).parents[2], check=False)
    assert done.returncode == 0, (done.returncode, done.stderr[-500:])
