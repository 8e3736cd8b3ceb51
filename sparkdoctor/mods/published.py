"""What of a mod script's output may be shown: its patch and error lines, anonymized; nothing else.

A verdict is printed to a console that is often a public CI log, and its JSON is attached to issues. A script
is third-party code: whatever it prints (`cat ~/.ssh/id_ed25519`, `env`, a token it was handed) must not be
published because it printed it. So a line is shown only when it has the shape of what a patch run or a
failing command prints (`patching file`, `Hunk #2 FAILED at 40.`, `sed: -e expression...`, `bash: line 3:
...`, `error:`, a Python traceback's frame and exception), and every shown line goes through the bug report's
anonymizer (sparkdoctor.anonymize: user and host names, addresses, tokens, keys), escape sequences
removed, cut at LINE_CHARS. An `echo done` is not shown; the verdict never depends on what is shown (it reads the
whole output).
"""

from __future__ import annotations

import functools
import re

from sparkdoctor.anonymize import Redactor

LINE_CHARS = 300
TAIL_LINES = 8
SCAN_CHARS = 4096  # of a line, what is matched and anonymized (then cut to LINE_CHARS)
_TOOLS = (r"patch|git|sed|grep|awk|gawk|mawk|perl|cp|mv|rm|mkdir|ln|chmod|touch|cat|install|tee|find|bash|sh|"
          r"python3?(?:\.\d+)?|pip3?|bwrap|[\w.-]+\.(?:sh|py)")
SHOWN = re.compile(
    r"(?:patching|checking) file |Hunk #\d+ (?:succeeded|FAILED|ignored)|\d+ out of \d+ hunks? (?:FAILED|ignored)|"
    r"Reversed \(or previously applied\) patch detected|(?:Apply anyway|Assume -R)\?|Skipping patch|"
    r"can't find file to patch|No file to patch|patch unexpectedly ends|Only garbage was found|"
    r"(?:error|fatal|ERROR|Error|FATAL|E):\s|"
    rf"(?:{_TOOLS})(?:: line \d+)?: |"
    r"Traceback \(most recent call last\):|File \"[^\"]+\", line \d+|"
    r"[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)(?::|$)|Killed$|Segmentation fault")
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")


@functools.lru_cache(maxsize=1)
def _redactor() -> Redactor:
    redactor = Redactor()
    redactor.learn_local()
    return redactor


def shown_text(text: str) -> str:
    """One value taken from a script's output (a path it wrote to), anonymized and cut."""
    return _redactor().text(_CONTROL.sub("", text))[:LINE_CHARS]


def shown_lines(output: str) -> list[str]:
    """The lines of `output` that may be shown, in order: patch and error lines only, anonymized, cut."""
    out = []
    for line in output.splitlines():
        clean = _CONTROL.sub("", line[:SCAN_CHARS]).strip()  # a line of megabytes is cut before any pattern reads it
        if clean and SHOWN.match(clean):
            out.append(_redactor().text(clean)[:LINE_CHARS])
    return out
