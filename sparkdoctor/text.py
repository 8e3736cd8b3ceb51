"""Text that reaches a user's terminal from files, tools and targets."""

from __future__ import annotations


def one_line(message: str) -> str:
    """`message` with every line break and control character escaped (the way Python spells it in a
    literal): an error is one line, whatever a file's keys, a path or a tool's output held."""
    if message.isprintable():
        return message
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
