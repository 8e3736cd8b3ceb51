"""Option injection into the pip and uv command lines sparkdoctor builds (issue 40, item 5): a matrix from
`matrix update` named a stack package `--log=/any/path` and `matrix verify --stacks` made pip write that file
(`--report=`, `--index-url=` the same). Every package name a matrix gives must be a PEP 508 name, and every
pip/uv command line puts `--` before its requirements, so a name that got through anyway is a bad requirement,
never an option. The pip runs here are real (sparkdoctor's own pip, which fails at the requirement before any
network); only uv, which this machine may lack, is checked by the command line it is given."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from sparkdoctor.fix.installers import PipInstaller
from sparkdoctor.fix.interface import FixError
from sparkdoctor.fix.inventory import Inventory
from sparkdoctor.matrix import MatrixError, load
from sparkdoctor.matrix.model import Stack
from sparkdoctor.targets.early import own_pip_folder
from sparkdoctor.targets.local import PythonTarget
from sparkdoctor.verify.stacks import resolve
from sparkdoctor.verify.venvs import pip_install

OPTIONS = ["--log={path}", "--report={path}", "--index-url=file://{path}", "-r{path}"]


def matrix_file(tmp_path: Path, table: str) -> Path:
    path = tmp_path / "m.toml"
    path.write_text('component = "x"\n' + textwrap.dedent(table))
    return path


@pytest.mark.parametrize("key", ["--log=/tmp/x", "-r/etc/passwd", "--index-url=http://evil", "a b", "pkg;rm", "", ".dot", "x/../y"])
def test_a_stack_or_entry_package_that_is_no_pep508_name_is_refused_at_validation(tmp_path, key):
    stack = f'''
        [[stack]]
        id = "s1"
        title = "t"
        packages = {{ "{key}" = "*", "vllm" = "==0.22.0" }}
        refs = ["https://example.org/x"]
        '''
    with pytest.raises(MatrixError, match="field 'packages' .*is not a package name"):
        load(matrix_file(tmp_path, stack))
    entry = f'''
        [[entry]]
        id = "e1"
        title = "t"
        severity = "info"
        action = "monitor"
        summary = "s"
        remedy = "r"
        when.packages = {{ "{key}" = ">=1" }}
        refs = ["https://example.org/x"]
        '''
    with pytest.raises(MatrixError, match="is not a package name"):
        load(matrix_file(tmp_path, entry))
    for table in (f'[tracked]\n"{key}" = "1.0"\n', f'[lockstep]\nvllm = ["{key}"]\n'):
        with pytest.raises(MatrixError, match="is not a package name|must be a non-empty list of package names"):
            load(matrix_file(tmp_path, table))


def test_real_names_still_load(tmp_path):
    m = load(matrix_file(tmp_path, '''
        [[stack]]
        id = "s1"
        title = "t"
        packages = { "nvidia-cutlass-dsl-libs-cu13" = "==4.5.1", "Flash_Attn" = "*", "a" = "*", "zope.interface" = ">=5" }
        refs = ["https://example.org/x"]
        '''))
    assert set(m.stacks[0].packages) == {"nvidia-cutlass-dsl-libs-cu13", "Flash_Attn", "a", "zope.interface"}


@pytest.mark.parametrize("option", OPTIONS)
def test_matrix_verify_stacks_never_hands_pip_a_name_as_an_option(tmp_path, option):
    """A Stack made past the loader (the check above stops the file): pip gets it after `--`, as a requirement."""
    planted = tmp_path / "planted.txt"
    stack = Stack(id="s1", title="t", packages={option.format(path=planted): "*"}, refs=[], component="x", file="m.toml")
    r = resolve(stack)
    assert r.verdict == "contradicted" and "nvalid requirement" in r.why, r.why
    assert not planted.exists()


def test_matrix_verify_venv_steps_put_their_requirements_after_the_options_and_a_double_dash():
    argv = pip_install(Path("/venv/bin/python"), ("--no-deps", "--pre", "six==1.16.0", "packaging"))
    assert argv[argv.index("install"):] == ["install", "--no-deps", "--pre", "--only-binary=:all:", "--", "six==1.16.0", "packaging"]


def _inventory() -> Inventory:
    return Inventory(python=sys.executable, is_venv=True, has_pip=True, writable=True, purelib="", version="3.11", dists={})


@pytest.mark.parametrize("own", [False, True])
@pytest.mark.parametrize("option", OPTIONS)
def test_fix_with_pip_never_hands_a_requirement_over_as_an_option(tmp_path, option, own):
    """The target's pip, and sparkdoctor's own pip that installs into a venv without pip (a uv venv)."""
    planted = tmp_path / "planted.txt"
    pip = PipInstaller(PythonTarget(sys.executable, "test"), _inventory(), pip_from=own_pip_folder() if own else None)
    bad = option.format(path=planted)
    for call in (lambda: pip.install([bad]), lambda: pip.dry_run([bad]), lambda: pip.uninstall([bad])):
        with pytest.raises(FixError, match="nvalid requirement"):
            call()
    assert not planted.exists()
