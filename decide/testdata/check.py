"""A second implementation of decide's statistics, in Python's standard
library only, for decide's tests: they run it on the same inputs and
compare. Written from the formulas in the papers and docs/compare.md, not
translated from the Go.

    python3 check.py tcdf|anova|seq|plan < input.json > output.json
"""
import json
import math
import statistics
import sys


def t_cdf(t, df):
    """P(T <= t) by Simpson's rule on Student's density from 0 to t."""
    logc = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def dens(x):
        return math.exp(logc - (df + 1) / 2 * math.log1p(x * x / df))

    n = 20000
    h = t / n
    s = dens(0) + dens(t)
    for i in range(1, n):
        s += (4 if i % 2 else 2) * dens(i * h)
    return 0.5 + s * h / 3


def t_quantile(p, df):
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def cmd_tcdf(inp):
    return {"cdf": [t_cdf(t, df) for t, df in inp["points"]],
            "quantile": [t_quantile(p, df) for p, df in inp["quantiles"]],
            "normal_quantile": [statistics.NormalDist().inv_cdf(p) for p in inp["normal"]]}


def diffs(task):
    return [1] * task["up"] + [-1] * task["down"] + [0] * task["same"]


def cmd_anova(inp):
    """One-way random-effects ANOVA by the method of moments."""
    groups = [diffs(t) for t in inp["tasks"] if diffs(t)]
    means = [statistics.fmean(g) for g in groups]
    ss = sum(sum((x - m) ** 2 for x in g) for g, m in zip(groups, means))
    df = sum(len(g) - 1 for g in groups)
    if df == 0:
        return {"within": statistics.variance([x for g in groups for x in g]), "between": 0, "split": False}
    within = ss / df
    between = max(0.0, statistics.variance(means) - within * statistics.fmean([1 / len(g) for g in groups]))
    return {"within": within, "between": between, "split": True}


def cmd_seq(inp):
    """The betting confidence sequence, round by round (method betting-cs/2)."""
    alpha, delta = inp["alpha"], inp["delta"]
    futility = inp.get("futility", 0)
    prior = inp.get("prior_variance") or 1.0
    if prior > 1:
        prior = 1.0
    thr = math.log(2 / alpha)
    seen = []  # (up, down, same, bet_up, bet_down)
    n = discordant = 0
    low, high, verdict, out = -1.0, 1.0, "undecided", []
    rejected_up, rejected_down = {}, {}

    def log_up(m):
        return sum(u * math.log(1 + bu * (1 - m)) + s * math.log(1 - bu * m) +
                   (d * math.log(1 - bu * (1 + m)) if d else 0) for u, d, s, bu, bd in seen)

    def log_down(m):
        return sum((u * math.log(1 - bd * (1 - m)) if u else 0) + s * math.log(1 + bd * m) +
                   d * math.log(1 + bd * (1 + m)) for u, d, s, bu, bd in seen)

    def root(f, rising):
        # the m in (-1, 1) where f crosses thr; f falls (or rises) with m
        lo, hi = -1.0, 1.0
        for _ in range(80):
            mid = (lo + hi) / 2
            if (f(mid) >= thr) != rising:
                lo = mid
            else:
                hi = mid
        return lo if not rising else hi

    for r in inp["rounds"]:
        # Kelly against the design alternative: discordance q (the pairs'
        # so far, with one pseudo-pair of prior + delta^2), mean delta.
        q = (min(1.0, prior + delta * delta) + discordant) / (1 + n)
        bu = bd = min(0.5, delta / q)
        seen.append((r["up"], r["down"], r["same"], bu, bd))
        n += r["up"] + r["down"] + r["same"]
        discordant += r["up"] + r["down"]
        if log_up(-1 + 1e-15) >= thr:
            low = max(low, root(log_up, False))
        if log_down(1 - 1e-15) >= thr:
            high = min(high, root(log_down, True))
        # A point once rejected stays rejected: the sequence is the
        # intersection over rounds.
        for m in (-delta, 0, delta):
            rejected_up[m] = rejected_up.get(m, False) or log_up(m) >= thr
            rejected_down[m] = rejected_down.get(m, False) or log_down(m) >= thr
        if verdict == "undecided":
            if rejected_up[0]:
                verdict = "better"
            elif rejected_down[0]:
                verdict = "worse"
            elif rejected_up[-delta] and rejected_down[delta]:
                verdict = "equivalent"
            elif futility and log_down(delta) >= math.log(1 / futility):
                verdict = "not_better"
        out.append({"bet_up": bu, "bet_down": bd, "low": low, "high": high, "verdict": verdict})
    return {"rounds": out}


def cmd_plan(inp):
    """Power of a design, as docs/compare.md states it."""
    out = []
    nd = statistics.NormalDist()
    for c in inp["cases"]:
        g, k, n = c["tasks"], c["attempts"], c["n"]
        b, w = c["between"], c["within"]
        f = g / n if c["scope"] == "tasks" else 0
        se = math.sqrt((1 - f) * b / g + w / (g * k))
        shift = c["delta"] / se
        if c["scope"] == "population":
            crit = t_quantile(1 - c["alpha"] / 2, g - 1)
            power = t_cdf(shift - crit, g - 1) + t_cdf(-shift - crit, g - 1)
        else:
            crit = nd.inv_cdf(1 - c["alpha"] / 2)
            power = nd.cdf(shift - crit) + nd.cdf(-shift - crit)
        out.append({"se": se, "power": power})
    return {"cases": out}


def main():
    cmd = sys.argv[1]
    inp = json.load(sys.stdin)
    json.dump({"tcdf": cmd_tcdf, "anova": cmd_anova, "seq": cmd_seq, "plan": cmd_plan}[cmd](inp), sys.stdout)


if __name__ == "__main__":
    main()
