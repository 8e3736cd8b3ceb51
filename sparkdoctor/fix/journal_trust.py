"""Which journals a rollback acts on. A rollback writes the files, and installs the wheels, that a journal names, as it
names them: so it acts only on a journal this machine's fix wrote, and writes only inside the target it restores.

- Where it lies: in this user's journals folder (state_dir/journals/<id>; one linked there from another disk counts,
  the link is the user's own act). A journal named by a path elsewhere (copied from another machine, attached to a
  bug report, crafted) is refused before its target's interpreter is started: that interpreter is the journal's word.
- What it holds: no symbolic link (a copy linked to ~/.ssh/id_rsa would be written into the target), every file and
  folder this user's and not writable by every user (another user could swap a copy after it was checked).
- What it writes: every file of a touched dist is an absolute, normal path inside the target's environment (its
  prefix; the user base of an interpreter that is no venv: a dist in the user site), as text AND where a write lands
  with every link in its path followed, as the target's file system resolves it now (a folder inside the venv linked
  out of it is refused, not written through). A venv's base installation (a --system-site-packages venv's dists) may
  be named but is never written: a file there must be as the journal's copy has it. The edited files (an env file, a
  pin file) may lie anywhere, as the user named them: the first two rules trust them, and a rollback writes one only
  while it holds byte for byte what the apply left or what was there before (restore.py).
Each refusal is one line, exit 4 (JournalError), and nothing was done from the journal. The writes then go where this
check saw them and follow no link on the way (Restorer.pin_writes, targets/fileops.py: write_under): a link planted
while the rollback runs is refused at the write (exit 4 too, after changes: the rollback stops there, unfinished).
"""

from __future__ import annotations

import os
import posixpath
import stat

from sparkdoctor.fix.interface import JournalError
from sparkdoctor.fix.inventory import Inventory
from sparkdoctor.fix.journal import Journal, journals_dir, sha256_file
from sparkdoctor.targets.files import FileTransport, hashes


def refuse_foreign(journal: Journal) -> None:
    """One line when the journal lies outside this user's journals folder, or holds a link or another user's file."""
    folder = journals_dir()
    if journal.path.name in ("", ".", "..") or os.path.realpath(journal.path.parent) != os.path.realpath(folder):
        raise JournalError(f"{journal.path} is not in this machine's journals folder {folder}: a journal from elsewhere "
                           "(another machine, a bug report) is not rolled back, as the interpreter, files and wheels it "
                           f"names would be trusted as this machine's own; nothing was done from it (to roll it back all "
                           f"the same, move it into {folder} and name it by its id)")
    me = os.geteuid()
    for root, dirs, files in os.walk(journal.path):
        for path in [root] if root == str(journal.path) else []:
            _judge(path, os.stat(path), me)
        for name in [*dirs, *files]:
            _judge(os.path.join(root, name), os.lstat(os.path.join(root, name)), me)


def _judge(path: str, st: os.stat_result, me: int) -> None:
    why = ("is a symbolic link" if stat.S_ISLNK(st.st_mode) else f"belongs to another user (uid {st.st_uid})"
           if st.st_uid != me else "can be written by every user" if st.st_mode & stat.S_IWOTH else None)
    if why:
        raise JournalError(f"{path} {why}: the journal is not trusted; nothing was done from it")


def refuse_stray_paths(journal: Journal, inventory: Inventory, label: str,
                       files: FileTransport) -> tuple[list[str], dict[str, str]]:
    """One line when a file of a touched dist that the journal names lies outside the target's environment: by its
    text, then where a write to it lands, every link in its path followed (a folder inside the venv linked to the
    home folder takes the write there). A venv's base installation is never written (a venv's pip leaves it: "outside
    environment"): a file there is named only if the rollback would leave it as it is. Returns the target's roots
    and where each path lands, both resolved: the rollback writes there and follows no link on the way
    (Restorer.pin_writes), so a link planted after this check is refused at the write, not followed."""
    writable, read_only = _roots(inventory)
    roots = [posixpath.normpath(r) for r in [*writable, *read_only]]
    rows = [row for dist_rows in journal.data["dist_files"].values() for row in dist_rows]
    for row in rows:
        path = row["path"]
        if not (posixpath.isabs(path) and posixpath.normpath(path) == path and _under(path, roots)):
            raise JournalError(f"journal {journal.id} names {path}, outside the target {label} ({', '.join(roots)}): "
                               "a rollback writes only inside the environment it restores; nothing was changed")
    real = _real(files, [*[row["path"] for row in rows], *writable, *read_only])
    lands = {row["path"]: real[row["path"]] for row in rows}
    inside = [real[r] for r in writable]
    kept = [row for row in rows if not _under(lands[row["path"]], inside) and row.get("copy")]
    now = hashes(files, [row["path"] for row in kept])
    base = [real[r] for r in read_only]
    for row in rows:
        path, where = row["path"], lands[row["path"]]
        if _under(where, inside):
            continue
        if _under(where, base):
            if not row.get("copy") or now.get(path) == sha256_file(journal.path / row["copy"]):
                continue  # read there (a --system-site-packages venv's dist), and left as it is
            raise JournalError(f"journal {journal.id} names {path}, in the base installation of the venv {label} "
                               f"({', '.join(base)}), changed since the apply: a venv's pip never writes there, so its "
                               "rollback does not either; nothing was changed")
        raise JournalError(f"journal {journal.id} names {path}, which is {where} once its links are followed, outside the "
                           f"target {label} ({', '.join(inside)}): a rollback writes only inside the environment it "
                           "restores; nothing was changed")
    return inside, lands


def refuse_outside(paths: list[str], inventory: Inventory, label: str, files: FileTransport) -> None:
    """Before the journal copies them: one line when a file a touched dist's RECORD lists lies outside the target's
    environment, by its text or once its links are followed (a RECORD row `../../../../home/u/.ssh/id_rsa`, a module
    linked to a file in the home folder). The rollback check above refuses such a journal; made first, the journal
    had copied the file (a key, 0644 in the state folder) and was kept. Nothing is copied or changed."""
    writable, read_only = _roots(inventory)
    roots = [posixpath.normpath(r) for r in [*writable, *read_only]]
    for path in paths:
        if not (posixpath.isabs(path) and posixpath.normpath(path) == path and _under(path, roots)):
            raise JournalError(f"a touched dist's RECORD names {path}, outside the target {label} ({', '.join(roots)}): fix "
                               "copies, replaces and restores only files inside the environment; nothing was changed")
    real = _real(files, [*paths, *writable, *read_only])
    inside = [real[r] for r in [*writable, *read_only]]
    for path in paths:
        if not _under(real[path], inside):
            raise JournalError(f"a touched dist's RECORD names {path}, which is {real[path]} once its links are followed, "
                               f"outside the target {label} ({', '.join(inside)}): fix copies, replaces and restores only "
                               "files inside the environment; nothing was changed")


def _roots(inventory: Inventory) -> tuple[list[str], list[str]]:
    """(the target's roots a rollback writes in, its venv's base installation, read only)."""
    writable = [r for r in [inventory.prefix, *([] if inventory.is_venv else [inventory.user_base])] if r]
    return writable, [inventory.base_prefix] if inventory.is_venv and inventory.base_prefix else []


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _real(files: FileTransport, paths: list[str]) -> dict[str, str]:
    """Each path with every link in it followed, as the target's file system has it (one call): the deepest of it and
    its folders that exists, resolved, then the rest of it as it is."""
    chain = {p: _self_and_folders(p) for p in paths}
    rows = files.info(sorted({q for qs in chain.values() for q in qs}))
    out = {}
    for p, qs in chain.items():
        found = next((q for q in qs if (rows.get(q) or {}).get("real")), None)
        out[p] = p if found is None else posixpath.normpath(posixpath.join(str((rows[found] or {}).get("real")), p[len(found):].lstrip("/")))
    return out


def _self_and_folders(path: str) -> list[str]:
    out = [path]
    while path not in ("/", ""):
        path = posixpath.dirname(path)
        out.append(path)
    return out
