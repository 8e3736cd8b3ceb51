"""The explain matcher as it was before it was made linear in the text (one scan of the whole text per symptom), and
its normaliser as it was before it read a long text a part at a time: the reference that tests/test_explain_linear.py and benchmarks/explain_many_symptoms.py compare the shipped one to."""

from __future__ import annotations

from collections.abc import Iterable

from sparkdoctor.matrix.model import Entry
from sparkdoctor.matrix.symptoms import (
    _NUMBER,
    _PATH,
    _SPACE,
    SymptomMatch,
    _symptoms,
    _tolerant_ok,
    strip_ansi,
)

WRAP_LINES = 3


def normalise(text: str) -> str:
    """The normaliser as it was before it read a long text a part at a time (the whole text at once)."""
    text = strip_ansi(text).lower().replace("\x00", "\ufffd")
    text = _PATH.sub("\x00p", text)
    text = _NUMBER.sub("\x00n", text)
    return _SPACE.sub("", text)


def old_match_text(text: str, entries: Iterable[Entry]) -> list[SymptomMatch]:
    """The entries whose symptoms appear anywhere in `text` (pasted output or a whole log): one
    match per entry, at its first occurrence, with how many lines matched it; exact matches are
    preferred to tolerant ones, and a symptom wrapped over up to WRAP_LINES lines is still found."""
    lines = text.splitlines() or [text]
    clean = [strip_ansi(x) for x in lines]
    norms = [normalise(x) for x in clean]
    whole = "".join(norms)
    whole_clean = "\n".join(clean)
    results: dict[str, SymptomMatch] = {}
    for entry, symptom, sym_norm in _symptoms(entries):
        # the lines are walked only for a symptom the whole text holds (one scan in C, not one Python step a line)
        present = symptom in text or symptom in whole_clean
        exact = [i for i, x in enumerate(lines) if symptom in x or symptom in clean[i]] if present else []
        if exact:
            _keep(results, SymptomMatch(entry, symptom, "exact", exact[0] + 1, clean[exact[0]].strip(), len(exact)))
            continue
        if not _tolerant_ok(sym_norm) or sym_norm not in whole:
            continue
        where = [i for i, x in enumerate(norms) if sym_norm in x]
        if where:
            _keep(results, SymptomMatch(entry, symptom, "tolerant", where[0] + 1, clean[where[0]].strip(), len(where)))
            continue
        start, span = _wrapped(norms, sym_norm)
        excerpt = " ".join(x.strip() for x in clean[start:start + span]) if span else ""
        _keep(results, SymptomMatch(entry, symptom, "tolerant", start + 1 if span else 0, excerpt))
    order = {"exact": 0, "tolerant": 1}
    sev = {"error": 0, "warn": 1, "info": 2}
    return sorted(results.values(), key=lambda m: (m.line_no == 0, order[m.how], sev.get(m.entry.severity, 9), m.line_no, m.entry.id))


def _keep(results: dict[str, SymptomMatch], match: SymptomMatch) -> None:
    """One match per entry: exact beats tolerant, then the earliest line."""
    old = results.get(match.entry.id)
    if old is None or (match.how, match.line_no) < (old.how, old.line_no):
        results[match.entry.id] = match


def _wrapped(norms: list[str], sym_norm: str) -> tuple[int, int]:
    """(first line, number of lines) of a symptom that a wrap split over consecutive lines."""
    for span in range(2, WRAP_LINES + 1):
        for i in range(len(norms) - span + 1):
            if sym_norm in "".join(norms[i:i + span]):
                return i, span
    return 0, 0
