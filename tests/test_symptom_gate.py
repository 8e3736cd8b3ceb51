"""The serve log scanner's gate (matrix.symptoms._gate) turns a line away only when no symptom is in it: line_hits
with the gate and the plain comparison of every symptom give the same hits, on lines made of pieces of the real
symptoms (cut, re-cased, wrapped with whitespace anywhere, next to paths, numbers, NULs, sigmas and colour codes)."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sparkdoctor.matrix import load
from sparkdoctor.matrix.model import Entry
from sparkdoctor.matrix.symptoms import _gate, _line_hits, _symptoms, line_hits
from sparkdoctor.serve.logscan import symptom_entries

ENTRIES = symptom_entries(None)
SYMPTOMS = sorted({s for e in ENTRIES for s in e.symptoms})
NOISE = ["/usr/lib/x.so", "12345", " ", "\t", "\n", "\x00", "\ufffd", "Σ", "σ", "ς", "\x1b[31m", "\x1b", "C:", "İ",
         "./a/b", "3.14", "INFO 11-30 19:02:11 [core.py:210] ", "..", "pid=2114", "E", "n", "p"]


@st.composite
def fragment(draw: st.DrawFn) -> str:
    symptom = draw(st.sampled_from(SYMPTOMS))
    start = draw(st.integers(0, len(symptom)))
    end = draw(st.integers(start, len(symptom)))
    text = symptom if draw(st.booleans()) else symptom[start:end]
    how = draw(st.sampled_from(["as is", "upper", "lower", "wrap", "swap"]))
    if how == "upper":
        text = text.upper()
    elif how == "lower":
        text = text.lower()
    elif how == "wrap" and text:
        cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=4)), reverse=True)
        for cut in cuts:
            text = text[:cut] + draw(st.sampled_from([" ", "\n  ", "\t", "\u2028"])) + text[cut:]
    elif how == "swap" and text:
        at = draw(st.integers(0, len(text) - 1))
        text = text[:at] + draw(st.sampled_from(NOISE)) + text[at + 1 :]
    return text


LINE = st.lists(st.one_of(fragment(), st.sampled_from(NOISE), st.text(max_size=8)), max_size=6).map("".join)


def plain(line: str, entries: list[Entry]) -> list[tuple[str, str, str]]:
    return [(e.id, s, how) for e, s, how in _line_hits(line, _symptoms(entries))]


def gated(line: str, entries: list[Entry]) -> list[tuple[str, str, str]]:
    return [(e.id, s, how) for e, s, how in line_hits(line, entries)]


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LINE)
def test_gate_keeps_every_hit_of_the_bundled_matrix(line: str) -> None:
    assert gated(line, ENTRIES) == plain(line, ENTRIES)


@settings(max_examples=300, deadline=None)
@example(["nothing left on the device"], "ERROR 512 othing left on the device")  # the token's letter starts it
@example(["path /a/b then ΣΣ text"], "PATH /x/y THEN σς TEXT")
@given(st.lists(st.sampled_from(SYMPTOMS + NOISE + ["Σ Σ", "\x00 12", "ab"]), min_size=1, max_size=3), LINE)
def test_gate_keeps_every_hit_of_odd_symptoms(symptoms: list[str], line: str) -> None:
    """Symptoms that are numbers, paths, sigmas, NULs or too short for the tolerant pass, in a matrix of their own."""
    base = load().entries[0]
    entries = [Entry(**{**base.__dict__, "id": f"odd-{i}", "symptoms": [s]}) for i, s in enumerate(symptoms)]
    assert gated(line, entries) == plain(line, entries)


def test_a_symptom_whose_first_letter_a_number_token_gives_is_still_found() -> None:
    base = load().entries[0]
    entries = [Entry(**{**base.__dict__, "id": "n", "symptoms": ["nothing left on the device"]})]
    assert gated("ERROR 512 othing left on the device", entries) == [("n", "nothing left on the device", "tolerant")]


def test_gate_turns_away_lines_without_a_symptom_and_lets_the_rest_through() -> None:
    pieces = _gate(_symptoms(ENTRIES))
    assert pieces
    bare = "".join("(APIServer pid=2114) INFO: 127.0.0.1:51234 - POST /v1/completions 200 OK".lower().split())
    assert not any(piece in bare for piece in pieces)
    for symptom in SYMPTOMS:  # each one exactly, and wrapped mid-word in upper case
        assert gated(f"ERROR {symptom} at x", ENTRIES)
        wrapped = f"ERROR {symptom[:5]}\n  {symptom[5:]} at x".upper()
        assert gated(wrapped, ENTRIES) == plain(wrapped, ENTRIES)
