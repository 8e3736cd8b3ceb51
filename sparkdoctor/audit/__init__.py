"""Model audit: from a checkpoint's safetensors headers and configs (never its weights), the bytes each
decoded token reads per module group, what stays unquantized, the tok/s ceiling at a memory bandwidth, and
whether weights + KV cache fit. See roofline.py for the pipeline and `ceiling_for` (for bench reports)."""
