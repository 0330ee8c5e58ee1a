"""Local prior mixtures (Sect. 6.4), local smoothness hyperfields (Sects. 5.3.3, 5.6) and binary line processes
(cuts, eqs. (519)-(522)) for 1-D Gaussian regression on a chain of x nodes.

The chain.  Data (x_d, y_d) are snapped to the nodes x_i of an :class:`~bftcore.foundations.grid.Axis` as in
:mod:`bftcore.models.regression`; ``K_D = diag(n_i) / sigma^2`` and ``t_D`` is the mean datum at node i, so the
data energy is ``E_D(phi) = 1/2 sum_data (phi(x_d) - y_d)^2 / sigma^2``.  The filter root is ``W = D``, forward
differences over h (rows = edges e = (i, i+1), ``(D phi)_e = (phi_{i+1} - phi_i) / h``): the free chain, the same
for a ``"neumann"`` and a ``"free"`` axis (first differences); a periodic axis is refused.  Each prior term below is
a plain sum over edges, with no factor h: the Gaussian prior of stiffness kappa is ``1/2 sum_e kappa (D phi)_e^2``,
the per-edge energy of the digest (notes/lemm-ch5-6, 1A).  A *cut* at x_c removes the rows of D whose edge crosses
x_c (the disconnected Laplacian (521)-(522)): K = D^T D splits into blocks, each with its own free constant, so each
block needs data.

Local prior mixture (582)-(588).  At every edge a label theta(e) in {1..m} selects
``omega_k(e) = sqrt(kappa_k) (D (phi - t_k))_e`` with ``ln Z_{e,k} = -1/2 ln kappa_k``.  Filter switching is
t_k = 0 (locally stiff or soft edges); template switching is one kappa for all k and templates t_k (the ln Z are then
equal and drop out).  With the factorising hyperprior ``p(theta) = prod_e pi_theta(e)`` (584)-(586) the sum over
theta is done exactly edge by edge:

    E(phi) = E_D(phi) - sum_e ln sum_k pi_k exp(-beta/2 |omega_k(e)|^2 - ln Z_{e,k}).

Decisions: the 1/2 of (495)/(498) is kept ((582) prints none), so that m = 1 is the Gaussian prior
``beta kappa / 2 sum_e (D phi)_e^2`` of :mod:`bftcore.models.regression` with ``lambda hx = sigma^2 beta kappa``.
ln Z_{e,k} = -1/2 ln kappa_k is exact in 1-D with a free boundary: the edges of a chain are independent coordinates
of phi modulo constants, det' (D^T diag(kappa) D) is n prod_e kappa_e / h^2 (matrix-tree theorem).  (586) claims this
factorisation in general; on a 2-D grid it fails (the edges are not independent: curl-free).  The 2-D case is not
built; there one would take the same local ln Z as an approximation (a Bethe-like product over edges) or the exact
``-1/2 ln det K(theta)`` by sparse Cholesky in the theta update, which the discrete labels make expensive.
beta multiplies the quadratic only (as in the formula above): ln Z does not depend on it.  As beta -> 0 the local
responsibilities therefore tend to ``pi_k exp(-ln Z_{e,k}) / sum`` = ``pi_k sqrt(kappa_k) / sum`` for filter
switching (the exact posterior of the label at a vanishing filtered difference), and to pi_k for template switching.

Hyperfield (454)-(457) in 1-D: a real log-stiffness theta(e) per edge,

    E(phi, theta) = E_D(phi) + 1/2 sum_e e^{theta(e)} (D phi)_e^2 + 1/2 (theta - theta_0, K_theta (theta - theta_0))
                    - 1/2 sum_e theta(e),

``K_theta = gamma_theta (-Delta_edges + mu_theta I)``, ``-Delta_edges = G^T G`` with G the differences between
neighbouring edges of one block (free ends) in lattice units (no h: theta is a label per edge like the labels of the
local mixture), the quadratic form again a plain sum over edges.  The last term is the exact 1-D
``ln Z_phi(theta) = -1/2 sum_e theta(e) + const`` (same argument as for the mixture).  In 2-D it would be
``-1/2 ln det K(theta)``, not built: one would use the same local -1/2 sum theta as an approximation, or the exact
log-determinant with a sparse Cholesky and a stochastic trace estimate of its gradient.  The theta-stationarity is
(457) with its sign repaired: (457) prints ``-(phi - t) d^2(phi - t) e^theta``; integrating by parts, the derivative of
``1/2 int e^theta |d(phi - t)|^2`` by theta(x) is ``+1/2 e^theta |d(phi - t)|^2``, so

    0 = (K_theta (theta - theta_0))_e + 1/2 e^{theta(e)} (D phi)_e^2 - 1/2.

Units (project rule "any units": x -> a x, y -> c y).  sigma carries y units (sigma -> c sigma).  (D phi)_e carries
y/x, so kappa_k carries x^2/y^2: kappa_k -> kappa_k a^2 / c^2 gives the rescaled fit c phi (tested).  The ln Z
shift -1/2 ln(a^2/c^2) is common to all k and changes no responsibility.  pi_k and beta are pure numbers (beta is a
temperature of the labels, not a noise level here: sigma is separate).  Templates t_k carry y units (t_k -> c t_k).
Hyperfield: e^theta is a kappa, so theta_0 -> theta_0 + ln(a^2 / c^2); theta itself is a pure number and so are
gamma_theta (the weight of (theta_{e+1} - theta_e)^2 between neighbouring edges) and mu_theta: 1/sqrt(mu_theta) is
the correlation length of the log-stiffness in edges (times h in x units), and gamma_theta mu_theta is the per-edge
pull towards theta_0: on a flat stretch, where only -1/2 theta pushes, the log-stiffness climbs to about
theta_0 + 1/(2 gamma_theta mu_theta), a runaway when that product is small (:class:`HyperpriorTooWeak`).

Because every term is a sum per edge (no h), kappa is a stiffness per edge: on a finer grid of the same interval
the same kappa is a stiffer prior (continuum stiffness kappa / h).

Local mass (458)-(459): :class:`MassField`, a mass e^theta per node with a fixed stiffness; its ln Z is a full
tridiagonal log-determinant even in 1-D (see there).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.optimize import minimize

from ..foundations.grid import Axis


# --------------------------------------------------------------------------------------------------------------
# the chain: data, edges, cuts
# --------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Chain:
    """Data snapped to the nodes of a 1-D axis and the edges of its filter root D, minus the edges that cross a cut.

    ``D`` has one row per kept edge, ``(D phi)_e = (phi_{i+1} - phi_i) / h``; ``edge_left[e]`` is i and
    ``edge_x[e]`` the midpoint of the edge; ``block[i]`` labels the connected block of node i."""

    axis: Axis
    sigma: float
    ix: np.ndarray
    y: np.ndarray
    counts: np.ndarray
    ysum: np.ndarray
    D: sp.csr_matrix
    edge_left: np.ndarray
    block: np.ndarray
    cuts: tuple = ()

    @property
    def n(self) -> int:
        return self.axis.n

    @property
    def edge_x(self) -> np.ndarray:
        return self.axis.nodes[self.edge_left] + 0.5 * self.axis.h

    @property
    def KD(self) -> sp.csr_matrix:
        """K_D = diag(n_i) / sigma^2."""
        return sp.csr_matrix(sp.diags(self.counts / self.sigma ** 2))

    @property
    def rhs(self) -> np.ndarray:
        """K_D t_D = (sum of the data at node i) / sigma^2."""
        return self.ysum / self.sigma ** 2

    @property
    def t_D(self) -> np.ndarray:
        """The mean datum at each node (0 where there is none)."""
        return np.where(self.counts > 0, self.ysum / np.maximum(self.counts, 1.0), 0.0)

    def data_energy(self, phi) -> float:
        """E_D = 1/2 sum_data (phi(x_d) - y_d)^2 / sigma^2."""
        r = (np.asarray(phi)[self.ix] - self.y) / self.sigma
        return 0.5 * float(r @ r)

    def edge_neighbours(self) -> sp.csr_matrix:
        """G: differences between neighbouring kept edges of one block (lattice units, no h), -Delta_edges = G^T G."""
        e = len(self.edge_left)
        pairs = np.flatnonzero(np.diff(self.edge_left) == 1) if e > 1 else np.zeros(0, dtype=int)
        rows = np.repeat(np.arange(pairs.size), 2)
        cols = np.column_stack([pairs, pairs + 1]).ravel()
        vals = np.tile([-1.0, 1.0], pairs.size)
        return sp.csr_matrix((vals, (rows, cols)), shape=(pairs.size, e))

    def solve(self, stiffness, rhs_extra=None) -> np.ndarray:
        """phi of ``(K_D + D^T diag(stiffness) D) phi = K_D t_D + rhs_extra``."""
        A = self.KD + self.D.T @ sp.diags(np.asarray(stiffness, dtype=float)) @ self.D
        b = self.rhs if rhs_extra is None else self.rhs + rhs_extra
        return np.asarray(spla.spsolve(sp.csc_matrix(A), b), dtype=float)


def chain(x, y, axis: Axis, sigma: float, cuts=()) -> Chain:
    """The :class:`Chain` of data ``(x, y)`` on ``axis`` with noise ``sigma`` and cuts at the x positions ``cuts``.

    A cut at x_c removes every edge (x_i, x_{i+1}) with x_i < x_c < x_{i+1}; a cut on a node is ambiguous and
    refused, as are cuts outside the axis and blocks without data (their constant would be free, (522))."""
    sigma = float(sigma)
    if not (np.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma (the noise standard deviation, in y units) must be a finite number > 0, got {sigma!r}")
    xs = np.asarray(x, dtype=float).ravel()
    ys = np.asarray(y, dtype=float).ravel()
    if xs.shape != ys.shape:
        raise ValueError(f"x and y must have the same length, got {xs.size} and {ys.size}")
    if not np.all(np.isfinite(ys)):
        raise ValueError("y values must be finite numbers; remove the NaN or infinite ones")
    if axis.boundary == "periodic":
        raise ValueError("the axis is periodic, but a local prior acts on the edges of an open chain (free ends); "
                         "give the axis boundary 'neumann' or 'free'")
    ix = axis.snap(xs)
    n, h = axis.n, axis.h
    left = np.arange(n - 1)
    cut_list = tuple(float(c) for c in np.atleast_1d(np.asarray(cuts, dtype=float)))
    keep = np.ones(n - 1, dtype=bool)
    for c in cut_list:
        if not (np.isfinite(c) and axis.min < c < axis.max):
            raise ValueError(f"cut at x = {c:g} is outside the grid's interior ({axis.min:g}, {axis.max:g}); "
                             f"put cuts strictly between the first and last node")
        s = (c - axis.min) / h
        if abs(s - round(s)) < 1e-9:
            raise ValueError(f"cut at x = {c:g} falls on a node; put it between two nodes (e.g. "
                             f"x = {axis.min + (round(s) + 0.5) * h:g})")
        keep[int(np.floor(s))] = False
    left = left[keep]
    rows = np.repeat(np.arange(left.size), 2)
    cols = np.column_stack([left, left + 1]).ravel()
    D = sp.csr_matrix((np.tile([-1.0, 1.0], left.size) / h, (rows, cols)), shape=(left.size, n))
    block = np.concatenate([[0], np.cumsum(~keep)]) if n > 1 else np.zeros(1, dtype=int)
    counts = np.bincount(ix, minlength=n).astype(float)
    for b in np.unique(block):
        if counts[block == b].sum() == 0:
            nodes = axis.nodes[block == b]
            raise ValueError(f"the block x in [{nodes[0]:g}, {nodes[-1]:g}] between cuts has no data, so its level "
                             f"is undetermined (eq. (522)); add data there or remove a cut")
    return Chain(axis, sigma, ix, ys, counts, np.bincount(ix, weights=ys, minlength=n), D, left, block, cut_list)


# --------------------------------------------------------------------------------------------------------------
# local prior mixture (Sect. 6.4)
# --------------------------------------------------------------------------------------------------------------
def _check_mixture(kappas, pis, beta, templates, n: int):
    k = np.atleast_1d(np.asarray(kappas, dtype=float))
    if k.ndim != 1 or k.size == 0:
        raise ValueError("kappas must list at least one stiffness (m >= 1 local alternatives); got none")
    if not np.all(np.isfinite(k)) or np.any(k <= 0):
        raise ValueError(f"kappas (stiffness per edge, units x^2/y^2) must be finite numbers > 0, got {k.tolist()}; "
                         f"a cut, not kappa = 0, removes an edge")
    p = np.atleast_1d(np.asarray(pis, dtype=float))
    if p.shape != k.shape and k.size == 1 and templates is not None:
        k = np.full(p.shape, k[0])
    if p.shape != k.shape:
        raise ValueError(f"pis must give one prior probability per alternative ({k.size}), got {p.size}")
    if not np.all(np.isfinite(p)) or np.any(p <= 0) or abs(p.sum() - 1.0) > 1e-9:
        raise ValueError(f"pis (the per-edge hyperprior pi_k) must be numbers > 0 that sum to 1, got {p.tolist()} "
                         f"(sum {p.sum():g}); divide them by their sum")
    b = float(beta)
    if not (np.isfinite(b) and b > 0):
        raise ValueError(f"beta (the temperature of the labels) must be a finite number > 0, got {beta!r}")
    if templates is None:
        t = np.zeros((k.size, n))
    else:
        t = np.asarray(templates, dtype=float)
        if t.ndim == 1:
            t = t[None, :]
        if t.shape != (k.size, n) or not np.all(np.isfinite(t)):
            raise ValueError(f"templates must be {k.size} rows of {n} finite node values (one per alternative), "
                             f"got shape {t.shape}")
    return k, p / p.sum(), b, t


@dataclass(frozen=True)
class LocalMixture:
    """The energy of a local prior mixture on a :class:`Chain`, eqs. (583)/(585), and its local responsibilities (588).

    ``kappas`` (m,), ``pis`` (m,), ``beta``, ``templates`` (m, n) node values (zeros for filter switching)."""

    chain: Chain
    kappas: np.ndarray
    pis: np.ndarray
    beta: float
    templates: np.ndarray

    @property
    def ln_Z(self) -> np.ndarray:
        """ln Z_{e,k} = -1/2 ln kappa_k (exact on a 1-D chain); the same for every edge."""
        return -0.5 * np.log(self.kappas)

    def filtered(self, phi) -> np.ndarray:
        """omega_k(e) = sqrt(kappa_k) (D (phi - t_k))_e, shape (m, edges)."""
        d = np.asarray(phi, dtype=float)[None, :] - self.templates
        return np.sqrt(self.kappas)[:, None] * (self.chain.D @ d.T).T

    def _log_weights(self, phi) -> np.ndarray:
        w = self.filtered(phi)
        return np.log(self.pis)[:, None] - 0.5 * self.beta * w ** 2 - self.ln_Z[:, None]

    def responsibilities(self, phi) -> np.ndarray:
        """a_k(e), eq. (588): the posterior probability of label k at edge e given phi; shape (m, edges)."""
        lw = self._log_weights(phi)
        lw = lw - lw.max(axis=0, keepdims=True)
        a = np.exp(lw)
        return a / a.sum(axis=0, keepdims=True)

    def value(self, phi) -> float:
        """E(phi) = E_D - sum_e ln sum_k pi_k exp(-beta/2 |omega_k(e)|^2 - ln Z_{e,k}) (log-sum-exp, no overflow)."""
        lw = self._log_weights(phi)
        top = lw.max(axis=0)
        return self.chain.data_energy(phi) - float(np.sum(top + np.log(np.exp(lw - top).sum(axis=0))))

    def gradient(self, phi) -> np.ndarray:
        """dE/dphi_i = (K_D (phi - t_D))_i + beta sum_e sum_k a_k(e) kappa_k D_ei (D (phi - t_k))_e."""
        c = self.chain
        a = self.responsibilities(phi)
        d = np.asarray(phi, dtype=float)[None, :] - self.templates
        s = np.sum(a * self.kappas[:, None] * (c.D @ d.T).T, axis=0)
        return c.KD @ np.asarray(phi, dtype=float) - c.rhs + self.beta * (c.D.T @ s)

    def m_step(self, a) -> np.ndarray:
        """The phi minimising the a-weighted Gaussian bound: ``(K_D + beta D^T diag(kappa_bar) D) phi = K_D t_D +
        beta D^T sum_k a_k kappa_k D t_k``, kappa_bar = sum_k a_k kappa_k (a locally chosen stiffness and filtered
        template)."""
        c = self.chain
        ak = a * self.kappas[:, None]
        extra = self.beta * (c.D.T @ np.sum(ak * (c.D @ self.templates.T).T, axis=0))
        return c.solve(self.beta * ak.sum(axis=0), extra)


@dataclass
class LocalFit:
    """A local-mixture fit: the field phi (n,), the responsibilities a (m x edges), the energy after each EM sweep
    (``energy[0]`` at the start), the number of sweeps, whether the step fell below tol, and the edges' x."""

    phi: np.ndarray
    a: np.ndarray
    energy: list
    iterations: int
    converged: bool
    edge_x: np.ndarray
    beta: float
    model: LocalMixture = field(repr=False)


def local_mixture(x, y, axis: Axis, sigma: float, kappas, pis, beta: float = 1.0, templates=None,
                  cuts=()) -> LocalMixture:
    """The :class:`LocalMixture` of data on ``axis`` (its parameters checked: a ValueError names the bad one)."""
    c = chain(x, y, axis, sigma, cuts)
    k, p, b, t = _check_mixture(kappas, pis, beta, templates, c.n)
    return LocalMixture(c, k, p, b, t)


def em_sweeps(model: LocalMixture, init=None, max_iter: int = 500, tol: float = 1e-10):
    """Yield ``(iteration, phi, step, converged)`` for the start (iteration 0, step nan) and each EM sweep of
    :func:`fit_local`: what the dashboard animates, one frame per sweep."""
    c = model.chain
    if init is None:
        phi = model.m_step(np.broadcast_to(model.pis[:, None], (model.pis.size, c.D.shape[0])))
    else:
        phi = np.asarray(init, dtype=float).copy()
        if phi.shape != (c.n,):
            raise ValueError(f"init must have one value per node ({c.n}), got shape {phi.shape}")
    yield 0, phi, float("nan"), False
    for it in range(1, max_iter + 1):
        new = model.m_step(model.responsibilities(phi))
        step = float(np.max(np.abs(new - phi)))
        phi = new
        converged = step <= tol * (1.0 + float(np.max(np.abs(phi))))
        yield it, phi, step, converged
        if converged:
            break


def fit_local(model: LocalMixture, init=None, max_iter: int = 500, tol: float = 1e-10) -> LocalFit:
    """EM on the labels from ``init`` (default: the Gaussian fit with kappa_bar = sum_k pi_k kappa_k).

    Each sweep: (E) a_k(e) from phi by (588); (M) one linear solve of the a-weighted Gaussian problem.  By Jensen,
    ``-ln sum_k pi_k e^{-f_k} <= sum_k a_k (f_k - ln pi_k + ln a_k)`` with equality at the a of (588), and the M step
    minimises that bound exactly, so E(phi) never increases.  Stops when max |phi change| <= tol (1 + max |phi|)
    (the sweeps are :func:`em_sweeps`)."""
    energy = []
    for it, phi, _, converged in em_sweeps(model, init, max_iter, tol):
        energy.append(model.value(phi))
    return LocalFit(phi, model.responsibilities(phi), energy, it, converged, model.chain.edge_x, model.beta, model)


def local_mixture_fit(x, y, axis: Axis, sigma: float, kappas, pis, beta: float = 1.0, templates=None, cuts=(),
                      init=None, max_iter: int = 500, tol: float = 1e-10) -> LocalFit:
    """Fit a local prior mixture, eqs. (582)-(588), by EM on the labels (:func:`fit_local`).

    ``kappas``: stiffness per edge of each alternative (x^2/y^2); ``pis``: the per-edge hyperprior (sums to 1);
    ``beta``: the labels' inverse temperature; ``templates``: None for filter switching, else (m, n) node values
    (template switching; one kappa may serve all); ``cuts``: x positions of removed edges.  See the module
    docstring for the energy, the kept 1/2, the exact 1-D ln Z and the units."""
    return fit_local(local_mixture(x, y, axis, sigma, kappas, pis, beta, templates, cuts), init, max_iter, tol)


def beta_continuation(x, y, axis: Axis, sigma: float, kappas, pis, betas, templates=None, cuts=(), init=None,
                      max_iter: int = 500, tol: float = 1e-10) -> list[LocalFit]:
    """Follow one local-mixture solution up a ladder of betas, each EM warm-started from the previous phi.

    The energy is non-convex at large beta; at small beta the labels are nearly independent of phi and the problem
    is close to one Gaussian, so starting low and climbing selects the branch continuously connected to it.  A
    small loop of its own rather than :func:`bftcore.studies.workflows.continuation`: that one lives in the layer
    above the models (it imports them) and records one global mixing vector per beta, where a local fit has a
    field of them."""
    bs = np.asarray(betas, dtype=float).ravel()
    if bs.size == 0 or np.any(~np.isfinite(bs)) or np.any(bs <= 0):
        raise ValueError(f"betas must be finite numbers > 0 (a ladder, usually increasing), got {bs.tolist()}")
    c = chain(x, y, axis, sigma, cuts)
    k, p, _, t = _check_mixture(kappas, pis, bs[0], templates, c.n)
    fits: list[LocalFit] = []
    phi = init
    for b in bs:
        f = fit_local(LocalMixture(c, k, p, float(b), t), phi, max_iter, tol)
        fits.append(f)
        phi = f.phi
    return fits


# --------------------------------------------------------------------------------------------------------------
# hyperfield (Sects. 5.3.3, 5.6)
# --------------------------------------------------------------------------------------------------------------
class HyperpriorTooWeak(ValueError):
    """The log-stiffness runs away on flat stretches: the joint MAP is degenerate (Fig 6 made local, L.3029)."""


@dataclass(frozen=True)
class Hyperfield:
    """The joint energy E(phi, theta) of a log-stiffness field on the edges of a :class:`Chain` (module docstring)."""

    chain: Chain
    theta0: float
    gamma_theta: float
    mu_theta: float

    @cached_property
    def K_theta(self) -> sp.csr_matrix:
        """K_theta = gamma_theta (G^T G + mu_theta I) on the kept edges."""
        G = self.chain.edge_neighbours()
        e = self.chain.D.shape[0]
        return sp.csr_matrix(self.gamma_theta * (G.T @ G + self.mu_theta * sp.identity(e)))

    def theta_energy(self, theta, phi) -> float:
        """The theta-dependent part for fixed phi, u = D phi:
        ``1/2 sum_e e^theta u^2 + 1/2 (theta - theta_0, K_theta (theta - theta_0)) - 1/2 sum_e theta``."""
        u2 = (self.chain.D @ phi) ** 2
        d = np.asarray(theta) - self.theta0
        return float(0.5 * np.sum(np.exp(theta) * u2) + 0.5 * d @ (self.K_theta @ d) - 0.5 * np.sum(theta))

    def theta_gradient(self, theta, phi) -> np.ndarray:
        """(457), sign repaired: (K_theta (theta - theta_0))_e + 1/2 e^theta (D phi)_e^2 - 1/2."""
        u2 = (self.chain.D @ phi) ** 2
        return self.K_theta @ (np.asarray(theta) - self.theta0) + 0.5 * np.exp(theta) * u2 - 0.5

    def value(self, phi, theta) -> float:
        return self.chain.data_energy(phi) + self.theta_energy(theta, phi)

    def phi_step(self, theta) -> np.ndarray:
        """(K_D + D^T diag(e^theta) D) phi = K_D t_D: the exact minimiser in phi for fixed theta."""
        return self.chain.solve(np.exp(theta))

    def theta_step(self, theta, phi, max_newton: int = 50, tol: float = 1e-12) -> tuple[np.ndarray, int]:
        """Minimise the strictly convex theta-energy for fixed phi by Newton with a tridiagonal Hessian
        ``K_theta + diag(1/2 e^theta (D phi)^2)`` and backtracking (so the energy never rises)."""
        K = self.K_theta
        u2 = (self.chain.D @ phi) ** 2
        th = np.asarray(theta, dtype=float).copy()
        f = self.theta_energy(th, phi)
        k = 0
        for k in range(1, max_newton + 1):
            g = self.theta_gradient(th, phi)
            H = K + sp.diags(0.5 * np.exp(th) * u2)
            step = np.asarray(spla.spsolve(sp.csc_matrix(H), -g), dtype=float)
            decrement = -float(g @ step)
            t = 1.0
            while True:
                cand = th + t * step
                fc = self.theta_energy(cand, phi) if np.all(cand < 700) else np.inf
                if fc <= f + 1e-4 * t * float(g @ step) or t < 1e-12:
                    break
                t *= 0.5
            if not fc <= f:
                break
            th, f = cand, fc
            if decrement <= tol * (1.0 + abs(f)):
                break
        return th, k


@dataclass
class HyperfieldFit:
    """A hyperfield fit: phi (n,), theta (edges,), the stiffness e^theta, the joint energy after each alternation
    (``energy[0]`` at the start), iterations, converged, and the edges' x."""

    phi: np.ndarray
    theta: np.ndarray
    energy: list
    iterations: int
    converged: bool
    edge_x: np.ndarray
    model: Hyperfield = field(repr=False)

    @property
    def stiffness(self) -> np.ndarray:
        return np.exp(self.theta)


def _check_hyperprior(theta0, gamma_theta, mu_theta, what: str) -> None:
    for name, v in (("gamma_theta", gamma_theta), ("mu_theta", mu_theta)):
        if not (np.isfinite(float(v)) and float(v) > 0):
            raise ValueError(f"{name} must be a finite number > 0 (the hyperprior K_theta = gamma_theta (-Delta + "
                             f"mu_theta I) must be positive definite), got {v!r}")
    if not np.isfinite(float(theta0)):
        raise ValueError(f"theta0 (the log of the reference {what}) must be a finite number, got {theta0!r}")


def hyperfield(x, y, axis: Axis, sigma: float, theta0: float, gamma_theta: float, mu_theta: float,
               cuts=()) -> Hyperfield:
    """The :class:`Hyperfield` of data on ``axis`` (validated)."""
    _check_hyperprior(theta0, gamma_theta, mu_theta, "stiffness")
    return Hyperfield(chain(x, y, axis, sigma, cuts), float(theta0), float(gamma_theta), float(mu_theta))


def _stretches(edge_x, mask, h: float) -> str:
    """The runs of marked edges as ``"0.105-0.195, 0.635-0.995"`` (neighbouring edges are h apart)."""
    xs = edge_x[mask]
    breaks = np.flatnonzero(np.diff(xs) > 1.5 * h)
    runs = np.split(xs, breaks + 1)
    return ", ".join(f"{r[0]:g}" if r.size == 1 else f"{r[0]:g}-{r[-1]:g}" for r in runs)


def _alternate(model, theta, theta_step, check, max_iter: int, tol: float):
    """The joint minimisation of a hyperfield (:func:`hyperfield_fit`, :func:`mass_field_fit`): the exact phi
    solve, then ``theta_step(theta, phi)``, whose answer ``check`` refuses (a runaway) before it is taken; until
    max |theta change| <= tol (1 + max |theta|).  Returns (phi, theta, energy per step, iterations, converged)."""
    phi = model.phi_step(theta)
    energy = [model.value(phi, theta)]
    it = 0
    for it in range(1, max_iter + 1):
        new = theta_step(theta, phi)
        check(new)
        step = float(np.max(np.abs(new - theta)))
        theta = new
        phi = model.phi_step(theta)
        energy.append(model.value(phi, theta))
        if step <= tol * (1.0 + float(np.max(np.abs(theta)))):
            return phi, theta, energy, it, True
    return phi, theta, energy, it, False


def hyperfield_fit(x, y, axis: Axis, sigma: float, theta0: float, gamma_theta: float, mu_theta: float, cuts=(),
                   init_theta=None, max_iter: int = 500, tol: float = 1e-10, theta_bound: float = 20.0
                   ) -> HyperfieldFit:
    """Joint MAP of phi and a log-stiffness hyperfield theta, eqs. (454)-(457) in 1-D (module docstring).

    Alternates the exact phi solve with the convex theta problem (Newton, :meth:`Hyperfield.theta_step`), so the
    joint energy never increases.  Starts from theta = theta_0 (or ``init_theta``).  A weak hyperprior lets the
    stiffness grow without bound where phi is flat (the joint MAP is degenerate, L.3029): when theta - theta_0
    exceeds ``theta_bound`` anywhere, :class:`HyperpriorTooWeak` (a ValueError) says where and what to change,
    instead of letting e^theta overflow into NaN.  Stops when max |theta change| <= tol (1 + max |theta|)."""
    model = hyperfield(x, y, axis, sigma, theta0, gamma_theta, mu_theta, cuts)
    energy = []
    for it, phi, theta, _, converged in hyperfield_sweeps(model, init_theta, max_iter, tol, theta_bound):
        energy.append(model.value(phi, theta))
    return HyperfieldFit(phi, theta, energy, it, converged, model.chain.edge_x, model)


def hyperfield_sweeps(model: Hyperfield, init_theta=None, max_iter: int = 500, tol: float = 1e-10,
                      theta_bound: float = 20.0):
    """Yield ``(iteration, phi, theta, step, converged)`` for the start (iteration 0) and each alternation of
    :func:`hyperfield_fit` (its stopping rule and its :class:`HyperpriorTooWeak` verdict)."""
    c = model.chain
    e = c.D.shape[0]
    theta = np.full(e, model.theta0) if init_theta is None else np.asarray(init_theta, dtype=float).copy()
    if theta.shape != (e,):
        raise ValueError(f"init_theta must have one value per kept edge ({e}), got shape {theta.shape}")
    phi = model.phi_step(theta)
    yield 0, phi, theta, float("nan"), False
    for it in range(1, max_iter + 1):
        new, _ = model.theta_step(theta, phi)
        bad = (new - model.theta0 > theta_bound) | ~np.isfinite(new)
        if np.any(bad):
            raise HyperpriorTooWeak(
                f"the hyperprior is too weak: the stiffness diverges on flat stretches near x = "
                f"{_stretches(c.edge_x, bad, c.axis.h)} (theta - theta0 > {theta_bound:g} "
                f"on {int(bad.sum())} edges; the per-edge pull "
                f"gamma_theta*mu_theta = {model.gamma_theta * model.mu_theta:g} would let theta reach "
                f"theta0 + {1 / (2 * model.gamma_theta * model.mu_theta):.3g}); raise gamma_theta (or mu_theta)")
        step = float(np.max(np.abs(new - theta)))
        theta = new
        phi = model.phi_step(theta)
        converged = step <= tol * (1.0 + float(np.max(np.abs(theta))))
        yield it, phi, theta, step, converged
        if converged:
            break


# --------------------------------------------------------------------------------------------------------------
# local mass field (Sect. 5.3.4)
# --------------------------------------------------------------------------------------------------------------
def _tridiagonal_logdet_and_inverse_diagonal(diag, off) -> tuple[float, np.ndarray]:
    """ln det K and diag(K^{-1}) of a symmetric positive definite tridiagonal K (diagonal ``diag``, first
    off-diagonal ``off``), O(n): Cholesky K = U^T U with U upper bidiagonal (u_i on the diagonal, v_i above it), then
    Takahashi's recurrence ``Z_ii = 1/u_i^2 + (v_i/u_i)^2 Z_{i+1,i+1}`` from the last node back."""
    n = diag.size
    u = np.empty(n)
    v = np.zeros(max(n - 1, 0))
    u[0] = np.sqrt(diag[0])
    for i in range(n - 1):
        v[i] = off[i] / u[i]
        u[i + 1] = np.sqrt(diag[i + 1] - v[i] ** 2)
    z = np.empty(n)
    z[-1] = 1.0 / u[-1] ** 2
    for i in range(n - 2, -1, -1):
        z[i] = 1.0 / u[i] ** 2 + (v[i] / u[i]) ** 2 * z[i + 1]
    return 2.0 * float(np.sum(np.log(u))), z


@dataclass(frozen=True)
class MassField:
    """A local mass m^2(x_i) = e^{theta_i} per node, eqs. (458)-(459) with a fixed stiffness kappa:

        E(phi, theta) = E_D(phi) + 1/2 sum_i e^{theta_i} (phi_i - t_i)^2 + kappa/2 sum_e (D phi)_e^2
                        + 1/2 (theta - theta_0, K_theta (theta - theta_0)) + ln Z_phi(theta),
        ln Z_phi(theta) = -1/2 ln det(diag(e^theta) + kappa D^T D)  (+ const),

    K_theta = gamma_theta (-Delta_nodes + mu_theta I) in lattice units, as for the stiffness hyperfield.  Decisions:
    e^theta rather than (459)'s theta^2 keeps the mass positive and one-signed (theta and -theta are not the same
    prior twice); (459)'s lambda (theta, K_theta theta) is written 1/2 (., K_theta .) with lambda inside gamma_theta.
    Unlike the stiffness, ln Z does not split per node even in 1-D: it is the exact log-determinant of the
    tridiagonal K(theta), O(n), and its theta-gradient ``-1/2 e^theta diag(K^{-1})`` (Takahashi).  That term is
    concave in theta, so the theta problem is not convex: it is minimised by L-BFGS and a step is kept only if it
    lowers the energy.  Units: e^theta carries 1/y^2 (theta_0 -> theta_0 - 2 ln c), kappa x^2/y^2, gamma_theta and
    mu_theta are pure numbers."""

    chain: Chain
    kappa: float
    template: np.ndarray
    theta0: float
    gamma_theta: float
    mu_theta: float

    @cached_property
    def K_theta(self) -> sp.csr_matrix:
        n = self.chain.n
        G = sp.diags([-np.ones(n - 1), np.ones(n - 1)], [0, 1], shape=(n - 1, n))
        return sp.csr_matrix(self.gamma_theta * (G.T @ G + self.mu_theta * sp.identity(n)))

    def log_det(self, theta) -> tuple[float, np.ndarray]:
        """ln det(diag(e^theta) + kappa D^T D) and diag of its inverse."""
        L = (self.kappa * (self.chain.D.T @ self.chain.D)).tocsr()
        return _tridiagonal_logdet_and_inverse_diagonal(np.exp(theta) + L.diagonal(), L.diagonal(1))

    def theta_energy(self, theta, phi) -> float:
        """The theta-dependent part for fixed phi."""
        d = np.asarray(theta, dtype=float) - self.theta0
        ld, _ = self.log_det(theta)
        r2 = (np.asarray(phi) - self.template) ** 2
        return float(0.5 * np.sum(np.exp(theta) * r2) + 0.5 * d @ (self.K_theta @ d) - 0.5 * ld)

    def theta_gradient(self, theta, phi) -> np.ndarray:
        """1/2 e^theta (phi - t)^2 + K_theta (theta - theta_0) - 1/2 e^theta diag(K(theta)^{-1})."""
        _, zdiag = self.log_det(theta)
        r2 = (np.asarray(phi) - self.template) ** 2
        d = np.asarray(theta, dtype=float) - self.theta0
        return 0.5 * np.exp(theta) * (r2 - zdiag) + self.K_theta @ d

    def value(self, phi, theta) -> float:
        u = self.chain.D @ phi
        return self.chain.data_energy(phi) + 0.5 * self.kappa * float(u @ u) + self.theta_energy(theta, phi)

    def phi_step(self, theta) -> np.ndarray:
        """(K_D + diag(e^theta) + kappa D^T D) phi = K_D t_D + e^theta t."""
        c = self.chain
        A = c.KD + sp.diags(np.exp(theta)) + self.kappa * (c.D.T @ c.D)
        return np.asarray(spla.spsolve(sp.csc_matrix(A), c.rhs + np.exp(theta) * self.template), dtype=float)

    def theta_step(self, theta, phi) -> np.ndarray:
        """A lower-energy theta for fixed phi (L-BFGS on the non-convex theta problem; theta kept if no descent)."""
        th = np.asarray(theta, dtype=float)
        res = minimize(self.theta_energy, th, args=(phi,), jac=self.theta_gradient, method="L-BFGS-B",
                       bounds=[(None, 700.0)] * th.size, options=dict(maxiter=200, ftol=1e-14, gtol=1e-10))
        return res.x if res.fun <= self.theta_energy(th, phi) else th


@dataclass
class MassFit:
    """A local-mass fit: phi, theta (per node), the joint energy per alternation, iterations, converged."""

    phi: np.ndarray
    theta: np.ndarray
    energy: list
    iterations: int
    converged: bool
    model: MassField = field(repr=False)

    @property
    def mass2(self) -> np.ndarray:
        return np.exp(self.theta)


def mass_field_fit(x, y, axis: Axis, sigma: float, kappa: float, theta0: float, gamma_theta: float,
                   mu_theta: float, template=None, cuts=(), max_iter: int = 200, tol: float = 1e-9,
                   theta_bound: float = 20.0) -> MassFit:
    """Joint MAP of phi and a local mass field, eqs. (458)-(459) (:class:`MassField`), by alternating the exact phi
    solve with a descent step of the theta problem: the joint energy never increases.  The template t (node values,
    default 0) is what a large local mass copies.  A runaway of theta beyond theta_0 + ``theta_bound`` raises
    :class:`HyperpriorTooWeak`."""
    c = chain(x, y, axis, sigma, cuts)
    if not (np.isfinite(float(kappa)) and float(kappa) > 0):
        raise ValueError(f"kappa (stiffness per edge, units x^2/y^2) must be a finite number > 0, got {kappa!r}")
    _check_hyperprior(theta0, gamma_theta, mu_theta, "mass squared")
    t = np.zeros(c.n) if template is None else np.asarray(template, dtype=float)
    if t.shape != (c.n,) or not np.all(np.isfinite(t)):
        raise ValueError(f"template must hold {c.n} finite node values, got shape {t.shape}")
    model = MassField(c, float(kappa), t, float(theta0), float(gamma_theta), float(mu_theta))
    def runaway(new):
        bad = new - model.theta0 > theta_bound
        if np.any(bad):
            raise HyperpriorTooWeak(f"the hyperprior is too weak: the local mass diverges near x = "
                                    f"{_stretches(axis.nodes, bad, axis.h)}; raise gamma_theta (or mu_theta)")
    phi, theta, energy, it, converged = _alternate(model, np.full(c.n, model.theta0), model.theta_step, runaway,
                                                   max_iter, tol)
    return MassFit(phi, theta, energy, it, converged, model)
