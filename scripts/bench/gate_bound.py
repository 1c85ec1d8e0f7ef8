"""How often could any 3-night mean catch a +5 % step within three nights in gate_noise.py's harness?

docs/nightly.md ("Is +5 % within three nights reachable?") compares the gate with the test that knows the
nights' sigma exactly: the mean of the last three nights' ln figures against the median of the reference
nights, with the whole false-alarm budget on it. Steps start on nights 3, 6, ..., 30 after a baseline, so the
reference holds n = min(night, 20) nights (the baseline and the nights before the step). Three columns:

- closed form: the difference's sigma sqrt(1/3 + (pi/2)/n), the large-n variance of a median, for every n;
- exact median: the median of n normal nights drawn (for n = 3 its variance is 1.35 sigma^2 / n, not 1.57;
  for an even n it is the mean of the middle two);
- three tries: the same test run each night, as the gate's window is: red when the window ending on the
  step's first, second or third night is beyond the limit (each night's limit keeps the budget per night).
- mean reference, sigma known / estimated: the best a test of this kind can do with a mean reference (f = 1),
  three tries; with sigma known exactly, and with sigma estimated as any gate must estimate it: the reference
  nights' standard deviation from 5 nights on (the gate's MIN_NIGHTS), the prior (the true sigma) before;
  each limit from the statistic's own null distribution, so every column spends the same false alarms.

    python scripts/bench/gate_bound.py            # normal drift, sigma 2 %, +5 %

Seeded and deterministic.
"""

import argparse
import math
import sys
from statistics import NormalDist

import numpy as np


def bound(alpha, sigma, step, draws, seed):
    """(closed form, exact median, three tries, mean known, mean estimated): the share caught within three nights,
    averaged over the steps."""
    rng, rng2 = np.random.default_rng(seed), np.random.default_rng([seed, 1])  # the first three columns' draws as before
    z = NormalDist().inv_cdf(1 - alpha)
    closed, exact, tries, known, estimated = [], [], [], [], []
    for n in [min(t, 20) for t in range(3, 31, 3)]:
        sd = sigma * math.sqrt(1 / 3 + math.pi / 2 / n)
        closed.append(NormalDist().cdf(step / sd - z))
        null = rng.normal(0, sigma, (draws, 3)).mean(axis=1) - np.median(rng.normal(0, sigma, (draws, n)), axis=1)
        limit = np.quantile(null, 1 - alpha)
        ref = np.median(rng.normal(0, sigma, (draws, n)), axis=1)
        nights = np.concatenate([rng.normal(0, sigma, (draws, 2)), rng.normal(step, sigma, (draws, 3))], axis=1)
        windows = [nights[:, j:j + 3].mean(axis=1) - ref > limit for j in range(3)]
        exact.append(windows[2].mean())
        tries.append((windows[0] | windows[1] | windows[2]).mean())
        known.append(_mean_reference(rng2, n, alpha, sigma, step, draws, estimate=False))
        estimated.append(_mean_reference(rng2, n, alpha, sigma, step, draws, estimate=True))
    return (float(np.mean(closed)), float(np.mean(exact)), float(np.mean(tries)), float(np.mean(known)),
            float(np.mean(estimated)))


def _mean_reference(rng, n, alpha, sigma, step, draws, estimate, min_nights=5):
    """Three tries of the mean of three nights against the mean of ``n`` reference nights, in units of the
    difference's sigma: known, or from the reference nights' standard deviation once there are ``min_nights``."""
    def statistic(ref, nights):
        scale = ref.std(axis=1, ddof=1) if estimate and n >= min_nights else np.full(len(ref), sigma)
        return (nights.mean(axis=1) - ref.mean(axis=1)) / (scale * math.sqrt(1 / 3 + 1 / n))

    null = statistic(rng.normal(0, sigma, (draws, n)), rng.normal(0, sigma, (draws, 3)))
    limit = np.quantile(null, 1 - alpha)
    ref = rng.normal(0, sigma, (draws, n))
    nights = np.concatenate([rng.normal(0, sigma, (draws, 2)), rng.normal(step, sigma, (draws, 3))], axis=1)
    caught = np.zeros(draws, dtype=bool)
    for j in range(3):
        caught |= statistic(ref, nights[:, j:j + 3]) > limit
    return caught.mean()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sigma", type=float, default=0.02, help="the nights' sigma of ln figure (default 2 %%)")
    p.add_argument("--step", type=float, default=0.05)
    p.add_argument("--draws", type=int, default=200000)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args(argv)
    print("| false alarms per night | closed form (pi/2 for every n) | exact median | three tries "
          "| mean reference, sigma known | mean reference, sigma estimated |")
    print("|---|---|---|---|---|---|")
    for alpha in (0.006, 5 / 600, 0.01):
        row = bound(alpha, args.sigma, math.log1p(args.step), args.draws, args.seed)
        print("| {:.2f} % | ".format(100 * alpha) + " | ".join("{:.1f} %".format(100 * v) for v in row) + " |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
