"""Put a target back as one journal recorded it: the packages (once, however many package steps ask
for it) and each edited file. Verify BEFORE destroying: prepare() proves that the journal can
restore the packages (every saved wheel has its recorded size and sha256, and the installer's
offline dry run from the journal's wheels alone resolves the set), else that the journal's byte
copies of the dists' files are intact; if neither, nothing is touched and the reason is one line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sparkdoctor.fix import inventory as inv_mod
from sparkdoctor.fix import journal as jr
from sparkdoctor.fix import outside as outside_mod
from sparkdoctor.fix.interface import FixError, Installer
from sparkdoctor.names import canonicalize_name
from sparkdoctor.targets.files import FileTransport, hashes
from sparkdoctor.targets.local import Target

WHEELS, COPIES = "wheels", "copies"


class Restorer:
    def __init__(self, target: Target, journal: jr.Journal, installer: Installer, sides: dict[str, FileTransport],
                 boundary: Callable[[str], None]):
        self.target, self.journal, self.installer, self.sides, self.boundary = target, journal, installer, sides, boundary
        self.data = journal.data
        self.mode: str | None = None
        self.problems: list[str] | None = None
        self.packages_restored = False
        self.notes: list[str] = []
        self.outside_since: list[str] = []  # files outside the plan changed since a finished apply: left as they are
        # `fix --rollback` (pin_writes): the roots the dists' files are written under and where each path lands, as
        # checked before anything changed; None: written as their paths say (the apply's own rollback)
        self.contained: tuple[list[str], dict[str, str]] | None = None

    # ---- verify before destroying ---------------------------------------------------------------------
    def _wheels(self) -> dict[str, str]:
        return {n: w for n, w in self.data["wheels"].items() if w and n in self.data["touched_before"]}

    def _wheel_problems(self) -> list[str]:
        folder, recorded = self.journal.path / "wheels", self.data.get("wheel_files") or {}
        out = []
        for _name, fname in sorted(self._wheels().items()):
            path = folder / fname
            if not path.is_file():
                out.append(f"saved wheel {fname} is missing")
                continue
            want = recorded.get(fname)
            if want is None:
                continue  # a version-1 journal: no size or hash recorded; the dry run below still runs
            if path.stat().st_size != want["size"]:
                out.append(f"saved wheel {fname} is {path.stat().st_size} bytes, the journal recorded {want['size']}")
            elif jr.sha256_file(path) != want["sha256"]:
                out.append(f"saved wheel {fname} does not have the sha256 the journal recorded")
        if out:
            return out
        reqs = [f"{n}=={self.data['touched_before'][n]}" for n in sorted(self._wheels())]
        if reqs:
            try:
                res = self.installer.dry_run(reqs, no_deps=True, ignore_installed=True, offline_from=str(folder))
            except FixError as exc:
                return [f"an offline install from the journal's wheels would fail: {exc}"]
            wrong = [r for r in reqs if res.installs.get(r.split("==")[0]) != r.split("==")[1]]
            if wrong:
                return [f"an offline install from the journal's wheels would not give {', '.join(wrong)}"]
        return []

    def _copy_problems(self, names: list[str]) -> list[str]:
        """The journal's byte copies of these dists' files, against the sha256 recorded before the apply."""
        before = self.data["hashes_before"]
        out = []
        for name in names:
            for row in self.data["dist_files"].get(name, []):
                if not row.get("copy"):
                    continue
                got = jr.sha256_file(self.journal.path / row["copy"])
                if got is None:
                    out.append(f"the copy of {row['path']} is missing from the journal")
                elif row["path"] in before and before[row["path"]] not in (None, got):
                    out.append(f"the journal's copy of {row['path']} is not the file it recorded")
        return out

    def _edit_problems(self) -> list[str]:
        out = [f"the journal's copy of {r['path']} is missing or damaged" for r in self.data["files"]
               if r["existed"] and jr.sha256_file(self.journal.path / r["copy"]) != r["sha256"]]
        # An edited file that is neither as it was before the apply nor as the apply left it was changed since, by
        # someone else: restoring the copy would destroy those edits (an HF_TOKEN line added to the env file).
        left = {(st.get("path"), st.get("side", "target")): jr.sha256_bytes(st["new_text"].encode("utf-8"))
                for st in self.data["plan"].get("steps", []) if st.get("op") == "edit" and st.get("new_text") is not None}
        for r in self.data["files"]:
            side = r.get("side", "target")
            if (r["path"], side) in left:
                now = hashes(self.sides[side], [r["path"]]).get(r["path"])
                if now not in (r["sha256"] if r["existed"] else None, left[(r["path"], side)]):
                    out.append(f"{r['path']} was changed since the apply, not by it: rolling back would lose those "
                               f"changes (save them, put back its copy {self.journal.path / r['copy']} by hand or "
                               "undo them, then roll back)" if r["existed"] else
                               f"{r['path']} was changed since the apply made it: save it aside, then roll back")
        return out

    def prepare(self) -> list[str]:
        """Can this journal restore the target? Sets the mode (wheels, else copies); the problems if not."""
        if self.problems is not None:
            return self.problems
        touched = sorted(self.data["touched_before"])
        with_wheel = sorted(self._wheels())
        problems = self._edit_problems()
        wheel_problems = self._wheel_problems() if with_wheel else []
        if not wheel_problems:
            self.mode = WHEELS
            problems += self._copy_problems([n for n in touched if n not in with_wheel])
        else:
            copy_problems = self._copy_problems(touched)
            if copy_problems:
                problems.append(f"{wheel_problems[0]}, and {copy_problems[0]}: neither can restore {', '.join(touched)}")
            else:
                self.mode = COPIES
                self.notes.append(f"{wheel_problems[0]}: restored from the journal's byte copies of the files instead")
        self.problems = problems
        return problems

    def judge_outside(self) -> None:
        """Before anything changes: the files outside the plan that already differ from the journal's record. After a
        finished apply (which proved that none moved) someone else changed them since: left as they are, and no
        package index is asked for their released wheels, so the rollback runs from the journal alone. After an apply
        that stopped part way they may be its doing: put back from their released wheels, which only the package
        index has; a note says so."""
        before = self.journal.outside()
        if before is None:
            return
        found = outside_mod.moved(self.target, before, [*self.data["plan"].get("touched", []), *self.data["touched_before"]])
        if self.journal.has(jr.APPLIED):
            self.outside_since = found
        elif found:
            self.notes.append(f"{len(found)} file(s) of dists outside the plan differ from the journal (e.g. {found[0]}): "
                              "they are written again from their released wheels, fetched from the package index (the "
                              "journal holds no copy of them)")

    def pin_writes(self, roots: list[str], lands: dict[str, str]) -> None:
        """Where every write of this rollback goes, fixed before anything changes (journal_trust.refuse_stray_paths
        checked it): a dist's file at the path it resolved to, under the target's resolved roots; an edited file at
        the file its path names now, every link followed (the apply wrote through a link the same way). The writes
        then open each folder from the root down and follow no link (fileops.write_under): one planted while the
        rollback runs (after pip's reinstall, before the copies are written) is refused, not written through."""
        lands = dict(lands)
        for side in ("target", "host"):
            paths = [r["path"] for r in self.data["files"] if r.get("side", "target") == side and r["existed"]]
            rows = self.sides[side].info(paths) if paths else {}
            lands.update({f"{side}:{p}": str((rows.get(p) or {}).get("real") or p) for p in paths})
        self.contained = (roots, lands)

    def _write(self, files: FileTransport, items: list[tuple[Path, str, int | None]], side: str | None = None) -> None:
        """import_files, through no link when the writes were pinned (pin_writes): a dist's file (side None) under
        the target's roots, an edited file from the root folder down to the file the check saw."""
        if self.contained is None:
            files.import_files(items)
            return
        roots, lands = self.contained
        key = (lambda p: p) if side is None else (lambda p: f"{side}:{p}")
        files.import_files([(src, lands.get(key(p), p), mode) for src, p, mode in items], roots if side is None else ["/"])

    def _remove(self, files: FileTransport, paths: list[str], side: str | None = None, prune: bool = False) -> None:
        """remove, through no link when the writes were pinned (pin_writes), as _write writes."""
        roots = None if self.contained is None else self.contained[0] if side is None else ["/"]
        files.remove(paths, prune=prune, roots=roots)

    # ---- the packages ---------------------------------------------------------------------------------
    def restore_packages(self) -> None:
        """Every touched dist back as it was (once: a second call finds it done)."""
        if self.packages_restored:
            return
        problems = self.prepare()
        if problems:
            raise FixError(problems[0])
        data, files = self.data, self.sides["target"]
        before_keys = {canonicalize_name(p["name"]) for p in data["packages_before"]}
        now = inv_mod.read(self.target)
        touched = set(data["touched_before"]) | set(data["plan"].get("touched", []))
        # a finished apply added only the dists its plan names (touched); any other new one came later, by someone else
        # (a later `pip install`), and stays: removing it would undo what the fix never did
        added = set() if self.journal.has(jr.APPLIED) else {k for k in now.dists if k not in before_keys}
        remove = sorted({n for n in touched if now.get(n)} | added)
        self.installer.uninstall(remove)
        self.boundary("uninstalled")
        wheels = self._wheels() if self.mode == WHEELS else {}
        if wheels:
            self.installer.install([f"{n}=={data['touched_before'][n]}" for n in sorted(wheels)], no_deps=True,
                                   offline_from=str(self.journal.path / "wheels"))
            self._drop_new_files(sorted(wheels))
        self.boundary("reinstalled")
        rows = {row["path"]: row for dist_rows in data["dist_files"].values() for row in dist_rows if row.get("copy")}
        now_hashes = hashes(files, list(rows))
        self._write(files, [(self.journal.path / r["copy"], p, r.get("mode")) for p, r in rows.items()
                            if now_hashes.get(p) != jr.sha256_file(self.journal.path / r["copy"])])
        self.boundary("dist-files")
        self.packages_restored = True

    def _drop_new_files(self, names: list[str]) -> None:
        """Files the offline reinstall wrote that the original install did not have (REQUESTED, .pyc; a file its RECORD
        lists that was gone before the apply); their folders left empty go too: a dist first installed in the user site
        is reinstalled where pip writes (the system's site-packages) before the journal's copies put it back, and an
        empty dist-info folder left there was a dist with no METADATA to pip and to check."""
        now, gone = inv_mod.read(self.target), {p for p, h in self.data["hashes_before"].items() if h is None}
        extra: list[str] = []
        for name in names:
            old = {r["path"] for r in self.data["dist_files"].get(name, [])} - gone
            dist = now.get(name)
            extra += [str(p) for p in (dist.paths() if dist else []) if str(p) not in old]
        self._remove(self.sides["target"], extra, prune=True)

    # ---- one edited file ------------------------------------------------------------------------------
    def restore_file(self, path: str, side: str) -> None:
        for r in self.data["files"]:
            if r["path"] != path or r.get("side", "target") != side:
                continue
            files = self.sides[side]
            now = hashes(files, [path]).get(path)
            if r["existed"] and now != r["sha256"]:
                self._write(files, [(self.journal.path / r["copy"], path, r.get("mode"))], side)
            elif not r["existed"] and now is not None:
                self._remove(files, [path], side)


def verify_rolled_back(target: Target, journal: jr.Journal, sides: dict[str, FileTransport],
                       installer: Installer | None = None, outside_since: list[str] | None = None) -> dict[str, object]:
    """The package set, the bytes of every touched dist's files and every edited file, and the files
    outside the plan (a changed .pyc compiled again first), against the journal; `outside_since`: files outside the
    plan changed since the finished apply (Restorer.judge_outside), left as they are."""
    data = journal.data
    now = inv_mod.read(target)
    want: dict[str, str] = {canonicalize_name(p["name"]): p["version"] for p in data["packages_before"]}
    got: dict[str, str] = dict(now.package_set())
    differ = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    # A finished apply proved that nothing outside its plan moved: a dist outside the plan that differs now was
    # changed since, by someone else (a later `pip install`). Not the rollback's to undo, nor a failed rollback.
    touched = {canonicalize_name(n) for n in [*data["plan"].get("touched", []), *data["touched_before"]]}
    since = [k for k in differ if k not in touched] if journal.has(jr.APPLIED) else []
    package_diff = [f"{k}: {want.get(k) or '-'} -> {got.get(k) or '-'}" for k in differ if k not in since]
    have = inv_mod.file_hashes(sides["target"], now, set(data["touched_before"]))
    missing = [p for p in data["hashes_before"] if p not in have]
    have.update(hashes(sides["target"], missing))
    file_diff = sorted(p for p, h in data["hashes_before"].items() if have.get(p) != h)
    for side in ("target", "host"):
        edited = [r for r in data["files"] if r.get("side", "target") == side]
        now_edited = hashes(sides[side], [r["path"] for r in edited])
        file_diff += [r["path"] for r in edited if now_edited.get(r["path"]) != (r.get("sha256") if r["existed"] else None)]
    checked_outside, restored = 0, list[str]()
    before_outside = journal.outside()
    left = set(outside_since or [])
    if before_outside is not None:
        if since:  # their files are theirs now: only the files of the dists unchanged since are compared
            kept = {str(p) for key, dist in now.dists.items() if key not in since for p in dist.paths()}
            before_outside = {p: v for p, v in before_outside.items() if p in kept}
            left &= kept
        before_outside = {p: v for p, v in before_outside.items() if p not in left}
        restored, lost = outside_mod.restore(target, before_outside, [*data["plan"].get("touched", []), *since], installer)
        file_diff += [f"{p} (outside the plan)" for p in lost]
        checked_outside = sum(1 for v in before_outside.values() if v is not None)
    return {"packages_differ": package_diff, "files_differ": file_diff, "ok": not package_diff and not file_diff,
            "changed_since": [f"{k}: {want.get(k) or '-'} -> {got.get(k) or '-'}" for k in since],
            "files_changed_since": sorted(left),
            "packages": len(want), "files": len(data["hashes_before"]) + len(data["files"]),
            "outside_files": checked_outside, "outside_restored": restored}
