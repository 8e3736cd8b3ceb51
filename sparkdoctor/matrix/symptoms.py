"""Find matrix entries by their symptoms in pasted error text or a server log.

One matcher for `sparkdoctor explain` and the serve log scanner, so a line means the same entry
wherever it is read. Two passes per symptom:

  exact     the symptom string appears as written (the code that prints it was read: see the
            entries' file checks);
  tolerant  it appears once the text and the symptom are both normalised: ANSI colour codes
            dropped, every run of whitespace removed (a terminal or a paste that wrapped a line
            anywhere, even mid-word, still matches), letters folded to lower case, file paths
            replaced by one token and numbers of three digits or more by another (a path in
            site-packages, a PID, a size or a driver version differs from one box to the next).

Pure functions over strings and entries; nothing here reads files or the environment.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol, TypeVar

from sparkdoctor.matrix.model import Entry
from sparkdoctor.matrix.textlines import BREAKS, Lines, join_lines, split_lines

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# A path: a drive, ./ or ../, then segments joined by '/'. Linear in the line's length: an attempt may start
# inside a run of segment characters only where a drive letter does (`C:`); everywhere else inside a run the
# first character's attempt already failed, and retrying from each later one cost O(run) apiece (a 40 KB
# base64 or JSON line took 27 s). The matches are exactly those of the unguarded pattern (test_explain.py).
_SEG = r"[\w.+@-]"
_PATH = re.compile(rf"(?:(?<!{_SEG})|(?!{_SEG})|(?=[A-Za-z]:))"
                   rf"(?:(?:[A-Za-z]:)?(?:\.{{0,2}}/)?(?:{_SEG}+/)+{_SEG}*|/{_SEG}+)")
# A number that varies from box to box: standing on its own (never digits inside a word such as
# sm_121a or e2m1x2) and of three digits or more (a size, a PID, a line number, a timeout, 2048,
# 35.69, 580.159.03). Shorter ones stay literal: "major versions [10]" is not "[12]".
_NUMBER = re.compile(r"(?<![\w.])(?=(?:[.,:]?\d){3})\d+(?:[.,:]\d+)*(?!\w)")
_SPACE = re.compile(r"\s+")
_ONE_SPACE = re.compile(r"\s")
_WORD = re.compile(r"\w+")
MIN_TOLERANT = 12  # a symptom shorter than this once normalised matches exactly or not at all
WRAP_LINES = 3  # a wrapped symptom is looked for across this many consecutive lines


class HasSymptoms(Protocol):
    """What the matcher reads of an entry: a matrix Entry, or whatever the serve scanner is given."""

    @property
    def id(self) -> str: ...

    @property
    def symptoms(self) -> list[str]: ...


E = TypeVar("E", bound=HasSymptoms)


@dataclass(frozen=True)
class SymptomMatch:
    """One entry found in the text: the symptom that matched, how, and where."""

    entry: Entry
    symptom: str
    how: str  # "exact" | "tolerant"
    line_no: int  # 1-based line of the text where the match starts (0 when it cannot be placed)
    line: str  # that line (or the lines a wrapped match spans), ANSI removed, stripped
    count: int = 1  # how many lines of the text matched this entry

    def to_dict(self) -> dict[str, object]:
        e = self.entry
        return {"id": e.id, "title": e.title, "severity": e.severity, "action": e.action, "evidence": e.evidence,
                "component": e.component, "remedy": e.remedy, "refs": e.refs, "fix": e.fix, "symptom": self.symptom,
                "match": self.how, "line_no": self.line_no, "line": self.line[:LINE_CHARS], "line_chars": len(self.line),
                "count": self.count}


LINE_CHARS = 4000  # of a matched line in JSON (the console shows 300): a 5 MB line was returned whole


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def normalise(text: str) -> str:
    """The form the tolerant pass compares: no colour, paths and numbers as tokens, no whitespace.

    A long text is normalised a part at a time, each cut just after a whitespace character: no path, number or
    whitespace run the patterns replace holds one, their look-arounds stop at one, and so does lower()'s final-sigma
    rule, so the parts give what the whole gives. At once, `re.sub` held every piece between matches (each space is
    one): a 100 MB log line took 1.2 GB."""
    return "".join([_normalise(part) for part in _parts(strip_ansi(text))])  # colour first: an escape may hold a space


PART = 1 << 20  # characters normalised at a time


def _normalise(text: str) -> str:
    text = text.lower().replace("\x00", "\ufffd")  # a NUL of the text never forms a token
    text = _PATH.sub("\x00p", text)
    text = _NUMBER.sub("\x00n", text)
    return _SPACE.sub("", text)


def _parts(text: str) -> Iterator[str]:
    """`text` in slices of about PART characters, each but the last ending with a whitespace character."""
    start = 0
    while start < len(text):
        cut = _ONE_SPACE.search(text, start + PART) if start + PART < len(text) else None
        end = cut.end() if cut else len(text)
        yield text[start:end]
        start = end


def _symptoms(entries: Iterable[E]) -> list[tuple[E, str, str]]:
    """(entry, symptom, its normalised form) for every live entry's symptoms. `withdrawn` is read duck-typed:
    the serve scanner passes any entry with symptoms."""
    live = [e for e in entries if not getattr(e, "withdrawn", False)]
    return [(e, s, _normalised_symptom(s)) for e in live for s in e.symptoms if s.strip()]


@lru_cache(maxsize=16384)
def _normalised_symptom(symptom: str) -> str:
    """normalise() of a matrix symptom, kept: the serve log scanner matches every line against every symptom,
    and normalising the bundled matrix's 90 symptoms again for each line was 84% of its cost (0.8 ms a line)."""
    return normalise(symptom)


def _tolerant_ok(norm: str) -> bool:
    return len(norm.replace("\x00p", "").replace("\x00n", "")) >= MIN_TOLERANT


def line_hits(line: str, entries: Iterable[E]) -> list[tuple[E, str, str]]:
    """(entry, symptom, "exact" | "tolerant") for each entry whose symptom appears in one log line; one per entry.

    A line that holds none of the entries' gate pieces (see _gate) holds none of their symptoms and is turned away
    without more: the serve log scanner reads every line a server prints, and normalising each one and comparing it
    with every symptom cost 0.3 ms a 1 KB line (a server printing 100 MB waited 113 s on its full pipe)."""
    rows, pieces = _index(entries)
    if pieces is not None and "\x1b" not in line:
        bare = "".join(line.lower().replace("\x00", "\ufffd").split())  # str.split's whitespace is \s's
        if not any(map(bare.__contains__, pieces)):
            return []
    return _line_hits(line, rows)


def _line_hits(line: str, rows: list[tuple[E, str, str]]) -> list[tuple[E, str, str]]:
    """line_hits() without the gate: every symptom compared with the line."""
    clean = strip_ansi(line).strip()
    norm = None
    found: list[tuple[E, str, str]] = []
    seen: set[str] = set()
    for entry, symptom, sym_norm in rows:
        if entry.id in seen:
            continue
        if symptom in line or symptom in clean:
            found.append((entry, symptom, "exact"))
            seen.add(entry.id)
            continue
        if norm is None:
            norm = normalise(line)
        if _tolerant_ok(sym_norm) and sym_norm in norm:
            found.append((entry, symptom, "tolerant"))
            seen.add(entry.id)
    return found


_Index = tuple[list[tuple[E, str, str]], "tuple[str, ...] | None"]
_INDEXES: list[tuple[list[object], tuple[object, object]]] = []  # the last few entry lists, newest last
GATE_CHARS = 24  # of a symptom, at most, in its gate piece


def _index(entries: Iterable[E]) -> _Index[E]:
    """The entries' symptom rows and gate, built once per list of entries (the scanner passes the same list for
    every line). A list of the very objects of a kept one is the same entries: an entry is not changed while lines
    are matched against it."""
    listed = list(entries)
    for kept, index in _INDEXES:
        if len(kept) == len(listed) and all(map(operator.is_, kept, listed)):
            return index  # type: ignore[return-value]
    rows = _symptoms(listed)
    index = (rows, _gate(rows))
    _INDEXES.append((listed, index))  # type: ignore[arg-type]
    del _INDEXES[:-8]
    return index


def _gate(rows: Iterable[tuple[object, str, str]]) -> tuple[str, ...] | None:
    """Pieces, one of which is in `bare` (a line without an escape character, lower-cased, its NULs read as U+FFFD,
    its whitespace removed) whenever the line holds a symptom of `rows`, exactly or tolerantly; None when a symptom
    gives no piece (every line is then compared with every symptom).

    A symptom's piece is the longest literal run of its normal form (between the path and number tokens), less the
    first character of the first run (it may stand on a token's letter, `\\x00n`), cut at Greek sigmas (the one
    letter whose lower case depends on its neighbours). Tolerant: each character of a run is a character of the
    lower-cased line that no path or number took, with only whitespace between two of them, so the run is in `bare`.
    Exact: the symptom, lower-cased and without whitespace, is in `bare`, and so is every run of its normal form.
    A symptom too short for the tolerant pass gives its lower-cased form without whitespace, cut the same way."""
    pieces: set[str] = set()
    for _, symptom, sym_norm in rows:
        if _tolerant_ok(sym_norm):
            runs = re.split("\x00[pn]", sym_norm)
            runs[0] = runs[0][1:]
        else:
            runs = [_SPACE.sub("", symptom.lower().replace("\x00", "\ufffd"))]
        piece = max((cut for run in runs for cut in re.split("[σς]", run)), key=len)[:GATE_CHARS]
        if not piece:
            return None
        pieces.add(piece)
    return tuple(sorted(pieces, key=len, reverse=True))


def match_text(text: str, entries: Iterable[Entry]) -> list[SymptomMatch]:
    """The entries whose symptoms appear anywhere in `text` (pasted output or a whole log): one
    match per entry, at its first occurrence, with how many lines matched it; exact matches are
    preferred to tolerant ones, and a symptom wrapped over up to WRAP_LINES lines is still found."""
    lines = split_lines(text)  # the text and where each line is in it: one copy, not a list of lines too
    coloured = "\x1b" in text  # every escape sequence starts with ESC: without one, the clean lines are the lines
    clean = join_lines((strip_ansi(lines[i]) for i in range(len(lines))), "\n") if coloured else lines
    norms = join_lines((normalise(clean[i]) for i in range(len(clean))), "")
    whole, whole_clean = norms.text, clean.text if coloured else ""
    results: dict[str, SymptomMatch] = {}
    # A symptom is looked for (one scan of the whole text each) only when the text holds every word inside it:
    # without this, N symptoms cost N scans of the text (4,000 symptoms, a 100,000-line log: 17 s of CPU).
    words = _words(text) | _words(whole_clean) if coloured else _words(text)  # no colour: the same words
    norm_words = _words(whole)
    for entry, symptom, sym_norm in _symptoms(entries):
        # the lines are walked only for a symptom the whole text holds (one scan in C, not one Python step a line);
        # without colour a symptom only the lines joined by newlines hold is in no one line either
        present = _may_hold(words, symptom) and (symptom in text or (coloured and symptom in whole_clean))
        exact = lines.holding(symptom) if present else []
        if present and coloured:
            exact = sorted({*exact, *clean.holding(symptom)})
        if exact:
            _keep(results, SymptomMatch(entry, symptom, "exact", exact[0] + 1, clean[exact[0]].strip(), len(exact)))
            continue
        if not _tolerant_ok(sym_norm) or not _may_hold(norm_words, sym_norm) or sym_norm not in whole:
            continue
        where = norms.holding(sym_norm)
        if where:
            _keep(results, SymptomMatch(entry, symptom, "tolerant", where[0] + 1, clean[where[0]].strip(), len(where)))
            continue
        start, span = _wrapped(norms, sym_norm)
        excerpt = " ".join(clean[i].strip() for i in range(start, start + span)) if span else ""
        _keep(results, SymptomMatch(entry, symptom, "tolerant", start + 1 if span else 0, excerpt))
    order = {"exact": 0, "tolerant": 1}
    sev = {"error": 0, "warn": 1, "info": 2}
    return sorted(results.values(), key=lambda m: (m.line_no == 0, order[m.how], sev.get(m.entry.severity, 9), m.line_no, m.entry.id))


def _words(text: str, step: int = 1 << 20) -> set[str]:
    """The distinct words (runs of word characters) of `text`, read a slice at a time so that a big log's
    words are never all in one list."""
    found: set[str] = set()
    start = 0
    while start < len(text):
        end = min(start + step, len(text))
        cut = _WORD.match(text, end)  # a word the slice's end would cut belongs to this slice
        end = cut.end() if cut else end
        found.update(_WORD.findall(text, start, end))
        start = end
    return found


def _may_hold(words: set[str], needle: str) -> bool:
    """False when a text whose words are `words` cannot contain `needle`: each run of word characters with a
    non-word character on both sides inside `needle` is a whole word wherever `needle` appears (the runs at
    its ends may be parts of longer words, so they are not asked for). A needle with no inner word: True."""
    return all(m.group() in words for m in _WORD.finditer(needle) if 0 < m.start() and m.end() < len(needle))


def _keep(results: dict[str, SymptomMatch], match: SymptomMatch) -> None:
    """One match per entry: exact beats tolerant, then the earliest line."""
    old = results.get(match.entry.id)
    if old is None or (match.how, match.line_no) < (old.how, old.line_no):
        results[match.entry.id] = match


def _wrapped(norms: Lines, sym_norm: str) -> tuple[int, int]:
    """(first line, number of lines) of a symptom that a wrap split over consecutive lines."""
    for span in range(2, WRAP_LINES + 1):
        for i in range(len(norms) - span + 1):
            if sym_norm in norms.window(i, span):
                return i, span
    return 0, 0


def line_count(text: str) -> int:
    """len(text.splitlines()), without the list of lines."""
    breaks = sum(text.count(c) for c in BREAKS) - text.count("\r\n")
    return breaks + (1 if text and text[-1] not in BREAKS else 0)
