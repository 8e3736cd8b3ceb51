"""This machine's login names and home folders as the password database has them.

HOME and USER may name another place and name than the account that runs sparkdoctor (sudo, CI, a container
with HOME=/tmp/...): the account's own entry, and SUDO_USER's, say who is really behind a path such as
/srv/alice/venv. Each name is learned as a user name, as the basename of $HOME already is.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable


def local_names() -> list[str]:
    """The login name and home folder name of this process's account and of SUDO_USER (when set); a home that is
    not there (nobody's /nonexistent) names no one."""
    sudo_user = os.environ.get("SUDO_USER", "").strip()
    names = [sudo_user] if sudo_user else []
    entries = [_entry(lambda: pwd.getpwuid(os.getuid()))]
    if sudo_user:
        entries.append(_entry(lambda: pwd.getpwnam(sudo_user)))
    for entry in entries:
        if entry is not None:
            names.append(entry.pw_name)
            if os.path.isdir(entry.pw_dir):
                names.append(os.path.basename(entry.pw_dir.rstrip("/")))
    return names


def _entry(find: Callable[[], pwd.struct_passwd]) -> pwd.struct_passwd | None:
    """A password database entry; None when there is none (a uid a container gave no name)."""
    try:
        return find()
    except (KeyError, OSError):
        return None
