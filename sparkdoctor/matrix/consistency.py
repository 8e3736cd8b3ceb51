"""What `matrix validate` checks across entries, beyond each entry's schema (the loader's job).

- Remedies that are true: a setting an entry's remedy recommends (its `justifies`: `--flag`, `NAME`,
  `NAME=value`) must not be what another entry says breaks (a warn/error entry whose `when.env`,
  `when.env_matches`, `when.serving` flag or `selected_by` fires on that setting) on a box where both
  entries can hold (package ranges overlap, GPU archs and capability values intersect).
- Evidence that brackets something: an entry labelled `checked` needs a version bound whose files table has
  a check that must differ outside it; a bound of "*" or only `fixed = "same"` checks bracket nothing. Given
  the bounds document (`matrix verify --bounds --format json`), a `checked` entry whose every differing check
  still held on a release outside its bound is refused too: the check holds where the claim does not.
- Proofs on the right side: a files table's affected versions inside the entry's bound, its fixed ones outside it.

Each problem is one line naming the entries and the setting or check.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import asdict, dataclass
from statistics import median
from typing import Any, TypedDict

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from sparkdoctor.matrix.file_checks import parse_files_tables
from sparkdoctor.matrix.model import Entry, Matrix
from sparkdoctor.matrix.tracking import bounds_of
from sparkdoctor.matrix.versions import spec, version_in
from sparkdoctor.patterns import budget, search

BREAKING = ("warn", "error")


def _candidates(specs: list[SpecifierSet]) -> list[Version]:
    """Versions that stand for every interval the specifiers can cut: each bound, just above it, and 0."""
    out = [Version("0")]
    for specifier in specs:
        for s in specifier:
            try:
                v = Version(s.version.rstrip(".*").rstrip("."))
            except InvalidVersion:
                continue
            out += [v, Version(".".join(map(str, (*v.release, 0, 0, 1))))]
    return out


def ranges_overlap(a: str, b: str) -> bool:
    """Can one version satisfy both specifiers? (An unreadable one counts as overlapping.)"""
    try:
        sa, sb = spec(a), spec(b)
    except InvalidSpecifier:
        return True
    return any(v in sa and v in sb for v in _candidates([sa, sb]))


def _as_set(value: object) -> set[str]:
    return {str(x) for x in value} if isinstance(value, list) else {str(value)}


def can_hold_together(a: Entry, b: Entry) -> bool:
    """Whether one box can meet both entries' package ranges, GPU archs and capability values."""
    for table in ("packages", "constraints"):
        pa, pb = a.when.get(table) or {}, b.when.get(table) or {}
        if any(not ranges_overlap(str(pa[name]), str(pb[name])) for name in set(pa) & set(pb)):
            return False
    archs_a, archs_b = a.when.get("gpu_arch"), b.when.get("gpu_arch")
    if archs_a and archs_b and not _as_set(archs_a) & _as_set(archs_b):
        return False
    ca, cb = a.when.get("capabilities") or {}, b.when.get("capabilities") or {}
    if any(not _as_set(ca[key]) & _as_set(cb[key]) for key in set(ca) & set(cb)):
        return False
    not_a = set(a.when.get("not_installed") or [])
    not_b = set(b.when.get("not_installed") or [])
    return not (not_a & set(b.when.get("packages") or {}) or not_b & set(a.when.get("packages") or {}))


def fires_on(entry: Entry, setting: str) -> str | None:
    """Which of `entry`'s conditions a setting meets (None: none): the env rule, the serving flag, selected_by."""
    if setting in entry.selected_by or (setting.partition("=")[0] in entry.selected_by):
        return f"selected_by {setting}"
    if setting.startswith("--"):
        return f"when.serving {setting} set" if (entry.when.get("serving") or {}).get(setting) is True else None
    name, eq, value = setting.partition("=")
    rule = (entry.when.get("env") or {}).get(name)
    if rule is True:
        return f"when.env {name} set"
    if eq and isinstance(rule, (str, list)) and value in _as_set(rule):
        return f"when.env {name} = {value}"
    pattern = (entry.when.get("env_matches") or {}).get(name)
    if eq and isinstance(pattern, str) and search(pattern, value):
        return f"when.env_matches {name} /{pattern}/"
    return None


def _judges_reading(entry: Entry, setting: str) -> bool:
    """An entry about whether the installed release reads the variable at all (capability vllm.env.NAME):
    it says the setting is ignored or deprecated there and what replaces it, not that it breaks, so it
    does not contradict a remedy written for the releases that read it."""
    name = setting.partition("=")[0]
    return not setting.startswith("--") and f"vllm.env.{name}" in (entry.when.get("capabilities") or {})


MAX_CONFLICTS = 100  # remedy conflicts listed; past them, one line says there are more


def remedy_conflicts(matrix: Matrix) -> list[str]:
    """One line per (remedy setting, entry that says it breaks) on boxes where both hold. Every pair is tried, so the
    patterns share one time budget (10 entries of `(x|x)+y` took 22 s of CPU, one 0.25 s timeout per pair)."""
    with budget():
        return _remedy_conflicts([e for e in matrix.entries if not e.withdrawn])


def _remedy_conflicts(live: list[Entry]) -> list[str]:
    """Each remedy held against the breaking entries that name its flag or variable (fires_on is None for the others):
    every pair of 4,500 entries took 12.5 s of CPU."""
    breaking = [b for b in live if b.severity in BREAKING]
    naming: dict[str, list[int]] = {}
    for index, b in enumerate(breaking):
        for key in _names(b):
            naming.setdefault(key, []).append(index)
    out: list[str] = []
    for a in live:
        named = sorted({i for setting in a.justifies for key in {setting, setting.partition("=")[0]} for i in naming.get(key, [])})
        for b in (breaking[i] for i in named):
            if a is b:
                continue
            for setting in a.justifies:
                if _judges_reading(b, setting):
                    continue
                why = fires_on(b, setting)
                if why and can_hold_together(a, b):
                    if len(out) == MAX_CONFLICTS:  # 4,500 entries that all conflict: 2.9 million lines, 1.9 GB
                        return [*out, f"... and more: stopped after {MAX_CONFLICTS} remedies that another entry says break"]
                    out.append(f"{a.file}: entry {a.id}: its remedy recommends {setting}, which entry {b.id} ({b.severity}) says "
                               f"breaks on the same boxes ({why}); narrow {a.id}'s range or change its remedy")
    return out


def _names(entry: Entry) -> set[str]:
    """The flags and variables an entry's conditions name: the settings fires_on can meet."""
    names = set(entry.selected_by)
    for table in ("serving", "env", "env_matches"):
        value = entry.when.get(table)
        if isinstance(value, dict):
            names |= set(value)
    return names


def unbracketed_checked(matrix: Matrix) -> list[str]:
    """`checked` entries whose files tables bracket no bound (no bound, only "*", or no check that differs)."""
    out = []
    for e in matrix.entries:
        if e.withdrawn or e.evidence != "checked" or not e.files:
            continue
        tables = parse_files_tables(e.files, e.id)
        bounded = bounds_of(e) or bounds_of(e, "constraints")
        outside = any(t.fixed and any(c.fixed == "differs" for c in t.checks) for t in tables)
        if not bounded and not outside and not e.verify:
            out.append(f"{e.file}: entry {e.id}: evidence is \"checked\" but it bounds no version and names no release where its "
                       "checks must fail, so they hold on every release and bracket nothing; make it \"reported\" (or bound it)")
        elif not any(c.fixed == "differs" for t in tables for c in t.checks):
            out.append(f"{e.file}: entry {e.id}: evidence is \"checked\" but every file check is fixed = \"same\": nothing tells "
                       "a release outside the bound apart")
    return out


def misplaced_versions(entry: Entry, family: Callable[[str], set[str]]) -> list[str]:
    """A files table's versions on the wrong side of the entry's own bound on that package (or its lockstep family):
    an affected version outside it, a fixed one inside it. Checks that hold there prove the opposite of the claim."""
    if not entry.files or entry.withdrawn:
        return []
    bounds = [*bounds_of(entry).items(), *bounds_of(entry, "constraints").items()]
    out = []
    for table in parse_files_tables(entry.files, entry.id):
        for package, bound in ((p, b) for p, b in bounds if table.package in family(p)):
            out += [f"files.affected {v} is outside the entry's bound {package} {bound}" for v in table.affected if version_in(v, bound) is False]
            out += [f"files.fixed {v} is inside the entry's bound {package} {bound}" for v in table.fixed if version_in(v, bound) is True]
    return out


def misplaced_proofs(matrix: Matrix) -> list[str]:
    return [f"{e.file}: entry {e.id}: {why}: its file checks would prove another range than its bound"
            for e in matrix.entries for why in misplaced_versions(e, matrix.tracking.family)]


def bounds_doc_problem(doc: dict[str, object]) -> str | None:
    """Where a bounds document is not of the shape held_outside reads (None when it is): each of `bounds` an object,
    its `runs` objects, their `checks` objects whose `check` is a string."""
    bounds = doc.get("bounds", [])
    if not isinstance(bounds, list):
        return "field 'bounds' must be a list"
    for i, bound in enumerate(bounds):
        runs = bound.get("runs", []) if isinstance(bound, dict) else None
        if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
            return f"field 'bounds[{i}]' must be an object whose 'runs' is a list of objects"
        for j, run in enumerate(runs):
            checks = run.get("checks", [])
            if not isinstance(checks, list) or not all(isinstance(c, dict) and isinstance(c.get("check", ""), str) for c in checks):
                return f"field 'bounds[{i}].runs[{j}].checks' must be a list of objects whose 'check' is a string"
    return None


def held_outside(matrix: Matrix, bounds_doc: dict[str, Any]) -> list[str]:
    """From a bounds document: `checked` entries whose differing checks all held on a release outside the bound."""
    out = []
    for bound in bounds_doc.get("bounds") or []:
        entry = matrix.get(str(bound.get("id")))
        if entry is None or entry.evidence != "checked" or not entry.files:
            continue
        differs = {c.label for t in parse_files_tables(entry.files, entry.id) for c in t.checks if c.fixed == "differs"}
        for run in bound.get("runs") or []:
            if run.get("role") != "fixed" or run.get("error"):
                continue
            judged = [c for c in run.get("checks") or [] if c.get("check") in differs]
            if judged and all(c.get("holds") for c in judged):
                out.append(f"{entry.file}: entry {entry.id}: its checks for {bound.get('package')} {bound.get('spec')} all hold on "
                           f"{run.get('version')}, outside the bound: they bracket nothing; make it \"reported\" or check the behaviour")
                break
    return out


def problems(matrix: Matrix, bounds_doc: dict[str, Any] | None = None) -> tuple[list[str], str]:
    """The problems across entries, and the line that says more were found than listed ("" when all are): that line
    is no problem of its own, so the count says 100, not 101."""
    conflicts = remedy_conflicts(matrix)
    unlisted = conflicts.pop() if len(conflicts) > MAX_CONFLICTS else ""
    return [*conflicts, *unbracketed_checked(matrix), *misplaced_proofs(matrix), *(held_outside(matrix, bounds_doc) if bounds_doc else [])], unlisted


class ReportDelay(TypedDict):
    entries: int
    median_days: float | None
    within_7_days: int


def report_delay(matrix: Matrix) -> ReportDelay:
    """Days from a breakage's first public report to its entry (`reported`, `added`): how many entries say both,
    the median and how many got in within a week."""
    days = sorted((dt.date.fromisoformat(e.added) - dt.date.fromisoformat(e.reported)).days
                  for e in matrix.entries if e.reported and e.added and not e.withdrawn)
    return {"entries": len(days), "median_days": median(days) if days else None, "within_7_days": sum(1 for d in days if d <= 7)}


@dataclass
class Validation:
    """`matrix validate`'s document: what the matrix holds, and the problems across its entries."""

    entries: int
    stacks: int
    files: int
    evidence: dict[str, int]
    matrix: str
    problems: list[str]
    report_delay: ReportDelay
    unlisted: str = ""  # "... and more: stopped after 100 ...": problems found past those listed, "" when none

    def to_json(self) -> dict[str, object]:
        return {"valid": not self.problems, **asdict(self)}
