"""One entry point for the CLI, the dashboard, the estimator and the tests: configuration in, records out.

``iterate(config, init=None)`` yields one :class:`Record` per iteration (iteration 0 is the initial field);
``fit(config, init=None)`` runs to the end and returns the result document of CONVENTIONS.md §4.
Warm start: pass the previous field as ``init`` (L for field L, P for field P, h for regression).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse.linalg as spl

from . import metrics, regression
from .config import ConfigError, default_config, grid_from_config, validate_config
from .energies import LogDensityEnergy, Prior, ProbabilityEnergy, normalise_log, project_simplex
from .grid import Grid
from .operators import PriorOperator
from .records import Record
from .solvers import iterate as _iterate
from .templates import paper_true_density, template_density, template_field  # noqa: F401 - part of the API

__all__ = ["ConfigError", "default_config", "validate_config", "build_density", "iterate", "fit", "Record"]

EMPIRICAL_EPS = 1e-10  # epsilon of the delta-peak start ln(N/n + eps), Fig. 22


@dataclass
class DensityProblem:
    """Everything built from a density configuration."""

    config: dict
    grid: Grid
    N: np.ndarray
    K: PriorOperator
    energy: object
    P_true: np.ndarray | None


def build_density(config: dict, validated: bool = False) -> DensityProblem:
    """Grid, data counts, prior operator, energy and truth of a density configuration (``validated=True`` skips
    the validation of a document that :func:`bftcore.config.validate_config` has just returned)."""
    cfg = config if validated else validate_config(config)
    grid = grid_from_config(cfg)
    pr = cfg["prior"]
    K = PriorOperator(grid, pr["lambda_x"], pr["lambda_y"], pr["l0"], pr["l2"], pr["l4"], pr["l6"])
    templates = [template_field(t, grid, pr["field"]) for t in cfg["templates"]]
    prior = Prior(K, pr["lambda"], templates or None, cfg["weights"] or None, cfg["beta"])
    N = grid.counts(cfg["data"])
    energy = (LogDensityEnergy if pr["field"] == "L" else ProbabilityEnergy)(grid, N, prior)
    P_true = paper_true_density(grid) if cfg["truth"] == "paper" else None
    return DensityProblem(cfg, grid, N, K, energy, P_true)


def empirical_density(N: np.ndarray, grid: Grid) -> np.ndarray:
    """Extended conditional empirical density P~_emp (237): N/n_x at x with data, uniform elsewhere."""
    nx = N.sum(axis=1, keepdims=True)
    uniform = np.full_like(N, 1.0 / (grid.y.n * grid.hy))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(nx > 0, N / (np.maximum(nx, 1) * grid.hy), uniform)


def kernel_density(problem: DensityProblem, mass2: float) -> np.ndarray:
    """Kernel start ``C~ P~_emp`` with ``C = (K + m_C^2 I)^{-1}`` (676), (698): smooth, then normalise each x.

    For higher-order priors C can have negative entries; the smoothed density is floored at 1e-12 of its row
    maximum so that ln P exists."""
    grid = problem.grid
    P = problem.K.solve(empirical_density(problem.N, grid), 1.0, mass2)
    P = np.maximum(P, 1e-12 * np.max(P, axis=1, keepdims=True))
    return P / (P.sum(axis=1, keepdims=True) * grid.hy)


def initial_field(problem: DensityProblem, init=None) -> np.ndarray:
    """The start of the iteration (Sect. 7.3): uniform, kernel, empirical ln(N/n + eps), a template, or an array
    (warm start from a previous solution)."""
    cfg, grid, E = problem.config, problem.grid, problem.energy
    fld = cfg["prior"]["field"]
    if init is not None and not isinstance(init, str):
        phi = np.asarray(init, dtype=float)
        if phi.shape != grid.shape:
            raise ValueError(f"warm-start field has shape {phi.shape}, the grid is {grid.shape}")
        if fld == "P":
            phi = project_simplex(phi, grid.hy)
            if np.any(phi[problem.N > 0] <= 0):  # a new data point where P = 0: blend in a little uniform density
                phi = 0.999 * phi + 0.001 / (grid.y.n * grid.hy)
            return phi
        if not np.all(np.isfinite(phi)):
            raise ValueError("warm-start field L contains NaN or infinite values")
        return normalise_log(phi, grid.hy)
    init = cfg["solver"]["init"] if init is None else init
    if init == "uniform":
        P = np.full(grid.shape, 1.0 / (grid.y.n * grid.hy))
    elif init == "kernel":
        P = kernel_density(problem, cfg["solver"]["init_mass2"])
    elif init == "empirical":
        if fld == "L":
            n = max(problem.N.sum(), 1.0)
            return normalise_log(np.log(problem.N / n + EMPIRICAL_EPS), grid.hy)
        P = empirical_density(problem.N, grid)
    elif init.startswith("template:"):
        t = E.prior.templates[int(init.split(":")[1])]
        if fld == "L":
            return normalise_log(t, grid.hy)
        P = project_simplex(t, grid.hy)
        if np.any(P[problem.N > 0] <= 0):  # E_P is infinite where a datum has P = 0: as for a warm start
            P = 0.999 * P + 0.001 / (grid.y.n * grid.hy)
        return P
    else:
        raise ConfigError(f"unknown init {init!r}")
    return normalise_log(np.log(P), grid.hy) if fld == "L" else P


def _density_records(problem: DensityProblem, init=None):
    cfg, grid, E = problem.config, problem.grid, problem.energy
    so = cfg["solver"]
    phi0 = initial_field(problem, init)
    for rec in _iterate(E, phi0, method=so["method"], mass2=so["mass2"], min_iter=so["min_iter"],
                        max_iter=so["max_iter"], tol=so["tol"]):
        P = E.to_P(rec.field)
        L = E.to_L(rec.field)
        te = metrics.test_error(L, problem.P_true, grid) if problem.P_true is not None else None
        yield Record(rec.iteration, rec.energy, metrics.training_error(L, problem.N), te, rec.mixing, rec.step,
                     rec.residual, rec.method, rec.change, rec.converged, rec.elapsed_s, L=L, P=P)


def iterate(config: dict, init=None):
    """Yield a :class:`Record` per iteration of the configured solver; close the generator to stop early."""
    cfg = validate_config(config)
    if cfg["model"] == "regression":
        yield from regression.iterate(cfg, init)
        return
    yield from _density_records(build_density(cfg, validated=True), init)


def _finite_list(a):
    """Nested list with non-finite numbers as None (JSON has no infinities)."""
    a = np.asarray(a, dtype=float)
    if a.ndim == 0:
        return np.where(np.isfinite(a), a, np.nan).tolist()
    finite = np.isfinite(a)
    if finite.all():
        return a.tolist()
    out = a.astype(object)
    out[~finite] = None
    return out.tolist()


def _num_or_none(v):
    return None if v is None or not np.isfinite(v) else float(v)


def fit(config: dict, init=None, callback=None, check_stability: bool = False) -> dict:
    """Run the configured solver to the end and return the result document (CONVENTIONS.md §4).

    ``callback(record)`` is called for every iteration; returning True from it stops the run.
    ``check_stability=True`` adds ``"stable"``: whether the solution is a local minimum (see
    :func:`is_local_minimum`), as beta sweeps and basins report it.
    """
    cfg = validate_config(config)
    if cfg["model"] == "regression":
        return regression.fit(cfg, init)
    problem = build_density(cfg, validated=True)
    t0 = time.perf_counter()
    history = []
    for rec in _density_records(problem, init):
        history.append(rec)
        if callback is not None and callback(rec):
            break
    elapsed = time.perf_counter() - t0
    doc = density_result(problem, history, elapsed)
    if check_stability:
        last = history[-1]
        doc["stable"] = is_local_minimum(problem, last.L if problem.config["prior"]["field"] == "L" else last.P)
    return doc


def is_local_minimum(problem: DensityProblem, phi: np.ndarray, rtol: float = 1e-8) -> bool:
    """Stability of a density solution: the smallest eigenvalue of the normalisation-consistent Hessian (160)
    (Lanczos on Hessian actions, the nx per-x zero modes projected out) is not negative.  For field P the free
    face is checked the same way with the Hessian (181) restricted to P > 0 and the per-x sums held fixed."""
    pt = problem.energy.at(phi)
    shape, n = problem.grid.shape, problem.grid.size
    if problem.config["prior"]["field"] == "L":
        mask = np.ones(shape, bool)
    else:
        mask = phi > 0

    def project(v):  # tangent of the per-x normalisation on the free nodes (Euclidean)
        v = np.where(mask, v.reshape(shape), 0.0)
        cnt = np.maximum(mask.sum(axis=1, keepdims=True), 1)
        return np.where(mask, v - v.sum(axis=1, keepdims=True) / cnt, 0.0)

    def mv(v):
        return project(pt.hessp(project(v))).ravel()

    free = mask.sum(axis=1)
    if int(np.sum(np.maximum(free - 1, 0))) == 0:  # no direction keeps the normalisation: nothing to descend along
        return True
    scale = max(1.0, float(np.max(np.abs(mv(np.random.default_rng(0).standard_normal(n))))))
    if n <= 400:  # small grids: the projected Hessian column by column, exactly (ARPACK needs a few dimensions)
        H = np.column_stack([mv(e) for e in np.eye(n)])
        lam_min = float(np.min(np.linalg.eigvalsh(0.5 * (H + H.T))))
    else:
        op = spl.LinearOperator((n, n), matvec=mv, dtype=float)
        v0 = project(np.random.default_rng(1).standard_normal(n)).ravel()
        try:
            lam_min = spl.eigsh(op, k=1, which="SA", tol=1e-6, maxiter=20 * n, v0=v0,
                                return_eigenvectors=False)[0]
        except spl.ArpackNoConvergence as e:
            lam_min = min(e.eigenvalues) if len(e.eigenvalues) else 0.0
    return bool(lam_min >= -max(rtol, 1e-6) * scale)


def density_result(problem: DensityProblem, history: list, elapsed: float) -> dict:
    grid, last = problem.grid, history[-1]
    point = problem.energy.at(last.P if problem.config["prior"]["field"] == "P" else last.L)
    h, sd = metrics.regression_function(last.P, grid)
    notes = []
    if last.test_error is not None and not np.isfinite(last.test_error):
        notes.append("test_error is infinite: P = 0 at nodes where the true density is positive")
    doc = {
        "model": "density",
        "field": problem.config["prior"]["field"],
        "energy": float(last.energy),
        "train_error": _num_or_none(last.train_error),
        "test_error": _num_or_none(last.test_error),
        "kl_to_truth": (_num_or_none(metrics.kl_to_truth(last.L, problem.P_true, grid))
                        if problem.P_true is not None else None),
        "iterations": int(last.iteration),
        "converged": bool(last.converged),
        "residual": float(last.residual),
        "normalisation_error": metrics.normalisation_error(last.P, grid),
        "max_P": float(np.max(last.P)),
        "mixing": [float(a) for a in last.mixing],
        "lagrange_multiplier": [float(v) for v in point.lagrange_multiplier],
        "regression": {"h": h.tolist(), "sd": sd.tolist()},
        "P": _finite_list(last.P),
        "L": _finite_list(last.L),
        "history": [{"iteration": r.iteration, "energy": float(r.energy), "train_error": _num_or_none(r.train_error),
                     "test_error": _num_or_none(r.test_error), "mixing": [float(a) for a in r.mixing],
                     "step": float(r.step), "residual": float(r.residual), "method": r.method}
                    for r in history],
        "elapsed_s": float(elapsed),
    }
    if notes:
        doc["notes"] = notes
    return doc
