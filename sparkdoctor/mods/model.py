"""The mods gate's vocabulary: what a mod is, what can be said of it, and its error.

A *mod* is a change a recipe makes inside the serving environment before it starts: a unified diff, a
script that edits files (Python or shell), or a folder holding such things (eugr/spark-vllm-docker's
`mods/<name>/run.sh` layout). For each mod and each file it touches the gate says one verdict.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from sparkdoctor.errors import SparkdoctorError


class ModError(SparkdoctorError):
    """A mod or a target that cannot be judged at all (unreadable path, no such release): one line."""

    exit_code = 2
    code = "mods-input"


class Verdict(str, enum.Enum):
    """What a mod (or one file of it) would do to the target, from best to worst news."""

    APPLIES = "applies"                   # applies cleanly (possibly at an offset)
    ALREADY_APPLIED = "already-applied"   # the change is in the file already, exactly (reverse applies)
    SUPERSEDED = "superseded"             # it does not apply, but the lines it adds are in the release
    NO_EFFECT = "no-effect"               # a script that ran to the end and changed nothing
    FAILS = "fails"                       # the context it edits is gone or changed: it would break the launch
    CANNOT_TELL = "cannot-tell"           # an opaque step (network, imports the stack, no sandbox), and why


class ModKind(str, enum.Enum):
    DIFF = "diff"
    SCRIPT = "script"
    FOLDER = "folder"


@dataclass
class FileVerdict:
    """One file a mod touches, judged."""

    path: str            # relative to the target's site folder (e.g. vllm/v1/attention/backends/mla/triton_mla.py)
    verdict: Verdict
    detail: str = ""     # one line: where it diverged, the lines cited, why it cannot tell
    lines: tuple[int, int] | None = None  # the lines of the target file the detail cites (1-based, inclusive)
    source: str = ""     # the mod file that makes this change (a diff in the folder, or the script)

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "verdict": self.verdict.value, "detail": self.detail,
                "lines": list(self.lines) if self.lines else None, "source": self.source}


@dataclass
class ModResult:
    """One mod, judged against one target."""

    name: str
    path: str
    kind: ModKind
    verdict: Verdict
    detail: str = ""
    files: list[FileVerdict] = field(default_factory=list)
    output_tail: str = ""  # a script's last patch and error lines, anonymized (sparkdoctor.mods.published)

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "path": self.path, "kind": self.kind.value, "verdict": self.verdict.value,
                "detail": self.detail, "files": [f.to_dict() for f in self.files], "output_tail": self.output_tail}


def overall(verdicts: list[Verdict]) -> Verdict:
    """A mod's verdict from its parts: the worst news wins (fails over cannot-tell over the rest)."""
    order = [Verdict.FAILS, Verdict.CANNOT_TELL, Verdict.SUPERSEDED, Verdict.ALREADY_APPLIED, Verdict.NO_EFFECT,
             Verdict.APPLIES]
    return next((v for v in order if v in verdicts), Verdict.NO_EFFECT)
