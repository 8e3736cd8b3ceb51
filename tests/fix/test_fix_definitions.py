"""Fix definitions and the matrix agree: every action = "fix" entry names a fix, every fix is used,
every field is validated with one line naming the file and the field, and every bundled fix is safe."""

import json
import os
from pathlib import Path

import pytest

from sparkdoctor.fix.definitions import VOCABULARY, load_all, load_file
from sparkdoctor.fix.interface import DefinitionError
from sparkdoctor.matrix import MatrixError
from sparkdoctor.matrix.loader import load

DATA = Path(__file__).parent / "data"
VENDOR_IMAGE_PACKAGES = {"torch", "vllm", "triton", "torchvision", "torchaudio"}


def test_every_fix_entry_names_a_fix_and_every_fix_is_used():
    matrix = load()
    fixes = load_all()
    named = {e.fix for e in matrix.entries if e.fix}
    assert all(e.fix for e in matrix.entries if e.action == "fix")
    assert named == set(fixes), "a fix no entry uses, or an entry naming no fix file"
    assert len(fixes) >= 10


def test_bundled_fixes_are_safe():
    """No bundled fix installs, uninstalls or reinstalls a vendor-image package (torch, vLLM) from the
    registry (the audit's NGC torch-2.12a ABI hazard); restoring their files is gated by the source check."""
    for fix in load_all().values():
        for action in fix.actions:
            assert action.kind in VOCABULARY
            if action.kind in ("install", "uninstall", "reinstall-family"):
                from sparkdoctor.fix.definitions import touched_packages

                assert not (touched_packages(action) & VENDOR_IMAGE_PACKAGES), (fix.id, action)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / f"{name}.toml"
    p.write_text(text)
    return p


GOOD = 'schema = 1\nid = "xx"\ntitle = "t"\nsummary = "s"\n'


@pytest.mark.parametrize("body, field", [
    ('[[action]]\nkind = "shell"\n', "field 'kind' must be one of"),
    ('[[action]]\nkind = "install"\nrequirements = ["six>=1"]\n', "exact requirements"),
    ('[[action]]\nkind = "install"\nrequirements = ["six @ https://x/y.whl"]\n', "field 'requirements'"),
    ('[[action]]\nkind = "install"\nrequirements = ["six==1"]\ncommand = "rm -rf /"\n', "unknown field(s): 'command'"),
    ('[[action]]\nkind = "unset-env"\nnames = ["A B"]\n', "field 'names'"),
    ('[[action]]\nkind = "drop-flag"\nflag = "; rm"\n', "field 'flag'"),
    ('[[action]]\nkind = "pin"\npackage = "six"\n', "exactly one of 'specifier' or remove"),
    ('[[action]]\nkind = "reinstall-family"\npackages = ["a"]\nrequirement = "b"\nversion = "installed"\n', "field 'requirement'"),
    ('[[action]]\nkind = "reinstall-family"\npackages = ["a"]\nrequirement = "a"\nversion = "latest!"\n', "field 'version'"),
    ('', "field 'action'"),
    # a line break of any kind str.splitlines knows (the env file is read with it): the edit would write a second
    # variable (PYTHONPATH=..., which the check after the apply runs the target's interpreter with)
    *[(f'[[action]]\nkind = "set-env"\nname = "A"\nvalue = "x{esc}PYTHONPATH=/tmp/p{esc}X="\n', "field 'value'")
      for esc in ("\\n", "\\r", "\\f", "\\u000b", "\\u001c", "\\u0085", "\\u2028", "\\u2029", "\\u0000")],
])
def test_a_bad_fix_file_is_one_line_naming_file_and_field(tmp_path, body, field):
    path = _write(tmp_path, "xx", GOOD + body)
    with pytest.raises(DefinitionError) as info:
        load_file(path)
    message = str(info.value)
    assert str(path) in message and field in message and "\n" not in message


def test_fix_id_must_match_its_file_name(tmp_path):
    path = _write(tmp_path, "other", GOOD + '[[action]]\nkind = "uninstall"\npackages = ["six"]\n')
    with pytest.raises(DefinitionError, match="named <id>.toml"):
        load_file(path)


def test_a_newer_fix_schema_is_refused(tmp_path):
    path = _write(tmp_path, "xx", GOOD.replace("schema = 1", "schema = 2") + '[[action]]\nkind = "uninstall"\npackages = ["six"]\n')
    with pytest.raises(DefinitionError, match="schema"):
        load_file(path)


def test_an_entry_naming_an_unknown_fix_is_refused_by_the_matrix_loader(tmp_path):
    text = (DATA / "matrix" / "small.toml").read_text().replace('fix = "six-upgrade"', 'fix = "no-such-fix"')
    (tmp_path / "m.toml").write_text(text)
    with pytest.raises(MatrixError) as info:
        load(tmp_path, DATA / "fixes")
    assert "m.toml: entry small-six-old: field 'fix' names 'no-such-fix'" in str(info.value)


def test_the_test_matrix_and_fixes_load():
    matrix = load(DATA / "matrix", DATA / "fixes")
    assert {e.fix for e in matrix.entries} == set(load_all(DATA / "fixes"))


def test_unused_fix_and_missing_fix_rules_of_the_bundled_matrix():
    from sparkdoctor.matrix.loader import check_fixes

    entries = load().entries
    with pytest.raises(MatrixError, match="named by no matrix entry"):
        check_fixes(entries, {e.fix for e in entries if e.fix} | {"orphan-fix"}, bundled=True)
    bare = [e for e in entries if e.action == "fix"][0]
    bare.fix = None
    with pytest.raises(MatrixError, match=f"entry {bare.id}: field 'fix' is missing"):
        check_fixes([bare], set(), bundled=True)


# ---- a matrix written for `fix --matrix M --fixes F`, used by the verbs that only judge --------------------------
def test_check_judges_with_a_matrix_whose_fixes_are_in_a_folder_of_its_own():
    """`check --matrix M` refused a matrix naming fixes of its own ("no fix in fixes/"): check has no --fixes, and
    it never runs a fix. It judges with it now; the finding still names its fix."""
    from sparkdoctor.check import CheckRequest, check
    from sparkdoctor.facts import Facts
    from tests.test_render import FACTS_DIR

    outcome = check(CheckRequest(facts=Facts.load(FACTS_DIR / "nogpu-clean.json"), matrix=DATA / "matrix"))
    assert "six-upgrade" in {e.fix for e in outcome.matrix.entries} and outcome.report.exit_code() in (0, 1)


@pytest.mark.parametrize("fmt", ["console", "junit"])
def test_checks_finding_with_a_fix_of_its_own_says_fix_needs_matrix_and_fixes(tmp_path, fmt):
    """check judges with a matrix whose fixes are in a folder of its own, and said "sparkdoctor fix shows the plan" for
    them: that command refuses the id ("no fix in fixes/"). check gets no --fixes (it never runs a fix): the hint names
    the options fix needs; a bundled fix keeps the short hint."""
    import subprocess
    import sys

    from tests.test_render import FACTS_DIR

    doc = json.loads((FACTS_DIR / "nogpu-clean.json").read_text())
    doc["packages"]["six"] = {**doc["packages"]["torch"], "name": "six", "version": "1.16.0"}
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(doc))
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--matrix", str(DATA / "matrix"), "--facts",
                           str(facts), "--format", fmt], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "300"})
    assert "six-upgrade" in done.stdout, done.stdout[-2000:] + done.stderr
    said = " ".join(done.stdout.split())
    assert "six-upgrade (not a bundled fix: sparkdoctor fix --matrix MATRIX --fixes FOLDER, FOLDER holding six-upgrade.toml" \
        in said.replace("six-upgrade  (", "six-upgrade ("), said[-2000:]
    assert "(sparkdoctor fix shows the plan)" not in said


def test_fix_and_validate_still_refuse_a_fix_id_that_names_no_fix(tmp_path):
    """fix acts on the ids: without --fixes they must be bundled fixes; `matrix validate` says the same, and passes
    with the folder that holds them."""
    from sparkdoctor.check import CheckRequest, check
    from sparkdoctor.commands.matrix import ValidateCommand, run_validate
    from sparkdoctor.facts import Facts
    from tests.test_render import FACTS_DIR

    facts = Facts.load(FACTS_DIR / "nogpu-clean.json")
    with pytest.raises(MatrixError, match="names 'six-upgrade', which is no fix in fixes/ .*--fixes FOLDER"):
        check(CheckRequest(facts=facts, matrix=DATA / "matrix", strict_fixes=True))
    with pytest.raises(MatrixError, match="names 'six-upgrade'"):
        run_validate(ValidateCommand(matrix=DATA / "matrix"), None, None)
    assert run_validate(ValidateCommand(matrix=DATA / "matrix"), None, DATA / "fixes").exit_code == 0
    (tmp_path / "m.toml").write_text((DATA / "matrix" / "small.toml").read_text().replace('"six-upgrade"', '"no-such"'))
    with pytest.raises(MatrixError, match=f"names 'no-such', which is no fix in fixes/ \\({DATA / 'fixes'}"):
        run_validate(ValidateCommand(matrix=tmp_path), None, DATA / "fixes")


@pytest.mark.parametrize("given", ["missing", "a-file"])
def test_validate_names_a_fixes_folder_that_is_not_there_not_an_entry(tmp_path, given):
    """`matrix validate --fixes TYPO` blamed the first entry with a fix ("matrix/cutlass-dsl.toml: entry ...: field 'fix'
    names '...', which is no fix in fixes/ (TYPO; known: none)"), as if the bundled matrix were broken. The folder is
    the problem, said as `fix --fixes TYPO` says it: one line, exit 2, JSON on stdout."""
    import subprocess
    import sys

    where = tmp_path / given
    if given == "a-file":
        where.write_text("x\n")
    for matrix in ([], [str(DATA / "matrix")]):
        done = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "validate", *matrix, "--fixes", str(where),
                               "-f", "json"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (done.returncode, done.stderr)
        assert f"{where}: no such fixes folder" in done.stderr and "entry" not in done.stderr, done.stderr
        assert json.loads(done.stdout)["errors"][0]["exit_code"] == 2


def test_an_installed_matrix_read_by_check_first_is_still_refused_by_validate(tmp_path, monkeypatch):
    """The installed matrix is cached between runs: the cache keeps what check read apart from what validate
    must refuse."""
    from sparkdoctor.commands.matrix import MatrixCommand, run_validate

    monkeypatch.setenv("SPARKDOCTOR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    current = tmp_path / "data" / "matrix" / "current"
    current.mkdir(parents=True)
    (current / "small.toml").write_text((DATA / "matrix" / "small.toml").read_text())
    assert load().source.startswith("installed ")  # read as check reads it: judged, the fix id not asked
    with pytest.raises(MatrixError, match="names 'six-upgrade'"):
        run_validate(MatrixCommand(), None, None)


def test_validate_judges_the_fix_files_as_fix_reads_them(tmp_path):
    """`matrix validate --fixes FOLDER` said `ok`, exit 0, for a fixes folder whose file `fix` refuses (an action of
    no known kind, an env value with a line break in it): only the ids were looked at. The gate now reads every fix
    file as `fix` does: one line naming the file and the field."""
    import shutil

    from sparkdoctor.commands.matrix import ValidateCommand, run_validate
    from sparkdoctor.fix.interface import DefinitionError

    fixes = tmp_path / "fixes"
    shutil.copytree(DATA / "fixes", fixes)
    assert run_validate(ValidateCommand(matrix=DATA / "matrix"), None, fixes).exit_code == 0
    bad = fixes / "env-drop-stale.toml"
    bad.write_text('schema = 1\nid = "env-drop-stale"\ntitle = "t"\nsummary = "s"\n'
                   '[[action]]\nkind = "set-env"\nname = "A"\nvalue = "x\\rPYTHONPATH=/tmp/p"\n')
    with pytest.raises(DefinitionError, match=f"{bad}: action #1 \\(set-env\\): field 'value' must be one line"):
        run_validate(ValidateCommand(matrix=DATA / "matrix"), None, fixes)
