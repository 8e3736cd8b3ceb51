"""Judge a unified diff against a tree, file by file, without changing anything.

Applying is GNU patch's job (the tool the community's run scripts use, with its default fuzz), always with
`--dry-run` on a scratch copy: forward (applies), reverse (already applied). When neither works the diff's
own hunks say why: the lines it adds are in the release already (superseded), or where the context it
edits diverged (fails).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from unidiff.constants import DEV_NULL
from unidiff.errors import UnidiffParseError
from unidiff.patch import Hunk, PatchedFile, PatchSet

from sparkdoctor import proc
from sparkdoctor.mods.model import FileVerdict, Verdict
from sparkdoctor.mods.trees import NotPatchable, Tree, refused_path, site_relative
from sparkdoctor.text import one_line

PATCH_TIMEOUT = 30.0
# What one mod (a diff, or a folder's diffs together) is judged for: each file costs GNU patch runs, each hunk patch's
# time and the searches here. A community mod edits a few files in a few dozen hunks; a hostile one in a cloned
# recipe repository held 3,000 file sections (29 s) or 100,000 hunks (64 s) in a few MB, and a folder 200 such diffs.
MAX_FILES = 256
MAX_HUNKS = 4096


@dataclass
class Room:
    """What is left of one mod's MAX_FILES and MAX_HUNKS, used up by each diff judged."""

    files: int = MAX_FILES
    hunks: int = MAX_HUNKS
_HUNK_FAILED = re.compile(r"Hunk #(\d+) FAILED at (\d+)")
_HUNK_MOVED = re.compile(r"Hunk #(\d+) succeeded at (\d+)(?: with fuzz (\d+))?(?: \(offset (-?\d+) lines?\))?")


def judge_diff_text(text: str, tree: Tree, source: str, room: Room | None = None) -> list[FileVerdict]:
    """One verdict per file the diff touches; a diff patch cannot read is one FAILS line, not an exception; a diff
    larger than what is left of its mod's `room` is one CANNOT_TELL line, and nothing of it is run."""
    try:
        patchset = PatchSet(text)
    except (UnidiffParseError, ValueError, IndexError) as exc:  # ValueError: a hunk header's 5000-digit number
        why = str(exc) if isinstance(exc, UnidiffParseError) else f"a malformed header ({str(exc).split(';')[0]})"
        return [FileVerdict("", Verdict.FAILS, f"not a unified diff patch can apply: {one_line(why)[:200]}",
                            source=source)]
    if not len(patchset):
        return [FileVerdict("", Verdict.FAILS, "no file changes in it (an empty or non-unified diff)", source=source)]
    room = room or Room()
    files, hunks = len(patchset), sum(len(pf) for pf in patchset)
    if files > room.files or hunks > room.hunks:
        return [FileVerdict("", Verdict.CANNOT_TELL, f"it edits {files} file(s) in {hunks} hunk(s): one mod is judged "
                            f"for {MAX_FILES} files and {MAX_HUNKS} hunks at most, all its diffs together; not judged",
                            source=source)]
    room.files, room.hunks = room.files - files, room.hunks - hunks
    if shutil.which("patch") is None:
        return [FileVerdict(site_relative(p.path), Verdict.CANNOT_TELL, "GNU patch is not installed here",
                            source=source) for p in patchset]
    return [_judge_file(pf, tree, source) for pf in patchset]


def _judge_file(pf: PatchedFile, tree: Tree, source: str) -> FileVerdict:
    named = pf.target_file if pf.is_added_file else pf.source_file
    rel = site_relative(named)
    names = [named]
    if any(line.startswith("diff --git ") for line in pf.patch_info or ()):
        names.append(pf.target_file)  # a git diff writes its b/ name: a rename's or a copy's target
    for path in names:
        refused = refused_path(path) if path != DEV_NULL else None
        if refused:
            return FileVerdict(one_line(rel or named)[:200], Verdict.FAILS, f"will not apply: {refused}",
                               source=source)
    if pf.is_binary_file:
        return FileVerdict(rel, Verdict.CANNOT_TELL, "a git binary patch: binary patches are not judged",
                           source=source)
    try:
        current = tree.read(rel)
    except NotPatchable as exc:
        words = "will not apply" if exc.verdict is Verdict.FAILS else "not judged"
        return FileVerdict(rel, exc.verdict, f"{words}: {rel} in {tree.label} {exc.why}", source=source)
    if pf.is_added_file:
        wanted = "".join(line.value for hunk in pf for line in hunk if line.is_added)
        if current is None:
            return FileVerdict(rel, Verdict.APPLIES, f"creates {rel}", source=source)
        if current.decode("utf-8", "replace") == wanted:
            return FileVerdict(rel, Verdict.ALREADY_APPLIED, f"{rel} exists with exactly this content", source=source)
        return FileVerdict(rel, Verdict.FAILS, f"it creates {rel}, which exists already with other content",
                           source=source)
    if current is None:
        if pf.is_removed_file:
            return FileVerdict(rel, Verdict.ALREADY_APPLIED, f"{rel} is gone already", source=source)
        return FileVerdict(rel, Verdict.FAILS, f"{rel} is not in {tree.label}", source=source)
    forward = _dry_run(str(pf), current, False)
    if forward.ok:
        moved = list(_HUNK_MOVED.finditer(forward.stdout))
        how = "applies cleanly" if not moved else "applies, " + "; ".join(_moved_words(m) for m in moved)
        return FileVerdict(rel, Verdict.APPLIES, how, source=source)
    lines = current.decode("utf-8", "replace").splitlines()
    normed = [_norm(x) for x in lines]  # once per file: every search below is one pass over it
    if _dry_run(str(pf), current, True).ok:  # only when forward fails: a diff that applies needs no second run
        at = _added_lines_present(list(pf), normed)  # where the change stands, when it adds lines
        return FileVerdict(rel, Verdict.ALREADY_APPLIED, "the change is in the file already (the diff reverses cleanly)",
                           lines=at, source=source)
    failed = {int(m.group(1)) for m in _HUNK_FAILED.finditer(forward.stdout)} or set(range(1, len(pf) + 1))
    hunks = [h for n, h in enumerate(pf, start=1) if n in failed]
    if not hunks:  # no hunk to blame (a git header alone, a mode change): patch's own last line says why
        said = (forward.stdout + forward.stderr).strip().splitlines()
        why = one_line(said[-1])[:200] if said else forward.describe_failure()
        return FileVerdict(rel, Verdict.FAILS, f"patch does not apply it: {why}", source=source)
    found = _added_lines_present(hunks, normed)
    if found is not None:
        first, last = found
        return FileVerdict(rel, Verdict.SUPERSEDED,
                           f"does not apply, but the lines it adds are in {rel} already (lines {first}-{last})",
                           lines=found, source=source)
    detail, where = _divergence(hunks[0], sorted(failed)[0], lines, normed)
    return FileVerdict(rel, Verdict.FAILS, detail, lines=where, source=source)


def _moved_words(m: re.Match[str]) -> str:
    words = f"hunk {m.group(1)} at line {m.group(2)}"
    if m.group(4):
        words += f" (offset {m.group(4)})"
    if m.group(3):
        words += f" with fuzz {m.group(3)}"
    return words


def _dry_run(diff: str, current: bytes, reverse: bool) -> proc.ProcResult:
    """GNU patch --dry-run of one file's diff on a scratch copy (patch is told the file; the diff's paths are
    not followed)."""
    with tempfile.TemporaryDirectory(prefix="sparkdoctor-mods-") as tmp:
        target = Path(tmp) / "file"
        target.write_bytes(current)
        argv = ["patch", "--dry-run", "--force", "--no-backup-if-mismatch", "--reject-file=-", "-p0", str(target)]
        if reverse:
            argv.insert(1, "--reverse")
        return proc.run(argv, timeout=PATCH_TIMEOUT, input=diff, cwd=tmp)


def _norm(line: str) -> str:
    return " ".join(line.split())


def _added_lines_present(hunks: list[Hunk], normed: list[str]) -> tuple[int, int] | None:
    """Where the failing hunks' added lines all stand in the file already (in order), or None. `normed` is the
    file's lines, _norm'ed; one forward pass over it."""
    added = [_norm(ln.value) for h in hunks for ln in h if ln.is_added and _norm(ln.value)]
    removed = {_norm(ln.value) for h in hunks for ln in h if ln.is_removed and _norm(ln.value)}
    if not added or all(a in removed for a in added):
        return None
    at, hits = 0, []
    for want in added:
        try:
            at = normed.index(want, at)
        except ValueError:
            return None
        hits.append(at + 1)
        at += 1
    return hits[0], hits[-1]


def _divergence(hunk: Hunk, number: int, lines: list[str], normed: list[str]) -> tuple[str, tuple[int, int] | None]:
    """One line saying where a hunk's context no longer matches the file."""
    old = [ln.value.rstrip("\n") for ln in hunk if ln.is_context or ln.is_removed]
    want = [_norm(x) for x in old]
    expected_at = max(hunk.source_start, 1)
    present = set(normed)
    for raw, key in zip(old, want, strict=True):
        if key and key not in present:
            return (f"hunk {number} (line {expected_at}): `{raw.strip()[:120]}` is nowhere in the file: "
                    "the code it edits is gone or was rewritten", None)
    # every line exists somewhere, but not together: find where the run breaks near the expected place
    best_start, best_len = _longest_prefix_match(want, normed)
    if best_start is None or best_len == 0:
        return f"hunk {number} (line {expected_at}): its context no longer stands together in the file", None
    line_no = best_start + best_len + 1
    if best_len == len(old):  # every line stands there, _norm'ed: patch matches spaces and line ends exactly
        return (f"hunk {number}: its lines stand at lines {best_start + 1}-{line_no - 1}, but with other spaces, "
                "tabs or line endings", (best_start + 1, line_no - 1))
    got = lines[best_start + best_len].strip() if best_start + best_len < len(lines) else "end of file"
    return (f"hunk {number}: the file matches up to line {line_no - 1}, then has `{got[:100]}` where the mod "
            f"expects `{old[best_len].strip()[:100]}`", (best_start + 1, line_no))


def _longest_prefix_match(want: list[str], normed: list[str]) -> tuple[int | None, int]:
    """The first index of `normed` where the longest prefix of `want` stands, and that prefix's length.

    Linear in len(want) + len(normed) (the Z-algorithm's window, visiting only the indexes where want[0]
    stands): trying every start and comparing forward is file lines x hunk lines, minutes on a hostile diff."""
    m = len(want)
    if not m:
        return None, 0
    z = [0] * m  # z[k]: how long want[k:] matches want's own start
    left = right = 0
    for k in range(1, m):
        n = min(z[k - left], right - k) if k < right else 0
        while k + n < m and want[n] == want[k + n]:
            n += 1
        z[k] = n
        if k + n > right:
            left, right = k, k + n
    size, first = len(normed), want[0]
    best_start, best_len = None, 0
    left = right = 0  # normed[left:right] == want[:right - left], the match reaching furthest so far
    for i in (i for i, line in enumerate(normed) if line == first):
        n = z[i - left] if i < right else 0
        if n >= right - i:  # the known match runs out at `right`: compare on from there
            n = max(right - i, 0)
            while n < m and i + n < size and normed[i + n] == want[n]:
                n += 1
            left, right = i, i + n
        if n > best_len:
            best_start, best_len = i, n
            if n == m:
                break
    return best_start, best_len
