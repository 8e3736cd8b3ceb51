"""Findings and the Report every renderer draws from.

A Finding is what a matched matrix entry means for this box: what is wrong, the evidence (which facts matched, probe
output), what to do, and where it is written down. The engine adds findings of its own, which no matrix entry has: a
kernel probe that failed for the arch under evaluation while no matched entry explains it (`probe-<probe id>`: the
strongest evidence there is, never under a green PASS because the matrix does not know the failure yet), a `fix` that
did not finish, a broken install (`requires-*`, `files-missing-*`, ...) and a target holding none of the serving stack.
A probe that could not run at all (error or timeout: no ptxas, a compiler that hung) proves nothing either way: the
report and the verdict call it unverified, never PASS.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field

from sparkdoctor.arch import settle
from sparkdoctor.describe import HEADER_PACKAGES, tracked_stack
from sparkdoctor.exitcodes import EXIT_FINDINGS, EXIT_OK, EXIT_UNPROBEABLE
from sparkdoctor.facts import Facts
from sparkdoctor.matrix import (
    EVIDENCE_LEVELS,
    SEVERITIES,
    Entry,
    Evaluation,
    Matrix,
    evaluate_all,
)
from sparkdoctor.matrix.freshness import StackDistance, knowledge, stack_distance
from sparkdoctor.requires import (
    Incomplete,
    NoRecord,
    Unlisted,
    Unmet,
    incomplete_installs,
    record_less_installs,
    unlisted_installs,
    unmet_requirements,
)
from sparkdoctor.text import clip, one_line, shell_word
from sparkdoctor.vocab import Verdict

REPORT_SCHEMA = 1

SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}  # info < warn < error

# Kernel probe statuses (sparkdoctor.kernels, collect/cutedsl.py), by what they say about the toolchain.
# refused counts as a failure: the DSL saying it cannot build the kernel for this arch is as much a
# broken GB10 toolchain as a compile error (the matrix explains the known cases with expect = "refused").
PROBE_FAILED = ("fail", "crash", "refused")
PROBE_UNVERIFIED = ("error", "timeout")  # the probe could not give an answer
PROBE_COMPONENT = {"ptx": "cuda-toolkit", "cutedsl": "nvidia-cutlass-dsl"}
PROBE_FINDING_PREFIX = "probe-"  # engine findings are `probe-<probe id>`; --ignore takes them like any id

# Report.verdict(): what the run concludes, the same word in every renderer and in the JSON.
PASS, UNVERIFIED, FAIL, UNPROBEABLE = Verdict.pass_, Verdict.unverified, Verdict.fail, Verdict.unprobeable


@dataclass
class Finding:
    id: str
    severity: str
    action: str
    title: str
    summary: str
    remedy: str
    evidence: list[str]
    refs: list[str]
    component: str
    fix: str | None = None
    symptoms: list[str] = field(default_factory=list)
    verified_by: dict[str, object] | None = None
    evidence_level: str = "reported"  # how the matrix knows: reproduced | checked | reported

    @classmethod
    def from_evaluation(cls, ev: Evaluation) -> Finding:
        """The entry's words, the lines the evaluation saw as the evidence, the entry's evidence as its level."""
        shared = ("id", "severity", "action", "title", "summary", "remedy", "refs", "component", "fix", "symptoms",
                  "verified_by")
        return cls(**{name: getattr(ev.entry, name) for name in shared}, evidence=ev.evidence, evidence_level=ev.entry.evidence)


@dataclass
class UnverifiedProbe:
    """A kernel probe that could not give an answer (status error / timeout)."""

    probe: str
    status: str
    detail: str


@dataclass
class Report:
    facts: Facts
    evaluations: list[Evaluation]
    findings: list[Finding]
    ignored: list[str]
    fail_on: str
    matrix_files: list[str]
    stacks: list[StackDistance] = field(default_factory=list)  # nearest known-good stack first
    unverified: list[UnverifiedProbe] = field(default_factory=list)
    probe_findings: list[Finding] = field(default_factory=list)  # engine findings, ignored ones included
    knowledge: dict[str, object] = field(default_factory=dict)  # sparkdoctor.matrix.freshness.knowledge: tracked through, newer installs

    @property
    def nearest_stack(self) -> StackDistance | None:
        """The nearest stack this box has any part of (None when it has none of any)."""
        return self.stacks[0] if self.stacks and self.stacks[0].present else None

    @property
    def unknown(self) -> list[Evaluation]:
        return [ev for ev in self.evaluations if ev.outcome == "unknown"]

    def judged(self) -> list[Evaluation]:
        """The entries judged against the Facts: every one but the withdrawn (never evaluated, listed with -v)."""
        return [ev for ev in self.evaluations if ev.outcome != "withdrawn"]

    def counts(self) -> dict[str, int]:
        return {**dict.fromkeys(SEVERITIES, 0), **Counter(f.severity for f in self.findings)}

    def evidence_counts(self) -> dict[str, int]:
        """How many findings rest on each evidence level, strongest first."""
        return {**dict.fromkeys(EVIDENCE_LEVELS, 0), **Counter(f.evidence_level for f in self.findings)}

    def failing(self) -> list[Finding]:
        floor = SEVERITY_RANK[self.fail_on]
        return [f for f in self.findings if SEVERITY_RANK[f.severity] >= floor]

    def probed(self) -> bool:
        """False when nothing about the target's packages could be observed."""
        return self.facts.packages is not None

    def unprobed_why(self) -> str | None:
        """Why the target could not be probed (what each collector could not observe, clipped, control characters
        escaped), or None when it was: one wording for the JSON `errors`, the stderr line and the SARIF notification."""
        if self.probed():
            return None
        return one_line("; ".join(f"{clip(str(e.get('collector')), 40)}: {clip(str(e.get('error')), 300)}"
                                  for e in self.facts.errors if isinstance(e, dict)) or "installed packages unknown")

    def exit_code(self) -> int:
        if not self.probed():
            return EXIT_UNPROBEABLE
        return EXIT_FINDINGS if self.failing() else EXIT_OK

    def verdict(self) -> str:
        """fail / unprobeable / unverified (nothing fails, but a kernel probe could not run: exit 0) / pass."""
        if not self.probed():
            return UNPROBEABLE
        if self.failing():
            return FAIL
        return UNVERIFIED if self.unverified else PASS

    def to_dict(self) -> dict[str, object]:
        """The versioned JSON document (`--format json`)."""
        return {
            "schema": REPORT_SCHEMA,
            "tool": self.facts.tool,
            "fingerprint": self.facts.fingerprint(),
            "fail_on": self.fail_on,
            "exit_code": self.exit_code(),
            "summary": {
                **self.counts(),
                "evaluated": len(self.judged()),  # the console's "N entries checked"
                "withdrawn": len(self.evaluations) - len(self.judged()),
                "unknown": len(self.unknown),
                "ignored": len(self.ignored),
                "unverified": len(self.unverified),
                "evidence": self.evidence_counts(),
                "verdict": self.verdict(),
                "arch": (self.facts.arch or {}).get("value"),
                "arch_source": (self.facts.arch or {}).get("source"),
            },
            "findings": [asdict(f) for f in self.findings],
            "unknown": [{"id": ev.entry.id, "title": ev.entry.title, "missing": ev.unknowns} for ev in self.unknown],
            "unverified": [asdict(u) for u in self.unverified],
            "ignored": self.ignored,
            "stacks": [asdict(s) for s in self.stacks],
            "knowledge": self.knowledge,
            "facts": self.facts.to_dict(),
        }


def probe_evidence(verified_by: Mapping[str, object] | None, facts: Facts) -> str | None:
    """What the probe that proves an entry said on this box, if it ran: the strongest evidence there is."""
    if not verified_by or not facts.kernels:
        return None
    probe = verified_by.get("probe")
    result = facts.kernels.get(probe) if isinstance(probe, str) else None
    if not isinstance(result, dict) or result.get("status") in (None, "skipped"):
        return None
    status, expect = result["status"], verified_by.get("expect")
    verdict = "confirms this entry" if status == expect else f"this entry expects {expect}"
    detail = f": {result['detail']}" if result.get("detail") else ""
    return f"probe {verified_by['probe']} {status}{detail} → {verdict}"


# ---- kernel probes the matrix does not explain ------------------------------------------------------


def probes_for_arch(facts: Facts) -> list[tuple[str, dict[str, object]]]:
    """(id, result) of the kernel probes run for the arch under evaluation (or that do not say)."""
    arch = (facts.arch or {}).get("value")
    return [(probe_id, result) for probe_id, result in sorted((facts.kernels or {}).items())
            if isinstance(result, dict) and result.get("kind") in PROBE_COMPONENT and result.get("arch") in (None, "", arch)]


def explains(entry: Entry, probe_id: str, status: str) -> bool:
    """A matched entry accounts for this probe outcome: it cites the probe expecting exactly this
    status, or its conditions test the probe's status."""
    vb = entry.verified_by or {}
    if vb.get("probe") == probe_id and vb.get("expect") in (None, status):
        return True
    if probe_id in entry.explains_probes and vb.get("expect") == status:
        return True
    kernels = entry.when.get("kernels")
    return isinstance(kernels, dict) and probe_id in kernels


_FAILED_WORDS = {"fail": "failed", "crash": "crashed", "refused": "was refused"}
_PROBE_KIND = {"ptx": "PTX probe (assembled by ptxas)", "cutedsl": "CuTe DSL probe (compiled by the target's nvidia-cutlass-dsl)"}


def probe_finding(probe_id: str, result: Mapping[str, object]) -> Finding:
    status, kind = str(result.get("status")), str(result.get("kind"))
    arch = result.get("arch") or "this arch"
    detail = str(result.get("detail") or "").strip() or "(the probe gave no detail)"
    return Finding(
        id=PROBE_FINDING_PREFIX + probe_id,
        severity="error",
        action="report",
        title=f"kernel probe {probe_id} {_FAILED_WORDS.get(status, status)} and no matrix entry explains it",
        summary=(
            f"The {_PROBE_KIND.get(kind, kind + ' probe')} builds one tiny {arch} kernel with this box's own "
            f"toolchain. It {_FAILED_WORDS.get(status, status)}, and no known problem in the matrix matches "
            "this box and accounts for that, so sparkdoctor cannot say why or what fixes it. Real kernels "
            "that need the same instruction are likely to fail the same way."
        ),
        remedy=(
            "run `sparkdoctor check -v` and report it: sparkdoctor has no known cause or fix for this yet. "
            "Attach `sparkdoctor check --format markdown` (it carries the snapshot); "
            f"`--ignore {PROBE_FINDING_PREFIX + probe_id}` silences it once you know why."
        ),
        evidence=[f"probe {probe_id} {status} for {arch}: {detail}"],
        evidence_level="reproduced",  # a probe failed on this very box
        refs=[],
        component=PROBE_COMPONENT.get(kind, "kernels"),
    )


def check_probes(facts: Facts, matched: list[Evaluation]) -> tuple[list[Finding], list[UnverifiedProbe]]:
    """The engine's own findings (failed probes no matched entry explains) and the unverified probes.

    `matched` includes matches the user ignored: an ignored entry still explains its probe.
    """
    findings, unverified = [], []
    for probe_id, result in probes_for_arch(facts):
        status = str(result.get("status"))
        if status in PROBE_UNVERIFIED:
            unverified.append(UnverifiedProbe(probe_id, status, str(result.get("detail") or "")))
        elif status in PROBE_FAILED and not any(explains(ev.entry, probe_id, status) for ev in matched):
            findings.append(probe_finding(probe_id, result))
    return findings, unverified


FIX_UNFINISHED = "fix-unfinished"


def unfinished_fix_finding(facts: Facts) -> Finding | None:
    """The engine's finding for a `fix` of this target that did not finish (facts.target.fix_unsettled)."""
    message = (facts.target or {}).get("fix_unsettled")
    if not message:
        return None
    if " damaged state file " in message:  # unsettled.message of a mark that cannot be read
        title, remedy = "a sparkdoctor fix of this environment may not have finished", "run `sparkdoctor fix --history`"
        summary = ("The state file a `sparkdoctor fix` apply or rollback keeps while it changes this environment is "
                   "there but damaged: one may have been stopped half-way. What check sees may not be a state anyone chose.")
    elif " is running now " in message:  # unsettled.message of a fix whose process is alive
        title, remedy = "a sparkdoctor fix of this environment is running now", "wait for that fix to end, then check again"
        summary = ("An apply or rollback of `sparkdoctor fix` is changing this environment now: some packages or files "
                   "may be changed and others not yet. What check sees is not a state anyone chose.")
    else:
        command = message.rsplit("`", 2)[-2] if message.count("`") >= 2 else "sparkdoctor fix --rollback"
        title, remedy = ("a sparkdoctor fix of this environment did not finish",
                         f"run `{command}`: it restores what the journal recorded, offline, and verifies it")
        summary = ("An apply or rollback of `sparkdoctor fix` was stopped half-way (killed, out of memory, a power cut): "
                   "some packages or files may be changed and others not. What check sees is not a state anyone chose.")
    return Finding(id=FIX_UNFINISHED, severity="error", action="fix", title=title, summary=summary, remedy=remedy,
                   evidence=[message], refs=[], component="sparkdoctor", evidence_level="reproduced")


REQUIRES_FINDING_PREFIX = "requires-"  # requires-<component>-missing (error), requires-<component>-version (warn)


def requirement_findings(facts: Facts) -> list[Finding]:
    """The engine's findings for components whose Requires-Dist the target does not satisfy (sparkdoctor.requires):
    per component, one error for requirements not installed (it cannot import), one warning for versions outside."""
    groups: dict[tuple[str, bool], list[Unmet]] = {}
    for unmet in unmet_requirements(facts):
        groups.setdefault((unmet.component, unmet.missing), []).append(unmet)
    out = []
    for (component, missing), items in groups.items():
        version = items[0].component_version
        what = "not installed" if missing else "installed at a version outside what it requires"
        title = f"{component} {version}: {len(items)} requirement{'s' if len(items) > 1 else ''} {what}"
        summary = (f"{component} {version}'s METADATA (Requires-Dist) names distributions this environment "
                   + ("does not have: importing it fails (a `pip install --no-deps` or a removed dependency leaves this)."
                      if missing else "has at other versions than it asks for: it may fail to import or misbehave."))
        evidence = [f"{component} {version} requires {u.requirement}; installed: {u.installed or 'none'}" for u in items]
        out.append(Finding(
            id=f"{REQUIRES_FINDING_PREFIX}{component}-{'missing' if missing else 'version'}",
            severity="error" if missing else "warn", action="fix", title=title, summary=summary,
            remedy=(f"install {component} with its dependencies in the target (`python -m pip install {shell_word(f'{component}=={version}')}`, "
                    "without --no-deps); `python -m pip check` there lists the same"),
            evidence=evidence, refs=[], component=component, evidence_level="reproduced"))
    return out


NO_STACK = "no-serving-stack"  # warn: the target holds none of the header's stack, so nothing that serves was judged


def no_stack_finding(facts: Facts) -> Finding | None:
    """The engine's warning for a target whose packages were read and hold none of the header's stack (each one `not
    installed`): a check of the wrong interpreter is never a clean PASS about nothing that serves."""
    if any(desc != "not installed" for _, desc in tracked_stack(facts)):
        return None
    target, names = facts.target or {}, ", ".join(HEADER_PACKAGES)
    python = target.get("python") or "the target interpreter"
    remedy = ("point --container-python at the interpreter in it that serves, or --container at the container that serves"
              if target.get("kind") == "container" else
              "point --python at the venv that serves (e.g. sparkdoctor check --python ~/vllm-venv/bin/python)")
    return Finding(NO_STACK, "warn", "configure", "no serving-stack package is installed in this interpreter",
                   f"None of {names} is installed in {python}, so no matrix entry about the serving stack could match: only "
                   "the host, driver and kernel probes were judged. A check (or a CI gate) of the wrong interpreter, a bare "
                   "venv or sparkdoctor's own, would otherwise read as a clean pass.", remedy,
                   [f"{python}: {names} not installed"], [], "target", evidence_level="reproduced")


MISSING_FILES_PREFIX = "files-missing-"  # files-missing-<distribution>: error when importing it fails, else warn
NO_METADATA_PREFIX = "no-metadata-"  # no-metadata-<distribution>: its package imports, no .dist-info describes it (warn)
NO_RECORD_PREFIX = "no-record-"  # no-record-<distribution>: a .dist-info without RECORD, pip cannot uninstall it (warn)
ENGINE_FINDING_PREFIXES = (PROBE_FINDING_PREFIX, REQUIRES_FINDING_PREFIX, MISSING_FILES_PREFIX, NO_METADATA_PREFIX,
                           NO_RECORD_PREFIX, NO_STACK, FIX_UNFINISHED)  # no matrix entry has them


def install_findings(facts: Facts, named: Collection[str] = ()) -> list[Finding]:
    """The engine's findings for tracked distributions installed in a broken way (sparkdoctor.requires): files their
    RECORD lists are gone, a package that imports with no metadata, a .dist-info with no RECORD (also of a distribution
    in `named`: the matrix names it)."""
    found: list[tuple[str, str, Incomplete | Unlisted | NoRecord]] = [
        (f"{MISSING_FILES_PREFIX}{gone.name}", "error" if gone.roots or gone.import_failure else "warn", gone) for gone in incomplete_installs(facts)]
    found += [(f"{NO_METADATA_PREFIX}{one.name}", "warn", one) for one in unlisted_installs(facts)]
    found += [(f"{NO_RECORD_PREFIX}{one.name}", "warn", one) for one in record_less_installs(facts, named)]
    return [Finding(id=i, severity=severity, action="fix", title=one.title, summary=one.summary, remedy=one.remedy,
                    evidence=one.evidence, refs=[], component=one.name, evidence_level="reproduced")
            for i, severity, one in found]


def build_report(facts: Facts, matrix: Matrix, fail_on: str = "error", ignore: set[str] | None = None) -> Report:
    ignore = ignore or set()
    facts.arch = settle(facts.arch)  # one place for every path: live, snapshot, hand-built (sparkdoctor.arch)
    evaluations = evaluate_all(matrix, facts)
    matched = [ev for ev in evaluations if ev.outcome == "match"]
    findings = [Finding.from_evaluation(ev) for ev in matched if ev.entry.id not in ignore]
    for finding in findings:
        if line := probe_evidence(finding.verified_by, facts):
            finding.evidence.append(line)
    probe_findings, unverified = check_probes(facts, matched)
    extra = [f for f in (unfinished_fix_finding(facts), no_stack_finding(facts)) if f]
    probe_findings += extra + requirement_findings(facts) + install_findings(facts, matrix.packages())
    findings += [f for f in probe_findings if f.id not in ignore]
    findings.sort(key=lambda f: (-SEVERITY_RANK[f.severity], f.component, f.id))
    ignored = sorted([ev.entry.id for ev in matched if ev.entry.id in ignore] + [f.id for f in probe_findings if f.id in ignore])
    distances = [stack_distance(s, facts) for s in matrix.stacks] if facts.packages is not None else []
    stacks = sorted(distances, key=lambda d: (not d.present, len(d.differences), len(d.missing)))
    return Report(facts, evaluations, findings, ignored, fail_on, matrix.files, stacks, unverified, probe_findings,
                  knowledge(matrix, facts))
