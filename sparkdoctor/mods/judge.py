"""Judge mods against a tree: what each would do to the target, file by file; the target is never changed.

A mod is one of:
- a unified diff (`*.patch`, `*.diff`): judged statically (sparkdoctor.mods.diffs);
- a script (`*.py`, `*.sh`): run isolated against a scratch copy (sparkdoctor.mods.sandbox);
- a folder (eugr/spark-vllm-docker's `mods/<name>/`): its diffs judged statically, then its `run.sh` run
  isolated, so the verdict covers what the folder really does (including a `set -e` that stops the script
  before a later, still-valid step).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sparkdoctor.mods import scratch_watch
from sparkdoctor.mods.diffs import Room, judge_diff_text
from sparkdoctor.mods.model import (
    FileVerdict,
    ModError,
    ModKind,
    ModResult,
    Verdict,
    overall,
)
from sparkdoctor.mods.published import TAIL_LINES, shown_lines, shown_text
from sparkdoctor.mods.sandbox import run_script
from sparkdoctor.mods.trees import Tree, read_regular
from sparkdoctor.text import one_line

DIFF_SUFFIXES = (".patch", ".diff")
SCRIPT_SUFFIXES = (".py", ".sh")
MAX_MOD_FILES = 200
MAX_MOD_ENTRIES = 1000  # its files, folders and links: 150,000 dangling links took 36 s to copy into the scratch
MAX_MOD_BYTES = 32 * 2**20  # its diffs and scripts together (trees.MAX_FILE each): read whole, kept while it is judged
_NETWORK = re.compile(r"Could not resolve host|Temporary failure in name resolution|Network is unreachable|"
                      r"Name or service not known|curl: \(\d+\)|urlopen error|ConnectionError")
_IMPORTS_STACK = re.compile(r"No module named '(torch|vllm|flashinfer|triton|cutlass|transformers)[.']")
_READ_ONLY = "Read-only file system"
_QUOTED = re.compile(r": '([^'\n]+)'")


def _text(path: Path) -> str:
    data = read_regular(path)
    if data is None:
        raise ModError(f"{path}: no such file")
    if b"\x00" in data[:8192]:
        raise ModError(f"{path}: binary data, not a diff or a script")
    return data.decode("utf-8", "replace")


def judge_mod(path: Path, tree: Tree, timeout: float | None = None) -> ModResult:
    """One mod (a diff, a script or a folder) against `tree`."""
    return _startup_flagged(_judged(path, tree, timeout))


def runs_at_start(rel: str) -> bool:
    """A file the interpreter runs at every start, from a site folder: a `.pth` file (its `import` lines),
    sitecustomize.py, usercustomize.py."""
    base = rel.rsplit("/", 1)[-1]
    return base.endswith(".pth") or base in ("sitecustomize.py", "usercustomize.py")


def _startup_flagged(result: ModResult) -> ModResult:
    """A mod that writes a file `runs_at_start` is `cannot-tell` (a failing one stays `fails`): that code runs in
    every python of the environment, and what it does is not what the gate judges. Removing one is not flagged."""
    hits = [f for f in result.files if f.verdict is Verdict.APPLIES and runs_at_start(f.path)
            and not f.detail.startswith("removed")]
    for f in hits:
        f.detail += "; this file runs at every start of the interpreter: read it before the mod is applied"
    if hits and result.verdict is not Verdict.FAILS:
        names = ", ".join(f.path for f in hits[:3])
        result.verdict = Verdict.CANNOT_TELL
        result.detail = f"it writes {names}: code that runs at every start of the interpreter; not judged, read it first"
    return result


def _judged(path: Path, tree: Tree, timeout: float | None) -> ModResult:
    if path.is_dir():
        return _judge_folder(path, tree, timeout)
    if not path.exists():
        raise ModError(f"{path}: no such file or folder")
    if path.suffix in DIFF_SUFFIXES:
        files = judge_diff_text(_text(path), tree, path.name)
        return ModResult(path.name, str(path), ModKind.DIFF, overall([f.verdict for f in files]), _summary(files), files)
    if path.suffix in SCRIPT_SUFFIXES:
        named = f"./{path.name}" if path.name.startswith("-") else path.name  # a name, never an option of the runner
        runner = ["python3", named] if path.suffix == ".py" else ["bash", named]
        return _judge_script(path, runner, [_text(path)], tree, ModKind.SCRIPT, timeout)  # copied alone
    raise ModError(f"{path}: not a mod sparkdoctor reads (a folder, *.patch, *.diff, *.py or *.sh)")


def _unreadable(exc: OSError) -> None:
    raise ModError(f"{exc.filename}: cannot read: {exc.strerror or exc}")


def _judge_folder(folder: Path, tree: Tree, timeout: float | None) -> ModResult:
    members = []
    entries = 0
    inside, out = Path(os.path.realpath(folder)), None
    for sub, dirs, names in os.walk(folder, onerror=_unreadable):  # links to folders are not followed
        links = (Path(sub) / n for n in [*dirs, *names] if (Path(sub) / n).is_symlink())
        out = out or next((link for link in links if not Path(os.path.realpath(link)).is_relative_to(inside)), None)
        members += [Path(sub) / n for n in names if (Path(sub) / n).is_file()]
        entries += len(dirs) + len(names)
        if len(members) > MAX_MOD_FILES:  # stop walking here: `/` or a home is no mod folder
            raise ModError(f"{folder}: more than {MAX_MOD_FILES} files; a mod folder that large is not read")
        if entries > MAX_MOD_ENTRIES:  # folders and links, which are no files, are copied into the sandbox too
            raise ModError(f"{folder}: more than {MAX_MOD_ENTRIES} files, folders and links; a mod folder that large "
                           "is not read")
    if out is not None:  # `fix.patch -> ~/.ssh/id_ed25519`: read here, a dangling link in the sandbox's copy
        raise ModError(f"{out}: a link to a place outside the mod folder ({os.path.realpath(out)}); a mod that reaches out of its "
                       "folder is not read")
    members.sort()
    read = [p for p in members if p.suffix in DIFF_SUFFIXES + SCRIPT_SUFFIXES]
    if sum(_size(p) for p in read) > MAX_MOD_BYTES:  # 200 diffs of 32 MiB each held 6 GB while judged
        raise ModError(f"{folder}: its diffs and scripts hold more than {MAX_MOD_BYTES >> 20} MiB together; a mod "
                       "folder that large is not read")
    texts = {p: _text(p) for p in read}
    files: list[FileVerdict] = []
    room = Room()  # one budget for all its diffs: 200 diffs of MAX_FILES each are no mod either
    for diff in (p for p in read if p.suffix in DIFF_SUFFIXES):
        files += judge_diff_text(texts[diff], tree, diff.relative_to(folder).as_posix(), room)
    entry = folder / "run.sh"
    if entry.is_file():
        ran = _judge_script(folder, ["bash", "run.sh"], list(texts.values()), tree, ModKind.FOLDER, timeout)
        # the static verdict of a diff says why run.sh failed; keep both, the diff's first
        statics = {(f.path, f.source) for f in files}
        files += [f for f in ran.files if (f.path, f.source) not in statics]
        verdicts = [f.verdict for f in files] + [ran.verdict]
        return ModResult(folder.name, str(folder), ModKind.FOLDER, overall(verdicts), ran.detail, files, ran.output_tail)
    if not any(p.suffix in DIFF_SUFFIXES for p in read):
        raise ModError(f"{folder}: no run.sh and no *.patch/*.diff: nothing here says what the mod does")
    return ModResult(folder.name, str(folder), ModKind.FOLDER, overall([f.verdict for f in files]), _summary(files),
                     files)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # gone or unreadable: _text says which


def _summary(files: list[FileVerdict]) -> str:
    worst = overall([f.verdict for f in files])
    first = next((f for f in files if f.verdict == worst), None)
    return f"{first.path}: {first.detail}" if first and first.path else (first.detail if first else "")


def _judge_script(path: Path, argv: list[str], texts: list[str], tree: Tree, kind: ModKind,
                  timeout: float | None) -> ModResult:
    """`argv` run from (a copy of) `path`, the mod: a folder, or a script alone."""
    run = run_script(argv, path, texts, tree, **({"timeout": timeout} if timeout else {}))
    source = " ".join(argv[1:])
    if run.refused:
        return ModResult(path.name, str(path), kind, Verdict.CANNOT_TELL, run.refused)
    assert run.result is not None
    result = run.result
    output = (result.stdout + result.stderr).strip()  # read whole for the verdict; only `shown` is published
    shown = shown_lines(output)
    # a name the script made is one line of text: a line break, escape or undecodable byte in it is spelt out
    files = [FileVerdict(one_line(rel), Verdict.APPLIES, "changed by the script", source=source) for rel in run.changed]
    files += [FileVerdict(one_line(rel), Verdict.APPLIES, "created by the script", source=source) for rel in run.created
              if not rel.endswith((".rej", ".orig"))]
    files += [FileVerdict(one_line(rel), Verdict.APPLIES, "removed by the script", source=source) for rel in run.removed]
    if result.timed_out:  # said of the script: the sandbox's own programs (bwrap, setpriv) are no mod's
        after = result.limit if result.limit is not None else result.seconds
        verdict, detail = Verdict.FAILS, f"{source} hung: still running after {after:.1f}s, its time limit (--timeout)"
    elif result.stopped and result.stopped.startswith(scratch_watch.DISK_FILLED):  # maybe not its doing
        verdict, detail = Verdict.CANNOT_TELL, f"{source} was stopped: {result.stopped}"
    elif result.stopped:
        verdict, detail = Verdict.FAILS, f"{source} was stopped: {result.stopped}"
    elif _NETWORK.search(output):
        verdict, detail = Verdict.CANNOT_TELL, f"{source} needs the network (it fetches something at launch)"
    elif (m := _IMPORTS_STACK.search(output)):
        verdict, detail = Verdict.CANNOT_TELL, f"{source} imports {m.group(1)}: it can only be judged in the real environment"
    elif (ro := _read_only(output)):
        where = shown_text(ro)
        verdict, detail = Verdict.FAILS, f"{source} writes outside the files it patches ({where}): refused"
    elif "previously applied" in output and not result.ok:
        verdict, detail = Verdict.FAILS, (f"{source} stops: patch finds its change applied already and exits "
                                          f"{result.returncode} (a launch running it fails the same way)")
    elif "FAILED" in output or "patch does not apply" in output:
        verdict, detail = Verdict.FAILS, f"{source}: a patch in it does not apply: " + _first_failure(shown)
    elif not result.ok:
        last = shown[-1] if shown else ("no patch or error line in its output" if output else "no output")
        why = f"killed by signal {result.signal}" if result.signal else f"exited {result.returncode}"
        verdict, detail = Verdict.FAILS, f"{source} {why}: {last}"
        if run.missing:
            verdict = Verdict.CANNOT_TELL
            detail += f" (it names {', '.join(run.missing[:3])}, which {'is' if len(run.missing) == 1 else 'are'} not in the target)"
    elif files:
        verdict, detail = Verdict.APPLIES, f"{source} ran and changed {len(files)} file(s)"
    else:
        verdict, detail = Verdict.NO_EFFECT, f"{source} ran and changed nothing (already applied, or guarded)"
    return ModResult(path.name, str(path), kind, verdict, detail, files, "\n".join(shown[-TAIL_LINES:]))


def _read_only(output: str) -> str | None:
    """The path a script was refused writing to (`touch: X: Read-only file system`, Python's `...: 'X'`), found in
    time linear in the output: a script prints what it likes, and a regex with a leading `\\S+` takes hours on one
    long line."""
    at = output.find(_READ_ONLY)
    while at >= 0:
        before = output[max(0, at - 4096):at]
        if before.endswith(": ") and before[:-2] and not before[-3].isspace():
            return before[:-2].rsplit(None, 1)[-1]
        quoted = _QUOTED.match(output, at + len(_READ_ONLY), at + len(_READ_ONLY) + 4096)
        if quoted:
            return quoted.group(1)
        at = output.find(_READ_ONLY, at + 1)
    return None


def _first_failure(shown: list[str]) -> str:
    current = ""
    for line in shown:
        m = re.match(r"(?:patching|checking) file (\S+)", line)
        if m:
            current = m.group(1)
        if "FAILED" in line or "does not apply" in line:
            return f"{current}: {line.strip()}" if current and current not in line else line.strip()
    return shown[-1] if shown else ""
