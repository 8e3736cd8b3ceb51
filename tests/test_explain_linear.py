"""explain's matcher looks for a symptom only when the text holds every word inside it (so that many symptoms do
not each cost a scan of a big log). That must change no result: on a varied corpus (the bundled fixtures, texts
made of the symptoms' own pieces cut anywhere, wrapped, coloured, upper-cased, with paths and numbers, odd Unicode
and line separators) it finds exactly what the old matcher (tests/explain_reference.py) found, in the same order."""

from __future__ import annotations

import dataclasses
import tracemalloc
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkdoctor.matrix import load, symptoms
from sparkdoctor.matrix.symptoms import (
    _may_hold,
    _words,
    line_count,
    match_text,
    normalise,
)
from tests.explain_reference import normalise as old_normalise
from tests.explain_reference import old_match_text

DATA = Path(__file__).resolve().parent / "data" / "explain"
MATRIX = load()
ENTRIES = MATRIX.entries
SYMPTOMS = [s for e in ENTRIES for s in e.symptoms]
PIECES = st.sampled_from([*SYMPTOMS, " ", "\n", "\r\n", "\u2028", "\x1b[31m", "\x1b[0m", "/usr/lib/x.so", "12345",
                          "_", "é", "ß", "İ", "ǅ", "٣", "-", ": ", "(2048)", "\t"])


def _variant(draw: st.DrawFn) -> str:
    s = draw(st.sampled_from(SYMPTOMS))
    i, j = sorted((draw(st.integers(0, len(s))), draw(st.integers(0, len(s)))))
    cut = s[i:j] if draw(st.booleans()) else s
    how = draw(st.sampled_from(["as is", "upper", "wrap", "colour", "number"]))
    if how == "upper":
        return cut.upper()
    if how == "wrap":
        k = draw(st.integers(0, len(cut)))
        return cut[:k] + draw(st.sampled_from(["\n", "\n  ", " "])) + cut[k:]
    if how == "colour":
        k = draw(st.integers(0, len(cut)))
        return cut[:k] + "\x1b[1m" + cut[k:]
    if how == "number":
        return cut.replace("2048", "4096").replace("12", "99")
    return cut


@st.composite
def texts(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.one_of(PIECES, st.composite(_variant)(), st.text(max_size=12)), max_size=12))
    return "".join(parts)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts())
def test_same_matches_as_before(text: str) -> None:
    assert match_text(text, ENTRIES) == old_match_text(text, ENTRIES)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40), st.text(max_size=40))
def test_a_needle_in_the_text_is_never_filtered_out(before: str, needle: str, after: str) -> None:
    """The filter is safe: a text that contains the needle always passes it, whatever the characters."""
    assert _may_hold(_words(before + needle + after, step=3), needle)


def test_words_read_in_slices_are_the_words_read_at_once() -> None:
    text = "alpha beta_gamma δέλτα\n" * 50 + "x" * 70
    assert _words(text, step=7) == _words(text) == {"alpha", "beta_gamma", "δέλτα", "x" * 70}


def test_the_fixtures_and_many_symptoms_give_the_same_output() -> None:
    extra = [dataclasses.replace(ENTRIES[i % len(ENTRIES)], id=f"third-{i}", symptoms=[f"Error: op_{i} failed here", f"OP{i}"])
             for i in range(300)]
    entries = ENTRIES + extra
    for path in sorted(DATA.iterdir()):
        text = path.read_text(errors="replace") + "\nError: op_7 failed here\nOP12\n"
        new = match_text(text, entries)
        assert new == old_match_text(text, entries), path.name
        assert {"third-7", "third-12"} <= {m.entry.id for m in new}


def test_a_nul_in_the_text_never_stands_for_a_number_or_a_path() -> None:
    """The tolerant pass writes a number as NUL 'n' and a path as NUL 'p'; a NUL past the first 8 KiB (explain's
    binary check) is kept, so "more than NUL n seconds" matched "blocked for more than 120 seconds"."""
    text = "INFO task kworker blocked for more than \x00n seconds"
    assert [m.entry.id for m in match_text(text, ENTRIES)] == []
    assert [m.entry.id for m in match_text(text.replace("\x00n", "240"), ENTRIES)] == ["host-hung-tasks"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts(), st.integers(1, 40))
def test_read_a_part_at_a_time_the_same_as_at_once(text: str, part: int) -> None:
    """A long text is normalised in parts cut after whitespace, and its normalised lines joined a batch at a time:
    with parts of a few characters, the matches and the normalised text are still those of the whole at once."""
    with mock.patch.object(symptoms, "PART", part, create=True):
        assert normalise(text) == old_normalise(text)
        assert match_text(text, ENTRIES) == old_match_text(text, ENTRIES)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028",
                                  "\u2029", " ", "é", "\x1f"]), max_size=30))
def test_lines_counted_as_splitlines_counts_them(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert line_count(text) == len(text.splitlines())


def test_a_long_line_is_not_held_many_times_over() -> None:
    """explain held a 100 MB log line about a dozen times over (1.2 GB peak): `re.sub` keeps every piece between its
    matches, one a space. Normalised a part at a time (parts of 64 KiB here), the peak is a few copies of the line."""
    line = "ab " * 500_000  # 1.5 MB: 500,000 spaces, each a piece of its own when replaced at once
    with mock.patch.object(symptoms, "PART", 1 << 16, create=True):
        tracemalloc.start()
        try:
            norm = normalise(line)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert norm == "ab" * 500_000
    assert peak < 3 * len(line), f"peak {peak:,} bytes for a {len(line):,}-character line"


BREAKY = st.lists(st.sampled_from(["ab", "b", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028",
                                   "\u2029", " ", "é", "\x1f", "\x1b[1m"]), max_size=25).map("".join)


@settings(max_examples=300, deadline=None)
@given(BREAKY, st.sampled_from(["a", "b", "ab", "ba", "b\nb", " b", "é", "\x1b"]), st.sampled_from(["", "\n", "--"]))
def test_lines_by_offsets_are_the_lines(text: str, needle: str, sep: str) -> None:
    """explain holds a log's lines as the text and offsets into it: the same lines splitlines() gives, the same lines
    holding a string, the same joined text."""
    from sparkdoctor.matrix.textlines import join_lines, split_lines

    want = text.splitlines() or [text]
    lines = split_lines(text)
    assert [lines[i] for i in range(len(lines))] == want and lines.text is text
    assert lines.holding(needle) == [i for i, x in enumerate(want) if needle in x]
    joined = join_lines(iter(want), sep)
    assert joined.text == sep.join(want) and [joined[i] for i in range(len(joined))] == want
    assert joined.holding(needle) == [i for i, x in enumerate(want) if needle in x]
    assert [joined.window(i, 2) for i in range(len(want) - 1)] == [sep.join(want[i:i + 2]) for i in range(len(want) - 1)]


def test_a_logs_lines_are_offsets_not_strings() -> None:
    """A list of a log's lines cost a string object a line (about 50 bytes each beside the text); the lines and their
    normalised forms are now the text, one joined normalised copy and two offsets a line."""
    from sparkdoctor.matrix.textlines import join_lines, split_lines

    text = "INFO 12-01 abc def ghi jkl mno pqr stu\n" * 20_000  # 800 kB: as lists, 40,000 string objects
    tracemalloc.start()
    try:
        lines = split_lines(text)
        norms = join_lines((normalise(lines[i]) for i in range(len(lines))), "")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert norms.text == "info12-01abcdefghijklmnopqrstu" * 20_000 and len(lines) == 20_000
    assert peak < 3.5 * len(text), f"peak {peak:,} bytes for a {len(text):,}-character text"
