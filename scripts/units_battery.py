"""Issue 27's batteries in any units, side by side with the peers in one run.

Densities: the README's line ``BFTDensity(l2=0, l6=1, lam="evidence").fit(y)`` against DEFT (``suftware``,
alpha = 3, its own evidence), on the same samples and the same box.
Regression: the README's line ``BFTRegressor(lam="evidence", beta="evidence", boundary="free", l2=0, l6=1)``
against scikit-learn's GaussianProcessRegressor (ConstantKernel * RBF + WhiteKernel, normalize_y, 3 restarts), on
the same data: test MSE against the true function (in units of y^2, divided by the unit squared), whether a
prediction 5 % outside the data's x range answers, and the time of a fit to 20 000 points.

7 families x n = 30, 300, 3000, each data set in one of the units 1e-3, 1, 1e2, 1e5 (cycled), so every family meets
several.  For each: whether bftcore refused it, KL(truth || estimate) of both (on the 200 nodes of bftcore's grid,
both renormalised there; KL does not depend on the units), the evidence edge bftcore reports, and the wall time of
the whole estimate (median of ``--repeats``).  DEFT is installed into a venv of its own by
``scripts/bench_evidence.py``'s ``peers_python`` (never into bftcore's).

    python scripts/units_battery.py [--repeats 3] [--no-peers]

Densities: 7 families x 3 sizes.  Regression: 3 functions x n = 20, 200, 1000, (x, y) units cycled over (1e-3, 1),
(1, 1e3), (1e4, 1e-3), (1, 1).
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bftcore.estimator import BFTDensity  # noqa: E402

FAMILIES = {
    "normal": stats.norm(0.0, 1.0),
    "lognormal": stats.lognorm(0.5, scale=4.0),
    "beta(2,5)": stats.beta(2.0, 5.0),
    "gamma(2)": stats.gamma(2.0),
    "student t(4)": stats.t(4.0),
    "laplace": stats.laplace(0.0, 1.0),
    "bimodal": None,  # 0.5 N(-2, 0.5) + 0.5 N(2, 0.5)
}
UNITS = (1e-3, 1.0, 1e2, 1e5)
SIZES = (30, 300, 3000)


def _pdf(name: str, y: np.ndarray) -> np.ndarray:
    if name == "bimodal":
        return 0.5 * stats.norm(-2.0, 0.5).pdf(y) + 0.5 * stats.norm(2.0, 0.5).pdf(y)
    return FAMILIES[name].pdf(y)


def _sample(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if name == "bimodal":
        return np.where(rng.random(n) < 0.5, rng.normal(-2.0, 0.5, n), rng.normal(2.0, 0.5, n))
    return FAMILIES[name].rvs(size=n, random_state=rng)


def kl(p_true: np.ndarray, p_est: np.ndarray, nodes: np.ndarray) -> float:
    """KL(truth || estimate) on the nodes, both renormalised there (trapezoid)."""
    t = p_true / np.trapezoid(p_true, nodes)
    e = np.maximum(p_est, 1e-300) / np.trapezoid(np.maximum(p_est, 1e-300), nodes)
    integrand = np.where(t > 0, t * np.log(np.maximum(t, 1e-300) / e), 0.0)
    return float(np.trapezoid(integrand, nodes))


def _timed(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-peers", action="store_true", help="bftcore alone (no DEFT)")
    args = ap.parse_args(argv)
    rows, tasks = [], []
    k = 0
    for name in FAMILIES:
        for n in SIZES:
            unit = UNITS[k % len(UNITS)]
            k += 1
            rng = np.random.default_rng(1000 + k)
            y = unit * _sample(name, n, rng)
            row = {"family": name, "n": n, "unit": unit}
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    est, secs = _timed(lambda: BFTDensity(l2=0.0, l6=1.0, lam="evidence").fit(y), args.repeats)
                nodes = est.grid_.y.nodes
                truth = _pdf(name, nodes / unit) / unit
                row.update(refused="", kl=kl(truth, est.density_[0], nodes), seconds=secs,
                           edge=est.evidence_edge_ or "", warned=bool(caught))
                tasks.append((row, y, nodes, truth))
            except Exception as e:  # noqa: BLE001 - a refusal is what the battery counts
                row.update(refused=str(e)[:80], kl=math.nan, seconds=math.nan, edge="", warned=False)
            rows.append(row)
    if not args.no_peers:
        from bench_evidence import peer
        for row, y, nodes, truth in tasks:
            out = peer({"task": "deft", "samples": [y.tolist()], "lo": float(nodes[0]), "hi": float(nodes[-1]),
                        "n": len(nodes), "alpha": 3, "repeats": args.repeats})
            row["deft_kl"] = kl(truth, np.asarray(out["density"][0], float), nodes)
            row["deft_seconds"] = out["seconds"][0]
    print(f"{'family':<13} {'n':>5} {'unit':>6}  {'bft KL':>8} {'DEFT KL':>8}  {'bft s':>6} {'DEFT s':>6}  "
          f"edge   refused")
    for r in rows:
        print(f"{r['family']:<13} {r['n']:>5} {r['unit']:>6g}  {r['kl']:>8.4f} {r.get('deft_kl', math.nan):>8.4f}  "
              f"{r['seconds']:>6.3f} {r.get('deft_seconds', math.nan):>6.3f}  {r['edge']:<6} {r['refused']}")
    refused = sum(1 for r in rows if r["refused"])
    print(f"\nrefused: {refused} of {len(rows)}; evidence maximum at an edge: {sum(1 for r in rows if r['edge'])}")
    both = [r for r in rows if not r["refused"] and "deft_kl" in r]
    if both:
        ratio = math.exp(statistics.mean(math.log(r["kl"] / r["deft_kl"]) for r in both))
        gm = lambda key: math.exp(statistics.mean(math.log(r[key]) for r in both))  # noqa: E731
        print(f"geometric mean KL: bftcore {gm('kl'):.4f}, DEFT {gm('deft_kl'):.4f}; bftcore / DEFT = {ratio:.3f} "
              f"(target <= 1)")
        print(f"total time: bftcore {sum(r['seconds'] for r in both):.2f} s, DEFT "
              f"{sum(r['deft_seconds'] for r in both):.2f} s; bftcore faster on "
              f"{sum(1 for r in both if r['seconds'] <= r['deft_seconds'])} of {len(both)}")
    regression_battery(args)
    return 0


FUNCTIONS = {"sin(6u)": lambda u: np.sin(6 * u), "bump": lambda u: np.exp(-((u - 0.4) / 0.1) ** 2),
             "u^2 - u": lambda u: u ** 2 - u}
REG_UNITS = ((1e-3, 1.0), (1.0, 1e3), (1e4, 1e-3), (1.0, 1.0))


def regression_battery(args) -> None:
    from bftcore.estimator import BFTRegressor

    rows, sets = [], []
    k = 0
    for name, f in FUNCTIONS.items():
        for n in (20, 200, 1000):
            ux, uy = REG_UNITS[k % len(REG_UNITS)]
            k += 1
            rng = np.random.default_rng(2000 + k)
            u = rng.uniform(0.0, 1.0, n)
            x, y = ux * u, uy * (f(u) + rng.normal(0.0, 0.2, n))
            ut = np.linspace(u.min(), u.max(), 400)
            row = {"function": name, "n": n, "ux": ux, "uy": uy}
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    reg, secs = _timed(lambda: BFTRegressor(lam="evidence", beta="evidence", boundary="free",
                                                            l2=0.0, l6=1.0).fit(x, y), args.repeats)
                row.update(refused="", mse=float(np.mean((reg.predict(ux * ut) / uy - f(ut)) ** 2)), seconds=secs)
                span = x.max() - x.min()
                try:
                    reg.predict([x.min() - 0.05 * span, x.max() + 0.05 * span])
                    row["outside"] = "answers"
                except ValueError as e:
                    row["outside"] = f"refused: {str(e)[:40]}"
            except Exception as e:  # noqa: BLE001 - a refusal is what the battery counts
                row.update(refused=str(e)[:80], mse=math.nan, seconds=math.nan, outside="")
            rows.append(row)
            sets.append({"x": x.tolist(), "y": y.tolist(), "x_test": (ux * ut).tolist()})
            row["ut"], row["f"] = ut, f
    if not args.no_peers:
        from bench_evidence import peer
        out = peer({"task": "rbf", "sets": sets})
        for row, pred in zip(rows, out["pred"]):
            row["gp_mse"] = float(np.mean((np.asarray(pred) / row["uy"] - row["f"](row["ut"])) ** 2))
    print(f"\n{'function':<9} {'n':>5} {'x unit':>7} {'y unit':>7}  {'bft MSE':>8} {'GP MSE':>8}  {'bft s':>6}  "
          f"5 % outside   refused")
    for r in rows:
        print(f"{r['function']:<9} {r['n']:>5} {r['ux']:>7g} {r['uy']:>7g}  {r['mse']:>8.5f} "
              f"{r.get('gp_mse', math.nan):>8.5f}  {r['seconds']:>6.3f}  {r['outside']:<12}  {r['refused']}")
    ok = [r for r in rows if not r["refused"]]
    print(f"\nrefused: {len(rows) - len(ok)} of {len(rows)}; predictions 5 % outside the data answer in "
          f"{sum(1 for r in ok if r['outside'] == 'answers')} of {len(ok)}")
    both = [r for r in ok if "gp_mse" in r]
    if both:
        gm = lambda key: math.exp(statistics.mean(math.log(r[key]) for r in both))  # noqa: E731
        print(f"geometric mean test MSE: bftcore {gm('mse'):.5f}, scikit-learn GP {gm('gp_mse'):.5f}; "
              f"ratio {gm('mse') / gm('gp_mse'):.3f} (target <= 1)")
    rng = np.random.default_rng(9)
    u = rng.uniform(0.0, 1.0, 20000)
    x, y = 1e3 * u, np.sin(6 * u) + rng.normal(0.0, 0.2, u.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, secs = _timed(lambda: BFTRegressor(lam="evidence", beta="evidence", boundary="free", l2=0.0,
                                              l6=1.0).fit(x, y), args.repeats)
    print(f"20 000 points, lambda and beta by evidence: {secs:.2f} s (median of {args.repeats}; target < 10 s)")


if __name__ == "__main__":
    raise SystemExit(main())
