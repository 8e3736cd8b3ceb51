"""Fixtures of the mods gate: the sandbox tool (bubblewrap, installed from Debian like the suite's dockerd) and
small site trees."""

from __future__ import annotations

import pytest

from tests.debian import tool_or_skip


@pytest.fixture(scope="session")
def sandbox_tools() -> None:
    for binary, package in (("patch", "patch"), ("bwrap", "bubblewrap")):
        tool_or_skip(binary, package)


@pytest.fixture
def patch_runs(monkeypatch) -> list[list[str]]:
    """The argv of every GNU patch run the diff judge starts (still run)."""
    from sparkdoctor.mods import diffs

    runs: list[list[str]] = []
    real = diffs.proc.run

    def counted(argv, **kw):
        runs.append(argv)
        return real(argv, **kw)

    monkeypatch.setattr(diffs.proc, "run", counted)
    return runs
