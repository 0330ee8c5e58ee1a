"""Local prior mixtures (Sect. 6.4), a log-stiffness hyperfield (Sects. 5.3.3, 5.6) and cuts (eqs. (519)-(522)) for
the conditional density p(y|x) with field L = ln P on the (x, y) grid: the 2-D versions of
:mod:`bftcore.models.local_priors` (issue 29).

The lattice.  The edges are the rows of the grid's first-difference filter G (:func:`lattice`): x-edges
``(G L)_e = sqrt(lambda_x) (L[i+1, j] - L[i, j]) / hx`` and y-edges ``sqrt(lambda_y) (L[i, j+1] - L[i, j]) / hy``
(free ends; a direction with lambda_x or lambda_y = 0 has no edges; a periodic axis is refused: a local prior acts
on the edges of an open lattice).  ``G^T G`` is the l2 :class:`~bftcore.foundations.operators.PriorOperator` of a
Neumann (or free) grid, so the document's Gaussian prior ``(lambda/2)(L - t, K (L - t))`` (grid inner product) is
``1/2 sum_e kappa_0 (G (L - t))_e^2`` with the per-edge stiffness ``kappa_0 = lambda hx hy``.  Decision: the switch
acts on both directions (every edge carries a label), the natural 2-D reading of "every filter row".

A *cut* at x = c (between two x columns) removes the x-edges that cross it: the energy then splits into the blocks
left and right of the cut (the normalisation is per x column, so it couples nothing across), and the fit on one
side does not depend on the data on the other side (tested).  Unlike regression, a block without data is allowed:
the per-column normalisation fixes its level.

Local prior mixture (582)-(588).  Alternative k of m has stiffness ``r_k kappa_0`` (``r_k``: ``stiffness``, pure
numbers relative to the document's Gaussian prior, as in :mod:`bftcore.models.local_regression`) and template t_k:

    E(L) = -sum_data L - sum_e ln sum_k pi_k exp(-beta/2 r_k kappa_0 (G (L - t_k))_e^2 - ln Z_{e,k}),

on conditionally normalised L (as :class:`bftcore.models.density.LogDensityEnergy`: the normalisation per x column
by parameterisation, eq. (146), the Lagrange multipliers Lambda_X of (137)).  Filter switching: equal templates,
several r_k (stiff and soft edges); template switching: one r for all k, several templates.  With m = 1 and
beta = 1 the energy is the Gaussian density energy with the document's lambda (tested to 1e-10).

Decision, ln Z in 2-D: ``ln Z_{e,k} = -1/2 ln r_k`` (the common -1/2 ln kappa_0 dropped: it changes no
responsibility).  This is the *local approximation*.  It is exact on a tree (a 1-D chain with free ends: the edges
are then independent coordinates of L modulo a constant), but on the 2-D lattice the edges are not independent
(the differences around a plaquette sum to zero) and the exact ``-1/2 ln det' G^T diag(kappa(theta)) G`` does not
factorise over edges ((586) claims it does; it does not in 2-D).  What the approximation means: each label's
normalisation is counted as if its edge were a free coordinate; a soft edge in 2-D is held by the stiff edges around
it, so the exact prior favours soft edges less than the local one (the leverage of an edge, its share of the
log-determinant, is below 1 in 2-D: about (n - 1)/edges on average).  The exact term would couple all labels and
make the label sum exponential; the local one keeps the exact edge-by-edge sum of (585).

EM on the labels: (E) ``a_k(e)`` from L by (588); (M) ONE Newton step, with the solver's Armijo line search
(:func:`bftcore.foundations.solvers.line_search`) and the normalisation kept, of the a-weighted Gaussian problem
(:class:`EdgeQuadraticDensityEnergy`: per edge ``1/2 c_e ((G L)_e - b_e)^2`` with ``c_e = beta kappa_0 sum_k a_k r_k``
and the filtered template ``b_e = sum_k a_k r_k (G t_k)_e / sum_k a_k r_k``, plus the constant that makes it the
Jensen bound ``S(L; a) >= E(L)``, equal at the L where a was taken).  The line search lowers S, so
``E(new) <= S(new) < S(old) = E(old)``: the energy never increases (tested exactly).  The Newton direction is the
direct (sparse LU) solution of the bordered system of :class:`bftcore.models.robust.IRLSDensityStep`'s pattern,
``M d + V mu = -G``, ``sum_y V d = 0``, ``M = G^T diag(c) G + diag(max(Lambda_X, 0) P hy)``: the Newton matrix (160)
of the weighted Gaussian problem where Lambda_X >= 0 (its Gauss-Newton form elsewhere).  Decision: a direct solve,
not the density's CG with the separable preconditioner, which is built for a uniform K; the weights of soft and stiff
edges differ by orders of magnitude.

Hyperfield (454)-(457) in 2-D: a real log-stiffness theta(e) per edge, relative to kappa_0,

    E(L, theta) = -sum_data L + 1/2 sum_e kappa_0 e^{theta(e)} (G (L - t))_e^2
                  + 1/2 (theta - theta_0, K_theta (theta - theta_0)) - 1/2 sum_e theta(e),

``K_theta = gamma_theta (-Delta_edges + mu_theta I)`` in lattice units (no h), -Delta_edges the graph Laplacian of
neighbouring edges: an x-edge neighbours the x-edges next to it in x and in y, a y-edge the y-edges next to it
(x-edges and y-edges are two lattices, not coupled); pairs across a cut are dropped, so the cut decouples theta too.
Decision, ln det in 2-D: the local ``-1/2 sum_e theta(e)``, exact on a chain, an approximation in 2-D (the same
meaning as for the mixture; :func:`exact_log_det_term` gives the exact ``-1/2 ln det'`` for small grids, and a test
reports the gap: on a 5 x 5 lattice, 40 edges and 25 nodes, the exact slope along a uniform shift of theta is
-1/2 (nodes - 1) = -12 against the local -20; for theta ~ N(0, 0.3^2) the exact term is -0.76, the local -1.25).
A better first-order choice would weight each edge by its leverage ``(G K^+ G^T)_ee`` at theta_0 (1 on a tree, 0.6
on average on that lattice), at the cost of a pseudo-inverse; not built.  The local term keeps the theta problem
strictly convex (the exact term is concave in theta: ln det' is a log-sum over spanning trees of exp(sum theta),
convex).  Alternation: one Newton step of the weighted Gaussian L
problem at fixed theta (``c = kappa_0 e^theta``, ``b = G t``), then the convex theta problem solved by Newton with
backtracking: the joint energy never increases.  A weak hyperprior lets e^theta run away where L is flat: when
theta - theta_0 exceeds ``theta_bound`` the solver raises :class:`~bftcore.models.local_priors.HyperpriorTooWeak`
naming the edges' x and y ranges, never NaN.

The document (``"model": "density"``, ``prior.field`` "L", :func:`bftcore.foundations.config._local_density_prior`):
``prior.local`` and ``prior.cuts`` with the keys of a regression's; kappa_0 = lambda l2 hx hy with the document's
lambda_x, lambda_y; the document's beta is the labels' temperature with ``beta kappa_k = r_k kappa_0`` (so one
alternative, or cuts alone, is the document's Gaussian prior for any beta); the one template, if any, is the prior
mean of every alternative.  The kinds ``density-local-switch`` and ``density-local-hyperfield``
(:class:`LocalDensityKind`) run the sweeps above (the switch from the document's ``solver.init``, the hyperfield from
the Gaussian fit at theta_0) with ``solver.max_iter`` sweeps and ``solver.tol`` on the max-abs change.

Units (x -> a x + b, y -> c y + d): L -> L - ln c, and every hyperparameter is a pure number (r_k, pi_k, beta,
theta_0, gamma_theta, mu_theta) provided the document's Gaussian prior is rescaled so that it is the same prior
(``lambda -> lambda / (a c)``, ``lambda_x -> a^2 lambda_x``, ``lambda_y -> c^2 lambda_y``: the per-edge stiffnesses
kappa_0 lambda_x / hx^2 and kappa_0 lambda_y / hy^2 unchanged); templates shift by -ln c (tested).
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..foundations import metrics
from ..foundations.config import ConfigError, MapOnlyKind, checked
from ..foundations.grid import Grid
from ..foundations.linalg import saddle_lu
from ..foundations.operators import PriorOperator, difference_matrix
from ..foundations.records import FitResult, Record, finite_list
from ..foundations.solvers import at_energy_rounding, line_search
from ..foundations.solvers import iterate as solver_iterate
from .density import (
    DensityFit,
    DensityProblem,
    LogDensityEnergy,
    LogPoint,
    Prior,
    build_density,
    initial_field,
    normalise_log,
    run_to_end,
)
from .local_priors import HyperpriorTooWeak, _check_hyperprior
from .local_regression import ONE_TEMPLATE, LocalRecord

__all__ = ["Lattice", "lattice", "EdgeQuadraticDensityEnergy", "KKTNewtonStep", "LocalMixtureDensityEnergy",
           "local_mixture_density", "em_sweeps", "LocalDensityFit", "fit_local_density", "DensityHyperfield",
           "density_hyperfield", "hyperfield_sweeps", "DensityHyperfieldFit", "fit_density_hyperfield",
           "exact_log_det_term", "HyperpriorTooWeak", "LocalDensityKind", "LocalDensityDocumentFit",
           "solve_document"]


# --------------------------------------------------------------------------------------------------------------
# the lattice: edges of the (x, y) grid, cuts
# --------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Lattice:
    """The kept edges of a density grid (module docstring).  ``G`` has one row per edge on x-major flattened fields;
    ``direction[e]`` is 0 for an x-edge, 1 for a y-edge; ``(i[e], j[e])`` its first node (the second is one step
    further in its direction); ``kappa0 = lambda hx hy``; ``reference`` the document's Gaussian prior operator
    (l2 with lambda_x, lambda_y on a Neumann grid), ``G^T G`` without cuts."""

    grid: Grid
    lam: float
    G: sp.csr_matrix
    direction: np.ndarray
    i: np.ndarray
    j: np.ndarray
    cuts: tuple
    reference: PriorOperator

    @property
    def kappa0(self) -> float:
        return self.lam * self.grid.cell

    @property
    def n_edges(self) -> int:
        return int(self.G.shape[0])

    @cached_property
    def GT(self) -> sp.csr_matrix:
        return sp.csr_matrix(self.G.T)

    @property
    def edge_x(self) -> np.ndarray:
        """x of the edges' midpoints."""
        g = self.grid
        return g.x.nodes[self.i] + 0.5 * g.hx * (self.direction == 0)

    @property
    def edge_y(self) -> np.ndarray:
        g = self.grid
        return g.y.nodes[self.j] + 0.5 * g.hy * (self.direction == 1)

    def crosses_cut(self, i_left: np.ndarray) -> np.ndarray:
        """Whether the step from x column i to i + 1 crosses a cut."""
        xs = self.grid.x.nodes
        out = np.zeros(np.shape(i_left), dtype=bool)
        for c in self.cuts:
            out |= (xs[i_left] < c) & (c < xs[np.minimum(i_left + 1, self.grid.x.n - 1)])
        return out

    @cached_property
    def neighbours(self) -> sp.csr_matrix:
        """Differences between neighbouring edges of the same direction (lattice units): ``-Delta_edges = N^T N``.
        Pairs whose x step crosses a cut are left out."""
        index = {(int(d), int(a), int(b)): e for e, (d, a, b) in enumerate(zip(self.direction, self.i, self.j))}
        pairs = []
        for e, (d, a, b) in enumerate(zip(self.direction, self.i, self.j)):
            for da, db in ((1, 0), (0, 1)):
                f = index.get((int(d), int(a) + da, int(b) + db))
                if f is None:
                    continue
                if da == 1 and d == 1 and self.crosses_cut(np.array([a]))[0]:
                    continue  # y-edges in the columns either side of a cut
                pairs.append((e, f))
        p = np.asarray(pairs, dtype=int).reshape(-1, 2)
        rows = np.repeat(np.arange(len(p)), 2)
        return sp.csr_matrix((np.tile([-1.0, 1.0], len(p)), (rows, p.ravel())), shape=(len(p), self.n_edges))


def lattice(grid: Grid, lam: float, lambda_x: float = 1.0, lambda_y: float = 1.0, cuts=()) -> Lattice:
    """The :class:`Lattice` of ``grid`` for the Gaussian prior ``lambda`` with ``lambda_x``, ``lambda_y`` (l2) and
    cuts at the x positions ``cuts`` (strictly between two x nodes)."""
    if grid.x.boundary == "periodic" or grid.y.boundary == "periodic":
        raise ValueError("a local prior acts on the edges of an open lattice (free ends), but the grid has a periodic "
                         "axis; give both axes the boundary 'neumann' or 'free'")
    for name, v in (("lambda", lam), ("lambda_x", lambda_x), ("lambda_y", lambda_y)):
        if not (np.isfinite(float(v)) and float(v) >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    if not float(lam) > 0 or not (float(lambda_x) > 0 or float(lambda_y) > 0):
        raise ValueError(f"the Gaussian prior must act (lambda > 0 and lambda_x or lambda_y > 0), got "
                         f"lambda = {lam!r}, lambda_x = {lambda_x!r}, lambda_y = {lambda_y!r}")
    nx, ny = grid.shape
    xs = grid.x.nodes
    cut_list = tuple(float(c) for c in np.atleast_1d(np.asarray(cuts, dtype=float)))
    for c in cut_list:
        if not (np.isfinite(c) and grid.x.min < c < grid.x.max):
            raise ValueError(f"cut at x = {c:g} is outside the grid's interior ({grid.x.min:g}, {grid.x.max:g}); put "
                             f"cuts strictly between the first and last x node")
        s = (c - grid.x.min) / grid.hx
        if abs(s - round(s)) < 1e-9:
            raise ValueError(f"cut at x = {c:g} falls on an x node; put it between two nodes (e.g. "
                             f"x = {grid.x.min + (round(s) + 0.5) * grid.hx:g})")
    blocks, dirs, ii, jj = [], [], [], []
    if lambda_x > 0 and nx > 1:
        blocks.append(np.sqrt(lambda_x) * sp.kron(difference_matrix(nx, 1, grid.hx), sp.identity(ny)))
        a, b = np.meshgrid(np.arange(nx - 1), np.arange(ny), indexing="ij")
        dirs.append(np.zeros(a.size, dtype=int))
        ii.append(a.ravel())
        jj.append(b.ravel())
    if lambda_y > 0 and ny > 1:
        blocks.append(np.sqrt(lambda_y) * sp.kron(sp.identity(nx), difference_matrix(ny, 1, grid.hy)))
        a, b = np.meshgrid(np.arange(nx), np.arange(ny - 1), indexing="ij")
        dirs.append(np.ones(a.size, dtype=int))
        ii.append(a.ravel())
        jj.append(b.ravel())
    if not blocks:
        raise ValueError(f"the grid {nx} x {ny} has no edges in the directions the prior acts on")
    G = sp.csr_matrix(sp.vstack(blocks))
    direction, i, j = np.concatenate(dirs), np.concatenate(ii), np.concatenate(jj)
    keep = np.ones(direction.size, dtype=bool)
    for c in cut_list:
        keep &= ~((direction == 0) & (xs[i] < c) & (c < xs[np.minimum(i + 1, nx - 1)]))
    reference = PriorOperator(grid, float(lambda_x), float(lambda_y), 0.0, 1.0)
    return Lattice(grid, float(lam), sp.csr_matrix(G[keep]), direction[keep], i[keep], j[keep], cut_list, reference)


# --------------------------------------------------------------------------------------------------------------
# the weighted Gaussian problem of one EM sweep or one alternation, and its Newton step
# --------------------------------------------------------------------------------------------------------------
class EdgeQuadraticDensityEnergy(LogDensityEnergy):
    """E_L with the prior ``1/2 sum_e c_e ((G L)_e - b_e)^2 + const`` (per-edge stiffness c >= 0, filtered template b,
    a constant): the a-weighted Gaussian problem of an EM sweep and the L problem of a hyperfield at fixed theta.
    ``prior`` (what the base class's preconditioner and massive relaxation see) is the document's Gaussian prior."""

    def __init__(self, lat: Lattice, N: np.ndarray, c: np.ndarray, b: np.ndarray, const: float = 0.0):
        super().__init__(lat.grid, N, Prior(lat.reference, lat.lam))
        self.lattice, self.c, self.b, self.const = lat, np.asarray(c, dtype=float), np.asarray(b, dtype=float), const
        if self.c.shape != (lat.n_edges,) or self.b.shape != (lat.n_edges,):
            raise ValueError(f"c and b must hold one value per edge ({lat.n_edges})")

    def at(self, L: np.ndarray) -> "EdgeQuadraticPoint":
        return EdgeQuadraticPoint(self, np.asarray(L, dtype=float))

    def prior_matrix(self) -> sp.csr_matrix:
        lat = self.lattice
        return sp.csr_matrix(lat.GT @ sp.diags(self.c) @ lat.G)


class _EdgePoint(LogPoint):
    """A LogPoint whose prior is a function of the filtered field u = G L, per edge: subclasses give
    ``edge_derivative`` f'(u) and ``edge_curvature`` f''(u) (and ``prior_energy``)."""

    energy: "EdgeQuadraticDensityEnergy | LocalMixtureDensityEnergy"

    @property
    def edge_derivative(self) -> np.ndarray:
        raise NotImplementedError  # each subclass gives its own

    @property
    def edge_curvature(self) -> np.ndarray:
        raise NotImplementedError  # each subclass gives its own

    @cached_property
    def u(self) -> np.ndarray:
        return self.energy.lattice.G @ np.ravel(self.phi)

    @property
    def mixing(self) -> np.ndarray:
        return np.ones(1)

    @cached_property
    def prior_gradient(self) -> np.ndarray:
        return (self.energy.lattice.GT @ self.edge_derivative).reshape(self.phi.shape)

    def _action(self, v: np.ndarray, w: np.ndarray) -> np.ndarray:
        lat = self.energy.lattice
        return (lat.GT @ (w * (lat.G @ np.ravel(v)))).reshape(v.shape)

    def prior_hessp(self, v: np.ndarray) -> np.ndarray:
        return self._action(v, self.edge_curvature)

    def hessp(self, v: np.ndarray, convexified: bool = False) -> np.ndarray:
        """The Hessian (160) with this prior; ``convexified``: Lambda_X clipped at 0 and the edge curvature at 0."""
        V = self.P * self.energy.grid.hy
        Jv = v - np.sum(V * v, axis=1, keepdims=True)
        lamX = self.lagrange_multiplier
        w = self.edge_curvature
        if convexified:
            lamX, w = np.maximum(lamX, 0.0), np.maximum(w, 0.0)
        MJv = self._action(Jv, w) + lamX[:, None] * V * Jv
        return MJv - V * MJv.sum(axis=1, keepdims=True)


class EdgeQuadraticPoint(_EdgePoint):
    energy: EdgeQuadraticDensityEnergy

    @cached_property
    def prior_energy(self) -> float:
        E = self.energy
        r = self.u - E.b
        return float(0.5 * np.sum(E.c * r * r) + E.const)

    @cached_property
    def edge_derivative(self) -> np.ndarray:
        return self.energy.c * (self.u - self.energy.b)

    @property
    def edge_curvature(self) -> np.ndarray:
        return self.energy.c


class KKTNewtonStep:
    """One Newton iteration on L for an :class:`EdgeQuadraticDensityEnergy` (the step protocol of
    :func:`bftcore.foundations.solvers.iterate`): the bordered system ``M d + V mu = -G``, ``sum_y V d = 0`` per x,
    ``M = G^T diag(c) G + diag(max(Lambda_X, 0) P hy)``, solved by sparse LU, then the Armijo line search from
    eta = 1 on the energy.  Label ``"newton-kkt"``."""

    def __init__(self, energy: EdgeQuadraticDensityEnergy):
        self.energy = energy
        nx, ny = energy.grid.shape
        self.rows = np.repeat(np.arange(nx), ny)
        self.prior_matrix = energy.prior_matrix()

    def direction(self, point) -> np.ndarray:
        E = self.energy
        nx, ny = E.grid.shape
        n = nx * ny
        V = (point.P * E.grid.hy).ravel()
        M = self.prior_matrix + sp.diags(np.repeat(np.maximum(point.lagrange_multiplier, 0.0), ny) * V)
        B = sp.csr_matrix((V, (self.rows, np.arange(n))), shape=(nx, n))
        kkt = sp.bmat([[M, B.T], [B, None]], format="csc")
        rhs = np.concatenate([-np.ravel(point.gradient), np.zeros(nx)])
        return saddle_lu(kkt).solve(rhs)[:n].reshape(E.grid.shape)

    def take(self, phi: np.ndarray, point):
        d = self.direction(point)
        slope = float(np.vdot(point.gradient, d))
        if not slope < 0:
            return 0.0, phi, None, "newton-kkt"
        if at_energy_rounding(slope, point.value):
            # the decrease Newton predicts is below the energy's rounding: the rule of the solver's DescentStep, the
            # full step is kept if it halves the residual without raising E beyond its rounding (1e-15 relative)
            full_phi = self.energy.normalise(phi + d)
            full = self.energy.at(full_phi)
            if full.value <= point.value + 1e-15 * abs(point.value) and full.residual < 0.5 * point.residual:
                return 1.0, full_phi, full, "newton-kkt"
        eta, new_phi, new_point = line_search(self.energy, phi, d, point.value, slope, eta0=1.0)
        return eta, new_phi, new_point, "newton-kkt"


def newton_step(energy: EdgeQuadraticDensityEnergy, L: np.ndarray) -> tuple[np.ndarray, bool]:
    """One :class:`KKTNewtonStep` from the normalised ``L``: ``(new L, moved)``; L itself when no step lowers the
    energy (at its minimum to rounding)."""
    _, new, point, _ = KKTNewtonStep(energy).take(L, energy.at(L))
    return (new, True) if point is not None else (L, False)


def solve_weighted(energy: EdgeQuadraticDensityEnergy, L0: np.ndarray, max_iter: int = 100, tol: float = 1e-13):
    """The minimiser of a weighted Gaussian problem by repeated :class:`KKTNewtonStep` (the solver's records)."""
    return list(solver_iterate(energy, L0, min_iter=1, max_iter=max_iter, tol=tol, step=KKTNewtonStep(energy)))


# --------------------------------------------------------------------------------------------------------------
# the local prior mixture
# --------------------------------------------------------------------------------------------------------------
class LocalMixtureDensityEnergy(LogDensityEnergy):
    """The full (non-quadratic) energy of a local prior mixture on L (module docstring).  ``stiffness`` r_k,
    ``pis`` pi_k, ``beta``, ``templates`` (m, nx, ny) fields t_k of L (zeros for filter switching)."""

    def __init__(self, lat: Lattice, N: np.ndarray, stiffness, pis, beta: float = 1.0, templates=None):
        super().__init__(lat.grid, N, Prior(lat.reference, lat.lam))
        r = np.atleast_1d(np.asarray(stiffness, dtype=float))
        if r.ndim != 1 or r.size == 0 or not np.all(np.isfinite(r)) or np.any(r <= 0):
            raise ValueError(f"stiffness must list one number > 0 per alternative (relative to the Gaussian prior's "
                             f"lambda; a cut, not 0, removes an edge), got {np.asarray(stiffness).tolist()}")
        p = np.atleast_1d(np.asarray(pis, dtype=float))
        if templates is not None and r.size == 1 and p.size > 1:
            r = np.full(p.shape, r[0])
        if p.shape != r.shape or not np.all(np.isfinite(p)) or np.any(p <= 0) or abs(p.sum() - 1) > 1e-9:
            raise ValueError(f"pis must give one prior probability > 0 per alternative ({r.size}), summing to 1, "
                             f"got {p.tolist()}")
        if not (np.isfinite(float(beta)) and float(beta) > 0):
            raise ValueError(f"beta (the temperature of the labels) must be a finite number > 0, got {beta!r}")
        shape = (r.size,) + lat.grid.shape
        t = np.zeros(shape) if templates is None else np.asarray(templates, dtype=float).reshape(-1, *lat.grid.shape)
        if t.shape != shape or not np.all(np.isfinite(t)):
            raise ValueError(f"templates must be {r.size} finite fields of the grid's shape {lat.grid.shape}")
        self.lattice, self.r, self.pis, self.beta, self.templates = lat, r, p / p.sum(), float(beta), t
        self.c = self.beta * lat.kappa0 * r                                  # (m,) per-edge curvature of label k
        self.bt = np.stack([lat.G @ np.ravel(tk) for tk in t])               # (m, edges) filtered templates
        self.ln_Z = -0.5 * np.log(r)                                         # local approximation (docstring)

    def at(self, L: np.ndarray) -> "LocalMixturePoint":
        return LocalMixturePoint(self, np.asarray(L, dtype=float))

    def surrogate(self, a: np.ndarray) -> EdgeQuadraticDensityEnergy:
        """The Jensen bound S(.; a) >= E with equality where ``a`` are the responsibilities: the a-weighted Gaussian
        problem ``1/2 c_e ((G L)_e - b_e)^2 + const`` (module docstring)."""
        c = np.sum(a * self.c[:, None], axis=0)
        b = np.sum(a * self.c[:, None] * self.bt, axis=0) / c
        spread = np.sum(a * self.c[:, None] * self.bt ** 2, axis=0) - c * b ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            entropy = np.where(a > 0, a * np.log(a), 0.0)
        const = float(np.sum(0.5 * spread) + np.sum(entropy) - np.sum(a * (np.log(self.pis) - self.ln_Z)[:, None]))
        return EdgeQuadraticDensityEnergy(self.lattice, self.N, c, b, const)


class LocalMixturePoint(_EdgePoint):
    energy: LocalMixtureDensityEnergy

    @cached_property
    def _log_weights(self) -> np.ndarray:
        E = self.energy
        r = self.u[None, :] - E.bt
        return (np.log(E.pis) - E.ln_Z)[:, None] - 0.5 * E.c[:, None] * r * r

    @cached_property
    def responsibilities(self) -> np.ndarray:
        """a_k(e), eq. (588), shape (m, edges)."""
        lw = self._log_weights - self._log_weights.max(axis=0, keepdims=True)
        a = np.exp(lw)
        return a / a.sum(axis=0, keepdims=True)

    @cached_property
    def prior_energy(self) -> float:
        lw = self._log_weights
        top = lw.max(axis=0)
        return -float(np.sum(top + np.log(np.exp(lw - top).sum(axis=0))))

    @cached_property
    def _slopes(self) -> np.ndarray:
        E = self.energy
        return E.c[:, None] * (self.u[None, :] - E.bt)  # (m, edges): c_k (u - b_k)

    @cached_property
    def edge_derivative(self) -> np.ndarray:
        return np.sum(self.responsibilities * self._slopes, axis=0)

    @cached_property
    def edge_curvature(self) -> np.ndarray:
        """f''(u) = sum_k a_k c_k - Var_a(c_k (u - b_k)) (negative where the labels disagree)."""
        a, s = self.responsibilities, self._slopes
        return (np.sum(a * self.energy.c[:, None], axis=0) - np.sum(a * s * s, axis=0)
                + self.edge_derivative ** 2)


def local_mixture_density(grid: Grid, data, lam: float, stiffness, pis, beta: float = 1.0, lambda_x: float = 1.0,
                          lambda_y: float = 1.0, templates=None, cuts=()) -> LocalMixtureDensityEnergy:
    """The :class:`LocalMixtureDensityEnergy` of data points ``[[x, y], ...]`` on ``grid`` (checked)."""
    lat = lattice(grid, lam, lambda_x, lambda_y, cuts)
    return LocalMixtureDensityEnergy(lat, grid.counts(data), stiffness, pis, beta, templates)


def _start(energy, L0) -> np.ndarray:
    grid = energy.grid
    L = np.zeros(grid.shape) if L0 is None else np.asarray(L0, dtype=float)
    if L.shape != grid.shape or not np.all(np.isfinite(L)):
        raise ValueError(f"the start L0 must be a finite field of the grid's shape {grid.shape}, got {L.shape}")
    return normalise_log(L, grid.hy)


def em_sweeps(energy: LocalMixtureDensityEnergy, L0=None, max_iter: int = 500,
              tol: float = 1e-10) -> Iterator[tuple[int, np.ndarray, float, bool]]:
    """Yield ``(sweep, L, change, converged)``, the start (sweep 0) first: (E) a from L, (M) one Newton step of the
    surrogate.  Converged when the step moved L by at most ``tol`` (max-abs) or no step lowers the surrogate."""
    L = _start(energy, L0)
    yield 0, L, float("nan"), False
    for it in range(1, max_iter + 1):
        S = energy.surrogate(energy.at(L).responsibilities)
        new, moved = newton_step(S, L)
        change = float(np.max(np.abs(new - L)))
        L = new
        converged = not moved or change <= tol
        yield it, L, change, converged
        if converged:
            break


@dataclass
class LocalDensityFit:
    """A local-mixture density fit: L, the responsibilities a (m, edges), the energy per sweep (``energy[0]`` at the
    start), sweeps, converged."""

    L: np.ndarray
    a: np.ndarray
    energy: list
    iterations: int
    converged: bool
    model: LocalMixtureDensityEnergy = field(repr=False)

    @property
    def P(self) -> np.ndarray:
        return np.exp(self.L)


def fit_local_density(energy: LocalMixtureDensityEnergy, L0=None, max_iter: int = 500,
                      tol: float = 1e-10) -> LocalDensityFit:
    """EM on the labels (:func:`em_sweeps`) from ``L0`` (default: uniform)."""
    values = []
    it, L, converged = 0, _start(energy, L0), False
    for it, L, _, converged in em_sweeps(energy, L0, max_iter, tol):
        values.append(energy.at(L).value)
    return LocalDensityFit(L, energy.at(L).responsibilities, values, it, converged, energy)


def beta_continuation(grid: Grid, data, lam: float, stiffness, pis, betas, lambda_x: float = 1.0,
                      lambda_y: float = 1.0, templates=None, cuts=(), L0=None, max_iter: int = 500,
                      tol: float = 1e-10) -> list[LocalDensityFit]:
    """Follow one local-mixture density up a ladder of betas (the labels' inverse temperature), each EM warm-started
    from the previous L: the density's version of :func:`bftcore.models.local_priors.beta_continuation`.  At small
    beta the labels hardly depend on L and the problem is close to one Gaussian; climbing from there selects the
    branch continuously connected to it, where a cold start at large beta may stop in another basin."""
    bs = np.asarray(betas, dtype=float).ravel()
    if bs.size == 0 or np.any(~np.isfinite(bs)) or np.any(bs <= 0):
        raise ValueError(f"betas must be finite numbers > 0 (a ladder, usually increasing), got {bs.tolist()}")
    lat = lattice(grid, lam, lambda_x, lambda_y, cuts)
    counts = grid.counts(data)
    fits: list[LocalDensityFit] = []
    L = L0
    for b in bs:
        f = fit_local_density(LocalMixtureDensityEnergy(lat, counts, stiffness, pis, float(b), templates), L,
                              max_iter, tol)
        fits.append(f)
        L = f.L
    return fits


# --------------------------------------------------------------------------------------------------------------
# the hyperfield
# --------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DensityHyperfield:
    """The joint energy E(L, theta) of a log-stiffness per edge of a :class:`Lattice` (module docstring)."""

    lattice: Lattice
    N: np.ndarray
    template: np.ndarray
    theta0: float
    gamma_theta: float
    mu_theta: float

    @cached_property
    def K_theta(self) -> sp.csr_matrix:
        Nb = self.lattice.neighbours
        return sp.csr_matrix(self.gamma_theta * (Nb.T @ Nb + self.mu_theta * sp.identity(self.lattice.n_edges)))

    @cached_property
    def bt(self) -> np.ndarray:
        return self.lattice.G @ np.ravel(self.template)

    def _u2(self, L) -> np.ndarray:
        return (self.lattice.G @ np.ravel(L) - self.bt) ** 2

    def theta_energy(self, theta, L) -> float:
        """The theta-dependent part at fixed L:
        ``1/2 sum kappa_0 e^theta u^2 + 1/2 (theta - theta_0, K_theta (theta - theta_0)) - 1/2 sum theta``."""
        th = np.asarray(theta, dtype=float)
        d = th - self.theta0
        k0 = self.lattice.kappa0
        return float(0.5 * k0 * np.sum(np.exp(th) * self._u2(L)) + 0.5 * d @ (self.K_theta @ d) - 0.5 * np.sum(th))

    def theta_gradient(self, theta, L) -> np.ndarray:
        th = np.asarray(theta, dtype=float)
        return self.K_theta @ (th - self.theta0) + 0.5 * self.lattice.kappa0 * np.exp(th) * self._u2(L) - 0.5

    def L_energy(self, theta) -> EdgeQuadraticDensityEnergy:
        """The L problem at fixed theta (its prior is the joint energy's L part, without the theta-only terms)."""
        return EdgeQuadraticDensityEnergy(self.lattice, self.N, self.lattice.kappa0 * np.exp(theta), self.bt)

    def value(self, L, theta) -> float:
        return float(-np.sum(self.N * L) + self.theta_energy(theta, L))

    def theta_step(self, theta, L, max_newton: int = 50, tol: float = 1e-12) -> np.ndarray:
        """Minimise the strictly convex theta problem at fixed L: Newton with the Hessian
        ``K_theta + diag(1/2 kappa_0 e^theta u^2)`` and backtracking (the energy never rises; e^theta kept finite)."""
        u2 = self._u2(L)
        th = np.asarray(theta, dtype=float).copy()
        f = self.theta_energy(th, L)
        for _ in range(max_newton):
            g = self.theta_gradient(th, L)
            H = self.K_theta + sp.diags(0.5 * self.lattice.kappa0 * np.exp(th) * u2)
            step = np.asarray(spla.spsolve(sp.csc_matrix(H), -g), dtype=float)
            slope = float(g @ step)
            t, fc, cand = 1.0, np.inf, th
            while t >= 1e-12:
                cand = th + t * step
                fc = self.theta_energy(cand, L) if np.all(cand < 700) else np.inf
                if fc <= f + 1e-4 * t * slope:
                    break
                t *= 0.5
            if not fc <= f:
                break
            th, f = cand, fc
            if -slope <= tol * (1.0 + abs(f)):
                break
        return th


def density_hyperfield(grid: Grid, data, lam: float, theta0: float, gamma_theta: float, mu_theta: float,
                       lambda_x: float = 1.0, lambda_y: float = 1.0, template=None, cuts=()) -> DensityHyperfield:
    """The :class:`DensityHyperfield` of data points on ``grid`` (checked); theta is relative to ``lambda``."""
    _check_hyperprior(theta0, gamma_theta, mu_theta, "stiffness relative to lambda")
    lat = lattice(grid, lam, lambda_x, lambda_y, cuts)
    t = np.zeros(grid.shape) if template is None else np.asarray(template, dtype=float)
    if t.shape != grid.shape or not np.all(np.isfinite(t)):
        raise ValueError(f"template must be a finite field of the grid's shape {grid.shape}, got {t.shape}")
    return DensityHyperfield(lat, grid.counts(data), t, float(theta0), float(gamma_theta), float(mu_theta))


def _edge_places(lat: Lattice, mask: np.ndarray) -> str:
    parts = []
    for d, name in ((0, "x-edges"), (1, "y-edges")):
        sel = mask & (lat.direction == d)
        if np.any(sel):
            xs, ys = lat.edge_x[sel], lat.edge_y[sel]
            parts.append(f"{int(sel.sum())} {name} in x {xs.min():g}..{xs.max():g}, y {ys.min():g}..{ys.max():g}")
    return "; ".join(parts)


def hyperfield_sweeps(model: DensityHyperfield, L0=None, max_iter: int = 300, tol: float = 1e-10,
                      theta_bound: float = 20.0) -> Iterator[tuple[int, np.ndarray, np.ndarray, float, bool]]:
    """Yield ``(iteration, L, theta, change, converged)``: the start (theta = theta_0, L the Gaussian fit there, or
    one Newton step from ``L0``), then per alternation the theta problem solved at fixed L and one Newton step of L at
    fixed theta.  Raises :class:`HyperpriorTooWeak` (before taking such a theta) when theta - theta_0 exceeds
    ``theta_bound`` anywhere."""
    lat = model.lattice
    theta = np.full(lat.n_edges, model.theta0)
    if L0 is None:
        L = solve_weighted(model.L_energy(theta), np.zeros(lat.grid.shape))[-1].field
    else:
        L, _ = newton_step(model.L_energy(theta), _start(model.L_energy(theta), L0))
    yield 0, L, theta, float("nan"), False
    for it in range(1, max_iter + 1):
        new = model.theta_step(theta, L)
        bad = (new - model.theta0 > theta_bound) | ~np.isfinite(new)
        if np.any(bad):
            pull = model.gamma_theta * model.mu_theta
            raise HyperpriorTooWeak(
                f"the hyperprior is too weak: the stiffness runs away where L is flat ({_edge_places(lat, bad)}: "
                f"theta - theta0 > {theta_bound:g}; the per-edge pull gamma_theta*mu_theta = {pull:g} would let theta "
                f"reach theta0 + {1 / (2 * pull):.3g} on a flat stretch); raise gamma_theta (or mu_theta)")
        newL, moved = newton_step(model.L_energy(new), L)
        change = max(float(np.max(np.abs(new - theta))), float(np.max(np.abs(newL - L))))
        theta, L = new, newL
        converged = change <= tol
        yield it, L, theta, change, converged
        if converged:
            break


@dataclass
class DensityHyperfieldFit:
    """A density hyperfield fit: L, theta (per edge, relative to ln kappa_0), the joint energy per alternation,
    iterations, converged."""

    L: np.ndarray
    theta: np.ndarray
    energy: list
    iterations: int
    converged: bool
    model: DensityHyperfield = field(repr=False)

    @property
    def P(self) -> np.ndarray:
        return np.exp(self.L)


def fit_density_hyperfield(model: DensityHyperfield, L0=None, max_iter: int = 300, tol: float = 1e-10,
                           theta_bound: float = 20.0) -> DensityHyperfieldFit:
    """Joint MAP of L and theta by :func:`hyperfield_sweeps` (the joint energy never increases)."""
    values = []
    it, L, theta, converged = 0, None, None, False
    for it, L, theta, _, converged in hyperfield_sweeps(model, L0, max_iter, tol, theta_bound):
        values.append(model.value(L, theta))
    assert L is not None and theta is not None
    return DensityHyperfieldFit(L, theta, values, it, converged, model)


def exact_log_det_term(lat: Lattice, theta) -> float:
    """The exact ``-1/2 ln det' (G^T diag(e^theta) G)`` (pseudo-determinant: the product of the non-zero
    eigenvalues, the zero modes being the constants of each connected block), dense, for small grids only: what
    the local ``-1/2 sum_e theta(e)`` of the hyperfield approximates (module docstring)."""
    if lat.grid.size > 900:
        raise ValueError(f"the exact log-determinant is dense: for grids up to 900 nodes, this one has {lat.grid.size}")
    K = (lat.GT @ sp.diags(np.exp(np.asarray(theta, dtype=float))) @ lat.G).toarray()
    w = np.linalg.eigvalsh(K)
    zero = w <= 1e-10 * w.max()
    return -0.5 * float(np.sum(np.log(w[~zero])))


# --------------------------------------------------------------------------------------------------------------
# the problem kinds: a "model": "density" document with prior.local / prior.cuts (field L)
# (bftcore.foundations.config._local_density_prior: the keys, their units and what is refused)
# --------------------------------------------------------------------------------------------------------------
@dataclass
class _DocumentProblem:
    """A validated local-prior density document made ready for the solver."""

    density: DensityProblem   # grid, counts, the Gaussian operator and truth of the document
    model: LocalMixtureDensityEnergy | DensityHyperfield

    @property
    def type(self) -> str:
        return self.density.config["prior"]["local"]["type"]


def _document_problem(config: dict) -> _DocumentProblem:
    cfg = checked(config)
    if "local" not in cfg["prior"]:
        raise ValueError("this document has no prior.local or prior.cuts: it is a plain density")
    problem = build_density(cfg)
    pr, spec = cfg["prior"], cfg["prior"]["local"]
    lat = lattice(problem.grid, pr["lambda"] * pr["l2"], pr["lambda_x"], pr["lambda_y"], pr["cuts"])
    t = problem.energy.prior.templates[0]   # the document's template (zero without one)
    model: LocalMixtureDensityEnergy | DensityHyperfield
    if spec["type"] == "switch":
        # beta kappa_k = r_k kappa_0: one alternative is the document's Gaussian prior for any beta (the common
        # -1/2 ln(1/beta) of the ln Z drops out of the responsibilities)
        beta = float(cfg["beta"])
        r = np.asarray(spec["stiffness"], dtype=float) / beta
        model = LocalMixtureDensityEnergy(lat, problem.N, r, spec["pi"], beta, np.broadcast_to(t, (r.size,) + t.shape))
    else:
        _check_hyperprior(spec["theta0"], spec["gamma_theta"], spec["mu_theta"], "stiffness relative to lambda")
        model = DensityHyperfield(lat, problem.N, t, float(spec["theta0"]), float(spec["gamma_theta"]),
                                  float(spec["mu_theta"]))
    return _DocumentProblem(problem, model)


def _document_records(p: _DocumentProblem, init=None) -> Iterator[LocalRecord]:
    """One record per EM sweep (switch: ``local`` the responsibilities a_k(e)) or alternation (hyperfield:
    ``local`` theta(e), relative to the document's Gaussian stiffness), with L, P and the errors of a density."""
    t0 = time.perf_counter()
    density, so = p.density, p.density.config["solver"]
    model = p.model
    if isinstance(model, LocalMixtureDensityEnergy):
        L0 = initial_field(density, init)
        for it, L, change, conv in em_sweeps(model, L0, so["max_iter"], so["tol"]):
            pt = model.at(L)
            yield _record(p, it, L, pt.value, pt.residual, pt.responsibilities, change, conv, "em", t0)
    else:
        start = None if init is None or isinstance(init, str) else np.asarray(init, dtype=float)
        for it, L, theta, change, conv in hyperfield_sweeps(model, start, so["max_iter"], so["tol"]):
            residual = max(model.L_energy(theta).at(L).residual,
                           float(np.max(np.abs(model.theta_gradient(theta, L)))))
            yield _record(p, it, L, model.value(L, theta), residual, theta[None, :], change, conv, "alternation", t0)


def _record(p: _DocumentProblem, it: int, L, energy: float, residual: float, local, change: float, conv: bool,
            method: str, t0: float) -> LocalRecord:
    density = p.density
    te = metrics.test_error(L, density.P_true, density.grid) if density.P_true is not None else None
    return LocalRecord(iteration=it, energy=float(energy), train_error=metrics.training_error(L, density.N),
                       test_error=te, mixing=ONE_TEMPLATE, step=0.0 if it == 0 else change, residual=float(residual),
                       method="start" if it == 0 else method, change=change, converged=bool(conv),
                       elapsed_s=time.perf_counter() - t0, L=L, P=np.exp(L), field=L, local=np.asarray(local),
                       local_type=p.type)


@dataclass
class LocalDensityDocumentFit(DensityFit):
    """A density fit with a local prior: the records (the last with L, P and ``local``), the problem, and the
    lattice the labels live on.  ``problem.energy`` is the energy whose Lagrange multipliers the result reports:
    the mixture's, or the L problem's at the final theta."""

    lattice: Lattice | None = None
    local_type: str = "switch"

    @property
    def labels(self) -> np.ndarray:
        """a_k(e) (switch, m x edges) or theta(e) (hyperfield, 1 x edges, relative to the document's stiffness)."""
        assert isinstance(self.last, LocalRecord) and self.last.local is not None
        return self.last.local

    def to_document(self) -> dict:
        """The density result document (CONVENTIONS.md §4) plus ``local``: ``{"type", "edge_x", "edge_y" (the edges'
        midpoints), "edge_direction" (0 an x-edge, 1 a y-edge), "cuts"}`` (a regression's keys, plus y) and
        ``"responsibilities"`` (a_k(e), one list per alternative, eq. (588)) for a switch or ``"log_stiffness"``
        (theta(e): the log of the stiffness relative to the document's Gaussian one) for a hyperfield.  ``mixing`` is
        [1]: the labels are per edge."""
        doc = super().to_document()
        lat = self.lattice
        assert lat is not None
        local: dict = {"type": self.local_type, "edge_x": lat.edge_x.tolist(), "edge_y": lat.edge_y.tolist(),
                       "edge_direction": lat.direction.tolist(), "cuts": list(lat.cuts)}
        if self.local_type == "switch":
            local["responsibilities"] = finite_list(self.labels)
        else:
            local["log_stiffness"] = finite_list(self.labels[0])
        doc["local"] = local
        return doc


def solve_document(config: dict, init=None, callback=None) -> LocalDensityDocumentFit:
    """Fit a density document with a local prior to the end of its sweeps (``solver.max_iter``; ``solver.tol`` on
    the max-abs change of L, and of theta for a hyperfield), or until ``callback(record)`` returns True."""
    p = _document_problem(config)
    history, elapsed = run_to_end(_document_records(p, init), callback)
    model = p.model
    energy = model if isinstance(model, LocalMixtureDensityEnergy) else model.L_energy(history[-1].local[0])
    problem = dataclasses.replace(p.density, energy=energy)
    return LocalDensityDocumentFit(history, elapsed, problem, None, model.lattice, p.type)


class LocalDensityKind(MapOnlyKind):
    """A density (field L) with a local prior of one type (``"switch"``, ``"hyperfield"``) as a problem kind
    (:class:`bftcore.foundations.config.ProblemKind`), registered in :mod:`bftcore.models.problems` after the plain
    density, so that it is asked first; it claims the density documents whose ``prior.local.type`` is its type."""

    model: str = "density"
    y_on_grid: bool = True
    default_templates: tuple[str, ...] = ()
    result_type: type[FitResult] = LocalDensityDocumentFit
    drawn_as: str = "heatmap"
    no_evidence = ("the evidence of a density with a local prior (prior.local, prior.cuts) is not implemented (the sum "
                   "over the labels has no closed form); remove prior.local/cuts for the Laplace evidence")
    no_draws = ("posterior draws of a density with a local prior are not implemented; remove prior.local/cuts for "
                "the Laplace band")

    def __init__(self, local_type: str):
        self.local_type = local_type
        self.name = f"density-local-{local_type}"
        self.claims: dict[str, object] = {"prior.local.type": local_type}

    def nodes(self, cfg: dict) -> int:
        return cfg["grid"]["x"]["n"] * cfg["grid"]["y"]["n"]

    def is_sparse_heavy(self, cfg: dict) -> bool:
        return True  # one sparse LU of the bordered Newton system per sweep

    def iterate(self, cfg: dict, init=None) -> Iterator[Record]:
        yield from _document_records(_document_problem(cfg), init)

    def solve(self, cfg: dict, init=None, callback=None, check_stability: bool = False) -> FitResult:
        if check_stability:
            raise ConfigError("the stability check of a density with a local prior is not implemented (its Hessian "
                              "mixes over the labels); fit without it")
        return solve_document(cfg, init, callback)

