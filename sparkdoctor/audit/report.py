"""The audit as JSON (versioned: "audit_version"): the only thing the command prints on stdout with --format json;
numbers are plain bytes and tok/s so a script can do its own arithmetic. sparkdoctor/views/audit.py draws it for a
person."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparkdoctor.audit.roofline import Audit

AUDIT_VERSION = 1  # bump when a key changes meaning or goes away; new keys may appear without a bump


def audit_to_dict(audit: Audit) -> dict[str, object]:
    o, s = audit.options, audit.shape
    return {
        "audit_version": AUDIT_VERSION,
        "model": str(audit.folder),
        "architecture": {"model_type": s.model_type, "layers": s.layers, "hidden_size": s.hidden, "kv_heads": s.kv_heads,
                         "head_dim": s.head_dim, "experts": s.experts, "experts_per_token": s.experts_per_token,
                         "layer_kinds": {k: s.count(k) for k in sorted(set(s.layer_kinds))}, "mtp_layers": s.mtp_layers,
                         "tied_embeddings": s.tied_embeddings},
        "quantization": [{"method": q.method, "scheme": q.scheme, "source": q.source, "ignore": q.ignore} for q in audit.quant],
        "groups": [g.to_dict() for g in audit.groups],
        "per_token": {"weights_bytes": round(audit.weights_per_token), "kv_cache_bytes": round(audit.kv_per_token),
                      "recurrent_state_bytes": round(audit.state_per_token), "total_bytes": round(audit.bytes_per_token),
                      "active_params": round(audit.active_params),
                      "context": o.context, "kv_cache_dtype": audit.kv_dtype,
                      "read_by_format": {k: round(v) for k, v in sorted(audit.read_by_format.items(), key=lambda kv: -kv[1]) if v}},
        "unquantized_share": round(audit.unquantized_share, 4),
        "roofline": {"bandwidth_gbs": audit.bandwidth, "bandwidth_source": audit.bandwidth_source, "gpu": audit.gpu,
                     "ceiling_tok_s": round(audit.ceiling, 2), "batch": o.batch,
                     "step_bytes": round(audit.step_bytes),
                     "batch_ceiling_tok_s": round(o.batch * audit.bandwidth * 1e9 / audit.step_bytes, 2),
                     "moe_note": "routed experts count k/E of their bytes: the expected value for uniform routing" if s.experts else None},
        "fit": audit.fit.to_dict(),
        "settings_sources": dict(o.sources),
        "settings_notes": list(o.notes),
        "disagreements": [d.to_dict() for d in audit.disagreements],
        "headers": {"bytes_read": audit.bytes_read, "checkpoint_bytes": audit.bytes_on_disk},
    }
