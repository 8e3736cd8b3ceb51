"""The sweep never signals a process by a record written before a reboot.

A record names the server's processes by pid and start time (clock ticks since boot). After a reboot that pair can
be an unrelated process (early boot starts the same services at the same pids and ticks), and the sweep stopped it
as a leftover server. A local record whose owner's boot id is not this boot's is now dropped without a signal."""

from __future__ import annotations

import json
import subprocess

from sparkdoctor.serve import registry
from sparkdoctor.serve.supervisor import start_time
from tests.serve.test_supervisor import wait_for


def test_a_record_of_another_boot_is_dropped_without_signalling_its_pids(tmp_path):
    folder = tmp_path / "servers"
    folder.mkdir()
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)  # an unrelated process of this boot
    try:
        wait_for(lambda: start_time(other.pid) is not None, what="sleep started")
        real = start_time(other.pid)
        ipc = tmp_path / "sd-ipc-old"
        ipc.mkdir()
        doc = {"record_version": 1, "kind": "local", "token": "t0k", "pgid": other.pid,
               "owner": {"pid": 2**22 + 7, "start": "1", "boot": "a-boot-before-this-one"},
               "supervisor": {"pid": other.pid, "start": real}, "server": {"pid": other.pid, "start": real},
               "cleanup": [["rm", "-rf", "--", str(ipc)]]}
        (folder / "old.json").write_text(json.dumps(doc))
        assert registry.sweep(folder, grace=1) == []
        assert other.poll() is None, "a process of this boot was stopped by a record of another"
        assert not (folder / "old.json").exists() and not ipc.exists()
    finally:
        other.kill()
        other.wait()
