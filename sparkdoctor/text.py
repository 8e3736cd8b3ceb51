"""Text that reaches a user's terminal from files, tools and targets."""

from __future__ import annotations


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
