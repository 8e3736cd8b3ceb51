"""Which journals a rollback acts on. A rollback writes the files, and installs the wheels, that a journal names, as it
names them: so it acts only on a journal this machine's fix wrote, and writes only inside the target it restores.

- Where it lies: in this user's journals folder (state_dir/journals/<id>; one linked there from another disk counts,
  the link is the user's own act). A journal named by a path elsewhere (copied from another machine, attached to a
  bug report, crafted) is refused before its target's interpreter is started: that interpreter is the journal's word.
- What it holds: no symbolic link (a copy linked to ~/.ssh/id_rsa would be written into the target), every file and
  folder this user's and not writable by every user (another user could swap a copy after it was checked).
- What it writes: every file of a touched dist is an absolute, normal path inside the target's environment: its
  prefix, the base installation a venv reads (a --system-site-packages venv's dists), and the user base of an
  interpreter that is no venv (a dist in the user site). The edited files (an env file, a pin file) may lie anywhere:
  the first two rules are what trusts them.
Each refusal is one line, exit 4 (JournalError), and nothing was done from the journal.
"""

from __future__ import annotations

import os
import posixpath
import stat

from sparkdoctor.fix.interface import JournalError
from sparkdoctor.fix.inventory import Inventory
from sparkdoctor.fix.journal import Journal, journals_dir


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


def refuse_stray_paths(journal: Journal, inventory: Inventory, label: str) -> None:
    """One line when a file of a touched dist that the journal names lies outside the target's environment."""
    roots = [inventory.prefix, *([inventory.base_prefix] if inventory.is_venv else [inventory.user_base])]
    roots = [posixpath.normpath(r) for r in roots if r]
    for rows in journal.data["dist_files"].values():
        for row in rows:
            path = row["path"]
            inside = posixpath.isabs(path) and posixpath.normpath(path) == path and any(
                path.startswith(r.rstrip("/") + "/") for r in roots)
            if not inside:
                raise JournalError(f"journal {journal.id} names {path}, outside the target {label} ({', '.join(roots)}): "
                                   "a rollback writes only inside the environment it restores; nothing was changed")
