"""The target: the environment sparkdoctor examines and fixes (a local interpreter or venv, or one inside a
running container), how it is chosen from the options, probed early, and how its files are read and written.

    local.py              PythonTarget (a local interpreter or venv), the probe-script helpers
    container.py          ContainerTarget: the same, through `docker|podman exec`
    container_inspect.py  finding the container, its image and its interpreter
    container_reap.py     stopping what an exec left running in the container when it ran out of time
    files.py              FileTransport for a local target (LocalFiles)
    container_files.py    FileTransport for a container target (fileops.py run as a script inside it)
    fileops.py            the file operations themselves, standard library only (Python 3.6+)
    probe.py              the target probe started before the CLI is imported (a warm check's long pole)
    choose.py             check's choice of target from --python / --container / --container-python

    interface.py          the Protocols (Target, FileTransport) and the stage's errors (TargetError, FileError)
"""
