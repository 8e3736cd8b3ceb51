"""Tokens cut by a line break: the part on the next line(s) is a secret too.

A terminal, `fold`, a log wrapper or a pasted screen cuts a long line at a column (tests/data/explain's wrapped torch
warning: `PyTor` at one line's end, `ch is` at the next one's start), so a token can end one line and go on at the
start of the next. The token scans see two words there: a first part long enough to be recognised is redacted and the
rest printed as is; a first part too short (`hf_Ab`) is recognised nowhere. Here each line break is read as if it
were not there: the run of token characters that ends a line, joined to the run that starts the next line (and the
one after, when a whole line is token characters), is matched against the token kinds, and a match that crosses a
break is cut on both sides. Between the two runs a break may hold what a wrapped log holds there: `\\r`, ANSI colour
codes, the continuation's indentation (Rich, textwrap), a `docker logs -t` time stamp or vLLM's `(APIServer pid=1)`.

Two rules, so ordinary words at a line's start are kept:

  fixed      kinds of one known length and alphabet: the joined run must be exactly that long (a full token that ends a
             line joined to a word is too long, and is left alone). Lengths (the providers publish no grammar for
             some; these are what their secret scanners match):
               Hugging Face  hf_ + 34 letters (gitleaks' huggingface-access-token `hf_[a-zA-Z]{34}`; digits accepted)
               GitHub        ghp_/gho_/ghu_/ghs_/ghr_ + 36 of [A-Za-z0-9_] (github.blog 2021-04-05, "Behind GitHub's new
                             authentication token formats": 30 random characters and a 6-character checksum),
                             github_pat_ + 22 + _ + 59 (github/redacting-logger's pattern, 82 after the prefix)
               AWS           AKIA/ASIA + 16 upper-case letters and digits (IAM user guide: access key IDs are 20 characters)
               NGC           nvapi- + 64 of [A-Za-z0-9_-] (secret scanners' NVAPI rule; a personal key is 70 characters)
  variable   kinds of no fixed length (OpenAI sk-, JWTs, Slack xox?-, GitLab gl?-, Stripe): the token scan's own pattern
             on the joined run; the next line's part is kept only when the first line's part was a whole token by
             itself and the next line's part is a plain word or number (`INFO`, `Traceback`, `2026-11-30`): a random
             remainder is cut. A remainder that happens to be a plain word is printed (it carries no entropy worth
             the name: a word, not the key's random part, unless the key's tail is itself all letters of one case).

Linear: a candidate is a run at a line's end (anchored at the run's start, at most MAX_RUN characters), and each is
joined once to at most MAX_RUN characters of what follows.
"""

from __future__ import annotations

import bisect
import re

RUN = r"A-Za-z0-9_.\-"  # the characters of every token kind (JWT's dots, GitLab's and NGC's hyphens)
MAX_RUN = 400  # longer than any fixed-length kind (github_pat_ is 93) and than a usual JWT
_ANSI = r"(?:\x1b\[[0-9;?]*[A-Za-z])*"
# What a wrapped log puts between the two parts: a CR, colour codes, then on the next line colour codes, a time stamp of
# `docker logs -t`, vLLM's process prefix, indentation (each bounded: linear).
_PREFIX = r"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+\-]\d\d:?\d\d)?[ \t])?(?:\([A-Za-z_]{1,40} pid=\d{1,10}\)[ \t])?"
GAP = re.compile(rf"{_ANSI}\r?{_ANSI}\n{_ANSI}{_PREFIX}[ \t]{{0,64}}{_ANSI}")
TAIL = re.compile(rf"(?<!\x1b\[)(?<![{RUN}])[{RUN}]{{1,{MAX_RUN}}}(?={_ANSI}\r?{_ANSI}\n)")
ANSI = re.compile(_ANSI[3:-2])
SPACED = re.compile(r"[^\r\n]")  # a gap that holds more than its line break (indentation, a prefix)
HEAD = re.compile(rf"[{RUN}]{{1,{MAX_RUN}}}")
_B = r"(?<![A-Za-z0-9_])"  # where a token starts, as the token scans' \b
FIXED = [  # (pattern, the token's length)
    (re.compile(rf"{_B}hf_[A-Za-z0-9]{{34}}(?![A-Za-z0-9])"), 37),
    (re.compile(rf"{_B}gh[pousr]_[A-Za-z0-9_]{{36}}(?![A-Za-z0-9_])"), 40),
    (re.compile(rf"{_B}github_pat_[A-Za-z0-9_]{{82}}(?![A-Za-z0-9_])"), 93),
    (re.compile(rf"{_B}(?:AKIA|ASIA)[0-9A-Z]{{16}}(?![A-Za-z0-9])"), 20),
    (re.compile(rf"{_B}nvapi-[A-Za-z0-9_\-]{{64}}(?![A-Za-z0-9_\-])"), 70),
]
VARIABLE = [
    re.compile(rf"{_B}sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{{8,}}"),
    re.compile(rf"{_B}gl(?:pat|dt|rt|ptt|ft|imt|soat|cbt|oas)-[A-Za-z0-9_\-]{{8,}}"),
    re.compile(rf"{_B}[rs]k_(?:live|test)_[A-Za-z0-9]{{8,}}"),
    re.compile(rf"{_B}xox[abprs]-[A-Za-z0-9\-]{{8,}}"),
    re.compile(rf"{_B}eyJ[A-Za-z0-9_\-]{{8,}}\.[A-Za-z0-9_\-]{{4,}}\.[A-Za-z0-9_\-]*"),
]
ANCHORED = {p: re.compile(p.pattern[len(_B):]) for p in (*(p for p, _ in FIXED), *VARIABLE)}  # without the boundary
PREFIXES = re.compile(r"hf_|gh[pousr]_|github_pat_|AKIA|ASIA|nvapi-|sk-|gl[a-z]{2,4}-|[rs]k_|xox|eyJ")  # every kind's start
PLAIN = re.compile(r"[A-Z]*[a-z]*|[0-9][0-9:.\-]*")  # INFO, Traceback, loading, 2026-11-30: a word, not a key's part


def spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) spans, sorted and apart, of token parts on either side of a line break."""
    found: list[tuple[int, int]] = []
    joined_to = 0  # a run that a chain already holds starts no chain of its own: each character is joined once
    for tail in TAIL.finditer(text):
        if tail.start() < joined_to:
            continue
        segments, spaced = [tail.span()], []
        at = tail.end()
        while (gap := GAP.match(text, at)) and (head := HEAD.match(text, gap.end(), gap.end() + MAX_RUN)):
            segments.append(head.span())
            spaced.append(bool(SPACED.search(ANSI.sub("", gap.group()))))
            at = joined_to = head.end()
            if sum(e - s for s, e in segments) >= MAX_RUN or not GAP.match(text, at):
                break  # the next line's run ends inside its line: a token in it ends there
        if len(segments) > 1:
            found += _crossing(text, segments, spaced)
    return _merged(found)


def _crossing(text: str, segments: list[tuple[int, int]], spaced: list[bool]) -> list[tuple[int, int]]:
    """Token matches in the joined runs that cross a break. Where the next line starts after a space or a prefix (a
    soft break), a token may also start or end right at the break: it is tried there without the word boundary."""
    joined = "".join(text[s:e] for s, e in segments)
    if not PREFIXES.search(joined):
        return []  # most lines: no kind's prefix, nothing to try
    breaks, offset = [], 0  # where each line break is in `joined`
    for s, e in segments[:-1]:
        offset += e - s
        breaks.append(offset)
    soft = [b for b, spaced_here in zip(breaks, spaced, strict=True) if spaced_here]
    starts = set(soft)
    found: list[tuple[re.Pattern[str], int, int]] = []
    for at in soft:
        found += [(p, m.start(), m.end()) for p, anchored in ANCHORED.items() if (m := anchored.match(joined, at))]
        for pattern, length in FIXED:  # one that ends here, started at a word boundary or at a soft break
            start = at - length
            if start >= 0 and (m := (ANCHORED[pattern] if start in starts else pattern).match(joined, start, at)):
                found.append((pattern, m.start(), m.end()))
    for pattern in (*(p for p, _ in FIXED), *VARIABLE):
        found += [(pattern, m.start(), m.end()) for m in pattern.finditer(joined)]
    out: list[tuple[int, int]] = []
    for pattern, start, end in found:
        first = bisect.bisect_right(breaks, start)
        if first == len(breaks) or breaks[first] >= end:
            continue  # within one line: the token scans' own
        cut = breaks[first]
        if pattern in VARIABLE and _whole_alone(pattern, joined[start:cut]) and PLAIN.fullmatch(joined[cut:end]):
            end = cut  # a whole token ended its line; the next line starts with a word
        out += _back(segments, start, end)
    return out


def _whole_alone(pattern: re.Pattern[str], part: str) -> bool:
    return (m := pattern.match(part)) is not None and m.end() == len(part)


def _back(segments: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """The spans in the text of joined[start:end], one a segment."""
    out, offset = [], 0
    for s, e in segments:
        lo, hi = max(start, offset), min(end, offset + e - s)
        if lo < hi:
            out.append((s + lo - offset, s + hi - offset))
        offset += e - s
    return out


def _merged(found: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(found):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out
