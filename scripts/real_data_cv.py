"""Issue 27's real-data comparison: Old Faithful and the motorcycle data, 5-fold cross-validated, side by side with
the peers in one run.

1. Old Faithful's eruption durations, a 1-D density: held-out mean ln p per eruption, bftcore
   (``BFTDensity(l2=0, l6=1, lam="evidence")``, its default free boundary) against DEFT (``suftware``, alpha = 3, its
   own evidence), both on the same box (the whole data's range padded by 10 %, 200 nodes).
2. Old Faithful, p(waiting | duration): held-out mean ln p(y | x), bftcore's conditional density
   (the preset's: ``BFTDensity(l2=0, l6=1, lam="evidence")`` on the grid, free in y, and the isotropic lambda_x /
   lambda_y the gate fits to the whole data) against a straight line with Gaussian noise (least squares, noise sd by
   maximum likelihood).
3. The motorcycle data, a regression: held-out mean squared error, bftcore
   (``BFTRegressor(lam="evidence", beta="evidence", boundary="free", l2=0, l6=1)``) against scikit-learn's
   GaussianProcessRegressor (ConstantKernel * RBF + WhiteKernel, normalize_y, 3 restarts), and bftcore's
   conditional density's held-out ln p(y | x) beside the GP's predictive Gaussian (noise included).

The folds are one fixed permutation (seed 0).  DEFT and scikit-learn run in their own venv
(``scripts/bench_evidence.py``'s ``peers_python``), never in bftcore's.

    python scripts/real_data_cv.py [--folds 5] [--no-peers]
"""
from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bftcore.estimator import BFTDensity, BFTRegressor  # noqa: E402
from bftcore.foundations.config import FIT_PAD, validate_config  # noqa: E402
from bftcore.models.presets import real_data  # noqa: E402


def folds(n: int, k: int) -> list[np.ndarray]:
    return np.array_split(np.random.default_rng(0).permutation(n), k)


def box(v: np.ndarray, pad: float = FIT_PAD) -> tuple[float, float]:
    """The range of the gate's fitted grid (``grid.fit``), given by hand to every fold."""
    span = v.max() - v.min()
    return float(v.min() - pad * span), float(v.max() + pad * span)


def eruptions(k: int, peers: bool) -> dict:
    y = real_data("old_faithful")[0][:, 0]
    lo, hi = box(y)
    grid = {"y": {"min": lo, "max": hi, "n": 200, "boundary": "free"}}  # BFTDensity's own default, on this box
    bft, samples, tests = [], [], []
    for test in folds(y.size, k):
        train = np.setdiff1d(np.arange(y.size), test)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = BFTDensity(l2=0.0, l6=1.0, lam="evidence", grid=grid).fit(y[train])
        bft.append(float(np.mean(est.score_samples(y[test]))))
        samples.append(y[train].tolist())
        tests.append(y[test].tolist())
    out = {"bftcore": float(np.mean(bft))}
    if peers:
        from bench_evidence import peer
        res = peer({"task": "deft", "samples": samples, "lo": lo, "hi": hi, "n": 200, "alpha": 3, "points": tests})
        out["DEFT"] = float(np.mean([np.mean(np.log(np.maximum(p, 1e-300))) for p in res["at_points"]]))
    return out


def conditional(name: str, k: int) -> dict:
    xy = real_data(name)[0]
    whole = validate_config({"data": xy.tolist(), "grid": {"fit": True}, "prior": {"l2": 0.0, "l6": 1.0}})
    grid = {a: dict(whole["grid"][a]) for a in ("x", "y")}
    pr = whole["prior"]
    bft, line = [], []
    for test in folds(len(xy), k):
        train = np.setdiff1d(np.arange(len(xy)), test)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = BFTDensity(lam="evidence", grid=grid, lambda_x=pr["lambda_x"], lambda_y=pr["lambda_y"], l2=0.0,
                             l6=1.0).fit(xy[train])
        bft.append(float(np.mean(est.score_samples(xy[test]))))
        A = np.column_stack([np.ones(train.size), xy[train, 0]])
        coef, *_ = np.linalg.lstsq(A, xy[train, 1], rcond=None)
        sd = np.sqrt(np.mean((xy[train, 1] - A @ coef) ** 2))
        r = xy[test, 1] - (coef[0] + coef[1] * xy[test, 0])
        line.append(float(np.mean(-0.5 * (r / sd) ** 2 - np.log(sd * np.sqrt(2 * np.pi)))))
    return {"bftcore": float(np.mean(bft)), "line": float(np.mean(line))}


def motorcycle(k: int, peers: bool) -> dict:
    xy = real_data("motorcycle")[0]
    x, y = xy[:, 0], xy[:, 1]
    mse, sets, tests = [], [], []
    for test in folds(len(xy), k):
        train = np.setdiff1d(np.arange(len(xy)), test)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reg = BFTRegressor(lam="evidence", beta="evidence", boundary="free", l2=0.0, l6=1.0).fit(x[train],
                                                                                                  y[train])
        mse.append(float(np.mean((reg.predict(x[test]) - y[test]) ** 2)))
        sets.append({"x": x[train].tolist(), "y": y[train].tolist(), "x_test": x[test].tolist()})
        tests.append(test)
    out = {"bftcore": float(np.mean(mse))}
    if peers:
        from bench_evidence import peer
        res = peer({"task": "rbf", "sets": sets})
        out["GP"] = float(np.mean([np.mean((np.asarray(p) - y[t]) ** 2) for p, t in zip(res["pred"], tests)]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--no-peers", action="store_true")
    args = ap.parse_args(argv)
    peers = not args.no_peers
    rows = []
    e = eruptions(args.folds, peers)
    rows.append(("Old Faithful durations, 1-D", "held-out ln p per point", e["bftcore"], "DEFT alpha=3",
                 e.get("DEFT", math.nan), "higher"))
    c = conditional("old_faithful", args.folds)
    rows.append(("Old Faithful, p(waiting | duration)", "held-out ln p(y|x)", c["bftcore"], "line + Gaussian noise",
                 c["line"], "higher"))
    c = conditional("motorcycle", args.folds)
    rows.append(("motorcycle, p(accel | time)", "held-out ln p(y|x)", c["bftcore"], "line + Gaussian noise",
                 c["line"], "higher"))
    m = motorcycle(args.folds, peers)
    rows.append(("motorcycle, regression", "held-out MSE (g^2)", m["bftcore"], "scikit-learn GP", m.get("GP", math.nan),
                 "lower"))
    print(f"{args.folds}-fold cross-validation (one fixed permutation, seed 0)\n")
    print(f"{'data':<36} {'measure':<24} {'bftcore':>10}  {'peer':<22} {'peer value':>10}  better")
    for data, measure, ours, who, theirs, better in rows:
        print(f"{data:<36} {measure:<24} {ours:>10.4f}  {who:<22} {theirs:>10.4f}  {better}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
