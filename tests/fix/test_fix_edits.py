"""The text edits: only the lines they are about change; recipes are edited as argv lists, on a file."""

import sys

import pytest

from sparkdoctor.fix import edits
from sparkdoctor.fix.interface import FixError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_pin_change_keeps_comments_markers_and_other_lines():
    text = "# pins\nnvidia-cutlass-dsl[cu13]==4.4.2 ; python_version >= '3.10'  # the old b12x pin\nsix==1.16\n"
    out = edits.edit_pin(text, "nvidia_cutlass_dsl", ">=4.5.2", "c.txt")
    assert out.splitlines()[0] == "# pins" and out.splitlines()[2] == "six==1.16"
    assert out.splitlines()[1].startswith('nvidia-cutlass-dsl[cu13]>=4.5.2; python_version >= "3.10"')
    assert "# the old b12x pin" in out.splitlines()[1]


def test_pin_removal_and_a_missing_pin():
    assert edits.edit_pin("a==1\nsix==1.16\r\n", "six", None, "c.txt") == "a==1\n"
    with pytest.raises(FixError, match="c.txt: no pin of torch"):
        edits.edit_pin("a==1\n", "torch", None, "c.txt")


def test_env_unset_and_set():
    text = "A=1\nexport VLLM_NVFP4_GEMM_BACKEND=marlin\n# VLLM_NVFP4_GEMM_BACKEND=x stays a comment\nB=2"
    out = edits.unset_env(text, ["VLLM_NVFP4_GEMM_BACKEND"])
    assert out == "A=1\n# VLLM_NVFP4_GEMM_BACKEND=x stays a comment\nB=2"
    assert edits.set_env(out, "B", "two words") == "A=1\n# VLLM_NVFP4_GEMM_BACKEND=x stays a comment\nB='two words'"
    assert edits.set_env("A=1", "C", "3") == "A=1\nC=3\n"


RECIPE = '''# a serving recipe
name = "demo"
command = [
  "vllm", "serve", "m",  # the model
  "--enforce-eager",
  "--moe-backend", "marlin",
]
env = { VLLM_X = "1" }
'''


def test_recipe_flags_on_a_file(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text(RECIPE)
    dropped = edits.drop_flag(path.read_text(), "--enforce-eager", str(path))
    path.write_text(dropped)
    doc = tomllib.loads(path.read_text())
    assert doc["command"] == ["vllm", "serve", "m", "--moe-backend", "marlin"]
    assert doc["env"] == {"VLLM_X": "1"} and path.read_text().startswith("# a serving recipe\nname = \"demo\"\n")
    added = edits.add_flag(path.read_text(), "--moe-backend", "flashinfer_b12x", str(path))
    assert tomllib.loads(added)["command"] == ["vllm", "serve", "m", "--moe-backend", "flashinfer_b12x"]
    assert edits.drop_flag(added, "--not-there", str(path)) == added
    with pytest.raises(FixError, match="field 'command'"):
        edits.drop_flag("name = 1\n", "--x", "r.toml")


def test_line_diff():
    assert edits.line_diff("a\nb\n", "a\nc\n") == ["-b", "+c"]


@pytest.mark.parametrize("sep", ["\x0c", "\x0b", "\x1c", "\x85", "\u2028", "\r"])
def test_an_edit_keeps_every_line_break_it_does_not_change(sep):
    """pip reads a requirements file with str.splitlines(), so a form feed (or \\x85, \\u2028, a lone \\r) ends a
    line there: the edited line keeps that ending, and the line after it stays a line of its own."""
    out = edits.edit_pin(f"six==1.16.0{sep}idna==3.10\n", "six", ">=1.17", "c.txt")
    assert out == f"six>=1.17{sep}idna==3.10\n"
    assert out.splitlines() == ["six>=1.17", "idna==3.10"]
    assert edits.edit_pin(f"# c{sep}six==1.16.0{sep}idna==3.10", "six", None, "c.txt") == f"# c{sep}idna==3.10"
    if sep != "\r":  # an env file's lines end at \n only, as docker and systemd read it (a lone \r is refused first):
        assert edits.set_env(f"A=1{sep}B=2\n", "A", "x") == "A=x\n"  # B=2 was part of A's value (test_envfile_lines.py)


def test_the_plan_prints_a_files_control_characters_escaped():
    """The plan shows the diff of a file it edits (a recipe from someone else's repository, an env file) and its path:
    an ESC sequence or a line break in them printed raw, clearing the screen or faking a line of the plan
    (`Verdict after: pass`). Each line is escaped as check's console escapes a snapshot's values."""
    from sparkdoctor.fix.documents import PlanDocument
    from sparkdoctor.fix.interface import ActionKind, StepKind
    from sparkdoctor.fix.model import Plan, Step
    from sparkdoctor.result import Format, Result
    from sparkdoctor.sink import Sink
    from sparkdoctor.views import render
    from sparkdoctor.views.fix import VIEW  # noqa: F401  # registers the view

    evil = "\x1b]0;owned\x07\x1b[2J\rVerdict after: pass\n\x9b"
    step = Step(StepKind.edit, "drop", ["x"], ActionKind.drop_flag, path=f"/r/a{evil}.toml",
                diff=edits.line_diff(f'command = ["vllm", "--enforce-eager"]  # {evil}\n', "command = []\n"))
    plan = Plan(target={"python": f"/v{evil}/bin/python"}, installer="pip",
                fixes=[{"id": "drop", "title": f"t{evil}", "findings": ["e"]}], steps=[step])
    from sparkdoctor.facts import Facts
    from sparkdoctor.findings import build_report
    from sparkdoctor.matrix import load

    doc = PlanDocument(plan=plan, report=build_report(Facts.from_dict({"schema": 1, "packages": {}}), load()))
    text = render(Result("fix", "fix", doc), Format.console, Sink(to_file=True))
    assert "\\x1b" in text
    assert not sorted({c for c in text if not c.isprintable() and c != "\n"}), text
    assert "\nVerdict after: pass" not in text
