"""Scratch folders named by their owner's pid; standard library only (the host imports it too).

A process ended by SIGKILL (Ctrl-C on `check`, a deadline, the OOM killer) never runs its `finally`, so its
scratch folder in the temp dir outlives it. scratch() first removes the folders of owners that are gone, never
one of a live process, then makes this process's own.
"""

import glob
import os
import shutil
import tempfile


def scratch(prefix):
    """A new folder `<tmp>/<prefix><pid>-<random>`; those under the same prefix whose pid is gone are removed."""
    for old in glob.glob(os.path.join(tempfile.gettempdir(), prefix + "*-*")):
        pid = os.path.basename(old)[len(prefix):].split("-")[0]
        if pid.isdigit() and os.path.isdir(old) and not os.path.islink(old) and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return tempfile.mkdtemp(prefix="%s%d-" % (prefix, os.getpid()))


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        pass
    return True
