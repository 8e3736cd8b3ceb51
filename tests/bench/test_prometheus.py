"""The server's own figures from two real vLLM 0.32 /metrics scrapes (taken around two 32-token requests)."""

from pathlib import Path

import pytest

from sparkdoctor.bench import prometheus

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def scrapes():
    return tuple(prometheus.parse((DATA / f"vllm032_metrics_{n}.txt").read_text()) for n in ("before", "after"))


def test_parse_reads_labelled_series(scrapes):
    before, _ = scrapes
    series = before["vllm:request_success_total"]
    assert series[(("engine", "0"), ("finished_reason", "length"), ("model_name", "models/tiny"))] == 17.0


def test_window_is_the_requests_between_the_scrapes(scrapes):
    w = prometheus.window(*scrapes)
    assert w["generation_tokens"] == 64 and w["requests"] == 2
    assert w["ttft_s"]["count"] == 2
    assert w["itl_s"]["count"] == 62  # 31 gaps per 32-token request
    assert w["itl_s"]["mean"] == pytest.approx((20.093950813001356 - 17.607436220001546) / 62)
    assert w["decode_tps_per_stream"] == pytest.approx(1 / w["itl_s"]["mean"])
    lo_hi = sorted(b for b in (w["itl_s"]["median"],) if b is not None)
    assert lo_hi and 0 < lo_hi[0] < 1


def test_no_scrape_no_window(scrapes):
    assert prometheus.window(None, scrapes[1]) is None
    assert prometheus.window(scrapes[0], scrapes[0]).get("itl_s") is None
