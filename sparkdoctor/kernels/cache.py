"""The kernel result cache under <cache>/kernels/: one JSON record (and the cubin, for a later GPU
run) per job key. An unreadable or foreign entry is recomputed, and so is a compiled one whose cubin
is not the one written with it; a read-only folder costs speed, never a result. What goes into a key
is decided by the callers (assemble.job_key, the GPU run)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from sparkdoctor.files import write_cache_entry
from sparkdoctor.inputs import read_bytes
from sparkdoctor.kernels.assemble import CACHE_VERSION, Job, job_key, new_record
from sparkdoctor.kernels.cubin import MAX_CUBIN_BYTES

MAX_ENTRY_BYTES = 1 << 20  # an entry is a few KiB: its ptxas messages are cut to MAX_MESSAGE
JOB_FIELDS = frozenset({"ptxas", "ptxas_version", "ptxas_source", "used_by", "arch", "purpose", "setting"})  # new_record's


class Cache:
    def __init__(self, root: Path | None, read: bool) -> None:
        self.root, self.read = root, read

    def get(self, key: str, want_cubin: bool = False) -> tuple[dict[str, object], bytes | None] | None:
        """(record, cubin) of an entry; with want_cubin, a compiled entry counts only with the very cubin its
        record was written with (its sha256 is in the entry): a cubin gone, cut short or swapped is a miss."""
        if self.root is None or not self.read:
            return None
        try:
            # inputs.read_bytes: a FIFO, a device or a huge file in the folder is a miss, never a wait or a flood
            data = json.loads(read_bytes(self.root / f"{key}.json", MAX_ENTRY_BYTES).decode("utf-8"))
            compiled = want_cubin and data.get("record", {}).get("compiled")
            cubin = read_bytes(self.root / f"{key}.cubin", MAX_CUBIN_BYTES) if compiled else None
        except (OSError, ValueError, AttributeError):
            return None  # missing or corrupt: recompute
        if not isinstance(data, dict) or data.get("key") != key or data.get("v") != CACHE_VERSION or not isinstance(data.get("record"), dict):
            return None
        if cubin is not None and hashlib.sha256(cubin).hexdigest() != data.get("cubin_sha256"):
            return None
        return data["record"], cubin

    def put(self, key: str, record: Mapping[str, object], cubin: bytes | None = None) -> None:
        """A failed write (a read-only folder, a full disk) costs speed, never a result: no half entry is left."""
        if self.root is None:
            return
        if cubin is not None and not write_cache_entry(self.root / f"{key}.cubin", cubin):
            return
        body = {"v": CACHE_VERSION, "key": key, "record": {k: v for k, v in record.items() if k != "cached"},
                **({"cubin_sha256": hashlib.sha256(cubin).hexdigest()} if cubin is not None else {})}
        write_cache_entry(self.root / f"{key}.json", json.dumps(body).encode())

    def lookup(self, jobs: list[Job]) -> list[Job]:
        """Key each job and give it a fresh record, filled from the cache where it answers; the jobs it does not."""
        pending = []
        for job in jobs:
            job.key, job.record = job_key(job), new_record(job)
            hit = self.get(job.key, want_cubin=True)
            if hit is None:
                pending.append(job)
            else:  # what the job is (its ptxas, arch, purpose) stays the job's own: an entry says only what happened
                job.record.update({k: v for k, v in hit[0].items() if k not in JOB_FIELDS}, cached=True)
                job.cubin = hit[1]
        return pending

    def store(self, jobs: list[Job]) -> None:
        for job in jobs:
            if job.cacheable:
                self.put(job.key, job.record, job.cubin)
