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


@pytest.mark.parametrize("after", [
    "vllm:generation_tokens_total +Inf\n",
    "vllm:generation_tokens_total NaN\n",
    "vllm:inter_token_latency_seconds_count inf\nvllm:inter_token_latency_seconds_sum 1\n",
    "vllm:inter_token_latency_seconds_count NaN\nvllm:inter_token_latency_seconds_sum 1\n",
    "vllm:inter_token_latency_seconds_count 10\nvllm:inter_token_latency_seconds_sum -Inf\n",
])
def test_a_counter_that_is_not_a_finite_number_is_not_read(after):
    """`+Inf` or `NaN` as a counter's value (both are valid exposition text) ended `bench` with an internal error after
    its measurement (OverflowError / ValueError turning the delta into an int): such a series is not read."""
    before = prometheus.parse("vllm:generation_tokens_total 1\nvllm:inter_token_latency_seconds_count 1\n"
                              "vllm:inter_token_latency_seconds_sum 0.5\n")
    got = prometheus.window(before, prometheus.parse(after)) or {}
    assert "generation_tokens" not in got and "itl_s" not in got and "decode_tps_per_stream" not in got, got


def test_a_counter_that_went_down_gives_no_delta():
    """A counter below its value before (the server restarted between the scrapes) gave a negative token count and a
    negative mean inter-token latency: what it says of the window is not known, so it is not read."""
    before = prometheus.parse("vllm:generation_tokens_total 500\nvllm:inter_token_latency_seconds_count 100\n"
                              "vllm:inter_token_latency_seconds_sum 5\n")
    after = prometheus.parse("vllm:generation_tokens_total 20\nvllm:inter_token_latency_seconds_count 120\n"
                             "vllm:inter_token_latency_seconds_sum 1\n")
    assert prometheus.window(before, after) is None
