"""A third-party matrix aimed at the renderers, `matrix validate` and `matrix verify`: a ref that breaks out of its
link in the markdown and SARIF documents, a released wheel whose member inflates to gigabytes, a `checked` entry whose
file checks run on versions its own bound calls the other side, a specifier of thousands of clauses and a bounds
document of another shape (a hostile index: test_attack_pip_downloads.py). Each test failed on the code before its
fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.matrix import MatrixError, load
from sparkdoctor.matrix.consistency import problems
from sparkdoctor.verify import wheels
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
