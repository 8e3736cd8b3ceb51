"""How a test runs the CLI as a user that file permissions bind: root may read and write everything, so when the
suite runs as root the CLI runs as `nobody` (setpriv, util-linux); otherwise as the user running the suite."""

import os
import shutil


def as_bound_user() -> list[str]:
    """The command prefix: [] for an ordinary user, setpriv to `nobody` for root."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) runs the CLI as nobody"
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
