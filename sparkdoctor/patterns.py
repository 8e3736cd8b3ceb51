"""Regular expressions that come from files (a matrix entry's env_matches, a file check's regex, a kernel
probe's sass pattern): one rule for whether such a pattern may be used."""

from __future__ import annotations

import re
import sys
import warnings

if sys.version_info >= (3, 11):
    from re import _parser as _sre_parse
else:  # pragma: no cover (3.10)
    import sre_parse as _sre_parse


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
