"""The peers' side of scripts/bench_evidence.py, run with the Python of the peers' own venv (DEFT's ``suftware`` and
scikit-learn are installed there, never in bftcore's).  Reads one JSON task from stdin, prints one JSON answer.

Tasks:
- ``{"task": "deft", "samples": [[y...], ...], "lo", "hi", "n", "alpha", "repeats"}``: DEFT's density (its ell* chosen
  by its own evidence) evaluated on the n nodes of [lo, hi], and the median wall time of the whole estimate; with
  ``"points": [[y...], ...]`` (one list per sample) also its density at those points (``at_points``).
- ``{"task": "gp", "gram": C0 (data x data), "y": [...], "a": ..., "b": ..., "gram_test": C0 (test x data),
  "fixed": [[a, b], ...]}``: scikit-learn's GaussianProcessRegressor with the kernel ``a C0 + b I`` (a precomputed
  Gram matrix, so the kernel is bftcore's own prior covariance, nothing approximated): its log marginal likelihood
  at given (a, b), its optimum over (a, b) and its predictions; and the same data with sklearn's usual choice,
  ``ConstantKernel * RBF + WhiteKernel`` optimised, for the test MSE comparison.
- ``{"task": "rbf", "sets": [{"x": [...], "y": [...], "x_test": [...]}, ...]}``: that usual RBF model fitted to
  each data set; its predictions at the test points and its kernel.
"""
from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np


def deft(task: dict) -> dict:
    import suftware as sw
    nodes = np.linspace(task["lo"], task["hi"], task["n"])
    out, times, at = [], [], []
    for y in task["samples"]:
        ts = []
        for _ in range(task.get("repeats", 1)):
            t0 = time.perf_counter()
            d = sw.DensityEstimator(np.asarray(y, float), alpha=task["alpha"], bounding_box=[task["lo"], task["hi"]],
                                    num_grid_points=task["n"], num_posterior_samples=0)
            p = d.evaluate(nodes)
            ts.append(time.perf_counter() - t0)
        times.append(statistics.median(ts))
        out.append(np.asarray(p, float).tolist())
        if "points" in task:  # DEFT's own evaluation at held-out points (its interpolation between grid points)
            at.append(np.asarray(d.evaluate(np.asarray(task["points"][len(out) - 1], float)), float).tolist())
    return {"density": out, "seconds": times, **({"at_points": at} if "points" in task else {})}


def gp(task: dict) -> dict:
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import Hyperparameter, Kernel

    C0 = np.asarray(task["gram"], float)
    m = C0.shape[0]
    full = np.asarray(task["gram_full"], float)  # rows and columns: the data first, then the test points

    class Precomputed(Kernel):
        """``a C0[i, j] + b [i == j]`` on integer inputs i (an index into the Gram matrix)."""

        def __init__(self, a=1.0, b=1.0, a_bounds=(1e-8, 1e8), b_bounds=(1e-8, 1e8)):
            self.a, self.b, self.a_bounds, self.b_bounds = a, b, a_bounds, b_bounds

        @property
        def hyperparameter_a(self):
            return Hyperparameter("a", "numeric", self.a_bounds)

        @property
        def hyperparameter_b(self):
            return Hyperparameter("b", "numeric", self.b_bounds)

        def __call__(self, X, Y=None, eval_gradient=False):
            i = np.asarray(X, int).ravel()
            j = i if Y is None else np.asarray(Y, int).ravel()
            G = full[np.ix_(i, j)]
            K = self.a * G + (self.b * np.equal.outer(i, j) if Y is None else 0.0)
            if eval_gradient:
                return K, np.stack([self.a * G, self.b * np.eye(len(i))], axis=-1)
            return K

        def diag(self, X):
            i = np.asarray(X, int).ravel()
            return self.a * full[i, i] + self.b

        def is_stationary(self):
            return False

    X = np.arange(m)[:, None]
    Xt = np.arange(m, full.shape[0])[:, None]
    y = np.asarray(task["y"], float)
    res = {}
    lml_at = []
    for a, b in task["fixed"]:
        g = GaussianProcessRegressor(Precomputed(a, b), optimizer=None, alpha=0.0).fit(X, y)
        lml_at.append(float(g.log_marginal_likelihood_value_))
    res["lml_at_fixed"] = lml_at
    t0 = time.perf_counter()
    g = GaussianProcessRegressor(Precomputed(task["a"], task["b"]), alpha=0.0, n_restarts_optimizer=3,
                                 random_state=0).fit(X, y)
    res["opt_seconds"] = time.perf_counter() - t0
    res["opt_a"], res["opt_b"] = float(g.kernel_.a), float(g.kernel_.b)
    res["opt_lml"] = float(g.log_marginal_likelihood_value_)
    res["opt_pred"] = g.predict(Xt).tolist()

    # the same fit with a tight optimiser: scikit-learn's own objective and gradient, L-BFGS-B run to a gradient of
    # 1e-12 (its default stops near 1e-5, which leaves the argmax uncertain in the 8th digit)
    def tight(obj_func, initial_theta, bounds):
        from scipy.optimize import minimize
        r = minimize(obj_func, initial_theta, method="L-BFGS-B", jac=True, bounds=bounds,
                     options={"gtol": 1e-12, "ftol": 1e-16, "maxiter": 20000})
        return r.x, r.fun

    g3 = GaussianProcessRegressor(Precomputed(task["a"], task["b"]), alpha=0.0, optimizer=tight,
                                  n_restarts_optimizer=3, random_state=0).fit(X, y)
    res["tight_a"], res["tight_b"] = float(g3.kernel_.a), float(g3.kernel_.b)
    res["tight_lml"] = float(g3.log_marginal_likelihood_value_)
    # the maximum is flat: the log marginal likelihood changes by ~1e-15 over a relative 3e-8 of (a, b), below
    # the rounding of its value, so any value-based stopping leaves the argmax uncertain there.  Its gradient is
    # not flat: the zero of scikit-learn's own analytic gradient (in ln a, ln b), by a root finder, is the argmax
    # to ~1e-12
    from scipy.optimize import root
    sol = root(lambda th: g3.log_marginal_likelihood(th, eval_gradient=True)[1], g3.kernel_.theta, jac=False,
               method="hybr", tol=1e-15)
    res["root_a"], res["root_b"] = (float(v) for v in np.exp(sol.x))
    res["root_grad"] = float(np.max(np.abs(g3.log_marginal_likelihood(sol.x, eval_gradient=True)[1])))
    # scikit-learn's usual model on the raw coordinates, optimised by its own marginal likelihood
    t0 = time.perf_counter()
    pred, res["rbf_kernel"] = rbf_model(task["x"], y, task["x_test"])
    res["rbf_seconds"] = time.perf_counter() - t0
    res["rbf_pred"] = pred.tolist()
    return res


def rbf_model(x, y, x_test):
    """scikit-learn's usual GP on the raw coordinates, optimised by its own marginal likelihood."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    kern = ConstantKernel(1.0) * RBF(1.0) + WhiteKernel(0.1)
    g = GaussianProcessRegressor(kern, normalize_y=True, n_restarts_optimizer=3, random_state=0)
    g.fit(np.asarray(x, float)[:, None], np.asarray(y, float))
    return g.predict(np.asarray(x_test, float)[:, None]), str(g.kernel_)


def rbf(task: dict) -> dict:
    preds, kernels = [], []
    for s in task["sets"]:
        p, k = rbf_model(s["x"], s["y"], s["x_test"])
        preds.append(p.tolist())
        kernels.append(k)
    return {"pred": preds, "kernel": kernels}


def main():
    task = json.load(sys.stdin)
    out = {"deft": deft, "gp": gp, "rbf": rbf}[task["task"]](task)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
