"""Conditions on what sparkdoctor's probes found: kernel / CuTe DSL probe statuses and the static
capabilities read from installed files."""

from __future__ import annotations

from collections.abc import Mapping

from sparkdoctor.facts import Facts
from sparkdoctor.matrix.model import Check


def eval_kernels(value: Mapping[str, object], facts: Facts) -> list[Check]:
    out = []
    for probe_id, want in value.items():
        result = (facts.kernels or {}).get(probe_id)
        if result is None:
            out.append(Check("kernels", None, f"probe {probe_id} did not run"))
            continue
        status = result.get("status") if isinstance(result, dict) else result
        options = want if isinstance(want, list) else [want]
        ok = status in options
        detail = result.get("detail", "") if isinstance(result, dict) else ""
        out.append(Check("kernels", ok, f"probe {probe_id}: {status}{': ' + detail if detail else ''}"))
    return out


def eval_capabilities(value: Mapping[str, object], facts: Facts) -> list[Check]:
    out = []
    for cap, want in value.items():
        got = (facts.capabilities or {}).get(cap)
        where = ""
        if isinstance(got, dict):  # {"value": ..., "evidence": "..."}
            where, got = got.get("evidence", ""), got.get("value")
        if got is None:
            out.append(Check("capabilities", None, f"{cap} unknown"))
            continue
        options = want if isinstance(want, list) else [want]
        out.append(Check("capabilities", got in options, f"{cap} = {got!r}{' (' + where + ')' if where else ''}"))
    return out
