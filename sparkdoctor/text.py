"""Text that reaches a user's terminal from files, tools and targets."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable

QUOTED = 200
"""The most characters of one value an error line quotes; a longer value is cut there and its length said."""
_LONG_RUN = re.compile(rf"[^\s'\"…\0]{{{QUOTED + 1},}}")


def shown(text: str) -> str:
    """`text` with every control character escaped as one_line() does, line breaks and tabs kept: what a
    terminal prints as written (an ESC from a snapshot or a server's model name would otherwise drive it)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in "\n\t" else repr(c)[1:-1] for c in text)


def one_line(message: str) -> str:
    """`message` with every line break and control character escaped (the way Python spells it in a
    literal): an error is one line, whatever a file's keys, a path or a tool's output held."""
    if message.isprintable():
        return message
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


def clip(text: str, limit: int, tail: bool = False) -> str:
    """At most about `limit` characters of `text`, cut at a word boundary (never mid-word) with "..." where
    something was left out: its start, or with tail=True its end (where a tool's error usually is)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    if tail:
        cut = text[-limit:]
        space = cut.find(" ")
        return "..." + (cut[space:] if 0 <= space < limit // 2 else cut)
    cut = text[:limit]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut) + " ..."


def with_remedy(title: str, remedy: str) -> str:
    """`title; remedy` on one line, each setting said once: a remedy part `launch with FLAGS` is left out when the
    title already ends with those FLAGS (a memory verdict's "it fits with FLAGS"); every other part is kept."""
    parts = [p for p in remedy.split("; ") if p and not (p.startswith("launch with ") and
                                                          title.endswith(" " + p.removeprefix("launch with ")))]
    return "; ".join([title, *parts])


def quoted(value: str) -> str:
    """`value` as an error line quotes it: whole, or its first QUOTED characters and its length."""
    return value if len(value) <= QUOTED else f"{value[:QUOTED]}… ({len(value):,} characters)"


def error_line(message: str, given: Iterable[str] | None = None) -> str:
    """`message` as one line (one_line) that quotes no value longer than QUOTED whole: each value of the command line
    (`given`; default sys.argv) found in it is cut (quoted), then any other run of more than QUOTED characters without
    a space or quote (a value changed on its way: a path resolved, a name read from a file), its closing punctuation
    kept. Every error and warning line (stderr.say) and every JSON error message (errors.describe) passes here."""
    line = one_line(message)
    if len(line) <= QUOTED:
        return line
    values = set()
    for arg in sys.argv[1:] if given is None else given:
        values.add(arg)
        if arg.startswith("-") and "=" in arg:  # --python=VALUE: the line quotes VALUE
            values.add(arg.split("=", 1)[1])
    cut_values = sorted({one_line(v) for v in values if len(v) > QUOTED}, key=len, reverse=True)
    for i, value in enumerate(cut_values):  # a NUL cannot be in a line one_line made: it marks where each one goes
        line = line.replace(value, f"\0{i}\0")

    def cut(run: re.Match[str]) -> str:
        text = run.group()
        value = text.rstrip(":,;.)")
        return quoted(value) + text[len(value):]

    line = _LONG_RUN.sub(cut, line)
    for i, value in enumerate(cut_values):
        line = line.replace(f"\0{i}\0", quoted(value))
    return line


def shell_word(word: str) -> str:
    """`word` in single quotes, as a POSIX shell reads it back as one word: a version read from a target's METADATA
    (`1.0';touch x;'`) in a command a user copies stays a version, never a second command."""
    return "'" + word.replace("'", "'\"'\"'") + "'"
