"""What a conclusion is: two arms (a recipe file, minus any workaround dropped from it), the A/B that
measured them, and the runs behind it. Plain data; the ledger row holds it as JSON."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkdoctor.errors import InputError
from sparkdoctor.ledger.store import number
from sparkdoctor.text import one_line

CONCLUSION_VERSION = 1  # the shape of `data_json` in the ledger and of the JSON documents


class ConclusionError(InputError, RuntimeError):
    """A conclusion that cannot be recorded, read or re-run; one line saying which and why."""

    code = "conclusion"

    def __init__(self, message: str, findings: list[dict[str, object]] | None = None):
        super().__init__(one_line(message))
        self.findings = list(findings or [])  # what judged a launch that failed (bench's RunFailed.findings)


@dataclass(frozen=True)
class Arm:
    """One side of an A/B: the recipe file it was loaded from and the workarounds dropped from it
    (rerun measures "the recipe without --enforce-eager" with no file of its own)."""

    path: str
    label: str
    drop: tuple[str, ...] = ()  # workaround keys ("--enforce-eager", "env:NAME") removed from the recipe

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "label": self.label, "drop": list(self.drop)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Arm:
        return cls(str(data["path"]), str(data.get("label") or data["path"]), tuple(data.get("drop") or ()))


@dataclass
class Conclusion:
    """One row of the `conclusions` table.

    data: {"version", "a": Arm, "b": Arm, "python": the --python given or None, "workload", "pairs",
    "min_effect", "verdict", "levels" (bench's A/B levels: per concurrency the arms' values and the
    ratio B/A with its CI), "runs": {"A": [ids], "B": [ids]}, "fingerprints": {"A", "B"},
    "recipe_hashes": {"A", "B"}, "bench_version", "folder" (the working folder bench ran in), and after a rerun "previous" (the old numbers) and
    "outcome" details}."""

    id: int
    name: str
    created_at: str
    comparison_id: int | None
    previous_id: int | None
    outcome: str | None
    data: dict[str, Any] = field(default_factory=dict)
    damaged: str | None = None  # what is wrong with the stored row (then `data` is empty)

    @property
    def arms(self) -> dict[str, Arm]:
        return {"A": Arm.from_dict(self.data["a"]), "B": Arm.from_dict(self.data["b"])}

    def statement(self) -> str:
        """The conclusion in words: "B is faster than A: 2.41x (95% CI 2.2-2.6)"."""
        a, b = self.data["a"]["label"], self.data["b"]["label"]
        verdict = self.data.get("verdict")
        ratio = _headline_ratio(self.data)
        if ratio is None:
            return f"{b} vs {a}: {verdict}"
        numbers = f"{ratio['ratio']:.2f}x (95% CI {ratio['ci_low']:.2f}-{ratio['ci_high']:.2f})"
        if verdict in ("faster", "slower"):
            return f"{b} is {verdict} than {a}: {numbers}"
        return f"{b} vs {a}: {verdict} ({numbers})"

    def to_dict(self) -> dict[str, object]:
        head = {"id": self.id, "name": self.name, "created_at": self.created_at, "comparison_id": self.comparison_id,
                "previous_id": self.previous_id, "outcome": self.outcome}
        if self.damaged:
            return {**head, "statement": f"(a damaged ledger row: {self.damaged})", "damaged": self.damaged,
                    "runs": {"A": [], "B": []}, "fingerprints": {"A": None, "B": None}}
        return {**head, "statement": self.statement(), **self.data}


@contextlib.contextmanager
def in_folder(data: Mapping[str, object]) -> Iterator[None]:
    """Work in the folder bench ran in when the conclusion was recorded (its `folder`), where bench found a recipe's
    model named relative to it (`model = "tiny"`, `--set model=./models/tiny`), whichever folder this runs in. One
    recorded before the key was kept, or whose folder is gone: this folder, as before."""
    here, folder = None, data.get("folder")
    if isinstance(folder, str):
        with contextlib.suppress(OSError, ValueError):
            here = os.getcwd()
            os.chdir(folder)
    try:
        yield
    finally:
        if here is not None:
            os.chdir(here)


def folder_note(data: Mapping[str, object]) -> str | None:
    """What in_folder cannot do for this conclusion, said once where it is listed or re-run (None: it works in the
    folder bench ran in): one recorded before bench kept that folder, or whose folder is gone, reads a recipe's
    relative paths (its model `./models/tiny`) from the current folder, which may hold another checkpoint or none."""
    folder = data.get("folder")
    if not isinstance(folder, str):
        return ("recorded before bench kept the folder it ran in: relative paths in its recipes (a model named "
                f"./models/tiny) are read from the current folder, {one_line(os.getcwd())}")
    if not os.path.isdir(folder):
        return (f"the folder bench ran in, {one_line(folder)}, is gone: relative paths in its recipes are read from "
                f"the current folder, {one_line(os.getcwd())}")
    return None


def shape_problem(data: object) -> str | None:
    """What makes a stored conclusion's data unusable (None: it can be judged, shown and re-run). Checked
    when the row is read, so one damaged row is named, and the others are still listed."""
    if not isinstance(data, dict):
        return f"data_json is a JSON {type(data).__name__}, not an object"
    for arm in ("a", "b"):
        value = data.get(arm)
        drop = value.get("drop", []) if isinstance(value, dict) else None
        if not (isinstance(value, dict) and isinstance(value.get("path"), str) and isinstance(value.get("label"), str)
                and isinstance(drop, list) and all(isinstance(key, str) for key in drop)):
            return f"arm {arm!r} is not an object with a path, a label and the workarounds it drops (strings)"
    for key, kind in (("runs", list), ("fingerprints", str), ("recipe_hashes", str)):
        value = data.get(key)
        if not (isinstance(value, dict) and all(isinstance(value.get(arm), kind) for arm in ("A", "B"))):
            return f"{key!r} does not hold both arms"
    if not all(type(r) is int and 0 < r < 2**63 for arm in ("A", "B") for r in data["runs"][arm]) or not all(data["runs"].values()):
        return "'runs' must hold run ids (integers from 1 to 2**63-1, as the ledger's) for both arms"
    levels = data.get("levels") or []
    for level in levels if isinstance(levels, list) else [None]:
        ratio = level.get("ratio") if isinstance(level, dict) else None
        # rerun sets each level's ratio and verdict against the new ones, after it has launched: all of it is checked here
        if not (isinstance(level, dict) and number(level.get("concurrency"), False) and isinstance(ratio, dict)
                and all(number(ratio.get(k), False) and ratio[k] > 0 for k in ("ratio", "ci_low", "ci_high"))
                and isinstance(ratio.get("verdict"), str)):
            return "'levels' is not a list of levels with a concurrency and ratios (positive finite numbers) with a verdict"
    pairs, runs_a = data.get("pairs"), len(data["runs"]["A"])
    if pairs is not None and not (type(pairs) is int and 1 <= pairs <= runs_a):  # rerun launches 2 x pairs servers
        return f"'pairs' is not a whole number from 1 to the {runs_a} run(s) of arm A"
    min_effect = data.get("min_effect")
    if min_effect is not None and not (number(min_effect, False) and 0 <= min_effect < 1):
        return "'min_effect' is not a fraction between 0 and 1"
    for key in ("sets", "workload"):
        if not isinstance(data.get(key) or {}, dict):
            return f"{key!r} is not an object"
    previous = data.get("previous")
    if previous is not None and not (isinstance(previous, dict) and all(k in previous for k in ("id", "created_at", "statement"))):
        return "'previous' is not a stored conclusion"
    return None


def _headline_ratio(data: dict[str, Any]) -> dict[str, object] | None:
    """The ratio of the lowest concurrency level (single-stream decode is the headline on a GB10)."""
    levels = sorted(data.get("levels") or [], key=lambda lvl: lvl.get("concurrency", 0))
    return levels[0]["ratio"] if levels else None
