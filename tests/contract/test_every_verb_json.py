"""Every verb (and every matrix/recipe subcommand) under `--format json`, once succeeding and once failing: stdout is
one JSON document, it starts with the common header, and its `exit_code` is the process's. A verb added to
sparkdoctor.commands.VERBS without a row here fails test_the_walk_covers_every_verb."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkdoctor.commands import VERBS
from tests.audit import builders
from tests.bench.sse_server import Style, serve
from tests.test_cli import snap
from tests.test_render import ENTRIES

HEADER = ["sparkdoctor", "envelope", "command", "kind", "exit_code", "errors"]
QUICK = ["--rounds", "1", "--concurrency", "1", "--max-tokens", "4", "--warmup", "0"]


@pytest.fixture
def ledger(tmp_path) -> Path:
    from sparkdoctor.ledger import Ledger

    path = tmp_path / "ledger.sqlite"
    Ledger(path).close()  # an empty ledger of the current schema
    return path


@pytest.fixture
def log(tmp_path) -> Path:
    path = tmp_path / "server.log"
    path.write_text("INFO starting the server\nINFO ready\n")
    return path


@pytest.fixture
def mod(tmp_path) -> tuple[Path, Path]:
    """A unified diff and the folder it applies to (standing for a site-packages folder)."""
    site = tmp_path / "site" / "pkg"
    site.mkdir(parents=True)
    (site / "m.py").write_text("a = 1\nb = 2\n")
    diff = tmp_path / "b3.diff"
    diff.write_text("--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n+b = 3\n")
    return diff, site.parent


@pytest.fixture
def checkpoint(tmp_path) -> Path:
    return builders.qwen3_8b(tmp_path / "qwen3-8b", None)


def _success_cases(tmp_path, matrix, ledger, log, checkpoint, url, mod) -> dict[str, list[str]]:
    return {
        "check": ["check", "--facts", snap("nogpu-clean"), "--matrix", matrix],
        "matrix show": ["matrix", "show", next(iter(ENTRIES)), "--matrix", matrix],
        "matrix validate": ["matrix", "validate", matrix],
        "fix": ["fix", "--history"],
        "bench": ["bench", "--url", url, *QUICK, "--no-store"],
        "history": ["history", "--ledger", ledger],
        "conclusions": ["conclusions", "--ledger", ledger],
        "rerun": ["rerun", "--dry-run", "--ledger", ledger, "--matrix", matrix],
        "audit": ["audit", checkpoint, "--context", "512"],
        "recipe show": ["recipe", "show", "tiny-cpu"],
        "explain": ["explain", log, "--matrix", matrix],
        "diff": ["diff", snap("nogpu-clean"), snap("gb10-broken")],
        "mods check": ["mods", "check", mod[0], "--site", mod[1]],
    }


def _failure_cases(tmp_path, matrix) -> dict[str, tuple[list[str], int]]:
    missing = tmp_path / "missing"
    return {
        "check": (["check", "--facts", missing, "--matrix", matrix], 2),
        "matrix list": (["matrix", "list", "--matrix", missing], 2),
        "matrix show": (["matrix", "show", "no-such-entry", "--matrix", matrix], 2),
        "matrix validate": (["matrix", "validate", missing], 2),
        "matrix verify": (["matrix", "verify", "no-such-entry", "--matrix", matrix], 2),
        "fix": (["fix", "--rollback", "NOSUCH"], 2),  # not 5: nothing was applied or rolled back
        "bench": (["bench", "--url", "http://127.0.0.1:1", "--no-store"], 4),
        "history": (["history", "--ledger", missing], 5),
        "conclusions": (["conclusions", "--ledger", missing], 5),
        "rerun": (["rerun", "--ledger", missing, "--matrix", matrix], 5),
        "audit": (["audit", missing], 2),
        "recipe show": (["recipe", "show", str(missing)], 2),
        "recipe check": (["recipe", "check", str(missing)], 2),
        "report": (["report", "--facts", snap("nogpu-clean")], 2),  # report writes github or forum, not json
        "explain": (["explain", missing], 2),
        "diff": (["diff", missing, snap("nogpu-clean")], 2),
        "whatif": (["whatif", "vllm==0.1", "--facts", missing, "--matrix", matrix], 2),
        "fleet check": (["fleet", "check"], 2),  # no --ray, --hosts or --inventory
        "mods check": (["mods", "check", missing], 2),
        "matrix track": (["matrix", "track", "--matrix", missing], 2),
        "matrix update": (["matrix", "update"], 2),  # no SOURCE
    }


def _document(p, args) -> dict:
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        raise AssertionError(f"{args}: stdout is not one JSON document: {p.stdout[:300]!r} (stderr {p.stderr[:300]!r})") from None
    assert isinstance(doc, dict) and list(doc)[:6] == HEADER, (args, list(doc)[:8])
    assert doc["exit_code"] == p.returncode, (args, doc["exit_code"], p.returncode, p.stderr)
    return doc


def test_every_verb_succeeding_writes_json_with_its_exit_code(run, matrix, tmp_path, ledger, log, checkpoint, mod):
    # not here: recipe check (needs a vLLM to judge against), report (no JSON), whatif (resolves on the registry),
    # fleet (ssh or Ray nodes), matrix verify/track/update (registries); their failures are walked below
    with serve(Style(delay=0.001)) as (url, _style):
        cases = _success_cases(tmp_path, matrix, ledger, log, checkpoint, url, mod)
        for command, args in cases.items():
            p = run(*args, "--format", "json", timeout=120)
            doc = _document(p, args)
            assert doc["command"] == command and doc["errors"] == [], (command, doc["errors"])
            assert doc["kind"] != "error" and p.returncode in (0, 1), (command, p.returncode, p.stderr)


def test_every_verb_failing_writes_json_with_its_exit_code(run, matrix, tmp_path):
    for command, (args, code) in _failure_cases(tmp_path, matrix).items():
        p = run(*args, "--format", "json", timeout=120)
        doc = _document(p, args)
        assert p.returncode == code, (command, p.returncode, p.stderr)
        assert doc["kind"] == "error" and doc["command"] == command, (command, doc["kind"], doc["command"])
        (error,) = doc["errors"]
        assert error["exit_code"] == code and error["message"] and error["code"], error
        assert len(p.stderr.splitlines()) == 1 and p.stderr.startswith("sparkdoctor: error: "), p.stderr


def test_matrix_list_json_stays_a_bare_array(run, matrix):
    # the one document without the header: an array has no keys to put it beside, and `jq '.[]'` reads it today
    p = run("matrix", "list", "--matrix", matrix, "--format", "json")
    assert p.returncode == 0 and isinstance(json.loads(p.stdout), list)


def test_the_walk_covers_every_verb(tmp_path):
    failing = {command.split()[0] for command in _failure_cases(tmp_path, tmp_path)}
    assert failing == set(VERBS), set(VERBS) ^ failing


def test_every_verb_with_a_document_writes_it_to_output_and_nothing_to_stdout(run, matrix, tmp_path, log, checkpoint, mod):
    """`-o FILE`: the document (here JSON, with the header) lands in FILE, stdout stays empty, the exit code is the
    document's; a FILE that cannot be one (a folder) is refused before any work, the folder untouched."""
    cases = {
        "audit": ["audit", checkpoint, "--context", "512"],
        "diff": ["diff", snap("nogpu-clean"), snap("gb10-broken")],
        "explain": ["explain", log, "--matrix", matrix],
        "recipe show": ["recipe", "show", "tiny-cpu"],
        "mods check": ["mods", "check", mod[0], "--site", mod[1]],
    }
    for command, args in cases.items():
        out = tmp_path / f"{command.replace(' ', '-')}.json"
        p = run(*args, "--format", "json", "-o", out, timeout=120)
        assert p.stdout == "", (command, p.stdout[:200])
        doc = json.loads(out.read_text())
        assert doc["command"] == command and doc["exit_code"] == p.returncode, (command, doc["exit_code"], p.stderr)
        folder = tmp_path / "a-folder"
        folder.mkdir(exist_ok=True)
        p = run(*args, "-o", folder, timeout=120)
        assert p.returncode == 2 and "--output" in p.stderr and not list(folder.iterdir()), (command, p.stderr)
