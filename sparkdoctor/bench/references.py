"""Correctness references: the probe answers of a run the user marked good, one per model identity.

Kept as JSON under `<state>/references/<key>.json` (written atomically): the key is the served checkpoint's
identity (bench/model_identity.py: config + safetensors header digest) when the model is a local folder, else
the served model's name. A reference file can also be given directly (`bench --reference-file`), e.g. one
shipped beside a recipe.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from sparkdoctor.bench.correctness import Answer

REFERENCE_VERSION = 1


def key_of(toolchain_facts: dict[str, Any], served_model: str) -> str:
    ident = (((toolchain_facts.get("recipe") or {}).get("model") or {}).get("identity") or {})
    if isinstance(ident, dict) and isinstance(ident.get("sha256"), str):
        return "model-" + str(ident["sha256"])[:32]
    return "name-" + hashlib.sha256(served_model.encode()).hexdigest()[:32]


def folder() -> Path:
    from sparkdoctor.locations import state_dir

    return state_dir() / "references"


def load(path: Path) -> tuple[list[Answer] | None, str | None]:
    """The answers of a reference file, or (None, why) when there is none or it cannot be read."""
    try:
        doc = json.loads(path.read_text())
        if doc.get("reference_version") != REFERENCE_VERSION or not isinstance(doc.get("answers"), list):
            return None, f"{path}: not a sparkdoctor correctness reference (version {REFERENCE_VERSION})"
        return [Answer.from_dict(a) for a in doc["answers"] if isinstance(a, dict)], None
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        return None, f"{path}: unreadable reference ({type(exc).__name__})"


def save(path: Path, answers: list[Answer], meta: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"reference_version": REFERENCE_VERSION, **meta, "answers": [a.__dict__ for a in answers]}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".ref-")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh, indent=1)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
