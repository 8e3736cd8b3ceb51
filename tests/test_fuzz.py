"""Property-based fuzzing of the public entry points: no input may produce an internal error.

Over 5,500 generated snapshots, matrix files and config files (tests/fuzz/) go through
  - the library path, for the bulk because it is fast: Facts.from_dict / Facts.load ->
    findings.build_report -> every renderer (json, junit, markdown, console, matrix list/show);
  - the real command in-process (typer's CliRunner on sparkdoctor.cli.app, classified the way
    cli.main() would print it): `check --facts F --matrix M [--format X] [-v]`, `matrix validate M`,
    `check --config C`, a few hundred times.

An internal error is any exception other than the documented one-line errors (FactsError,
MatrixError, ConfigError, any SparkdoctorError), an exit code outside the README's table, a
multi-line or traceback error, a --format json stdout that is not strict JSON, a junit document that
is not XML, output that cannot be written as UTF-8, or an example that runs away (a watchdog on CPU time,
not wall time, stops real hangs, e.g. a catastrophic regex). Two properties more: a config's ignores are
the ids written in it, and `matrix validate` and `check --matrix` judge a file alike. Runs are
reproducible (derandomize, no example database); the number of examples is printed and must reach
MIN_TOTAL.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import signal
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from sparkdoctor import cli
from sparkdoctor.config import ConfigError, load_config
from sparkdoctor.errors import SparkdoctorError
from sparkdoctor.exitcodes import EXIT_FINDINGS, EXIT_OK, EXIT_UNPROBEABLE, EXIT_USAGE
from sparkdoctor.facts import Facts, FactsError
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import SEVERITIES, MatrixError, load
from sparkdoctor.views import dump
from sparkdoctor.views.console import render_console
from sparkdoctor.views.matrix import item_dict, list_matrix, show_item, sorted_rows
from tests import fuzz as S
from tests.check_documents import FORMATS, render_text
from tests.workers import summary_line

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MIN_TOTAL = S.n(5_500)  # the same margin under the planned total (5,880) as 10,000 had under 10,380
# The total is counted across the module's tests, so they all run on one xdist worker.
pytestmark = pytest.mark.xdist_group("fuzz")
EXIT_TABLE = {EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_UNPROBEABLE}  # README's exit code table
REPORT_EXITS = {EXIT_OK, EXIT_FINDINGS, EXIT_UNPROBEABLE}  # what a report itself may say
HARD_LIMIT_S = 30  # CPU seconds: a hang is stopped here (a replay of a hang while shrinking costs this much).
# CPU time, not wall time, and no hypothesis deadline: a busy machine (the other xdist worker, other jobs) must
# never fail an example that is merely waiting for a core.
TEXT_FORMATS = tuple(f for f in FORMATS if f != "console")

FUZZ = settings(
    derandomize=True,  # the same examples on every run and in CI
    database=None,
    deadline=None,  # typical examples take 5-100 ms; `bounded` stops a real hang by CPU time
    suppress_health_check=list(HealthCheck),  # big inputs are the point
    print_blob=False,
    # no explain phase: it re-runs a failing example under a tracer (many times slower), which reads as a hang
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)

EXAMPLES: Counter[str] = Counter()


class Hung(Exception):
    """An example still running at HARD_LIMIT_S."""


@contextlib.contextmanager
def bounded(seconds: float = HARD_LIMIT_S):
    def alarm(signum, frame):
        raise Hung(f"still running after {seconds} s of CPU time")

    re.purge()  # each example pays for its own regexes, as a fresh `sparkdoctor check` does
    previous = signal.signal(signal.SIGPROF, alarm)
    # then every CPU second: an alarm that lands in code which swallows exceptions (a gc callback) fires again
    signal.setitimer(signal.ITIMER_PROF, seconds, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def count(name: str) -> None:
    EXAMPLES[name] += 1


# ---- what a good outcome looks like -----------------------------------------------------------------


def assert_one_line(message: str) -> None:
    lines = message.splitlines()
    assert len(lines) == 1 and lines[0].strip(), f"error is not one line: {message[:500]!r}"
    assert "Traceback" not in message


def strict_json(text: str):
    def refuse(name: str):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def check_document(fmt: str, text: str, code: int) -> None:
    """A machine-readable report: writable as UTF-8 and a valid document of its kind."""
    text.encode("utf-8")  # raises on lone surrogates: the CLI could not print it
    if fmt == "json":
        assert strict_json(text)["exit_code"] == code
    elif fmt == "junit":
        ET.fromstring(text.encode("utf-8"))


def utf8_sink() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)


def report_everything(facts: Facts, matrix, *, fail_on: str = "error", ignore=(), formats=TEXT_FORMATS,
                      console: dict | None = None) -> None:
    report = build_report(facts, matrix, fail_on=fail_on, ignore=set(ignore))
    code = report.exit_code()
    assert code in REPORT_EXITS, f"exit code {code} is not in the table"
    for fmt in formats:
        check_document(fmt, render_text(report, fmt), code)
    if console is not None:
        terminal = console["terminal"]
        out = Console(file=utf8_sink(), width=console["width"], force_terminal=terminal,
                      color_system="truecolor" if terminal else None)
        render_console(report, out, verbose=console["verbose"])


def load_snapshot_doc(doc) -> Facts | None:
    try:
        return Facts.from_dict(S.materialize(doc), source="fuzz.json")
    except FactsError as exc:
        assert_one_line(str(exc))
        return None


# ---- fixtures ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def tally(request):
    """Prints how many generated inputs ran; when the whole module ran and passed, asserts the total
    (a failing test stops early, and says why itself)."""
    failed_before = request.session.testsfailed
    yield
    total = sum(EXAMPLES.values())
    detail = ", ".join(f"{k} {v}" for k, v in sorted(EXAMPLES.items()))
    summary_line(request.config, f"fuzz: {total:,} generated inputs ({detail})")
    module_tests = {item.originalname for item in request.session.items if item.module is request.module}
    if module_tests >= set(TEST_NAMES) and request.session.testsfailed == failed_before:
        assert total >= MIN_TOTAL, f"only {total} generated inputs ran ({detail}); want {MIN_TOTAL}"


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


# Loaded once, and not as fixtures: hypothesis prints a failing test's arguments, fixtures included.
bundled_matrix = functools.lru_cache(maxsize=None)(lambda: load(None))


FACT_BASES = S.snapshot_bases()
# the matrix fuzz reads env values that make backtracking regexes explode
SLOW_BASES = [{**b, "env": {**b["env"], **S.SLOW_ENV}} if isinstance(b.get("env"), dict) else b for b in FACT_BASES]


# ---- the library path: snapshots ------------------------------------------------------------------


@settings(FUZZ, max_examples=S.n(1700))
@given(doc=S.snapshots(), fail_on=st.sampled_from(SEVERITIES),
       ignore=st.lists(st.sampled_from(["driver-cuda-below-129", "no-such-id", "", "x\ny"]), max_size=2))
def test_snapshot_reports(doc, fail_on, ignore):
    count("snapshot->json/junit/markdown")
    with bounded():
        facts = load_snapshot_doc(doc)
        if facts is not None:
            report_everything(facts, bundled_matrix(), fail_on=fail_on, ignore=ignore)


@settings(FUZZ, max_examples=S.n(450))
@given(doc=S.snapshots(max_mutations=3),
       console=st.fixed_dictionaries({"verbose": st.booleans(), "terminal": st.booleans(), "width": st.sampled_from([40, 100, 200])}))
def test_snapshot_console(doc, console):
    count("snapshot->console")
    with bounded():
        facts = load_snapshot_doc(doc)
        if facts is not None:
            report_everything(facts, bundled_matrix(), formats=(), console=console)


@settings(FUZZ, max_examples=S.n(1000))
@given(blob=S.snapshot_files())
def test_snapshot_files(work, blob):
    count("snapshot file->Facts.load->json")
    path = work / "snapshot.json"
    path.write_bytes(blob)
    with bounded():
        try:
            facts = Facts.load(path)
        except FactsError as exc:
            assert_one_line(str(exc))
            return
        report_everything(facts, bundled_matrix(), formats=("json",))


# ---- the library path: matrices -------------------------------------------------------------------


def load_matrix_file(work: Path, blob: bytes, beside: str | None):
    """The mutated file alone, or in a folder beside a bundled one (ids must stay unique)."""
    folder = work / "matrix"
    folder.mkdir(exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    (folder / "fuzz.toml").write_bytes(blob)
    if beside:
        (folder / beside).write_bytes((S.MATRIX_DIR / beside).read_bytes())
    try:
        return load(folder)
    except MatrixError as exc:
        assert_one_line(str(exc))
        return None


@settings(FUZZ, max_examples=S.n(1200))
@given(blob=S.matrix_files(), beside=st.sampled_from([None, None, "driver.toml", "stacks.toml"]),
       base=st.sampled_from(range(len(FACT_BASES))))
def test_matrix_files(work, blob, beside, base):
    count("matrix file->load/validate->report")
    with bounded():
        matrix = load_matrix_file(work, blob, beside)
        if matrix is None:
            return
        # the loader is the one validation path (`matrix validate` is a load), so nothing is left to add
        report_everything(Facts.from_dict(SLOW_BASES[base]), matrix)


@settings(FUZZ, max_examples=S.n(300))
@given(blob=S.matrix_files(max_mutations=3), fmt=st.sampled_from(["console", "json"]))
def test_matrix_listing(work, blob, fmt):
    count("matrix file->list/show")
    with bounded():
        matrix = load_matrix_file(work, blob, None)
        if matrix is None:
            return
        console = Console(file=utf8_sink(), width=100)
        if fmt == "json":
            strict_json(dump(sorted_rows(matrix)))
        else:
            list_matrix(matrix, console)
        for item in [*matrix.entries[:3], *matrix.stacks[:1]]:
            if fmt == "json":
                strict_json(dump(item_dict(item)))
            else:
                show_item(item, console)


# ---- the library path: configs --------------------------------------------------------------------


def written_ignores(blob: bytes) -> set[str] | None:
    """The ids a config file names under check.ignore (None: not readable as TOML; a byte-order mark at the start is passed over, as the config reader does)."""
    try:
        doc = tomllib.loads(blob.decode("utf-8-sig"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    check = doc.get("check")
    ignore = check.get("ignore", []) if isinstance(check, dict) else []
    items = ignore if isinstance(ignore, list) else [ignore]
    return {i if isinstance(i, str) else i.get("id") for i in items if isinstance(i, (str, dict))}


@settings(FUZZ, max_examples=S.n(700))
@given(blob=S.config_files(), base=st.sampled_from(range(len(FACT_BASES))))
def test_config_files(work, blob, base):
    count("config file->load_config->report")
    path = work / "config.toml"
    path.write_bytes(blob)
    with bounded():
        try:
            cfg = load_config(path)
        except ConfigError as exc:
            assert_one_line(str(exc))
            return
        assert cfg.fail_on in (None, *SEVERITIES)
        written = written_ignores(blob)
        assert written is not None and set(cfg.ignore) <= written, f"ignores {sorted(cfg.ignore)} were not written in the file"
        report_everything(Facts.from_dict(FACT_BASES[base]), bundled_matrix(), fail_on=cfg.fail_on or "error",
                          ignore=cfg.ignore, formats=("json",))


# ---- the real command, in-process -----------------------------------------------------------------


@pytest.fixture(scope="module")
def run_cli(work):
    """Invoke the CLI and return (exit code, stdout, the one-line error or ""), judged as cli.main() prints it."""
    cwd = work / "cwd"
    cwd.mkdir()
    (work / "no-user-config.toml").write_text("")  # an empty config: the user's own stays out
    env = {"SPARKDOCTOR_CONFIG": str(work / "no-user-config.toml"), "SPARKDOCTOR_CACHE_DIR": str(work / "cache"),
           "COLUMNS": "100", "SPARKDOCTOR_DEBUG": None, "NO_COLOR": None, "FORCE_COLOR": None}
    runner = CliRunner()
    before = os.getcwd()
    os.chdir(cwd)  # no stray ./sparkdoctor.toml

    def call(*args: str) -> tuple[int, str, str]:
        with bounded():
            result = runner.invoke(cli.app, [str(a) for a in args], env=env, standalone_mode=False)
        exc = result.exception
        error = ""
        if exc is None:
            code = result.return_value if isinstance(result.return_value, int) else 0
        elif isinstance(exc, SystemExit):
            code = exc.code if isinstance(exc.code, int) else 0
        elif isinstance(exc, SparkdoctorError):  # every one-line error carries its exit code (sparkdoctor/errors.py)
            code, error = exc.exit_code, str(exc)
        elif callable(getattr(exc, "format_message", None)):  # click usage errors
            code, error = EXIT_USAGE, exc.format_message()
        else:
            raise exc  # an internal error: the traceback says where
        assert code in EXIT_TABLE, f"exit code {code} is not in the table ({args})"
        if error:
            assert_one_line(error)
        stderr = result.stderr
        assert "Traceback" not in stderr and len(stderr.splitlines()) <= 1, f"stderr: {stderr[:500]!r}"
        return code, result.stdout, error

    yield call
    os.chdir(before)


@settings(FUZZ, max_examples=S.n(260))
@given(snapshot=S.snapshot_files(max_mutations=3), matrix=st.one_of(st.none(), S.matrix_files(max_mutations=2)),
       fmt=st.sampled_from(FORMATS), verbose=st.booleans(), strict=st.booleans())
def test_cli_check(run_cli, work, snapshot, matrix, fmt, verbose, strict):
    count("cli check --facts --matrix")
    facts = work / "cli-facts.json"
    facts.write_bytes(snapshot)
    args = ["check", "--facts", facts, "--format", fmt]
    if matrix is not None:
        (work / "cli-matrix.toml").write_bytes(matrix)
        args += ["--matrix", work / "cli-matrix.toml"]
    args += ["-v"] * verbose + ["--strict"] * strict
    code, stdout, error = run_cli(*args)
    if fmt == "json" and not error:
        assert strict_json(stdout)["exit_code"] == code


@settings(FUZZ, max_examples=S.n(160))
@given(matrix=S.matrix_files())
def test_cli_matrix_validate(run_cli, work, matrix):
    """`matrix validate` and `check --matrix` judge a matrix file the same way (one validation)."""
    count("cli matrix validate / check --matrix")
    path = work / "validate.toml"
    path.write_bytes(matrix)
    code, _, error = run_cli("matrix", "validate", path)
    assert code in (EXIT_OK, EXIT_USAGE)
    check_code, _, check_error = run_cli("check", "--facts", S.FACTS_DIR / "gb10-broken.json", "--matrix", path, "-f", "json")
    if code == EXIT_USAGE:
        assert check_code == EXIT_USAGE, f"matrix validate refused it ({error}) but check --matrix used it"
    else:
        assert not check_error, f"matrix validate accepted it but check --matrix refused it: {check_error}"


@settings(FUZZ, max_examples=S.n(110))
@given(config=S.config_files())
def test_cli_config(run_cli, work, config):
    count("cli check --config")
    path = work / "cli-config.toml"
    path.write_bytes(config)
    code, stdout, error = run_cli("check", "--facts", S.FACTS_DIR / "gb10-broken.json", "--config", path, "-f", "json")
    if not error:
        assert strict_json(stdout)["exit_code"] == code


TEST_NAMES = [name for name in list(globals()) if name.startswith("test_")]
