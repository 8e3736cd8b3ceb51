"""`matrix track --apply`: write the proposed edits of a track result into a matrix folder (for the scheduled
workflow, which opens a pull request with them; a person reviews it). Only two kinds of edit, both a value
swapped in place with the rest of the file kept byte for byte:

  when.packages.PKG of an entry   "PKG" = "FROM" -> "PKG" = "TO" inside that entry's block
  tracked.PKG / tracked_on         PKG = "FROM" -> PKG = "TO" in the tracking file (tracked_on added when absent)

An edit whose FROM text is not where the proposal says is skipped and said; the folder is loaded by the
ordinary loader afterwards, so an edit that made the matrix unreadable is undone file by file. Each file is
replaced atomically (files.write_text): a full disk or a kill mid-write never leaves a matrix file cut short
(a cut between two entries would still load, one entry fewer), and a write that fails undoes the others.
Two runs on one folder (cron, CI and a terminal) take turns: each reads, edits, loads and undoes under a lock on
the folder (files.folder_lock), so neither overwrites the other's edits with a copy read before them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sparkdoctor.files import OutputError, folder_lock, write_text
from sparkdoctor.matrix import MatrixError, load


def _entry_block(text: str, entry_id: str) -> tuple[int, int] | None:
    m = re.search(rf'^id = "{re.escape(entry_id)}"\s*$', text, re.M)
    if not m:
        return None
    end = text.find("[[entry]]", m.end())
    return m.start(), len(text) if end < 0 else end


def _swap(text: str, start: int, end: int, key: str, old: str | None, new: str) -> str | None:
    block = text[start:end]
    if old is None:
        return None
    pattern = re.compile(rf'((?<![\w-])(?:"{re.escape(key)}"|{re.escape(key)})\s*=\s*)"{re.escape(old)}"')
    if not pattern.search(block):
        return None
    return text[:start] + pattern.sub(lambda m: f'{m.group(1)}"{new}"', block, count=1) + text[end:]


def apply_proposals(doc: dict[str, Any], folder: Path) -> tuple[list[str], list[str]]:
    """(applied, skipped) lines for each proposal of a `matrix track` JSON document, written into `folder`."""
    with folder_lock(folder, "--apply"):  # read, edit, load and undo: all while no other run writes
        applied, skipped = [], []
        originals: dict[Path, str] = {}
        for p in doc.get("proposals") or []:
            path = folder / Path(str(p.get("file", ""))).name
            if not path.is_file():
                skipped.append(f"{p.get('field')}: {path} is not in {folder}")
                continue
            text = path.read_text()
            field, old, new = str(p["field"]), p.get("from"), str(p["to"])
            if field == "tracked_on":
                out = (_swap(text, 0, len(text), "tracked_on", old, new) if old else
                       re.sub(r"^\[tracked\]", f'tracked_on = "{new}"\n[tracked]', text, count=1, flags=re.M))
            elif field.startswith("tracked."):
                start = text.find("[tracked]")
                out = _swap(text, start, len(text), field.split(".", 1)[1], old, new) if start >= 0 else None
            elif field.startswith("when.packages.") and p.get("entry"):
                span = _entry_block(text, str(p["entry"]))
                out = _swap(text, *span, field.split(".", 2)[2], old, new) if span else None
            else:
                out = None
            if out is None or out == text:
                skipped.append(f"{p.get('entry', path.name)}: {field}: {old} not found where the proposal says")
                continue
            try:
                write_text(path, out)
            except OutputError as exc:  # the file is as it was (an atomic write that failed changed nothing): undo the others
                _restore(originals)
                raise OutputError(f"--apply: {path}: cannot write ({exc}); the matrix files were left as they were") from None
            originals.setdefault(path, text)  # its first edit's text is the original
            applied.append(f"{p.get('entry', path.name)}: {field}: {old} -> {new}")
        try:
            load(folder)
        except MatrixError as exc:
            _restore(originals)
            return [], [*skipped, f"the edits made the matrix unreadable ({exc}); nothing written"]
        return applied, skipped


def _restore(originals: dict[Path, str]) -> None:
    for path, text in originals.items():
        write_text(path, text)
