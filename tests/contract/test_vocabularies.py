"""Exhaustive vocabularies (as pip-audit's test_to_format_is_exhaustive): every document kind renders in every
format it declares, every Format member is some verb's, and every renderer knows every member of the
vocabularies it draws (severity, evidence, verdict, outcome)."""

from __future__ import annotations

import importlib
import json
import pkgutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from sparkdoctor import emit, views
from sparkdoctor.commands import VERBS, load_verb
from sparkdoctor.commands.check import CheckCommand
from sparkdoctor.commands.check import run as run_check
from sparkdoctor.commands.matrix import MatrixCommand, run_list, run_show, run_validate
from sparkdoctor.errors import UsageError
from sparkdoctor.result import Format, Result
from sparkdoctor.vocab import Evidence, Outcome, Severity, Verdict
from tests.contract import ledger_samples
from tests.contract import test_run_inspecting_verbs as run_without_typer
from tests.test_cli import snap
from tests.test_render import ENTRIES, write_matrix
from tests.test_tracking import registry  # noqa: F401, F811 (fixture: a registry on 127.0.0.1)


@pytest.fixture
def samples(tmp_path, monkeypatch, registry) -> dict[str, Result]:  # noqa: F811 (the fixture)
    """One real Result of every document kind, and of every document class a view is registered for."""
    matrix = write_matrix(tmp_path / "matrix")
    return {
        **run_without_typer.registry_samples(tmp_path / "tracked", registry, monkeypatch),
        "matrix-update": run_without_typer.update_sample(),
        "report": run_check(CheckCommand(facts_file=snap("gb10-broken"), matrix=matrix, config=_empty(tmp_path))),
        "matrix-list": run_list(MatrixCommand(matrix)),
        "matrix-item": run_show(MatrixCommand(matrix, item_id=next(iter(ENTRIES)))),
        "matrix-stack": run_show(MatrixCommand(matrix, item_id="b12x-cu13")),
        "matrix-validate": run_validate(MatrixCommand(matrix)),
        "fleet": _fleet_sample(),
        "audit": run_without_typer.audit_sample(tmp_path),
        "diff": run_without_typer.diff_sample(),
        "explain": run_without_typer.explain_sample(tmp_path),
        "mods": run_without_typer.mods_sample(tmp_path),
        "whatif": run_without_typer.whatif_sample(tmp_path),
        "recipe": run_without_typer.recipe_show_sample(),
        "bug-report": run_without_typer.report_sample(),
        "recipe-check": run_without_typer.recipe_check_sample(tmp_path, monkeypatch),
        **ledger_samples.samples(tmp_path),
    }


def _fleet_sample() -> Result:
    """Two GB10 nodes (tests/gb10.py) that agree, and one that could not be reached."""
    from sparkdoctor import matrix as matrix_mod
    from sparkdoctor.findings import build_report
    from sparkdoctor.fleet import FleetResult
    from sparkdoctor.fleet.compare import compare_nodes
    from sparkdoctor.fleet.node import NodeOutcome
    from sparkdoctor.fleet.transport import Node
    from tests.fleet.test_fleet_compare import fleet_facts

    named = [("a", fleet_facts("a")), ("b", fleet_facts("b"))]
    m = matrix_mod.load()
    outcomes = [NodeOutcome(Node(n), f) for n, f in named] + [NodeOutcome(Node("c"), None, "ssh exited 255: Connection refused")]
    fleet = FleetResult("ssh", outcomes, {n: build_report(f, m) for n, f in named}, compare_nodes(named), [], 1.0, "error")
    return Result("fleet check", "fleet", fleet, fleet.exit_code())


def _empty(tmp_path: Path) -> Path:
    config = tmp_path / "sparkdoctor.toml"
    config.write_text("")
    return config


def _every_view() -> dict[type, views.View]:
    """The registry, once every view module under sparkdoctor/views/ is imported (each registers its own)."""
    for module in pkgutil.iter_modules(views.__path__):
        importlib.import_module(f"sparkdoctor.views.{module.name}")
    return views.REGISTRY


def test_every_kind_renders_in_every_format_it_declares(samples):
    for document in _every_view():
        assert any(isinstance(r.data, document) for r in samples.values()), f"{document.__name__}: a view nobody renders in a test"
    for kind, result in samples.items():
        view = views.view_of(result.data)
        assert view is not None, f"{kind}: {type(result.data).__name__} has no view"
        for fmt in view.formats:
            for output in (None, Path("file")):  # stdout and -o FILE render alike, but for colour and width
                text = emit.render(result, fmt, output)
                assert text.endswith("\n") and text.strip(), (kind, fmt)
                if fmt is Format.json:
                    doc = json.loads(text)
                    assert isinstance(doc, list) or doc["kind"] and doc["exit_code"] == result.exit_code, (kind, doc)
                elif fmt is Format.junit:
                    ET.fromstring(text.split("\n", 1)[1])
                else:
                    assert "\x1b[" not in text or output is None, (kind, fmt)


def test_a_format_a_kind_does_not_declare_is_a_usage_error(samples):
    result = samples["matrix-validate"]
    with pytest.raises(UsageError, match="--format junit"):
        emit.render(result, Format.junit)


def _format_declarations() -> dict[str, tuple[str, ...]]:
    """Every command's --format choices, read from the click commands the verbs register."""
    found: dict[str, tuple[str, ...]] = {}

    def walk(name: str, command) -> None:
        for sub_name, sub in getattr(command, "commands", {}).items():
            walk(f"{name} {sub_name}", sub)
        for param in getattr(command, "params", []):
            if "--format" in getattr(param, "opts", []):
                assert "-f" in param.opts, name  # declared by commands.options.format_option, nowhere else
                found[name] = tuple(word.strip() for word in param.help.split("|")) if "|" in param.help else ()

    for verb in VERBS:
        walk(verb, load_verb(verb))
    return found


def test_every_format_member_is_some_commands_and_every_declaration_uses_the_enum():
    declared = _format_declarations()
    assert "check" in declared and "matrix list" in declared and "fix" in declared
    words = {word.split()[0] for choices in declared.values() for word in choices}
    assert words == {f.value for f in Format}, words ^ {f.value for f in Format}


def test_format_parse_accepts_exactly_the_allowed_members():
    for member in Format:
        assert Format.parse(member.value, tuple(Format)) is member
        others = tuple(f for f in Format if f is not member)
        with pytest.raises(UsageError, match=f"--format {member.value}: choose one of"):
            Format.parse(member.value, others)
    with pytest.raises(UsageError):
        Format.parse("yaml", tuple(Format))


def test_every_renderer_knows_every_severity_evidence_verdict_and_outcome():
    from sparkdoctor import describe
    from sparkdoctor.conclusions import outcome, recipe_check
    from sparkdoctor.matrix import ACTIONS, EVIDENCE_LEVELS, SEVERITIES
    from sparkdoctor.views import console
    from sparkdoctor.views import matrix as matrix_render
    from sparkdoctor.views import recipe_check as junit

    assert SEVERITIES == ("info", "warn", "error") == Severity.values()
    assert EVIDENCE_LEVELS == ("reproduced", "checked", "reported") == Evidence.values()
    assert set(ACTIONS) == {"fix", "configure", "rebench", "monitor"}
    for severity in Severity:
        assert console.SEVERITY_STYLE[severity] and matrix_render._SEVERITY_STYLE[severity]
        assert junit.SEVERITY_RANK[severity] == recipe_check.SEVERITY_RANK[severity] == severity.rank
    assert [s.rank for s in Severity] == [0, 1, 2]
    for verdict in Verdict:
        assert verdict is Verdict.unprobeable or describe.VERDICT_WORD[verdict] == verdict.value.upper()
    assert set(Outcome.values()) == set(outcome.RANK)
    assert sorted(Outcome, key=lambda o: outcome.RANK[o]) == [Outcome.holds, Outcome.inconclusive, Outcome.changed, Outcome.flipped,
                                                              Outcome.broken]


def test_words_are_their_strings_in_json_and_in_dicts():
    assert json.dumps({Severity.warn: [Verdict.pass_, Outcome.flipped]}) == '{"warn": ["pass", "flipped"]}'
    assert {"pass": 1}[Verdict.pass_] == 1 and f"{Evidence.checked}" == "checked" and str(Severity.info) == "info"
