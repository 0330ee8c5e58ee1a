"""Energy functionals of density estimation, evaluated *at* a field (NIFTy style).

``energy.at(phi)`` returns an immutable point with ``value``, ``gradient``, ``hessp(v)``, the Lagrange multiplier
``lagrange_multiplier`` of the normalisation and the mixing coefficients ``mixing``.  Two functionals
(CONVENTIONS.md §2):

* :class:`LogDensityEnergy`, field L = ln P: ``E_L = -sum_data L + prior(L)``, eqs. (108)-(141), (713)-(718).
  The solver moves in g-space (normalisation by parameterisation, eq. (146)): a step ``d`` is applied as
  ``L <- normalise(L + eta d)``; ``gradient`` is the g-gradient ``(I - P I_X) (-N + lambda K (L - t̄))`` of eq.
  (141)/(716), ``hessp`` the normalisation-consistent Hessian ``-H_g`` of eq. (160).
* :class:`ProbabilityEnergy`, field P: ``E_P = -sum_data ln P + prior(P)``, eqs. (163)-(170), with P >= 0 and
  ``sum_j P hy = 1`` per x enforced as constraints (an active-set method in :mod:`bftcore.solvers`).

The prior is one Gaussian ``(lambda/2)(phi - t, K (phi - t))`` or a mixture
``-(1/beta) ln sum_j p_j exp(-beta lambda E_0j)``, ``E_0j = 1/2 (phi - t_j, K (phi - t_j))`` (713)-(715), whose
gradient is that of a single Gaussian with the effective template ``t̄ = sum_j a_j t_j`` (716).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .grid import Grid
from .mixing import mixing_coefficients, mixture_energy
from .operators import PriorOperator


def normalise_log(L: np.ndarray, hy: float) -> np.ndarray:
    """Conditionally normalise a log-density: ``L - ln sum_j exp(L[i, j]) hy`` per x (eq. (146))."""
    m = np.max(L, axis=1, keepdims=True)
    return L - (m + np.log(np.sum(np.exp(L - m), axis=1, keepdims=True) * hy))


_ONE_TO_N: dict[int, np.ndarray] = {}


def project_simplex(P: np.ndarray, hy: float) -> np.ndarray:
    """Euclidean projection of each x-row onto ``{P >= 0, sum_j P hy = 1}`` (the feasible set of E_P)."""
    Q = np.asarray(P, dtype=float) * hy
    s = Q.sum(axis=1)
    if Q.min() >= 0 and np.abs(s - 1.0).max() <= 1e-12:  # already feasible (a step along the face): no sort
        return Q / (s * hy)[:, None]
    n = Q.shape[1]
    k = _ONE_TO_N.get(n)
    if k is None:
        k = _ONE_TO_N[n] = np.arange(1.0, n + 1)
    u = -np.sort(-Q, axis=1)  # rows in descending order
    css = u.cumsum(axis=1)
    css -= 1.0
    rho = np.count_nonzero(u * k > css, axis=1)  # the support is a prefix of the sorted row
    theta = css[np.arange(Q.shape[0]), rho - 1] / rho
    out = Q - theta[:, None]
    np.maximum(out, 0.0, out=out)
    out[out < 1e-14 * out.max(axis=1)[:, None]] = 0.0  # rounding leftovers of the threshold
    out /= (out.sum(axis=1) * hy)[:, None]
    return out


class Prior:
    """Gaussian prior or mixture of Gaussian priors on a field phi, eqs. (224), (713)-(718).

    ``templates`` is an ``(m, nx, ny)`` array (m = 0 means the zero template), ``weights`` the p_j, ``beta`` the
    mixture inverse temperature of CONVENTIONS.md (beta = 1 is the paper).
    """

    def __init__(self, K: PriorOperator, lam: float, templates=None, weights=None, beta: float = 1.0):
        if not (np.isfinite(lam) and lam > 0):
            raise ValueError(f"lambda must be a finite number > 0, got {lam!r}: with lambda = 0 the prior is "
                             f"switched off and the energy has no minimum; use a small positive lambda")
        self.K, self.lam, self.grid = K, float(lam), K.grid
        t = np.zeros((1,) + self.grid.shape) if templates is None or len(templates) == 0 else np.asarray(
            templates, dtype=float)
        if t.ndim != 3 or t.shape[1:] != self.grid.shape:
            raise ValueError(f"templates must have shape (m, {self.grid.shape[0]}, {self.grid.shape[1]}), "
                             f"got {t.shape}")
        if not np.all(np.isfinite(t)):
            raise ValueError("templates contain NaN or infinite values")
        self.templates = t
        w = np.ones(len(t)) if weights is None else np.asarray(weights, dtype=float)
        if w.shape != (len(t),):
            raise ValueError(f"need one weight p_j per template: {len(t)} templates, {w.size} weights")
        if np.any(~np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
            raise ValueError(f"weights p_j must be >= 0 and not all zero, got {w.tolist()}")
        self.weights = w / w.sum()
        if not (np.isfinite(beta) and 1e-12 <= beta <= 1e12):
            raise ValueError(f"beta must be a finite number in [1e-12, 1e12], got {beta!r}")
        self.beta = float(beta)
        self.Kt = np.stack([K.apply(tj) for tj in t])

    @property
    def m(self) -> int:
        return len(self.templates)

    def evaluate(self, phi: np.ndarray, Kphi: np.ndarray):
        """Prior energy, component energies lambda*E_0j, mixing a_j and ``u_j = cell K (phi - t_j)``."""
        cell = self.grid.cell
        u = cell * (Kphi[None] - self.Kt)
        E0 = 0.5 * np.einsum("jab,jab->j", phi[None] - self.templates, u)
        lamE0 = self.lam * E0
        if self.m == 1:
            return float(lamE0[0]), lamE0, np.ones(1), u
        a = mixing_coefficients(lamE0, self.weights, self.beta)
        return float(mixture_energy(lamE0, self.weights, self.beta)), lamE0, a, u


class DensityEnergy:
    """Common data of E_L and E_P: grid, data counts N, prior."""

    field = "?"

    def __init__(self, grid: Grid, N: np.ndarray, prior: Prior):
        self.grid, self.N, self.prior = grid, np.asarray(N, dtype=float), prior
        if self.N.shape != grid.shape:
            raise ValueError(f"data counts have shape {self.N.shape}, grid has {grid.shape}")
        self.data_mask = self.N > 0
        self.data_index = np.flatnonzero(self.data_mask)  # flat indices of the data nodes, and their counts
        self.data_counts = self.N.ravel()[self.data_index]

    def at(self, phi: np.ndarray):
        raise NotImplementedError


@dataclass(frozen=True)
class _Point:
    energy: DensityEnergy
    phi: np.ndarray

    @cached_property
    def _prior(self):
        Kphi = self.__dict__.get("_Kphi")  # K phi, when the caller already has it (a step along a line)
        if Kphi is None:
            Kphi = self.energy.prior.K.apply(self.phi)
        return self.energy.prior.evaluate(self.phi, Kphi)

    @property
    def prior_energy(self) -> float:
        return self._prior[0]

    @property
    def mixing(self) -> np.ndarray:
        """Mixing coefficients a_j, eq. (718)."""
        return self._prior[2]

    @cached_property
    def prior_gradient(self) -> np.ndarray:
        """``lambda cell K (phi - t̄)`` with ``t̄ = sum_j a_j t_j`` (716)."""
        _, _, a, u = self._prior
        if len(a) == 1:
            return self.energy.prior.lam * u[0]
        return self.energy.prior.lam * np.tensordot(a, u, axes=1)

    def prior_hessp(self, v: np.ndarray) -> np.ndarray:
        """Hessian of the prior term: ``lambda cell K - beta lambda^2 sum_j a_j (u_j - ū)(u_j - ū)^T``."""
        pr = self.energy.prior
        out = pr.lam * pr.grid.cell * pr.K.apply(v)
        if pr.m > 1:
            _, _, a, u = self._prior
            du = u - np.tensordot(a, u, axes=1)[None]
            c = np.einsum("jab,ab->j", du, v)
            out = out - pr.beta * pr.lam ** 2 * np.tensordot(a * c, du, axes=1)
        return out


class LogPoint(_Point):
    """E_L evaluated at a conditionally normalised L."""

    @cached_property
    def P(self) -> np.ndarray:
        return np.exp(self.phi)

    @cached_property
    def value(self) -> float:
        """E_L = -(L, N)_data + prior, eqs. (109), (713)."""
        return float(-np.sum(self.energy.N * self.phi) + self.prior_energy)

    @cached_property
    def _r(self) -> np.ndarray:
        return -self.energy.N + self.prior_gradient

    @cached_property
    def lagrange_multiplier(self) -> np.ndarray:
        """Lambda_X(x) = N_X - lambda I_X K (L - t̄), eqs. (137), (717) (per x node)."""
        return -self._r.sum(axis=1)

    @cached_property
    def gradient(self) -> np.ndarray:
        """g-gradient ``(I - P hy I_X) (-N + lambda K (L - t̄))``: minus the residual of (141)/(716)."""
        V = self.P * self.energy.grid.hy
        return self._r + V * self.lagrange_multiplier[:, None]

    def hessp(self, v: np.ndarray, convexified: bool = False) -> np.ndarray:
        """Normalisation-consistent Hessian action ``J^T M J v`` of eq. (160), ``J = I - I_X P hy``,
        ``M = lambda cell K (+ mixture term) + diag(Lambda_X P hy)``.

        ``convexified=True`` gives the Gauss-Newton form: Lambda_X clipped at 0 and the (negative) mixture term
        dropped, which is positive definite on the tangent space of the normalisation; the Newton solver uses it
        for a step where the true Hessian has negative curvature."""
        V = self.P * self.energy.grid.hy
        Jv = v - np.sum(V * v, axis=1, keepdims=True)
        if convexified:
            pr = self.energy.prior
            lamX = np.maximum(self.lagrange_multiplier, 0.0)
            MJv = pr.lam * pr.grid.cell * pr.K.apply(Jv) + lamX[:, None] * V * Jv
        else:
            MJv = self.prior_hessp(Jv) + self.lagrange_multiplier[:, None] * V * Jv
        return MJv - V * MJv.sum(axis=1, keepdims=True)

    @property
    def residual(self) -> float:
        """Stationarity residual: max |N - lambda K(L - t̄) - Lambda_X P hy| (eqs. (127)/(716))."""
        return float(np.max(np.abs(self.gradient)))


class LogDensityEnergy(DensityEnergy):
    """Gaussian (mixture) prior on L = ln P with normalisation per x, eqs. (108)-(141), (713)-(718)."""

    field = "L"

    def at(self, L: np.ndarray) -> LogPoint:
        return LogPoint(self, np.asarray(L, dtype=float))

    def normalise(self, L: np.ndarray) -> np.ndarray:
        return normalise_log(L, self.grid.hy)

    def to_L(self, phi):
        return phi

    def to_P(self, phi):
        return np.exp(phi)


class ProbPoint(_Point):
    """E_P evaluated at a feasible P (P >= 0, normalised per x, P > 0 at the data)."""

    @property
    def P(self) -> np.ndarray:
        return self.phi

    @cached_property
    def value(self) -> float:
        """E_P = -(ln P, N)_data + prior, eq. (163)."""
        E = self.energy
        Pd = self.phi.take(E.data_index)
        if Pd.size and Pd.min() <= 0:
            return np.inf
        return float(-np.dot(E.data_counts, np.log(Pd)) + self.prior_energy)

    @cached_property
    def raw_gradient(self) -> np.ndarray:
        """Gradient of E_P without the constraint: ``-N/P + lambda K (P - t̄)``."""
        E = self.energy
        g = self.prior_gradient.copy()
        g.ravel()[E.data_index] -= E.data_counts / self.phi.take(E.data_index)
        return g

    @cached_property
    def lagrange_multiplier(self) -> np.ndarray:
        """Lambda_X = N_X - I_X P K P per x (eq. (167), with the template), in units of 1/hy."""
        return -np.sum(self.phi * self.raw_gradient, axis=1)

    @cached_property
    def gradient(self) -> np.ndarray:
        """Reduced gradient ``-N/P + lambda K (P - t̄) + Lambda_X hy``; zero on the free set at the minimum and
        >= 0 where P = 0 (the KKT conditions of (165) with P >= 0)."""
        return self.raw_gradient + self.lagrange_multiplier[:, None] * self.energy.grid.hy

    def hessp(self, v: np.ndarray) -> np.ndarray:
        """Hessian of E_P at fixed Lambda: ``N/P^2 + lambda K`` (+ mixture term), eq. (181)."""
        out = self.prior_hessp(v)
        mask = self.energy.data_mask
        out[mask] += self.energy.N[mask] / self.phi[mask] ** 2 * v[mask]
        return out

    @cached_property
    def _projected_step(self) -> np.ndarray:
        """``Proj(P - G)``, shared by the KKT residual and the epsilon-active set."""
        return project_simplex(self.phi - self.gradient, self.energy.grid.hy)

    @cached_property
    def eps_active(self) -> np.ndarray:
        """Bertsekas' epsilon-active set: nodes with P <= eps whose reduced gradient pushes outwards, with
        eps = min(1e-3 max P, |P - Proj(P - G)|), so nodes about to hit zero are fixed there instead of
        zigzagging."""
        eps = min(1e-3 * float(np.max(self.phi)), self.residual)
        return (self.phi <= eps) & (self.gradient > 0)

    def active(self, tol: float = 0.0) -> np.ndarray:
        """Nodes where the bound P >= 0 is active: P = 0 and the reduced gradient pushes outwards."""
        return (self.phi <= tol) & (self.gradient > 0)

    @cached_property
    def residual(self) -> float:
        """KKT residual ``max |P - Proj(P - G)|``: zero exactly when the reduced gradient vanishes where P > 0 and
        is >= 0 where P = 0 (stationarity (165)/(167) with the bound P >= 0)."""
        return float(np.max(np.abs(self.phi - self._projected_step)))


class ProbabilityEnergy(DensityEnergy):
    """Gaussian (mixture) prior on P with normalisation and P >= 0, eqs. (163)-(170)."""

    field = "P"

    def at(self, P: np.ndarray) -> ProbPoint:
        return ProbPoint(self, np.asarray(P, dtype=float))

    def normalise(self, P: np.ndarray) -> np.ndarray:
        return project_simplex(P, self.grid.hy)

    def line_energy(self, base: np.ndarray, d: np.ndarray, Kbase: np.ndarray | None = None) -> "LineEnergy":
        """``eta -> E_P(base + eta d)`` in closed form along a face step (see :class:`LineEnergy`)."""
        return LineEnergy(self, base, d, Kbase)

    def to_L(self, phi):
        with np.errstate(divide="ignore"):
            return np.log(phi)

    def to_P(self, phi):
        return phi


class LineEnergy:
    """``eta -> E_P(Proj(base + eta d))`` along a face step of the active-set method for E_P, for a feasible
    ``base`` and a ``d`` that keeps the normalisation, without building a point per trial.

    Up to ``eta_max`` (the first node reaching zero) the path is the straight line: the prior energies (715) are
    quadratics in eta, ``E_0j(eta) = E_0j + eta (d, K(base - t_j)) + eta^2/2 (d, K d)``, and the data term lives
    on the data nodes only, so after one application of K (two without ``Kbase``) a trial costs a few
    operations on the data nodes.  Beyond it the path is bent by the projection: a trial projects, applies K once
    and evaluates the energy from that, which is what a full point would do, minus the bookkeeping.
    :meth:`accept` returns the accepted point with ``K P`` (and, beyond ``eta_max``, the energy) already known.
    """

    def __init__(self, energy: ProbabilityEnergy, base: np.ndarray, d: np.ndarray, Kbase=None):
        pr, cell = energy.prior, energy.grid.cell
        self.energy, self.base, self.d = energy, base, d
        self.Kb = pr.K.apply(base) if Kbase is None else Kbase
        self.Kd = pr.K.apply(d)
        if pr.m == 1:
            u = cell * (self.Kb - pr.Kt[0])
            self.e0 = np.array([0.5 * float(np.vdot(base - pr.templates[0], u))])
            self.c1 = np.array([float(np.vdot(u, d))])
        else:
            u = cell * (self.Kb[None] - pr.Kt)
            self.e0 = 0.5 * np.einsum("jab,jab->j", base[None] - pr.templates, u)
            self.c1 = np.einsum("jab,ab->j", u, d)
        self.c2 = 0.5 * cell * float(np.vdot(d, self.Kd))
        neg = d < 0
        self.eta_max = float(np.min(base[neg] / -d[neg])) if neg.any() else np.inf
        idx = energy.data_index
        self.N, self.bm, self.dm = energy.data_counts, base.take(idx), d.take(idx)
        self.lam, self.single, self.pr = pr.lam, pr.m == 1, pr
        self._bent = {}  # eta -> (P, K P, prior tuple) of trials beyond eta_max

    def __call__(self, eta: float):
        if eta > self.eta_max:
            return self._bent_value(eta)
        pm = self.bm + eta * self.dm
        if pm.size and pm.min() <= 0:
            return np.inf
        lamE0 = self.lam * (self.e0 + eta * self.c1 + (eta * eta) * self.c2)
        prior = float(lamE0[0]) if self.single else float(mixture_energy(lamE0, self.pr.weights, self.pr.beta))
        return float(-np.dot(self.N, np.log(pm))) + prior

    def _bent_value(self, eta: float) -> float:
        E = self.energy
        P = project_simplex(self.base + eta * self.d, E.grid.hy)
        Pd = P.take(E.data_index)
        if Pd.size and Pd.min() <= 0:
            return np.inf
        KP = self.pr.K.apply(P)
        prior = self.pr.evaluate(P, KP)
        self._bent[eta] = (P, KP, prior)
        return float(-np.dot(self.N, np.log(Pd)) + prior[0])

    def accept(self, eta: float, path) -> tuple[np.ndarray, "ProbPoint"]:
        """The point at ``eta`` on the path (``path(eta)`` is the projection of ``base + eta d``) with ``K P``
        taken from the line, or from the trial that evaluated it beyond ``eta_max``."""
        bent = self._bent.get(eta)
        if bent is not None:
            P, KP, prior = bent
            pt = self.energy.at(P)
            pt.__dict__["_Kphi"] = KP
            pt.__dict__["_prior"] = prior
            return P, pt
        P = path(eta)
        return P, self.point(eta, P)

    def point(self, eta: float, P: np.ndarray) -> ProbPoint:
        """The point ``P`` (= the projection of ``base + eta d``, equal to it up to rounding for
        ``eta <= eta_max``) with ``K P`` taken from the line."""
        pt = self.energy.at(P)
        pt.__dict__["_Kphi"] = self.Kb + eta * self.Kd
        return pt
