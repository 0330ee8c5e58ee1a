"""Gaussian regression with a mixture of Gaussian process priors ([001] Sects. 3-4, CONVENTIONS.md §3).

The regression function h lives on the x nodes of a grid.  Component j has the energy

    E_hj = 1/2 sum_data (h(x_d) - y_d)^2 + (lambda/2) (h - t_j, K_X (h - t_j)),    (f, g) = sum_i f_i g_i hx,

and the posterior over (h, j) is proportional to ``p_j exp(-beta E_hj)`` ([001] eqs. (6), (7): beta is the inverse
noise variance *and* the inverse temperature of the mixture).  All components share the inverse covariance
``lambda K_X`` (equal covariances, [001] Sect. 4.5), so the determinants in (20), (23) cancel.

In matrix form on the nodes: ``K_T = diag(n_i)`` (number of data at node i), ``t_T`` the mean datum at node i
(16), ``K_0 = lambda hx K_X`` and ``A = K_T + K_0``.  Gradients are partial derivatives with respect to the node
values h_i (so they are ``hx`` times the functional derivative); Hessians and ``massive_solve`` use the same
convention.  ``lambda_x``/``lambda_y`` of the JSON prior are not used by this model: its prior operator is
``lambda K_X`` exactly as in CONVENTIONS.md §3.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .config import grid_from_config, validate_config
from .grid import Axis
from .mixing import (
    ReducedMixture,
    check_beta,
    check_weights,
    detect_plateaus,
    fig7_config,
    mixing_coefficients,
    mixture_energy,
)
from .operators import axis_operator
from .records import FitResult, Record
from .solvers import iterate as solver_iterate
from .templates import template_values


def _snap_data(axis: Axis, data) -> tuple[np.ndarray, np.ndarray]:
    """Node indices and y values of ``[x, y]`` pairs (validated by the gate: finite, on the axis)."""
    pts = np.asarray(data if data is not None else [], dtype=float).reshape(-1, 2)
    return axis.snap(pts[:, 0]), pts[:, 1].copy()


# --------------------------------------------------------------------------------------------------------------
# the model: everything that does not depend on beta
# --------------------------------------------------------------------------------------------------------------
class RegressionModel:
    """Data, templates and prior of a regression mixture; the beta-independent pieces of [001] Sects. 4.3-4.5.

    Component solutions t̄_j (29), template variances V_j (40), the matrices B_j (39) and the diagonal of
    A^{-1} (within-component posterior variance times beta) do not depend on beta, because beta multiplies
    likelihood and prior alike; they are computed once (one sparse factorisation of A) and cached.

    Build it with :meth:`from_config`: the gate validates the document once, and the constructor only asserts.
    """

    def __init__(self, axis: Axis, data, templates, weights=None, lam: float = 1.0,
                 l0: float = 0.0, l2: float = 1.0, l4: float = 0.0, l6: float = 0.0, truth=None):
        self.axis = axis
        self.nodes = axis.nodes
        self.hx = axis.h
        n = axis.n
        self.ix, self.y = _snap_data(axis, data)
        assert templates, "a regression mixture needs at least one template (the gate says so by name)"
        self.templates = np.array([template_values(t, self.nodes) for t in templates])
        m = len(self.templates)
        self.weights = check_weights(weights, m)
        assert all(np.isfinite(v) and v >= 0 for v in (lam, l0, l2, l4, l6)), "the gate checks the prior"
        self.lam = float(lam)
        self.coeffs = dict(l0=float(l0), l2=float(l2), l4=float(l4), l6=float(l6))
        self.K0 = sp.csr_matrix(self.lam * self.hx * axis_operator(axis, **self.coeffs))
        self.counts = np.bincount(self.ix, minlength=n).astype(float)
        self.ysum = np.bincount(self.ix, weights=self.y, minlength=n)
        seen = self.counts > 0
        self.t_T = np.where(seen, self.ysum / np.where(seen, self.counts, 1.0), 0.0)   # (16) [001]
        # E_T(t_T): the spread of repeated measurements, (15), (17) [001]; common to all components
        self.offset = 0.5 * float(np.sum((self.y - self.t_T[self.ix]) ** 2))
        self.truth = None if truth is None else template_values(truth, self.nodes)
        self._cache: dict = {}

    @classmethod
    def from_config(cls, config: dict, validated: bool = False) -> "RegressionModel":
        """Model of a JSON document with ``"model": "regression"`` (CONVENTIONS.md §4), through the gate
        (:func:`bftcore.config.validate_config`: its defaults, its errors; ``validated=True`` for a document it has
        just returned).  ``truth`` may be a template object or a list of node values of the true regression
        function (used for the test error)."""
        cfg = config if validated else validate_config(config)
        if cfg["model"] != "regression":
            raise ValueError(f"this is the regression model; the config says model = {cfg['model']!r}")
        pr = cfg["prior"]
        truth = cfg["truth"]
        if truth is not None and not isinstance(truth, dict):
            truth = {"kind": "array", "values": truth}
        return cls(grid_from_config(cfg).x, cfg["data"], cfg["templates"], cfg["weights"] or None,
                   lam=pr["lambda"], l0=pr["l0"], l2=pr["l2"], l4=pr["l4"], l6=pr["l6"], truth=truth)

    # --- basic quantities ----------------------------------------------------------------------------------
    @property
    def m(self) -> int:
        return len(self.templates)

    @property
    def n(self) -> int:
        return self.axis.n

    @property
    def A(self) -> sp.csr_matrix:
        """A = K_T + K_0, the Hessian of every component energy E_hj."""
        return sp.csr_matrix(sp.diags(self.counts) + self.K0)

    def _factor(self):
        if "lu" not in self._cache:
            if self.lam == 0 or not any(self.coeffs.values()):
                if np.any(self.counts == 0):
                    raise ValueError("K_T + lambda K_X is singular: with lambda = 0 (or all l_k = 0) every x node "
                                     "needs data; set lambda > 0 and l2 > 0 or l0 > 0")
            elif self.coeffs["l0"] == 0 and self.counts.sum() == 0:
                raise ValueError("K_T + lambda K_X is singular: without data the prior needs a mass l0 > 0 "
                                 "(K_X annihilates constants); add data or set prior.l0 > 0")
            self._cache["lu"] = spla.splu(sp.csc_matrix(self.A), permc_spec="MMD_AT_PLUS_A")  # symmetric ordering
        return self._cache["lu"]

    def solve_A(self, rhs) -> np.ndarray:
        return self._factor().solve(np.asarray(rhs, dtype=float))

    def data_energy(self, h) -> float:
        """E_T = 1/2 sum_data (h(x_d) - y_d)^2, eq. (15) [001]."""
        r = np.asarray(h)[self.ix] - self.y
        return 0.5 * float(r @ r)

    def prior_energies(self, h) -> np.ndarray:
        """(lambda/2)(h - t_j, K_X (h - t_j)) for every component, eq. (14) [001]; shape (m,)."""
        d = np.asarray(h, dtype=float)[None, :] - self.templates
        return 0.5 * np.einsum("ji,ji->j", d, (self.K0 @ d.T).T)

    def component_energies(self, h) -> np.ndarray:
        """E_hj = E_T + E_0j, eq. (19) [001]."""
        return self.data_energy(h) + self.prior_energies(h)

    def train_error(self, h) -> float:
        """Training error: E_T / n = mean over data of (h(x_d) - y_d)^2 / 2 (0 without data)."""
        return self.data_energy(h) / max(1, self.y.size)

    def test_error(self, h):
        """Test error against a known truth: mean over x nodes of (h(x_i) - h_true(x_i))^2 / 2 (uniform p(x),
        noise-free target); None without truth."""
        if self.truth is None:
            return None
        return 0.5 * float(np.mean((np.asarray(h) - self.truth) ** 2))

    # --- beta-independent closed forms ---------------------------------------------------------------------
    @property
    def component_solutions(self) -> np.ndarray:
        """t̄_j = (K_T + K_0)^{-1} (K_T t_T + K_0 t_j), eq. (29) [001] / (555); shape (m, n)."""
        if "tbar" not in self._cache:
            rhs = self.ysum[:, None] + self.K0 @ self.templates.T
            self._cache["tbar"] = self.solve_A(rhs).T.reshape(self.m, self.n)
        return self._cache["tbar"]

    @property
    def template_variances(self) -> np.ndarray:
        """V_j = min_h [E_hj] - E_T(t_T) = Ẽ_0j, eq. (40) [001].

        Evaluated at the minimiser as ``1/2 |t̄_j - t_T|^2_{K_T} + 1/2 |t̄_j - t_j|^2_{K_0}`` (no cancellation)."""
        if "V" not in self._cache:
            tb = self.component_solutions
            r = tb - self.t_T
            d = tb - self.templates
            self._cache["V"] = (0.5 * np.einsum("ji,i,ji->j", r, self.counts, r)
                                + 0.5 * np.einsum("ji,ji->j", d, (self.K0 @ d.T).T))
        return self._cache["V"]

    @property
    def gram(self) -> np.ndarray:
        """G_kl = (t̄_k - t̄_1, A (t̄_l - t̄_1)) = B_1(k, l), using A (t̄_k - t̄_1) = K_0 (t_k - t_1)."""
        if "gram" not in self._cache:
            D = self.component_solutions - self.component_solutions[0]
            Dt = self.templates - self.templates[0]
            G = D @ (self.K0 @ Dt.T)
            self._cache["gram"] = 0.5 * (G + G.T)
        return self._cache["gram"]

    @property
    def reduced(self) -> ReducedMixture:
        """The reduced m-dimensional fixed-point problem (43) [001]."""
        if "reduced" not in self._cache:
            self._cache["reduced"] = ReducedMixture(self.weights, self.template_variances, self.gram, self.offset)
        return self._cache["reduced"]

    @property
    def B(self) -> np.ndarray:
        """B_j(k, l) = (t̄_k - t̄_j, (K_T + K_0)(t̄_l - t̄_j)), eq. (39) [001]; shape (m, m, m)."""
        return self.reduced.B

    def complete_average(self, a0=None) -> np.ndarray:
        """Complete template average t̄ = (K_T + K_0)^{-1}(K_T t_T + K_0 sum_j a0_j t_j), eq. (35) [001]: the
        beta -> 0 solution, with a0_j -> p_j (34) for equal covariances.  Equals sum_j a0_j t̄_j, eq. (41)."""
        a0 = self.weights if a0 is None else np.asarray(a0, dtype=float)
        return a0 @ self.component_solutions

    def low_temperature_solutions(self) -> list[dict]:
        """The beta -> infinity limit, eqs. (37)-(40) [001]: every t̄_j with
        ``2 V_j < B_j'(j, j) + 2 V_j'`` for all j' != j (38) is a solution; reports t̄_j, V_j, B_j and the flag."""
        V, B = self.template_variances, self.B
        out = []
        for j in range(self.m):
            ok = all(2 * V[j] < B[k, j, j] + 2 * V[k] for k in range(self.m) if k != j)
            out.append({"component": j, "tbar": self.component_solutions[j], "V": float(V[j]),
                        "B": B[j], "stable": bool(ok)})
        return out

    def posterior_variance_within(self) -> np.ndarray:
        """diag(A^{-1}): beta times the within-component posterior variance of h(x_i) (same for every j)."""
        if "diag_inv" not in self._cache:
            # sparse triangular solves with the cached factorisation: no dense BLAS (which is slow under load),
            # O(n^2 * bandwidth) in blocks of columns so memory stays O(n * block)
            lu, n, block = self._factor(), self.n, 256
            diag = np.empty(n)
            for s0 in range(0, n, block):
                cols = np.arange(s0, min(n, s0 + block))
                E = np.zeros((n, cols.size))
                E[cols, np.arange(cols.size)] = 1.0
                diag[cols] = lu.solve(E)[cols, np.arange(cols.size)]
            self._cache["diag_inv"] = diag
        return self._cache["diag_inv"]

    # --- beta-dependent --------------------------------------------------------------------------------------
    def exact_weights(self, beta: float) -> np.ndarray:
        """Exact mixture posterior b_j = p_j exp(-beta V_j) / sum_k (...), eqs. (28), (30)-(32) [001].

        For equal covariances the factor det(beta K̃/2 pi)^{1/2} of (30) is the same for all j and Ẽ_0j = V_j (40),
        so this equals the normalised p_j p(y_T | x_T, j) (see :meth:`log_evidences`)."""
        return mixing_coefficients(self.template_variances, self.weights, beta)

    def log_evidences(self, beta: float) -> np.ndarray:
        """ln p(y_T | x_T, D_0, j) of eq. (30) [001] for each component (no hyperprior), data on distinct nodes.

        ``-beta Ẽ_0j + 1/2 ln det(beta K̃ / 2 pi)`` with ``K̃ = (K_T^{-1} + K_0,TT^{-1})^{-1}`` (32), computed as
        ``[K_T - K_T A^{-1} K_T]_TT`` (the sign of the printed text after (486) is wrong, see notes §8.6).
        Requires a proper prior (prior.l0 > 0) and each datum on its own node; b_j needs neither.
        """
        beta = check_beta(beta)
        D = np.flatnonzero(self.counts)
        if np.any(self.counts[D] > 1):
            raise ValueError("log_evidences needs every datum on its own x node (repeated x give an extra "
                             "spread term); use exact_weights for b_j")
        if self.coeffs["l0"] <= 0:
            raise ValueError("the evidence of an improper prior (l0 = 0) is not defined; set prior.l0 > 0 "
                             "(b_j from exact_weights do not need it)")
        nD = self.counts[D]
        E = np.zeros((self.n, D.size))
        E[D, np.arange(D.size)] = nD
        Kt = np.diag(nD) - nD[:, None] * self.solve_A(E)[D, :]
        sign, logdet = np.linalg.slogdet(beta / (2 * np.pi) * 0.5 * (Kt + Kt.T))
        if sign <= 0:
            raise ValueError("K̃ is not positive definite; the prior covariance is singular on the data")
        return -beta * self.template_variances + 0.5 * logdet

    def exact(self, beta: float) -> dict:
        """Exact posterior summaries ([001] Sect. 4.3): weights b_j (28), predictive mean sum_j b_j t̄_j (27),
        and the posterior variance of h(x) = diag((beta A)^{-1}) + sum_j b_j (t̄_j - mean)^2 (noise excluded)."""
        beta = check_beta(beta)
        b = self.exact_weights(beta)
        tb = self.component_solutions
        mean = b @ tb
        var = self.posterior_variance_within() / beta + b @ (tb - mean) ** 2
        return {"b": b, "mean": mean, "var": var}

    def energy(self, beta: float) -> "RegressionMixtureEnergy":
        return RegressionMixtureEnergy(self, beta)

    # --- the reduced route --------------------------------------------------------------------------------------
    def field(self, a) -> np.ndarray:
        """h = sum_j a_j t̄_j, eq. (42) [001]."""
        return np.asarray(a, dtype=float) @ self.component_solutions

    def coordinates(self, h) -> np.ndarray:
        """Coordinates y of the A-orthogonal projection of h onto the affine span of the t̄_j (reduced space)."""
        Y = self.reduced.centres
        if Y.shape[1] == 0:
            return np.zeros(0)
        Dt = self.templates - self.templates[0]
        q = (self.K0 @ Dt.T).T @ (np.asarray(h, dtype=float) - self.component_solutions[0])
        return np.linalg.lstsq(Y, q, rcond=None)[0]

    def reduced_solution(self, sol: dict, beta: float) -> dict:
        """Attach h = sum a_j t̄_j, errors and the full energy to a reduced solution dict."""
        h = self.field(sol["mixing"])
        # the reduced energy already is the full mixture energy at h = sum a_j t̄_j (offset included), eq. (43)
        return {**sol, "h": h, "energy": float(sol["energy"]), "train_error": self.train_error(h),
                "test_error": self.test_error(h)}

    def fixed_points(self, beta: float) -> list[dict]:
        """All solutions of the reduced fixed point (43) [001] with their h, energy and stability."""
        return [self.reduced_solution(s, beta) for s in self.reduced.fixed_points(beta)]

    def solve_reduced(self, beta: float, init=None) -> tuple[np.ndarray, dict]:
        """Local MAP solution through the reduced problem, warm-started from a field h (None: the average (41)).

        This is the ``solve(beta, init) -> (field, result)`` callable of :mod:`bftcore.workflows` sweeps/basins."""
        y0 = None if init is None else self.coordinates(init)
        sol = self.reduced.minimize(beta, y0)
        res = self.reduced_solution(sol, beta)
        return res["h"], {"energy": res["energy"], "test_error": res["test_error"],
                          "train_error": res["train_error"], "mixing": res["mixing"].tolist(),
                          "stable": res["stable"], "converged": sol["converged"],
                          "exact_b": self.exact_weights(beta).tolist()}

    def initial_field(self, init: str = "average") -> np.ndarray:
        """Initial h: ``"template:<i>"`` (t_i), ``"uniform"`` (h = 0), ``"kernel"`` (the single-GP smoother
        (K_T + K_0)^{-1} K_T t_T), ``"empirical"`` (t_T at data nodes, the data mean elsewhere), ``"average"``
        (the complete template average (35))."""
        if init is None or init == "average":
            return self.complete_average()
        if init == "uniform":
            return np.zeros(self.n)
        if init == "kernel":
            return self.solve_A(self.ysum)
        if init == "empirical":
            fill = float(np.mean(self.y)) if self.y.size else 0.0
            return np.where(self.counts > 0, self.t_T, fill)
        if isinstance(init, str) and init.startswith("template:"):
            try:
                i = int(init.split(":", 1)[1])
                return self.templates[i].copy()
            except (ValueError, IndexError):
                raise ValueError(f"init {init!r}: give template:<index> with index in 0..{self.m - 1}") from None
        raise ValueError(f"unknown init {init!r}; use uniform, kernel, empirical, average or template:<index>")


# --------------------------------------------------------------------------------------------------------------
# the energy object of the solver protocol
# --------------------------------------------------------------------------------------------------------------
class RegressionMixtureEnergy:
    """E(h) = -(1/beta) ln sum_j p_j exp(-beta E_hj(h)), eqs. (18), (19) [001] (divided by beta).

    Implements the solver protocol (:mod:`bftcore.solvers`): ``at``, ``normalise`` (identity), the learning
    matrices' hooks ``massive_solve`` and ``newton_preconditioner``, and the declarations ``minimiser_step``,
    ``newton_loose_until`` and ``saddle_escape``; besides ``value``, ``gradient`` (stationarity (21)),
    ``hessp``, ``project`` (identity) and ``mixing`` (a_j of (23)).  The Hessian is
    ``A - beta sum_j a_j d_j d_j^T`` with ``d_j = K_0 (t_j - sum_k a_k t_k)``: the covariance of the component
    gradients under a, which makes the mixture energy non-convex.
    """

    field = "h"
    minimiser_step = None  # no constraint: the solver's descent step
    newton_loose_until = np.inf  # Newton's CG is solved to the sqrt(|G|/|G0|) forcing term from the start
    saddle_escape = False  # no convexified Hessian offered; negative curvature only truncates the CG

    def __init__(self, model: RegressionModel, beta: float):
        self.model = model
        self.beta = check_beta(beta)
        self._lu: dict[float, spla.SuperLU] = {}

    def at(self, h) -> "RegressionPoint":
        """The energy evaluated at h (the point protocol of :func:`bftcore.solvers.iterate`)."""
        return RegressionPoint(self, np.asarray(h, dtype=float))

    def normalise(self, h) -> np.ndarray:
        """Regression fields carry no constraint: the identity."""
        return np.asarray(h, dtype=float)

    def newton_preconditioner(self, point, previous=None, strong: bool = False, cache: dict | None = None):
        """Exact inverse of the single-component Hessian A = K_T + K_0 (one sparse factorisation, held by the
        model); the arguments of the solver protocol (the previous preconditioner, its strength, the solver's
        cache) are not needed."""
        return self.model.solve_A

    def _prior(self, h):
        return self.model.prior_energies(h)

    def mixing(self, h) -> np.ndarray:
        """a_j = p_j exp(-beta E_0j) / sum_k (...), eq. (23) [001] (E_T cancels)."""
        return mixing_coefficients(self._prior(h), self.model.weights, self.beta)

    def value(self, h) -> float:
        return self.model.data_energy(h) + mixture_energy(self._prior(h), self.model.weights, self.beta)

    def gradient(self, h) -> np.ndarray:
        """sum_j a_j (K_T (h - t_T) + K_0 (h - t_j)), eq. (21) [001]."""
        M = self.model
        h = np.asarray(h, dtype=float)
        a = self.mixing(h)
        return M.counts * h - M.ysum + M.K0 @ (h - a @ M.templates)

    def _directions(self, h):
        M = self.model
        a = self.mixing(h)
        return a, (M.K0 @ (M.templates - a @ M.templates).T).T   # rows d_j

    def hessp(self, h, v) -> np.ndarray:
        M = self.model
        v = np.asarray(v, dtype=float)
        a, d = self._directions(h)
        return M.counts * v + M.K0 @ v - self.beta * ((a * (d @ v)) @ d)

    def hessian(self, h) -> np.ndarray:
        """Dense Hessian (small grids, tests and the fallback Newton loop)."""
        a, d = self._directions(h)
        return self.model.A.toarray() - self.beta * (d.T * a) @ d

    def project(self, h) -> np.ndarray:
        return np.asarray(h, dtype=float)

    def massive_solve(self, r, mass2: float) -> np.ndarray:
        """(K_0 + mass2 I)^{-1} r with K_0 = lambda hx K_X, the massive-relaxation learning matrix (632)."""
        key = float(mass2)
        if key not in self._lu:
            Am = sp.csc_matrix(self.model.K0 + key * sp.identity(self.model.n))
            try:
                self._lu[key] = spla.splu(Am, permc_spec="MMD_AT_PLUS_A")
            except RuntimeError:
                raise ValueError(f"lambda K_X + m^2 I is singular with m^2 = {mass2}; use a mass m^2 > 0") from None
        return self._lu[key].solve(np.asarray(r, dtype=float))


class RegressionPoint:
    """RegressionMixtureEnergy at one h: value, gradient, hessp, mixing and the stationarity residual."""

    def __init__(self, energy: RegressionMixtureEnergy, h: np.ndarray):
        self.energy, self.phi = energy, h
        self.value = energy.value(h)
        self.gradient = energy.gradient(h)
        self.mixing = energy.mixing(h)

    def hessp(self, v) -> np.ndarray:
        return self.energy.hessp(self.phi, v)

    @property
    def residual(self) -> float:
        """max |gradient|: the residual of the stationarity equation (21) [001]."""
        return float(np.max(np.abs(self.gradient))) if self.gradient.size else 0.0


def _setup(config: dict, init, validated: bool = False):
    """Model, beta, energy, start and solver settings of a regression configuration; the solver's defaults are the
    gate's (:func:`bftcore.config.validate_config`), as for a density."""
    cfg = config if validated else validate_config(config)
    model = RegressionModel.from_config(cfg, validated=True)
    beta = cfg["beta"]
    so = cfg["solver"]
    h0 = model.initial_field(so["init"]) if init is None else np.asarray(init, dtype=float)
    if h0.shape != (model.n,):
        raise ValueError(f"init must have one value per x node ({model.n}), got shape {h0.shape}")
    kw = dict(method=so["method"], mass2=so["mass2"], min_iter=so["min_iter"], max_iter=so["max_iter"], tol=so["tol"])
    return model, beta, model.energy(beta), h0, kw


def _records(model: RegressionModel, energy: RegressionMixtureEnergy, h0, kw):
    """A :class:`~bftcore.records.Record` (with ``h``) per iteration of the learning algorithm
    (:func:`bftcore.solvers.iterate`)."""
    for rec in solver_iterate(energy, h0, **kw):
        h = np.asarray(rec.field, dtype=float)
        yield Record(iteration=rec.iteration, energy=rec.energy, train_error=model.train_error(h),
                     test_error=model.test_error(h), mixing=np.asarray(rec.mixing, dtype=float), step=rec.step,
                     residual=rec.residual, method=rec.method, change=rec.change, converged=rec.converged,
                     elapsed_s=rec.elapsed_s, h=h, field=h)


def iterate(config: dict, init=None, validated: bool = False):
    """Yield one :class:`~bftcore.records.Record` (with ``h``) per iteration of a regression fit; iteration 0 is
    the start.  Used by ``bftcore.api.iterate`` so the dashboard can stream a regression run like a density run."""
    model, _, energy, h0, kw = _setup(config, init, validated)
    yield from _records(model, energy, h0, kw)


def solve(config: dict, init=None, validated: bool = False) -> "RegressionFit":
    """Fit a regression config (CONVENTIONS.md §4, ``"model": "regression"``) and return the result as arrays.

    Solves the stationarity equation (21) [001] for h on the x nodes with the learning algorithm of
    ``solver.method`` (:func:`bftcore.solvers.iterate`).  ``init`` (an array of node values) overrides
    ``solver.init``."""
    t0 = time.perf_counter()
    model, beta, energy, h0, kw = _setup(config, init, validated)
    history = list(_records(model, energy, h0, kw))
    h = history[-1].h
    g = energy.gradient(h)
    converged = bool(history[-1].converged) or bool(
        np.linalg.norm(g) <= max(kw["tol"], 1e-8) * (1.0 + np.linalg.norm(model.ysum)))
    try:
        stable = bool(np.all(np.linalg.eigvalsh(energy.hessian(h)) > 0)) if model.n <= 2000 else None
    except np.linalg.LinAlgError:
        stable = None
    return RegressionFit(history, time.perf_counter() - t0, model, energy, converged, stable)


def fit(config: dict, init=None) -> dict:
    """The result document of :func:`solve` (:meth:`RegressionFit.to_document`)."""
    return solve(config, init).to_document()


@dataclass
class RegressionFit(FitResult):
    """A regression fit as arrays: the records (the last with ``h``), the model and energy at its beta, whether it
    converged (the solver's stopping rule was met, or the gradient vanishes) and whether the Hessian is positive
    definite at the solution (None above 2000 nodes)."""

    model: RegressionModel
    energy: RegressionMixtureEnergy
    converged: bool = False
    stable: bool | None = None

    @property
    def h(self) -> np.ndarray:
        assert self.last.h is not None
        return self.last.h

    def summary(self) -> dict:
        h = self.h
        return {"energy": float(self.energy.value(h)), "mixing": self.energy.mixing(h).tolist(),
                "test_error": self.model.test_error(h), "converged": self.converged, "stable": self.stable}

    def to_document(self) -> dict:
        """The result document.  Keys:
        ``energy`` (mixture energy at the MAP h), ``train_error`` (E_T/n: mean of (h(x_d) - y_d)^2/2 over the
        data), ``test_error`` (mean over x nodes of (h - h_true)^2/2 when ``truth`` is given, else None),
        ``iterations``, ``converged``, ``mixing`` (MAP a_j), ``h``, ``history`` (iteration, energy, train_error,
        test_error, mixing, step, residual, method per iteration; iteration 0 is the start), ``elapsed_s``,
        ``exact`` ({b, mean, var}: exact b_j (28), predictive mean (27) and posterior variance of h(x)), and the
        reduced-route extras ``component_solutions`` (t̄_j), ``template_variances`` (V_j), ``B`` (B_j),
        ``stable`` (Hessian positive definite at h), ``plateaus`` (:func:`bftcore.mixing.detect_plateaus` of the
        history)."""
        model, energy, h = self.model, self.energy, self.h
        exact = model.exact(energy.beta)
        history = [r.summary() for r in self.history]
        return {"model": "regression", "x": model.nodes.tolist(), "beta": energy.beta,
                "energy": float(energy.value(h)), "train_error": model.train_error(h),
                "test_error": model.test_error(h), "iterations": int(self.last.iteration),
                "converged": self.converged, "mixing": energy.mixing(h).tolist(), "h": h.tolist(),
                "history": history, "elapsed_s": self.elapsed_s,
                "exact": {k: np.asarray(v).tolist() for k, v in exact.items()},
                "component_solutions": model.component_solutions.tolist(),
                "template_variances": model.template_variances.tolist(), "B": model.B.tolist(),
                "stable": self.stable, "plateaus": detect_plateaus(history)}


def regression_presets() -> dict[str, dict]:
    """Named regression configs (CONVENTIONS.md §4 documents with ``"model": "regression"``).

    ``"two_trends"``: a rising (t_1 = x/2) and a falling (t_2 = 5 - x/2) linear template fight over five points
    on a hump, x in [0, 10] (101 Neumann nodes), lambda = 1, l2 = 1, l0 = 0.01, p = (1/2, 1/2).
    b = 3.79 and V_2 - V_1 = -0.149, so the low-temperature solutions t̄_1 and t̄_2 both pass (38).  A sweep over
    beta in [0.05, 5] (``bftcore.workflows.sweep_document``) finds one solution below beta_c = 1.376 (saddle
    node, located by bisection) and two stable branches on [1.376, 5] (in fact on [1.376, inf): with equal
    weights both component solutions stay stable as beta -> infinity): the up branch ends at a_1 ~ 4e-5 (the
    falling trend), the down branch from t̄_1 keeps a_1 ~ 1 down to beta_c and then jumps.  The exact weights
    b_j stay smooth: b = (0.32, 0.68) at beta = 5, while the MAP mixing is saturated on either branch.

    ``"fig7"``: the 0-dimensional model of Fig 3 [001] / Fig 7 as a regression on a one-node grid.
    """
    two = {"model": "regression",
           "grid": {"x": {"min": 0.0, "max": 10.0, "n": 101, "boundary": "neumann"}},
           "data": [[1.0, 1.2], [3.0, 2.0], [5.0, 2.5], [7.0, 2.4], [9.0, 0.9]],
           "prior": {"lambda": 1.0, "l0": 0.01, "l2": 1.0, "l4": 0.0, "l6": 0.0},
           "templates": [{"kind": "linear", "slope": 0.5, "intercept": 0.0},
                         {"kind": "linear", "slope": -0.5, "intercept": 5.0}],
           "weights": [0.5, 0.5], "beta": 3.0,
           "solver": {"method": "newton", "init": "kernel", "min_iter": 1, "max_iter": 100, "tol": 1e-10}}
    return {"two_trends": two, "fig7": fig7_config()}
