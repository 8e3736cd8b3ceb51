"""The shell commands inside a line of prose, so that a view prints each on a line of its own, never wrapped.

A remedy reads `pip install torch --index-url https://download.pytorch.org/whl/cu130 (the version your vLLM pins),
then ...`: wrapped as prose at 80 columns, the URL went to the next line and the command copied from the terminal
broke. A command is a code span that starts with a program (`` `swapoff -a && swapon -a` ``), or, in the open, an
install or removal (`pip install ...`, `uv pip ...`, `sudo ...`, `rm -rf ...`, `docker rm ...`, `python -m ...`)
or a `sparkdoctor`/`vllm` command with an option, never one piped or chained into (`echo 3 | sudo tee ...`: where
that line starts is not known, so it stays prose); it ends at `,` `;` `(` `)`, at a word of prose (`and`, `or`,
`then`, `which`, ...) or at the end of the sentence. Quoted words (`"flashinfer-python==<installed version>"`) are
one word. A command in parentheses (`drop it first (`sync; ...`)`, `(e.g. sparkdoctor ...)`) loses them: on a line of its
own it needs none.
"""

from __future__ import annotations

import re

_SPAN = re.compile(r"`([^`\n]+)`")
_SPAN_PROGRAMS = frozenset(
    "pip pip3 uv sudo docker rm python python3 sparkdoctor vllm swapoff swapon grep readelf nvidia-ctk systemctl "
    "export unset git curl ls cat sync echo".split())
_OPEN = re.compile(r"(?<![\w/.`'\"-])(?<!\| )(?<!&& )(?:pip3? (?:install|uninstall) |uv (?:pip|add|sync) |sudo |rm -r?f |"
                   r"(?:docker|podman) rm |python3? -m |sparkdoctor |vllm )")
_NEEDS_OPTION = ("sparkdoctor ", "vllm ")
_WORD = re.compile(r"\"[^\"\n]*\"|'[^'\n]*'|[^\s,;()\"'`]+")
_PROSE = frozenset("which with and or then to if for from matching once instead when that so on in is are "
                   "before after until e.g. gives says shows lists".split())


def _open_command(text: str, start: int) -> int:
    """Where the command starting at `start` ends (`start` when what is there is prose, not a command)."""
    end = pos = start
    words = 0
    while True:
        while pos < len(text) and text[pos] in " \n":
            pos += 1
        found = _WORD.match(text, pos)
        if found is None or found.group().lower() in _PROSE:
            break
        end = pos = found.end()
        words += 1
    command = text[start:end]
    if command.endswith(".") and not command.endswith(".."):
        end -= 1  # the sentence's full stop
    head = text[start:].split(" ", 1)[0] + " "
    enough = words >= 3 and (head not in _NEEDS_OPTION or " -" in command)
    return end if enough else start


def split_commands(text: str) -> list[tuple[str, bool]]:
    """`text` as (piece, is_command) in order: the prose between the commands, stripped, and never empty."""
    pieces: list[tuple[str, bool]] = []
    prose_from = pos = 0
    while pos < len(text):
        span, opened = _SPAN.search(text, pos), _OPEN.search(text, pos)
        if opened is not None and (span is None or opened.start() < span.start()):
            start, end = opened.start(), _open_command(text, opened.start())
            command = " ".join(text[start:end].split())  # a remedy's own line breaks are not the command's
        elif span is not None:
            start, end = span.start(), span.end()
            words = span.group(1).split()
            command = span.group(1) if len(words) > 1 and words[0].rstrip(";") in _SPAN_PROGRAMS else ""
        else:
            break
        if not command or end == start:
            pos = end if end > start else start + 1
            continue
        pieces.append((text[prose_from:start], False))
        pieces.append((command, True))
        prose_from = pos = end
    pieces.append((text[prose_from:], False))
    for i in range(1, len(pieces) - 1, 2):  # a command between prose pieces: its parentheses, if any, go
        before, after = pieces[i - 1][0].rstrip(), pieces[i + 1][0].lstrip()
        if (lead := re.search(r" ?\((e\.g\. ?)?$", before)) and after.startswith(")"):  # `serves (e.g. CMD)`: `serves, e.g.`
            pieces[i - 1], pieces[i + 1] = (before[:lead.start()] + (", e.g." if lead.group(1) else ""), False), (after[1:], False)
    out = []
    for piece, is_command in pieces:
        piece = piece.strip() if is_command else piece.strip().removeprefix(", ").removeprefix("; ").strip()
        if piece:
            out.append((piece, is_command))
    return out

