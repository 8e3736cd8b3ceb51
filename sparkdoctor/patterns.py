"""Regular expressions that come from files (a matrix entry's env_matches, a file check's regex, a kernel
probe's sass pattern, a checkpoint's `re:` ignore list): one rule for whether such a pattern may be used, and
one bounded way to run it.

A pattern from a file (maybe a user's --matrix, a third-party update, a downloaded checkpoint) could backtrack
for minutes: `(a+)+$`, or `(x|x)+y` whose two branches match the same text. Two bounds: the validator refuses
nested quantifiers (the usual catastrophic shape), and search() matches any pattern that repeats with the
`regex` module under a time limit; the caller turns a pattern that ran out of time into an unknown, said.
`regex` costs ~20 ms to import, so it is imported only when a pattern that repeats meets a value.
"""

from __future__ import annotations

import re
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

if sys.version_info >= (3, 11):
    from re import _constants as _sre_constants
    from re import _parser as _sre_parse
else:  # pragma: no cover (3.10)
    import sre_constants as _sre_constants
    import sre_parse as _sre_parse

MATCH_SECONDS = 0.25
BUDGET_SECONDS = 2.0  # what every timed match inside one budget() shares (all of one matrix evaluation)
_BUDGET: ContextVar[list[float] | None] = ContextVar("sparkdoctor_pattern_budget", default=None)
_REPEATS = {_sre_constants.MAX_REPEAT, _sre_constants.MIN_REPEAT}
_REPEATS |= {_sre_constants.POSSESSIVE_REPEAT} if hasattr(_sre_constants, "POSSESSIVE_REPEAT") else set()


def regex_error(pattern: str) -> str | None:
    """Why `pattern` does not compile, or None. A pattern Python only warns about counts as an error: a set such
    as `[[a]` or `[a&&b]` is read one way now and as set operations by a future Python, and a file's pattern must
    mean one thing (the warning would also reach the user's terminal as a raw FutureWarning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        try:
            _sre_parse.parse(pattern)  # parses every time: re.compile's cache would skip the warning
            re.compile(pattern)
        except FutureWarning as exc:
            return f"{exc}: a future Python reads this set differently (escape the character with a backslash)"
        except (re.error, RecursionError, OverflowError) as exc:
            return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None


def _unbounded(sub: object) -> bool:
    """Does this parsed (sub)pattern hold a quantifier that repeats more than once?"""
    return any(op in _REPEATS and av[1] > 1 or any(map(_unbounded, _children(av))) for op, av in _items(sub))


def _nested_quantifier(sub: object) -> bool:
    """A repeated group whose body repeats too, e.g. (a+)+ or (\\w*\\s?)*: exponential backtracking."""
    return any(op in _REPEATS and av[1] > 1 and _unbounded(av[2]) or any(map(_nested_quantifier, _children(av)))
               for op, av in _items(sub))


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
    """Why `pattern` may not be used (None when it may): it must compile, and repeat no repeat."""
    if not isinstance(pattern, str):
        return "must be a regular expression string"
    err = regex_error(pattern)
    if err:
        return f"bad regular expression: {err}"
    parsed = _sre_parse.parse(pattern)
    if _nested_quantifier(parsed):
        return "has a nested quantifier such as (a+)+, which can backtrack for minutes; write it without repeating a repeat"
    return None


@contextmanager
def budget(seconds: float = BUDGET_SECONDS) -> Iterator[None]:
    """Inside, every timed match shares `seconds` in all, and one that finds none left is unknown at once: each
    match alone is bounded, but a matrix of 1,000 entries whose patterns each ran out their 0.25 s took 250 s."""
    token = _BUDGET.set([seconds])
    try:
        yield
    finally:
        _BUDGET.reset(token)


@lru_cache(maxsize=256)
def _repeats(pattern: str) -> bool:
    return _unbounded(_sre_parse.parse(pattern))


def search(pattern: str, text: str, seconds: float = MATCH_SECONDS, at_start: bool = False) -> bool | None:
    """re.search (re.match with `at_start`), bounded: None when the pattern ran out of time (or cannot be run).

    A pattern with no repetition at all (every bundled one: `12\\.1a`, `^(?!sm_121a$)`) tries
    each start once at a cost bounded by its own length, so the standard re is linear there and
    nothing is imported; any repetition goes to the `regex` module, which takes a time limit.
    """
    if not _repeats(pattern):
        return (re.match if at_start else re.search)(pattern, text) is not None
    try:
        import regex  # lazily: ~20 ms, paid only when a repeating pattern meets a value
    except ImportError:  # pragma: no cover (a declared dependency)
        return None
    left = _BUDGET.get()
    if left is not None:
        if left[0] <= 0:
            return None
        seconds = min(seconds, left[0])
    started = time.monotonic()
    try:
        return (regex.match if at_start else regex.search)(pattern, text, timeout=seconds) is not None
    except (TimeoutError, regex.error, RecursionError):
        return None
    finally:
        if left is not None:
            left[0] -= time.monotonic() - started
