"""Run by the TARGET's interpreter: `python -B target_pip.py ARGS...` is `python -m pip ARGS...`.

A script rather than `-m pip` so that pip runs through the Target protocol (run_script) like every
other thing sparkdoctor runs in a target: a container target gets pip for free.
"""

import runpy
import sys

if __name__ == "__main__":
    sys.argv = ["pip", *sys.argv[1:]]
    runpy.run_module("pip", run_name="__main__", alter_sys=True)
