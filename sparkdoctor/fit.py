"""Make a report fit where it is pasted, with nothing lost: what does not fit goes to an attachment.

A GitHub issue body holds at most 65,536 characters; a post on the NVIDIA developer forum (Discourse) at most
32,000 by Discourse's default. A report is a list of blocks, some essential (the verdict, the box, the findings,
the note on anonymization) and the rest detail (the environment, kernel probes, the Facts snapshot). When the whole
does not fit, the largest detail blocks are replaced, one by one, by a stub that names the attachment, until it
fits; if the essential blocks alone are too long, the longest of them is cut at a line with a note. The
attachment is the whole report, unshortened, written beside the report by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

GITHUB_LIMIT = 65_536
FORUM_LIMIT = 32_000
MARGIN = 1_000  # room for a title line or a sentence the user adds before posting


@dataclass
class Block:
    title: str
    lines: list[str]
    essential: bool = False
    stub: list[str] | None = None  # what stands in for it when it moves to the attachment

    def text(self) -> str:
        return "\n".join(self.lines)


def join(blocks: list[Block]) -> str:
    return "\n".join(b.text() for b in blocks)


def fit(blocks: list[Block], limit: int, attachment: str, stub_for, notice) -> tuple[str, bool]:
    """(the text, whether anything moved to the attachment). `stub_for(block, attachment)` gives a block's
    stand-in lines; `notice(attachment)` the lines put before everything once something moved."""
    whole = join(blocks)
    budget = limit - MARGIN
    if len(whole) <= budget:
        return whole, False
    blocks = [Block(b.title, list(b.lines), b.essential, b.stub) for b in blocks]
    head = Block("notice", notice(attachment), essential=True)
    blocks.insert(1 if blocks else 0, head)
    for block in sorted((b for b in blocks if not b.essential), key=lambda b: len(b.text()), reverse=True):
        if len(join(blocks)) <= budget:
            break
        block.lines = stub_for(block, attachment)
    over = len(join(blocks)) - budget
    if over > 0:  # the essential part alone is too long: cut the longest essential block at a line
        longest = max((b for b in blocks if b is not head), key=lambda b: len(b.text()))
        longest.lines = _cut(longest.lines, len(longest.text()) - over - 200, attachment)
    return join(blocks), True


def _cut(lines: list[str], keep: int, attachment: str) -> list[str]:
    out, size = [], 0
    for line in lines:
        if size + len(line) + 1 > keep:
            break
        out.append(line)
        size += len(line) + 1
    note = ["", f"(cut here: {len(lines) - len(out)} more lines are in {attachment})", ""]
    opened = sum(line.strip() == "<details>" for line in out) - sum(line.strip() == "</details>" for line in out)
    return [*out, *note, *(["</details>", ""] * max(0, opened))]  # a fold cut open is closed again


def attachment_name(output: str | None, fmt: str, taken_at: str) -> str:
    """Beside the report: `report.md` -> `report.full.md`; on stdout: `sparkdoctor-report-<when the snapshot was
    taken>.full.md` (.txt for the forum form) in the current folder. Not the fingerprint: the name is posted with the
    report, and a fingerprint can give back what the report anonymized."""
    suffix = ".md" if fmt == "github" else ".txt"
    if output:
        path = Path(output)
        return str(path.with_name(f"{path.stem}.full{path.suffix or suffix}"))
    stamp = "".join(c for c in taken_at if c.isdigit())[:14] or "snapshot"
    return f"sparkdoctor-report-{stamp}.full{suffix}"
