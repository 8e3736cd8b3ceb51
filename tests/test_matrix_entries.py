"""Every bundled matrix entry fires on a GB10 that has its problem and stays quiet on a near miss.

CASES maps each entry id to (trigger, near miss): changes to the healthy GB10 baseline
(tests/gb10.py) under which the entry must evaluate to "match", and a close variant under which it
must evaluate to "clear". A new entry without a row here fails test_every_entry_has_a_case.
"""

from __future__ import annotations

import re

import pytest

from sparkdoctor import matrix
from tests.gb10 import gb10_facts, pin, ptxas

MATRIX = matrix.load()

CU13_FILE = "nvidia_cutlass_dsl/python_packages/cutlass/cute/nvgpu"
CORE_FILE = "nvidia_cutlass_dsl/dsl_packages/cutlass/cute/nvgpu"
BASE_ONLY_450 = dict(
    packages={"nvidia-cutlass-dsl": "4.5.0", "nvidia-cutlass-dsl-libs-base": "4.5.0", "nvidia-cutlass-dsl-libs-cu13": None},
    cutedsl_build="libs-base",
)
CORE_48 = {
    "nvidia-cutlass-dsl": "4.8.0",
    "nvidia-cutlass-dsl-libs-base": "4.8.0",
    "nvidia-cutlass-dsl-libs-cu13": "4.8.0",
    "nvidia-cutlass-dsl-libs-core": "4.8.0",
}

CASES: dict[str, tuple[dict, dict]] = {
    # ---- nvidia-cutlass-dsl -------------------------------------------------------------------
    "cutedsl-wheel-collision": (
        dict(cutedsl_build="libs-base"),
        dict(),  # both wheels installed, the cu13 build really on disk
    ),
    "cutedsl-450-libs-base-mma": (
        BASE_ONLY_450,
        dict(BASE_ONLY_450, packages={**BASE_ONLY_450["packages"], "nvidia-cutlass-dsl": "4.5.1"}),
    ),
    "cutedsl-450-nvfp4-garbage": (
        dict(packages={"nvidia-cutlass-dsl": "4.5.0"}),
        dict(packages={"nvidia-cutlass-dsl": "4.5.1"}),
    ),
    "cutedsl-sm121a-not-admissible": (
        dict(packages={"nvidia-cutlass-dsl": "4.4.2"}),
        dict(packages={"nvidia-cutlass-dsl": "4.5.0"}),
    ),
    "cutedsl-pinned-pre-45": (
        dict(constraints=[pin("nvidia-cutlass-dsl==4.4.2")]),
        dict(constraints=[pin("nvidia-cutlass-dsl==4.5.2")]),
    ),
    "cutedsl-pin-vs-flashinfer": (
        dict(constraints=[pin("nvidia-cutlass-dsl==4.4.2")]),
        dict(constraints=[pin("nvidia-cutlass-dsl==4.4.2")], packages={"flashinfer-python": "0.6.9"}),
    ),
    "cutedsl-tcgen05-sm12x": (
        dict(),
        dict(arch="sm_100a"),
    ),
    "cutedsl-arch-unset": (
        dict(env={"CUTE_DSL_ARCH": None}),
        dict(),
    ),
    "cutedsl-arch-mismatch": (
        dict(env={"CUTE_DSL_ARCH": "sm_120a"}),
        dict(env={"CUTE_DSL_ARCH": "sm_121f"}),
    ),
    "cutedsl-warp-mma-patch-obsolete": (
        dict(modified={"nvidia-cutlass-dsl-libs-cu13": [f"{CU13_FILE}/warp/mma.py"]}),
        dict(modified={"nvidia-cutlass-dsl-libs-cu13": [f"{CU13_FILE}/warp/mma.py"]}, packages={"nvidia-cutlass-dsl": "4.4.2"}),
    ),
    "cutedsl-warp-mma-patch-obsolete-core": (
        dict(packages=CORE_48, modified={"nvidia-cutlass-dsl-libs-core": [f"{CORE_FILE}/warp/mma.py"]}),
        dict(packages=CORE_48, modified={"nvidia-cutlass-dsl-libs-core": [f"{CORE_FILE}/tcgen05/mma.py"]}),
    ),
    "cutedsl-tcgen05-patched": (
        dict(modified={"nvidia-cutlass-dsl-libs-cu13": [f"{CU13_FILE}/tcgen05/mma.py", f"{CU13_FILE}/tcgen05/copy.py"]}),
        dict(modified={"nvidia-cutlass-dsl-libs-cu13": [f"{CU13_FILE}/warp/mma.py"]}),
    ),
    "cutedsl-hand-modified": (
        dict(modified={"nvidia-cutlass-dsl-libs-cu13": [f"{CU13_FILE}/warp/mma.py"]}),
        # libs-base active: its RECORD, not libs-cu13's, describes the files on disk
        dict(modified={"nvidia-cutlass-dsl-libs-cu13": [f"{CU13_FILE}/warp/mma.py"]}, cutedsl_build="libs-base"),
    ),
    "cutedsl-core-hand-modified": (
        dict(packages=CORE_48, modified={"nvidia-cutlass-dsl-libs-core": [f"{CORE_FILE}/warp/copy.py"]}),
        dict(packages=CORE_48),
    ),
}


def _explain(evaluation: matrix.Evaluation) -> str:
    return f"{evaluation.entry.id}: {evaluation.outcome}\n" + "\n".join(f"  [{c.result}] {c.key}: {c.evidence}" for c in evaluation.checks)


@pytest.mark.parametrize("entry_id", sorted(CASES))
def test_entry_matches_its_trigger_and_not_its_near_miss(entry_id):
    entry = MATRIX.get(entry_id)
    assert entry is not None, f"{entry_id} has a test row but no matrix entry"
    trigger, near_miss = CASES[entry_id]
    hit = matrix.evaluate(entry, gb10_facts(**trigger))
    assert hit.outcome == "match", _explain(hit)
    miss = matrix.evaluate(entry, gb10_facts(**near_miss))
    assert miss.outcome == "clear", _explain(miss)


def test_every_entry_has_a_case():
    bundled = {e.id for e in MATRIX.entries}
    assert not bundled - set(CASES), f"entries without a trigger/near-miss row: {sorted(bundled - set(CASES))}"
    assert not set(CASES) - bundled, f"rows for entries that do not exist: {sorted(set(CASES) - bundled)}"


def test_bundled_matrix_validates_and_every_entry_cites_a_url():
    assert MATRIX.entries, "no bundled entries"
    for item in [*MATRIX.entries, *MATRIX.stacks]:
        assert item.refs, f"{item.id} cites nothing"
        for ref in item.refs:
            assert re.match(r"^https://\S+$", ref), f"{item.id}: {ref!r} is not an https URL"


def test_entries_are_written_out():
    for e in MATRIX.entries:
        assert len(e.summary) >= 80, f"{e.id}: summary too thin to act on"
        assert e.remedy and e.title, e.id
        assert not e.fix, f"{e.id}: fix definitions come later; do not reference one yet"


def test_healthy_gb10_matches_no_error_and_decides_every_entry():
    results = matrix.evaluate_all(MATRIX, gb10_facts())
    errors = [_explain(r) for r in results if r.outcome == "match" and r.entry.severity == "error"]
    assert not errors, "\n".join(errors)
    undecided = [_explain(r) for r in results if r.outcome == "unknown"]
    assert not undecided, "baseline facts leave entries undecided:\n" + "\n".join(undecided)
