"""FlashInfer's JIT arch lists, read from a release's own sources: which JIT module builds for which SM majors.

Every `gen_*_module()` in flashinfer/jit/ hands its sources to the compiler for the majors it lists
(`supported_major_versions=[9, 10]`, or None: every major); a major left out aborts the build on that GPU
("No supported CUDA architectures found for major versions [...]"). The files are parsed (ast, never imported
or run) and each list is keyed by its file and enclosing function, so two releases can be compared module by
module. A list that is not a literal is said, not guessed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from sparkdoctor.released import RemoteWheel

JIT_PREFIX = "flashinfer/jit/"
KEYWORD = "supported_major_versions"
MAX_FILES = 400  # a release with more JIT files than this is read up to it (said)


@dataclass(frozen=True)
class ArchList:
    key: str  # FILE:FUNCTION (a second list in one function: FUNCTION#2)
    majors: tuple[int, ...] | None  # None: every major
    literal: bool = True  # False: not a literal list, so not judged

    def admits(self, major: int) -> bool | None:
        if not self.literal:
            return None
        return self.majors is None or major in self.majors

    def shown(self) -> str:
        if not self.literal:
            return "not a literal list"
        return "every major" if self.majors is None else f"majors {list(self.majors)}"


def _lists(path: str, source: str) -> list[ArchList]:
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return []
    out: list[ArchList] = []
    seen: dict[str, int] = {}

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else where
            if isinstance(child, ast.Call):
                for kw in child.keywords:
                    if kw.arg != KEYWORD:
                        continue
                    seen[inner] = seen.get(inner, 0) + 1
                    key = f"{path}:{inner}" + (f"#{seen[inner]}" if seen[inner] > 1 else "")
                    try:
                        value = ast.literal_eval(kw.value)
                    except ValueError:
                        out.append(ArchList(key, None, literal=False))
                        continue
                    if value is None or (isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value)):
                        out.append(ArchList(key, None if value is None else tuple(value)))
                    else:
                        out.append(ArchList(key, None, literal=False))
            visit(child, inner)

    visit(tree, "<module>")
    return out


def read_arch_lists(wheel: RemoteWheel) -> tuple[list[ArchList], str | None]:
    """Every JIT arch list of one released flashinfer-python wheel (members read over ranges, cached), and a note
    when the release has more JIT files than MAX_FILES."""
    names = sorted(n for n in wheel.names if n.startswith(JIT_PREFIX) and n.endswith(".py"))
    note = f"{len(names)} JIT files; the first {MAX_FILES} read" if len(names) > MAX_FILES else None
    out: list[ArchList] = []
    for name in names[:MAX_FILES]:
        text = wheel.text(name)
        if KEYWORD in text:
            out += _lists(name, text)
    return out, note
