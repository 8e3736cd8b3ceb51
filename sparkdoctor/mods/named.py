"""What a mod's texts name: the site folders (`/usr/local/lib/python3.12/dist-packages`) and the files of the
serving stack (`vllm/v1/attention/backends/mla/triton_mla.py`), found in time linear in the text.

A mod's text is third-party data of up to 32 MiB. The regular expressions this replaces
(`(/[\\w.+-]+(?:/[\\w.+-]+)*/(?:site|dist)-packages)(?=[/\\s"']|$)`, and a package name followed by `[\\w/.-]+\\.(?:py|...)`)
read the same matches, but they backtracked over every start in a long path. An 80 KB comment of `/a/a/a...`
took 78 s of CPU, and 32 MiB would take days. Here the text is cut once into maximal runs of path characters, with
no backtracking, and each run is read once. tests/mods/test_mods_named.py compares both on generated texts.
"""

from __future__ import annotations

import re

_CHAIN = re.compile(r"(?:/[\w.+-]+)+")  # a maximal run of /segment: greedy, and nothing after it can fail
_SITES = ("site-packages", "dist-packages")
_RUN = re.compile(r"[\w/.-]+")
_PACKAGE = re.compile(r"\b(?:vllm|flashinfer|cutlass|triton|torch|transformers|compressed_tensors|nvidia)/")
_EXTS = ("py", "pyi", "json", "jinja", "txt", "cfg", "toml", "yaml")  # in this order: `.pyi` reads as `.py`, as before


def site_folders(text: str) -> list[str]:
    """Each site folder path named: the longest `/a/b/site-packages` of a run (at least one folder above it), followed
    by `/`, a space, a quote or the end of the text."""
    out = []
    for chain in _CHAIN.finditer(text):
        parts = chain.group(0).split("/")[1:]
        after = text[chain.end():chain.end() + 1]
        for i in range(len(parts) - 1, 0, -1):
            if parts[i] in _SITES and (i < len(parts) - 1 or not after or after in "/\"'" or after.isspace()):
                out.append("/" + "/".join(parts[:i + 1]))
                break
    return out


def package_files(text: str) -> list[str]:
    """Each `PACKAGE/...file.EXT` named: from the first package name in a run of path characters to its last `.EXT`."""
    out = []
    for run in _RUN.finditer(text):
        start, end = run.span()
        dot, ext = text.rfind(".", start, end), None
        while dot >= 0 and ext is None:
            ext = next((x for x in _EXTS if text.startswith(x, dot + 1, end)), None)
            if ext is None:
                dot = text.rfind(".", start, dot)
        if ext is None:
            continue
        first = _PACKAGE.search(text, start, dot)
        if first is not None and first.end() < dot:  # at least one character between `vllm/` and the `.`
            out.append(text[first.start():dot + 1 + len(ext)])
    return out
