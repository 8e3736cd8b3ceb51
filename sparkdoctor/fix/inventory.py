"""What the target has: every distribution, the files its RECORD lists, where it came from, and
whether the target is a venv, has pip and can be written.

Read by target_dists.py under the target's own interpreter (through the Target protocol), so the
sparkdoctor process never imports what it changes. Also: which dists count as "not from the
registry" (a local version, a direct_url.json), the hashes of files (what a rollback is judged by).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from sparkdoctor.errors import TargetUnprobeable
from sparkdoctor.fix.interface import FixError
from sparkdoctor.targets.files import FileError, FileTransport, hashes
from sparkdoctor.targets.local import Target, TargetError, parse_json_probe
from sparkdoctor.unsettled import local_key

SCRIPT = Path(__file__).with_name("target_dists.py")
TIMEOUT = 60.0


@dataclass
class Dist:
    name: str
    version: str
    location: str
    installer: str | None = None
    direct_url: dict[str, Any] | None = None
    requires: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    mismatched: list[dict[str, str]] | None = None
    shadows: list[str] = field(default_factory=list)  # other folders on sys.path with a copy of it (a user site's over the system's)
    no_record: bool = False  # a .dist-info with no RECORD rows: pip cannot uninstall it (missing) or removes none of it (empty)
    outside_env: bool = False  # a venv's copy outside the venv, ahead of site-packages on sys.path (PYTHONPATH)

    @property
    def key(self) -> str:
        return canonicalize_name(self.name)

    def source(self) -> str:
        """registry, or what else it came from (local wheel, vcs, editable, a vendor build, conda)."""
        if (self.installer or "").strip().lower() == "conda":  # conda-meta/ keeps conda's own record of it
            return "conda"
        d = self.direct_url
        if d:
            if (d.get("dir_info") or {}).get("editable"):
                return "editable " + str(d.get("url", ""))
            if d.get("vcs_info"):
                return "vcs " + str(d.get("url", ""))
            return "direct " + str(d.get("url", ""))
        try:
            if Version(self.version).local:
                return f"local build (+{Version(self.version).local})"
        except InvalidVersion:
            return "unparsable version"
        return "registry"

    def not_restorable(self, purelib: str) -> str | None:
        """Why a rollback could not put this dist back once the installer replaced it (no flag says yes), or None."""
        if purelib in self.shadows:  # a user site's copy, imported, over the one pip writes to
            return (f"{self.name} is installed twice: the copy imported is in {self.location}, another in {purelib}, where pip "
                    "writes; a rollback could put back only the first: remove one copy first")
        if self.outside_env:  # pip leaves it ("outside environment"); its install goes behind it, never imported
            return (f"{self.name} is imported from {self.location}, outside the venv and ahead of {purelib} on sys.path "
                    "(PYTHONPATH): pip would install behind that copy and leave it imported; change it there (`pip "
                    "install --target`) or drop it from PYTHONPATH first")
        if self.no_record:  # pip stops ("Cannot uninstall ... RECORD file not found"), and so would the rollback
            return (f"{self.name} {self.version} has no RECORD rows (its .dist-info's RECORD is missing or empty): pip cannot "
                    "remove its files, and a rollback could not put them back; write it again first (pip's own hint, --force-reinstall, "
                    f"stops the same way): pip install --ignore-installed --no-deps {shlex.quote(f'{self.name}=={self.version}')}")
        if (self.direct_url or {}).get("egg_link"):  # the .egg-link and the easy-install.pth line are in no RECORD
            return (f"{self.name} {self.version} is a `setup.py develop` checkout ({self.location}): a rollback could not put "
                    f"its .egg-link back; reinstall it with `pip install -e {shlex.quote(str(self.location))}` first")
        return None

    def from_registry(self) -> bool:
        return self.source() == "registry"

    def paths(self) -> list[Path]:
        return [Path(os.path.normpath(os.path.join(self.location, rel))) for rel in self.files]

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "version": self.version, "source": self.source(), "installer": self.installer}


@dataclass
class Inventory:
    python: str
    is_venv: bool
    has_pip: bool
    writable: bool
    purelib: str
    version: str
    dists: dict[str, Dist]
    read_only: bool = False  # purelib is on a read-only file system (a container's ro mount, an image layer)
    externally_managed: bool = False  # PEP 668: the OS marked this interpreter, and pip refuses to change it
    prefix: str = ""  # sys.prefix, sys.base_prefix and the user base: where a rollback may write (fix/journal_trust.py)
    base_prefix: str = ""
    user_base: str = ""

    def get(self, name: str) -> Dist | None:
        return self.dists.get(canonicalize_name(name))

    def package_set(self) -> dict[str, str]:
        """name -> version: what `pip freeze --all` says, in a form that compares."""
        return {k: d.version for k, d in sorted(self.dists.items())}


def read(target: Target, hash_names: list[str] | tuple[str, ...] = (), before_changes: bool = False) -> Inventory:
    """What the target has. A probe that fails is a FixError (5: an apply failed) while an apply or a rollback runs;
    `before_changes` (the plan, a rollback before its first step): the target could not be probed (3), nothing was
    changed."""
    args = [a for n in hash_names for a in ("--hash", n)]
    try:
        data = parse_json_probe(target, SCRIPT, target.run_script(SCRIPT, args, TIMEOUT))
        if odd := [p for p in data.get("odd_links") or [] if isinstance(p, str)]:  # pip would wait on it in every run
            raise TargetError(f"{odd[0]} is no regular file (a FIFO, a device or a folder): pip opens every .egg-link "
                              "in that folder and would wait on it; remove it first")
    except TargetError as exc:
        if before_changes:
            raise TargetUnprobeable(f"{exc}; nothing was changed") from None
        raise FixError(str(exc)) from None
    dists: dict[str, Dist] = {}
    for key, raw in (data.get("dists") or {}).items():
        if not isinstance(raw, dict) or "error" in raw:
            continue
        dists[canonicalize_name(key)] = Dist(
            name=raw["name"], version=raw["version"], location=raw.get("location") or "",
            installer=raw.get("installer"), direct_url=raw.get("direct_url"), requires=raw.get("requires") or [],
            files=raw.get("files") or [], mismatched=raw.get("mismatched"), shadows=raw.get("shadows") or [],
            outside_env=raw.get("outside_env") is True, no_record=raw.get("no_record") is True,
        )
    return Inventory(
        python=str(data.get("python")), is_venv=bool(data.get("is_venv")),
        has_pip=bool(data.get("has_pip")), writable=bool(data.get("writable")), purelib=str(data.get("purelib")),
        version=str(data.get("version")), dists=dists, read_only=bool(data.get("read_only")),
        externally_managed=bool(data.get("externally_managed")), prefix=str(data.get("prefix") or ""),
        base_prefix=str(data.get("base_prefix") or ""), user_base=str(data.get("userbase") or ""),
    )


def file_hashes(files: FileTransport, inv: Inventory, names: set[str]) -> dict[str, str | None]:
    """path -> sha256 (None: missing) of every file of the named dists, read in the target in one
    call: what 'byte for byte' is judged by."""
    paths: list[str] = []
    for name in sorted(names):
        dist = inv.get(name)
        if dist is None:
            continue
        paths += [str(p) for p in dist.paths() if p.suffix != ".pyc" and "__pycache__" not in p.parts]
    try:
        return hashes(files, list(dict.fromkeys(paths)))
    except FileError as exc:
        raise FixError(str(exc)) from None


def target_record(target: Target, inventory: Inventory) -> dict[str, object]:
    """What a journal says about its target: enough to find it again and to refuse another one."""
    desc = target.describe()
    record: dict[str, object] = {"kind": desc.get("kind", "python"), "python": inventory.python}
    if record["kind"] == "container":
        info = getattr(target, "info", None) or {}
        record.update(container=desc.get("container"), engine=desc.get("engine"),
                      container_id=info.get("id"), image_id=info.get("image_id"))
    return record


def target_label(record: Mapping[str, object]) -> str:
    """'/opt/venv/bin/python' or 'container vllm_node: /opt/venv/bin/python'."""
    if record.get("kind") == "container":
        return f"container {record.get('container')}: {record.get('python')}"
    return str(record.get("python"))


def lock_of(target: Target, record: Mapping[str, object]) -> tuple[str, str]:
    """The key and label of the target's lock (journal.target_lock). A container's is the container itself, by the
    id its runtime reports: `fix --yes` takes it before its probe, from the interpreter as named (`python`, found
    on the container's PATH), the apply and a rollback from the interpreter the probe reported (/opt/venv/bin/python),
    and keyed by the interpreter these were two lock files, so a rollback running was not met until the plan was made.
    Not by a name: an apply that named the container by its id recorded the id, and `fix --prune` (which has only the
    record) keyed another lock than the apply's, by the runtime's name. A local target's is its target_key (a venv's
    folder, however its interpreter is named)."""
    info = getattr(target, "info", None) or {}
    if record.get("kind") != "container":
        return recorded_lock(record)
    return recorded_lock({**record, "container_id": info.get("id") or record.get("container_id"),
                          "container": info.get("name") or record.get("container")})


def recorded_lock(record: Mapping[str, object]) -> tuple[str, str]:
    """lock_of from a journal's record alone (`fix --prune`): a container by the id it recorded (a journal written
    before the id was recorded: by the name it recorded), labelled by its name."""
    if record.get("kind") == "container":
        name = str(record.get("container"))
        return f"container:{record.get('container_id') or name}", f"container {name}"
    return target_key(record), target_label(record)


def target_key(record: Mapping[str, object]) -> str:
    """One key per target (its lock, its unfinished journals): a container's paths are not this machine's."""
    if record.get("kind") == "container":
        return f"container:{record.get('container')}:{record.get('python')}"

    return local_key(str(record.get("python", "")))
