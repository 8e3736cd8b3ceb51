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
