"""`--format sarif`: findings as SARIF 2.1.0, for GitHub code scanning (and any SARIF viewer).

One run, tool `sparkdoctor`. Rules: one per matrix entry that was evaluated (its title, the remedy as help, its
refs as help URIs, its severity as the default level, its evidence level and component as properties), plus the
engine's own (a failed kernel probe) and recipe check's kinds (an unknown flag, a stale workaround ...). Results:
one per finding, at the level of its severity (error, warning, note), located in the file that shows it:

  check         a constraints file pinning the finding's package (its line); a hand-modified file of the
                package (under the package's location); otherwise the stated artifact: the target's interpreter
                (a container target: its image, as `container:NAME`).
  recipe check  the recipe file, at the first line that names the flag or variable the finding is about; else
                the recipe file as a whole.
  bench, rerun  the memory preflight's verdict, the post-mortem of a launch that died and the known problems the
                server's log printed: at the recipe file, the first line naming a flag its evidence or remedy names.

Paths under the current folder are written relative to it (uriBaseId SRCROOT), so GitHub links them into the
repository; others are absolute file: URIs. partialFingerprints["sparkdoctor/v1"] is a hash of the rule, the
subject (the flag, variable or package) and the artifact, never a line number or a version, so a finding keeps
its identity across runs while the file around it changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict
from urllib.parse import quote

from sparkdoctor import __version__
from sparkdoctor.exitcodes import EXIT_FINDINGS, EXIT_OK
from sparkdoctor.matrix import load
from sparkdoctor.matrix.model import Entry, Matrix
from sparkdoctor.names import canonicalize_name
from sparkdoctor.views.markdown import inline_markdown

if TYPE_CHECKING:
    from sparkdoctor.facts import Facts
    from sparkdoctor.findings import Finding, Report

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVEL = {"error": "error", "warn": "warning", "info": "note"}
FINGERPRINT = "sparkdoctor/v1"
# recipe check's ids are KIND:SUBJECT; their rules are the kinds
RECIPE_RULES = {
    "env-unknown": ("A VLLM_* variable the installed vLLM does not read", "warn"),
    "env-deprecated": ("A VLLM_* variable the installed vLLM has deprecated", "warn"),
    "flag-unknown": ("A `vllm serve` flag the installed vLLM does not know: the server would refuse to start", "error"),
    "workaround-stale": ("A workaround whose reason no longer holds here", "warn"),
    "workaround-unknown": ("A workaround whose reason cannot be judged here", "info"),
    "unjudged": ("A matrix entry that cannot judge the recipe's values here", "info"),
    "launch-separator": ("A command with a `--` and no --host/--port: bench and rerun cannot launch it", "warn"),
}
# the memory preflight's and the post-mortem's finding ids (sparkdoctor/memory/): recipe check, bench and rerun
MEMORY_RULES = {
    "memory-fits": ("The launch fits in the memory free now", "info"),
    "memory-fits-with": ("The launch does not fit as written; it fits with the settings named", "warn"),
    "memory-does-not-fit": ("The launch does not fit in the memory free now", "error"),
    "memory-unknown": ("The launch's memory could not be judged", "info"),
    "postmortem-oom-killed": ("The server was killed by the kernel's OOM killer", "error"),
    "postmortem-driver-no-memory": ("The NVIDIA driver ran out of memory (NV_ERR_NO_MEMORY)", "error"),
    "postmortem-cuda-oom": ("The server ran out of memory or refused to start for lack of it", "error"),
    "postmortem-hang": ("The server stopped answering", "error"),
    "postmortem-crash": ("The server died with nothing pointing at memory", "error"),
}
MAX_TEXT = 4000


class ArtifactLocation(TypedDict, total=False):
    uri: str
    uriBaseId: str


class PhysicalLocation(TypedDict, total=False):
    artifactLocation: ArtifactLocation
    region: dict[str, int]


class Location(TypedDict):
    physicalLocation: PhysicalLocation


# ---- shared ---------------------------------------------------------------------------------------------------
def _clip(value: object) -> str:
    text = str(value)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + " [...]"


def _md(text: str) -> str:
    return "\n".join(inline_markdown(line) for line in text.splitlines())


def _rule(rule_id: str, title: str, severity: str, remedy: str = "", refs: list[str] | None = None,
          evidence_level: str | None = None, component: str | None = None, summary: str = "") -> dict[str, object]:
    refs = [r for r in refs or [] if isinstance(r, str)]
    urls = [r for r in refs if re.match(r"https?://", r)]
    help_text = "\n".join(x for x in (remedy, *(f"see: {r}" for r in refs)) if x) or title
    # GitHub code scanning renders help.markdown: a --matrix file's remedy or ref shows as written, never as a link
    help_md = "\n\n".join(x for x in (_md(remedy), *(f"- <{r}>" if r in urls else f"- {_md(r)}" for r in refs)) if x) \
        or _md(title)
    rule: dict[str, object] = {"id": rule_id, "name": _pascal(rule_id), "shortDescription": {"text": _clip(title)},
                            "fullDescription": {"text": _clip(summary or title)},
                            "help": {"text": _clip(help_text), "markdown": _clip(help_md)},
                            "defaultConfiguration": {"level": LEVEL.get(severity, "warning")}}
    if urls:
        rule["helpUri"] = urls[0]
    props: dict[str, object] = {"tags": list(dict.fromkeys(["sparkdoctor", *([component] if component else [])])),
                             "severity": severity}
    if evidence_level:
        props["evidence-level"] = evidence_level
    if component:
        props["component"] = component
    if len(urls) > 1:
        props["helpUris"] = urls
    rule["properties"] = props
    return rule


def _entry_rule(e: Entry) -> dict[str, object]:
    return _rule(e.id, e.title, e.severity, e.remedy, e.refs, e.evidence, e.component, e.summary)


def _pascal(rule_id: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^A-Za-z0-9]+", rule_id) if p) or "Finding"


def _cwd() -> Path | None:
    """The working folder, SRCROOT; None when it was removed under the run (no path is relative to it then)."""
    try:
        return Path.cwd()
    except OSError:
        return None


def _artifact(path: str, line: int | None = None) -> Location:
    """A physicalLocation: relative to SRCROOT (the current folder) when under it, else an absolute URI."""
    cwd = _cwd()
    if path.startswith("container:"):
        loc: PhysicalLocation = {"artifactLocation": {"uri": quote(path, safe=":/@")}}
    elif cwd is None:
        p = Path(path)
        loc = {"artifactLocation": {"uri": p.as_uri() if p.is_absolute() else quote(p.as_posix())}}
    else:
        p = Path(os.path.abspath(path))
        try:
            rel = p.relative_to(cwd)
            loc = {"artifactLocation": {"uri": quote(rel.as_posix()), "uriBaseId": "SRCROOT"}}
        except ValueError:
            loc = {"artifactLocation": {"uri": p.as_uri()}}
    if line:
        loc["region"] = {"startLine": line}
    return {"physicalLocation": loc}


def _result(rule_id: str, severity: str, message: dict[str, str], location: Location, subject: str,
            properties: dict[str, object]) -> dict[str, object]:
    """One result; its fingerprint hashes the rule, the subject and the artifact (never a line or a version)."""
    uri = location["physicalLocation"]["artifactLocation"]["uri"]
    digest = hashlib.sha256(f"{rule_id}\0{subject}\0{uri}".encode()).hexdigest()
    return {"ruleId": rule_id, "level": LEVEL.get(severity, "warning"), "message": message, "locations": [location],
            "partialFingerprints": {FINGERPRINT: digest}, "properties": properties}


def _log(rules: list[dict[str, object]], results: list[dict[str, object]], exit_code: int, properties: Mapping[str, object],
         category: str, failure: str | None = None) -> str:
    index = {r["id"]: i for i, r in enumerate(rules)}
    for result in results:
        result["ruleIndex"] = index[result["ruleId"]]
    run = {
        "tool": {"driver": {"name": "sparkdoctor", "version": __version__, "semanticVersion": __version__,
                            "rules": rules}},
        **({"originalUriBaseIds": {"SRCROOT": {"uri": cwd.as_uri() + "/"}}} if (cwd := _cwd()) is not None else {}),
        "invocations": [{"executionSuccessful": failure is None, "exitCode": exit_code,
                         **({"toolExecutionNotifications": [{"level": "error", "message": {"text": _clip(failure)}}]}
                            if failure is not None else {})}],
        # the category GitHub keeps apart: several logs (check, each recipe) can be uploaded together
        "automationDetails": {"id": f"sparkdoctor/{category}/"},
        "results": results,
        "columnKind": "unicodeCodePoints",
        "properties": properties,
    }
    return json.dumps({"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}, indent=2, ensure_ascii=False)


def _message(title: str, evidence: list[str], remedy: str) -> dict[str, str]:
    lines = [title, *(f"- {e}" for e in evidence[:20])]
    if len(evidence) > 20:
        lines.append(f"- ... and {len(evidence) - 20} more")
    if remedy:
        lines.append(f"What to do: {remedy}")
    return {"text": _clip("\n".join(str(x) for x in lines))}


# ---- check --------------------------------------------------------------------------------------------------------
def render_sarif(report: Report) -> str:
    """`check --format sarif`."""
    rules: dict[str, dict[str, object]] = {}  # by id, the first of each
    for ev in report.evaluations:
        if ev.entry.id not in rules:
            rules[ev.entry.id] = _entry_rule(ev.entry)
    results: list[dict[str, object]] = []
    default = _stated_artifact(report.facts)
    for f in report.findings:
        if f.id not in rules:  # an engine finding (a failed kernel probe)
            rules[f.id] = _rule(f.id, f.title, f.severity, f.remedy, f.refs, f.evidence_level, f.component, f.summary)
        location, subject = _check_location(f, report.facts, default)
        results.append(_result(f.id, f.severity, _message(f.title, f.evidence, f.remedy), location, subject,
                               {"evidence-level": f.evidence_level, "component": f.component}))
    props = {"fingerprint": report.facts.fingerprint(), "verdict": report.verdict(), "fail_on": report.fail_on,
             "target": default}
    why = report.unprobed_why()  # a run that could not look at the target is no clean analysis (exit 3)
    return _log(list(rules.values()), results, report.exit_code(), props, "check",
                None if why is None else f"the target could not be probed: {why}")


def _stated_artifact(facts: Facts) -> str:
    target = facts.target if isinstance(facts.target, dict) else {}
    container = getattr(facts, "container", None)
    if target.get("kind") == "container" or isinstance(container, dict):
        record = container if isinstance(container, dict) else target
        return f"container:{record.get('name') or record.get('image') or 'unknown'}"
    return str(target.get("python") or target.get("executable") or "python")


def _check_location(f: Finding, facts: Facts, default: str) -> tuple[Location, str]:
    """(the location, the subject) of a check finding: a constraints line, a modified file, or the stated artifact."""
    text = " ".join(str(e) for e in f.evidence)
    names = {canonicalize_name(f.component)} if f.component else set()
    for c in facts.constraints or []:
        if not isinstance(c, dict) or not c.get("file"):
            continue
        name = canonicalize_name(str(c.get("name") or ""))
        if name and (name in names or re.search(rf"(?<![\w-]){re.escape(str(c.get('name')))}(?![\w-])", text, re.IGNORECASE)):
            number = c.get("line")
            line = number if isinstance(number, int) and number > 0 else None
            return _artifact(str(c["file"]), line), name
    for pkg_name, pkg in (facts.packages or {}).items():
        for rel in (pkg.get("files_modified") or []) if isinstance(pkg, dict) else []:
            if isinstance(rel, str) and rel and rel in text and pkg.get("location"):
                return _artifact(os.path.join(str(pkg["location"]), rel)), f"{pkg_name}/{rel}"
    return _artifact(default), f.component or ""


# ---- recipe check -----------------------------------------------------------------------------------------------
def render_recipe_sarif(doc: dict[str, Any], matrix: Matrix) -> str:
    """`recipe check --format sarif` from its document; `matrix` gives the rules of matrix entries."""
    recipe = doc.get("recipe") or {}
    path = str(recipe.get("path") or recipe.get("name") or "recipe")
    lines = _read_lines(path)
    rules = [_entry_rule(e) for e in matrix.entries if not getattr(e, "withdrawn", None)]
    rules += [_rule(rule_id, title, severity, component="recipe") for rule_id, (title, severity) in RECIPE_RULES.items()]
    seen = {str(rule["id"]) for rule in rules}
    results: list[dict[str, object]] = []
    for f in doc.get("findings") or []:
        kind, _, subject = str(f["id"]).partition(":")
        rule_id = kind if subject else str(f["id"])
        if rule_id not in seen:
            seen.add(rule_id)
            rules.append(_rule(rule_id, str(f.get("title") or rule_id), str(f.get("severity") or "warn"), str(f.get("remedy") or "")))
        entry = matrix.get(subject or rule_id)
        needles = _needles(subject, entry, f.get("evidence") or [])
        line = _first_line(lines, needles)
        location = _artifact(path, line)
        message = _message(str(f.get("title") or rule_id), [str(e) for e in f.get("evidence") or []],
                           str(f.get("remedy") or ""))
        results.append(_result(rule_id, str(f.get("severity")), message, location, subject or rule_id,
                               {"kind": f.get("kind"), **({"subject": subject} if subject else {})}))

    exit_code = EXIT_FINDINGS if doc.get("failed") else EXIT_OK
    props = {"recipe": recipe.get("name"), "recipe_fingerprint": recipe.get("fingerprint"), "fingerprint": doc.get("fingerprint"),
             "fail_on": doc.get("fail_on"), "failed": bool(doc.get("failed"))}
    category = re.sub(r"[^A-Za-z0-9._-]+", "-", str(recipe.get("name") or "recipe"))
    return _log(rules, results, exit_code, props, f"recipe-check/{category}")


def _read_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(4_000_000).splitlines()
    except (OSError, ValueError):
        return []


def _needles(subject: str, entry: Entry | None, evidence: Sequence[object]) -> list[str]:
    """What the recipe's line would name: the subject (a flag or a variable, either spelling of a flag), the entry's
    env variables and justifying flags, and flags or variables quoted in the evidence."""
    out = [subject] if subject else []
    if subject.startswith("--"):
        out.append("--" + subject[2:].replace("-", "_"))
    if entry is not None:
        out += list((entry.when.get("env") or {}) if isinstance(entry.when.get("env"), dict) else [])
        out += [j.split("=", 1)[0] for j in getattr(entry, "justifies", []) or []]
    for e in evidence:
        out += re.findall(r"--[a-z0-9][a-z0-9_\-]+|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b", str(e))
    return [n for n in dict.fromkeys(out) if n]


def _first_line(lines: list[str], needles: list[str]) -> int | None:
    for needle in needles:
        pattern = re.compile(rf"(?<![\w-]){re.escape(needle)}(?![\w-])")
        for number, line in enumerate(lines, 1):
            if pattern.search(line):
                return number
    return None


# ---- bench and rerun ---------------------------------------------------------------------------------------------
def render_findings_sarif(findings: list[dict[str, Any]], *, category: str, properties: dict[str, object], exit_code: int,
                          failure: str | None = None) -> str:
    """Finding records ({"kind", "id", "severity", "title", "evidence", "remedy", "path"}; an A/B's carry `arm`) as
    one SARIF log: `bench` and `rerun` (their run, comparison or failure). A log symptom's rule is its matrix entry's;
    `failure`: the one line of a command that failed (the invocation is then not successful)."""
    matrix = load(None)
    rules: dict[str, dict[str, object]] = {}  # by id, the first of each
    results: list[dict[str, object]] = []
    for f in findings:
        rule_id = str(f.get("id") or "finding")
        entry = matrix.get(rule_id) if f.get("kind") == "symptom" else None
        severity = str(f.get("severity") or (entry.severity if entry is not None else "warn"))
        if rule_id not in rules and entry is not None:
            rules[rule_id] = _entry_rule(entry)
        elif rule_id not in rules:
            title, default = MEMORY_RULES.get(rule_id, (str(f.get("title") or rule_id), severity))
            rules[rule_id] = _rule(rule_id, title, default, component="memory" if rule_id in MEMORY_RULES else None)
        evidence = [str(e) for e in f.get("evidence") or []]
        remedy = str(f.get("remedy") or (entry.remedy if entry is not None else ""))
        path = str(f.get("path") or properties.get("recipe_path") or "recipe")
        location = _artifact(path, _first_line(_read_lines(path), _needles("", None, [*evidence, remedy])))
        arm = f.get("arm")
        title = f"{arm}: {f.get('title')}" if arm else str(f.get("title") or rule_id)
        results.append(_result(rule_id, severity, _message(title, evidence, remedy), location, str(arm or ""),
                               {"kind": f.get("kind"), **({"arm": arm} if arm else {})}))
    safe = re.sub(r"[^A-Za-z0-9._/-]+", "-", category)
    return _log(list(rules.values()), results, exit_code, properties, safe, failure)


def failure_sarif(command: str, error: BaseException, exit_code: int) -> str:
    """A bench or rerun that failed, as SARIF: what judged the launch (the memory preflight's refusal, the post-mortem
    of a launch that died) as results, the failure's one line as the invocation's notification."""
    findings = list(getattr(error, "findings", None) or [])
    return render_findings_sarif(findings, category=command.replace(" ", "-"), properties={"command": command},
                                 exit_code=exit_code, failure=str(error)) + "\n"
