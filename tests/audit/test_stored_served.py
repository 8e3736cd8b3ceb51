"""The byte table's stored (the file's) and served (as vLLM holds a cast tensor) figures kept apart
(docs/evidence/auditkv-2026-12-02.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sparkdoctor.audit.checkpoint import load_checkpoint
from sparkdoctor.audit.roofline import AuditOptions, run_audit
from tests.audit.test_checkpoint import tiny

REPO = Path(__file__).resolve().parent.parent.parent
EUGR = 'recipe_version: "1"\nname: r\ncontainer: vllm/vllm-openai:latest\ncommand: |\n  vllm serve {model} {flags}\n'


def _audit(folder: Path, kv: str, **options: object):
    return run_audit(AuditOptions(str(folder), gpu="gb10", kv_cache_dtype=kv, context=1024, **options))  # type: ignore[arg-type]


def _disk_bytes(folder: Path) -> dict[str, int]:
    return {t.name: t.nbytes for t in load_checkpoint(folder).tensors.values()}


def test_stored_is_what_the_file_holds_and_served_what_vllm_loads(tmp_path):
    """--dtype float32 on a bf16 checkpoint: `bytes_stored`/`formats` are the file's (BF16, its bytes); the cast is
    `bytes_served`/`formats_served` (F32, twice); reads and the fit use the served bytes."""
    folder = tiny(tmp_path / "m")
    disk = _disk_bytes(folder)
    audit = _audit(folder, "auto", dtype="float32")
    attention = next(g for g in audit.groups if g.key == "attention")
    assert attention.bytes_stored == disk["model.layers.0.self_attn.q_proj.weight"] == 64 * 64 * 2
    assert attention.bytes_served == 2 * attention.bytes_stored == attention.bytes_read
    row = attention.to_dict()
    assert row["formats"] == {"BF16": 64 * 64 * 2} and row["formats_served"] == {"F32": 64 * 64 * 4}
    assert row["bytes_stored"] == 64 * 64 * 2 and row["bytes_served"] == 64 * 64 * 4
    assert sum(g.bytes_stored for g in audit.groups) == sum(disk.values())
    assert audit.fit.weights == 2 * sum(disk.values())
    assert set(audit.read_by_format) == {"F32"}  # what a decoded token reads is the served tensor


def test_a_group_not_cast_has_equal_stored_and_served(tmp_path):
    audit = _audit(tiny(tmp_path / "m"), "auto")
    for g in audit.groups:
        row = g.to_dict()
        assert row["bytes_served"] == row["bytes_stored"] and row["formats_served"] == row["formats"]


def test_the_console_table_shows_stored_and_served_apart(tmp_path):
    folder = tiny(tmp_path / "m")
    recipe = tmp_path / "dt.yaml"
    recipe.write_text(EUGR.format(model=folder, flags="--max-model-len 1024 --dtype float32"))
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), COLUMNS="160")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "sparkdoctor", "audit", "--recipe", str(recipe), "--gpu", "gb10", *args],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    p = cli()
    assert p.returncode == 0, p.stderr
    header = next(line for line in p.stdout.splitlines() if line.startswith("group"))
    assert "stored" in header and "served" in header
    line = next(line for line in p.stdout.splitlines() if line.startswith("attention"))
    assert "BF16 as F32" in line and "8.2 kB" in line and "16.4 kB" in line  # on disk, then as vLLM holds it
    plain = subprocess.run([sys.executable, "-m", "sparkdoctor", "audit", str(folder), "--gpu", "gb10"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0 and "served" not in next(x for x in plain.stdout.splitlines() if x.startswith("group"))
    data = json.loads(cli("--format", "json").stdout)
    attention = next(g for g in data["groups"] if g["group"] == "attention")
    assert attention["bytes_stored"] == 8192 and attention["bytes_served"] == 16384
