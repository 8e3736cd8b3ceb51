"""Strings into rich renderables for the console report: bounded, never markup, ASCII where needed.

Every string the console prints goes through Ink.text(): it is clipped (a 25 MB field in a snapshot would stall
rich's line wrapping for minutes), its control characters escaped (an ESC sequence in a snapshot's env value or a
server's model name prints as `\x1b[31m`, never reaching the terminal raw), made a rich `Text` (so `[bold]` or `[/]`
in a package version prints as written instead of being parsed as markup), and, when the output stream cannot encode
Unicode (PYTHONIOENCODING=ascii, an ASCII-only pipe), spelled in ASCII before rich measures it, so the layout still
fits the width. The caller (cli) decides which: see needs_ascii().
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.style import Style
from rich.table import Table
from rich.text import Text

from sparkdoctor.describe import FACT_CHARS, clip
from sparkdoctor.text import shown
from sparkdoctor.views.fitted import grid

# What the report itself writes outside ASCII, and how to say it in ASCII.
ASCII_SPELLING = {
    "✓": "ok", "✗": "NO", "✖": "[x]", "▲": "[!]", "ℹ": "[i]", "•": "-", "·": "|", "→": "->", "…": "...",
    "–": "-", "—": "-", "≤": "<=", "≥": ">=", "‘": "'", "’": "'", "“": '"', "”": '"',
}
_ASCII_TABLE = str.maketrans(ASCII_SPELLING)


def to_ascii(text: str) -> str:
    """The report's own symbols spelled out; any other non-ASCII character becomes `?`."""
    return text.translate(_ASCII_TABLE).encode("ascii", "replace").decode("ascii")


def escaped(value: object) -> str:
    """`value` as an f-string writes it, escaped for rich: a name, label, id or figure read from a ledger, recipe,
    imported file or registry prints as written (`qwen3 [fp8]`, `torch 2.9.0+cu130 [cu13]`, `[/]`), never as markup."""
    return escape(str(value))


def needs_ascii(stream: object) -> bool:
    """True when `stream` cannot encode the report's symbols (cli passes this as ascii_only)."""
    encoding = getattr(stream, "encoding", None)
    if not encoding:
        return False  # a StringIO or a file object without an encoding takes str as is
    try:
        "".join(ASCII_SPELLING).encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return True
    return False


class Ink:
    """The glyphs and the one way strings become Text, for Unicode or pure-ASCII output."""

    def __init__(self, ascii_only: bool = False) -> None:
        self.ascii_only = ascii_only
        self.bullet, self.yes, self.no, self.none = ("-", "ok", "NO", "-") if ascii_only else ("•", "✓", "✗", "–")
        self.sev = {"error": "[x]", "warn": "[!]", "info": "[i]"} if ascii_only else {"error": "✖", "warn": "▲", "info": "ℹ"}

    def plain(self, value: object, limit: int = FACT_CHARS) -> str:
        text = shown(clip(value, limit))
        return to_ascii(text) if self.ascii_only else text

    def text(self, value: object, style: str | Style = "", limit: int = FACT_CHARS) -> Text:
        return Text(self.plain(value, limit), style=style)

    def append(self, line: Text, value: object, style: str | Style = "", limit: int = FACT_CHARS) -> Text:
        line.append(self.plain(value, limit), style=style)
        return line

    def link(self, url: object) -> Text:
        """A URL, clickable on a terminal (a Style object: a URL never goes through style parsing)."""
        text = self.plain(url)
        return Text(text, style=Style(link=text) if text.isascii() and " " not in text else "")

    def mark(self, label: str, value: object) -> Text:
        """`compiled ✓` / `compiled ✗` / `compiled –` (True / False / not known)."""
        t = Text(f"{label} ")
        if value is True:
            t.append(self.yes, style="green")
        elif value is False:
            t.append(self.no, style="red")
        else:
            t.append(self.none, style="dim")
        return t


def labelled(rows: list[tuple[str, object]], ink: Ink, label_width: int | None = None) -> Table:
    """Label / value rows; a value that is not already a renderable is made Text by `ink`."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True, min_width=label_width)
    grid.add_column(overflow="fold")
    for label, value in rows:
        grid.add_row(ink.text(label), value if isinstance(value, (Text, Table)) else ink.text(value))
    return grid


def pairs(rows: list[tuple[Text, Text]]) -> Table:
    """Two columns; the second wraps under itself, not under the first."""
    return grid(rows, gap=1)


def section(console: Console, title: str, count: int | None = None) -> None:
    console.print()
    console.print(Text(title + (f" ({count})" if count is not None else ""), style="bold"))
