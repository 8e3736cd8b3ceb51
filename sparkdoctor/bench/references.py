"""Correctness references: the probe answers of a run the user marked good, one per model identity.

Kept as JSON under `<state>/references/<key>.json` (written atomically): the key is the served checkpoint's
identity (bench/model_identity.py: config + safetensors header digest) when the model is a local folder, else
the served model's name. A reference file can also be given directly (`bench --reference-file`), e.g. one
shipped beside a recipe. `Answer`, the unit a reference stores, lives here too; bench/correctness.py asks the
server for answers and judges them (it imports this module, never the other way).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkdoctor import files, inputs
from sparkdoctor.ledger.compare import dig
from sparkdoctor.locations import state_dir

REFERENCE_VERSION = 1
MAX_REFERENCE = 16 * 1024 * 1024  # a reference holds a few dozen short answers
MAX_TOKENS = 65_536  # per answer's list: far past the probes' prompts and answers


@dataclass
class Answer:
    """One probe request's answer."""

    prompt: str
    text: str = ""
    prompt_ids: list[int] | None = None   # the prompt's token ids (vLLM, echo)
    ids: list[int] | None = None          # the greedy answer's token ids
    logprobs: list[float] | None = None   # their log-probabilities
    scored: list[float] | None = None     # teacher-forced log-probabilities of the REFERENCE's ids
    error: str | None = None
    margins: list[float] | None = None    # each greedy token's log-probability over the runner-up's (vLLM)
    scoring_error: str | None = None      # why scoring the reference's tokens failed (the answer itself came)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Answer:
        """ValueError for a field of the wrong shape: a reference file may be someone else's (--reference-file)."""
        fields: dict[str, Any] = {k: data.get(k) for k in cls.__dataclass_fields__ if k != "prompt"}
        for key, value in fields.items():
            if value is None:
                continue
            if key in ("text", "error", "scoring_error"):
                ok = isinstance(value, str)
            else:  # token ids are whole numbers; log-probabilities and margins are numbers
                kinds = (int,) if key in ("prompt_ids", "ids") else (int, float)
                ok = isinstance(value, list) and len(value) <= MAX_TOKENS and all(
                    isinstance(v, kinds) and not isinstance(v, bool) for v in value)
                if ok and not all(math.isfinite(v) for v in value):  # NaN would reach `--format json` as NaN
                    raise ValueError(f"answer {key} holds NaN or an infinite number")
            if not ok:
                raise ValueError(f"answer {key} is not " + ("text" if key in ("text", "error", "scoring_error") else
                                                            f"a list of at most {MAX_TOKENS:,} numbers"))
        if not isinstance(data.get("prompt", ""), str):
            raise ValueError("answer prompt is not text")
        return cls(str(data.get("prompt", "")), **fields)


def key_of(toolchain_facts: Mapping[str, object], served_model: str) -> str:
    digest = dig(toolchain_facts, ("recipe", "model", "identity", "sha256"))
    if isinstance(digest, str):
        return "model-" + digest[:32]
    return "name-" + hashlib.sha256(served_model.encode()).hexdigest()[:32]


def folder() -> Path:
    return state_dir() / "references"


def check_path(path: Path, write: bool, prompts: Sequence[str] = ()) -> tuple[list[Answer] | None, str | None]:
    """(the reference's answers, None), or (None, why `path` cannot be the reference file), asked before anything
    is measured: one to write must name a regular file or nothing (files.target_of: never a device, a FIFO or a
    folder; no answers); one to read was named by the user, so it must exist, be a regular file (sparkdoctor.inputs:
    opened without blocking, never /dev/zero or a FIFO), read as a reference, and hold an answer for each of
    `prompts` (the current probe set). The answers read here are the ones the run is judged against: the file is
    read once (read again when scoring, a file replaced in between was scored unvalidated)."""

    if write:
        try:
            final = files.target_of(path)
        except OSError as exc:
            return None, f"--reference-file {path}: {exc.strerror or exc}"
        if final == Path(os.devnull):  # a discarded reference can never be compared with: refused, not discarded
            return None, f"--reference-file {path}: is a device; a reference is written only as a regular file"
        return None, None
    if not os.path.lexists(path):
        return None, (f"--reference-file {path}: no such file (to make one, bench a known-good server with "
                      f"--reference --reference-file {path})")
    answers, problem = load(path, prompts)
    return (answers, None) if answers is not None else (None, f"--reference-file {problem}")


def load(path: Path, prompts: Sequence[str] = ()) -> tuple[list[Answer] | None, str | None]:
    """The answers of a reference file, or (None, why) when there is none, it cannot be read or it has nothing
    to score for `prompts` (the current probe set: a reference without an answer for each of them)."""

    try:
        doc = inputs.loads_finite(inputs.read_text(path, MAX_REFERENCE))
        if not isinstance(doc, dict):
            return None, f"{path}: unreadable reference (a JSON {type(doc).__name__}, not an object)"
        if doc.get("reference_version") != REFERENCE_VERSION or not isinstance(doc.get("answers"), list):
            return None, f"{path}: not a sparkdoctor correctness reference (version {REFERENCE_VERSION})"
        answers = [Answer.from_dict(a) for a in doc["answers"] if isinstance(a, dict)]
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{path}: unreadable reference ({exc.strerror or type(exc).__name__})"
    except inputs.NonFinite as exc:  # NaN, Infinity, 1e999
        return None, f"{path}: unreadable reference (answer value {exc} is not a finite number)"
    except (ValueError, TypeError, AttributeError, RecursionError) as exc:
        why = str(exc) if isinstance(exc, ValueError) and str(exc).startswith("answer ") else type(exc).__name__
        return None, f"{path}: unreadable reference ({why})"
    have = {a.prompt for a in answers if a.error is None}
    missing = [p for p in prompts if p not in have]
    if missing or not answers:
        what = ("it holds no answers" if not answers else
                f"no answer for {len(missing)} of its {len(prompts)} prompts: made for other probes")
        return None, (f"{path}: the reference has nothing to score for this probe set ({what}); make one by "
                      f"benching a known-good server with --reference")
    return answers, None


def save(path: Path, answers: list[Answer], meta: Mapping[str, object]) -> str | None:
    """Write the reference atomically, as a regular file only (files.write_text: a device, FIFO or folder at
    `path` is refused, never replaced); why it could not be written (a read-only or full state folder), else None:
    the measured run is kept either way."""

    doc = {"reference_version": REFERENCE_VERSION, **meta, "answers": [a.__dict__ for a in answers]}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        files.write_text(path, json.dumps(doc, indent=1, allow_nan=False))  # a ValueError: the caller refuses NaN first
    except OSError as exc:  # files.OutputError is one
        return str(exc) if isinstance(exc, files.OutputError) else exc.strerror or str(exc)
    return None
