"""The user config: a setting that is silently not applied is worse than an error.

Each case here was once accepted without a word (or crashed): a $SPARKDOCTOR_CONFIG naming no file,
`ignore = "id"` read letter by letter, a misspelt key or section, a file that is not UTF-8 or is
nested past what the parser takes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparkdoctor import matrix
from sparkdoctor.check import CheckRequest, check
from sparkdoctor.cli import app
from sparkdoctor.config import ConfigError, load_config
from tests.gb10 import gb10_facts
from tests.inproc import invoke

REPO = Path(__file__).resolve().parent.parent
REF = "https://github.com/NVIDIA/cutlass/issues/3227"


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """No ./sparkdoctor.toml and no user config unless a test writes one."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPARKDOCTOR_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def config_error(path: Path | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message, message
    return message


def write(tmp_path: Path, text: str | bytes, name: str = "c.toml") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def test_no_config_anywhere_is_the_defaults():
    cfg = load_config()
    assert cfg.path is None and cfg.ignore == {} and cfg.fail_on is None


def test_env_var_naming_a_missing_file_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKDOCTOR_CONFIG", str(tmp_path / "typo.toml"))
    message = config_error()
    assert "SPARKDOCTOR_CONFIG" in message and "typo.toml" in message and "no such config file" in message


def test_env_var_naming_a_file_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKDOCTOR_CONFIG", str(write(tmp_path, '[check]\nfail_on = "warn"\n')))
    assert load_config().fail_on == "warn"


def test_a_named_config_that_is_no_file_says_what_it_is(tmp_path, monkeypatch):
    """A FIFO (or a folder) named by --config or SPARKDOCTOR_CONFIG exists: "no such config file" sent users looking
    for a typo; the FIFO must also be refused without waiting for a writer."""
    fifo = tmp_path / "c.toml"
    os.mkfifo(fifo)
    for named in (fifo, tmp_path):
        message = config_error(named)
        assert "no such config file" not in message and "not a regular file" in message, message
        monkeypatch.setenv("SPARKDOCTOR_CONFIG", str(named))
        message = config_error()
        assert "no such config file" not in message and "not a regular file" in message, message
        monkeypatch.delenv("SPARKDOCTOR_CONFIG")


def test_explicit_missing_file_is_an_error(tmp_path):
    assert "no such config file" in config_error(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[check]\nignore = "cutedsl-arch-unset"\n', {"cutedsl-arch-unset": ""}),  # one id, not its letters
        ('[check]\nignore = ["a-b", { id = "c-d", reason = "known" }]\n', {"a-b": "", "c-d": "known"}),
    ],
)
def test_ignore_accepts_one_id_or_a_list(tmp_path, text, expected):
    assert load_config(write(tmp_path, text)).ignore == expected


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[check]\nfail-on = "warn"\n', ["unknown key", "check.'fail-on'", "fail_on"]),
        ('[chek]\nfail_on = "warn"\n', ["unknown section", "'chek'", "[check]"]),
        ('fail_on = "warn"\n', ["unknown section", "'fail_on'"]),
        ('[check]\nignore = 3\n', ["check.ignore"]),
        ('[check]\nignore = [{ id = "a-b", because = "x" }]\n', ["check.ignore[0]"]),
        ('[check]\nignore = [{ id = "a-b", reason = 3 }]\n', ["check.ignore[0]"]),
        ('[check]\nfail_on = "fatal"\n', ["check.fail_on", "'fatal'"]),
        ("check = 1\n", ["[check] must be a table"]),
    ],
)
def test_unknown_or_misshapen_settings_are_refused(tmp_path, text, words):
    path = write(tmp_path, text)
    message = config_error(path)
    assert str(path) in message
    for word in words:
        assert word in message, message


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b'[check]\nfail_on = "w\xff\xfe"\n', ["not UTF-8"]),
        (b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n", ["nested too deeply"]),
        (b"[check\n", ["not valid TOML"]),
    ],
)
def test_unreadable_files_are_one_line_naming_the_file(tmp_path, data, words):
    path = write(tmp_path, data)
    message = config_error(path)
    assert str(path) in message
    for word in words:
        assert word in message, message


def test_check_names_the_ignored_ids_that_no_entry_has(tmp_path):
    """check (the one reader of --ignore and check.ignore) warns of each id that names no entry of the matrix it
    judges with, in the order given; an entry's id and an engine finding's id are accepted. A stack is no
    finding, so ignoring its id ignores nothing either."""
    (tmp_path / "m.toml").write_text(
        f'component = "t"\n[[entry]]\nid = "known-entry"\ntitle = "t"\nseverity = "warn"\naction = "fix"\nsummary = "s"\n'
        f'remedy = "r"\nwhen.host_machine = "aarch64"\nrefs = ["{REF}"]\n'
        f'[[stack]]\nid = "known-stack"\ntitle = "t"\npackages = {{ "vllm" = "*" }}\nrefs = ["{REF}"]\n'
    )
    m = matrix.load(tmp_path / "m.toml")
    ignored = ["known-entry", "no-such-id", "probe-e2m1-cvt", "known-stack", "c"]
    notes = check(CheckRequest(facts=gb10_facts(), matrix=m, ignore=ignored)).notes
    said = " no matrix entry has this id; it ignores nothing (see `sparkdoctor matrix list`)"
    assert notes == [f"--ignore {i!r}:{said}" for i in ("no-such-id", "known-stack", "c")]
    assert check(CheckRequest(facts=gb10_facts(), matrix=m)).notes == []


def test_cli_reports_a_missing_env_config_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKDOCTOR_")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_CONFIG=str(tmp_path / "missing.toml"), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"))
    snapshot = REPO / "tests" / "data" / "facts" / "nogpu-clean.json"
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--facts", str(snapshot)], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    assert done.stderr.count("\n") == 1 and "SPARKDOCTOR_CONFIG" in done.stderr and "missing.toml" in done.stderr


def test_newlines_in_a_key_stay_escaped(tmp_path):
    message = config_error(write(tmp_path, '[check]\n"fail\\non" = "warn"\n'))
    assert "fail\\non" in message


def test_a_number_past_the_digit_limit_is_one_line(tmp_path):
    # tomllib hands such a number to int(), which refuses more than 4,300 digits with a ValueError
    path = tmp_path / "sparkdoctor.toml"
    path.write_text("[check]\nfail_on = " + "9" * 5000 + "\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_the_operators_config_wins_over_one_in_the_working_folder(tmp_path, monkeypatch):
    """A pull request's checkout may carry ./sparkdoctor.toml: it used to override $SPARKDOCTOR_CONFIG."""
    write(tmp_path, '[check]\nignore = ["vllm-cg-estimate-negative"]\n', "sparkdoctor.toml")
    operator = write(tmp_path, '[check]\nfail_on = "warn"\n', "operator.toml")
    monkeypatch.setenv("SPARKDOCTOR_CONFIG", str(operator))
    cfg = load_config()
    assert cfg.path == str(operator) and cfg.ignore == {} and cfg.fail_on == "warn"
    monkeypatch.delenv("SPARKDOCTOR_CONFIG")
    assert load_config().path == "sparkdoctor.toml"  # without one named, the working folder's is still read


def test_ignoring_an_error_needs_a_reason_and_the_file_that_ignored_is_named(tmp_path):
    snapshot = tmp_path / "facts.json"
    gb10_facts().save(snapshot)
    error_id = next(e.id for e in matrix.load(None).entries if e.severity == "error")
    write(tmp_path, f'[check]\nignore = ["{error_id}"]\n', "sparkdoctor.toml")
    code, _, error = invoke("check", "--facts", snapshot)
    assert code == 2 and "sparkdoctor.toml" in error and error_id in error and "needs a reason" in error, error
    write(tmp_path, f'[check]\nignore = [{{ id = "{error_id}", reason = "   " }}]\n', "sparkdoctor.toml")
    assert invoke("check", "--facts", snapshot)[0] == 2  # a blank reason is none
    write(tmp_path, f'[check]\nignore = [{{ id = "{error_id}", reason = "fixed in our image" }}, '
                    '"vllm-b12x-linear-opt-in"]\n', "sparkdoctor.toml")
    done = CliRunner().invoke(app, ["check", "--facts", str(snapshot)])
    assert done.exit_code == 0, done.output
    assert "sparkdoctor.toml ignored 1: vllm-b12x-linear-opt-in" in done.stderr  # where the count is, the file too
