"""Every renderer, on Reports built from hand-made snapshots and a small matrix written for the test
(the bundled matrix changes as knowledge is added; these tests must not)."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from sparkdoctor.check import apply_arch_override
from sparkdoctor.describe import describe_gpus, summary_line
from sparkdoctor.facts import Facts
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import load
from sparkdoctor.views.console import render_console
from sparkdoctor.views.junit import render_junit
from sparkdoctor.views.markdown import render_markdown
from sparkdoctor.views.matrix import (
    describe_condition,
    item_dict,
    list_matrix,
    show_item,
    sorted_rows,
)
from tests.check_documents import render_text

FACTS_DIR = Path(__file__).parent / "data" / "facts"

# One entry per outcome on gb10-broken.json: an error, a warning and an info that match, one that
# cannot be evaluated (its probe did not run), one that is clear, one withdrawn; and a stack.
ENTRIES = {
    "cutedsl-libs-base-mma": '''
[[entry]]
id = "cutedsl-libs-base-mma"
title = "cutlass-dsl 4.5.0 libs-base emits an invalid `_mma` PTX instruction for sm_121a block-scaled FP4 MMA"
severity = "error"
action = "fix"
summary = "The libs-base and libs-cu13 wheels write the same files; the libs-base copy is the one loaded."
remedy = "Uninstall every nvidia-cutlass-dsl* wheel, then pip install 'nvidia-cutlass-dsl[cu13]>=4.5.1'."
when.gpu_arch = ["sm_121a"]
when.packages = { "nvidia-cutlass-dsl" = "==4.5.0" }
when.cutedsl_build = "libs-base"
verified_by = { probe = "cutedsl-nvfp4-mma", expect = "fail" }
fix = "cutlass-dsl-cu13-clean-reinstall"
refs = ["https://github.com/NVIDIA/cutlass/issues/3227", "https://github.com/NVIDIA/cutlass/issues/3170"]
''',
    "triton-ptxas-sm121a": '''
[[entry]]
id = "triton-ptxas-sm121a"
title = "Triton's bundled ptxas does not know sm_121a"
severity = "warn"
action = "configure"
summary = "Triton <= 3.5 bundles ptxas 12.8, which predates sm_121a."
remedy = "Set TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas, or upgrade Triton to 3.6.0 or newer."
when.ptxas = { used_by = "triton", sm_121a = false }
refs = ["https://github.com/triton-lang/triton/issues/8539"]
''',
    "vllm-files-modified": '''
[[entry]]
id = "vllm-files-modified"
title = "vLLM files differ from the installed wheel"
severity = "info"
action = "monitor"
summary = "A hand patch stays until vLLM is reinstalled, long after its reason is gone."
remedy = "Reinstall vLLM once the patch is no longer needed."
when.modified = { vllm = "*" }
refs = ["https://github.com/eugr/spark-vllm-docker/issues/344"]
''',
    "nvfp4-gemm-probe": '''
[[entry]]
id = "nvfp4-gemm-probe"
title = "NVFP4 GEMM probe fails"
severity = "error"
action = "fix"
summary = "s"
remedy = "r"
when.kernels = { "nvfp4-gemm" = "fail" }
refs = ["https://github.com/vllm-project/vllm/pull/38423"]
''',
    "driver-before-580": '''
[[entry]]
id = "driver-before-580"
title = "NVIDIA driver older than 580"
severity = "error"
action = "fix"
summary = "s"
remedy = "r"
when.driver = "<580"
refs = ["https://github.com/NVIDIA/dgx-spark-playbooks"]
''',
    "withdrawn-entry": '''
[[entry]]
id = "withdrawn-entry"
title = "An entry that turned out wrong"
severity = "warn"
action = "fix"
summary = "s"
remedy = "r"
withdrawn = "the report was a packaging mistake"
when.driver = "<580"
refs = ["https://github.com/NVIDIA/cutlass/issues/3120"]
''',
}
STACK = '''
[[stack]]
id = "b12x-cu13"
title = "FlashInfer b12x with cutlass-dsl cu13"
packages = { "nvidia-cutlass-dsl" = ">=4.5.1", "flashinfer-python" = ">=0.6.11" }
env = { CUTE_DSL_ARCH = "sm_121a" }
refs = ["https://github.com/vllm-project/vllm/pull/40082"]
'''


def write_matrix(folder: Path, ids: list[str] | None = None, stack: bool = True) -> Path:
    """A one-file matrix with the named entries (default: all); returns the file."""
    folder.mkdir(parents=True, exist_ok=True)
    body = 'component = "serving"\n' + "".join(ENTRIES[i] for i in (ids or list(ENTRIES)))
    path = folder / "serving.toml"
    path.write_text(body + (STACK if stack else ""), encoding="utf-8")
    return path


def facts_of(name: str) -> Facts:
    return Facts.load(FACTS_DIR / f"{name}.json")


@pytest.fixture
def matrix(tmp_path):
    return load(write_matrix(tmp_path / "matrix"))


def report_of(name: str, matrix, **kw):
    return build_report(facts_of(name), matrix, **kw)


def console_text(report, verbose: bool = False, width: int = 100, terminal: bool = False) -> str:
    buf = io.StringIO()
    render_console(report, Console(file=buf, width=width, force_terminal=terminal, color_system="standard" if terminal else None), verbose=verbose)
    return buf.getvalue()


def squash(text: str) -> str:
    """Rich wraps long lines; compare content regardless of where it wrapped."""
    return re.sub(r"\s+", " ", text)


# ---- console ------------------------------------------------------------------------------------


def test_console_header_says_what_was_probed(matrix):
    out = console_text(report_of("gb10-broken", matrix))
    flat = squash(out)
    assert "/opt/vllm/.venv/bin/python · Python 3.12.3 · chosen by --python" in flat
    assert "NVIDIA GB10 (cc 12.1, sm_121a, 119.7 GiB unified)" in flat
    assert "sm_121a (detected)" in flat
    assert "580.95.05 · CUDA 13.0" in flat
    assert "torch 2.13.0+cu130 (CUDA 13.0)" in flat
    assert "triton 3.5.1" in flat
    assert "vllm 0.22.0 (1 file modified)" in flat
    assert "nvidia-cutlass-dsl 4.5.0 [libs-base]" in flat
    assert facts_of("gb10-broken").fingerprint() in out


def test_console_findings_grouped_by_severity_with_evidence_remedy_fix_and_ref(matrix):
    out = console_text(report_of("gb10-broken", matrix))
    flat = squash(out)
    # groups in order error, warning, info
    assert flat.index("1 error (fails the check)") < flat.index("1 warning") < flat.index("1 info")
    assert "cutedsl-libs-base-mma" in out
    assert "cutlass-dsl 4.5.0 libs-base emits an invalid `_mma` PTX instruction" in flat
    assert "nvidia-cutlass-dsl 4.5.0 installed (matches ==4.5.0)" in flat
    assert "cutlass-dsl active build is libs-base" in flat
    assert "Uninstall every nvidia-cutlass-dsl* wheel" in flat
    assert "cutlass-dsl-cu13-clean-reinstall" in out
    assert "https://github.com/NVIDIA/cutlass/issues/3227 (+1 more)" in flat
    assert "issues/3170" not in out  # only the first ref without -v
    assert "TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas" in flat


def test_an_unprobed_target_shows_the_cause_before_the_entries_it_left_unknown(matrix):
    """`check --python` at a program that is not Python printed 8 lines of "installed packages unknown (entry
    needs ...)" and "and 53 more" before the one line that said why (could not observe)."""
    facts = facts_of("nogpu-clean")
    facts.packages = None
    facts.errors = [{"collector": "target", "error": "/x/notpy does not run as a Python interpreter"}]
    report = build_report(facts, matrix)
    assert report.unknown
    flat = squash(console_text(report))
    assert flat.index("could not observe (1)") < flat.index(f"could not evaluate ({len(report.unknown)})")
    assert "what the target could not tell (above) leaves them unknown; -v shows them" in flat
    assert f"{report.unknown[0].entry.id}:" not in flat
    assert f"{report.unknown[0].entry.id}:" in squash(console_text(report, verbose=True))


def test_console_unknowns_errors_kernels_and_summary(matrix):
    out = console_text(report_of("gb10-broken", matrix))
    flat = squash(out)
    assert "could not evaluate (1)" in flat
    assert "nvfp4-gemm-probe: probe nvfp4-gemm did not run" in flat
    assert "could not observe (1)" in flat and "serve-log: no recipe given" in flat
    assert "kernel probes" in out
    assert "cutedsl-nvfp4-mma fail (cutedsl)" in flat
    assert "ptxas 13.0.88 system sm_121a compiled ✓ SASS ✓ ran ✓ verified ✓" in flat
    assert "ptxas 12.8.93 triton sm_121a compiled ✗ ptxas fatal : Value 'sm_121a' is not defined" in flat
    assert flat.strip().endswith("1 error, 1 warning, 1 info · 5 entries checked, 1 unknown · evidence: 3 reported · fail-on error → FAIL (exit 1)")


def test_the_json_summary_counts_the_entries_the_console_says_were_checked(matrix):
    """`check` said "102 entries checked" and its JSON `summary.evaluated` 106: the withdrawn entries (never judged)
    were counted in the JSON only. Both count the entries judged; `summary.withdrawn` counts the others."""
    report = report_of("gb10-broken", matrix)
    summary = report.to_dict()["summary"]
    assert isinstance(summary, dict)
    assert f"{summary['evaluated']} entries checked" in squash(console_text(report)), summary
    assert summary["evaluated"] == 5 and summary["withdrawn"] == 1 == len(report.evaluations) - 5, summary


def test_console_fits_100_columns_and_has_no_escape_codes_in_a_pipe(matrix):
    for verbose in (False, True):
        out = console_text(report_of("gb10-broken", matrix), verbose=verbose, width=100)
        assert "\x1b[" not in out
        assert max(len(line) for line in out.splitlines()) <= 100


def test_console_on_a_terminal_uses_colour(matrix):
    out = console_text(report_of("gb10-broken", matrix), terminal=True)
    assert "\x1b[" in out
    assert "cutedsl-libs-base-mma" in out


def test_console_verbose_adds_clear_entries_packages_toolkits_env_timings(matrix):
    report = report_of("gb10-broken", matrix)
    short = console_text(report)
    out = console_text(report, verbose=True)
    flat = squash(out)
    assert "driver-before-580" not in short
    assert "driver-before-580: NVIDIA driver 580.95.05 (does not match <580)" in flat
    assert "withdrawn-entry: the report was a packaging mistake" in flat
    assert "vllm/model_executor/layers/quantization/utils/nvfp4_emulation_utils.py" in re.sub(r"\s", "", out)
    assert "nvidia-cutlass-dsl-libs-cu13 4.5.0 ok" in flat
    assert "numpy" not in flat  # not a tracked package
    assert "ptxas 12.8.93 triton triton ✗" in flat
    assert "TORCH_CUDA_ARCH_LIST=12.1a" in flat
    assert "nvidia-cutlass-dsl==4.5.0 /opt/vllm/constraints.txt" in flat
    assert "cutedsl 2210ms" in flat
    assert "https://github.com/NVIDIA/cutlass/issues/3170" in out  # every ref in -v
    assert "41 ms (cached)" in flat


def test_a_gb10_on_the_bus_that_no_driver_answers_is_said_on_the_gpu_line():
    """A Spark whose driver an upgrade tore: NVML finds no GPU, but the GB10 is on the PCI bus. The GPU line says so
    instead of "no GPU"; a box without a GB10 (or whose bus was not read) still reads "no GPU"."""
    torn = Facts(gpus=[], host_health={"live": True, "memory": {"available_kib": 100, "unified": True}})
    assert describe_gpus(torn) == "none detected, though a GB10 is on the PCI bus (10de:2e12): is the NVIDIA driver loaded?"
    for unified in (False, None):
        assert describe_gpus(Facts(gpus=[], host_health={"live": True, "memory": {"unified": unified}})) == "no GPU"
    assert describe_gpus(Facts(gpus=[])) == "no GPU"


def test_console_no_gpu_box_is_clean(matrix):
    out = console_text(report_of("nogpu-clean", matrix))
    flat = squash(out)
    assert "GPU no GPU" in flat
    assert "driver no NVIDIA driver" in flat
    # no GPU and no --arch: evaluated as the GB10 it is built for, and it says so
    assert "arch sm_121a (assumed: no GPU detected; pass --arch to choose)" in flat
    assert "torch 2.13.0+cpu (CPU build)" in flat
    assert "no known problem matches this box" in flat
    # a probe every ptxas compiled and nothing could run is one line; -v lists each ptxas
    assert re.search(r"sm_121a: (\d+)/\1 ptxas \S+ .*not run: no sm_121a GPU here", flat)
    assert "ptxas 13.5.37" not in flat
    verbose = squash(console_text(report_of("nogpu-clean", matrix), verbose=True))
    assert "ptxas 13.5.37 pip sm_121a compiled" in verbose and "compiled, not run: no sm_121a GPU here" in verbose
    assert out.strip().splitlines()[-1].endswith("fail-on error → PASS (exit 0)")


def test_console_arch_given_and_detected(matrix):
    facts = apply_arch_override(facts_of("gb10-broken"), "sm_120a")
    out = squash(console_text(build_report(facts, matrix)))
    assert "sm_120a (given via --arch; detected sm_121a)" in out
    facts = apply_arch_override(facts_of("nogpu-clean"), "sm_121a")
    out = squash(console_text(build_report(facts, matrix)))
    assert "arch sm_121a (given via --arch; no GPU detected)" in out
    facts.gpus = None  # GPU not observed: nothing to say about what was detected
    assert "arch sm_121a (given via --arch) " in squash(console_text(build_report(facts, matrix)))


def test_console_unprobed_target(matrix):
    out = squash(console_text(report_of("unprobed", matrix)))
    assert "stack unknown (packages not observed)" in out
    assert "targetenv: probe env.py in /opt/broken/.venv/bin/python: timed out after 20 s" in out
    assert "target could not be probed (exit 3)" in out
    assert "no known problem" not in out


def test_console_ignored_and_strict(matrix):
    report = report_of("gb10-broken", matrix, fail_on="warn", ignore={"cutedsl-libs-base-mma"})
    out = squash(console_text(report))
    assert "ignored: cutedsl-libs-base-mma" in out
    assert "1 warning (fails the check)" in out
    assert squash(out).strip().endswith("0 errors, 1 warning, 1 info · 5 entries checked, 1 unknown, 1 ignored · evidence: 2 reported · fail-on warn → FAIL (exit 1)")


def test_console_prints_matrix_text_literally(tmp_path):
    path = write_matrix(tmp_path / "m", ["triton-ptxas-sm121a"])
    path.write_text(path.read_text().replace("does not know sm_121a", "does not know [bold]sm_121a[/bold]"))
    out = console_text(build_report(facts_of("gb10-broken"), load(path)))
    assert "[bold]sm_121a[/bold]" in out


def test_console_survives_sparse_kernel_results(matrix):
    facts = facts_of("nogpu-clean")
    facts.kernels = {"odd": "ok", "bare": {}, "runs-junk": {"runs": [None, {"compiled": False}]}}
    out = squash(console_text(build_report(facts, matrix)))
    assert "odd ok" in out and "bare unknown" in out and "compiled ✗" in out


# ---- junit --------------------------------------------------------------------------------------


def parse_junit(text: str) -> ET.Element:
    root = ET.fromstring(text.encode("utf-8"))
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1 and suites[0].get("name") == "sparkdoctor"
    return suites[0]


def check_counts(suite: ET.Element) -> dict[str, int]:
    cases = suite.findall("testcase")
    actual = {
        "tests": len(cases),
        "failures": sum(1 for c in cases if c.find("failure") is not None),
        "errors": sum(1 for c in cases if c.find("error") is not None),
        "skipped": sum(1 for c in cases if c.find("skipped") is not None),
    }
    assert {k: int(suite.get(k)) for k in actual} == actual
    return actual


def case_named(suite: ET.Element, entry_id: str) -> ET.Element:
    return next(c for c in suite.findall("testcase") if c.get("name").startswith(entry_id + ": "))


def test_junit_one_case_per_entry_failures_at_fail_on(matrix):
    report = report_of("gb10-broken", matrix)
    suite = parse_junit(render_junit(report))
    assert check_counts(suite) == {"tests": 6, "failures": 1, "errors": 0, "skipped": 2}
    case = case_named(suite, "cutedsl-libs-base-mma")
    assert case.get("classname") == "sparkdoctor.serving"
    assert case.get("name").endswith("invalid `_mma` PTX instruction for sm_121a block-scaled FP4 MMA")
    failure = case.find("failure")
    assert failure.get("type") == "error"
    assert failure.get("message").startswith("cutlass-dsl 4.5.0 libs-base")
    assert "nvidia-cutlass-dsl 4.5.0 installed (matches ==4.5.0)" in failure.text
    assert "what to do: Uninstall every nvidia-cutlass-dsl* wheel" in failure.text
    assert "https://github.com/NVIDIA/cutlass/issues/3170" in failure.text
    warn = case_named(suite, "triton-ptxas-sm121a")
    assert warn.find("failure") is None and "ptxas 12.8.93" in warn.find("system-out").text
    assert case_named(suite, "nvfp4-gemm-probe").find("skipped").get("message") == "could not evaluate: probe nvfp4-gemm did not run"
    assert case_named(suite, "withdrawn-entry").find("skipped").get("message").startswith("withdrawn: ")
    assert len(case_named(suite, "driver-before-580")) == 0  # clear: passes, nothing inside
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["fingerprint"] == report.facts.fingerprint()
    assert props["arch"] == "sm_121a" and props["arch.source"] == "detected"
    assert "could not observe: serve-log: no recipe given" in suite.find("system-err").text


def test_junit_strict_and_ignore(matrix):
    strict = parse_junit(render_junit(report_of("gb10-broken", matrix, fail_on="warn")))
    assert check_counts(strict)["failures"] == 2
    assert case_named(strict, "triton-ptxas-sm121a").find("failure").get("type") == "warn"
    ignored = parse_junit(render_junit(report_of("gb10-broken", matrix, ignore={"cutedsl-libs-base-mma"})))
    assert check_counts(ignored) == {"tests": 6, "failures": 0, "errors": 0, "skipped": 3}
    assert "ignored" in case_named(ignored, "cutedsl-libs-base-mma").find("skipped").get("message")


def test_junit_unprobed_target_is_an_error(matrix):
    suite = parse_junit(render_junit(report_of("unprobed", matrix)))
    counts = check_counts(suite)
    assert counts["errors"] == 1 and counts["failures"] == 0
    error = next(c for c in suite.findall("testcase") if c.find("error") is not None).find("error")
    assert "timed out after 20 s" in error.get("message")


def test_junit_survives_control_characters(tmp_path):
    path = tmp_path / "env.toml"
    path.write_text('component = "env"\n[[entry]]\nid = "odd-env"\ntitle = "odd"\nseverity = "error"\naction = "configure"\n'
                    'summary = "s"\nremedy = "r"\nwhen.env = { ODD = true }\nrefs = ["https://example.org/odd"]\n')
    facts = facts_of("nogpu-clean")
    facts.env = {"ODD": "a\x1b[31mred\x00 & <b>"}
    suite = parse_junit(render_junit(build_report(facts, load(path))))
    assert "ODD=a[31mred & <b>" in case_named(suite, "odd-env").find("failure").text


def test_junit_is_accepted_by_junitparser(matrix, tmp_path):
    junitparser = pytest.importorskip("junitparser")
    out = tmp_path / "report.xml"
    out.write_text(render_junit(report_of("gb10-broken", matrix)), encoding="utf-8")
    xml = junitparser.JUnitXml.fromfile(str(out))
    suites = list(xml) if isinstance(xml, junitparser.JUnitXml) else [xml]
    assert len(suites) == 1
    suite = suites[0]
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (6, 1, 0, 2)
    results = {case.name.split(":")[0]: [type(r).__name__ for r in case.result] for case in suite}
    assert results["cutedsl-libs-base-mma"] == ["Failure"]
    assert results["nvfp4-gemm-probe"] == ["Skipped"]
    assert results["driver-before-580"] == []


# ---- markdown -----------------------------------------------------------------------------------


def test_markdown_for_a_bug_report(matrix):
    report = report_of("gb10-broken", matrix)
    md = render_markdown(report)
    assert md.startswith("## sparkdoctor report")
    assert "| GPU | NVIDIA GB10 (cc 12.1, sm_121a, 119.7 GiB unified) |" in md
    assert "| nvidia-cutlass-dsl | 4.5.0 \\[libs-base\\] |" in md  # brackets escaped: never a link
    assert "| ptxas (triton) | 12.8.93 · does not know sm_121a · used by triton ·" in md
    assert "#### error: `cutedsl-libs-base-mma` cutlass-dsl 4.5.0 libs-base emits an invalid `_mma` PTX" in md
    assert "- nvidia-cutlass-dsl 4.5.0 installed (matches ==4.5.0)" in md
    assert "<https://github.com/NVIDIA/cutlass/issues/3227> · <https://github.com/NVIDIA/cutlass/issues/3170>" in md
    assert "Uninstall every nvidia-cutlass-dsl\\* wheel" in md  # a bare * would start emphasis
    assert "### Could not evaluate\n\n- `nvfp4-gemm-probe`: probe nvfp4-gemm did not run" in md
    assert "### Could not observe\n\n- serve-log: no recipe given" in md
    assert "| e2m1-cvt | ok | 13.0.88 system | sm_121a | yes | yes | yes | yes |" in md
    assert report.facts.fingerprint() in md
    assert "- CUTE_DSL_ARCH=sm_121a wanted, not set" in md


def test_markdown_details_hold_the_full_snapshot(matrix):
    report = report_of("gb10-broken", matrix)
    md = render_markdown(report)
    details = md[md.index("<details>"):]
    assert details.rstrip().endswith("</details>")
    snapshot = re.search(r"```json\n(.*?)\n```", details, re.S).group(1)
    again = Facts.from_dict(json.loads(snapshot))
    assert again.to_dict() == report.facts.to_dict()
    assert again.fingerprint() == report.facts.fingerprint()


def test_markdown_table_cells_are_escaped(matrix):
    facts = facts_of("nogpu-clean")
    facts.env = {"PIPE": "a|b", "HTML": "<redacted>"}
    md = render_markdown(build_report(facts, matrix))
    env_row = next(line for line in md.splitlines() if line.startswith("| env |"))
    assert "a\\|b" in env_row
    assert env_row.count(" | ") == 1  # the escaped pipe does not open a third column


def test_markdown_clean_and_unprobed(matrix):
    assert "No known problem matches this environment." in render_markdown(report_of("nogpu-clean", matrix))
    md = render_markdown(report_of("unprobed", matrix))
    assert "None: the target could not be probed." in md
    assert "target could not be probed (exit 3)" in md


def test_render_text_dispatches_every_document_format(matrix):
    report = report_of("gb10-broken", matrix)
    assert json.loads(render_text(report, "json"))["schema"] == 1
    parse_junit(render_text(report, "junit"))
    assert render_text(report, "markdown").startswith("## sparkdoctor report")


# ---- matrix list / show -------------------------------------------------------------------------


def test_list_matrix_json_is_complete(matrix):
    rows = sorted_rows(matrix)
    entries = [r for r in rows if r["kind"] == "entry"]
    stacks = [r for r in rows if r["kind"] == "stack"]
    assert {r["id"] for r in entries} == set(ENTRIES)
    assert [r["id"] for r in stacks] == ["b12x-cu13"]
    row = next(r for r in entries if r["id"] == "triton-ptxas-sm121a")
    assert (row["severity"], row["component"], row["title"]) == ("warn", "serving", "Triton's bundled ptxas does not know sm_121a")
    assert next(r for r in entries if r["id"] == "withdrawn-entry")["withdrawn"]


def test_list_matrix_console(matrix):
    buf = io.StringIO()
    list_matrix(matrix, console=Console(file=buf, width=100))
    out = squash(buf.getvalue())
    assert "entries (6)" in out and "known-good stacks (1)" in out
    assert "triton-ptxas-sm121a warn reported serving Triton's bundled ptxas does not know sm_121a" in out
    assert "withdrawn-entry withdrawn" in out
    assert "b12x-cu13 serving FlashInfer b12x with cutlass-dsl cu13" in out
    assert "6 entries, 1 known-good stack in 1 file" in out
    # errors first within a component, withdrawn last
    assert out.index("cutedsl-libs-base-mma") < out.index("triton-ptxas-sm121a") < out.index("withdrawn-entry")


def test_show_entry_console(matrix):
    buf = io.StringIO()
    show_item(matrix.get("cutedsl-libs-base-mma"), console=Console(file=buf, width=100))
    out = squash(buf.getvalue())
    assert out.startswith("cutedsl-libs-base-mma error · action: fix")
    assert "gpu_arch sm_121a" in out
    assert "packages nvidia-cutlass-dsl ==4.5.0" in out
    assert "cutedsl_build libs-base" in out
    assert "what to do Uninstall every nvidia-cutlass-dsl* wheel" in out
    assert "fix cutlass-dsl-cu13-clean-reinstall" in out
    assert "verified by probe cutedsl-nvfp4-mma (expects fail)" in out
    assert "https://github.com/NVIDIA/cutlass/issues/3227 https://github.com/NVIDIA/cutlass/issues/3170" in out


def test_show_stack_and_json(matrix):
    buf = io.StringIO()
    stack = matrix.stacks[0]
    show_item(stack, console=Console(file=buf, width=100))
    out = squash(buf.getvalue())
    assert "b12x-cu13 known-good stack" in out
    assert "nvidia-cutlass-dsl >=4.5.1" in out and "CUTE_DSL_ARCH=sm_121a" in out
    doc = item_dict(matrix.get("triton-ptxas-sm121a"))
    assert doc["kind"] == "entry" and doc["when"] == {"ptxas": {"used_by": "triton", "sm_121a": False}}
    assert item_dict(stack)["packages"]["flashinfer-python"] == ">=0.6.11"


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("env", {"A": True, "B": False, "C": ["x", "y"]}, "A set, B unset, C=x | y"),
        ("env_matches", {"A": "^1"}, "A =~ /^1/"),
        ("packages", {"vllm": ">=0.22,<0.23"}, "vllm >=0.22,<0.23"),
        ("gpu_arch", ["sm_121a", "sm_121"], "sm_121a | sm_121"),
        ("ptxas", {"used_by": "triton", "sm_121a": False}, "used_by=triton, sm_121a=False"),
        ("driver", "<580", "<580"),
    ],
)
def test_conditions_in_words(key, value, words):
    assert describe_condition(key, value) == words


def test_two_ptxas_of_one_version_and_source_are_told_apart_by_path():
    from sparkdoctor.describe import kernel_rows

    def tool(path):
        return {"tool": "ptxas", "path": path, "version": "13.0.88", "source": "system"}

    run = {"arch": "sm_121a", "compiled": True, "ptxas_version": "13.0.88"}
    facts = Facts(
        toolkits=[tool("/usr/local/bin/ptxas"), tool("/usr/local/cuda-13.0/bin/ptxas"),
                  {"tool": "ptxas", "path": "/t/ptxas", "version": "12.8.93", "source": "triton"}],
        kernels={"e2m1-cvt": {"kind": "ptx", "status": "ok", "runs": [
            {**run, "ptxas": "/usr/local/bin/ptxas"}, {**run, "ptxas": "/usr/local/cuda-13.0/bin/ptxas"},
            {**run, "ptxas": "/t/ptxas", "ptxas_version": "12.8.93"}]}},
    )
    labels = [r["ptxas"] for r in kernel_rows(facts)]
    assert labels == ["13.0.88 system /usr/local/bin/ptxas", "13.0.88 system /usr/local/cuda-13.0/bin/ptxas", "12.8.93 triton"]


def test_document_renderers_do_not_load_the_terminal_renderer():
    # junit and markdown share the plain-text describers, not the rich console module (issue 13).
    import subprocess
    import sys

    code = ("import sys, sparkdoctor.views.junit, sparkdoctor.views.markdown, sparkdoctor.views.check; "
            "print(sorted(m for m in sys.modules if m == 'rich' or m.startswith('rich.') or m == 'sparkdoctor.views.console'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == "[]"


# ---- hardening (issue 6): hostile strings, ASCII, URLs, width, arch assumed, stacks ------------------

BIG = 25_000_000


def test_a_25_mb_field_renders_in_under_2_s_in_every_renderer(matrix):
    import time

    facts = facts_of("gb10-broken")
    facts.kernels["cutedsl-nvfp4-mma"]["detail"] = "ptxas error: " + "x" * BIG
    facts.errors.append({"collector": "flood", "error": "e" * BIG})
    facts.packages["vllm"]["version"] = "0.22.0" + "9" * BIG
    facts.env["TORCH_CUDA_ARCH_LIST"] = "12.1a" + "a" * BIG
    report = build_report(facts, matrix)
    renderers = {
        "console": lambda: console_text(report, width=80),
        "console -v": lambda: console_text(report, verbose=True, width=80),
        "markdown": lambda: render_markdown(report),
        "junit": lambda: render_junit(report),
    }
    for name, render in renderers.items():
        start = time.process_time()  # CPU seconds: the machine may be busy with other work
        out = render()
        assert time.process_time() - start < 2, name
        assert len(out) < 1_000_000, name
        assert re.search(r"… \(250000\d\d chars\)", squash(out)), name  # clipped, and says how long the whole was
    assert len(json.dumps(report.to_dict())) > 4 * BIG  # the JSON report keeps the data


NASTY = ["[bold]", "[/]", "[/bold red]", "[link=file:///etc/passwd]x[/link]", "[red", "\\[x]", ":warning:", "[[/]]"]


def test_rich_markup_in_any_fact_prints_literally(matrix):
    facts = facts_of("gb10-broken")
    for i, nasty in enumerate(NASTY):
        facts.packages[f"vllm-nasty-{i}"] = {"name": f"vllm-nasty-{i}", "version": nasty, "integrity": nasty,
                                             "files_modified": [nasty], "files_missing": [nasty]}
    facts.packages["vllm"]["version"] = "[/]"
    facts.env["VLLM_NASTY"] = "[/bold]"
    facts.toolkits.append({"tool": "[/]", "version": "[bold]", "source": "[/]", "used_by": ["[/x]"], "path": "[/]"})
    facts.constraints.append({"requirement": "vllm[/]", "file": "[/bold]"})
    facts.capabilities["x.[/]"] = {"value": "[/]"}
    facts.cutedsl.update(active_build="[/]", installed_builds=["[/]"], evidence="[/]")
    facts.errors.append({"collector": "[/]", "error": "[bold]oops[/bold]"})
    facts.kernels["[/]"] = {"kind": "[/]", "status": "[/]", "detail": "[/]", "runs": [{"ptxas": "[/]", "ptxas_version": "[/]", "error": "[/]"}]}
    facts.gpus[0]["name"] = "GB10 [/]"
    facts.tool["version"] = "[/]"
    report = build_report(facts, matrix)
    for verbose in (False, True):
        out = console_text(report, verbose=verbose, width=100)
        assert "GB10 [/]" in out and "vllm [/]" in squash(out)
    out = console_text(report, verbose=True)
    for nasty in NASTY:
        assert nasty in out
    assert "VLLM_NASTY=[/bold]" in out and "cutlass-dsl: active build [/]" in out


def test_verbose_never_prints_active_build_none(matrix):
    facts = facts_of("nogpu-clean")
    facts.cutedsl = {"active_build": None, "installed_builds": [], "evidence": "nvidia-cutlass-dsl is not installed"}
    out = squash(console_text(build_report(facts, matrix), verbose=True))
    assert "None" not in out
    assert "cutlass-dsl: not installed (nvidia-cutlass-dsl is not installed)" in out
    facts.cutedsl = {"active_build": "unknown", "installed_builds": ["libs-base", "libs-cu13"], "evidence": "no RECORD matches"}
    out = squash(console_text(build_report(facts, matrix), verbose=True))
    assert "cutlass-dsl: active build unknown · installed: libs-base, libs-cu13 (no RECORD matches)" in out


URL = re.compile(r"https?://\S+")


@pytest.mark.parametrize("width", [80, 100])
def test_urls_are_never_broken_and_other_lines_fit_the_width(tmp_path, width):
    path = write_matrix(tmp_path / "m")
    long_ref = "https://github.com/NVIDIA/cutlass/blob/0123456789abcdef0123456789abcdef01234567/python/CuTeDSL/cutlass/cute/nvgpu/warp/mma.py#L120"
    path.write_text(path.read_text().replace("https://github.com/NVIDIA/cutlass/issues/3170", long_ref))
    report = build_report(facts_of("gb10-broken"), load(path))
    for verbose in (False, True):
        out = console_text(report, verbose=verbose, width=width)
        refs = [r for f in report.findings for r in (f.refs if verbose else f.refs[:1])]
        for ref in refs:
            assert any(ref in line for line in out.splitlines()), ref  # whole on one line
        for line in out.splitlines():
            if not URL.search(line):
                assert len(line) <= width, line
        assert (long_ref in out) is verbose


def test_ascii_only_output_encodes_on_an_ascii_stream(matrix):
    from sparkdoctor.views.console import needs_ascii

    facts = facts_of("gb10-broken")
    facts.gpus[0]["name"] = "NVIDIA GB10 – Spark™ ☃"
    facts.kernels["e2m1-cvt"]["detail"] = "assembles … and runs → ok ✓"
    report = build_report(facts, matrix)
    for verbose in (False, True):
        raw = io.BytesIO()
        stream = io.TextIOWrapper(raw, encoding="ascii")
        assert needs_ascii(stream)
        render_console(report, Console(file=stream, width=100), verbose=verbose, ascii_only=True)
        stream.flush()
        out = raw.getvalue().decode("ascii")  # raises if one byte is not ASCII
        flat = squash(out)
        assert "[x] cutedsl-libs-base-mma serving | fix" in flat
        assert "NVIDIA GB10 - Spark? ?" in flat and "assembles ... and runs -> ok ok" in flat
        assert "compiled ok SASS ok ran ok verified ok" in flat and "compiled NO" in flat
        assert flat.strip().endswith("fail-on error -> FAIL (exit 1)")
        assert max(len(line) for line in out.splitlines() if not URL.search(line)) <= 100
    assert not needs_ascii(io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))


def test_assumed_arch_is_said_in_every_renderer(matrix):
    report = report_of("nogpu-clean", matrix)
    assert "arch assumed (no GPU detected)" in summary_line(report)
    assert "arch assumed (no GPU detected) · fail-on error → PASS (exit 0)" in squash(console_text(report))
    md = render_markdown(report)
    assert "arch assumed (no GPU detected)" in md.splitlines()[2]  # the bold summary at the top
    assert "| arch | sm_121a (assumed: no GPU detected; pass --arch to choose) |" in md
    props = {p.get("name"): p.get("value") for p in parse_junit(render_junit(report)).find("properties")}
    assert props["arch.source"] == "assumed" and props["arch.assumed"] == "arch assumed (no GPU detected)"
    assert "arch assumed (no GPU detected)" in props["summary"]
    doc = json.loads(render_text(report, "json"))
    assert doc["summary"]["arch_source"] == "assumed"
    detected = report_of("gb10-broken", matrix)
    assert "assumed" not in summary_line(detected)
    assert "arch.assumed" not in {p.get("name") for p in parse_junit(render_junit(detected)).find("properties")}


STACKS = '''
[[stack]]
id = "full-serving"
title = "vLLM, FlashInfer, torch and cutlass-dsl"
packages = { "vllm" = ">=0.22", "flashinfer-python" = ">=0.6.11", "torch" = ">=2.13", "nvidia-cutlass-dsl" = ">=4.5.1" }
refs = ["https://github.com/vllm-project/vllm/pull/40082"]

[[stack]]
id = "other-world"
title = "Something this box has none of"
packages = { "sglang" = ">=0.5" }
refs = ["https://github.com/sgl-project/sglang"]
'''


def test_nearest_stack_speaks_about_what_the_box_has(tmp_path):
    path = write_matrix(tmp_path / "m", ["driver-before-580"], stack=False)
    path.write_text(path.read_text() + STACKS)
    facts = facts_of("nogpu-clean")
    facts.packages = {"nvidia-cutlass-dsl": {"name": "nvidia-cutlass-dsl", "version": "4.5.0"}}  # a cutlass-dsl-only venv
    report = build_report(facts, load(path))
    nearest = report.nearest_stack
    assert nearest.id == "full-serving"
    assert nearest.differences == ["nvidia-cutlass-dsl 4.5.0 installed, >=4.5.1 wanted"]  # nothing to install
    assert nearest.missing == ["vllm >=0.22", "flashinfer-python >=0.6.11", "torch >=2.13"]
    out = squash(console_text(report, verbose=True))
    assert "• nvidia-cutlass-dsl 4.5.0 installed, >=4.5.1 wanted" in out
    assert "the stack also includes vllm >=0.22, flashinfer-python >=0.6.11, torch >=2.13 (not installed here)" in out
    assert "wanted, not installed" not in out
    assert "full-serving: 1 difference, 3 packages not installed" in out
    assert "other-world: none of its packages installed" in out
    md = render_markdown(report)
    assert "- nvidia-cutlass-dsl 4.5.0 installed, >=4.5.1 wanted\n\nthe stack also includes vllm" in md
    facts.packages = {"numpy": {"name": "numpy", "version": "2.0"}}  # none of any stack: nothing is near
    assert build_report(facts, load(path)).nearest_stack is None


def test_a_version_that_cannot_be_compared_is_no_match_with_the_stack(tmp_path):
    """A flashinfer-python whose METADATA says `Version: not.a.version!!` was said to match the stack's ==0.6.10:
    "what this box has of it matches"."""
    path = write_matrix(tmp_path / "m", ["driver-before-580"], stack=False)
    path.write_text(path.read_text() + STACKS)
    facts = facts_of("nogpu-clean")
    facts.packages = {"flashinfer-python": {"name": "flashinfer-python", "version": "not.a.version!!"}}
    nearest = build_report(facts, load(path)).nearest_stack
    assert nearest is not None and not nearest.matches
    assert nearest.differences == ["flashinfer-python not.a.version!! installed (not a valid version, so not comparable), "
                                   ">=0.6.11 wanted"]
    out = squash(console_text(build_report(facts, load(path)), verbose=True))
    assert "what this box has of it matches" not in out and "(not a valid version, so not comparable)" in out


@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}])
def test_the_command_on_an_ascii_stdout_prints_ascii(tmp_path, env):
    # The console renderer picks ASCII symbols from the stream's encoding unless told otherwise.
    import os
    import subprocess
    import sys

    path = write_matrix(tmp_path / "m")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONIO", "PYTHONUTF8", "FORCE_COLOR"))}
    (tmp_path / "none.toml").write_text("")  # an empty config: the user's own stays out of the test
    done = subprocess.run(
        [sys.executable, "-m", "sparkdoctor", "check", "--facts", str(FACTS_DIR / "gb10-broken.json"), "--matrix", str(path), "-v"],
        capture_output=True, timeout=60, cwd=tmp_path,
        env={**base, "COLUMNS": "80", "SPARKDOCTOR_CONFIG": str(tmp_path / "none.toml"), **env,
             "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr == b""
    assert done.stdout.isascii()
    assert squash(done.stdout.decode()).strip().endswith("fail-on error -> FAIL (exit 1)")


def test_junit_has_a_case_for_each_unexplained_or_unverified_probe(tmp_path):
    warn_only = load(write_matrix(tmp_path / "m", ["triton-ptxas-sm121a", "vllm-files-modified"]))
    facts = facts_of("gb10-broken")
    facts.kernels["e2m1-cvt"].update(status="timeout", detail="ptxas timed out after 60s")
    suite = parse_junit(render_junit(build_report(facts, warn_only)))
    assert check_counts(suite) == {"tests": 4, "failures": 1, "errors": 0, "skipped": 1}
    failure = case_named(suite, "probe-cutedsl-nvfp4-mma").find("failure")
    assert failure.get("type") == "error" and "Unexpected instruction types specified for '_mma'" in failure.text
    assert case_named(suite, "probe e2m1-cvt").find("skipped").get("message") == (
        "unverified: the probe could not run (timeout): ptxas timed out after 60s")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["verdict"] == "fail"
    ignored = parse_junit(render_junit(build_report(facts, warn_only, ignore={"probe-cutedsl-nvfp4-mma"})))
    assert check_counts(ignored) == {"tests": 4, "failures": 0, "errors": 0, "skipped": 2}
    assert {p.get("name"): p.get("value") for p in ignored.find("properties")}["verdict"] == "unverified"
