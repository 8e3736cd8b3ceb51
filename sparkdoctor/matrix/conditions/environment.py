"""Conditions on the target's environment variables: set / unset / equal / one of (`env`) and a
regular expression (`env_matches`).

A pattern comes from a matrix file (maybe a user's --matrix) and the value from the box or a
snapshot, so a backtracking pattern such as `(a+)+$` against a long value could hang check for
minutes. Two bounds: the validator refuses nested quantifiers (the usual catastrophic shape), and
the evaluator matches with the `regex` module under a time limit (a pattern that runs out of time
makes the condition unknown, said in the evidence). `regex` costs ~20 ms to import, so it is
imported only when a pattern that repeats meets a value that is set (see search()).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from sparkdoctor.facts import Facts
from sparkdoctor.matrix.conditions.shapes import as_list
from sparkdoctor.matrix.model import Check
from sparkdoctor.patterns import regex_error

if sys.version_info >= (3, 11):
    from re import _constants as _sre_constants
    from re import _parser as _sre_parse
else:  # pragma: no cover (3.10)
    import sre_constants as _sre_constants
    import sre_parse as _sre_parse

MATCH_SECONDS = 0.25
SHOWN_VALUE = 120
_REPEATS = {_sre_constants.MAX_REPEAT, _sre_constants.MIN_REPEAT}
_REPEATS |= {_sre_constants.POSSESSIVE_REPEAT} if hasattr(_sre_constants, "POSSESSIVE_REPEAT") else set()


def _value(name: str, got: str | None) -> str:
    if got is None:
        return f"{name} is not set"
    if len(got) > SHOWN_VALUE:
        return f"{name}={got[:SHOWN_VALUE]}… ({len(got)} characters)"
    return f"{name}={got}"


def v_env(value: object) -> str | None:
    if not isinstance(value, dict) or not value:
        return "must be a table of NAME = true (set) | false (unset) | \"value\" (equals) | [\"a\", \"b\"] (one of)"
    for name, rule in value.items():
        if not (isinstance(rule, (bool, str)) or (isinstance(rule, list) and rule and all(isinstance(x, str) for x in rule))):
            return f"{name}: must be true, false, a string or a list of strings"
    return None


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


def _unbounded(sub: object) -> bool:
    """Does this parsed (sub)pattern hold a quantifier that repeats more than once?"""
    for op, av in _items(sub):
        if op in _REPEATS and av[1] > 1:
            return True
        if any(_unbounded(child) for child in _children(av)):
            return True
    return False


def _nested_quantifier(sub: object) -> bool:
    """A repeated group whose body repeats too, e.g. (a+)+ or (\\w*\\s?)*: exponential backtracking."""
    for op, av in _items(sub):
        if op in _REPEATS and av[1] > 1 and _unbounded(av[2]):
            return True
        if any(_nested_quantifier(child) for child in _children(av)):
            return True
    return False


def _items(sub: object) -> list[tuple[Any, Any]]:
    """(opcode, argument) pairs of a parsed (sub)pattern; sre's arguments are tuples of mixed kinds."""
    return list(sub.data) if isinstance(sub, _sre_parse.SubPattern) else []


def _children(av: object) -> list[object]:
    """Every sub-pattern inside an opcode's argument (groups, branches, lookarounds, conditionals)."""
    if isinstance(av, _sre_parse.SubPattern):
        return [av]
    if isinstance(av, (tuple, list)):
        return [c for x in av for c in _children(x)]
    return []


def regex_problem(pattern: object) -> str | None:
    """Why `pattern` may not be used in env_matches (None when it may)."""
    if not isinstance(pattern, str):
        return "must be a regular expression string"
    err = regex_error(pattern)
    if err:
        return f"bad regular expression: {err}"
    parsed = _sre_parse.parse(pattern)
    if _nested_quantifier(parsed):
        return "has a nested quantifier such as (a+)+, which can backtrack for minutes; write it without repeating a repeat"
    return None


def v_regex_table(value: object) -> str | None:
    if not isinstance(value, dict) or not value:
        return "must be a table of NAME = \"regular expression\""
    for name, rx in value.items():
        err = regex_problem(rx)
        if err:
            return f"{name}: {err}"
    return None


@lru_cache(maxsize=256)
def _repeats(pattern: str) -> bool:
    return _unbounded(_sre_parse.parse(pattern))


def search(pattern: str, text: str, seconds: float = MATCH_SECONDS) -> bool | None:
    """re.search, bounded: None when the pattern ran out of time (or cannot be run).

    A pattern with no repetition at all (every bundled one: `12\\.1a`, `^(?!sm_121a$)`) tries
    each start once at a cost bounded by its own length, so the standard re is linear there and
    nothing is imported; any repetition goes to the `regex` module, which takes a time limit.
    """
    if not _repeats(pattern):
        return re.search(pattern, text) is not None
    try:
        import regex  # lazily: ~20 ms, paid only when a repeating pattern meets a value
    except ImportError:  # pragma: no cover (a declared dependency)
        return None
    try:
        return regex.search(pattern, text, timeout=seconds) is not None
    except (TimeoutError, regex.error, RecursionError):
        return None


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
            out.append(Check("env_matches", None, f"{_value(name, str(got))}: /{rx}/ could not be matched within {MATCH_SECONDS} s"))
        else:
            out.append(Check("env_matches", ok, f"{_value(name, got)} ({'matches' if ok else 'does not match'} /{rx}/)"))
    return out
