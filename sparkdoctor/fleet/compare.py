"""N nodes compared at once: every difference with the majority value, the odd nodes, and a verdict.

The fields `check` collects are compared with `diff`'s own comparers and rules (sparkdoctor/diff/): N-1
pairwise comparisons against the first node give every node's value for every field that differs
anywhere, and the majority is counted from those. The node facts only a fleet has (Facts.fleet) are
compared here, with their verdicts in fleet/rules.py. A tie (two nodes, one value each) has no
majority: every node is named.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from sparkdoctor.diff.compare import compare
from sparkdoctor.diff.rules import BENIGN, RISKY
from sparkdoctor.facts import Facts
from sparkdoctor.fleet import rules
from sparkdoctor.fleet.drift import Drift


def settle(drift: Drift) -> Drift:
    """Majority value and odd nodes from the values."""
    counts = Counter(drift.values.values()).most_common()
    top = counts[0][1]
    if len(counts) > 1 and counts[1][1] == top:
        drift.has_majority, drift.majority = False, None
        drift.odd = list(drift.values)
    else:
        drift.has_majority, drift.majority = True, counts[0][0]
        drift.odd = [n for n, v in drift.values.items() if v != drift.majority]
    return drift


def compare_nodes(named: list[tuple[str, Facts]]) -> list[Drift]:
    """Every field that differs between any of the nodes (two or more), risky first."""
    if len(named) < 2:
        return []
    found = _check_fields(named) + _fleet_fields(named)
    return sorted(found, key=lambda d: (d.verdict != RISKY, d.area, d.key))


def _bare(facts: Facts) -> Facts:
    """What diff compares of a node: not its fleet facts, nor its target when the target probe did not answer (its
    interpreter and version were never read: not observed, rather than absent)."""
    return dataclasses.replace(facts, fleet=None, target=facts.target if facts.packages is not None else None)


def _check_fields(named: list[tuple[str, Facts]]) -> list[Drift]:
    ref_name, ref = next(((n, f) for n, f in named if f.packages is not None), named[0])  # a node that was probed
    bare_ref = _bare(ref)
    rows: dict[tuple[str, str], Drift] = {}  # values: the reference's, then each node's where it differs
    unseen: dict[str, set[str]] = {}  # node -> the areas it did not observe (a probe that failed there)
    for name, facts in named:
        if name == ref_name:
            continue
        compared = compare(bare_ref, _bare(facts))
        unseen[name] = {u["area"] for u in compared.not_compared if u["why"].endswith("in B")}
        for d in compared.differences:
            if (d.area, d.key) in rules.OVERRIDDEN:
                continue
            why = d.why.split("; ", 1)[1] if d.why.startswith("not installed in ") and "; " in d.why else d.why  # A/B words
            row = rows.setdefault((d.area, d.key), Drift(d.area, d.key, d.verdict, why, {ref_name: d.a}))
            row.values[name] = d.b
            if d.verdict == RISKY:
                row.verdict, row.why = RISKY, why
    used = rules.nccl_links(named)
    for row in rows.values():
        row.values = {n: row.values.get(n, row.values[ref_name]) for n, _ in named if row.area not in unseen.get(n, ())}
        link = row.key.split(" ")[1] if row.area == "host_health" and row.key.startswith("link ") else None
        if link and used is not None and row.verdict == RISKY and not used(link):
            row.verdict, row.why = BENIGN, rules.UNUSED_LINK
    return [settle(row) for row in rows.values()]


def _fleet_fields(named: list[tuple[str, Facts]]) -> list[Drift]:
    drifts = []
    for rule in rules.FLEET_RULES:
        values = {name: rule.read(facts.fleet or {}, facts) for name, facts in named}
        if len(set(values.values())) > 1:
            drifts.append(settle(Drift(rule.area, rule.key, rule.verdict, rule.why, values)))
    for per_key in rules.FLEET_RULES_PER_KEY:
        keyed = {name: per_key.read(facts.fleet or {}, facts) for name, facts in named}
        keys = {k for per in keyed.values() for k in per}
        if per_key.shared_only:
            keys = {k for k in keys if all(k in per for per in keyed.values())}
        verdict, why = per_key.verdict, per_key.why
        if per_key.pinned_by and not rules.pinned(named, per_key.pinned_by):
            verdict, why = BENIGN, rules.UNPINNED.format(per_key.pinned_by)
        for key in sorted(keys):
            values = {name: per.get(key) for name, per in keyed.items()}
            if len(set(values.values())) > 1:
                drifts.append(settle(Drift(per_key.area, f"{per_key.key} {key}", verdict, why, values)))
    low = rules.memory_headroom(named)
    if low is not None:
        drifts.append(low)
    return drifts


def unpaired_links(named: list[tuple[str, Facts]]) -> dict[str, list[str]]:
    """{node: [links that are up, addressed, on a subnet no other node has]}: a cable to nowhere, or a
    port cabled to another node's port of another subnet (a mis-cabled ring)."""
    subnets = {name: rules.up_subnets(facts) for name, facts in named}
    found: dict[str, list[str]] = {}
    for name, links in subnets.items():
        others = {s for n, ls in subnets.items() if n != name for s in ls.values()}
        lonely = sorted(link for link, subnet in links.items() if subnet not in others)
        if lonely:
            found[name] = lonely
    return found
