"""A third-party matrix and a hostile package index aimed at the renderers, `matrix validate` and `matrix verify`: a
ref that breaks out of its link in the markdown and SARIF documents, a released wheel whose member inflates to
gigabytes, an index whose wheel never ends, a `checked` entry whose file checks run on versions its own bound
calls the other side, and a specifier of thousands of clauses. Each test failed on the code before its fix."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sparkdoctor.matrix import MatrixError, load
from sparkdoctor.matrix.consistency import problems
from sparkdoctor.verify import venvs, wheels
from sparkdoctor.verify.files import checks_on, tables_of
from tests.test_matrix_files import FILES, make_wheel, matrix_file

REPO = Path(__file__).resolve().parent.parent
SNAPSHOT = REPO / "tests" / "data" / "facts" / "gb10-broken.json"


@pytest.mark.parametrize(
    "ref, bad",
    [
        ("https://x>[click](javascript:alert(1))", "'>' at 10"),
        ("https://x/<img src=x onerror=alert(1)>", "'<' at 11"),
        ('https://x/"onmouseover=alert(1)', "'\"' at 11"),
        ("https://x/a b", "' ' at 12"),
        ("https://x/\x1b[31m", "'\\x1b' at 11"),
        ("https://x/`code`", "'`' at 11"),
    ],
)
def test_a_ref_that_would_end_its_link_is_refused_naming_the_character(
    tmp_path, ref, bad
):
    """`References: <REF>` (markdown) and `- <REF>` (SARIF help) drew `>[click](javascript:...)` as a link of its own."""
    path = (
        matrix_file(tmp_path, "")
        .read_text()
        .replace('"https://example.org/x"', json.dumps(ref))
    )
    (tmp_path / "matrix" / "demo.toml").write_text(path)
    with pytest.raises(MatrixError) as caught:
        load(tmp_path / "matrix")
    assert "field 'refs'" in str(caught.value) and f"character {bad}" in str(
        caught.value
    )


def test_every_bundled_ref_is_still_a_url():
    m = load()
    assert sum(len(e.refs) for e in m.entries) > 200


def test_a_markup_ref_never_reaches_the_markdown_report(tmp_path):
    """The report a user pastes into an issue: before, the ref's `>` closed the autolink and the rest was markdown."""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "a.toml").write_text("""component = "evil"
[[entry]]
id = "evil-ref"
title = "t"
severity = "error"
action = "monitor"
summary = "s"
remedy = "r"
when.gpu_arch = ["sm_121a"]
refs = ["https://x>[click](javascript:alert(1))<img/src=x/onerror=alert(2)>"]
""")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sparkdoctor",
            "check",
            "--facts",
            str(SNAPSHOT),
            "--matrix",
            str(folder),
            "--no-kernels",
            "--format",
            "markdown",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 2 and "javascript:" not in done.stdout, done.stdout[
        -2000:
    ]
    assert (
        done.stderr.count("\n") == 1
        and "field 'refs'" in done.stderr
        and "'>' at 10" in done.stderr
    )


def test_a_wheel_member_that_inflates_past_the_limit_is_refused_before_it_is_inflated(
    tmp_path, monkeypatch
):
    """`matrix verify --kind files` read a downloaded wheel's member whole: a 7 MB wheel with a 1.5 GB deflated
    six.py took 3 GB of memory (a larger one ends in the OOM killer). The remote reader judged the central
    directory's size first; the local one now does too (the limit made small here, the member 2 MiB)."""
    monkeypatch.setattr(wheels, "MEMBER_LIMIT", 1024 * 1024)
    root = tmp_path / "wheels"
    monkeypatch.setenv("SPARKDOCTOR_WHEELS", str(root))
    make_wheel(
        root,
        "demo-pkg",
        "1.0",
        {"demo/envs.py": "OLD_SWITCH = 1\n" + "#" * (2 * 1024 * 1024)},
    )
    table = tables_of(load(matrix_file(tmp_path, FILES)).entries[0])[0]
    run = checks_on(table, "1.0", "affected")
    assert (
        run.error
        == "demo_pkg-1.0-py3-none-any.whl: member demo/envs.py is 2,097,167 bytes, over the 1,048,576-byte limit"
    )
    assert not run.results


def test_a_wheel_member_within_the_limit_reads_as_before(tmp_path, monkeypatch):
    monkeypatch.setattr(wheels, "MEMBER_LIMIT", 1024 * 1024)
    root = tmp_path / "wheels"
    monkeypatch.setenv("SPARKDOCTOR_WHEELS", str(root))
    make_wheel(
        root,
        "demo-pkg",
        "1.0",
        {
            "demo/envs.py": "OLD_SWITCH = 1\n",
            "demo/errors.py": "cannot start" + " " * 1_000_000,
        },
    )
    table = tables_of(load(matrix_file(tmp_path, FILES)).entries[0])[0]
    run = checks_on(table, "1.0", "affected")
    assert run.error is None and run.holds


MISPLACED = FILES.replace(
    'files.affected = ["1.0"]', 'files.affected = ["2.0"]'
).replace('files.fixed = ["2.0"]', 'files.fixed = ["1.0"]')


def test_file_checks_on_the_wrong_side_of_the_bound_are_a_problem_for_validate(
    tmp_path,
):
    """`evidence = "checked"`, bound <2.0, yet the checks were to hold on 2.0 and fail on 1.0: `matrix validate` said
    ok and `matrix verify` said CONFIRMED, for checks that prove the range the entry calls fixed."""
    matrix = load(matrix_file(tmp_path, MISPLACED))
    found, _ = problems(matrix)
    assert found == [
        f"{tmp_path / 'matrix' / 'demo.toml'}: entry demo-entry: files.affected 2.0 is outside the entry's bound demo-pkg <2.0: "
        "its file checks would prove another range than its bound",
        f"{tmp_path / 'matrix' / 'demo.toml'}: entry demo-entry: files.fixed 1.0 is inside the entry's bound demo-pkg <2.0: "
        "its file checks would prove another range than its bound",
    ]
    assert problems(load(matrix_file(tmp_path, FILES)))[0] == []


def test_file_checks_on_the_wrong_side_of_the_bound_are_contradicted_by_verify(
    tmp_path, monkeypatch
):
    root = tmp_path / "wheels"
    monkeypatch.setenv("SPARKDOCTOR_WHEELS", str(root))
    make_wheel(
        root,
        "demo-pkg",
        "1.0",
        {"demo/envs.py": "NEW = 1", "demo/errors.py": "cannot start"},
    )
    make_wheel(
        root,
        "demo-pkg",
        "2.0",
        {"demo/envs.py": "OLD_SWITCH = 1", "demo/errors.py": "cannot start"},
    )
    path = matrix_file(tmp_path, MISPLACED)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sparkdoctor",
            "matrix",
            "verify",
            "--matrix",
            str(path),
            "--kind",
            "files",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 1, done.stderr
    (result,) = json.loads(done.stdout)["results"]
    assert result["verdict"] == "contradicted"
    assert (
        result["why"]
        == "files.affected 2.0 is outside the entry's bound demo-pkg <2.0; files.fixed 1.0 is inside the entry's bound demo-pkg <2.0"
    )


def test_a_lockstep_wheel_is_judged_against_its_family_bound(tmp_path):
    """The bound may name the family's head (nvidia-cutlass-dsl) while the table reads a member (libs-base)."""
    text = matrix_file(
        tmp_path,
        MISPLACED.replace('files.package = "demo-pkg"', 'files.package = "demo-libs"'),
    )
    text.write_text(
        text.read_text().replace(
            'component = "demo"\n',
            'component = "demo"\nlockstep = { "demo-pkg" = ["demo-libs"] }\n',
        )
    )
    assert [line.split(": ", 2)[2] for line in problems(load(text))[0]][0].startswith(
        "files.affected 2.0 is outside the entry's bound demo-pkg <2.0"
    )


class EndlessIndex:
    """A simple index on 127.0.0.1 whose one wheel link answers with an endless body (about 20 MB/s)."""

    def __init__(self) -> None:
        wheel_name = "demo_pkg-1.0-py3-none-any.whl"
        self.stopping = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path.startswith("/simple/"):
                    body = f'<html><body><a href="/files/{wheel_name}">{wheel_name}</a></body></html>'.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                with contextlib.suppress(OSError):
                    while not outer.stopping.is_set():
                        self.wfile.write(b"\0" * (1 << 20))
                        time.sleep(0.05)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/simple/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_wheel_download_that_never_ends_is_stopped_at_the_byte_limit_and_leaves_nothing(
    tmp_path, monkeypatch
):
    """`pip download` had a time limit (900 s) and no byte cap: an index answering with an endless wheel wrote
    115 MB/s into /tmp/pip-unpack-* until then (~100 GB). Now every file pip writes stops at venvs.FILE_LIMIT
    (made 4 MiB here; the time limit 60 s so the code before the fix fails instead of filling the disk), and pip's
    temporary files live in a folder beside the wheels that is removed."""
    index = EndlessIndex()
    try:
        for name in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
        monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
        (tmp_path / "tmp").mkdir()
        monkeypatch.setattr(venvs, "FILE_LIMIT", 4 * 1024 * 1024)
        monkeypatch.setattr(wheels, "DOWNLOAD_TIMEOUT", 60.0)
        with pytest.raises(wheels.WheelError) as caught:
            wheels.wheel("demo-pkg", "1.0", tmp_path / "wheels")
    finally:
        index.close()
    assert str(caught.value) == (
        "pip download demo-pkg==1.0 failed: pip wrote a file past 4,194,304 bytes and was stopped "
        "(no released wheel file is that large: the index's answer is not one)"
    )
    assert [p.name for p in (tmp_path / "wheels").iterdir()] == [".demo-pkg-1.0.lock"]
    assert not list((tmp_path / "tmp").iterdir())


def test_a_scratch_install_still_installs_through_the_bounded_pip(tmp_path):
    """The bound is on each file pip writes, through `python -c` (sparkdoctor's pip installing with --python)."""
    wheel_file = make_wheel(
        tmp_path / "w",
        "demo-pkg",
        "1.0",
        {
            "demo/__init__.py": "X = 1\n",
            "demo_pkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        },
    )
    venv = tmp_path / "venv"
    assert (
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=120
        ).returncode
        == 0
    )
    argv = venvs.pip_install(venv / "bin" / "python", ("--no-index", str(wheel_file)))
    done = venvs.run_pip(argv, 300.0, tmp_path)
    assert done.ok, done.stderr
    assert (
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import demo; assert demo.X == 1"],
            timeout=60,
        ).returncode
        == 0
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["venv", "w"]


def test_a_specifier_of_thousands_of_clauses_is_refused_at_load(tmp_path):
    """`matrix validate` compares the ranges of two entries at every bound of both: two entries whose `vllm` bound had
    20,000 clauses (a 378 KB file) kept it busy past 2 minutes (1,000 clauses: 2.1 s). No real bound has more than 4."""
    clauses = ",".join(f">=0.{i}" for i in range(2000))
    path = matrix_file(
        tmp_path, "", when=f'when.packages = {{ "demo-pkg" = "{clauses}" }}'
    )
    with pytest.raises(MatrixError) as caught:
        load(path)
    assert str(caught.value).endswith(
        "field 'when.packages' demo-pkg: specifier '>=0.0,>=0.1,>=0.2,>=… (16889 characters)' "
        "has 2,000 clauses; at most 32 are read"
    )
    load(
        matrix_file(
            tmp_path,
            "",
            when=f'when.packages = {{ "demo-pkg" = "{",".join(f">=0.{i}" for i in range(32))}" }}',
        )
    )


@pytest.mark.parametrize(
    "bounds, field",
    [
        (
            [1, "x", None],
            "field 'bounds[0]' must be an object whose 'runs' is a list of objects",
        ),
        ({"a": 1}, "field 'bounds' must be a list"),
        (
            [{"id": "x", "runs": [1]}],
            "field 'bounds[0]' must be an object whose 'runs' is a list of objects",
        ),
        (
            [{"id": "x", "runs": [{"role": "fixed", "checks": [{"check": []}]}]}],
            "field 'bounds[0].runs[0].checks' must be",
        ),
    ],
)
def test_a_bounds_document_of_another_shape_is_one_line_naming_the_field(
    tmp_path, bounds, field
):
    """`matrix validate --bounds FILE` with a document of kind "bounds" whose fields had other types: an internal error
    (`AttributeError: 'int' object has no attribute 'get'`, or TypeError for a list as a check's label)."""
    from sparkdoctor.exitcodes import EXIT_USAGE
    from tests.inproc import invoke

    path = tmp_path / "bounds.json"
    path.write_text(json.dumps({"kind": "bounds", "bounds": bounds}))
    code, _, error = invoke("matrix", "validate", "--bounds", path)
    assert (
        code == EXIT_USAGE
        and f"bounds.json: not a bounds document: {field}" in error
        and "\n" not in error.strip()
    ), error


class EndlessPage(EndlessIndex):
    """An index whose every page is an endless list of links (about 50 MB/s)."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Connection", "close")
                self.end_headers()
                with contextlib.suppress(OSError):
                    self.wfile.write(b"<html><body>")
                    while not outer.stopping.is_set():
                        self.wfile.write(b"<a href='x'>x</a>" * 60000)
                        time.sleep(0.02)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/simple/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def test_a_version_list_page_that_never_ends_is_stopped_at_the_memory_limit(
    monkeypatch,
):
    """`pip index versions` (the released versions for --bisect, --latest and `also` wheels) holds the page whole: an
    endless one grew pip by 130 MB/s until the 120 s limit (~16 GB). Now its address space stops at INDEX_MEMORY
    (made 512 MiB here; the time limit 30 s so the code before the fix fails by it instead)."""
    page = EndlessPage()
    try:
        for name in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
        monkeypatch.setenv("PIP_INDEX_URL", page.url)
        monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
        monkeypatch.setattr(wheels, "INDEX_MEMORY", 512 * 1024 * 1024)
        monkeypatch.setattr(wheels, "INDEX_TIMEOUT", 30.0)
        with pytest.raises(wheels.WheelError) as caught:
            wheels.released_versions("endless-page-demo")
    finally:
        page.close()
    assert str(caught.value) == (
        "pip index versions endless-page-demo failed: pip ran out of the memory it may use and was stopped "
        "(an index page that large is not one)"
    )


def test_a_stack_resolve_whose_wheel_never_ends_is_stopped_at_the_byte_limit(
    tmp_path, monkeypatch
):
    """`matrix verify --stacks`: pip's dry run downloads a wheel whose metadata the index does not serve apart; an
    endless one was written into /tmp until the 600 s limit. Now the same FILE_LIMIT, in the run's own folder."""
    from sparkdoctor.verify import stacks
    from tests.test_stacks_resolve import stack

    index = EndlessIndex()
    try:
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
        monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
        (tmp_path / "tmp").mkdir()
        monkeypatch.setattr(venvs, "FILE_LIMIT", 4 * 1024 * 1024)
        monkeypatch.setattr(stacks, "RESOLVE_TIMEOUT", 60.0)
        result = stacks.resolve(stack(tmp_path, packages='"demo-pkg" = "==1.0"'))
    finally:
        index.close()
    assert result.verdict == "error"
    assert result.why.startswith(
        "pip wrote a file past 4,194,304 bytes and was stopped"
    ), result.why
    assert not list((tmp_path / "tmp").iterdir())
