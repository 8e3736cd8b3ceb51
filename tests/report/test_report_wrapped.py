"""A token cut by a line break (a terminal, `fold`, a log wrapper) is redacted on both sides of the break.

Fixed-length kinds (Hugging Face, GitHub, AWS, NGC) are cut only where the joined parts have exactly the token's
length; kinds of no fixed length keep a plain word that starts the next line. Real logs of tests/data are left
byte for byte as they were (the rule finds nothing in them).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from sparkdoctor.anonymize import Redactor, wrapped
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import load
from sparkdoctor.views.markdown import render_markdown
from tests.gb10 import gb10_facts
from tests.report.bug_report import REPORT_FORMATS, whole_report

CASES = settings(derandomize=True, database=None, deadline=None, max_examples=150, phases=[Phase.explicit, Phase.generate],
                 suppress_health_check=list(HealthCheck), print_blob=False)
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
# (prefix, body alphabet, body length): the fixed-length kinds of anonymize/wrapped.py
KINDS = [("hf_", ALNUM, 34), ("ghp_", ALNUM, 36), ("ghs_", ALNUM + "_", 36), ("github_pat_", ALNUM + "_", 82),
         ("AKIA", ALNUM[:26] + ALNUM[52:], 16), ("ASIA", ALNUM[:26] + ALNUM[52:], 16), ("nvapi-", ALNUM + "_-", 64)]
# What a wrapper puts at a break: a bare newline (fold, a terminal), CRLF, a colour reset, a continuation's indentation
# (Rich, textwrap), a `docker logs -t` time stamp and vLLM's process prefix
BREAKS = ["\n", "\r\n", "\x1b[0m\n", "\n    ", "\n2026-11-30T22:00:01.123456789Z (APIServer pid=123) "]
CONTEXTS = ["HF_TOKEN={} next", "token {}", "{}", 'export KEY="{}"; echo ok', "--api {}, then", "(x={})"]
HF = "hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"
R = Redactor()
MATRIX = load(None)


def wrap(line: str, width: int, gap: str) -> str:
    return gap.join(line[i:i + width] for i in range(0, len(line), width))


def leaked(body: str, out: str, gap: str) -> list[str]:
    """Each 8-character part of `body` found in `out`, read with its breaks taken out (as a reader rejoins them)."""
    flat = out.replace(gap, "")
    return [body[i:i + 8] for i in range(len(body) - 7) if body[i:i + 8] in flat or body[i:i + 8] in out]


@pytest.mark.parametrize(("text", "after"), [
    # the review's cases (docs/evidence/revleft3-2026-11-30.md, item 4): the second part was printed
    (f"token {HF[:20]}\n{HF[20:]} next", "token <redacted>\n<redacted> next"),
    (f"HF_TOKEN={HF[:13]}\n{HF[13:]}", "HF_TOKEN=<redacted>\n<redacted>"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJh\nbGljZSJ9.abc", "Authorization: Bearer <redacted>\n<redacted>"),
    # a first part too short to be recognised alone, and a prefix cut in two
    (f"HF_TOKEN={HF[:5]}\n{HF[5:]}", "HF_TOKEN=<redacted>\n<redacted>"),
    (f"x {HF[:1]}\n{HF[1:]} y", "x <redacted>\n<redacted> y"),
    ('token "sk-ab\ncdefgh12XY"', 'token "<redacted>\n<redacted>"'),
    # CRLF and colour codes around the break, an indented continuation, vLLM's prefix on both lines
    (f"\x1b[33mtoken {HF[:12]}\r\n\x1b[0m    {HF[12:]}\x1b[0m", "\x1b[33mtoken <redacted>\r\n\x1b[0m    <redacted>\x1b[0m"),
    (f"(APIServer pid=12) HF_TOKEN={HF[:30]}\n(APIServer pid=12) {HF[30:]} x",
     "(APIServer pid=12) HF_TOKEN=<redacted>\n(APIServer pid=12) <redacted> x"),
    ("key sk-proj-Ab3dEf9hIjK\nL0mN1pQ2 next", "key <redacted>\n<redacted> next"),
    ("xoxb-1234-5678\n-AbCdEf9gH ok", "<redacted>\n<redacted> ok"),
])
def test_a_token_cut_by_a_line_break_is_redacted_on_both_sides(text, after):
    assert R.text(text) == after


@pytest.mark.parametrize("text", [
    f"HF_TOKEN={HF}\nINFO 11-30 12:00:01 next",  # a whole token ends its line: the next line's word is kept
    f"HF_TOKEN={HF}\nabc123def",  # joined, one too long for a Hugging Face token
    "key sk-proj-Ab3dEf9hIjKlMn\nINFO next",  # a whole OpenAI key, then a plain word
    "key sk-proj-Ab3dEf9hIjKlMn\nTraceback (most recent call last):",
    "key sk-proj-Ab3dEf9hIjKlMn\n2026-11-30 12:00:01 started",
    "Minimum and Maximum cuda capability supported by this version of PyTor\nch is",  # a wrapped word
    "ghp_\nrelease notes", "AKIA\nREADME", "h\nf_ is a prefix",
])
def test_words_at_a_line_start_are_kept(text):
    out = R.text(text)
    assert out.split("\n", 1)[1] == text.split("\n", 1)[1]


def test_real_logs_are_left_as_they_were():
    logs = [p for p in sorted(Path("tests/data").rglob("*")) if p.suffix in (".txt", ".log", ".jsonl") and p.is_file()]
    assert len(logs) >= 40
    for path in logs:
        assert wrapped.spans(path.read_text(errors="replace")) == [], path


@CASES
@given(kind=st.sampled_from(KINDS), data=st.data(), width=st.integers(1, 130), gap=st.sampled_from(BREAKS),
       context=st.sampled_from(CONTEXTS))
def test_any_fixed_length_token_wrapped_at_any_column_never_shows(kind, data, width, gap, context):
    prefix, alphabet, length = kind
    body = data.draw(st.text(alphabet, min_size=length, max_size=length))
    out = R.text(wrap(context.format(prefix + body), width, gap))
    assert leaked(body, out, gap) == []


@CASES
@given(data=st.data(), width=st.integers(1, 130), gap=st.sampled_from(BREAKS), context=st.sampled_from(CONTEXTS),
       prefix=st.sampled_from(["sk-", "sk-proj-", "glpat-", "sk_live_", "xoxb-"]))
def test_a_variable_length_token_wrapped_at_any_column_never_shows(data, width, gap, context, prefix):
    # a key's random part: a digit in every 8 characters, so no remainder is a plain word (those are kept: a word that
    # starts a line after a whole token; anonymize/wrapped.py)
    chunks = data.draw(st.lists(st.text(ALNUM[:52], min_size=7, max_size=7), min_size=3, max_size=8))
    body = "".join(c + str(i % 10) for i, c in enumerate(chunks))
    out = R.text(wrap(context.format(prefix + body), width, gap))
    assert leaked(body, out, gap) == []


def test_the_scan_is_linear():
    for chunk in ("a\n", "hf_a\n", "a\r\n\x1b[0m  ", "sk-ab\nINFO ", "eyJabcdefghij.abcd.\n", "a\n ", "\x1b[0m\n"):
        started = time.process_time()  # CPU seconds
        wrapped.spans(chunk * 20_000)
        assert time.process_time() - started < 5, chunk


@pytest.mark.parametrize("fmt", REPORT_FORMATS)
def test_a_wrapped_token_in_a_collected_log_never_reaches_the_report(fmt):
    log = wrap(f"(APIServer pid=7) INFO 11-30 12:00:01 [api_server.py:1] args: hf_token='{HF}', port=8000", 80, "\n")
    assert HF[3:] not in log  # cut where a terminal of 80 columns cuts it: 5 characters of its secret, too few alone
    facts = gb10_facts(packages={"triton": "3.5.1"}, errors=[{"collector": "serve-log", "error": log}])
    text = whole_report(build_report(facts, MATRIX), fmt)
    assert leaked(HF[3:], text, "\n") == []
    assert HF[8:16] in whole_report(build_report(facts, MATRIX), fmt, redact=False)  # the test can fail


def test_a_wrapped_token_never_reaches_check_markdown():
    # `check --format markdown` puts a value on one line (its breaks become spaces): such values are redacted first
    log = wrap(f"(APIServer pid=7) INFO 11-30 12:00:01 [api_server.py:1] args: hf_token='{HF}', port=8000", 80, "\n")
    facts = gb10_facts(packages={"triton": "3.5.1"}, errors=[{"collector": "serve-log", "error": log}])
    text = render_markdown(build_report(facts, MATRIX))
    assert "serve-log: (APIServer pid=7)" in text
    assert leaked(HF[3:], text, "\n") == []
