"""Items fitted to a terminal's width, each wrapped under its own column.

Only at a real terminal (`Sink.at_terminal`): there rich wraps an item's text at the console's width and folds a word
longer than its column (a path, a URL), and every continued line starts under the item's text, never under its mark
or label. On a pipe or in a file the views print their lines whole, one item a line, whatever COLUMNS says: scripts
read them (README, "Console output"). Drawn with rich's own grid (`Table.grid`, `overflow="fold"`), not by hand.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from sparkdoctor.views.commands import split_commands

_HANG = re.compile(r"\s*(?:\d+\. )?")
"""What a plain line's continuation goes under: its indent, and a step's number."""
_LABEL = re.compile(r"[A-Z][A-Za-z]*(?: [^\s:]+)?: ")
"""A line with no indent that starts with a label (`Target: `, `Note: `, `Fix ID: `) goes on under the text after it."""


def grid(rows: Iterable[Sequence[Text | str]], gap: int = 2) -> Table:
    """`rows` of (label, text): the labels one column, never wrapped; the texts the other, wrapped (long words
    folded) within what the console leaves them; `gap` spaces between (a label's own trailing spaces are kept)."""
    table = Table.grid(padding=(0, gap))
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    for label, text in rows:
        table.add_row(label, text)
    return table


def with_commands(console: Console, indent: int, label: Text, pieces: Sequence[tuple[Text, bool]], label_width: int,
                  gap: int = 2) -> None:
    """A labelled item whose text holds shell commands (pieces of (text, is_command), sparkdoctor/views/commands.py):
    its prose wrapped under the text's column, each command on a line of its own in that column, whole at any width
    (a terminal folds a line wider than itself and copies it as one), never broken where a person copies it from."""
    for i, (piece, is_command) in enumerate(pieces):
        head = (label if i == 0 else Text("")).copy()
        head.pad_right(max(0, label_width - head.cell_len))
        if is_command:
            line = Text(" " * indent)
            line.append_text(head)
            line.append(" " * gap)
            line.append_text(piece)
            console.print(line, no_wrap=True, overflow="ignore", crop=False)
        elif not label_width:  # no label column: rich would still give the empty one a cell
            console.print(Padding(piece, (0, 0, 0, indent)), overflow="fold")
        else:
            console.print(Padding(grid([(head, piece)], gap=gap), (0, 0, 0, indent)))


def hanging(console: Console, label: Text | str, *texts: Text | str) -> None:
    """One item: `label`, then its first text beside it and each further text on lines of their own, all wrapped
    under the first text's column."""
    console.print(grid([(label, texts[0]), *(("", text) for text in texts[1:])]))


def _label(line: str, width: int) -> str:
    """What a plain line goes on under: its indent and a step's number, else a label it starts with (its first word
    alone where the whole label would take more than a third of the width), else nothing."""
    found = _HANG.match(line)
    if found and found.group():
        return found.group()
    labelled = _LABEL.match(line)
    if not labelled:
        return ""
    label = labelled.group()
    return label if len(label) <= width // 3 else label[:label.index(" ") + 1]


def plain_lines(console: Console, lines: Iterable[str]) -> None:
    """Plain lines (no markup), each wrapped under its text: after its indent and a step's number (`  3. `), or
    after its label (`Target: `); a shell command in one goes on a line of its own under that text, whole."""
    for line in lines:
        label = _label(line, console.width)
        pieces = split_commands(line[len(label):])
        if any(is_command for _, is_command in pieces):  # a command in it: on a line of its own, whole
            with_commands(console, 0, Text(label), [(Text(piece), is_command) for piece, is_command in pieces],
                          len(label), gap=0)
        elif not label:
            console.print(Text(line), overflow="fold")
        else:
            console.print(grid([(label, Text(line[len(label):]))], gap=0))


def said(console: Console, head: Text, text: str, indent: int = 0) -> None:
    """`head` (styled) then `text` (plain) as one line of prose, wrapped at the console's width; a shell command in
    `text` goes on a line of its own, whole at any width, the prose around it wrapped under `indent`."""
    pieces = [(Text(piece), is_command) for piece, is_command in split_commands(text)]
    if not any(is_command for _, is_command in pieces):
        return console.print(Text(" " * indent).append_text(head).append(text))
    first = head.copy().append(text[:len(text) - len(text.lstrip())])  # the space between them, which pieces lose
    if not pieces[0][1]:
        first.append_text(pieces.pop(0)[0])
    with_commands(console, indent, Text(""), [(first, False), *pieces], 0)
