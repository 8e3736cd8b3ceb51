"""What a run is keyed to beyond the serving stack: the packages that decide speed (by version) and the
identity of the checkpoint served (config + safetensors headers, never the weights)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from sparkdoctor.bench.model_identity import identity
from sparkdoctor.bench.run import Toolchain, with_model
from sparkdoctor.conclusions.toolchain import material, what_changed
from sparkdoctor.facts import Facts
from tests.test_facts import sample


def _checkpoint(folder: Path, dtype: str = "BF16", weights: bytes = b"\0" * 64) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 64}))
    header = json.dumps({"w": {"dtype": dtype, "shape": [8, 4], "data_offsets": [0, len(weights)]}}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + weights)
    return folder


def test_the_identity_follows_layout_and_quantization_not_the_weights_bytes(tmp_path):
    a = identity(_checkpoint(tmp_path / "a"))
    assert a and a["shards"] == 1 and a["config_files"] == ["config.json"]
    assert identity(_checkpoint(tmp_path / "b", weights=b"\1" * 64))["sha256"] == a["sha256"]  # weights not read
    assert identity(_checkpoint(tmp_path / "c", dtype="F8_E4M3"))["sha256"] != a["sha256"]  # re-quantized
    requant = _checkpoint(tmp_path / "d")
    (requant / "hf_quant_config.json").write_text('{"quantization": {"quant_algo": "NVFP4"}}')
    assert identity(requant)["sha256"] != a["sha256"]
    assert identity(tmp_path / "nothing") is None


def test_the_same_path_re_quantized_is_another_key_and_says_what_changed(tmp_path):
    folder = _checkpoint(tmp_path / "m")
    base = Toolchain(sample().to_dict(), sample().fingerprint(), {})
    before = with_model(base, str(folder))
    assert before.fingerprint != base.fingerprint
    _checkpoint(folder, dtype="F8_E4M3")
    after = with_model(base, str(folder))
    assert after.fingerprint != before.fingerprint
    rows = what_changed(material(before.facts), material(after.facts))
    assert [r["what"] for r in rows] == ["model"] and "model checkpoint changed" in rows[0]["text"]


def test_speed_packages_count_by_version_and_a_venv_without_them_keeps_its_fingerprint():
    plain = sample()
    assert "speed_packages" not in plain.fingerprint_material()
    f = sample()
    f.packages["transformers"] = {"name": "transformers", "version": "4.57.1", "location": "/x"}
    f.packages["nvidia-nccl-cu12"] = {"name": "nvidia-nccl-cu12", "version": "2.27.3", "location": "/x"}
    f.packages["compressed-tensors"] = {"name": "compressed-tensors", "version": "0.12.2", "location": "/x"}
    keyed = f.fingerprint()
    assert keyed != plain.fingerprint()
    g = Facts.from_dict(f.to_dict(), source="t")
    g.packages["nvidia-nccl-cu12"]["version"] = "2.28.9"
    assert g.fingerprint() != keyed
    rows = what_changed(material(f), material(g))
    assert [r["text"] for r in rows] == ["nvidia-nccl-cu12 2.27.3 -> 2.28.9"]
