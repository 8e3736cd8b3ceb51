"""Session-wide real-shape checkpoints (sparse files: tens of GB on paper, a few MB of headers on disk) and
their audits, built once: the large MoE headers take seconds to write and to read."""

from __future__ import annotations

import pytest

from sparkdoctor.audit.roofline import AuditOptions, run_audit
from tests.audit import builders


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def qwen3_8b(models):
    """Qwen3-8B in each format the seeds measured (and the others the audit knows), by quant name."""
    return {q: builders.qwen3_8b(models / f"qwen3-8b-{q or 'bf16'}", q) for q in (None, "fp8-dynamic", "nvfp4", "nvfp4a16", "awq", "gptq", "fp8-block")}


@pytest.fixture(scope="session")
def qwen36(models):
    return builders.qwen36_35b_a3b_nvfp4(models / "qwen3.6-35b-a3b-nvfp4")


@pytest.fixture(scope="session")
def qwen36_audit(qwen36):
    return run_audit(AuditOptions(str(qwen36), context=512, kv_cache_dtype="fp8", gpu="gb10"))


@pytest.fixture(scope="session")
def qwen3_next(models):
    return builders.qwen3_next_80b_nvfp4(models / "qwen3-next-80b-a3b-nvfp4")


@pytest.fixture(scope="session")
def qwen3_next_checkpoint(qwen3_next):
    """Headers read once; tests that want other options pass it to run_audit(..., checkpoint=)."""
    from sparkdoctor.audit.checkpoint import load_checkpoint

    return load_checkpoint(qwen3_next)


@pytest.fixture(scope="session")
def qwen3_next_audit(qwen3_next, qwen3_next_checkpoint):
    return run_audit(AuditOptions(str(qwen3_next), context=512, gpu="gb10"), checkpoint=qwen3_next_checkpoint)


@pytest.fixture(scope="session")
def gpt_oss(models):
    return builders.gpt_oss_20b(models / "gpt-oss-20b")
