"""Hostile checkpoints and options (issue 20, item 10): each is audited or refused in one line naming the file
(or the option), exit 2, in bounded time; each was an internal error or a hang before."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkdoctor.audit.checkpoint import load_checkpoint
from sparkdoctor.audit.locate import resolve_model
from sparkdoctor.audit.roofline import AuditOptions, run_audit
from sparkdoctor.audit.safetensors import read_header
from tests.audit import builders
from tests.audit.test_checkpoint import TINY, one_line, tiny

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkdoctor", "audit", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def refused(p: subprocess.CompletedProcess, *words: str) -> None:
    assert p.returncode == 2 and p.stderr.count("\n") == 1, (p.returncode, p.stderr[-2000:])
    assert "internal error" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    for word in words:
        assert word in p.stderr, p.stderr


def write_header(path: Path, header: dict, data: int = 2) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + b"\0" * data)


@pytest.mark.parametrize("shape", [[10**1500] * 3, [2**64], [2**40, 2**40]], ids=["4500-digits", "2**64", "2**80"])
def test_a_shape_with_an_impossible_element_count_names_the_tensor(tmp_path, shape):
    path = tmp_path / "model.safetensors"
    write_header(path, {"w": {"dtype": "BF16", "shape": shape, "data_offsets": [0, 2]}})
    message = one_line(lambda: read_header(path), "tensor 'w': shape of")
    assert "2**64 elements or more" in message and len(message) < 300


def test_offsets_of_thousands_of_digits_are_refused_in_a_short_line(tmp_path):
    path = tmp_path / "model.safetensors"
    big = "1" * 4000  # json.loads reads up to 4,300 digits; a message must not print them
    raw = (f'{{"w": {{"dtype": "BF16", "shape": [1], "data_offsets": [0, {big}]}}}}').encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + b"\0\0")
    message = one_line(lambda: read_header(path), "tensor 'w': data_offsets")
    assert len(message) < 300, message


def test_a_deeply_nested_config_is_one_line(tmp_path):
    folder = tiny(tmp_path / "m")
    (folder / "config.json").write_text('{"model_type": "llama", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    refused(cli(folder, "--gpu", "gb10"), "config.json: nested too deeply")


@pytest.mark.parametrize("field, value", [("num_hidden_layers", 10**12), ("hidden_size", 10**4000)])
def test_a_config_number_no_model_has_is_one_line(tmp_path, field, value):
    folder = tiny(tmp_path / "m", config={**TINY, field: value})
    message = one_line(lambda: run_audit(AuditOptions(str(folder), gpu="gb10")), f"{field} is")
    assert "not a real model's size" in message and len(message) < 300


@pytest.mark.parametrize("args, flag", [
    (["--memory", "1e308", "-f", "json"], "--memory"), (["--memory", "inf"], "--memory"),
    (["--bandwidth", "1e308", "-f", "json"], "--bandwidth"), (["--bandwidth", "inf"], "--bandwidth"),
    (["--context", "99999999999999999999"], "--context"), (["--max-num-seqs", str(10**21)], "--max-num-seqs"),
    (["--max-model-len", str(10**30)], "--max-model-len"), (["--gpu-memory-utilization", "nan"], "--gpu-memory-utilization"),
])
def test_numbers_past_any_machine_are_refused_naming_the_option(tmp_path, args, flag):
    folder = tiny(tmp_path / "m")
    refused(cli(folder, "--gpu", "gb10", *args), f"{flag} ", "must be a number")


def test_the_largest_real_values_still_audit(tmp_path):
    folder = tiny(tmp_path / "m")
    p = cli(folder, "--gpu", "gb10", "--memory", "1024", "--bandwidth", "8000", "--context", "1000000",
            "--max-num-seqs", "1024", "-f", "json")
    assert p.returncode in (0, 1) and json.loads(p.stdout)["fit"]["memory_gib"] == 1024, p.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_a_fifo_in_the_checkpoint_is_refused_without_blocking(tmp_path, name):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY))
    builders.write_safetensors(folder / "model.safetensors", [("w", "BF16", [1])])
    (folder / name).unlink()
    os.mkfifo(folder / name)
    refused(cli(folder, "--gpu", "gb10", timeout=60), f"{name}: cannot read: is a FIFO (named pipe), not a regular file")


def test_audit_has_the_run_wide_time_limit(tmp_path):
    folder = tiny(tmp_path / "m")
    refused(cli(folder, "--timeout", "-1"), "--timeout -1.0: give a number of seconds above 0")
    assert cli(folder, "--gpu", "gb10", "--timeout", "60").returncode == 0


def test_a_backtracking_ignore_pattern_of_the_checkpoint_is_stopped_by_the_time_limit(tmp_path):
    """vLLM's `re:` patterns are the checkpoint's to write; one that backtracks without end is cut off after
    0.25 s on one module name (the run's --timeout stops it otherwise), in one line that names it."""
    config = {**TINY, "quantization_config": {"quant_method": "compressed-tensors", "ignore": ["re:.*(a|aa)+$"],
                                              "config_groups": {}}}
    entries = [(f"model.layers.0.mlp.{'a' * 60}b.weight", "BF16", [4, 4]), ("lm_head.weight", "BF16", [100, 64])]
    folder = builders.write_checkpoint(tmp_path / "m", config, entries)
    p = cli(folder, "--gpu", "gb10", "--timeout", "120", timeout=300)
    refused(p, "the checkpoint's ignore pattern 're:.*(a|aa)+$' could not be matched against "
               f"'model.layers.0.mlp.{'a' * 60}b' within 0.25 s")



# ---- org/name@REVISION stays inside the Hugging Face cache ---------------------------------------------
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def cached(tmp_path: Path) -> tuple[Path, Path]:
    """A hub cache holding org/name with refs/main and one snapshot; (the cache, the model's folder)."""
    cache = tmp_path / "hub"
    model = cache / "models--org--name"
    tiny(model / "snapshots" / COMMIT)
    (model / "refs").mkdir()
    (model / "refs" / "main").write_text(COMMIT)
    return cache, model


def cli_hub(cache: Path, *args, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-m", "sparkdoctor", "audit", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


def test_a_revision_climbing_out_of_the_cache_is_refused_in_one_line(tmp_path):
    cache, model = cached(tmp_path)
    (tmp_path / "outside").write_text(COMMIT)  # the old reader followed ../ to any file (/dev/zero: MemoryError)
    p = cli_hub(cache, "org/name@../../../outside", "--gpu", "gb10")
    refused(p, "org/name@../../../outside: revision '../../../outside' is neither a commit id", "nor a ref name")


@pytest.mark.parametrize("revision", ["../../../../../../../../../dev/null", "/dev/null", "refs/../../x", "a//b", ".hidden",
                                      "main\n", "x\0y", "v1 beta", "a:b", "ref.lock"])
def test_a_revision_that_is_no_ref_name_is_refused_before_reading(tmp_path, monkeypatch, revision):
    cache, model = cached(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    message = one_line(lambda: resolve_model(f"org/name@{revision}"), "is neither a commit id (40 hex digits) nor a ref name")
    assert "\n" not in message


def test_ref_names_with_slashes_and_dots_still_resolve(tmp_path, monkeypatch):
    cache, model = cached(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    for name in ("refs/pr/1", "v1.0", "release-2025.1_a"):
        (model / "refs" / name).parent.mkdir(parents=True, exist_ok=True)
        (model / "refs" / name).write_text(COMMIT + "\n")
        assert resolve_model(f"org/name@{name}") == model / "snapshots" / COMMIT


def test_a_ref_that_links_outside_or_holds_no_commit_is_refused(tmp_path, monkeypatch):
    cache, model = cached(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    (tmp_path / "outside").write_text(COMMIT)
    (model / "refs" / "linked").symlink_to(tmp_path / "outside")
    one_line(lambda: resolve_model("org/name@linked"), "the cache's ref 'linked' leads outside")
    (model / "refs" / "junk").write_text("../../../../etc")  # a ref's content names a snapshot folder: never a path
    one_line(lambda: resolve_model("org/name@junk"), "does not hold a commit id (40 hex digits)")
    (model / "refs" / "huge").write_bytes(b"0" * 10**6)
    one_line(lambda: resolve_model("org/name@huge"), "cannot read the cache's ref")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_ref_in_the_cache_is_refused_without_blocking(tmp_path):
    cache, model = cached(tmp_path)
    (model / "refs" / "main").unlink()
    os.mkfifo(model / "refs" / "main")
    refused(cli_hub(cache, "org/name", "--gpu", "gb10"), "cannot read the cache's ref", "is a FIFO (named pipe)")


# ---- a long shape costs linear time, and is refused naming the tensor ----------------------------------
def test_a_shape_of_thousands_of_huge_dimensions_is_refused_at_once(tmp_path):
    """50,000 dims of 2**64-1 (1 MB of header) took 17 s of CPU: the element count was multiplied out in full."""
    path = tmp_path / "model.safetensors"
    write_header(path, {"w": {"dtype": "BF16", "shape": [2**64 - 1] * 50_000, "data_offsets": [0, 2]}})
    start = time.process_time()
    message = one_line(lambda: read_header(path), "tensor 'w': shape has 50000 dimensions")
    assert time.process_time() - start < 2.0 and len(message) < 300, message
    refused(cli(tmp_path / "model.safetensors", "--gpu", "gb10"), "is a file")  # (the CLI takes the folder)
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    refused(cli(tmp_path, "--gpu", "gb10"), "tensor 'w': shape has 50000 dimensions; no framework loads")


@pytest.mark.parametrize("shape, match", [
    ([2] * 65, "shape has 65 dimensions"),
    ([2**63, 2, 3] + [2**64 - 1] * 60, "shape of 63 dimensions holds 2**64 elements or more"),
])
def test_a_shape_past_the_limits_names_the_tensor(tmp_path, shape, match):
    path = tmp_path / "model.safetensors"
    write_header(path, {"w": {"dtype": "BF16", "shape": shape, "data_offsets": [0, 2]}})
    one_line(lambda: read_header(path), f"tensor 'w': {match}")


def test_a_zero_dimension_makes_an_empty_tensor_however_large_the_others(tmp_path):
    path = tmp_path / "model.safetensors"
    write_header(path, {"e": {"dtype": "BF16", "shape": [2**40, 2**40, 0], "data_offsets": [0, 0]},
                        "w": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}})
    tensors = read_header(path).tensors
    assert tensors["e"].numel == 0 and tensors["w"].nbytes == 2


# ---- GPTQ/AWQ bits -------------------------------------------------------------------------------------
@pytest.mark.parametrize("bits", [0, -1, 5, 32, True, "4", 10**50])
def test_gptq_bits_that_no_packing_has_are_refused_naming_the_field(tmp_path, bits):
    config = {**TINY, "quantization_config": {"quant_method": "gptq", "bits": bits, "group_size": 128}}
    entries = builders.linear("model.layers.0.mlp.up_proj", 256, 256, "gptq") + [("lm_head.weight", "BF16", [100, 64])]
    folder = builders.write_checkpoint(tmp_path / "m", config, entries)
    p = cli(folder, "--gpu", "gb10")
    refused(p, "config.json: quantization_config.bits must be 2, 3, 4 or 8")
    assert len(p.stderr) < 300, p.stderr


def test_three_bit_gptq_counts_32_weights_per_3_words(tmp_path):
    config = {**TINY, "quantization_config": {"quant_method": "gptq", "bits": 3, "group_size": 128}}
    entries = [("model.layers.0.mlp.up_proj.qweight", "I32", [256 * 3 // 32, 128]), ("model.layers.0.mlp.up_proj.g_idx", "I32", [256]),
               ("model.layers.0.mlp.up_proj.scales", "F16", [2, 128]), ("lm_head.weight", "BF16", [100, 64])]
    folder = builders.write_checkpoint(tmp_path / "m", config, entries)
    mlp = next(g for g in run_audit(AuditOptions(str(folder), gpu="gb10", context=0)).groups if g.key == "mlp")
    assert list(mlp.formats) == ["INT3 GPTQ g128"] and mlp.params == 256 * 128  # not 256 * 3 // 32 * 128 * (32 // 3)


# ---- folders as an attacker lays them out ----------------------------------------------------------------
def test_a_checkpoint_whose_decoding_reads_no_byte_is_refused_in_one_line(tmp_path):
    """No decoder layer and one empty tensor: 0 bytes a token. The ceiling divided by it: an internal error."""
    folder = tmp_path / "m"
    builders.write_checkpoint(folder, {**TINY, "num_hidden_layers": 0}, [("x", "BF16", [0])])
    refused(cli(folder, "--gpu", "gb10"), "reads 0 bytes", "no ceiling")


def test_a_shard_linked_to_a_file_outside_does_not_show_its_bytes(tmp_path):
    """A shard that is a link to another file (a secret) is read for its 8-byte length: the number printed was
    those 8 bytes (`root:x:0` as 3475222254926655346 for /etc/passwd)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2-is-my-password\n")
    folder = tiny(tmp_path / "m")
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").symlink_to(secret)
    message = one_line(lambda: run_audit(AuditOptions(str(folder), gpu="gb10")), "over the format's limit")
    assert str(int.from_bytes(b"hunter2-", "little")) not in message


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_shard_the_index_names_that_is_no_file_is_named_for_what_it_is(tmp_path, kind):
    """The index names a FIFO or a link to /dev/zero: "not in the folder (an incomplete download?)" sent the user to
    download again a file that is there."""
    folder = tiny(tmp_path / "m", shard_bytes=20_000)
    shard = folder / "model-00002-of-00004.safetensors"
    shard.unlink()
    os.mkfifo(shard) if kind == "fifo" else shard.symlink_to("/dev/zero")
    message = one_line(lambda: load_checkpoint(folder), "not a regular file")
    assert "incomplete download" not in message



class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_console_table_fits_a_narrow_terminal(tmp_path, monkeypatch):
    # drawn 140 columns wide on any terminal: a 60-column one broke each row of the table in two
    import sparkdoctor.views.audit  # noqa: F401 (registers the view)
    from sparkdoctor import emit
    from sparkdoctor.result import Format, Result

    audit = run_audit(AuditOptions(model=str(tiny(tmp_path / "m"))))
    monkeypatch.setattr(sys, "stdout", _Terminal())
    monkeypatch.setenv("COLUMNS", "60")
    lines = emit.render(Result("audit", "audit", audit), Format.console).splitlines()
    table = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in lines if "│" in line or "┃" in line]
    assert table and max(len(line) for line in table) <= 60, table
