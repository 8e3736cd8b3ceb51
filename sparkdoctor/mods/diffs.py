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
from pathlib import Path

from unidiff.errors import UnidiffParseError
from unidiff.patch import Hunk, PatchedFile, PatchSet

from sparkdoctor import proc
from sparkdoctor.mods.model import FileVerdict, Verdict
from sparkdoctor.mods.trees import Tree, site_relative

PATCH_TIMEOUT = 30.0
_HUNK_FAILED = re.compile(r"Hunk #(\d+) FAILED at (\d+)")
_HUNK_MOVED = re.compile(r"Hunk #(\d+) succeeded at (\d+)(?: with fuzz (\d+))?(?: \(offset (-?\d+) lines?\))?")


def judge_diff_text(text: str, tree: Tree, source: str) -> list[FileVerdict]:
    """One verdict per file the diff touches; a diff patch cannot read is one FAILS line, not an exception."""

    try:
        patchset = PatchSet(text)
    except UnidiffParseError as exc:
        return [FileVerdict("", Verdict.FAILS, f"not a unified diff patch can apply: {str(exc)[:200]}", source=source)]
    if not len(patchset):
        return [FileVerdict("", Verdict.FAILS, "no file changes in it (an empty or non-unified diff)", source=source)]
    if shutil.which("patch") is None:
        return [FileVerdict(site_relative(p.path), Verdict.CANNOT_TELL, "GNU patch is not installed here",
                            source=source) for p in patchset]
    return [_judge_file(pf, tree, source) for pf in patchset]


def _judge_file(pf: PatchedFile, tree: Tree, source: str) -> FileVerdict:
    rel = site_relative(pf.target_file if pf.is_added_file else pf.source_file)
    current = tree.read(rel)
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
    forward, reverse = _dry_run(str(pf), current, False), _dry_run(str(pf), current, True)
    if forward.ok:
        moved = [m for m in _HUNK_MOVED.finditer(forward.stdout)]
        how = "applies cleanly" if not moved else "applies, " + "; ".join(_moved_words(m) for m in moved)
        return FileVerdict(rel, Verdict.APPLIES, how, source=source)
    lines = current.decode("utf-8", "replace").splitlines()
    if reverse.ok:
        at = _added_lines_present(list(pf), lines)  # where the change stands, when it adds lines
        return FileVerdict(rel, Verdict.ALREADY_APPLIED, "the change is in the file already (the diff reverses cleanly)",
                           lines=at, source=source)
    failed = {int(m.group(1)) for m in _HUNK_FAILED.finditer(forward.stdout)} or set(range(1, len(pf) + 1))
    hunks = [h for n, h in enumerate(pf, start=1) if n in failed]
    found = _added_lines_present(hunks, lines)
    if found is not None:
        first, last = found
        return FileVerdict(rel, Verdict.SUPERSEDED,
                           f"does not apply, but the lines it adds are in {rel} already (lines {first}-{last})",
                           lines=found, source=source)
    detail, where = _divergence(hunks[0], sorted(failed)[0], lines)
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
        result = proc.run(argv, timeout=PATCH_TIMEOUT, input=diff, cwd=tmp)
    return result


def _norm(line: str) -> str:
    return " ".join(line.split())


def _added_lines_present(hunks: list[Hunk], lines: list[str]) -> tuple[int, int] | None:
    """Where the failing hunks' added lines all stand in the file already (in order), or None."""
    added = [_norm(ln.value) for h in hunks for ln in h if ln.is_added and _norm(ln.value)]
    removed = {_norm(ln.value) for h in hunks for ln in h if ln.is_removed and _norm(ln.value)}
    if not added or all(a in removed for a in added):
        return None
    normed = [_norm(x) for x in lines]
    at, hits = 0, []
    for want in added:
        try:
            at = normed.index(want, at)
        except ValueError:
            return None
        hits.append(at + 1)
        at += 1
    return hits[0], hits[-1]


def _divergence(hunk: Hunk, number: int, lines: list[str]) -> tuple[str, tuple[int, int] | None]:
    """One line saying where a hunk's context no longer matches the file."""
    old = [ln.value.rstrip("\n") for ln in hunk if ln.is_context or ln.is_removed]
    normed = [_norm(x) for x in lines]
    expected_at = max(hunk.source_start, 1)
    for want in old:
        if not _norm(want):
            continue
        spots = [i + 1 for i, x in enumerate(normed) if x == _norm(want)]
        if not spots:
            return (f"hunk {number} (line {expected_at}): `{want.strip()[:120]}` is nowhere in the file: "
                    "the code it edits is gone or was rewritten", None)
    # every line exists somewhere, but not together: find where the run breaks near the expected place
    best_start, best_len = None, 0
    for start in range(len(normed)):
        n = 0
        while n < len(old) and start + n < len(normed) and normed[start + n] == _norm(old[n]):
            n += 1
        if n > best_len:
            best_start, best_len = start, n
    if best_start is None or best_len == 0:
        return f"hunk {number} (line {expected_at}): its context no longer stands together in the file", None
    line_no = best_start + best_len + 1
    got = lines[best_start + best_len].strip() if best_start + best_len < len(lines) else "end of file"
    return (f"hunk {number}: the file matches up to line {line_no - 1}, then has `{got[:100]}` where the mod "
            f"expects `{old[best_len].strip()[:100]}`", (best_start + 1, line_no))
