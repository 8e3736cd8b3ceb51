"""A probe folder as ONE script a node's interpreter reads on stdin (`python3 -B - ARGS`).

Nothing is installed or written on a node: the probe's modules (probes/<name>/*.py and probes/shared/*.py)
travel inside the script, compressed, and an import hook serves them from memory. The probe's
__main__.py then runs as __main__ with its usual argv. Standard library only on the node's side, and
Python 3.8+ (the bootstrap avoids newer syntax), as for every probe. Both scripts first take the working folder
off sys.path, where `python3 -` puts it (an ssh login's home, a Ray worker's job folder): a json.py or subprocess.py
there would otherwise run in place of the standard module (`-P` would do it, from Python 3.11 only).
"""

from __future__ import annotations

import base64
import inspect
import json
import zlib
from functools import lru_cache
from pathlib import Path

from sparkdoctor.fleet import on_node
from sparkdoctor.locations import data_dir
from sparkdoctor.targets.early import NO_CWD

BOOTSTRAP = NO_CWD + '''\
import base64, importlib.machinery, json, zlib
_SOURCES = json.loads(zlib.decompress(base64.b64decode({blob!r})).decode("utf-8"))
_NAME = {name!r}


class _Memory(object):  # a meta path finder and loader by protocol: importlib.abc would import importlib.resources (10 ms)
    def find_spec(self, fullname, path=None, target=None):
        if fullname in _SOURCES:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        name = module.__name__
        module.__file__ = "<sparkdoctor>/probes/%s.py" % name
        exec(compile(_SOURCES[name], module.__file__, "exec"), module.__dict__)


sys.meta_path.insert(0, _Memory())
sys.argv = [_NAME] + sys.argv[1:]
_main = {{"__name__": "__main__", "__file__": "<sparkdoctor>/probes/%s/__main__.py" % _NAME, "__builtins__": __builtins__}}
exec(compile(_SOURCES["__main__"], _main["__file__"], "exec"), _main)
'''


@lru_cache(maxsize=16)
def bundle(name: str) -> str:
    """The self-contained script of probe `name` (probes/<name>/): its modules and probes/shared/."""
    root = data_dir("probes")
    sources: dict[str, str] = {}
    for folder in (root / "shared", root / name):
        for path in sorted(Path(folder).glob("*.py")):
            sources[path.stem] = path.read_text(encoding="utf-8")
    if "__main__" not in sources:
        raise FileNotFoundError(f"probe {name}: no __main__.py in {root / name}")
    blob = base64.b64encode(zlib.compress(json.dumps(sources).encode("utf-8"), 9)).decode("ascii")
    return BOOTSTRAP.format(blob=blob, name=name)


def probe_of(script: Path) -> str:
    """'target_env' for probes/target_env/__main__.py (what start_script is handed)."""
    return script.parent.name if script.name == "__main__.py" else script.stem


# each probe is fed and its output read as on_node does a command's: its last bytes in a ring (on_node._tail)
TAIL = "\n\n".join(inspect.getsource(f) for f in (on_node._tail, on_node._kept, on_node._feed))
MULTI = NO_CWD + '''\
import json, subprocess, threading, time
_JOBS = json.loads({jobs!r})
_LIMIT = {limit!r}
_OUT = [None] * len(_JOBS)


{tail}


def _one(i):
    script, args = _JOBS[i]
    try:
        proc = subprocess.Popen([sys.executable, "-S", "-B", "-X", "sparkdoctor_site", "-"] + args, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        _OUT[i] = {{"returncode": None, "start_error": str(exc), "stdout": "", "stderr": ""}}
        return
    kept = [[bytearray(), 0], [bytearray(), 0]]
    threads = [threading.Thread(target=_feed, args=(proc.stdin, script.encode("utf-8"))),
               threading.Thread(target=_tail, args=(proc.stdout, kept[0], {most!r})),
               threading.Thread(target=_tail, args=(proc.stderr, kept[1], 65536))]
    for thread in threads:
        thread.daemon = True
        thread.start()
    try:
        proc.wait(timeout=_LIMIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        _OUT[i] = {{"returncode": None, "timed_out": True, "stdout": "", "stderr": ""}}
        return
    for thread in threads[1:]:
        thread.join(5)
    _OUT[i] = {{"returncode": proc.returncode, "stdout": _kept(kept[0]).decode("utf-8", "replace"),
               "stderr": _kept(kept[1]).decode("utf-8", "replace")}}


_threads = [threading.Thread(target=_one, args=(i,)) for i in range(len(_JOBS))]
for _t in _threads:
    _t.start()
for _t in _threads:
    _t.join()
sys.stdout.write("\\n" + json.dumps({{"sparkdoctor_multi": _OUT, "time": time.time()}}) + "\\n")
'''


def multi_bundle(jobs: list[tuple[str, list[str]]], limit: float) -> str:
    """One script that runs several probes side by side on the node (each in its own interpreter process,
    as they run locally) and prints all their outputs as one JSON line: one ssh session or one Ray task per
    node instead of one per probe."""
    payload = json.dumps([[bundle(name), list(args)] for name, args in jobs])
    return MULTI.format(jobs=payload, limit=min(float(limit), on_node.MAX_WAIT), most=on_node.MAX_OUTPUT,
                        tail=TAIL)
