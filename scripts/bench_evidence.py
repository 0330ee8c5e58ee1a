"""Evidence benchmark (issue 14): bftcore's evidence against DEFT (``suftware``) and scikit-learn, side by side in one
run, and the speed of the 64×64 evidence path and of the Laplace samples.  Prints tables of medians.

    python scripts/bench_evidence.py [--repeats 3] [--samples 5] [--quick]

The peers are installed by this script in a venv of their own (``$BFT_PEERS_VENV``, default
``<tmp>/bftcore-peers``: ``pip install suftware scikit-learn``), never in bftcore's; their side runs in
``scripts/evidence_peers.py`` with that venv's Python and answers in JSON.

1. 1-D bimodal density 0.5 N(-1.5, 0.5²) + 0.5 N(1, 0.8²) on 200 nodes of [-4, 4], n = 100 and 500, ``--samples``
   data sets each: KL(truth || estimate) on the nodes for bftcore at the λ of highest (Laplace) evidence, l6 on a
   free boundary (DEFT's own operator for α = 3: quadratics unpenalised), l6 Neumann and l2, and for DEFT α = 3
   with its ℓ* by its own evidence; the time of the whole evidence path against DEFT's whole estimate.
2. Regression, y = sin x + 0.3 x + N(0, 0.3²) at 50 points of [0, 10], 200 test points: bftcore's exact log
   marginal likelihood against scikit-learn's with the identical kernel ``a C0 + b I`` (C0 = (hx K_X)^{-1}, the
   prior covariance of λ = β = 1 on bftcore's grid; a = 1/(βλ), b = 1/β), at fixed points and at both
   optimisers' maxima; the test MSE of λ and β chosen by evidence against scikit-learn's usual optimised GP
   (``ConstantKernel * RBF + WhiteKernel``); then that test MSE over ``--datasets`` draws of the same case, draw by
   draw, with the estimator ``BFTRegressor(lam="evidence", beta="evidence", boundary="free", l6=1)``.
3. 64×64 density (200 points, l2 = 1): the evidence path over 30 λ values, a fit that chooses λ by the evidence
   (the path and its maximum refined by the slope's root), and Laplace samples: the time of one cold call drawing
   10 (factorisation included) and the samples per second of one call drawing 20.
4. The slope's trace tr(B^{-1} dB) at 32×32 and 64×64 (l2, l6): one LU solve per node (the route before issue 31)
   against the complex step, with their relative difference.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from bftcore import api
from bftcore.foundations.limits import blas_threads
from bftcore.foundations.operators import axis_operator
from bftcore.models import evidence, regression
from bftcore.models.density import build_density
from bftcore.models.presets import random_problem

HERE = Path(__file__).resolve().parent
PEERS_VENV = Path(os.environ.get("BFT_PEERS_VENV", Path(tempfile.gettempdir()) / "bftcore-peers"))
LO, HI, NODES = -4.0, 4.0, 200


def peers_python() -> str:
    """The peers' venv (made and filled on first use)."""
    py = PEERS_VENV / "bin" / "python"
    ok = py.exists() and subprocess.run([str(py), "-c", "import suftware, sklearn"],
                                        capture_output=True).returncode == 0
    if not ok:
        print(f"installing the peers (suftware, scikit-learn) into {PEERS_VENV} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "suftware", "scikit-learn"], check=True)
    return str(py)


def peer(task: dict) -> dict:
    out = subprocess.run([peers_python(), str(HERE / "evidence_peers.py")], input=json.dumps(task), text=True,
                         capture_output=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"the peers' script failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


# ------------------------------------------------------------------------------------------------ 1. 1-D density
def bimodal(y):
    g = lambda m, s: np.exp(-0.5 * ((y - m) / s) ** 2) / (s * np.sqrt(2 * np.pi))  # noqa: E731
    return 0.5 * g(-1.5, 0.5) + 0.5 * g(1.0, 0.8)


def sample_bimodal(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    k = rng.random(n) < 0.5
    y = np.where(k, rng.normal(-1.5, 0.5, n), rng.normal(1.0, 0.8, n))
    return np.clip(y, LO, HI)  # 3 in 10 000 fall outside; they sit on the edge node, for bftcore and DEFT alike


def kl_on_nodes(p_est: np.ndarray) -> float:
    """KL(truth || estimate) by the rectangle rule on the nodes, both normalised there."""
    y = np.linspace(LO, HI, NODES)
    h = (HI - LO) / (NODES - 1)
    p = bimodal(y)
    p, q = p / (p.sum() * h), np.maximum(p_est, 1e-300) / (np.sum(p_est) * h)
    return float(np.sum(p * np.log(p / q)) * h)


def one_d_config(y: np.ndarray, order: str, boundary: str = "neumann") -> dict:
    prior = {"l2": 0.0, order: 1.0}
    return {"grid": {"y": {"min": LO, "max": HI, "n": NODES, "boundary": boundary}}, "data": y.tolist(),
            "prior": {"field": "L", **prior}, "solver": {"method": "newton", "max_iter": 200, "tol": 1e-9}}


def bft_one_d(y: np.ndarray, order: str, repeats: int, boundary: str = "neumann") -> tuple[float, float, float]:
    """(KL at the evidence-chosen lambda, median seconds of the whole evidence path, chosen lambda)."""
    cfg = api.validate_config(one_d_config(y, order, boundary))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        path = api.evidence_document(cfg, "lambda")
        times.append(time.perf_counter() - t0)
    lam = path["best"]["lambda"]
    cfg["prior"]["lambda"] = lam
    P = np.asarray(api.fit(cfg)["P"])[0]
    return kl_on_nodes(P), statistics.median(times), lam


def density_table(ns, samples: int, repeats: int) -> list[str]:
    rows = [f"{'n':>5} {'method':<34} {'KL median':>10} {'KL per sample':<48} {'time median':>11}"]
    for n in ns:
        data = [sample_bimodal(n, seed) for seed in range(samples)]
        deft = peer({"task": "deft", "samples": [d.tolist() for d in data], "lo": LO, "hi": HI, "n": NODES,
                     "alpha": 3, "repeats": repeats})
        kl_deft = [kl_on_nodes(np.asarray(p)) for p in deft["density"]]
        for order, boundary in (("l6", "free"), ("l6", "neumann"), ("l2", "neumann")):
            res = [bft_one_d(d, order, repeats, boundary) for d in data]
            kls, ts = [r[0] for r in res], [r[1] for r in res]
            lams = ", ".join(f"{r[2]:.3g}" for r in res)
            rows.append(f"{n:>5} {f'bftcore {order} {boundary}, λ by evidence':<34} {statistics.median(kls):>10.5f} "
                        f"{' '.join(f'{k:.4f}' for k in kls):<48} {statistics.median(ts):>10.3f}s  (λ* {lams})")
        rows.append(f"{n:>5} {'DEFT α = 3, ℓ* by evidence':<34} {statistics.median(kl_deft):>10.5f} "
                    f"{' '.join(f'{k:.4f}' for k in kl_deft):<48} {statistics.median(deft['seconds']):>10.3f}s")
    return rows


# ------------------------------------------------------------------------------------------------- 2. regression
def regression_case(seed: int = 0):
    rng = np.random.default_rng(seed)
    f = lambda x: np.sin(x) + 0.3 * x  # noqa: E731
    x, xt = rng.uniform(0, 10, 50), rng.uniform(0, 10, 200)
    y, yt = f(x) + rng.normal(0, 0.3, 50), f(xt) + rng.normal(0, 0.3, 200)
    cfg = {"model": "regression", "grid": {"x": {"min": 0, "max": 10, "n": 200, "boundary": "neumann"}},
           "data": np.column_stack([x, y]).tolist(), "templates": [{"kind": "constant", "value": 0.0}],
           "prior": {"lambda": 1.0, "l0": 0.05, "l2": 1.0}, "beta": 1.0}
    return api.validate_config(cfg), x, y, xt, yt


def regression_table() -> list[str]:
    cfg, x, y, xt, yt = regression_case()
    model = regression.RegressionModel.from_config(cfg)
    axis = model.axis
    C0 = np.linalg.inv((axis.h * axis_operator(axis, **model.coeffs)).toarray())  # lambda = beta = 1
    ix, ixt = axis.snap(x), axis.snap(xt)
    idx = np.concatenate([ix, ixt])
    fixed = [(1.0, 1.0), (0.5, 0.1), (3.0, 0.05)]   # (lambda, beta)
    ab = [(1 / (b * lam), 1 / b) for lam, b in fixed]
    peers = peer({"task": "gp", "gram": C0[np.ix_(ix, ix)].tolist(), "gram_full": C0[np.ix_(idx, idx)].tolist(),
                  "y": y.tolist(), "a": 1.0, "b": 1.0, "fixed": ab, "x": x.tolist(), "x_test": xt.tolist()})
    rows = [f"{'what':<46} {'bftcore':>16} {'scikit-learn':>16} {'difference':>11}"]
    for (lam, b), sk in zip(fixed, peers["lml_at_fixed"]):
        c = dict(cfg, beta=b, prior=dict(cfg["prior"], **{"lambda": lam}))
        ours = float(regression.RegressionModel.from_config(c).log_evidence(b))
        rows.append(f"{f'log marginal likelihood, λ = {lam:g}, β = {b:g}':<46} {ours:>16.10f} {sk:>16.10f} "
                    f"{abs(ours - sk):>11.2e}")
    t0 = time.perf_counter()
    opt = regression.optimise_evidence(cfg, params=("lambda", "beta"))
    t_opt = time.perf_counter() - t0
    a_ours, b_ours = 1 / (opt["beta"] * opt["lambda"]), 1 / opt["beta"]
    rows.append(f"{'maximum of the log marginal likelihood':<46} {opt['log_evidence']:>16.10f} "
                f"{peers['opt_lml']:>16.10f} {abs(opt['log_evidence'] - peers['opt_lml']):>11.2e}")
    rows.append(f"{'argmax a = 1/(βλ)':<46} {a_ours:>16.10g} {peers['opt_a']:>16.10g} "
                f"{abs(a_ours / peers['opt_a'] - 1):>10.2e}r")
    rows.append(f"{'argmax b = 1/β (noise variance)':<46} {b_ours:>16.10g} {peers['opt_b']:>16.10g} "
                f"{abs(b_ours / peers['opt_b'] - 1):>10.2e}r")
    rows.append(f"{'maximum, scikit-learn with a tight optimiser':<46} {opt['log_evidence']:>16.10f} "
                f"{peers['tight_lml']:>16.10f} {abs(opt['log_evidence'] - peers['tight_lml']):>11.2e}")
    rows.append(f"{'argmax a, scikit-learn with a tight optimiser':<46} {a_ours:>16.10g} {peers['tight_a']:>16.10g} "
                f"{abs(a_ours / peers['tight_a'] - 1):>10.2e}r")
    rows.append(f"{'argmax b, scikit-learn with a tight optimiser':<46} {b_ours:>16.10g} {peers['tight_b']:>16.10g} "
                f"{abs(b_ours / peers['tight_b'] - 1):>10.2e}r")
    rows.append(f"{'argmax a, zero of scikit-learn gradient':<46} {a_ours:>16.12g} {peers['root_a']:>16.12g} "
                f"{abs(a_ours / peers['root_a'] - 1):>10.2e}r")
    rows.append(f"{'argmax b, zero of scikit-learn gradient':<46} {b_ours:>16.12g} {peers['root_b']:>16.12g} "
                f"{abs(b_ours / peers['root_b'] - 1):>10.2e}r   (|grad| {peers['root_grad']:.1e})")
    c = dict(cfg, beta=opt["beta"], prior=dict(cfg["prior"], **{"lambda": opt["lambda"]}))
    h = np.asarray(api.fit(c)["exact"]["mean"])
    mse_ours = float(np.mean((h[ixt] - yt) ** 2))
    mse_same = float(np.mean((np.asarray(peers["opt_pred"]) - yt) ** 2))
    mse_rbf = float(np.mean((np.asarray(peers["rbf_pred"]) - yt) ** 2))
    rows.append(f"{'test MSE, hyperparameters by evidence':<46} {mse_ours:>16.6f} {mse_same:>16.6f} "
                f"{'(same kernel)':>11}")
    # bftcore's own choice: the grid padded beyond the data (Neumann ends away from them), l0 = 0 (flat on the
    # constants) and the prior's order, lambda and beta all by evidence
    best = None
    for order in ("l2", "l4", "l6"):
        c = api.validate_config(dict(cfg, grid={"x": {"min": -2, "max": 12, "n": 280, "boundary": "neumann"}},
                                     prior={"lambda": 1.0, "l0": 0.0, "l2": 0.0, order: 1.0}))
        o = regression.optimise_evidence(c, params=("lambda", "beta"))
        if best is None or o["log_evidence"] > best[0]:
            best = (o["log_evidence"], order, c, o)
    _, order, c, o = best
    c = dict(c, beta=o["beta"], prior=dict(c["prior"], **{"lambda": o["lambda"]}))
    h = np.asarray(api.fit(c)["exact"]["mean"])
    mse_best = float(np.mean((h[api.grid_from_config(c).x.snap(xt)] - yt) ** 2))
    rows.append(f"{f'test MSE, order ({order}), λ, β by evidence, padded':<46} {mse_best:>16.6f}")
    for order in ("l4", "l6"):  # a free boundary: the polynomials of degree < k are flat (a smoothing spline)
        c = api.validate_config(dict(cfg, grid={"x": {"min": 0, "max": 10, "n": 200, "boundary": "free"}},
                                     prior={"lambda": 1.0, "l0": 0.0, "l2": 0.0, order: 1.0}))
        o = regression.optimise_evidence(c, params=("lambda", "beta"))
        c = dict(c, beta=o["beta"], prior=dict(c["prior"], **{"lambda": o["lambda"]}))
        h = np.asarray(api.fit(c)["exact"]["mean"])
        mse_free = float(np.mean((h[api.grid_from_config(c).x.snap(xt)] - yt) ** 2))
        rows.append(f"{f'test MSE, {order} free boundary, λ, β by evidence':<46} {mse_free:>16.6f}")
    rows.append(f"{'test MSE, sklearn RBF + White, optimised':<46} {'':>16} {mse_rbf:>16.6f}   "
                f"{peers['rbf_kernel']}")
    rows.append(f"{'optimiser time':<46} {t_opt:>15.3f}s {peers['opt_seconds']:>15.3f}s")
    return rows


def mse_table(datasets: int) -> list[str]:
    """Test MSE over ``datasets`` draws of the regression case (seeds 0, 1, ...): one draw's test MSE is a random
    number (over 20 draws it ran from 0.084 to 0.144), so the two models are compared draw by draw and in the median and
    mean.  bftcore: the estimator with l6 on a free boundary of [0, 10], λ and β by evidence; scikit-learn: its
    usual RBF + White, optimised."""
    from bftcore.estimator import BFTRegressor
    cases = [regression_case(seed)[1:] for seed in range(datasets)]
    sk = peer({"task": "rbf", "sets": [{"x": x.tolist(), "y": y.tolist(), "x_test": xt.tolist()}
                                       for x, y, xt, _ in cases]})
    rows = [f"{'data set':>8} {'bftcore l6 free':>16} {'scikit-learn RBF':>17} {'lower':>8}   bftcore λ, β; RBF kernel"]
    ours, theirs = [], []
    for seed, ((x, y, xt, yt), pred, kern) in enumerate(zip(cases, sk["pred"], sk["kernel"])):
        r = BFTRegressor(lam="evidence", beta="evidence", boundary="free", l2=0.0, l6=1.0, x_min=0, x_max=10)
        r.fit(x, y)
        a, b = float(np.mean((r.predict(xt) - yt) ** 2)), float(np.mean((np.asarray(pred) - yt) ** 2))
        ours.append(a)
        theirs.append(b)
        rows.append(f"{seed:>8} {a:>16.5f} {b:>17.5f} {'bftcore' if a <= b else 'sklearn':>8}   "
                    f"{r.lam_:.4g}, {r.beta_:.4g}; {kern}")
    wins = sum(a <= b for a, b in zip(ours, theirs))
    rows.append(f"{'median':>8} {statistics.median(ours):>16.5f} {statistics.median(theirs):>17.5f}")
    rows.append(f"{'mean':>8} {statistics.fmean(ours):>16.5f} {statistics.fmean(theirs):>17.5f}")
    rows.append(f"bftcore's test MSE is the lower (or equal) on {wins} of {datasets} data sets")
    return rows


# -------------------------------------------------------------------------------------------------- 3. 64 x 64
def speed_table(repeats: int) -> list[str]:
    cfg = api.validate_config(random_problem(64, {"l2": 1.0}, seed=0))
    lams = np.geomspace(0.01, 100, 30)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        path = api.evidence_document(cfg, "lambda", lams)
        times.append(time.perf_counter() - t0)
    cfg["prior"]["lambda"] = path["best"]["lambda"]
    problem = build_density(cfg)
    L = api.run(cfg).L
    rng = np.random.default_rng(0)
    # nothing is cached between calls: every call factorises H_g again, so each timed call is a cold one
    cold, st = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        evidence.laplace_samples(problem, L, 10, rng)
        cold.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        evidence.laplace_samples(problem, L, 20, rng)
        st.append(20 / (time.perf_counter() - t0))
    chosen = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        api.fit({**cfg, "choose": {"lambda": "evidence"}})
        chosen.append(time.perf_counter() - t0)
    w = 72
    return [f"{'what':<{w}} {'median':>10} {'target':>10}",
            f"{'64×64 fit with choose: lambda evidence (path and its refined maximum)':<{w}} "
            f"{statistics.median(chosen):>9.3f}s {'-':>10}",
            f"{'64×64 evidence path, 30 λ values (whole path)':<{w}} {statistics.median(times):>9.3f}s {'< 2 s':>10}",
            f"{'64×64 Laplace samples of L: 10 samples (cold, factorisation included)':<{w}} "
            f"{statistics.median(cold):>9.3f}s {'< 1 s':>10}",
            f"{'64×64 Laplace samples of L: one call of 20, samples per second':<{w}} {statistics.median(st):>10.1f} "
            f"{'>= 10':>10}",
            f"  (best λ = {path['best']['lambda']:.4g}, log evidence {path['best']['log_evidence']:.4f})"]


def per_node_trace(fac, dB) -> float:
    """tr(B^{-1} dB) as the evidence's slope took it before issue 31's complex step: one LU solve per node, in
    blocks of 256 columns (kept here as the reference the new route is measured against)."""
    size = fac.B.shape[0]
    trace = 0.0
    for a in range(0, size, 256):
        cols = np.arange(a, min(size, a + 256))
        eye = np.zeros((size, cols.size))
        eye[cols, np.arange(cols.size)] = 1.0
        trace += float(np.sum(fac.solve(eye) * dB[:, cols].toarray()))
    return trace


def trace_table(repeats: int) -> list[str]:
    """The slope of the log evidence needs tr(B^{-1} dB): the complex step (one complex LU) against the per-node
    loop, at the MAP of random_problem(n) at lambda = 1, medians of ``repeats``, taken in turn."""
    rows = [f"{'grid, prior':<14} {'per-node loop':>14} {'complex step':>13} {'ratio':>7} {'relative difference':>20}"]
    for n, prior in ((32, "l2"), (32, "l6"), (64, "l2"), (64, "l6")):
        cfg = api.validate_config(random_problem(n, {prior: 1.0 if prior == "l2" else 0.1}, seed=0))
        path = evidence._PathProblem(cfg, "lambda")
        point, fac, _ = path._map(1.0, None)
        rng = np.random.default_rng(1)
        dB = (fac.B @ sp.diags(rng.uniform(0.5, 2.0, fac.B.shape[0])) + fac.B).tocsc()  # B's pattern, tr known
        loop, step = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            a = per_node_trace(fac, dB)
            loop.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            b = evidence.trace_by_complex_step(fac.B, dB)
            step.append(time.perf_counter() - t0)
        tl, ts = statistics.median(loop), statistics.median(step)
        rows.append(f"{f'{n}×{n} {prior}':<14} {tl:>13.3f}s {ts:>12.4f}s {tl / ts:>7.0f} {abs(a - b) / abs(a):>20.1e}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="timing repeats (medians are printed)")
    ap.add_argument("--samples", type=int, default=5, help="data sets per n in the 1-D comparison")
    ap.add_argument("--datasets", type=int, default=20, help="regression data sets in the test MSE comparison")
    ap.add_argument("--quick", action="store_true", help="n = 100 only, 2 data sets (5 in the regression)")
    a = ap.parse_args()
    blas_threads()  # as every run of the API (one BLAS thread: a busy machine's threads made complex LUs 100x slower)
    ns = (100,) if a.quick else (100, 500)
    samples = 2 if a.quick else a.samples
    print("1. 1-D bimodal density, 200 nodes of [-4, 4]: KL(truth || estimate), lower is better")
    print("\n".join(density_table(ns, samples, a.repeats)))
    print("\n2. Regression against scikit-learn (identical kernel, then its usual RBF model)")
    print("\n".join(regression_table()))
    sets = 5 if a.quick else a.datasets
    print(f"\n2b. Regression test MSE over {sets} data sets (seeds 0..{sets - 1}; the table above is seed 0)")
    print("\n".join(mse_table(sets)))
    print("\n3. Speed on 64×64")
    print("\n".join(speed_table(a.repeats)))
    print("\n4. The evidence slope's trace tr(B^-1 dB): per-node LU solves against the complex step (seconds)")
    print("\n".join(trace_table(a.repeats)))


if __name__ == "__main__":
    main()
