"""Regression with a non-quadratic prior potential (Sect. 6.5, eqs. (589)-(595)) and a robust data term
(Sect. 3.7.4, Fig. 5), solved by iteratively reweighted least squares.

The regression function h lives on the x nodes of an axis, as in :mod:`bftcore.models.regression`.  The energy is

    E(h) = sum_i rho(h(x_i) - y_i) + lambda hx sum_e psi(omega_e),    omega = W (h - t),

with rho a data term and psi a prior potential of :mod:`bftcore.foundations.potentials`, t a template and W the root
of the regression prior's operator, ``W^T W = K_X`` (:func:`bftcore.foundations.operators.axis_root`: for
``l2`` alone ``sqrt(l2)`` times the forward differences over the spacing, so omega is a slope).  The factor hx is
the cell of the integral in (589) (``int dx psi(omega(x))``), the same convention as regression's
``(f, g) = sum_i f_i g_i hx``: with psi(s) = s^2/2 and rho(e) = e^2/2 the energy *is* regression's single-component
energy ``1/2 sum_data (h(x_d) - y_d)^2 + (lambda/2)(h - t, K_X (h - t))``, and the fits agree.  Gradients are
partial derivatives with respect to the node values (regression's convention).

Stationarity (591)/(593) with the data term: ``H^T rho'(e) + lambda hx W^T psi'(omega) = 0`` (H picks the data's
nodes).  Writing ``psi'(omega) = w (omega - s0)`` and ``rho'(e) = w_D e`` with the IRLS weights of the potentials
module, the gradient is ``A h - b`` with

    A = K_D(w_D) + lambda hx W^T diag(w) W,    b = H^T (w_D y) + lambda hx W^T diag(w) (W t + s0),

``K_D(w_D)`` the diagonal of the data's weights summed per node.  One iteration (half-quadratic / IRLS) solves
``A d = -G`` once (sparse LU) and takes a step along d with the line search of the learning algorithms
(:func:`bftcore.foundations.solvers.line_search`, Armijo from eta = 1 on the true energy), so the energy never
increases; eta = 1 is the plain IRLS update ``h = A^{-1} b``.  When that direction finds no decrease the step is the
gradient step (594), ``d = -G`` with the minimising line search; when neither decreases the energy the run stops.

Decision (weights that are not positive): the inverted cup (a < 0) and a two-Gaussian mixture near e = 0 give
negative weights, the epsilon tube gives zero ones.  They enter A by their magnitude, floored at 1e-6 of the
start weight of their term (``PriorPotential.start_weight``, ``DataTerm.start_weight``): A stays positive definite,
so d is a descent direction, and the fixed point is still ``G = 0`` because d = -A^{-1} G whatever A is.

The start (``init="gaussian"``) is the Gaussian fit that has each term's start weight: data term
``e^2 / (2 sigma^2)`` and prior ``kappa (omega - s0)^2 / 2`` with kappa = 1 for the quadratic, ``|a| / b^2`` (the
secant through psi(b) = a/2) for the Fig. 12 family.  Every cup is non-convex; the fit is the minimum reached from
there.

Units (x in some length unit, y in some unit of the data; tests/test_robust.py checks the equivariance): omega is in
the units of ``W h``, for the default ``l2 = 1`` a slope, y per unit x (for a k-th order filter, y per x^k), and so
are b and s0; sigma, mu and eps are in y units; gamma is a pure number; a is an energy (in nats) per unit of x
length, so that a saturated edge costs ``lambda hx a`` and only the product ``lambda a`` matters.  Under
``x -> alpha x``, ``y -> c y`` (t -> c t) the fit becomes ``c h`` when sigma, mu, eps, clip go to ``c`` times
themselves, b, s0 and the potential's clip to ``c / alpha`` times, and lambda to ``lambda / alpha`` (Fig. 12
family: ``psi'(c omega / alpha) = psi(omega)`` with the scaled b, and hx -> alpha hx) or to ``lambda alpha / c^2``
(the quadratic, which carries the units of omega^2); the data terms are pure numbers once sigma scales.
:meth:`bftcore.foundations.potentials.PriorPotential.scaled` and ``DataTerm.scaled`` do the parameter part.

Convergence: the stationarity residual ``max|G| / max(max|H^T rho'|, max|lambda hx W^T psi'|)`` (the gradient
relative to its two balancing parts) below ``gtol``; or, for a cusp (gamma < 1, whose derivative has no zero at
omega = s0, so G need not vanish) and at the energy's rounding, the field moving by less than
``tol max(max|y|, max|t|, max|h|)`` while the energy no longer decreases (relative 1e-12).  A run that ends
otherwise says why in its ``verdict``.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..foundations import metrics
from ..foundations.config import ConfigError, MapOnlyKind, checked, grid_from_config
from ..foundations.grid import Axis, Grid
from ..foundations.linalg import saddle_lu
from ..foundations.operators import PriorOperator, axis_root, highest_order
from ..foundations.potentials import DataTerm, PriorPotential, data_term, prior_potential
from ..foundations.records import FitResult, Record
from ..foundations.solvers import at_energy_rounding, line_search
from ..foundations.solvers import iterate as solver_iterate
from ..foundations.templates import paper_true_density, template_field, template_values
from .density import (
    DensityFit,
    DensityProblem,
    LogDensityEnergy,
    LogPoint,
    Prior,
    initial_field,
    is_local_minimum,
    normalise_log,
    run_to_end,
)
from .regression import _snap_data

#: Floor of the weights in A, relative to the start weight of their term (module docstring).
WEIGHT_FLOOR = 1e-6
#: Largest grid on which a converged run checks the Hessian for negative curvature (a dense eigendecomposition).
SADDLE_MAX_NODES = 2000
#: Most steps out of saddles in one run.
MAX_ESCAPES = 20


class RobustRegression:
    """The problem: data on an axis, a data term rho, a prior potential psi, lambda, the prior's coefficients (which
    give W with W^T W = K_X) and a template t.  ``rho`` and ``psi`` are objects of
    :mod:`bftcore.foundations.potentials` (:func:`~bftcore.foundations.potentials.data_term`,
    :func:`~bftcore.foundations.potentials.prior_potential`) or names (their default parameters); None is the
    Gaussian one (sigma = 1, psi = s^2/2).  ``template`` is a regression template object (CONVENTIONS.md §3) or
    node values; None is t = 0.  Implements the energy protocol the line search needs (``at``, ``normalise``)."""

    field = "h"

    def __init__(self, axis: Axis, data, rho: DataTerm | str | None = None,
                 psi: PriorPotential | str | None = None, lam: float = 1.0, l0: float = 0.0,
                 l2: float = 1.0, l4: float = 0.0, l6: float = 0.0, template=None):
        if not (np.isfinite(lam) and lam > 0):
            raise ValueError(f"lambda must be > 0 (the prior's strength), got {lam!r}; use a small lambda for a weak "
                             f"prior")
        coeffs = dict(l0=float(l0), l2=float(l2), l4=float(l4), l6=float(l6))
        bad = [k for k, v in coeffs.items() if not (np.isfinite(v) and v >= 0)]
        if bad or not any(coeffs.values()):
            raise ValueError(f"the prior coefficients l0, l2, l4, l6 must be >= 0 with one > 0 (they give the filter "
                             f"W), got {coeffs}")
        self.axis, self.nodes, self.hx, self.n = axis, axis.nodes, axis.h, axis.n
        self.ix, self.y = _snap_data(axis, data)
        self.rho = rho if isinstance(rho, DataTerm) else data_term(rho or "gaussian")
        self.psi = psi if isinstance(psi, PriorPotential) else prior_potential(psi or "quadratic")
        self.lam, self.coeffs = float(lam), coeffs
        self.W = sp.csr_matrix(axis_root(axis, **coeffs))
        if template is None:
            self.template = np.zeros(self.n)
        elif isinstance(template, dict):
            self.template = template_values(template, self.nodes)
        else:
            self.template = np.asarray(template, dtype=float).reshape(-1)
            if self.template.shape != (self.n,) or not np.all(np.isfinite(self.template)):
                raise ValueError(f"template must have one finite value per x node ({self.n}), "
                                 f"got shape {self.template.shape}")
        self.prior_scale = self.lam * self.hx
        # the size of y, for tolerances that scale with the data's units (y -> c y scales every step alike)
        self.y_scale = float(max(np.max(np.abs(self.y), initial=0.0), np.max(np.abs(self.template)))) or 1.0
        self.counts = np.bincount(self.ix, minlength=self.n).astype(float)
        if self.counts.sum() == 0 and coeffs["l0"] == 0:
            raise ValueError("without data the prior needs a mass l0 > 0 (W annihilates constants); add data")

    # --- the energy -------------------------------------------------------------------------------------------
    def residuals(self, h) -> np.ndarray:
        """e_i = h(x_i) - y_i."""
        return np.asarray(h, dtype=float)[self.ix] - self.y

    def filtered(self, h) -> np.ndarray:
        """omega = W (h - t), the filtered differences of (589)."""
        return self.W @ (np.asarray(h, dtype=float) - self.template)

    def data_energy(self, h) -> float:
        return float(np.sum(self.rho.value(self.residuals(h))))

    def prior_energy(self, h) -> float:
        """lambda hx sum_e psi(omega_e), the discretised (589)."""
        return self.prior_scale * float(np.sum(self.psi.value(self.filtered(h))))

    def value(self, h) -> float:
        return self.data_energy(h) + self.prior_energy(h)

    def gradient_parts(self, h) -> tuple[np.ndarray, np.ndarray]:
        """``(H^T rho'(e), lambda hx W^T psi'(omega))``: the data's and the prior's gradients, (591)/(593)."""
        g_data = np.bincount(self.ix, weights=self.rho.derivative(self.residuals(h)), minlength=self.n)
        g_prior = self.prior_scale * (self.W.T @ self.psi.derivative(self.filtered(h)))
        return g_data, g_prior

    def gradient(self, h) -> np.ndarray:
        g_data, g_prior = self.gradient_parts(h)
        return g_data + g_prior

    def at(self, h) -> "RobustPoint":
        return RobustPoint(self, np.asarray(h, dtype=float))

    def normalise(self, h) -> np.ndarray:
        """Regression fields carry no constraint: the identity."""
        return np.asarray(h, dtype=float)

    # --- IRLS ---------------------------------------------------------------------------------------------------
    def _matrix(self, w_data: np.ndarray, w_prior: np.ndarray) -> sp.csc_matrix:
        K_D = sp.diags(np.bincount(self.ix, weights=w_data, minlength=self.n))
        return sp.csc_matrix(K_D + self.prior_scale * (self.W.T @ sp.diags(w_prior) @ self.W))

    def irls_weights(self, h) -> tuple[np.ndarray, np.ndarray]:
        """The weights of A at h: ``|w|`` floored at 1e-6 of each term's start weight (module docstring)."""
        w_data = np.maximum(np.abs(self.rho.weight(self.residuals(h))), WEIGHT_FLOOR * self.rho.start_weight)
        w_prior = np.maximum(np.abs(self.psi.weight(self.filtered(h))), WEIGHT_FLOOR * self.psi.start_weight)
        return w_data, w_prior

    def irls_matrix(self, h) -> sp.csc_matrix:
        """A = K_D(w_D) + lambda hx W^T diag(w) W at h."""
        return self._matrix(*self.irls_weights(h))

    def hessian(self, h) -> sp.csr_matrix:
        """The Hessian ``H^T diag(rho''(e)) H + lambda hx W^T diag(psi''(omega)) W`` (second derivatives at
        ``|s - s0| >= clip``: for a cusp it is that of the clipped potential)."""
        K_D = sp.diags(np.bincount(self.ix, weights=self.rho.second_derivative(self.residuals(h)), minlength=self.n))
        curv = self.psi.second_derivative(self.filtered(h))
        return sp.csr_matrix(K_D + self.prior_scale * (self.W.T @ sp.diags(curv) @ self.W))

    def gaussian_fit(self) -> np.ndarray:
        """The start: the Gaussian fit with each term's start weight (module docstring), one sparse solve."""
        kd, kp = self.rho.start_weight, self.psi.start_weight
        A = self._matrix(np.full(self.y.size, kd), np.full(self.W.shape[0], kp))
        b = kd * np.bincount(self.ix, weights=self.y, minlength=self.n) + self.prior_scale * kp * (
            self.W.T @ (self.W @ self.template + self.psi.s0))
        return spla.spsolve(A, b)


class RobustPoint:
    """The energy at one h: value, gradient and the relative stationarity residual."""

    def __init__(self, problem: RobustRegression, h: np.ndarray):
        self.phi = h
        self.value = problem.value(h)
        g_data, g_prior = problem.gradient_parts(h)
        self.gradient = g_data + g_prior
        scale = max(float(np.max(np.abs(g_data), initial=0.0)), float(np.max(np.abs(g_prior), initial=0.0)))
        g = float(np.max(np.abs(self.gradient), initial=0.0))
        self.residual = g / scale if scale > 0 else g


@dataclass
class RobustFit:
    """A robust regression fit: the field h, the energy after every step (``energy[0]`` at the start), the number of
    steps taken, whether it converged and why (``verdict``, in words), the final relative stationarity residual, the
    kind of each step (``"irls"``, ``"gradient"`` or ``"curvature"``, out of a saddle) and one
    :class:`~bftcore.foundations.records.Record` per step (iteration 0 the start; with ``h``)."""

    h: np.ndarray
    energy: list[float]
    iterations: int
    converged: bool
    verdict: str
    residual: float
    steps: list[str] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    elapsed_s: float = 0.0


def _negative_curvature_step(problem: RobustRegression, h: np.ndarray, point: RobustPoint):
    """``(new_h, new_point)`` a step along the Hessian's lowest eigenvector when it has negative curvature and the
    line search finds a decrease there; None otherwise (or when n > :data:`SADDLE_MAX_NODES`)."""
    if problem.n > SADDLE_MAX_NODES:
        return None
    values, vectors = np.linalg.eigh(problem.hessian(h).toarray())
    if not values[0] < -1e-9 * max(1.0, float(np.max(np.abs(values)))):
        return None
    v = vectors[:, 0]
    v = v * np.sign(v[np.argmax(np.abs(v))])  # a sign that does not depend on rounding: ties break alike in any units
    for d in (v, -v):
        # the first minimum along the ray, by doubling from a small step: a long step can cross into a far basin (a
        # node without data sent to the cup's flat tail, which cuts the chain in two)
        best, t = None, 1e-3 * max(problem.y_scale, float(np.max(np.abs(h))))
        for _ in range(60):
            trial = problem.at(h + t * d)
            if not trial.value < (best.value if best is not None else point.value):
                break
            best, t = trial, 2.0 * t
        if best is not None:
            return best.phi, best
    return None


def irls_steps(problem: RobustRegression, init="gaussian", max_iter: int = 500, tol: float = 1e-10,
               gtol: float = 1e-10, max_escapes: int = MAX_ESCAPES) -> Iterator[Record]:
    """The IRLS run of :func:`solve` as a stream: one :class:`~bftcore.foundations.records.Record` per step
    (iteration 0 the start; with ``h``), the last one with ``converged`` set and the run's ``verdict`` (why it
    ended, in words).  A record is yielded as soon as the solver knows whether it is the last: the step after it is
    taken, or the run ends (a run that ends because no step lowers the energy learns so only by trying one more),
    so the stream runs at most one step behind the solver and a consumer sees the fit move while it is computed.

    IRLS, like the gradient, cannot leave a saddle: a node without data halfway between its neighbours stays there
    (equal weights on both edges), which is a maximum along that node for a concave psi (the inverted cup).  So when a
    run would end converged, the Hessian's lowest eigenvalue is checked (dense, up to :data:`SADDLE_MAX_NODES` nodes);
    if it is negative, a step along its eigenvector that lowers the energy (step ``"curvature"``) restarts the IRLS,
    at most ``max_escapes`` times (0: plain IRLS)."""
    t0 = time.perf_counter()
    if isinstance(init, str):
        if init != "gaussian":
            raise ValueError(f"init must be 'gaussian' or an array of node values, got {init!r}")
        h = problem.gaussian_fit()
    else:
        h = np.asarray(init, dtype=float).reshape(-1)
        if h.shape != (problem.n,):
            raise ValueError(f"init must have one value per x node ({problem.n}), got shape {h.shape}")
    if not (isinstance(max_iter, (int, np.integer)) and max_iter >= 1):
        raise ValueError(f"max_iter must be a whole number >= 1, got {max_iter!r}")
    point = problem.at(h)
    count = 0

    def record(step, method, change):
        return Record(iteration=count, energy=point.value, train_error=None, test_error=None, mixing=np.ones(1),
                      step=step, residual=point.residual, method=method, change=change, converged=False,
                      elapsed_s=time.perf_counter() - t0, h=h, field=h)

    pending = record(0.0, "start", np.nan)  # the newest record, held until the solver knows whether it is the last
    count = 1
    energies = [point.value]
    eta_gradient = None
    escapes, verdict, converged, it = 0, "", False, 0
    for it in range(1, max_iter + 1):
        verdict = ""
        if point.residual <= gtol:
            verdict = f"converged: stationarity residual {point.residual:.2e} <= {gtol:g}"
        else:
            G = point.gradient
            A = problem.irls_matrix(h)
            d = -spla.splu(A, permc_spec="MMD_AT_PLUS_A").solve(G)
            slope = float(G @ d)
            eta, new_h, new_point = (line_search(problem, h, d, point.value, slope, eta0=1.0) if slope < 0
                                     else (0.0, h, None))
            method = "irls"
            if new_point is None:  # the gradient step (594), from the last accepted length (or 1 / max diag A)
                method = "gradient"
                eta0 = eta_gradient or 1.0 / float(np.max(A.diagonal()))
                eta, new_h, new_point = line_search(problem, h, -G, point.value, -float(G @ G), eta0=eta0, exact=True)
                if new_point is not None:
                    eta_gradient = eta
            if new_point is None:
                verdict = (f"{'converged' if point.residual <= np.sqrt(gtol) else 'stalled'}: neither the IRLS step "
                           f"nor the gradient step (594) lowers the energy (its rounding); stationarity residual "
                           f"{point.residual:.2e}")
            else:
                change = float(np.max(np.abs(new_h - h)))
                dE = point.value - new_point.value
                h, point = new_h, new_point
                energies.append(point.value)
                still = (change <= tol * max(problem.y_scale, float(np.max(np.abs(h))))
                         and dE <= 1e-12 * max(abs(energies[0]), abs(point.value)))
                yield pending
                pending, count = record(eta, method, change), count + 1
                if point.residual <= gtol:
                    verdict = f"converged: stationarity residual {point.residual:.2e} <= {gtol:g}"
                elif still:
                    verdict = (f"converged: the field moved by {change:.1e} and the energy by {dE:.1e} (a cusp's kink "
                               f"or the energy's rounding); stationarity residual {point.residual:.2e}")
                else:
                    continue
        if verdict.startswith("converged") and escapes < max_escapes and it < max_iter:
            moved = _negative_curvature_step(problem, h, point)
            if moved is not None:
                escapes += 1
                change = float(np.max(np.abs(moved[0] - h)))
                h, point = moved
                energies.append(point.value)
                yield pending
                pending, count = record(1.0, "curvature", change), count + 1
                continue
        converged = verdict.startswith("converged")
        break
    else:
        verdict = (f"not converged after {max_iter} iterations: the last one lowered the energy by "
                   f"{energies[-2] - energies[-1]:.2e} and left a stationarity residual {point.residual:.2e}; "
                   f"raise max_iter or start closer")
    if escapes:
        verdict += f" (after {escapes} step(s) out of a saddle along negative curvature)"
    pending.converged, pending.verdict = converged, verdict
    yield pending


def solve(problem: RobustRegression, init="gaussian", max_iter: int = 500, tol: float = 1e-10,
          gtol: float = 1e-10, max_escapes: int = MAX_ESCAPES) -> RobustFit:
    """Minimise the energy of ``problem`` by IRLS with a line search (module docstring).  ``init``: ``"gaussian"``
    (:meth:`RobustRegression.gaussian_fit`) or node values.  The records of :func:`irls_steps` (its saddle
    escapes), collected."""
    t0 = time.perf_counter()
    records = list(irls_steps(problem, init, max_iter, tol, gtol, max_escapes))
    last = records[-1]
    assert last.h is not None and last.verdict is not None
    return RobustFit(h=last.h, energy=[float(r.energy) for r in records], iterations=len(records) - 1,
                     converged=bool(last.converged), verdict=last.verdict, residual=float(last.residual),
                     steps=[r.method for r in records[1:]], records=records, elapsed_s=time.perf_counter() - t0)


# --------------------------------------------------------------------------------------------------------------
# the demo of Sect. 6.5 / 3.7.4: a step with one outlier
# --------------------------------------------------------------------------------------------------------------
#: Noise of the demo's data (y units) and its parameters in data units (decisions, see :func:`step_demo`).
STEP_NOISE = 0.1
STEP_LAMBDA = 1.0
STEP_B = 20.0


def step_outlier_data(seed: int = 0) -> tuple[Axis, list, np.ndarray]:
    """``(axis, data, truth)``: a unit step at x = 0.5 on 101 nodes of [0, 1] (Neumann), 40 points at distinct nodes
    ``default_rng(seed).choice(101, 40, replace=False)`` with ``y = step + 0.1 N(0, 1)``, and one outlier y = 3 at
    x = 0.2 (a node that also holds a regular datum for seed 0)."""
    axis = Axis(0.0, 1.0, 101, "neumann")
    x = axis.nodes
    truth = (x >= 0.5).astype(float)
    rng = np.random.default_rng(seed)
    idx = rng.choice(101, 40, replace=False)
    y = truth[idx] + STEP_NOISE * rng.standard_normal(40)
    return axis, np.column_stack([x[idx], y]).tolist() + [[0.2, 3.0]], truth


def step_measures(h: np.ndarray, truth: np.ndarray) -> dict:
    """RMSE to the truth over the nodes, the fit at x = 0.19, 0.2, 0.21 (the outlier's pull) and the largest edge
    difference within 2 cells of 0.5 (whether the jump is kept: 1 for a sharp unit step)."""
    return {"rmse": float(np.sqrt(np.mean((h - truth) ** 2))), "h_019": float(h[19]), "h_020": float(h[20]),
            "h_021": float(h[21]), "jump": float(np.max(np.abs(np.diff(h)[48:52])))}


def step_cases() -> dict[str, tuple[DataTerm, PriorPotential, float]]:
    """The demo's cases: ``name -> (data term, potential, lambda)``.

    Decisions, all in data units (y: the step's height; x: [0, 1], spacing h = 0.01): sigma = 0.1 (the noise) for
    every data term; lambda = 1 for the quadratic prior (``lambda hx sum (h')^2 / 2``); the cup and cusp have
    b = 20 (a slope: twice the noise per cell, 2 sigma / h, between the slopes a smoothed noisy fit has and the
    jump's 1/h = 100), a = 1, and lambda = lambda_quadratic b^2 / 2, so the cup has the quadratic's curvature at 0
    (psi''(0) = 2a/b^2; the cusp, whose curvature at 0 is infinite, gets the same lambda); eps = 0.1 = sigma and
    mu = sigma for the robust data terms.  Fig. 12's b is in grey levels between neighbouring pixels; rescaled by
    range and spacing alone (:func:`bftcore.foundations.potentials.slope_from_grey_levels`, b = 3 -> 1.18 y per
    unit x) it lies below the noise's own slopes (sigma sqrt(2) / h = 14), every edge sits in the flat tail and the
    prior stops smoothing (case ``cup_grey``: the fit interpolates the data)."""
    sig, lam, b = STEP_NOISE, STEP_LAMBDA, STEP_B
    gauss = data_term("gaussian", sigma=sig)
    quad = prior_potential("quadratic")
    b_grey = 3.0 / 255.0 * 1.0 / 0.01
    return {
        "quadratic": (gauss, quad, lam),
        "cup": (gauss, prior_potential("cup", a=1.0, b=b), lam * b ** 2 / 2),
        "cusp": (gauss, prior_potential("cusp", a=1.0, b=b), lam * b ** 2 / 2),
        "cup_grey": (gauss, prior_potential("cup", a=1.0, b=b_grey), lam * b_grey ** 2 / 2),
        "insensitive": (data_term("insensitive", eps=sig, sigma=sig), quad, lam),
        "mixture2": (data_term("mixture2", sigma=sig, mu=sig), quad, lam),
        "mixture11": (data_term("mixture11", sigma=sig, mu=sig), quad, lam),
        "insensitive_cup": (data_term("insensitive", eps=sig, sigma=sig), prior_potential("cup", a=1.0, b=b),
                            lam * b ** 2 / 2),
    }


def step_demo(cases=None) -> dict:
    """Fit the step-with-outlier data (:func:`step_outlier_data`) with each case of :func:`step_cases` (or the names
    given) and return ``{name: {measures..., "iterations", "converged", "verdict", "h": [...]}}``, JSON-ready."""
    axis, data, truth = step_outlier_data()
    table = step_cases()
    out = {}
    for name in cases or table:
        rho, psi, lam = table[name]
        fit = solve(RobustRegression(axis, data, rho, psi, lam=lam))
        out[name] = {**step_measures(fit.h, truth), "iterations": fit.iterations, "converged": fit.converged,
                     "verdict": fit.verdict, "h": fit.h.tolist()}
    return out


# --------------------------------------------------------------------------------------------------------------
# the conditional density p(y|x) with a non-quadratic prior on L = ln P (Sect. 6.5 on the 2-D grid)
# --------------------------------------------------------------------------------------------------------------
class PotentialLogDensityEnergy(LogDensityEnergy):
    """E_L with the Gaussian prior replaced by a potential (589): on normalised L,

        E = -sum_data L + lambda cell sum_e psi(omega_e),    omega = G (L - t),

    G the root of the prior operator (``G^T G = K``, :attr:`bftcore.foundations.operators.PriorOperator.root`: the
    x and y differences weighted by sqrt(lambda_x l2), sqrt(lambda_y l2), ...), cell = hx hy.  With psi(s) = s^2/2
    this is :class:`bftcore.models.density.LogDensityEnergy` with the template t (``(lambda/2)(L - t, K (L - t))``
    in the grid's inner product).  Stationarity: ``N - lambda cell G^T psi'(omega) - e^L Lambda_X hy = 0`` with
    ``Lambda_X = N_X - I_X lambda cell G^T psi'(omega)`` (the pattern of (716)-(717)); the point's ``gradient`` is
    the g-gradient of the existing energy with the prior's gradient replaced.

    Note: in 2-D the inverted cup (a < 0) rewards large filtered differences, so it makes patterns (the reaction
    term of (595)), not smoothing; only the cups (a > 0) smooth.  Measured on a 6 x 8 grid with 6 data: L falls
    without bound (P -> 0) at nodes away from the data, so no minimum is attained and the runs of IRLS and Newton
    end far apart (the energy is bounded below, by lambda cell a per edge).  A cusp's gradient does not vanish on
    its kinks: the solver's stopping rule ends such a run when no step lowers the energy, with a large residual.
    Every Fig. 12 potential is bounded, so a node's L can fall far (P -> 0) for at most lambda cell a per edge:
    with a small b the fit tends to the empirical density (measured, 32 x 32 grid, 100 data, cup b = 3,
    lambda = 4.5: 98.6% of the mass on the data's nodes, 341 IRLS iterations, 2.8 s).

    ``prior`` (what the separable preconditioner and massive relaxation see) is the Gaussian reference prior with
    lambda times the potential's start weight (1 for the quadratic, |a|/b^2 for the family): the curvature scale of
    the potential near s0.  The IRLS matrix (module docstring) on the tangent space of the normalisation is
    ``M = lambda cell G^T diag(|w|) G + diag(max(Lambda_X, 0) P hy)``, positive definite there: solved directly by
    :class:`IRLSDensityStep`, and ``hessp(v, convexified=True)``, which Newton uses where the Hessian is not positive
    definite.  Newton is no use for a cusp: its psi'' at the clip is huge and negative."""

    def __init__(self, grid: Grid, N: np.ndarray, K: PriorOperator, lam: float,
                 potential: PriorPotential | str = "quadratic", template=None):
        if not (np.isfinite(lam) and lam > 0):
            raise ValueError(f"lambda must be > 0 (the prior's strength), got {lam!r}")
        psi = potential if isinstance(potential, PriorPotential) else prior_potential(potential)
        t = np.zeros(grid.shape) if template is None else np.asarray(template, dtype=float)
        if t.shape != grid.shape or not np.all(np.isfinite(t)):
            raise ValueError(f"template must be a finite field of the grid's shape {grid.shape}, got {t.shape}")
        super().__init__(grid, N, Prior(K, lam * psi.start_weight, None if template is None else [t]))
        self.lam, self.psi, self.template = float(lam), psi, t
        self.G = sp.csr_matrix(K.root)
        self.GT = sp.csr_matrix(self.G.T)
        self.prior_scale = self.lam * grid.cell

    def at(self, L: np.ndarray) -> "PotentialLogPoint":
        return PotentialLogPoint(self, np.asarray(L, dtype=float))


class PotentialLogPoint(LogPoint):
    """:class:`PotentialLogDensityEnergy` at a normalised L (the prior's pieces replaced; the rest is E_L's)."""

    energy: PotentialLogDensityEnergy

    @cached_property
    def omega(self) -> np.ndarray:
        """omega = G (L - t), one value per edge (and per mass term)."""
        return self.energy.G @ np.ravel(self.phi - self.energy.template)

    @cached_property
    def prior_energy(self) -> float:
        return self.energy.prior_scale * float(np.sum(self.energy.psi.value(self.omega)))

    @property
    def mixing(self) -> np.ndarray:
        return np.ones(1)

    @cached_property
    def prior_gradient(self) -> np.ndarray:
        """``lambda cell G^T psi'(omega)`` (591)."""
        E = self.energy
        return (E.prior_scale * (E.GT @ E.psi.derivative(self.omega))).reshape(self.phi.shape)

    def _prior_action(self, v: np.ndarray, weights: np.ndarray) -> np.ndarray:
        E = self.energy
        return (E.prior_scale * (E.GT @ (weights * (E.G @ np.ravel(v))))).reshape(v.shape)

    def prior_hessp(self, v: np.ndarray) -> np.ndarray:
        """``lambda cell G^T diag(psi''(omega)) G v``."""
        return self._prior_action(v, self.energy.psi.second_derivative(self.omega))

    def hessp(self, v: np.ndarray, convexified: bool = False) -> np.ndarray:
        """The Hessian (160) with this prior, or (``convexified``) the IRLS matrix of the class docstring."""
        if not convexified:
            return super().hessp(v)
        E = self.energy
        V = self.P * E.grid.hy
        Jv = v - np.sum(V * v, axis=1, keepdims=True)
        w = np.maximum(np.abs(E.psi.weight(self.omega)), WEIGHT_FLOOR * E.psi.start_weight)
        MJv = self._prior_action(Jv, w) + np.maximum(self.lagrange_multiplier, 0.0)[:, None] * V * Jv
        return MJv - V * MJv.sum(axis=1, keepdims=True)


class IRLSDensityStep:
    """One IRLS iteration on L (the step protocol of :func:`bftcore.foundations.solvers.iterate`): the IRLS matrix M
    of :class:`PotentialLogDensityEnergy` solved exactly on the tangent space of the normalisation, the line search
    on the true energy from eta = 1, and the gradient step (594) when that finds no decrease.  Labels ``"irls"`` and
    ``"gradient"``.

    The direction solves the bordered (KKT) system ``M d + V mu = -G``, ``sum_y V d = 0`` per x (V = P hy; the gauge
    in which per-x constants, which do not move a normalised L, are removed), one sparse LU per iteration.  Decision:
    not the density's preconditioned CG (:class:`bftcore.models.density.SeparablePreconditioner`, built for the
    Gaussian K): with the cup's weights, which vary by orders of magnitude between smooth and saturated edges, it
    took 26 s for 202 iterations on a 32 x 32 grid (measured), the direct solve a fraction of that."""

    def __init__(self, energy: PotentialLogDensityEnergy):
        self.energy, self.eta_gradient = energy, 1.0
        nx, ny = energy.grid.shape
        self.rows = np.repeat(np.arange(nx), ny)

    def direction(self, point: "PotentialLogPoint") -> np.ndarray:
        E = point.energy
        nx, ny = E.grid.shape
        n = nx * ny
        V = (point.P * E.grid.hy).ravel()
        w = np.maximum(np.abs(E.psi.weight(point.omega)), WEIGHT_FLOOR * E.psi.start_weight)
        data = np.repeat(np.maximum(point.lagrange_multiplier, 0.0), ny) * V
        M = E.prior_scale * (E.GT @ sp.diags(w) @ E.G) + sp.diags(data)
        B = sp.csr_matrix((V, (self.rows, np.arange(n))), shape=(nx, n))
        kkt = sp.bmat([[M, B.T], [B, None]], format="csc")
        rhs = np.concatenate([-np.ravel(point.gradient), np.zeros(nx)])
        return saddle_lu(kkt).solve(rhs)[:n].reshape(E.grid.shape)

    def take(self, phi: np.ndarray, point):
        E = self.energy
        d = self.direction(point)
        slope = float(np.vdot(point.gradient, d))
        if slope < 0 and at_energy_rounding(slope, point.value):
            # at the energy's rounding the line search sees no decrease: the full step is kept if it lowers the
            # residual by a tenth without raising E beyond its rounding (DescentStep's rule, and why: E carries
            # -N ln c under y -> c y, so where the search gives up depends on the units: measured 3e-6 in ln p
            # between units, 1e-12 with it).  A tenth, not Newton's half: IRLS contracts linearly
            full_phi = E.normalise(phi + d)
            full = E.at(full_phi)
            if full.value <= point.value + 1e-15 * abs(point.value) and full.residual < 0.9 * point.residual:
                return 1.0, full_phi, full, "irls"
        if slope < 0:
            eta, new_phi, new_point = line_search(E, phi, d, point.value, slope, eta0=1.0)
            if new_point is not None:
                return eta, new_phi, new_point, "irls"
        G = point.gradient
        eta, new_phi, new_point = line_search(E, phi, -G, point.value, -float(np.vdot(G, G)),
                                              eta0=self.eta_gradient, exact=True)
        if new_point is not None:
            self.eta_gradient = eta
        return eta, new_phi, new_point, "gradient"


def solve_density(energy: PotentialLogDensityEnergy, L0=None, max_iter: int = 200, tol: float = 1e-9,
                  method: str = "irls") -> list[Record]:
    """Minimise a :class:`PotentialLogDensityEnergy` from ``L0`` (default: uniform) and return the solver's records
    (:func:`bftcore.foundations.solvers.iterate`; its stopping rule).  ``method``: ``"irls"`` (:class:`IRLSDensityStep`)
    or any of the solver's learning matrices (``"newton"`` uses the exact Hessian, the IRLS matrix where it is not
    positive definite)."""
    grid = energy.grid
    L0 = np.zeros(grid.shape) if L0 is None else np.asarray(L0, dtype=float)
    if L0.shape != grid.shape:
        raise ValueError(f"L0 must have the grid's shape {grid.shape}, got {L0.shape}")
    L0 = normalise_log(L0, grid.hy)
    if method == "irls":
        return list(solver_iterate(energy, L0, min_iter=1, max_iter=max_iter, tol=tol, step=IRLSDensityStep(energy)))
    return list(solver_iterate(energy, L0, method=method, min_iter=1, max_iter=max_iter, tol=tol))


# --------------------------------------------------------------------------------------------------------------
# the problem kind: a "model": "regression" document with a prior potential or a data term
# (bftcore.foundations.config._robust: the keys, their units and what is refused)
# --------------------------------------------------------------------------------------------------------------
def omega_unit(cfg: dict) -> float:
    """``S = sigma sqrt(l_k) / hx^k`` of a validated robust document: the unit of its potential's ``b`` and ``s0``
    (sigma = beta^-1/2, k the highest order of the prior present, hx the x spacing; on a one-node axis only l0 acts,
    k = 0).  With the l2 prior, omega = b S is a difference of b sigma between neighbouring nodes."""
    pr = cfg["prior"]
    sigma = cfg["beta"] ** -0.5
    hx = grid_from_config(cfg).x.h
    orders = [(k, pr[f"l{2 * k}"]) for k in range(4) if pr[f"l{2 * k}"] > 0]
    if cfg["grid"]["x"]["n"] == 1:
        orders = [(0, pr["l0"])]
    k, lk = orders[-1]
    return sigma * np.sqrt(lk) / hx ** k


def robust_terms(cfg: dict) -> tuple[DataTerm, PriorPotential, float]:
    """``(rho, psi, lam)`` of a validated robust document in the solver's absolute units (y, and omega's units): the
    document's pure numbers times sigma = beta^-1/2 and :func:`omega_unit` (the rules of
    :func:`bftcore.foundations.config._robust`), and the solver's lambda = beta lambda (the energy in nats)."""
    sigma = cfg["beta"] ** -0.5
    d, p = cfg["data_term"], cfg["prior"]["potential"]
    rho = data_term(d["name"], sigma=sigma, **{k: v * sigma for k, v in d.items() if k != "name"})
    unit = omega_unit(cfg)
    if p["name"] == "quadratic":
        psi = prior_potential("quadratic", s0=p["s0"] * unit)
    else:
        b = p["b"] * unit
        psi = prior_potential(p["name"], a=p["a"] * b ** 2 / 2, b=b, gamma=p["gamma"], s0=p["s0"] * unit)
    return rho, psi, cfg["beta"] * cfg["prior"]["lambda"]


def problem_from_config(config: dict) -> RobustRegression:
    """The :class:`RobustRegression` of a robust regression document, through the gate."""
    cfg = checked(config)
    if "data_term" not in cfg:
        raise ConfigError("this is robust regression; the document has no prior.potential, data_term or solver.method "
                          "\"irls\" (a plain regression is bftcore.models.regression's)")
    pr = cfg["prior"]
    rho, psi, lam = robust_terms(cfg)
    return RobustRegression(grid_from_config(cfg).x, cfg["data"], rho, psi, lam=lam, l0=pr["l0"], l2=pr["l2"],
                            l4=pr["l4"], l6=pr["l6"], template=cfg["templates"][0])


def _truth(cfg: dict, nodes: np.ndarray) -> np.ndarray | None:
    truth = cfg["truth"]
    if truth is None:
        return None
    return template_values(truth if isinstance(truth, dict) else {"kind": "array", "values": truth}, nodes)


@dataclass
class RobustRegressionFit(FitResult):
    """A robust regression fit as arrays: the records (the last with ``h``; energies in regression's units, the
    negative log posterior over beta), the problem, the solver's :class:`RobustFit` and the document it solved."""

    problem: RobustRegression
    fit: RobustFit
    cfg: dict

    @property
    def h(self) -> np.ndarray:
        return self.fit.h

    @property
    def converged(self) -> bool:
        return self.fit.converged

    def summary(self) -> dict:
        return {"energy": float(self.last.energy), "mixing": [1.0], "test_error": self.last.test_error,
                "converged": self.fit.converged, "stable": None}

    def to_document(self) -> dict:
        """The result document: regression's keys (``model``, ``x``, ``beta``, ``energy`` (the negative log posterior
        over beta: with the quadratic potential and the Gaussian data term regression's E_h), ``train_error`` (mean
        of (h(x_d) - y_d)^2 / 2, as regression's), ``test_error`` (with ``truth``), ``iterations``, ``converged``,
        ``mixing`` ([1]: one prior), ``h``, ``history``, ``elapsed_s``) and the robust ones: ``kind``
        ("robust_regression"), ``potential`` and ``data_term`` (the document's numbers, and ``absolute``: the same
        in y and omega units, with sigma and the solver's lambda = beta lambda), ``verdict`` (why the run ended, in
        words), ``steps`` (the kind of each step: irls, gradient, curvature), ``residual`` (relative stationarity
        residual) and ``notes`` ([verdict], which the CLI's summary prints)."""
        cfg, pb, fit = self.cfg, self.problem, self.fit
        psi, rho = pb.psi, pb.rho
        potential = {**cfg["prior"]["potential"], "absolute": {"a": psi.a if psi.kind == "family" else None,
                                                             "b": psi.b if psi.kind == "family" else None,
                                                             "s0": psi.s0, "unit": omega_unit(cfg),
                                                             "lambda": pb.lam}}
        absolute = {"sigma": rho.sigma, **{k: getattr(rho, k) for k in cfg["data_term"] if k != "name"}}
        last = self.last
        return {"model": "regression", "kind": RobustRegressionKind.name, "x": pb.nodes.tolist(),
                "beta": cfg["beta"], "energy": float(last.energy), "train_error": last.train_error,
                "test_error": last.test_error, "iterations": int(fit.iterations), "converged": bool(fit.converged),
                "mixing": [1.0], "h": fit.h.tolist(), "history": [r.summary() for r in self.history],
                "elapsed_s": self.elapsed_s, "potential": potential,
                "data_term": {**cfg["data_term"], "absolute": absolute}, "verdict": fit.verdict,
                "steps": list(fit.steps), "residual": float(fit.residual), "notes": [fit.verdict]}


def _completed(problem: RobustRegression, beta: float, truth: np.ndarray | None, rec: Record) -> Record:
    """A record of :func:`irls_steps` completed as regression's: its energy over beta, the train error (mean of
    (h(x_d) - y_d)^2 / 2) and, with ``truth``, the test error (mean of (h - truth)^2 / 2)."""
    h = np.asarray(rec.h, dtype=float)
    e = problem.residuals(h)
    return replace(rec, energy=rec.energy / beta, train_error=0.5 * float(np.mean(e ** 2)) if e.size else 0.0,
                   test_error=None if truth is None else 0.5 * float(np.mean((h - truth) ** 2)))


def config_steps(config: dict, init=None) -> tuple[RobustRegression, Iterator[Record]]:
    """``(problem, stream)``: the problem of a robust regression document and its IRLS records (:func:`irls_steps`
    from ``init`` node values or the Gaussian start, with the document's ``solver.max_iter`` and ``min(solver.tol,
    1e-10)``), each completed with regression's errors and its energy over beta as it comes."""
    cfg = checked(config)
    problem = problem_from_config(cfg)
    beta, so = cfg["beta"], cfg["solver"]
    truth = _truth(cfg, problem.nodes)
    steps = irls_steps(problem, init="gaussian" if init is None else init, max_iter=so["max_iter"],
                       tol=min(so["tol"], 1e-10))
    return problem, (_completed(problem, beta, truth, rec) for rec in steps)


def solve_config(config: dict, init=None, callback=None) -> RobustRegressionFit:
    """Fit a robust regression document by IRLS (:func:`solve`, from ``init`` node values or the Gaussian start),
    with the document's ``solver.max_iter``.  ``solver.tol`` only tightens :func:`solve`'s tolerance of the field's
    relative move, 1e-10 (the gate's default tol, 1e-8, is the Gaussian solvers'; on robust_prior both end at step 304);
    the stationarity residual's tolerance stays 1e-10.  ``solver.init``, ``mass2``, ``init_mass2`` and ``min_iter``
    are the Gaussian solvers' and are not used.  Every record is completed with regression's errors and its energy
    over beta; ``callback(record)`` sees each one after the run (IRLS runs to its end: a True return does not stop
    it)."""
    cfg = checked(config)
    problem = problem_from_config(cfg)
    beta, so = cfg["beta"], cfg["solver"]
    truth = _truth(cfg, problem.nodes)
    fit = solve(problem, init="gaussian" if init is None else init, max_iter=so["max_iter"],
                tol=min(so["tol"], 1e-10))
    history = []
    for rec in fit.records:
        done = _completed(problem, beta, truth, rec)
        history.append(done)
        if callback is not None:
            callback(done)
    history[-1].converged = fit.converged
    return RobustRegressionFit(history, fit.elapsed_s, problem, fit, cfg)


class RobustRegressionKind(MapOnlyKind):
    """Regression with a prior potential and a data term (the documents of
    :func:`bftcore.foundations.config._robust`) as a problem kind (:class:`bftcore.foundations.config.ProblemKind`),
    registered in :mod:`bftcore.models.problems` after plain regression and claiming the documents whose
    ``solver.method`` is ``"irls"`` (the gate sets it for every document with the robust keys)."""

    name: str = "robust_regression"
    model: str = "regression"
    claims: dict[str, object] = {"solver.method": "irls"}
    result_type: type[FitResult] = RobustRegressionFit
    drawn_as: str = "curve"
    y_on_grid: bool = False
    default_templates: tuple[str, ...] = ("constant",)
    no_evidence = ("the evidence of a robust regression is not defined here: a non-Gaussian prior potential or data "
                   "term has no closed-form evidence, and a Laplace approximation at a cup's edges is not one; set "
                   "lambda and beta by hand (or fit the Gaussian document for its evidence)")
    no_draws = ("posterior draws of a robust regression are not implemented: its posterior is not Gaussian (the cups "
                "are not convex, the data terms not quadratic), and neither exact draws nor a Laplace band about the "
                "MAP h would be honest; only the MAP fit is available")

    def nodes(self, cfg: dict) -> int:
        return cfg["grid"]["x"]["n"]

    def is_sparse_heavy(self, cfg: dict) -> bool:
        """No: one banded sparse LU per IRLS step (and, once converged, a dense eigendecomposition of up to
        :data:`SADDLE_MAX_NODES` nodes for the saddle check)."""
        return False

    def iterate(self, cfg: dict, init=None) -> Iterator[Record]:
        """The records of :func:`solve_config`, one per IRLS step (iteration 0 the Gaussian start), energies in
        regression's units, streamed as the run goes (:func:`config_steps`: at most one step behind the solver);
        the last carries the run's ``verdict``."""
        yield from config_steps(cfg, init)[1]

    def solve(self, cfg: dict, init=None, callback=None, check_stability: bool = False) -> FitResult:
        """:func:`solve_config` (it checks for saddles by itself: ``check_stability`` changes nothing)."""
        return solve_config(cfg, init, callback)



# --------------------------------------------------------------------------------------------------------------
# the problem kind: a "model": "density" document with a prior potential on L (issue 29; the gate's
# bftcore.foundations.config._robust, its density paragraph: the keys, their units and what is refused)
# --------------------------------------------------------------------------------------------------------------
#: What a student reads beside an inverted-cup density (the result document's ``notes``; the dashboard shows it).
INVERTED_CUP_PATTERNS = ("On a 2-D density the inverted cup rewards large differences of ln p between neighbouring "
                         "nodes instead of penalising them, so it does not smooth: it makes stripes and patterns, "
                         "and away from the data p falls towards 0 with no minimum to reach. Use the cup or the cusp "
                         "to smooth while keeping edges.")


def density_omega_unit(cfg: dict) -> float:
    """``S = max over the axes of sqrt(lambda_axis l_k) / h_axis^k`` of a validated robust density document: the unit
    of its potential's ``b`` and ``s0`` (k the highest order present; an axis of one node or weight 0 left out; the
    rule and why: :func:`bftcore.foundations.config._robust`).  It is the omega = G L of a k-th difference of ln P of
    1 between neighbouring nodes along the stiffer axis."""
    pr = cfg["prior"]
    k = highest_order(pr)
    lk = pr[f"l{2 * k}"]
    grid = grid_from_config(cfg)
    units = [np.sqrt(w * lk) / ax.h ** k for ax, w in ((grid.x, pr["lambda_x"]), (grid.y, pr["lambda_y"]))
             if ax.n > 1 and w > 0]
    return float(max(units))


def density_potential(cfg: dict) -> PriorPotential:
    """psi of a validated robust density document in omega's absolute units (:func:`density_omega_unit`; a in units
    of S^2 b^2 / 2, as regression's :func:`robust_terms`)."""
    p, unit = cfg["prior"]["potential"], density_omega_unit(cfg)
    if p["name"] == "quadratic":
        return prior_potential("quadratic", s0=p["s0"] * unit)
    b = p["b"] * unit
    return prior_potential(p["name"], a=p["a"] * b ** 2 / 2, b=b, gamma=p["gamma"], s0=p["s0"] * unit)


def density_problem_from_config(config: dict) -> DensityProblem:
    """The :class:`~bftcore.models.density.DensityProblem` of a robust density document, through the gate: its energy
    is the :class:`PotentialLogDensityEnergy` with the document's lambda, K (lambda_x, lambda_y, l0..l6), potential
    and template (none: t = 0)."""
    cfg = checked(config)
    if not (cfg["model"] == "density" and "potential" in cfg["prior"]):
        raise ConfigError("this is a density with a prior potential; the document is not one (model \"density\" "
                          "with prior.potential or solver.method \"irls\")")
    grid = grid_from_config(cfg)
    pr = cfg["prior"]
    K = PriorOperator(grid, pr["lambda_x"], pr["lambda_y"], pr["l0"], pr["l2"], pr["l4"], pr["l6"])
    t = template_field(cfg["templates"][0], grid, "L") if cfg["templates"] else None
    N = grid.counts(cfg["data"])
    energy = PotentialLogDensityEnergy(grid, N, K, pr["lambda"], density_potential(cfg), t)
    P_true = paper_true_density(grid) if cfg["truth"] == "paper" else None
    return DensityProblem(cfg, grid, N, K, energy, P_true)


def density_gaussian_start(problem: DensityProblem, init=None) -> np.ndarray:
    """The start of the IRLS: the Gaussian fit whose prior is the potential's reference (lambda times its start
    weight, the template t; :class:`PotentialLogDensityEnergy`), by the density's Newton from the document's
    ``solver.init`` (its mass2, min_iter, max_iter and tol); ``init`` an (nx, ny) field (a warm start) skips it."""
    cfg, E = problem.config, problem.energy
    if init is not None and not isinstance(init, str):
        return initial_field(problem, init)
    gauss = LogDensityEnergy(problem.grid, problem.N, E.prior)
    start = initial_field(DensityProblem(cfg, problem.grid, problem.N, problem.K, gauss, problem.P_true), init)
    so = cfg["solver"]
    last = None
    for last in solver_iterate(gauss, start, method="newton", mass2=so["mass2"], min_iter=so["min_iter"],
                               max_iter=so["max_iter"], tol=so["tol"]):
        pass
    assert last is not None and last.field is not None
    return np.asarray(last.field, dtype=float)


def density_verdict(rec: Record, tol: float, max_iter: int) -> tuple[bool, str]:
    """``(converged, verdict)`` of the last record of a density IRLS run (the stopping rule of
    :class:`bftcore.foundations.solvers.IterationController`), in words."""
    steps = int(rec.iteration)
    if rec.converged and rec.step == 0.0 and rec.change == 0.0:  # the step found no decrease
        ok = rec.residual <= max(np.sqrt(tol), 1e-12)
        return ok, (f"{'converged' if ok else 'stalled'}: neither the IRLS step nor the gradient step (594) lowers "
                    f"the energy (its rounding) after {steps} steps; stationarity residual {rec.residual:.2e}"
                    + ("" if ok else " (a cusp's kink, or no minimum attained: see the notes)"))
    if rec.converged:
        return True, (f"converged after {steps} IRLS steps: the field moved by {rec.change:.1e} and the stationarity "
                      f"residual is {rec.residual:.2e}")
    return False, (f"not converged after {max_iter} iterations: stationarity residual {rec.residual:.2e}; raise "
                   f"solver.max_iter or start closer")


def density_steps(config: dict, init=None) -> tuple[DensityProblem, Iterator[Record]]:
    """``(problem, stream)``: the problem of a robust density document and its IRLS records (iteration 0 the Gaussian
    start, :func:`density_gaussian_start`; then one per :class:`IRLSDensityStep` as it is taken, with the solver's
    stopping rule, ``solver.max_iter`` and ``solver.tol``), each completed as the density's
    (:func:`bftcore.models.density.records`: ``L``, ``P``, the train error and, with ``truth``, the test error
    against the paper's density); the last carries ``converged`` and the run's ``verdict``."""
    problem = density_problem_from_config(config)
    cfg, grid, E = problem.config, problem.grid, problem.energy
    assert isinstance(E, PotentialLogDensityEnergy)
    so = cfg["solver"]

    def stream() -> Iterator[Record]:
        L0 = normalise_log(density_gaussian_start(problem, init), grid.hy)
        for rec in solver_iterate(E, L0, min_iter=1, max_iter=so["max_iter"], tol=so["tol"],
                                  step=IRLSDensityStep(E)):
            L = np.asarray(rec.field, dtype=float)
            te = metrics.test_error(L, problem.P_true, grid) if problem.P_true is not None else None
            done = replace(rec, train_error=metrics.training_error(L, problem.N), test_error=te, L=L, P=np.exp(L))
            if rec.converged or rec.iteration == so["max_iter"]:
                done.converged, done.verdict = density_verdict(rec, so["tol"], so["max_iter"])
            yield done

    return problem, stream()


@dataclass
class RobustDensityFit(DensityFit):
    """A density fit with a prior potential: the density's fit (its records, the last with ``L`` and ``P``; the
    problem, whose energy is the :class:`PotentialLogDensityEnergy`) and the run's verdict."""

    verdict: str = ""

    def to_document(self) -> dict:
        """The density's result document (:meth:`bftcore.models.density.DensityFit.to_document`: ``energy`` is the
        energy with the potential, in nats) and ``kind`` ("robust_density"), ``potential`` (the document's numbers
        and ``absolute``: a, b, s0 in omega's units, the ``unit`` S of :func:`density_omega_unit` and lambda),
        ``verdict`` (why the run ended, in words), ``steps`` (irls or gradient, per step) and ``notes`` (the
        verdict and, for the inverted cup, :data:`INVERTED_CUP_PATTERNS`)."""
        doc = super().to_document()
        cfg, E = self.problem.config, self.problem.energy
        assert isinstance(E, PotentialLogDensityEnergy)
        psi = E.psi
        family = psi.kind == "family"
        potential = {**cfg["prior"]["potential"], "absolute": {"a": psi.a if family else None,
                                                             "b": psi.b if family else None, "s0": psi.s0,
                                                             "unit": density_omega_unit(cfg),
                                                             "lambda": cfg["prior"]["lambda"]}}
        notes = list(doc.get("notes", [])) + [self.verdict]
        if cfg["prior"]["potential"]["name"] == "inverted_cup":
            notes.append(INVERTED_CUP_PATTERNS)
        doc.update(kind=RobustDensityKind.name, potential=potential, verdict=self.verdict,
                   steps=[r.method for r in self.history[1:]], notes=notes)
        return doc


class RobustDensityKind(MapOnlyKind):
    """The conditional density p(y|x) with a prior potential on L = ln P (Sect. 6.5 on the 2-D grid, issue 29) as a
    problem kind (:class:`bftcore.foundations.config.ProblemKind`): the density documents whose ``solver.method``
    is ``"irls"`` (the gate sets it for every density with ``prior.potential``;
    :func:`bftcore.foundations.config._robust`).
    Drawn as the density is.  Note for the picture: the inverted cup makes patterns, not smoothing
    (:data:`INVERTED_CUP_PATTERNS`)."""

    name: str = "robust_density"
    model: str = "density"
    claims: dict[str, object] = {"model": "density", "solver.method": "irls"}
    result_type: type[FitResult] = RobustDensityFit
    drawn_as: str = "heatmap"
    y_on_grid: bool = True
    default_templates: tuple[str, ...] = ()
    no_evidence = ("the evidence of a density with a prior potential is not defined here: a non-Gaussian prior has no "
                   "closed-form evidence, and a Laplace approximation at a cup's edges is not one; set lambda by hand "
                   "(or fit the Gaussian document, without prior.potential, for its evidence)")
    no_draws = ("posterior draws of a density with a prior potential are not implemented: its posterior is not "
                "Gaussian (the cups are not convex), and neither exact draws nor a Laplace band about the MAP L would "
                "be honest; only the MAP fit is available")

    def nodes(self, cfg: dict) -> int:
        return cfg["grid"]["x"]["n"] * cfg["grid"]["y"]["n"]

    def is_sparse_heavy(self, cfg: dict) -> bool:
        """Yes: one sparse LU of the (nx ny + nx) bordered IRLS system per step (:class:`IRLSDensityStep`)."""
        return True

    def iterate(self, cfg: dict, init=None) -> Iterator[Record]:
        """The records of :func:`density_steps`, one per IRLS step as it is taken (iteration 0 the Gaussian
        start)."""
        yield from density_steps(cfg, init)[1]

    def solve(self, cfg: dict, init=None, callback=None, check_stability: bool = False) -> FitResult:
        """The records of :func:`density_steps` to the end (or until ``callback(record)`` returns True: the verdict
        then says so); ``check_stability`` checks the Hessian of the energy with the potential
        (:func:`bftcore.models.density.is_local_minimum`)."""
        problem, stream = density_steps(cfg, init)
        history, elapsed = run_to_end(stream, callback)
        last = history[-1]
        verdict = last.verdict or f"stopped by the caller after {last.iteration} steps"
        stable = is_local_minimum(problem, last.field) if check_stability else None
        return RobustDensityFit(history, elapsed, problem, stable, verdict)

