"""What kind of server is behind a URL, and which model it serves.

vLLM answers GET /version with {"version": "..."} and exposes `vllm:*` Prometheus series on
/metrics; anything else is "generic" and gets only standard OpenAI fields (vLLM-only fields such as
ignore_eos make other servers refuse the request).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from sparkdoctor.bench.http import HttpError, get
from sparkdoctor.inputs import NotJSON, NumberTooLong, json_answer


@dataclass
class ServerInfo:
    kind: str  # vllm | generic
    version: str | None = None
    models: list[str] = field(default_factory=list)
    metrics: bool = False  # Prometheus /metrics with vllm:* series
    detected_by: str = ""

    @property
    def is_vllm(self) -> bool:
        return self.kind == "vllm"

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "version": self.version, "models": self.models, "metrics": self.metrics,
                "detected_by": self.detected_by}


async def _json(url: str, path: str, timeout: float) -> object:
    try:
        status, body = await get(url, path, timeout)
        return json_answer(body) if status == 200 else None
    except (HttpError, NotJSON):
        return None


async def detect(url: str, timeout: float = 5.0) -> ServerInfo:
    """Probe the server. Raises HttpError only when it cannot be reached at all."""
    status, body = await get(url, "/v1/models", timeout)  # reachability: this one must answer
    models: list[str] = []
    if status == 200:
        try:
            models = [m["id"] for m in json_answer(body).get("data", []) if isinstance(m, dict) and isinstance(m.get("id"), str)]  # type: ignore[attr-defined]
        except (ValueError, AttributeError, TypeError) as exc:
            if isinstance(exc, NumberTooLong):  # no list of models to pick from: said, not "serves 0 models"
                raise HttpError(f"GET /v1/models: its answer {exc}") from None
            models = []
    info = ServerInfo(kind="generic", models=models, detected_by="no /version, no vllm:* metrics")
    version = await _json(url, "/version", timeout)
    if isinstance(version, dict) and isinstance(version.get("version"), str):
        info.kind, info.version, info.detected_by = "vllm", version["version"], "/version"
    with contextlib.suppress(HttpError):
        m_status, m_body = await get(url, "/metrics", timeout)
        if m_status == 200 and b"vllm:" in m_body:
            info.metrics = True
            if info.kind != "vllm":
                info.kind, info.detected_by = "vllm", "/metrics (vllm:* series)"
    return info
