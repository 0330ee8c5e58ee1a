"""The density problem (CONVENTIONS.md §2): a validated configuration built into grid, data counts, prior and
energy; the start of the iteration (Sect. 7.3); the stream of records; the stability check; and the result of a fit
as arrays (:class:`DensityFit`), turned into the result document of §4 only by :meth:`DensityFit.to_document`.

Below the workflows (:mod:`bftcore.studies.workflows`) and the façade (:mod:`bftcore.api`); above the energies and the
solver.  A configuration comes in validated (:func:`bftcore.foundations.config.validate_config` is the one gate).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse.linalg as spl

from ..foundations import metrics
from ..foundations.config import ConfigError, check_samples, checked, grid_from_config
from ..foundations.grid import Grid
from ..foundations.operators import PriorOperator
from ..foundations.records import FitResult, Record, finite_list, finite_or_none
from ..foundations.solvers import iterate as solver_iterate
from ..foundations.templates import paper_true_density, template_field
from .energies import LogDensityEnergy, Prior, ProbabilityEnergy, normalise_log, project_simplex

EMPIRICAL_EPS = 1e-10  # epsilon of the delta-peak start ln(N/n + eps), Fig. 22


@dataclass
class DensityProblem:
    """Everything built from a density configuration."""

    config: dict
    grid: Grid
    N: np.ndarray
    K: PriorOperator
    energy: LogDensityEnergy | ProbabilityEnergy
    P_true: np.ndarray | None


def build_density(config: dict) -> DensityProblem:
    """Grid, data counts, prior operator, energy and truth of a density configuration (checked by the gate
    unless it is a :class:`bftcore.foundations.config.Valid` document already)."""
    cfg = checked(config)
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


def prior_samples(problem: DensityProblem, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` fields drawn from the prior the configuration defines, as densities ``(n, nx, ny)``, and the
    template index of each: component j with probability p_j, then ``t_j + (lambda cell K)^{-1/2} z``
    (:meth:`bftcore.foundations.operators.PriorOperator.sample`), normalised per x (field L: ``exp`` of the normalised
    log; field P: projected onto the densities).  What the sliders mean, drawn: a stiffer prior gives smoother fields.

    The components are exact.  For beta != 1 the mixture prior ``(sum_j p_j exp(-beta lambda E_0j))^(1/beta)``
    is not a mixture of Gaussians; the samples take the components with the weights p_j, its beta = 1 form."""
    E = problem.energy
    pr, grid = E.prior, problem.grid
    n = check_samples(n, grid.size, "prior samples")
    comps = rng.choice(pr.m, size=n, p=pr.weights)
    fields = pr.templates[comps] + problem.K.sample(rng, n, pr.lam * grid.cell)
    if problem.config["prior"]["field"] == "L":
        return np.stack([np.exp(normalise_log(f, grid.hy)) for f in fields]), comps
    return np.stack([project_simplex(f, grid.hy) for f in fields]), comps


def records(problem: DensityProblem, init=None):
    """Yield a :class:`~bftcore.foundations.records.Record` (with ``L`` and ``P``) per iteration of the configured
    solver."""
    cfg, grid, E = problem.config, problem.grid, problem.energy
    so = cfg["solver"]
    phi0 = initial_field(problem, init)
    for rec in solver_iterate(E, phi0, method=so["method"], mass2=so["mass2"], min_iter=so["min_iter"],
                        max_iter=so["max_iter"], tol=so["tol"]):
        P = E.to_P(rec.field)
        L = E.to_L(rec.field)
        te = metrics.test_error(L, problem.P_true, grid) if problem.P_true is not None else None
        yield Record(iteration=rec.iteration, energy=rec.energy, train_error=metrics.training_error(L, problem.N),
                     test_error=te, mixing=rec.mixing, step=rec.step, residual=rec.residual, method=rec.method,
                     change=rec.change, converged=rec.converged, elapsed_s=rec.elapsed_s, L=L, P=P, field=rec.field)


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
    return lowest_tangent_eigenvalue(mv, n, rtol, v0=project(np.random.default_rng(1).standard_normal(n)).ravel())


def lowest_tangent_eigenvalue(mv, n: int, rtol: float = 1e-8, v0=None) -> bool:
    """Whether the symmetric operator ``mv`` (a projected Hessian action on flat vectors of length n) has no
    eigenvalue below ``-max(rtol, 1e-6)`` times its scale: exactly, column by column, up to 400 unknowns (ARPACK
    needs a few dimensions), else by Lanczos for the smallest eigenvalue."""
    scale = max(1.0, float(np.max(np.abs(mv(np.random.default_rng(0).standard_normal(n))))))
    if n <= 400:
        H = np.column_stack([mv(e) for e in np.eye(n)])
        lam_min = float(np.min(np.linalg.eigvalsh(0.5 * (H + H.T))))
    else:
        op = spl.LinearOperator((n, n), matvec=mv, dtype=float)
        v0 = mv(np.random.default_rng(1).standard_normal(n)) if v0 is None else v0
        try:
            lam_min = spl.eigsh(op, k=1, which="SA", tol=1e-6, maxiter=20 * n, v0=v0,
                                return_eigenvectors=False)[0]
        except spl.ArpackNoConvergence as e:
            lam_min = min(e.eigenvalues) if len(e.eigenvalues) else 0.0
    return bool(lam_min >= -max(rtol, 1e-6) * scale)


def solve(problem: DensityProblem, init=None, callback=None, check_stability: bool = False) -> "DensityFit":
    """Run the configured solver to the end (or until ``callback(record)`` returns True) and return the result as
    arrays; ``check_stability=True`` also decides whether the solution is a local minimum
    (:func:`is_local_minimum`)."""
    history, elapsed = run_to_end(records(problem, init), callback)
    stable = is_local_minimum(problem, history[-1].field) if check_stability else None
    return DensityFit(history, elapsed, problem, stable)


def run_to_end(stream, callback=None) -> tuple[list, float]:
    """The records of ``stream`` until it ends or ``callback(record)`` returns True, and the wall time taken."""
    t0 = time.perf_counter()
    history = []
    for rec in stream:
        history.append(rec)
        if callback is not None and callback(rec):
            break
    return history, time.perf_counter() - t0


@dataclass
class DensityFit(FitResult):
    """A density fit as arrays: the records (the last with ``L`` and ``P``), the problem, and (when checked) its
    stability."""

    problem: DensityProblem
    stable: bool | None = None

    @property
    def L(self) -> np.ndarray:
        assert self.last.L is not None
        return self.last.L

    @property
    def P(self) -> np.ndarray:
        assert self.last.P is not None
        return self.last.P

    def summary(self) -> dict:
        last = self.last
        out = {"energy": float(last.energy), "mixing": [float(a) for a in last.mixing],
               "test_error": finite_or_none(last.test_error), "converged": bool(last.converged)}
        if self.stable is not None:
            out["stable"] = bool(self.stable)
        return out

    def to_document(self) -> dict:
        """The result document of CONVENTIONS.md §4 (``"stable"`` only when the stability was checked)."""
        problem, grid, last, L, P = self.problem, self.problem.grid, self.last, self.L, self.P
        point = problem.energy.at(self.field)
        h, sd = metrics.regression_function(P, grid)
        notes = []
        if last.test_error is not None and not np.isfinite(last.test_error):
            notes.append("test_error is infinite: P = 0 at nodes where the true density is positive")
        doc = {
            "model": "density",
            "field": problem.config["prior"]["field"],
            "energy": float(last.energy),
            "train_error": finite_or_none(last.train_error),
            "test_error": finite_or_none(last.test_error),
            "kl_to_truth": (finite_or_none(metrics.kl_to_truth(L, problem.P_true, grid))
                            if problem.P_true is not None else None),
            "iterations": int(last.iteration),
            "converged": bool(last.converged),
            "residual": float(last.residual),
            "normalisation_error": metrics.normalisation_error(P, grid),
            "max_P": float(np.max(P)),
            "mixing": [float(a) for a in last.mixing],
            "lagrange_multiplier": [float(v) for v in point.lagrange_multiplier],
            "regression": {"h": h.tolist(), "sd": sd.tolist()},
            "P": finite_list(P),
            "L": finite_list(L),
            "history": [r.summary() for r in self.history],
            "elapsed_s": float(self.elapsed_s),
        }
        if notes:
            doc["notes"] = notes
        if self.stable is not None:
            doc["stable"] = bool(self.stable)
        return doc
