"""What-if proved against a real upgrade (issue 24 item 5): predict nvidia-cutlass-dsl 4.5.0 (libs-base)
-> 4.5.2 [cu13] in a scratch venv, perform that upgrade in the same venv, run check's collection
again, and require every field the prediction claimed to equal what the real upgrade produced."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sparkdoctor.check import CheckOptions, collect_facts
from sparkdoctor.matrix import evaluate_all, load
from sparkdoctor.released import Reader
from sparkdoctor.target.local import resolve_python_target
from sparkdoctor.whatif import hypothetical_facts, resolve_upgrade

pytestmark = pytest.mark.slow


def facts_of(python: str):
    return collect_facts(resolve_python_target(python), CheckOptions(arch="sm_121a", kernels=False, use_cache=False))


def matched(matrix, facts) -> set[str]:
    return {ev.entry.id for ev in evaluate_all(matrix, facts) if ev.outcome == "match"}


def test_cutlass_dsl_450_base_to_452_cu13_prediction_equals_the_real_upgrade(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "-q"]
    subprocess.run([*pip, "nvidia-cutlass-dsl==4.5.0"], check=True, timeout=1800)
    today = facts_of(python)
    assert today.packages["nvidia-cutlass-dsl"]["version"] == "4.5.0"
    spec = "nvidia-cutlass-dsl[cu13]==4.5.2"
    changes = resolve_upgrade(resolve_python_target(python), python, [spec], today)
    notes: list[str] = []
    reader = Reader("linux-x86_64" if today.host.get("machine") == "x86_64" else "linux-aarch64", f"{sys.version_info[0]}.{sys.version_info[1]}")
    try:
        predicted = hypothetical_facts(today, changes, reader, notes)
    finally:
        reader.close()
    subprocess.run([*pip, spec], check=True, timeout=1800)  # the real upgrade, in the same venv
    after = facts_of(python)
    claims = {c.name: c.new for c in changes}
    real = {name: (after.packages.get(name) or {}).get("version") for name in claims}
    assert claims == real, (claims, real)
    for name, row in after.packages.items():  # nothing the prediction left alone changed
        if name not in claims:
            assert (today.packages.get(name) or {}).get("version") == row.get("version"), name
    assert (predicted.cutedsl or {}).get("active_build") == (after.cutedsl or {}).get("active_build"), (predicted.cutedsl, after.cutedsl)
    matrix = load()
    assert matched(matrix, predicted) == matched(matrix, after)
    print(f"\npredicted = real: {claims}; cutlass-dsl build {after.cutedsl.get('active_build')}; "
          f"{len(matched(matrix, after))} matching entries: {sorted(matched(matrix, after))}")
