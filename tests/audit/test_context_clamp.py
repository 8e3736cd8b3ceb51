"""--context longer than the sequences the server (or the model) holds: the KV read per token was sized at a
context no request can reach (`audit M --max-model-len 1024` priced 4096 tokens), and the ceiling came out low."""

from __future__ import annotations

import pytest

from sparkdoctor.audit.roofline import AuditOptions, run_audit
from tests.audit import builders


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    return builders.qwen3_8b(tmp_path_factory.mktemp("m") / "qwen3-8b", None)


def test_context_is_capped_at_max_model_len_and_says_so(dense):
    capped = run_audit(AuditOptions(str(dense), context=4096, max_model_len=1024, gpu="gb10"))
    exact = run_audit(AuditOptions(str(dense), context=1024, max_model_len=1024, gpu="gb10"))
    assert capped.kv_per_token == exact.kv_per_token == 1024 * 36 * 8 * 128 * 2 * 2  # layers x kv heads x dim x K+V x BF16
    assert capped.ceiling == exact.ceiling and capped.options.context == 1024
    assert capped.options.notes == ["--context 4096 is longer than the 1024 tokens a sequence may hold (--max-model-len): "
                                    "the KV cache read per token is sized at 1024"]
    assert exact.options.notes == []


def test_the_models_own_length_caps_it_too(dense):
    audit = run_audit(AuditOptions(str(dense), context=100_000, gpu="gb10"))  # Qwen3-8B: 40960 positions
    assert audit.options.context == 40960 and "(the model's config)" in audit.options.notes[0]


def test_a_recipe_without_max_model_len_shows_the_length_the_fit_used(dense, tmp_path):
    """`fit settings: max_model_len = None` sat under a fit line sized at the model's 40960 tokens."""
    import subprocess
    import sys

    recipe = tmp_path / "r.toml"
    recipe.write_text(f'schema = 1\nname = "r"\nmodel = "{dense}"\ncommand = ["vllm", "serve", "{{model}}"]\n')
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "audit", "--recipe", str(recipe), "--gpu", "gb10"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "(1 x 40960 tokens)" in p.stdout and "max_model_len = 40960 (the model's length)  <- vLLM default" in p.stdout, p.stdout
    assert "= None" not in p.stdout


def test_the_default_context_is_capped_without_a_note_naming_an_option_not_given(dense, tmp_path):
    """`audit M --max-model-len 1024` (and any model shorter than 4096 tokens) printed
    `note: --context 4096 is longer than ...`: a note about an option the user never gave."""
    import json
    import subprocess
    import sys

    run = [sys.executable, "-m", "sparkdoctor", "audit", str(dense), "--gpu", "gb10", "--max-model-len", "1024"]
    quiet = subprocess.run([*run, "--format", "json"], capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 0, quiet.stderr
    document = json.loads(quiet.stdout)
    assert document["settings_notes"] == [] and document["per_token"]["context"] == 1024, document
    given = subprocess.run([*run, "--context", "4096"], capture_output=True, text=True, timeout=120)
    assert "note: --context 4096 is longer than the 1024 tokens" in given.stdout, given.stdout
