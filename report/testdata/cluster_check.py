"""A second implementation of report's task-clustered intervals, in
Python's standard library only: report's tests run it on the same tasks
and compare. Input on stdin: {"clusters": [[sum, n], ...], "lo": .., "hi": ..}.

The CR1 standard error is computed as the sandwich of an intercept-only
regression, (X'X)^-1 (sum_g X_g' e_g e_g' X_g) (X'X)^-1 times
G/(G-1) * (N-1)/(N-K), with K = 1; the t quantile by integrating Student's
density; the task bootstrap with Python's own generator (so it agrees
with report's only to Monte Carlo error).
"""
import json
import math
import random
import sys


def t_cdf(t, df):
    logc = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    n = 20000
    h = t / n
    f = lambda x: math.exp(logc - (df + 1) / 2 * math.log1p(x * x / df))
    s = f(0) + f(t) + sum((4 if i % 2 else 2) * f(i * h) for i in range(1, n))
    return 0.5 + s * h / 3


def t_quantile(p, df):
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, 2 * hi
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def main():
    inp = json.load(sys.stdin)
    clusters = inp["clusters"]
    # Expand each task to its trials' values: sum of n values in {0, 1} or
    # {-1, 0, 1} with that sum; the sandwich needs only the sums.
    G = len(clusters)
    N = sum(n for _, n in clusters)
    xtx = float(N)  # X is a column of ones
    beta = sum(s for s, _ in clusters) / xtx
    meat = sum((s - beta * n) ** 2 for s, n in clusters)  # (X_g' e_g)^2
    K = 1
    v = (1 / xtx) * meat * (1 / xtx) * G / (G - 1) * (N - 1) / (N - K)
    se = math.sqrt(v)
    t = t_quantile(0.975, G - 1)
    cr1 = [max(inp["lo"], beta - t * se), min(inp["hi"], beta + t * se)]
    rng = random.Random(12345)
    means = []
    for _ in range(40000):
        pick = [clusters[rng.randrange(G)] for _ in range(G)]
        means.append(sum(s for s, _ in pick) / sum(n for _, n in pick))
    means.sort()

    def q(p):  # type 7
        pos = p * (len(means) - 1)
        lo = math.floor(pos)
        hi = math.ceil(pos)
        return means[lo] + (pos - lo) * (means[hi] - means[lo])

    json.dump({"mean": beta, "se": se, "t": t, "cr1": cr1, "bootstrap": [q(0.025), q(0.975)]}, sys.stdout)


main()
