"""Conditions on the target's environment variables: set / unset / equal / one of (`env`) and a
regular expression (`env_matches`).

A pattern comes from a matrix file (maybe a user's --matrix) and the value from the box or a
snapshot: it is validated and run by sparkdoctor.patterns (no nested quantifiers; a time limit), and a
pattern that runs out of time makes the condition unknown, said in the evidence.
"""

from __future__ import annotations

from collections.abc import Mapping

from sparkdoctor.facts import Facts
from sparkdoctor.matrix.conditions.shapes import as_list, v_table
from sparkdoctor.matrix.model import Check
from sparkdoctor.patterns import BUDGET_SECONDS, MATCH_SECONDS, regex_problem, search

SHOWN_VALUE = 120


def _value(name: str, got: str | None) -> str:
    if got is None:
        return f"{name} is not set"
    if len(got) > SHOWN_VALUE:
        return f"{name}={got[:SHOWN_VALUE]}… ({len(got)} characters)"
    return f"{name}={got}"


def v_env(value: object) -> str | None:
    return v_table(value, 'NAME = true (set) | false (unset) | "value" (equals) | ["a", "b"] (one of)', lambda _, rule: None
                   if isinstance(rule, (bool, str)) or (isinstance(rule, list) and rule and all(isinstance(x, str) for x in rule))
                   else "must be true, false, a string or a list of strings")


def eval_env(value: Mapping[str, object], facts: Facts) -> list[Check]:
    out = []
    for name, rule in value.items():
        if facts.env is None:
            out.append(Check("env", None, f"environment unknown (entry looks at {name})"))
            continue
        got = facts.env.get(name)
        if rule is True:
            out.append(Check("env", got is not None, _value(name, got)))
        elif rule is False:
            out.append(Check("env", got is None, f"{name} is not set" if got is None else f"{_value(name, got)} is set"))
        else:
            options = as_list(rule)
            if got is None:
                out.append(_default_check(name, options, facts))
                continue
            ok = got in options
            out.append(Check("env", ok, f"{_value(name, got)} ({'one of' if ok else 'not one of'} {', '.join(options)})"))
    return out


def _default_check(name: str, options: list[str], facts: Facts) -> Check:
    """A value rule on a variable that is not set: judged at the default the installed release uses
    (capability env_default.NAME, read from its source by the capability probe), so a feature that is
    on by default counts as on. With no reader of the variable installed, unset is just unset."""
    cap = (facts.capabilities or {}).get(f"env_default.{name}")
    if cap is None:
        return Check("env", False, f"{name} is not set (not one of {', '.join(options)})")
    default, where = (cap.get("value"), cap.get("evidence", "")) if isinstance(cap, dict) else (cap, "")
    source = f" ({where})" if where else ""
    if default is None:
        return Check("env", None, f"{name} is not set and its default could not be read{source}")
    if default is False:
        return Check("env", False, f"{name} is not set and has no default{source} (not one of {', '.join(options)})")
    ok = str(default) in options
    return Check("env", ok, f"{name} is not set: the installed release defaults it to {default!r}{source} ({'one of' if ok else 'not one of'} {', '.join(options)})")


# ---- env_matches ---------------------------------------------------------------------------------


def v_regex_table(value: object) -> str | None:
    return v_table(value, 'NAME = "regular expression"', lambda _, rx: regex_problem(rx))


def eval_env_matches(value: dict[str, str], facts: Facts) -> list[Check]:
    out = []
    for name, rx in value.items():
        if facts.env is None:
            out.append(Check("env_matches", None, f"environment unknown (entry looks at {name})"))
            continue
        got = facts.env.get(name)
        if got is None:
            out.append(Check("env_matches", False, f"{name} is not set (does not match /{rx}/)"))
            continue
        ok = search(rx, got) if isinstance(got, str) else None
        if ok is None:
            out.append(Check("env_matches", None, f"{_value(name, str(got))}: /{rx}/ could not be matched within {MATCH_SECONDS} s "
                                                          f"(or the {BUDGET_SECONDS:g} s all patterns of a check share)"))
        else:
            out.append(Check("env_matches", ok, f"{_value(name, got)} ({'matches' if ok else 'does not match'} /{rx}/)"))
    return out
