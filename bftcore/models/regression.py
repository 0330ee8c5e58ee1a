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
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.linalg.lapack import dtbtrs
from scipy.optimize import minimize

from ..foundations.config import (
    CHOOSE_DEFAULT_RANGE,
    cell_and_data,
    check_evidence_path,
    check_samples,
    checked,
    grid_from_config,
    internal_scale,
    lambda_bounds,
)
from ..foundations.grid import Axis
from ..foundations.limits import blas_threads
from ..foundations.mixing import (
    ReducedMixture,
    check_beta,
    check_weights,
    detect_plateaus,
    fig7_config,
    mixing_coefficients,
    mixture_energy,
)
from ..foundations.operators import axis_operator, axis_root, axis_symbol
from ..foundations.records import FitResult, Record
from ..foundations.solvers import iterate as solver_iterate
from ..foundations.templates import template_values


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
        self.template_specs = [dict(t) for t in templates]  # to evaluate them beyond the grid (regression_query)
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
    def from_config(cls, config: dict) -> "RegressionModel":
        """Model of a JSON document with ``"model": "regression"`` (CONVENTIONS.md §4), through the gate
        (:func:`bftcore.foundations.config.checked`: its defaults, its errors; a
        :class:`~bftcore.foundations.config.Valid` document is not checked again).  ``truth`` may be a template object
        or a list of node values of the true regression function (used for the test error)."""
        cfg = checked(config)
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

    @property
    def evidence(self) -> "RegressionEvidence":
        """The exact evidence of this model as a function of the hyperparameters (:class:`RegressionEvidence`)."""
        if "evidence" not in self._cache:
            self._cache["evidence"] = RegressionEvidence.from_model(self)
        return self._cache["evidence"]

    def log_evidences(self, beta: float) -> np.ndarray:
        """ln p(y_D | x_D, lambda, l0, beta, j) of eqs. (30)-(32) [001] for each component (no hyperprior), exact.

        Raw-data evidence of all N data (repeated x included: their spread E_T(t_T) and counts), and for l0 = 0
        the restricted evidence with a flat prior on the constants integrated out; see
        :class:`RegressionEvidence`.  For distinct nodes and l0 > 0 it equals the printed form
        ``-beta Ẽ_0j + 1/2 ln det(beta K̃ / 2 pi)`` with ``K̃ = (K_T^{-1} + K_0,TT^{-1})^{-1}`` (32) (the sign of the
        text after (486) is wrong, see notes/lemm-ch4-7-algorithms.md and
        notes/seeds-002-004 §4.2).  exp of it normalised with p_j is :meth:`exact_weights`."""
        beta = check_beta(beta, units=True)
        return self.evidence.log_evidences(beta)

    def log_evidence(self, beta: float) -> float:
        """ln p(y_D | x_D, lambda, l0, beta) = ln sum_j p_j p(y_D | j) of the mixture (log-sum-exp)."""
        return self.evidence.log_evidence(check_beta(beta, units=True))

    def posterior_samples(self, beta: float, n: int, rng=None) -> np.ndarray:
        """n exact draws of h from the posterior mixture, shape (n, nodes): component j ~ b_j (28) [001], then
        h ~ N(t̄_j, (beta A)^{-1}) (29), as h = t̄_j + U^{-1} z / sqrt(beta) with A = U^T U (Cholesky; banded
        when A is, e.g. Neumann, dense otherwise, e.g. periodic wrap-around) and z standard normal.  ``rng``: a
        numpy Generator or a seed."""
        return self.posterior_draws(beta, n, rng)[1]

    def posterior_draws(self, beta: float, n: int, rng=None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`posterior_samples` and the component of each draw."""
        beta = check_beta(beta, units=True)
        n = check_samples(n, self.n)
        rng = np.random.default_rng(rng)
        b = self.exact_weights(beta)
        comps = rng.choice(self.m, size=int(n), p=b)
        z = rng.standard_normal((self.n, int(n)))
        return comps, self.component_solutions[comps] + self._cholesky_solve(z).T / np.sqrt(beta)

    def _cholesky_solve(self, z) -> np.ndarray:
        """U^{-1} z with A = U^T U, so that U^{-1} z has covariance A^{-1} for standard normal z."""
        if "chol" not in self._cache:
            self._factor()   # the singular cases raise with their message
            A = sp.coo_matrix(self.A)
            u = int(np.max(A.col - A.row)) if A.nnz else 0
            if u < self.n // 4:
                ab = np.zeros((u + 1, self.n))
                Ac = self.A
                for k in range(u + 1):
                    ab[u - k, k:] = Ac.diagonal(k)
                self._cache["chol"] = ("banded", u, sla.cholesky_banded(ab, lower=False))
            else:
                self._cache["chol"] = ("dense", u, sla.cholesky(self.A.toarray(), lower=False))
        kind, u, U = self._cache["chol"]
        if kind == "banded":
            x, info = dtbtrs(U, z)
            assert info == 0
            return x
        return sla.solve_triangular(U, z, lower=False)

    def exact(self, beta: float) -> dict:
        """Exact posterior summaries ([001] Sect. 4.3): weights b_j (28), predictive mean sum_j b_j t̄_j (27),
        and the posterior variance of h(x) = diag((beta A)^{-1}) + sum_j b_j (t̄_j - mean)^2 (noise excluded)."""
        beta = check_beta(beta, units=True)
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

        This is the ``solve(beta, init) -> (field, result)`` callable of :mod:`bftcore.studies.workflows`
        sweeps/basins."""
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

    Implements the solver protocol (:mod:`bftcore.foundations.solvers`): ``at``, ``normalise`` (identity), the learning
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
        self.beta = check_beta(beta, units=True)
        self._lu: dict[float, spla.SuperLU] = {}

    def at(self, h) -> "RegressionPoint":
        """The energy evaluated at h (the point protocol of :func:`bftcore.foundations.solvers.iterate`)."""
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


def _setup(config: dict, init):
    """Model, beta, energy, start and solver settings of a regression configuration; the solver's defaults are the
    gate's (:func:`bftcore.foundations.config.validate_config`), as for a density."""
    cfg = checked(config)
    model = RegressionModel.from_config(cfg)
    beta = cfg["beta"]
    so = cfg["solver"]
    h0 = model.initial_field(so["init"]) if init is None else np.asarray(init, dtype=float)
    if h0.shape != (model.n,):
        raise ValueError(f"init must have one value per x node ({model.n}), got shape {h0.shape}")
    kw = dict(method=so["method"], mass2=so["mass2"], min_iter=so["min_iter"], max_iter=so["max_iter"], tol=so["tol"])
    return model, beta, model.energy(beta), h0, kw


def _records(model: RegressionModel, energy: RegressionMixtureEnergy, h0, kw):
    """A :class:`~bftcore.foundations.records.Record` (with ``h``) per iteration of the learning algorithm
    (:func:`bftcore.foundations.solvers.iterate`)."""
    for rec in solver_iterate(energy, h0, **kw):
        h = np.asarray(rec.field, dtype=float)
        yield Record(iteration=rec.iteration, energy=rec.energy, train_error=model.train_error(h),
                     test_error=model.test_error(h), mixing=np.asarray(rec.mixing, dtype=float), step=rec.step,
                     residual=rec.residual, method=rec.method, change=rec.change, converged=rec.converged,
                     elapsed_s=rec.elapsed_s, h=h, field=h)


def iterate(config: dict, init=None):
    """Yield one :class:`~bftcore.foundations.records.Record` (with ``h``) per iteration of a regression fit; iteration
    0 is the start.  Used by ``bftcore.api.iterate`` so the dashboard can stream a regression run like a density run."""
    model, _, energy, h0, kw = _setup(config, init)
    yield from _records(model, energy, h0, kw)


def solve(config: dict, init=None) -> "RegressionFit":
    """Fit a regression config (CONVENTIONS.md §4, ``"model": "regression"``) and return the result as arrays.

    Solves the stationarity equation (21) [001] for h on the x nodes with the learning algorithm of
    ``solver.method`` (:func:`bftcore.foundations.solvers.iterate`).  ``init`` (an array of node values) overrides
    ``solver.init``."""
    t0 = time.perf_counter()
    model, beta, energy, h0, kw = _setup(config, init)
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


def exact_posterior(config: dict) -> dict:
    """The exact posterior of a validated regression document, closed form ([001] Sect. 4.3): ``{"b", "mean",
    "var"}`` as arrays (:meth:`RegressionModel.exact`), with no MAP solve: what the dashboard shows beside a run."""
    return RegressionModel.from_config(config).exact(config["beta"])


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
        ``stable`` (Hessian positive definite at h), ``plateaus`` (:func:`bftcore.foundations.mixing.detect_plateaus` of
        the history)."""
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


# --------------------------------------------------------------------------------------------------------------
# the evidence: exact Gaussian marginal likelihood of the data as a function of the hyperparameters
# --------------------------------------------------------------------------------------------------------------
#: Hyperparameters the evidence can be maximised over (:func:`optimise_evidence`); the scalar ones can be walked
#: (:func:`evidence_path`, :func:`evidence_surface`).
MAXIMISABLE_PARAMETERS = ("lambda", "l0", "beta", "weights")
SCALAR_PARAMETERS = ("lambda", "l0", "beta")
#: Default box of :func:`optimise_evidence` (values, searched on a log scale).
EVIDENCE_BOUNDS = {"lambda": (1e-6, 1e6), "l0": (1e-8, 1e4), "beta": (1e-6, 1e8)}
#: Bounds of the softmax coordinates w_j = ln p_j + const of the weights: p_j >= e^-30 p_max.
WEIGHT_LOG_BOUNDS = (-30.0, 0.0)
_LOG_2PI = float(np.log(2 * np.pi))


class EvidenceTerms:
    """The (lambda, l0)-dependent pieces of the evidence, from one sparse LU factorisation of A = K_T + K_0.

    ``tbar`` (t̄_j, (29) [001]), ``V`` (V_j = Ẽ_0j, (40)), ``prior_at_tbar`` (E_0j(t̄_j) = (lambda/2)|t̄_j - t_j|²_K_X),
    ``dist2`` (sum_i (t̄_j - t_j)_i²), ``logdet_K0`` (ln det K_0, or the log pseudo-determinant on the range of
    K_X when l0 = 0), ``logdet_A`` and ``null_dim`` (dimension of the flat, integrated-out null space: 0 when
    l0 > 0).  Trace terms of the gradient are computed on first use (:meth:`traces`)."""

    def __init__(self, ev: "RegressionEvidence", lam: float, l0: float):
        self.lam, self.l0 = lam, l0
        scale = lam * ev.hx
        self.null_dim = ev.null_dim if l0 == 0 else 0
        if self.null_dim and ev.N == 0:
            raise ValueError(ev.null_space_message)
        self.K0 = sp.csr_matrix(scale * (ev.KX_rest + l0 * sp.identity(ev.n, format="csr")))
        A = sp.csc_matrix(sp.diags(ev.counts) + self.K0)
        try:
            self.lu = spla.splu(A, permc_spec="MMD_AT_PLUS_A")
        except RuntimeError:
            raise ValueError(ev.null_space_message if self.null_dim else
                             "K_T + lambda hx K_X is singular; raise lambda or l0") from None
        u = np.abs(self.lu.U.diagonal())
        if not np.all(u > 1e-13 * u.max()):
            raise ValueError(ev.null_space_message if self.null_dim else
                             "K_T + lambda hx K_X is singular to working precision; raise lambda or l0")
        self.logdet_A = float(np.sum(np.log(u)))              # A is positive definite: det A = prod |U_ii|
        sym = ev.sym_rest + l0
        live = ~ev.null if self.null_dim else np.ones(ev.n, bool)
        self.sym = sym
        self.logdet_K0 = float(live.sum() * np.log(scale) + np.sum(np.log(sym[live])))
        rhs = ev.ysum[:, None] + self.K0 @ ev.templates.T
        self.tbar = self.lu.solve(rhs).T.reshape(ev.m, ev.n)
        r = self.tbar - ev.t_T
        d = self.tbar - ev.templates
        # through the root, differences first: (d, K_0 d) of a smooth d with the assembled stiff K_0 (l6) cancels to
        # 1e-6 of its value, which moved the chosen lambda by 1e-4 between unit systems (tests/test_units.py)
        Gd = ev.root_rest @ d.T
        self.prior_at_tbar = 0.5 * scale * (np.einsum("ij,ij->j", Gd, Gd) + l0 * np.einsum("ji,ji->j", d, d))
        self.V = 0.5 * np.einsum("ji,i,ji->j", r, ev.counts, r) + self.prior_at_tbar
        self.dist2 = np.einsum("ji,ji->j", d, d)
        self._ev = ev
        self._traces: tuple[float, float] | None = None

    def log_evidences(self, beta) -> np.ndarray:
        """ln p(y_D | lambda, l0, beta, j) for each component j (shape (m,), or (len(beta), m) for an array beta):

        ``-beta (E_T(t_T) + V_j) + (N/2) ln(beta/2 pi) + 1/2 [ln det K_0 - ln det A] + (k/2) ln(2 pi/beta)``,

        the Gaussian integral of ``(beta/2 pi)^{N/2} exp(-beta E_hj) det(beta K_0/2 pi)^{1/2}`` over h; k is the
        dimension of the integrated-out null space (l0 = 0, see :class:`RegressionEvidence`), else 0."""
        ev = self._ev
        b = np.asarray(beta, dtype=float)[..., None]
        return (-b * (ev.offset + self.V) + 0.5 * (ev.N - self.null_dim) * np.log(b)
                + 0.5 * (self.logdet_K0 - self.logdet_A) - 0.5 * (ev.N - self.null_dim) * _LOG_2PI)

    def traces(self) -> tuple[float, float]:
        """(tr(A^{-1} K_T), tr(A^{-1})): the derivatives of ln det A by ln lambda and l0 (over lambda hx).

        Data-space form: with S the unit columns of the ñ distinct data nodes, Y = A^{-1} S gives
        tr(A^{-1} K_T) = sum_d n_d Y_dd, and A^{-1} = K_0^{-1} - A^{-1} K_T K_0^{-1} gives
        tr(A^{-1}) = tr(K_0^{-1}) - sum_d n_d (Z^T Y)_dd with Z = K_0^{-1} S: 2 ñ sparse solves, no dense inverse.
        tr(A^{-1}) is only needed (and only defined this way) for l0 > 0."""
        if self._traces is None:
            ev = self._ev
            D, nD = ev.sites, ev.counts[ev.sites]
            E = np.zeros((ev.n, D.size))
            E[D, np.arange(D.size)] = 1.0
            Y = self.lu.solve(E) if D.size else E
            tr_KT = float(np.sum(nD * Y[D, np.arange(D.size)]))
            tr_inv = np.nan
            if self.l0 > 0:
                scale = self.lam * ev.hx
                Z = spla.splu(sp.csc_matrix(self.K0), permc_spec="MMD_AT_PLUS_A").solve(E) if D.size else E
                tr_inv = float(np.sum(1.0 / (scale * self.sym)) - np.sum(nD * np.einsum("id,id->d", Z, Y)))
            self._traces = (tr_KT, tr_inv)
        return self._traces

    def log_gradients(self, beta: float) -> dict:
        """Derivatives of each component's ln evidence by ln lambda, ln l0 (l0 > 0) and ln beta; shape (m,) each.

        d/d ln lambda = -beta E_0j(t̄_j) + (r - n)/2 + tr(A^{-1} K_T)/2   (r = rank of K_0; envelope theorem for V_j)
        d/d ln l0     = l0 [-beta (lambda hx/2) |t̄_j - t_j|^2 + 1/2 sum_i 1/K_X,i - (lambda hx/2) tr(A^{-1})]
        d/d ln beta   = -beta (E_T(t_T) + V_j) + (N - k)/2"""
        ev = self._ev
        tr_KT, tr_inv = self.traces()
        out = {"lambda": -beta * self.prior_at_tbar - 0.5 * self.null_dim + 0.5 * tr_KT,
               "beta": -beta * (ev.offset + self.V) + 0.5 * (ev.N - self.null_dim)}
        if self.l0 > 0:
            s = self.lam * ev.hx
            out["l0"] = self.l0 * (-0.5 * beta * s * self.dist2 + 0.5 * np.sum(1.0 / self.sym) - 0.5 * s * tr_inv)
        return out


class RegressionEvidence:
    """Exact log evidence ln p(y_D | lambda, l0, beta, p) of a regression mixture, its gradient, and its maximum.

    Each component is a Gaussian model: h ~ N(t_j, (beta K_0)^{-1}) with K_0 = lambda hx K_X, and
    y_d ~ N(h(x_d), 1/beta) ([001] eqs. (6), (7)).  h is integrated out exactly (no approximation):

        ln p_j = -beta (E_T(t_T) + V_j) + (N/2) ln(beta/2 pi) + 1/2 [ln det K_0 - ln det A],  A = K_T + K_0,

    the *raw-data* evidence of all N data: repeated x on one node keep their within-node spread E_T(t_T) (15), (17)
    and their counts in K_T.  It equals the site-averaged evidence (30)-(32) [001] plus a constant in lambda and l0
    (notes §2.3) that does depend on beta, so beta must be chosen with this form.  The mixture evidence is
    ``ln sum_j p_j ev_j`` (log-sum-exp, ev_j = exp(ln p_j) above) and b_j = p_j ev_j / sum_k p_k ev_k is the exact
    posterior (28) [001].

    Grid (precision) form with sparse LU factorisations of A, not the data-space form with C_DD: C = K_0^{-1} is
    dense, and the grid form also covers l0 = 0, where C does not exist.  ln det K_0 comes from the eigenvalues of
    K_X (:func:`bftcore.foundations.operators.axis_symbol`), exact and O(n).  Cost per (lambda, l0): one factorisation
    of the sparse (banded, or banded plus the periodic corners) A and m solves; beta and the weights cost nothing more
    (a path over 30 lambda values on 200 nodes takes some 30 ms).  The gradient adds 2 ñ solves (ñ = distinct data
    nodes).  ln p is exact to about 1e-10 absolute (ln det A and ln det K_0 are hundreds each on such grids).

    **l0 = 0 (improper prior).**  K_X = -l2 Delta + l4 Delta^2 - l6 Delta^3 annihilates the constants (the only
    null vectors of the lattice Laplacian, periodic or Neumann), so the prior is flat along them.  As DEFT and
    REML do, a flat prior of unit density in the orthonormal coordinate c = (1/sqrt(n)) sum_i h_i of the null space
    is integrated out with h, giving the finite restricted evidence

        ln p_j = -beta (E_T + V_j) + ((N - k)/2) ln(beta/2 pi) + 1/2 [ln pdet K_0 - ln det A],   k = 1,

    pdet the product of the non-zero eigenvalues.  It is the limit of the proper one: with l0 > 0 the prior
    precision of c is beta lambda hx l0, so ``ln p_j(l0) - (k/2) ln(beta lambda hx l0 / 2 pi) -> ln p_j(0)`` as
    l0 -> 0, with an O(l0) error.  It needs data that see the null space (one datum for the constants); without,
    a ValueError says so.  Another scale of the flat density (say unit density in the mean level sum_i h_i / n)
    shifts every ln p_j by the same constant: the b_j and the maximising lambda and beta do not change, but
    comparing an l0 = 0 evidence with an l0 > 0 one depends on this convention.
    """

    def __init__(self, axis: Axis, ix, y, templates, weights=None, lam: float = 1.0, l0: float = 0.0,
                 l2: float = 1.0, l4: float = 0.0, l6: float = 0.0):
        self.axis, self.n, self.hx = axis, axis.n, axis.h
        self.ix = np.asarray(ix, dtype=int)
        self.y = np.asarray(y, dtype=float)
        self.templates = np.atleast_2d(np.asarray(templates, dtype=float))
        self.m = len(self.templates)
        self.weights = check_weights(weights, self.m)
        self.lam, self.l0 = float(lam), float(l0)
        self.KX_rest = sp.csr_matrix(axis_operator(axis, l2=l2, l4=l4, l6=l6))
        self.root_rest = axis_root(axis, l2=l2, l4=l4, l6=l6)  # G with G^T G = KX_rest
        self.sym_rest = axis_symbol(axis, l2=l2, l4=l4, l6=l6)
        # exactly zero: the constant mode (2 - 2 cos 0); the next eigenvalue of an l6 prior is (pi/n)^6 times the
        # largest, below any relative threshold on fine grids
        self.null = self.sym_rest <= 0.0
        self.null_dim = int(self.null.sum())
        self.counts = np.bincount(self.ix, minlength=self.n).astype(float)
        self.ysum = np.bincount(self.ix, weights=self.y, minlength=self.n)
        seen = self.counts > 0
        self.t_T = np.where(seen, self.ysum / np.where(seen, self.counts, 1.0), 0.0)
        self.offset = 0.5 * float(np.sum((self.y - self.t_T[self.ix]) ** 2))
        self.N = int(self.y.size)
        self.sites = np.flatnonzero(seen)
        self._terms: OrderedDict = OrderedDict()

    @classmethod
    def from_model(cls, model: "RegressionModel") -> "RegressionEvidence":
        return cls(model.axis, model.ix, model.y, model.templates, model.weights, lam=model.lam, **model.coeffs)

    @classmethod
    def from_config(cls, config: dict) -> "RegressionEvidence":
        return cls.from_model(RegressionModel.from_config(config))

    @property
    def null_space_message(self) -> str:
        what = "the constant functions" if self.null_dim == 1 else f"a {self.null_dim}-dimensional space"
        return (f"the evidence with l0 = 0 integrates a flat prior over the null space of K_X ({what}), and the "
                f"data do not determine h there ({self.N} data), so the evidence is not finite; add data "
                f"(one datum fixes the constants) or set prior.l0 > 0")

    # --- evaluation ---------------------------------------------------------------------------------------------
    def _values(self, lam=None, l0=None, beta=None, weights=None):
        lam = self.lam if lam is None else float(lam)
        l0 = self.l0 if l0 is None else float(l0)
        if not (np.isfinite(lam) and lam > 0):
            raise ValueError(f"the evidence needs lambda > 0 (a finite number), got {lam!r}")
        if not (np.isfinite(l0) and l0 >= 0):
            raise ValueError(f"the evidence needs l0 >= 0 (a finite number), got {l0!r}")
        p = self.weights if weights is None else check_weights(weights, self.m)
        return lam, l0, (None if beta is None else check_beta(beta, units=True)), p

    def terms(self, lam=None, l0=None) -> EvidenceTerms:
        """The factorised pieces at (lambda, l0) (None: the model's), the last few kept."""
        lam, l0, _, _ = self._values(lam, l0)
        key = (lam, l0)
        if key in self._terms:
            self._terms.move_to_end(key)
        else:
            self._terms[key] = EvidenceTerms(self, lam, l0)
            while len(self._terms) > 4:
                self._terms.popitem(last=False)
        return self._terms[key]

    def log_evidences(self, beta: float, lam=None, l0=None) -> np.ndarray:
        """ln p(y_D | lambda, l0, beta, j), one per component (see the class docstring)."""
        lam, l0, beta, _ = self._values(lam, l0, beta)
        return self.terms(lam, l0).log_evidences(beta)

    def log_evidence(self, beta: float, lam=None, l0=None, weights=None) -> float:
        """ln p(y_D | lambda, l0, beta, p) = ln sum_j p_j p(y_D | j) of the mixture, eq. (28) [001]'s denominator."""
        lam, l0, beta, p = self._values(lam, l0, beta, weights)
        return float(_logsumexp(_log(p) + self.terms(lam, l0).log_evidences(beta)))

    def posterior_weights(self, beta: float, lam=None, l0=None, weights=None) -> np.ndarray:
        """b_j = p_j p(y_D | j) / sum_k p_k p(y_D | k), eq. (28) [001]."""
        lam, l0, beta, p = self._values(lam, l0, beta, weights)
        return _softmax(_log(p) + self.terms(lam, l0).log_evidences(beta))

    def gradient(self, beta: float, lam=None, l0=None, weights=None) -> dict:
        """Gradient of the mixture log evidence: ``lambda``, ``l0`` (only for l0 > 0), ``beta`` are derivatives
        by the logarithms; ``weights`` are derivatives by the softmax coordinates w_j of p_j = e^{w_j}/sum e^{w_k}
        (``b_j - p_j``).  sum_j b_j of the component derivatives (:meth:`EvidenceTerms.log_gradients`)."""
        lam, l0, beta, p = self._values(lam, l0, beta, weights)
        t = self.terms(lam, l0)
        b = _softmax(_log(p) + t.log_evidences(beta))
        out = {k: float(b @ g) for k, g in t.log_gradients(beta).items()}
        out["weights"] = b - p
        return out

    # --- paths and the maximum -------------------------------------------------------------------------------
    def check_has_data(self, what: str) -> None:
        """Refuse to trace or maximise the evidence of no data: ln p = 0 whatever the hyperparameters, so a path
        is flat and its "maximum" an arbitrary value.  (The value itself, 0, is still given by
        :meth:`log_evidences`: the posterior weights of no data are the prior's.)"""
        if self.N == 0:
            raise ValueError(f"with no data the evidence p(D | {what}) is 1 for every {what}, so there is "
                             f"nothing to choose; add data points")

    def path(self, name: str, values, beta: float, lam=None, l0=None, weights=None) -> dict:
        """ln evidence along one hyperparameter (``lambda``, ``l0`` or ``beta``), the others fixed.

        Returns ``{name: values, "log_evidence": (k,), "components": (k, m) ln p(y|j), "b": (k, m),
        "best": {name: value, "log_evidence": value}}``.  A path over beta costs one factorisation in all."""
        _check_scalar_name(name)
        self.check_has_data(name)
        vals = _positive_values(values, name, allow_zero=name == "l0")
        lam, l0, beta, p = self._values(lam, l0, beta, weights)
        if name == "beta":
            for v in vals:
                check_beta(v, units=True)
            comps = np.atleast_2d(self.terms(lam, l0).log_evidences(vals))
        else:
            rows = []
            for v in vals:
                try:
                    rows.append(self.terms(**{"lam": lam, "l0": l0, _KW[name]: v}).log_evidences(beta))
                except ValueError:  # A singular to working precision at this value: a gap in the path
                    rows.append(np.full(self.m, np.nan))
            comps = np.array(rows).reshape(vals.size, self.m)
            if not np.any(np.isfinite(comps)):
                self.terms(**{"lam": lam, "l0": l0, _KW[name]: float(vals[0])})  # raises the reason
        w = _log(p) + comps
        L = _logsumexp(w, axis=1)
        k = int(np.nanargmax(L))
        return {name: vals, "log_evidence": L, "components": comps, "b": _softmax(w, axis=1),
                "best": {name: float(vals[k]), "log_evidence": float(L[k])}}

    def surface(self, first: tuple, second: tuple, beta: float, lam=None, l0=None, weights=None) -> dict:
        """ln evidence over two hyperparameters: ``{"axes": (name1, name2), name1: values1, name2: values2,
        "log_evidence": (k1, k2) array, "best": {name1: v, name2: v, "log_evidence": value}}``."""
        (n1, v1), (n2, v2) = first, second
        self.check_has_data(f"{n1}, {n2}")
        _check_scalar_name(n1)
        _check_scalar_name(n2)
        if n1 == n2:
            raise ValueError(f"an evidence surface needs two different parameters, got {n1!r} twice")
        v1 = _positive_values(v1, n1, allow_zero=n1 == "l0")
        v2 = _positive_values(v2, n2, allow_zero=n2 == "l0")
        lam, l0, beta, p = self._values(lam, l0, beta, weights)
        base = {"lambda": lam, "l0": l0, "beta": beta}
        S = np.empty((v1.size, v2.size))
        for i, a in enumerate(v1):
            fixed = {**base, n1: a}
            row = self.path(n2, v2, beta=fixed["beta"], lam=fixed["lambda"], l0=fixed["l0"], weights=p)
            S[i] = row["log_evidence"]
        i1, i2 = (int(k) for k in np.unravel_index(int(np.argmax(S)), S.shape))
        return {"axes": (n1, n2), n1: v1, n2: v2, "log_evidence": S,
                "best": {n1: float(v1[i1]), n2: float(v2[i2]), "log_evidence": float(S[i1, i2])}}

    def optimise(self, params=("lambda", "beta"), beta: float = 1.0, lam=None, l0=None, weights=None,
                 bounds: dict | None = None, start: dict | None = None, grid_points: int = 7,
                 starts: int = 3) -> dict:
        """Maximise the mixture log evidence over ``params`` (a subset of :data:`MAXIMISABLE_PARAMETERS`).

        L-BFGS-B (scipy) on ln lambda, ln l0, ln beta and the softmax coordinates of the weights, with the analytic
        gradient (:meth:`gradient`) and the box :data:`EVIDENCE_BOUNDS` (``bounds`` overrides, {name: (lo, hi)}).
        A coarse grid first (``grid_points`` log-spaced values per parameter among lambda and l0 over
        :data:`bftcore.foundations.config.CHOOSE_DEFAULT_RANGE` within the bounds, 25 beta values, which cost nothing
        extra) picks the ``starts`` best starts, so a bad local optimum of a multi-modal mixture evidence is unlikely;
        ``start`` ({name: value}, e.g. the best points of evidence paths) is tried as well.
        Choosing the weights: the evidence is linear in p, so its maximum is the vertex of the best component;
        it is approached up to the bound p_j >= e^-30 p_max of the softmax coordinates.  An optimised l0 starts
        above 0 (the search is on ln l0).

        Returns ``{"lambda", "l0", "beta", "weights" (list), "log_evidence", "iterations" (of the winning
        L-BFGS-B run plus the Newton polishing steps), "evaluations" (all evidence evaluations, grid included),
        "converged" (every chosen scalar not on a bound has |d ln p / d ln value| <= 1e-6), "gradient"
        ({name: derivative by the log / softmax coordinate} at the result, for the chosen names),
        "at_bound" (names whose value sits on a bound), "chosen" (the names optimised)}``."""
        params = tuple(params)
        bad = [q for q in params if q not in MAXIMISABLE_PARAMETERS]
        if bad or not params or len(set(params)) != len(params):
            raise ValueError(f"optimise the evidence over distinct names among {', '.join(MAXIMISABLE_PARAMETERS)}; "
                             f"got {list(params)}")
        self.check_has_data(", ".join(params))
        lam, l0, beta, p = self._values(lam, l0, beta, weights)
        box = {**EVIDENCE_BOUNDS, **(bounds or {})}
        for q in SCALAR_PARAMETERS:
            lo, hi = (float(v) for v in box[q])
            if not (0 < lo < hi and np.isfinite(hi)):
                raise ValueError(f"bounds[{q!r}] must be (lo, hi) with 0 < lo < hi, got {box[q]!r}")
            box[q] = (lo, hi)
        scalars = [q for q in SCALAR_PARAMETERS if q in params]
        free_w = "weights" in params and self.m > 1
        values = {"lambda": lam, "l0": l0, "beta": beta}
        if "l0" in scalars and l0 == 0:
            values["l0"] = float(np.sqrt(box["l0"][0] * box["l0"][1]))
        evaluations = 0

        def unpack(x):
            v = dict(values)
            for i, q in enumerate(scalars):
                v[q] = float(np.exp(x[i]))
            w = x[len(scalars):] if free_w else None
            return v, (_softmax(w) if free_w else p)

        def objective(x):
            nonlocal evaluations
            evaluations += 1
            v, pw = unpack(x)
            try:
                L = self.log_evidence(v["beta"], v["lambda"], v["l0"], pw)
                g = self.gradient(v["beta"], v["lambda"], v["l0"], pw)
            except ValueError:
                return np.inf, np.zeros_like(x)
            grad = [g[q] for q in scalars] + (list(g["weights"]) if free_w else [])
            return -L, -np.asarray(grad, dtype=float)

        # the coarse grid: lambda x l0 (one factorisation each), beta and the weights' vertex in closed form
        axes = {}
        for q in ("lambda", "l0"):
            if q in scalars:
                lo, hi, _ = CHOOSE_DEFAULT_RANGE[q]
                if bounds and q in bounds:  # a range of the caller's (from the data, in any units): all of it
                    lo, hi = box[q]
                lo, hi = max(lo, box[q][0]), min(hi, box[q][1])
                axes[q] = np.geomspace(lo, hi, grid_points) if lo < hi else np.array([box[q][0]])
            else:
                axes[q] = np.array([values[q]])
        blo, bhi = box["beta"] if bounds and "beta" in bounds else _clip_range(CHOOSE_DEFAULT_RANGE["beta"][:2],
                                                                                box["beta"])
        betas = np.geomspace(blo, bhi, 25) if "beta" in scalars else np.array([beta])
        candidates = []
        for a in axes["lambda"]:
            for c in axes["l0"]:
                try:
                    comps = np.atleast_2d(self.terms(a, c).log_evidences(betas))
                except ValueError:
                    continue
                evaluations += betas.size
                if free_w:
                    score, jbest = comps.max(axis=1), comps.argmax(axis=1)
                else:
                    score, jbest = _logsumexp(_log(p) + comps, axis=1), np.zeros(betas.size, int)
                for k in range(betas.size):
                    candidates.append((float(score[k]), a, c, float(betas[k]), int(jbest[k])))
        if not candidates:
            raise ValueError("the evidence is not finite anywhere on the starting grid; " + self.null_space_message)
        candidates.sort(key=lambda t: -t[0])
        candidates = candidates[:max(1, starts)]
        if start:
            unknown = set(start) - set(SCALAR_PARAMETERS)
            if unknown:
                raise ValueError(f"start names {sorted(unknown)}; give values of {', '.join(SCALAR_PARAMETERS)}")
            s0 = {**values, **{q: float(v) for q, v in start.items()}}
            s0 = {q: (float(np.clip(s0[q], *box[q])) if q in scalars else s0[q]) for q in SCALAR_PARAMETERS}
            comps = self.terms(s0["lambda"], s0["l0"]).log_evidences(s0["beta"])
            candidates.append((0.0, s0["lambda"], s0["l0"], s0["beta"], int(np.argmax(comps))))
        lower = [np.log(box[q][0]) for q in scalars] + ([WEIGHT_LOG_BOUNDS[0]] * self.m if free_w else [])
        upper = [np.log(box[q][1]) for q in scalars] + ([WEIGHT_LOG_BOUNDS[1]] * self.m if free_w else [])
        best = None
        for _, a, c, bb, jb in candidates:
            start = {"lambda": a, "l0": c, "beta": bb}
            x0 = [np.log(start[q]) for q in scalars]
            if free_w:
                x0 += list(np.where(np.arange(self.m) == jb, 0.0, np.log(0.1 / (self.m - 1))))
            res = minimize(objective, np.asarray(x0), jac=True, method="L-BFGS-B", bounds=list(zip(lower, upper)),
                           options={"maxiter": 500, "ftol": 1e-15, "gtol": 1e-10})
            if best is None or res.fun < best.fun:
                best = res
        assert best is not None
        # L-BFGS-B stops when the line search cannot see a decrease below the rounding of ln p (~1e-14), which
        # leaves gradients ~1e-6; Newton steps on the analytic gradient (Hessian by its central differences) of
        # the interior scalar parameters bring them to rounding level
        x, fx, steps = _polish(objective, best.x, best.fun, len(scalars), np.asarray(lower), np.asarray(upper))
        v, pw = unpack(x)
        g = self.gradient(v["beta"], v["lambda"], v["l0"], pw)
        at_bound = [q for i, q in enumerate(scalars) if min(abs(x[i] - lower[i]), abs(x[i] - upper[i])) < 1e-8]
        interior = [abs(g[q]) for q in scalars if q not in at_bound]
        return {"lambda": v["lambda"], "l0": v["l0"], "beta": v["beta"], "weights": [float(x) for x in pw],
                "log_evidence": float(-fx), "iterations": int(best.nit) + steps, "evaluations": evaluations,
                "converged": bool(max(interior, default=0.0) <= 1e-6), "chosen": list(params),
                "gradient": {q: (list(map(float, g["weights"])) if q == "weights" else float(g[q]))
                             for q in params if q in g},
                "at_bound": at_bound}


_KW = {"lambda": "lam", "l0": "l0"}


def _polish(objective, x, fx, k: int, lower, upper, max_steps: int = 8):
    """Newton steps on the first k coordinates (those strictly inside the box) of an L-BFGS-B result; a step is
    kept only if it stays in the box, shrinks the gradient and does not raise the objective beyond rounding (the
    Hessian is checked positive definite, so this is a maximum of the evidence)."""
    x = np.array(x, dtype=float)
    steps = 0
    for _ in range(max_steps):
        f0, g0 = objective(x)
        free = [i for i in range(k) if lower[i] + 1e-8 < x[i] < upper[i] - 1e-8]
        if not free or np.max(np.abs(g0[free])) < 1e-11:
            break
        h = 1e-5
        H = np.empty((len(free), len(free)))
        for a, i in enumerate(free):
            e = np.zeros_like(x)
            e[i] = h
            H[a] = (objective(x + e)[1][free] - objective(x - e)[1][free]) / (2 * h)
        H = 0.5 * (H + H.T)
        try:
            np.linalg.cholesky(H)
            dx = np.linalg.solve(H, -g0[free])
        except np.linalg.LinAlgError:
            break
        xn = x.copy()
        xn[free] += dx
        if np.any(xn < lower) or np.any(xn > upper):
            break
        f1, g1 = objective(xn)
        # ln det A and ln det K_0 (hundreds each, of opposite sign) leave ln p exact to ~1e-10 only, and to 1e-7
        # with a stiff l6 K_0 (measured), while the gradient stays exact: a step that shrinks the gradient at a
        # positive definite Hessian is kept unless ln p falls beyond that rounding
        if not (np.max(np.abs(g1[free])) < np.max(np.abs(g0[free])) and f1 <= f0 + 1e-6 * max(1.0, abs(f0))):
            break
        x, fx = xn, f1
        steps += 1
    return x, fx, steps


def _log(p) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(p, dtype=float))


def _logsumexp(w, axis=None):
    w = np.asarray(w, dtype=float)
    mx = np.max(w, axis=axis, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    with np.errstate(under="ignore"):
        out = np.log(np.sum(np.exp(w - mx), axis=axis, keepdims=True)) + mx
    return out.squeeze() if axis is None else np.squeeze(out, axis=axis)


def _softmax(w, axis=None) -> np.ndarray:
    w = np.asarray(w, dtype=float)
    with np.errstate(under="ignore"):
        e = np.exp(w - np.max(w, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _clip_range(rng, box):
    lo, hi = max(rng[0], box[0]), min(rng[1], box[1])
    return (lo, hi) if lo < hi else box


def _check_scalar_name(name) -> None:
    if name not in SCALAR_PARAMETERS:
        raise ValueError(f"an evidence path runs over one of {', '.join(SCALAR_PARAMETERS)}, got {name!r}")


def _positive_values(values, name: str, allow_zero: bool = False) -> np.ndarray:
    try:
        v = np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):
        raise ValueError(f"the {name} values of an evidence path must be numbers, got {values!r}") from None
    ok = np.isfinite(v) & ((v >= 0) if allow_zero else (v > 0))
    if v.size == 0 or not ok.all():
        need = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"the {name} values of an evidence path must be finite numbers {need} (at least one); "
                         f"bad: {v[~ok][:5].tolist() if v.size else 'none given'}")
    return v


# --- the config-level functions the CLI calls ------------------------------------------------------------------
def _evidence_setup(config: dict):
    blas_threads()   # as every run of the API: one BLAS thread (bftcore.foundations.limits), which L-BFGS-B needs badly
    cfg = checked(config)
    ev = RegressionEvidence.from_config(cfg)
    return cfg, ev


def evidence(config: dict) -> dict:
    """The evidence of a regression document at its hyperparameters: ``{"log_evidence" (mixture),
    "components" (ln p(y|j), shape (m,)), "b" (posterior weights (28) [001]), "gradient" ({lambda, l0 (when
    l0 > 0), beta: derivative by the log; weights: by the softmax coordinates})}``."""
    cfg, ev = _evidence_setup(config)
    beta = cfg["beta"]
    return {"log_evidence": ev.log_evidence(beta), "components": ev.log_evidences(beta),
            "b": ev.posterior_weights(beta), "gradient": ev.gradient(beta)}


def default_range(config: dict, name: str) -> tuple[float, float]:
    """Where the evidence looks for ``name`` of a validated regression document, from its grid and data, so that the
    search is the same in any units: lambda (units of x^(2k-1): the data term and the prior are both in units of
    y^2) from a prior weaker than the data on every mode (``0.1 c / s_max``) to one stronger than the data on every
    mode it penalises (``10 c / s_min``; s the eigenvalues of ``hx K_X``, s_min the smallest above 0, c the data per
    node), within the gate's :func:`~bftcore.foundations.config.lambda_bounds`; beta (1 / the noise variance, units of
    1/y^2) from 1e-3 to 1e8 over the variance of the data's y; l0 (units of K) over the gate's default range in the
    grid's internal coordinates (nodes spaced 1)."""
    cfg = checked(config)
    if name == "lambda":
        grid = grid_from_config(cfg)
        hx, data = cell_and_data(cfg, grid)
        s = hx * axis_symbol(grid.x, **{k: cfg["prior"][k] for k in ("l0", "l2", "l4", "l6")})
        smax = float(np.max(s))
        lo, hi = lambda_bounds(cfg)
        return max(0.1 * data / smax, lo), min(10.0 * data / float(np.min(s[s > 1e-12 * smax])), hi)
    if name == "beta":
        y = np.asarray([p[1] for p in cfg["data"]], dtype=float)
        var = (float(np.var(y)) or float(np.mean(np.square(y))) or 1.0) if y.size else 1.0
        return 1e-3 / var, 1e8 / var
    lo, hi, _ = CHOOSE_DEFAULT_RANGE[name]
    rho = internal_scale(cfg, grid_from_config(cfg))
    return lo * rho, hi * rho


def evidence_path(config: dict, name: str, values=None) -> dict:
    """ln p(y_D | ...) along ``name`` (``"lambda"``, ``"l0"`` or ``"beta"``) over ``values`` (None: 30 log-spaced
    values over :func:`default_range`, from the grid and the data), the other hyperparameters as in the document;
    :meth:`RegressionEvidence.path` (keys ``name``, ``log_evidence``, ``components``, ``b``, ``best``; arrays).  The
    path is checked against the evidence budget of the gate."""
    cfg, ev = _evidence_setup(config)
    _check_scalar_name(name)
    if values is None:
        values = np.geomspace(*default_range(cfg, name), CHOOSE_DEFAULT_RANGE[name][2])
    vals = np.asarray(values, dtype=float).ravel()
    check_evidence_path(int(vals.size), ev.n, where=f"the evidence path over {name}")
    beta = cfg["beta"]
    if name != "beta" and "beta" in (cfg.get("choose") or {}):  # beta is still to be chosen: the document's value
        beta = float(np.sqrt(np.prod(default_range(cfg, "beta"))))  # is a placeholder; the middle of its range
    return ev.path(name, vals, beta=beta)


def evidence_surface(config: dict, first: tuple, second: tuple) -> dict:
    """ln p(y_D | ...) over two hyperparameters, ``first = (name1, values1)``, ``second = (name2, values2)``;
    :meth:`RegressionEvidence.surface` (keys ``axes``, name1, name2, ``log_evidence`` of shape (k1, k2),
    ``best``).  Each axis is checked against the budget of an evidence path; the surface costs one factorisation
    per pair of (lambda, l0) values (beta is free), so put beta on an axis where you can."""
    cfg, ev = _evidence_setup(config)
    for name, values in (first, second):   # each axis within the budget of a path
        check_evidence_path(int(np.asarray(values, dtype=float).size), ev.n,
                            where=f"the evidence surface's axis {name}")
    return ev.surface(first, second, beta=cfg["beta"])


def optimise_evidence(config: dict, params=("lambda", "beta"), bounds: dict | None = None,
                      start: dict | None = None) -> dict:
    """Maximise the evidence of a regression document over ``params`` (names of :data:`MAXIMISABLE_PARAMETERS`),
    the others fixed at the document's values; ``bounds`` {name: (lo, hi)} and ``start`` {name: value} as in
    :meth:`RegressionEvidence.optimise` (keys ``lambda``, ``l0``, ``beta``,
    ``weights``, ``log_evidence``, ``iterations``, ``evaluations``, ``converged``, ``gradient``, ``at_bound``,
    ``chosen``)."""
    cfg, ev = _evidence_setup(config)
    return ev.optimise(params, beta=cfg["beta"], bounds=bounds, start=start)


def regression_presets() -> dict[str, dict]:
    """Named regression configs (CONVENTIONS.md §4 documents with ``"model": "regression"``).

    ``"two_trends"``: a rising (t_1 = x/2) and a falling (t_2 = 5 - x/2) linear template fight over five points
    on a hump, x in [0, 10] (101 Neumann nodes), lambda = 1, l2 = 1, l0 = 0.01, p = (1/2, 1/2).
    b = 3.79 and V_2 - V_1 = -0.149, so the low-temperature solutions t̄_1 and t̄_2 both pass (38).  A sweep over
    beta in [0.05, 5] (``bftcore.studies.workflows.sweep_document``) finds one solution below beta_c = 1.376 (saddle
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


class RegressionKind:
    """Gaussian regression with mixtures of GP priors as a problem kind
    (:class:`bftcore.foundations.config.ProblemKind`), registered in :mod:`bftcore.models.problems`.  Its methods
    call this module's functions of the same names."""

    name: str = "regression"
    model: str = "regression"
    path_parameters: tuple[str, ...] = SCALAR_PARAMETERS
    has_exact: bool = True
    y_on_grid: bool = False
    default_templates: tuple[str, ...] = ("constant",)
    result_type: type[FitResult] = RegressionFit
    drawn_as: str = "curve"
    claims: dict[str, object] = {}

    def nodes(self, cfg: dict) -> int:
        return cfg["grid"]["x"]["n"]

    def is_sparse_heavy(self, cfg: dict) -> bool:
        return False

    def iterate(self, cfg: dict, init=None) -> Iterator[Record]:
        yield from iterate(cfg, init)

    def solve(self, cfg: dict, init=None, callback=None, check_stability: bool = False) -> FitResult:
        return solve(cfg, init)

    def evidence_path(self, cfg: dict, param: str, values) -> dict:
        """The exact path, its optimum between the path's ends refined from its best point (the path alone stops
        at a grid value)."""
        doc = dict(evidence_path(cfg, param, values))
        lo, hi = float(np.min(doc[param])), float(np.max(doc[param]))
        opt = optimise_evidence(cfg, (param,), bounds={param: (lo, hi)}, start={param: float(doc["best"][param])})
        if opt["log_evidence"] >= doc["best"]["log_evidence"]:
            doc["best"] = {param: float(opt[param]), "log_evidence": float(opt["log_evidence"])}
        doc["method"] = "exact"
        for key in ("log_evidence", "components", "b"):  # a gap (A singular at that value) is null in JSON
            doc[key] = np.where(np.isfinite(doc[key]), doc[key], np.nan).astype(object)
            doc[key][~np.isfinite(doc[key].astype(float))] = None
            doc[key] = doc[key].tolist()
        return doc

    def posterior_summary(self, cfg: dict, field, n: int, level: float, rng: np.random.Generator) -> dict:
        """``n`` exact posterior draws of h on the x nodes."""
        model = RegressionModel.from_config(cfg)
        draws = model.posterior_samples(cfg["beta"], n, rng)
        return {"x": grid_from_config(cfg).x.nodes.tolist(), "draws": np.asarray(draws).tolist(), "kind": "exact"}

    def exact(self, cfg: dict) -> dict | None:
        return exact_posterior(cfg)
