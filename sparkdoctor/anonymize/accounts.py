"""This machine's login names and home folders as the password database has them.

HOME and USER may name another place and name than the account that runs sparkdoctor (sudo, CI, a container
with HOME=/tmp/...): the account's own entry, and SUDO_USER's, say who is really behind a path such as
/srv/alice/venv. Each name is learned as a user name, as the basename of $HOME already is.
"""

from __future__ import annotations

import os
import pwd


def local_names() -> list[str]:
    """The login name and home folder name of this process's account and of SUDO_USER (when set); a home that is
    not there (nobody's /nonexistent) names no one."""
    sudo_user = os.environ.get("SUDO_USER", "").strip()
    names = [sudo_user] if sudo_user else []
    keys: list[int | str] = [os.getuid(), sudo_user] if sudo_user else [os.getuid()]
    for key in keys:
        try:
            entry = pwd.getpwuid(key) if isinstance(key, int) else pwd.getpwnam(key)
        except (KeyError, OSError):  # no entry (a uid a container gave no name)
            continue
        names.append(entry.pw_name)
        if os.path.isdir(entry.pw_dir):
            names.append(os.path.basename(entry.pw_dir.rstrip("/")))
    return names
