"""The head start: the target probe launched before the CLI framework is imported."""

import sys

import pytest

from sparkdoctor.target import probe as target_probe


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)


def started(argv):
    early = target_probe.prestart_from_argv(argv)
    if early is not None:
        early.running.cancel()
    return early


@pytest.mark.parametrize(
    "argv",
    [
        ["sparkdoctor"],
        ["sparkdoctor", "matrix", "list"],
        ["sparkdoctor", "check", "--facts", "snap.json"],
        ["sparkdoctor", "check", "--facts=snap.json"],
        ["sparkdoctor", "check", "--help"],
        ["sparkdoctor", "check", "--python", "/no/such/python"],  # the CLI reports this properly
    ],
)
def test_no_head_start_where_it_would_be_wasted_or_wrong(argv):
    assert started(argv) is None


def test_head_start_reads_python_and_cache_mode():
    early = started(["sparkdoctor", "check", "--python", sys.executable, "--no-kernels"])
    assert early.python == sys.executable and early.use_cache is True
    early = started(["sparkdoctor", "check", f"--python={sys.executable}", "--no-cache"])
    assert early.python == sys.executable and early.use_cache is False
    assert "--no-cache" in early.running.argv


def test_a_head_start_for_another_target_is_discarded(tmp_path):
    """What typer parsed wins: a head start for another interpreter is cancelled, never used."""
    import json
    import os
    import subprocess

    from tests.test_cli import REPO

    decoy = tmp_path / "decoy-python"  # answers any probe with a package no real target has
    decoy.write_text('#!/bin/sh\nsleep 1\necho \'{"packages": {"from-the-wrong-target": {"name": "x", "version": "1"}}}\'\n')
    decoy.chmod(0o755)
    code = (
        "import sys; from sparkdoctor.target import probe as target_probe\n"
        f"target_probe.EARLY['target'] = target_probe.prestart_from_argv(['sparkdoctor', 'check', '--python', {str(decoy)!r}])\n"
        "sys.argv = ['sparkdoctor', 'check', '--python', sys.executable, '--no-kernels', '--format', 'json']\n"
        "from sparkdoctor.cli import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    doc = json.loads(done.stdout)
    assert doc["facts"]["target"]["python"] == sys.executable
    assert "from-the-wrong-target" not in doc["facts"]["packages"]
    assert "pytest" in doc["facts"]["packages"]
