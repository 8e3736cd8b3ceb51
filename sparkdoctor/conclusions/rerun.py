"""`rerun`: after a toolchain change, find what is stale and measure it again.

plan() reads every conclusion (the newest row per name) and judges it (staleness.py), and judges the
workarounds of every recipe those conclusions measured (workarounds.py). execute() re-runs each stale,
re-runnable conclusion as the same A/B (same recipes, workload, pairs, min-effect; bench's interleaved
A/B), stores it as a new row that points to the old one, and sets old and new numbers side by side
(outcome.py); then measures each stale workaround: the recipe with it against the recipe without it,
unless a conclusion already measures exactly that pair on the current toolchain (then its numbers are
the evidence, not a second launch). Each workaround measurement is itself stored as a conclusion
("workaround:<recipe>:<flag>"), so the next upgrade re-checks it too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from sparkdoctor import proc
from sparkdoctor.bench import flow, load
from sparkdoctor.bench.failures import StoreFailed
from sparkdoctor.bench.run import resolved_recipe
from sparkdoctor.conclusions import outcome, staleness, store
from sparkdoctor.conclusions.documents import RerunDone, RerunPlan
from sparkdoctor.conclusions.model import Arm, ConclusionError, in_folder
from sparkdoctor.conclusions.outcome import NOT_CALLED, WRONG_ARM
from sparkdoctor.conclusions.store import LedgerReadError
from sparkdoctor.conclusions.toolchain import Toolchains
from sparkdoctor.conclusions.workarounds import judge_all, load_arm, without
from sparkdoctor.errors import TargetUnprobeable
from sparkdoctor.ledger.schema import LedgerError
from sparkdoctor.ledger.store import Ledger, recipe_hash
from sparkdoctor.matrix.model import Matrix
from sparkdoctor.mods.images import image_tree
from sparkdoctor.mods.model import ModError
from sparkdoctor.mods.recipe import stale_mods
from sparkdoctor.mods.trees import venv_tree
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.serve.container_launch import RUNTIME_ENV

Progress = Callable[[str], None]


@dataclass
class Options:
    ledger: Path | None
    matrix: Path | None
    ready_timeout: float = 600.0
    names: tuple[str, ...] = ()  # only these conclusions (default: all)
    allow_load_difference: bool = False  # call a flip even when old and new runs ran under different machine load
    force: bool = False  # launch even when the memory preflight says a recipe does not fit now


class Evidence(NamedTuple):
    """A measured pair: its A/B levels and the arms whose answers were wrong (bench/correctness.py)."""

    levels: list[dict[str, Any]]
    wrong: list[str]


def wrong_arms(doc: Mapping[str, object]) -> list[str]:
    """The arms ("A", "B") whose answers were wrong in an A/B document or a stored conclusion: its
    `correctness.wrong` (bench/ab.py), else, for a conclusion stored before that was kept, the faster arm of each
    `wrong arm` level (the only wrong arm such a row can name)."""
    checked = doc.get("correctness")
    if isinstance(checked, dict) and isinstance(checked.get("wrong"), list):
        return sorted({str(arm) for arm in checked["wrong"] if arm in ("A", "B")})
    levels = doc.get("levels")
    ratios = [lvl.get("ratio") for lvl in levels if isinstance(lvl, dict)] if isinstance(levels, list) else []
    return sorted({"B" if r["ratio"] > 1 else "A" for r in ratios if isinstance(r, dict) and r.get("verdict") == WRONG_ARM
                   and isinstance(r.get("ratio"), (int, float)) and not isinstance(r["ratio"], bool)})


def _hash(recipe: Recipe) -> str:
    return recipe_hash(resolved_recipe(recipe))


def plan(ledger: Ledger, matrix: Matrix, toolchains: Toolchains, names: tuple[str, ...] = ()) -> RerunPlan:
    conclusions = store.latest(ledger)
    unknown = sorted(set(names) - {c.name for c in conclusions})
    if unknown:
        raise ConclusionError(f"no conclusion named {unknown[0]!r} in ledger {ledger.path}")
    statuses = [staleness.judge(c, ledger, toolchains) for c in conclusions if not names or c.name in names]
    items: list[dict[str, Any]] = []
    done: set[str] = set()
    for status in statuses:
        if status.state == "broken":
            continue
        with in_folder(status.conclusion.data):  # its model folders, as bench found them
            for arm_name, arm in status.conclusion.arms.items():
                if arm.drop or arm.path in done or not status.pythons.get(arm_name):
                    continue
                done.add(arm.path)
                try:
                    recipe = load_arm(arm, status.conclusion.data.get("sets"))
                    facts = toolchains.facts(status.pythons[arm_name])
                except ConclusionError:
                    continue  # the conclusion's own status already says why
                for j in judge_all(recipe, matrix, facts):
                    if j.status != "stale":
                        continue
                    items.append({"recipe": arm.path, "label": recipe.name, "python": status.pythons[arm_name],
                                  "sets": status.conclusion.data.get("sets") or {}, "folder": status.conclusion.data.get("folder"),
                                  "local": bool(status.conclusion.data.get("local")), **j.to_dict(),
                                  "measured_by": _measured_by(statuses, recipe, j.workaround.key)})
                run = ledger.run(status.conclusion.data["runs"][arm_name][-1]) or {}
                served = (run.get("facts") or {}).get("container") if isinstance(run.get("facts"), dict) else None
                items += _stale_mods(recipe, arm.path, status.pythons[arm_name], status.conclusion.data, served or {})
    return RerunPlan(statuses, items)


def _stale_mods(recipe: Recipe, path: str, python: str, data: dict[str, Any], served: dict[str, Any]) -> list[dict[str, Any]]:
    """The recipe's mods that upstream made already in the target's files (sparkdoctor.mods): stale workarounds,
    each citing the file and lines. A recipe served from a container is judged on its image's files (the image
    its runs recorded), a local one on its interpreter's. sparkdoctor launches a recipe's command as it is and
    never applies a mod, so there is no with/without to measure: the advice is to drop it."""
    if not recipe.mods():
        return []
    image = (served.get("image") or recipe.container) if recipe.container and not data.get("local") else None
    try:
        if image:
            with image_tree(str(image), runtime=os.environ.get(RUNTIME_ENV) or served.get("engine")) as tree:
                found = stale_mods(recipe, tree)
        else:
            found = stale_mods(recipe, venv_tree(python))
    except (ModError, TargetUnprobeable):
        return []  # the target's files cannot be read: nothing is called stale on no evidence
    items = []
    for mod in found:
        shown = f"mod {mod['name']}"
        items.append({"recipe": path, "label": recipe.name, "python": python, "sets": data.get("sets") or {}, "folder": data.get("folder"),
                      "local": bool(data.get("local")), "workaround": shown, "key": f"mod:{mod['written']}",
                      "kind": "mod", "because": None, "justified_by": [], "status": "stale",
                      "reasons": [{"entry": shown, "outcome": mod["verdict"], "evidence": mod["evidence"]}],
                      "files": mod["files"], "mod_path": mod["path"], "target": mod["target"],
                      "text": f"{shown} is stale: upstream made its change already ({mod['evidence'][0]})",
                      "measured_by": None})
    return items


def _will_have_numbers(status: staleness.Status) -> bool:
    """Whether execute() will hold numbers of this conclusion on the current toolchain: a fresh one has them, a stale
    re-runnable one is re-measured first; a broken, incomparable or not re-runnable one never gets any."""
    return status.state == "fresh" or (status.state == "stale" and status.rerunnable)


def _measured_by(statuses: list[staleness.Status], recipe: Recipe, key: str) -> dict[str, object] | None:
    """A conclusion that measures exactly (recipe with `key`, recipe without it), in either order, and that will have
    numbers when the workaround is measured (else execute() measures it with an A/B of its own: so does the plan say)."""
    with_hash, without_hash = _hash(recipe), _hash(without(recipe, [key]))
    for status in statuses:
        hashes = status.conclusion.data.get("recipe_hashes") or {}
        if not _will_have_numbers(status):
            continue
        if hashes.get("A") == with_hash and hashes.get("B") == without_hash:
            return {"conclusion": status.conclusion.name, "with": "A", "without": "B"}
        if hashes.get("B") == with_hash and hashes.get("A") == without_hash:
            return {"conclusion": status.conclusion.name, "with": "B", "without": "A"}
    return None


def _bench_options(data: dict[str, Any], opts: Options) -> flow.Options:
    return flow.Options(overrides=dict(data.get("workload") or {}), sets=dict(data.get("sets") or {}),
                        local=bool(data.get("local")), python=data.get("python"), ledger=opts.ledger,
                        store=True, ready_timeout=opts.ready_timeout, pairs=int(data.get("pairs") or 1),
                        min_effect=float(data.get("min_effect") or 0.02), fmt="json",
                        allow_load_difference=opts.allow_load_difference, force=opts.force)


def _measure(arms: dict[str, Arm], data: dict[str, Any], opts: Options) -> dict[str, Any]:
    try:
        with in_folder(data):  # bench's folder, where it found the recipes' models named relative to it
            recipes = {name: load_arm(arm, data.get("sets")) for name, arm in arms.items()}
            return flow.bench_ab(recipes["A"], recipes["B"], _bench_options(data, opts)).to_json()
    except flow.Failure as exc:
        if isinstance(exc, StoreFailed):  # the ledger failed, not the measurement: the whole rerun stops, exit 5
            raise LedgerReadError(str(exc)) from None
        raise ConclusionError(str(exc), getattr(exc, "findings", None)) from None


def rerun_one(ledger: Ledger, status: staleness.Status, opts: Options) -> dict[str, Any]:
    old = status.conclusion
    doc = _measure(old.arms, old.data, opts)
    compared = outcome.compare_levels(old.data.get("levels") or [], doc.get("levels") or [], wrong_arms(doc))
    runs = store.comparison_runs(ledger, doc["comparison_id"])
    why = _load_differs(ledger, [rid for ids in old.data["runs"].values() for rid in ids],
                        [r["id"] for rs in runs.values() for r in rs])
    # wrong answers are no load artefact: a broken conclusion stays broken whatever the load did
    if why and compared["outcome"] not in ("holds", "broken") and not opts.allow_load_difference:
        # a busy baseline read as a flip on a quiet machine (or the reverse) is the failure this avoids
        compared = {**compared, "outcome": "inconclusive", "load_differ": f"old and new runs: {why}"}
    arm_changes = {arm: outcome.arm_change(ledger, old.data["runs"][arm], [r["id"] for r in runs[arm]],
                                           float(old.data.get("min_effect") or 0.02)) for arm in ("A", "B")}
    previous = {k: old.data.get(k) for k in ("verdict", "levels", "runs", "fingerprints")}
    previous.update(id=old.id, created_at=old.created_at, statement=old.statement())
    new = store.record(ledger, old.name, doc, old.arms, old.data.get("python"), previous_id=old.id,
                       outcome=compared["outcome"],
                       extra={"sets": old.data.get("sets") or {}, "local": bool(old.data.get("local")), "folder": old.data.get("folder"), "previous": previous, "compared": compared, "arm_changes": arm_changes,
                              "changes": status.changes})
    return {"name": old.name, "outcome": compared["outcome"], "load_differ": compared.get("load_differ"),
            "wrong": compared.get("wrong") or [],
            "findings": doc.get("findings") or [],
            "old": previous, "new": new.to_dict(),
            "levels": compared["levels"], "arm_changes": arm_changes, "changes": status.changes,
            "regression": any(row["regression"] for rows in arm_changes.values() for row in rows)}


def _load_differs(ledger: Ledger, old_ids: list[int], new_ids: list[int]) -> str | None:
    """Whether the old runs and the new ones ran under clearly different machine load (bench/load.py), from
    the load each run stored (runs stored before loads were kept: not judged)."""

    def indexes(ids: list[int]) -> list[dict[str, float]]:
        loads = [((ledger.run(rid) or {}).get("summary") or {}).get("load") or {} for rid in ids]
        return [measured["index"] for measured in loads if measured.get("index")]

    return load.arms_differ(indexes(old_ids), indexes(new_ids))


def _cost(levels: list[dict[str, Any]], with_arm: str) -> list[dict[str, object]]:
    """Per level: output tok/s without the workaround over with it (> 1: the workaround costs speed)."""
    rows = []
    for lvl in levels:
        r = lvl["ratio"]
        if with_arm == "A":
            ratio, low, high, verdict = r["ratio"], r["ci_low"], r["ci_high"], r["verdict"]
        else:  # B/A measured with the workaround as B: invert
            flip = {"faster": "slower", "slower": "faster"}
            ratio, low, high, verdict = 1 / r["ratio"], 1 / r["ci_high"], 1 / r["ci_low"], flip.get(r["verdict"], r["verdict"])
        rows.append({"concurrency": lvl["concurrency"], "without_over_with": ratio, "ci_low": low, "ci_high": high,
                     "verdict": verdict, "pairs": r.get("pairs"), "method": r.get("method")})
    return rows


def measure_workaround(ledger: Ledger, item: dict[str, Any], by_name: dict[str, Evidence], opts: Options) -> dict[str, object]:
    """What a stale workaround costs: from the conclusion that measures it, else a new A/B (stored). A stale mod
    is not measured (sparkdoctor never applies mods, so it cannot launch with and without one): it is advice."""
    if item.get("kind") == "mod":
        return {**item, "cost": [], "source": None,
                "advice": f"drop {item['workaround']} from {item['label']}: upstream has its change already "
                          f"({item['reasons'][0]['evidence'][0]}); not measured: sparkdoctor launches the recipe's "
                          "command as it is and never applies a mod"}
    ref = item.get("measured_by")
    found: list[dict[str, Any]] = []  # what judged the new launches (none when an existing conclusion measures it)
    if ref and ref["conclusion"] in by_name:
        (levels, wrong), source, with_arm = by_name[ref["conclusion"]], f"conclusion {ref['conclusion']}", ref["with"]
    else:
        arms = {"A": Arm(item["recipe"], item["label"]),
                "B": Arm(item["recipe"], f"{item['label']} without {item['workaround']}", (item["key"],))}
        data = {"python": item.get("python"), "pairs": 1, "sets": item.get("sets") or {}, "local": item.get("local"),
                "folder": item.get("folder")}
        doc = _measure(arms, data, opts)
        found = doc.get("findings") or []
        name = f"workaround:{item['label']}:{item['key']}"
        rec = store.record(ledger, name, doc, arms, item.get("python"),
                           extra={"sets": data["sets"], "local": bool(data["local"]), "folder": data["folder"]})
        levels, source, with_arm = doc.get("levels") or [], f"conclusion {name} (new, comparison {doc['comparison_id']})", "A"
        wrong = wrong_arms(doc)
        by_name[name] = Evidence(levels, wrong)
        ref = {"conclusion": rec.name, "with": "A", "without": "B"}
    cost = _cost(levels, with_arm)
    answers = {"with": with_arm in wrong, "without": ("B" if with_arm == "A" else "A") in wrong}
    return {**item, "measured_by": ref, "source": source, "cost": cost,
            "wrong": sorted(side for side, bad in answers.items() if bad),
            "advice": _advice(item["workaround"], cost, answers), "findings": found}


def _advice(shown: str, cost: list[dict[str, Any]], wrong: dict[str, bool]) -> str:
    """What to do with a stale workaround: answers first (fast and wrong never wins), then speed."""
    if wrong["with"] and wrong["without"]:
        return (f"{shown}: answers are wrong with it and without it: speed decides nothing here; "
                "find why the answers are wrong first")
    if wrong["without"]:
        return f"keep {shown}: answers are wrong without it"
    if wrong["with"]:
        return f"remove {shown}: answers are wrong with it (the workaround itself breaks them) and right without it"
    if not cost:
        return f"{shown}: not measured"
    head = cost[0]
    if head["verdict"] == NOT_CALLED:
        return (f"{shown}: not called ({head['without_over_with']:.2f}x without it): the arms ran under clearly "
                "different machine load; measure again on a quieter machine")
    if head["verdict"] == WRONG_ARM:  # a level says an arm is wrong though no arm was named: keep, never remove
        return f"keep {shown}: an arm's answers are wrong ({head['without_over_with']:.2f}x without it)"
    if head["verdict"] == "faster":
        return (f"remove {shown}: without it the server is {head['without_over_with']:.2f}x as fast "
                f"(95% CI {head['ci_low']:.2f}-{head['ci_high']:.2f}); it costs "
                f"{(1 - 1 / head['without_over_with']) * 100:.0f}% of the throughput")
    if head["verdict"] == "slower":
        return f"keep {shown} for now: the server is still faster with it ({head['without_over_with']:.2f}x without)"
    return f"{shown} buys nothing measurable here ({head['without_over_with']:.2f}x without it): remove it"


def execute(ledger: Ledger, planned: RerunPlan, opts: Options, progress: Progress | None = None) -> RerunDone:
    results: list[dict[str, object]] = []
    by_name: dict[str, Evidence] = {s.conclusion.name: Evidence(s.conclusion.data.get("levels") or [], wrong_arms(s.conclusion.data))
                                    for s in planned.conclusions if s.state == "fresh"}
    for status in planned.conclusions:
        if status.state != "stale":
            continue
        if not status.rerunnable:
            results.append({"name": status.conclusion.name, "outcome": "not re-run", "reasons": status.reasons})
            continue
        if progress:
            progress(f"re-measuring {status.conclusion.name}")
        try:
            res = rerun_one(ledger, status, opts)
        except proc.Interrupted as exc:  # bench's A/B named the runs it kept; say what they were for
            name = status.conclusion.name
            raise proc.Interrupted(exc.signum, done="; ".join(filter(None, [
                exc.done, f"conclusion {name} was not re-measured: `sparkdoctor rerun {name}` measures it again"]))) from exc
        except ConclusionError as exc:
            if isinstance(exc, LedgerError):
                raise
            results.append({"name": status.conclusion.name, "outcome": "not re-run", "reasons": [str(exc)],
                            **({"findings": exc.findings} if exc.findings else {})})
            continue
        by_name[status.conclusion.name] = Evidence(res["new"].get("levels") or [], res["wrong"])
        results.append(res)
    measured = []
    for item in planned.workarounds:
        if progress:
            progress(f"measuring {item['label']} with and without {item['workaround']}")
        try:
            measured.append(measure_workaround(ledger, item, by_name, opts))
        except ConclusionError as exc:
            if isinstance(exc, LedgerError):
                raise
            measured.append({**item, "cost": [], "advice": f"not measured: {exc}",
                             **({"findings": exc.findings} if exc.findings else {})})
    return RerunDone(results, measured)
