"""Did an installer fail because a package index did not answer?

pip and uv say so in words of their own, and then, having seen no release, report none: "No matching distribution
found for packaging==24.1" for a release that exists. A caller that judges the requirement from that (a known-good
stack "contradicted", a fix refused for a version the registry has) must first ask this.
"""

from __future__ import annotations

import re

WORDS = ("Could not fetch URL", "NewConnectionError", "Temporary failure in name resolution", "Failed to establish",
         "Network is unreachable", "Connection refused", "Could not connect", "dns error", "error sending request",
         "Max retries exceeded", "ConnectTimeout", "Failed to fetch",
         "Retrying (Retry(")  # pip's warning for each failed attempt at an index: a reset, a read timeout, TLS


def index_unreachable(text: str) -> str | None:
    """The first line of an installer's output that says an index did not answer, stripped; None if none does, or if
    pip listed the versions it found (`from versions: 1.0, 2.0`): a retry that got through then reached the index."""
    if re.search(r"\(from versions: (?!none\))", text):
        return None
    return next((line.strip() for line in text.splitlines() if any(w in line for w in WORDS)), None)
