"""A mods check as one document: the options it ran with, every mod judged, and the exit code it earns."""

from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from sparkdoctor.errors import UsageError
from sparkdoctor.mods.images import image_tree
from sparkdoctor.mods.judge import judge_mod
from sparkdoctor.mods.model import ModError, ModResult, Verdict
from sparkdoctor.mods.trees import (
    ContainerTree,
    ReleaseTree,
    SiteTree,
    Tree,
    parse_release,
    venv_tree,
)
from sparkdoctor.targets.choose import refuse_bad_target_options, resolve_target

MODS_VERSION = 1
EXIT_MODS_FAIL = 1  # a mod fails on the target (or, with --strict, is superseded or cannot be judged)
STRICT = (Verdict.FAILS, Verdict.SUPERSEDED, Verdict.CANNOT_TELL)


@dataclass
class ModsOptions:
    paths: list[Path]
    python: str | None = None
    site: list[Path] = field(default_factory=list)
    releases: list[str] = field(default_factory=list)
    strict: bool = False
    timeout: float | None = None
    container: str | None = None  # a running container: its interpreter's files, through the container CLI
    container_python: str | None = None  # the interpreter inside --container or --image
    image: str | None = None  # an image: a throwaway container of it (sparkdoctor.mods.images)


@dataclass
class ModsReport:
    target: str
    mods: list[ModResult]
    strict: bool

    @property
    def exit_code(self) -> int:
        bad = STRICT if self.strict else (Verdict.FAILS,)
        return EXIT_MODS_FAIL if any(m.verdict in bad for m in self.mods) else 0

    def to_json(self) -> dict[str, object]:
        """The `mods` JSON document's own keys (docs/json.md)."""
        counts = dict(Counter(mod.verdict.value for mod in self.mods))
        return {"mods_version": MODS_VERSION, "kind": "mods", "target": self.target, "strict": self.strict,
                "exit_code": self.exit_code, "counts": counts, "mods": [m.to_dict() for m in self.mods]}


def resolve_tree(options: ModsOptions) -> Tree:
    """The files the mods are judged against: --release (released wheels), --site (folders), --container (a
    running container's, read through the container CLI) or --python."""
    chosen = sum(bool(x) for x in (options.python, options.site, options.releases, options.container is not None,
                                   options.image is not None))
    if chosen > 1:
        raise ModError("--python, --site, --release, --container and --image exclude each other: judge against one "
                       "target at a time")
    if options.container is not None:
        refuse_bad_target_options(None, options.container, options.container_python, False)
        return ContainerTree(resolve_target(None, options.container, options.container_python))  # TargetError: exit 3
    if options.container_python is not None:
        raise UsageError("--container-python needs --container or --image (for a local interpreter use --python)")
    if options.releases:
        return ReleaseTree([parse_release(spec) for spec in options.releases])
    if options.site:
        missing = next((s for s in options.site if not s.is_dir()), None)
        if missing is not None:  # judged against nothing, every mod "fails": bad input, not a verdict
            why = "no such file or folder" if not missing.exists() else "a file, not a folder"
            raise ModError(f"--site {missing}: not a folder ({why}); give the site-packages folder the mods edit")
        return SiteTree(list(options.site), " + ".join(str(s) for s in options.site), confined=True)
    venv = os.environ.get("VIRTUAL_ENV")
    return venv_tree(options.python or (str(Path(venv) / "bin" / "python") if venv else sys.executable))


def run(options: ModsOptions) -> ModsReport:
    if options.image is not None and not any((options.python, options.site, options.releases, options.container)):
        with image_tree(options.image, options.container_python) as image:  # removed again whatever happens
            return ModsReport(image.label, [judge_mod(p, image, options.timeout) for p in options.paths], options.strict)
    tree = resolve_tree(options)
    return ModsReport(tree.label, [judge_mod(p, tree, options.timeout) for p in options.paths], options.strict)
