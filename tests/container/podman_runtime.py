"""A real podman for tests (Debian's podman + catatonit for --init), rootful, daemonless, on its own
storage: a `podman` wrapper script that gives every call the session's own --root, --runroot and tmpdir
(vfs storage, file events), so the machine's podman state is never touched and clean-up is one folder.

This machine cannot raise a container's rlimits above its own hard limits, and podman asks for
nofile=1048576 and nproc=4194304 by default ("error setting rlimit type 7: operation not permitted");
the wrapper's containers.conf asks for what the machine allows instead. A real Spark's root needs none
of that. Where podman cannot run a container at all, the reason is the skip reason.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sparkdoctor import proc
from tests import debian
from tests import keeper as keepers
from tests.container.docker_daemon import NoRuntime, skeleton_tar


def _ensure_podman() -> str:
    def find() -> str | None:
        return shutil.which("podman") if os.path.exists("/usr/libexec/podman/catatonit") else None

    found = debian.install(("podman", "catatonit"), find)
    if not found:
        raise NoRuntime("podman (with catatonit, for --init) is not installed and this user cannot apt-get install it")
    return found


@dataclass
class Podman:
    root: Path
    cli: Path  # the wrapper, named `podman` (sparkdoctor tells podman from docker by the name)
    keeper: subprocess.Popen[bytes]  # tests/keeper.py: conmon, the containers and the mounts go however this process ends

    def __call__(self, *args: str, timeout: float = 120) -> proc.ProcResult:
        return proc.run([str(self.cli), *args], timeout=timeout)

    def must(self, *args: str, timeout: float = 120) -> str:
        res = self(*args, timeout=timeout)
        if not res.ok:
            raise RuntimeError(f"podman {' '.join(args)}: {res.describe_failure()}\n{res.stderr[-2000:]}")
        return res.stdout.strip()

    def stop(self) -> None:
        """Remove every container, then let the keeper kill what is left of them, unmount and remove the root."""
        try:
            if self.keeper.poll() is None:
                self("rm", "-af", "-t", "0", timeout=120)
        finally:  # interrupted or not, the keeper goes on once its stdin is closed
            keepers.finish(self.keeper, [str(self.root)])


def start_podman(root: Path) -> Podman:
    binary = _ensure_podman()
    if os.geteuid() != 0:
        raise NoRuntime("these tests run podman rootful; this user is not root")
    root.mkdir(parents=True, exist_ok=True)
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    conf = root / "containers.conf"
    conf.write_text(f'[containers]\ndefault_ulimits = ["nofile={nofile}:{nofile}", "nproc=4096:4096"]\n')
    for sub in ("storage", "run", "tmp", "bin"):
        (root / sub).mkdir(exist_ok=True)
    cli = root / "bin" / "podman"
    cli.write_text(f'#!/bin/sh\nCONTAINERS_CONF="{conf}" exec "{binary}" --root "{root}/storage" --runroot "{root}/run" '
                   f'--storage-driver vfs --events-backend file --tmpdir "{root}/tmp" "$@"\n')
    cli.chmod(0o755)
    podman = Podman(root, cli, keepers.start(root)[0])
    try:
        tar_path = skeleton_tar(root / "skeleton.tar", ("proc", "sys", "dev", "tmp", "etc", "usr", "run", "var", "root"))
        res = podman("import", "--change", "ENV PATH=/usr/local/bin:/usr/bin:/bin", str(tar_path), "sparkdoctor-skeleton:1")
        if res.ok:
            res = podman("run", "--rm", "--init", "--network", "host", "-v", "/usr:/usr:ro", "sparkdoctor-skeleton:1", "true")
        if not res.ok:
            raise NoRuntime(f"podman cannot run a container here: {res.describe_failure()}")
    except BaseException:  # NoRuntime, or Ctrl-C while it started
        podman.stop()
        raise
    return podman
