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
        if facts.kernels is None or result is None:
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
        caps = facts.capabilities
        if caps is None or cap not in caps:
            out.append(Check("capabilities", None, f"{cap} unknown"))
            continue
        got = caps[cap]
        if isinstance(got, dict):  # {"value": ..., "evidence": "..."}
            where = got.get("evidence", "")
            got = got.get("value")
        else:
            where = ""
        options = want if isinstance(want, list) else [want]
        ok = got is not None and got in options
        if got is None:
            out.append(Check("capabilities", None, f"{cap} unknown"))
        else:
            out.append(Check("capabilities", ok, f"{cap} = {got!r}{' (' + where + ')' if where else ''}"))
    return out
