"""Issue 20, item 15: a report too long for a GitHub issue body (65,536 characters) or a forum post (32,000) is
shortened to fit, and the whole report is written beside it as an attachment; nothing is lost."""

from __future__ import annotations

import pytest

from sparkdoctor import report as bug_report
from sparkdoctor.findings import build_report
from sparkdoctor.fit import FORUM_LIMIT, GITHUB_LIMIT, Block, fit
from sparkdoctor.matrix import load
from sparkdoctor.report import build_bug_report_fitted
from tests.gb10 import gb10_facts
from tests.report.report_cli import run_report

MATRIX = load(None)
LIMITS = {"github": GITHUB_LIMIT, "forum": FORUM_LIMIT}


def unshortened(monkeypatch, report, fmt):
    """The report as it is before fitting: made with limits no report reaches."""
    with monkeypatch.context() as limits:
        limits.setattr(bug_report, "GITHUB_LIMIT", 10**12)
        limits.setattr(bug_report, "FORUM_LIMIT", 10**12)
        text, whole = build_bug_report_fitted(report, fmt, "r.full.md")
    assert whole is None
    return text


def big_facts():
    """A box with 900 relevant packages (a big NGC image has that many), modified files and a long env."""
    facts = gb10_facts(packages={"triton": "3.5.1"}, modified={"vllm": [f"vllm/layer_{i}.py" for i in range(60)]})
    for i in range(900):
        facts.packages[f"nvidia-fake-lib-{i}"] = {"name": f"nvidia-fake-lib-{i}", "version": f"1.{i}.0",
                                                  "location": "/home/zorblat/venv/lib/python3.12/site-packages"}
    facts.env = {**(facts.env or {}), **{f"VLLM_SETTING_{i}": f"value-{i}" for i in range(300)}}
    return facts


@pytest.mark.parametrize("fmt", ["github", "forum"])
def test_a_long_report_fits_and_the_whole_is_in_the_attachment(monkeypatch, fmt):
    report = build_report(big_facts(), MATRIX)
    whole_before = unshortened(monkeypatch, report, fmt)
    assert len(whole_before) > LIMITS[fmt]  # the test really needs fitting
    text, whole = build_bug_report_fitted(report, fmt, "r.full.md")
    assert len(text) <= LIMITS[fmt] and whole == whole_before
    assert "r.full.md" in text and "in the attachment" in text or "in full in r.full.md" in text
    for finding in report.findings:  # the essential part stays in the body
        assert finding.id in text
    assert "nvidia-fake-lib-899" in whole and "zorblat" not in whole  # the attachment is whole, and anonymized too
    if fmt == "github":
        assert text.count("<details>") == text.count("</details>") and text.count("```") % 2 == 0


@pytest.mark.parametrize("fmt", ["github", "forum"])
def test_a_report_that_fits_has_no_attachment(monkeypatch, fmt):
    report = build_report(gb10_facts(packages={"triton": "3.5.1"}), MATRIX)
    text, whole = build_bug_report_fitted(report, fmt, "r.full.md")
    assert whole is None and text == unshortened(monkeypatch, report, fmt) and "attachment" not in text


def test_an_essential_part_longer_than_the_limit_is_cut_at_a_line_and_folds_are_closed():
    lines = ["<details>", *(f"- finding line {i} " + "x" * 80 for i in range(2000))]
    blocks = [Block("head", ["# head", ""], essential=True), Block("findings", lines, essential=True),
              Block("env", ["<details>", "y" * 50_000, "</details>"])]
    text, moved = fit(blocks, 65_536, "a.md", lambda b, a: [f"{b.title}: in {a}"], lambda a: [f"see {a}"])
    assert moved and len(text) <= 65_536
    assert "env: in a.md" in text and "more lines are in a.md" in text
    assert text.count("<details>") == text.count("</details>")


def test_the_cli_writes_the_attachment_beside_the_report(tmp_path):
    snap = tmp_path / "facts.json"
    big_facts().save(snap)
    res = run_report(tmp_path, "--facts", snap, "-o", tmp_path / "report.md")
    assert res.returncode == 0, res.stderr
    body, full = (tmp_path / "report.md").read_text(), (tmp_path / "report.full.md").read_text()
    assert len(body) <= GITHUB_LIMIT < len(full)
    assert "`report.full.md`" in body and "report.full.md" in res.stderr
    assert "nvidia-fake-lib-899" in full and "Facts snapshot" in full
    # on stdout: the attachment goes to the current folder, named by the fingerprint
    res = run_report(tmp_path, "--facts", snap)
    assert res.returncode == 0 and len(res.stdout) <= GITHUB_LIMIT
    written = sorted(p.name for p in tmp_path.glob("sparkdoctor-report-*.full.md"))
    assert len(written) == 1 and written[0] in res.stdout


def test_check_markdown_fits_a_github_issue_too():
    from sparkdoctor.views.markdown import render_markdown

    big = render_markdown(build_report(big_facts(), MATRIX))
    assert len(big) <= GITHUB_LIMIT and "Left out to fit a GitHub issue" in big and "### Findings" in big
    assert big.count("<details>") == big.count("</details>")
    small_report = build_report(gb10_facts(packages={"triton": "3.5.1"}), MATRIX)
    small = render_markdown(small_report)
    assert "Left out" not in small and "Full facts snapshot" in small
