"""Laplace approximation of the evidence p(D | lambda, ...) of the density model with field L (Sect. 5.4, eq. (482)),
its derivative in lambda, evidence paths over a hyperparameter, and samples of the Laplace posterior.

The model (CONVENTIONS.md §2).  L lives on the manifold M of normalised log-densities,
``g_i(L) = sum_j exp(L[i, j]) hy - 1 = 0`` for every x_i, of dimension ``d = nx (ny - 1)``.  The prior is the
Gaussian ``exp(-(lambda/2)(L - t, K (L - t)))`` *conditioned on M* with the delta-function measure of Lemm's
normalisation factor, ``dmu = dL prod_i delta(g_i(L))``; the likelihood is ``prod_data P(x_d, y_d)``.  Hence

    p(D | lambda) = Z_D / Z_0,   Z_D = int_M exp(-E_L) dmu,   Z_0 = int_M exp(-(lambda/2)(L - t, K (L - t))) dmu.

What is integrated and what is conditioned.  Write ``L = g + c (x) 1`` with ``g`` in ``G`` = {fields with
``sum_j g[i, j] = 0`` for every x} (the y-modes other than 0 of the DCT/FFT basis) and ``c`` the per-x constants.
On M the constants are fixed by the normalisation, ``c_i = -ln sum_j exp(g[i, j]) hy``, and ``dmu`` is
``ny^(nx/2)`` times Lebesgue measure ``dg`` on G (integrate the delta function over c_i).  So the integrals run over
the d coordinates g, Lebesgue, and the per-x constants are conditioned, never integrated.  This is DEFT's treatment
of the kernel of Delta: its field phi modulo constants is our g.  The prior's null space is harmless exactly when it
lies in the conditioned directions: constants (l0 = 0) and functions of x alone (lambda_x = 0, l0 = 0) are per-x
constants.  If K has a zero mode with a y-dependence (lambda_y = 0 and l0 = 0: functions of y alone; or K = 0) the
prior is flat along directions of G and Z_0 diverges: refused (:func:`check_proper`).  ``ny^(nx/2)`` cancels in the
ratio, and so does every other constant of the measure.

Laplace approximation.  At a minimum L* of F on M (F = E_L for Z_D, the prior energy for Z_0)

    ln Z ~ -F(L*) + (d/2) ln 2 pi - 1/2 ln det H_g,

``H_g`` the Hessian of ``F(L(g))`` in orthonormal coordinates of G.  With the Lagrangian Hessian (eq. (160))
``H = lambda cell K + diag(Lambda_X P hy)`` (Lambda_X the multipliers, eq. (137)), the constraint rows
``C[i] = P[i, :] hy`` and ``B = [[H, C^T], [C, 0]]`` (bordered matrix, sparse):

    det H_g = det(H|_T) det(C C^T) ny^nx = |det B| ny^nx,

``H|_T`` the Hessian restricted to the tangent space ``T = {dL : sum_j P dL hy = 0}`` in orthonormal coordinates
(the surface measure of M would give ``det(H|_T)`` alone: the two measures differ by ``prod_i hy |P_i|``, which
depends on the mode, so the choice matters; the delta measure is Lemm's and DEFT's).  ``ln |det B|`` comes from
one sparse LU (SuperLU, minimum-degree ordering of B + B^T): exact.  Above :data:`EXACT_LOGDET_MAX_NODES` the
log-determinant is estimated by stochastic Lanczos quadrature of ``A_G^{-1/2} H_g A_G^{-1/2}``
(``A_G = lambda cell K`` on G, whose log-determinant is the exact sum of ``ln(lambda cell symbol)`` over the
y-modes != 0), with its standard error over the probes.

The prior's mode L0 on M does not depend on lambda (lambda only scales the prior energy), and its Hessian is
lambda times that at lambda = 1: ``ln Z_0 = -lambda e0 + (d/2) ln 2 pi - (d/2) ln lambda - 1/2 ln det H0_g(1)``
with ``e0 = 1/2 (L0 - t, K (L0 - t))``.  For a constant template (or none) L0 is uniform, T = G, and
``det H0_g`` is the product of ``cell symbol + Lambda0/ny`` over the modes with ky != 0 (exact, FFT/DCT).

    ln p(D | lambda) ~ -E_L(L*) - 1/2 ln det H_g(L*) + lambda e0 + (d/2) ln lambda + 1/2 ln det H0_g(1).

``data_fit`` is ``-E_L(L*)``, ``occam`` the rest.  The Laplace approximation of Z_0 is exact when the prior is
Gaussian in g (nx = 1 or lambda_x = 0, with l0 = 0); else it is an approximation, like that of Z_D.

Refused: field P (the constraints P >= 0 can be active at the optimum, where a Laplace approximation about an
interior mode has no meaning: use field L); prior mixtures (more than one template); improper priors on M.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import scipy.fft as sfft
import scipy.linalg as sla
import scipy.optimize as sopt
import scipy.sparse as sp

from ..foundations import metrics
from ..foundations.config import CHOOSE_DEFAULT_RANGE, check_evidence_path, check_samples, checked
from ..foundations.limits import blas_threads
from ..foundations.linalg import saddle_lu
from ..foundations.operators import PriorOperator, free_null_dim
from ..foundations.solvers import at_energy_rounding
from ..foundations.solvers import iterate as solver_iterate
from .density import DensityProblem, LogDensityEnergy, LogPoint, Prior, build_density, normalise_log

#: Grids up to this many nodes get the exact log-determinant (sparse LU of the bordered Hessian, 10-20 ms at
#: 64 x 64 with an l2 prior); larger ones the stochastic estimate with an error bar.
EXACT_LOGDET_MAX_NODES = 16_384
#: Exact traces of d_log_evidence_d_log_lambda (by the complex step: one complex LU of B, :func:`trace_by_complex_step`)
#: up to this many nodes, Hutchinson above; the evidence's maximum is refined by the slope's root up to here, by the
#: values above.  Decision, measured: at 96 x 96 (l2) the root took 10.0 s against the values' 3.8 s, the same lambda
#: to 2e-8 (a complex LU costs more there than the values' real ones); on the smaller grids the root's precision is
#: what makes data in other units choose the same lambda to 1e-6 (:func:`_refine_maximum`, tests/test_units.py).
EXACT_TRACE_MAX_NODES = 4_096
#: Laplace samples factor H_g (d x d, d = nx (ny - 1)) by a banded Cholesky factor (half-bandwidth
#: u = (r_x + 1)(ny - 1) - 1, r_x the reach of the prior's x stencil; the factor takes (u + 1) d 8 bytes, 13 MiB at
#: 96 x 96 with l2) unless x is periodic or the band is too wide to pay, then by a dense one (d^2 8 bytes): grids up
#: to this many nodes.  64 x 64 with l2 draws 10 samples in 0.06 s (one BLAS thread, 2 cores; 0.15 s while H_g was a
#: scalar sparse product W^T H W, before issue 31), the 1-D density at ny = 400 in 28 ms (118 ms), 9 ms of it H_g.
SAMPLE_MAX_NODES = 9_216
#: ... and within these estimates of the cost (:func:`_sample_plan`), checked before anything is built (a tall grid
#: or a periodic x axis reaches them first): peak working memory, floating-point operations of the factorisation,
#: multiply-adds of the block products that build H_g (:func:`_tangent_hessian_blocks`; BLAS, several 1e9 a second
#: here, the limit kept from the scalar sparse product's ~0.3-0.5e9).
_SAMPLE_MAX_BYTES = 512 * 2**20
_SAMPLE_MAX_FLOPS = 3e10
_SAMPLE_MAX_PRODUCT = 1e9
#: The banded route builds H_g this many nonzeros at a time (block rows of the sparse product), at about
#: _SAMPLE_BYTES_PER_NNZ bytes of working memory per nonzero.
_SAMPLE_CHUNK_NNZ = 2**20
_SAMPLE_BYTES_PER_NNZ = 64
#: An evidence path stops descending once the log evidence has fallen this far below the best value so far (the
#: values left are reported in ``skipped``): DEFT's ``max_log_evidence_ratio_drop`` (20) does the same.  A
#: posterior probability ratio of e^-20 to the best lambda is no contender, and below the data's own scale every
#: further value only costs Newton steps.
PATH_MAX_DROP = 20.0
#: Hyperparameters an evidence path may vary.
PATH_PARAMS = ("lambda", "l0", "l2", "l4", "l6")


# ---------------------------------------------------------------------------------------------------- refusals
def check_model(problem: DensityProblem) -> None:
    """Refuse what the Laplace evidence does not cover: field P, prior mixtures, priors improper on M."""
    cfg = problem.config
    if cfg["prior"]["field"] != "L":
        raise ValueError("the Laplace evidence is defined for field L only: with field P the constraints P >= 0 "
                         "can be active at the optimum, where a Laplace approximation about an interior mode has no "
                         "meaning; use prior.field \"L\"")
    if len(cfg["templates"]) > 1:
        raise ValueError("the evidence for prior mixtures (several templates) is not implemented; keep at most one "
                         "template, or compare the templates' evidences one at a time")
    check_proper(problem.K)
    check_flat_modes_pinned(problem)


def flat_mode_count(K: PriorOperator) -> int:
    """Number of spectral modes with ky != 0 that the prior leaves flat: the polynomials of y (degree 1 .. k-1)
    that a free y boundary does not penalise (:mod:`bftcore.foundations.operators`), once per x null mode.  Integrated
    with a flat prior of unit density in their orthonormal coordinates, as DEFT does with the kernel of its Delta; the
    evidence is then defined up to a constant that depends on neither lambda nor the data."""
    if K.grid.y.n == 1:
        return 0
    return int(np.sum(K.flat_modes[:, 1:]))


def check_flat_modes_pinned(problem: DensityProblem) -> None:
    """Refuse flat prior directions that the data cannot determine (the posterior would be improper too)."""
    K = problem.K
    if not flat_mode_count(K):
        return
    N = problem.N
    per_x = K.lambda_x == 0 or K.grid.x.n == 1
    if (per_x and np.any(N.sum(axis=1) == 0)) or N.sum() == 0:
        raise ValueError("the free y boundary leaves polynomials of y unpenalised, and "
                         + ("some x column has no data to determine them (with lambda_x = 0 every column is on its "
                            "own)" if per_x else "there are no data to determine them")
                         + "; add data or use a neumann y boundary")


def check_proper(K: PriorOperator) -> None:
    """Refuse a prior that is improper on M: a zero mode of K with a y-dependence (a spectral zero at ky != 0)
    is a flat direction of the prior among the normalised densities, where Z_0 diverges."""
    grid = K.grid
    if grid.y.n == 1:
        return
    # exact zeros, not a threshold relative to the largest eigenvalue: an l6 prior on 200 nodes spans 13 decades
    # (its lowest y-mode was taken for a null mode by a relative 1e-12); the symbol's entries at ky != 0 are sums of
    # non-negative terms, so they are 0 exactly when the prior has no hold on that mode
    sym = K.symbol
    allowed = np.zeros(sym.shape, bool)  # the polynomials a free y boundary leaves flat (flat_mode_count)
    if grid.y.boundary == "free" and K.lambda_y > 0:
        allowed[:, :free_null_dim(grid.y, K.l0, K.l2, K.l4, K.l6)] = True
    if np.max(np.abs(sym)) == 0 or np.any((sym[:, 1:] <= 0) & ~allowed[:, 1:]):
        raise ValueError("the prior is improper on the normalised densities: K does not penalise some density "
                         f"that varies in y (lambda_y = {K.lambda_y:g}, l0 = {K.l0:g}; with lambda_y = 0 and l0 = 0 "
                         "every function of y alone is free), so the evidence is not defined; set lambda_y > 0 "
                         "or l0 > 0")


# ---------------------------------------------------------------------------------------------- the Hessian
def _bordered_pattern(K: PriorOperator):
    """The sparsity pattern of the bordered Hessian of K's grid, cached with K: the entries of K (COO order), the
    order that sorts ``[K, diagonal, constraint rows, constraint columns]`` by column then row, the slot of each
    sorted entry in B's CSC data (duplicates share one) and B's ``indices`` and ``indptr``."""
    if "bordered" not in K._cache:
        grid = K.grid
        nx, ny = grid.shape
        n = grid.size
        Kc = K.matrix.tocoo()
        idx, rows_c = np.arange(n), n + np.repeat(np.arange(nx), ny)
        rows = np.concatenate([Kc.row, idx, rows_c, idx])
        cols = np.concatenate([Kc.col, idx, idx, rows_c])
        order = np.lexsort((rows, cols))
        r, c = rows[order], cols[order]
        new = np.concatenate([[True], (r[1:] != r[:-1]) | (c[1:] != c[:-1])])
        slot = np.cumsum(new) - 1
        indptr = np.searchsorted(c[new], np.arange(n + nx + 1)).astype(np.int32)
        K._cache["bordered"] = (np.array(Kc.data), order, slot, r[new].astype(np.int32), indptr)
    return K._cache["bordered"]


class BorderedHessian:
    """The bordered Hessian ``B = [[H, C^T], [C, 0]]`` of the Lagrangian of E_L at a normalised L, eq. (160) with
    the normalisation as constraint rows ``C[i] = P[i, :] hy``, and its sparse LU (symmetric minimum-degree
    ordering, threshold pivoting).  ``solve_tangent(r)`` is ``d`` in T with ``H d + C^T nu = r``."""

    def __init__(self, point: LogPoint):
        E = point.energy
        grid, pr = E.grid, E.prior
        nx, ny = grid.shape
        n = grid.size
        self.n, self.m = n, nx
        p = point.P * grid.hy
        self.p = p
        # B from its entries: lambda cell K, the multipliers' diagonal Lambda_x P hy, and the constraint rows and
        # columns, summed into B's fixed sparsity pattern (kept with K: an evidence path factorises B a hundred
        # times, and the conversion from coordinates was a third of each build)
        Kdata, order, slot, indices, indptr = _bordered_pattern(pr.K)
        vals = np.concatenate([(pr.lam * grid.cell) * Kdata, (point.lagrange_multiplier[:, None] * p).ravel(),
                               p.ravel(), p.ravel()])
        data = np.bincount(slot, weights=vals[order], minlength=indices.size)
        self.B = sp.csc_matrix((data, indices, indptr), shape=(n + nx, n + nx))
        self.lu = saddle_lu(self.B)

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        return self.lu.solve(rhs)

    def solve_tangent(self, r: np.ndarray) -> np.ndarray:
        """``d`` in T solving the KKT system ``[[H, C^T], [C, 0]] [d; nu] = [r; 0]`` (field shape)."""
        rhs = np.concatenate([np.ravel(r), np.zeros(self.m)])
        return self.lu.solve(rhs)[:self.n].reshape(np.shape(r))

    def logdet_g(self) -> float:
        """``ln det H_g = ln |det B| + nx ln ny`` (module docstring); ValueError if ``H|_T`` is not positive
        definite by the sign of ``det B`` (which must be ``(-1)^nx``: this detects an odd number of negative
        eigenvalues)."""
        u = self.lu.U.diagonal()
        sign = int(np.prod(np.sign(u))) * _parity(self.lu.perm_r) * _parity(self.lu.perm_c)
        if sign != (-1) ** self.m:
            raise ValueError("the field is not a local minimum of the energy on the normalised densities (the "
                             "Hessian on the tangent space has a negative eigenvalue), so the Laplace approximation "
                             "has no meaning there; solve to a minimum first")
        ny = self.n // self.m
        return float(np.sum(np.log(np.abs(u)))) + self.m * math.log(ny)


def _parity(perm: np.ndarray) -> int:
    """Sign of a permutation: (-1)^(n - number of cycles)."""
    perm = np.asarray(perm)
    seen = np.zeros(perm.size, bool)
    cycles = 0
    for s in range(perm.size):
        if not seen[s]:
            cycles += 1
            k = s
            while not seen[k]:
                seen[k] = True
                k = perm[k]
    return -1 if (perm.size - cycles) % 2 else 1


def tangent_hessp(point: LogPoint, v: np.ndarray) -> np.ndarray:
    """``H_g v = J^T H J v`` for v in G (batch in the leading axes), ``J v = v - 1 (P hy . v)`` per x: the Hessian
    of ``E_L(L(g))`` in the coordinates g of the module docstring."""
    E = point.energy
    grid, pr = E.grid, E.prior
    p = point.P * grid.hy
    Jv = v - np.sum(p * v, axis=-1, keepdims=True)
    flat = Jv.reshape(-1, grid.size)
    KJv = (pr.K.matrix @ flat.T).T.reshape(Jv.shape)
    HJv = (pr.lam * grid.cell) * KJv + point.lagrange_multiplier[:, None] * p * Jv
    return HJv - p * np.sum(HJv, axis=-1, keepdims=True)


def prior_logdet_G(K: PriorOperator, scale: float, shift=0.0) -> float:
    """``sum ln(scale symbol + shift)`` over the spectral modes with ky != 0: ``ln det`` of ``scale K + shift`` on G
    (exact, the eigenvalues of K in the DCT/FFT basis); with ``shift = 0`` the flat modes are left out (a
    pseudo-determinant, :func:`flat_mode_count`)."""
    vals = scale * K.symbol[:, 1:] + shift
    if shift == 0:
        vals = vals[~K.flat_modes[:, 1:]]
    if np.any(vals <= 0):
        raise ValueError("the prior's Hessian is not positive on the tangent space at the uniform density")
    return float(np.sum(np.log(vals)))


def logdet_stochastic(point: LogPoint, rng: np.random.Generator | None = None, probes: int = 32,
                      steps: int = 60) -> tuple[float, float]:
    """Stochastic Lanczos quadrature of ``ln det H_g``, preconditioned by the prior:
    ``ln det H_g = ln det A_G + tr ln(A_G^{-1/2} H_g A_G^{-1/2})``, ``A_G = lambda cell K`` on G (exact spectral sum),
    the trace by Hutchinson with Rademacher probes projected onto G and ``steps`` Lanczos steps each.  Returns the
    estimate and its standard error over the probes (the Lanczos truncation error is not in it; with the prior as
    preconditioner it is far below the probe noise at 60 steps on the grids tested)."""
    E = point.energy
    grid, pr = E.grid, E.prior
    K = pr.K
    scale = pr.lam * grid.cell
    rng = np.random.default_rng(0) if rng is None else rng
    sym = scale * K.symbol
    root = np.zeros_like(sym)
    root[:, 1:] = 1.0 / np.sqrt(sym[:, 1:])

    def precond(v):  # A_G^{-1/2} v, zero on the y-mode 0
        return K.inverse(K.forward(v) * root)

    def op(v):
        return precond(tangent_hessp(point, precond(v)))

    d = grid.x.n * (grid.y.n - 1)
    steps = int(min(steps, d))
    z = rng.choice([-1.0, 1.0], size=(probes,) + grid.shape)
    z = z - z.mean(axis=-1, keepdims=True)
    norms2 = np.sum(z * z, axis=(1, 2))
    q = z / np.sqrt(norms2)[:, None, None]
    q_prev = np.zeros_like(q)
    alpha = np.zeros((probes, steps))
    beta = np.zeros((probes, steps))
    b = np.zeros(probes)
    Q = [q]
    for k in range(steps):
        w = op(q) - b[:, None, None] * q_prev
        a = np.sum(w * q, axis=(1, 2))
        w = w - a[:, None, None] * q
        for qq in Q:  # full reorthogonalisation: keeps the Ritz values honest at little cost here
            w = w - np.sum(w * qq, axis=(1, 2))[:, None, None] * qq
        w = w - w.mean(axis=-1, keepdims=True)  # stay in G against rounding
        alpha[:, k] = a
        b = np.sqrt(np.sum(w * w, axis=(1, 2)))
        beta[:, k] = b
        q_prev, q = q, w / np.maximum(b, 1e-300)[:, None, None]
        Q.append(q)
    est = np.empty(probes)
    for s in range(probes):
        small = np.flatnonzero(beta[s] <= 1e-7 * np.max(np.abs(alpha[s])))
        m = int(small[0]) + 1 if small.size else steps  # the Krylov space is exhausted after m steps
        T = np.diag(alpha[s, :m]) + np.diag(beta[s, :m - 1], 1) + np.diag(beta[s, :m - 1], -1)
        theta, U = np.linalg.eigh(T)
        if np.any(theta <= 0):
            raise ValueError("the field is not a local minimum of the energy on the normalised densities (negative "
                             "curvature found by Lanczos); solve to a minimum first")
        est[s] = norms2[s] * np.sum(U[0] ** 2 * np.log(theta))
    base = prior_logdet_G(K, scale)
    return base + float(np.mean(est)), float(np.std(est, ddof=1) / np.sqrt(probes))


# ----------------------------------------------------------------------------------------- MAP and prior mode
class StationarityRule:
    """The stopping rule of :func:`map_newton` (an iteration controller of :func:`bftcore.foundations.solvers.iterate`):
    the stationarity residual at most ``tol``, or at the rounding floor of an ill-conditioned B (tiny P in the tails):
    three steps without halving the residual, which is then below ``1e4 tol``.  At most ``max_iter`` steps."""

    def __init__(self, tol: float, max_iter: int):
        self.tol, self.max_iter = tol, max_iter
        self.stalls, self.last = 0, np.inf

    def iterations(self) -> range:
        return range(1, self.max_iter + 1)

    def at_start(self, point) -> bool:
        return self._done(point)

    @staticmethod
    def stalled(new_point) -> bool:
        return new_point is None

    def converged(self, it: int, change: float, dE: float, point) -> bool:
        return self._done(point)

    def _done(self, point) -> bool:
        self.stalls = self.stalls + 1 if point.residual > 0.5 * self.last else 0
        self.last = point.residual
        return point.residual <= self.tol or (self.stalls >= 3 and point.residual <= 1e4 * self.tol)


class BorderedNewtonStep:
    """Newton's step on M for :func:`bftcore.foundations.solvers.iterate`: the exact KKT step of the bordered Hessian
    (direct sparse solves), taken whole when it halves the residual or decreases the energy enough, else backtracked
    (Armijo).  Where it is no descent direction (negative curvature) the package's own Newton runs (once) and this
    step resumes from its end.  ``failed`` says that the fallback was needed a second time."""

    label = "bordered-newton"

    def __init__(self, energy, tol: float):
        self.energy, self.tol = energy, tol
        self.fallback_used = self.failed = self.at_floor = False

    def take(self, phi: np.ndarray, point):
        """``(eta, new_phi, new_point, label)``; ``new_point`` None ends the run (no decrease is possible).

        The rounding floor: a stiff prior (l6 at a large lambda) leaves the max-norm residual at 1e-3, the rounding
        of ``lambda cell K L`` in its rough components, while the Newton decrement ``-slope`` (the predicted
        decrease, twice) falls quadratically to the energy's own rounding.  Once it is there the full step is
        taken and the run ends: the MAP as this arithmetic has it."""
        if self.at_floor:
            return 0.0, phi, None, self.label
        energy, hy = self.energy, self.energy.grid.hy
        r = point._r
        d = BorderedHessian(point).solve_tangent(-r)
        slope = float(np.sum(r * d))
        full = energy.at(normalise_log(point.phi + d, hy)) if np.all(np.isfinite(d)) else None
        if full is not None and at_energy_rounding(slope, point.value):
            self.at_floor = True
            return (1.0, full.phi, full, self.label) if full.value <= point.value + 1e-13 * abs(point.value) \
                else (0.0, phi, None, self.label)
        if full is not None and (full.residual < 0.5 * point.residual
                                 or (slope < 0 and full.value <= point.value + 1e-4 * slope)):
            return 1.0, full.phi, full, self.label  # near the minimum the energy's change drowns in rounding
        if full is not None and not slope < 0 and point.residual <= 1e4 * self.tol:
            return 0.0, phi, None, self.label  # at the rounding floor the step's slope is rounding too
        if full is None or not slope < 0:  # no descent direction (negative curvature): the package's Newton
            if self.fallback_used:
                self.failed = True
                return 0.0, phi, None, self.label
            self.fallback_used = True
            for rec in solver_iterate(energy, point.phi, "newton", min_iter=1, max_iter=200, tol=1e-12):
                pass
            return 1.0, rec.field, energy.at(rec.field), "newton-fallback"
        eta, trial = 0.5, full
        while eta >= 1e-10:
            trial = energy.at(normalise_log(point.phi + eta * d, hy))
            if trial.value <= point.value + 1e-4 * eta * slope:
                break
            eta *= 0.5
        if trial.value >= point.value:  # no decrease at machine precision: as good as it gets
            return eta, phi, None, self.label
        return eta, trial.phi, trial, self.label


def map_newton(energy, L: np.ndarray, tol: float | None = None, max_iter: int = 60):
    """The MAP on M by :func:`bftcore.foundations.solvers.iterate` with Newton's exact KKT step
    (:class:`BorderedNewtonStep`) and the stationarity rule (:class:`StationarityRule`); returns the point at the
    minimum and its
    :class:`BorderedHessian` (factorised there, ready for the log-determinant)."""
    n_data = float(energy.N.sum())
    tol = 1e-10 * max(1.0, n_data) if tol is None else tol
    step, rule = BorderedNewtonStep(energy, tol), StationarityRule(tol, max_iter)
    for rec in solver_iterate(energy, L, step=step, controller=rule):
        pass
    point = energy.at(rec.field)
    # converged, or no decrease possible at machine precision, or the iterations ran out at the rounding floor (an
    # l6 prior on 200 nodes spans 13 decades): as converged as this arithmetic allows
    if step.failed or not (rec.converged or point.residual <= 1e4 * tol):
        raise ValueError(f"Newton on the normalised densities did not reach the stationarity tolerance {tol:.1e} "
                         f"(residual {point.residual:.2e}); the evidence needs a converged MAP")
    return point, BorderedHessian(point)


@dataclasses.dataclass(frozen=True)
class PriorNormaliser:
    """``ln Z_0(lambda) - (d/2) ln 2 pi = -lambda e0 - ((d - f)/2) ln lambda - 1/2 logdet1 - (f/2) ln 2 pi`` for one
    K and template, f = ``flat`` modes integrated with unit density (:func:`flat_mode_count`)."""

    mode: np.ndarray
    e0: float
    logdet1: float
    d: int
    flat: int = 0

    def log_z(self, lam: float) -> float:
        return (-lam * self.e0 - 0.5 * (self.d - self.flat) * math.log(lam) - 0.5 * self.logdet1
                - 0.5 * self.flat * math.log(2 * math.pi))


def prior_normaliser(K: PriorOperator, template: np.ndarray | None) -> PriorNormaliser:
    """The prior's mode L0 on M at lambda = 1 (independent of lambda), ``e0`` and ``ln det H0_g(1)``: exact by the
    spectrum when the template is constant (L0 uniform), else by Newton on M and the bordered LU."""
    check_proper(K)
    grid = K.grid
    nx, ny = grid.shape
    d = nx * (ny - 1)
    t = np.zeros(grid.shape) if template is None else np.asarray(template, dtype=float)
    prior = Prior(K, 1.0, [t])
    energy = LogDensityEnergy(grid, np.zeros(grid.shape), prior)
    if np.ptp(t) == 0:
        L0 = np.full(grid.shape, -math.log(ny * grid.hy))
        point = energy.at(L0)
        shift = float(point.lagrange_multiplier[0]) / ny
        if flat_mode_count(K) and K.l0 == 0:  # K annihilates the constants: the multiplier is 0 but for rounding
            shift = 0.0
        logdet = prior_logdet_G(K, grid.cell, shift)
        return PriorNormaliser(L0, float(point.prior_energy), logdet, d, flat_mode_count(K) if shift == 0 else 0)
    if flat_mode_count(K):
        raise ValueError("a free y boundary (flat polynomial directions) is supported with no template or a constant "
                         "one: the prior's mode about a varying template is not unique along the flat directions")
    point, fac = map_newton(energy, t, tol=1e-12 * max(1.0, float(np.max(np.abs(K.symbol)))))
    logdet = fac.logdet_g() if grid.size <= EXACT_LOGDET_MAX_NODES else logdet_stochastic(point)[0]
    return PriorNormaliser(point.phi, float(point.prior_energy), logdet, d)


def _template(problem: DensityProblem) -> np.ndarray | None:
    pr = problem.energy.prior
    return pr.templates[0] if problem.config["templates"] else None


# ------------------------------------------------------------------------------------------------ the evidence
def _evidence(point: LogPoint, fac: BorderedHessian | None, norm: PriorNormaliser, method: str,
              rng=None) -> dict:
    grid = point.energy.grid
    if method == "auto":
        method = "exact" if grid.size <= EXACT_LOGDET_MAX_NODES else "stochastic"
    if method == "exact":
        fac = fac if fac is not None else BorderedHessian(point)
        logdet, err = fac.logdet_g(), 0.0
    elif method == "stochastic":
        logdet, err = logdet_stochastic(point, rng)
    else:
        raise ValueError(f"logdet must be 'auto', 'exact' or 'stochastic', got {method!r}")
    lam = point.energy.prior.lam
    data_fit = -float(point.value)
    log_ev = data_fit - 0.5 * logdet - norm.log_z(lam)
    return {"log_evidence": float(log_ev), "data_fit": data_fit, "occam": float(log_ev - data_fit),
            "logdet_method": method, "logdet_stderr": float(err), "residual": float(point.residual),
            "dimension": int(norm.d)}


def laplace_evidence(problem: DensityProblem, L: np.ndarray, logdet: str = "auto", rng=None) -> dict:
    """Laplace evidence ``ln p(D | lambda, K, t)`` of a density problem (field L, at most one template) at its MAP
    L (module docstring).  L is first polished by Newton on M to the stationarity tolerance (a MAP from the
    package's solver is already there; Newton's step is what the log-determinant needs anyway).

    Returns ``log_evidence``; ``data_fit`` = ``-E_L`` at the MAP; ``occam`` = the rest (log-determinants and the
    prior's normalisation); ``logdet_method`` (``"exact"`` or ``"stochastic"``; ``logdet="auto"`` is exact up to
    :data:`EXACT_LOGDET_MAX_NODES` nodes); ``logdet_stderr`` (standard error of the stochastic ``ln det H_g``,
    0.0 when exact; that of ``log_evidence`` is half of it); also ``residual`` and ``dimension`` d."""
    check_model(problem)
    point, fac = map_newton(problem.energy, L)
    norm = prior_normaliser(problem.K, _template(problem))
    return _evidence(point, fac, norm, logdet, rng)


def d_log_evidence_d_log_lambda(problem: DensityProblem, L: np.ndarray, rng=None) -> float:
    """``d ln p(D | lambda) / d ln lambda`` of the Laplace evidence, analytically:

        -lambda/2 (L* - t, K (L* - t)) + lambda e0 + d/2 - lambda/2 tr(B^{-1} dB/dlambda).

    The first two terms use the envelope theorem (L* and L0 are stationary on M, so only the explicit lambda
    dependence of E_L and of the prior energy counts); the log-determinant gets no such help: ``dB/dlambda``
    holds ``cell K``, the change of the multipliers and of P along ``dL*/dlambda`` (from ``B [dL; nu] =
    [-cell K (L* - t); 0]``) in H and in the constraint rows.  The trace is exact (:func:`trace_by_complex_step`)
    up to :data:`EXACT_TRACE_MAX_NODES` nodes, Hutchinson with 64 probes above."""
    check_model(problem)
    point, fac = map_newton(problem.energy, L)
    return _d_log_evidence(point, fac, prior_normaliser(problem.K, _template(problem)), rng)


def _d_log_evidence(point: LogPoint, fac: BorderedHessian, norm: PriorNormaliser, rng=None) -> float:
    """:func:`d_log_evidence_d_log_lambda` at a MAP already found and factorised."""
    E = point.energy
    grid, pr = E.grid, E.prior
    lam, cell = pr.lam, grid.cell
    nx, ny = grid.shape
    n = grid.size
    t = pr.templates[0]
    Ku = pr.K.apply(point.phi - t)
    dL = fac.solve_tangent(-cell * Ku)
    p = fac.p
    dlamX = -np.sum(cell * Ku + lam * cell * pr.K.apply(dL), axis=1)
    ddiag = dlamX[:, None] * p + point.lagrange_multiplier[:, None] * p * dL
    dH = cell * pr.K.matrix + sp.diags(ddiag.ravel())
    dC = sp.csr_matrix(((p * dL).ravel(), (np.repeat(np.arange(nx), ny), np.arange(n))), shape=(nx, n))
    dB = sp.bmat([[dH, dC.T], [dC, None]], format="csc")
    size = n + nx
    if n <= EXACT_TRACE_MAX_NODES:
        trace = trace_by_complex_step(fac.B, dB)
    else:
        rng = np.random.default_rng(0) if rng is None else rng
        z = rng.choice([-1.0, 1.0], size=(size, 64))
        trace = float(np.mean(np.sum(z * fac.solve(dB @ z), axis=0)))
    prior_q = float(point.prior_energy)  # (lambda/2)(L* - t, K (L* - t))
    return float(-prior_q + lam * norm.e0 + 0.5 * (norm.d - norm.flat) - 0.5 * lam * trace)


def trace_by_complex_step(B: sp.csc_matrix, dB: sp.spmatrix) -> float:
    """``tr(B^{-1} dB)``, exactly (to rounding), as ``d/de ln|det(B + e dB)|`` at e = 0 by the complex step: the
    LU factors of ``B + i h dB`` have the diagonal ``U_kk + i h U_kk' + O(h^2)``, so ``sum_k Im(U_kk) / Re(U_kk) / h
    = sum_k U_kk' / U_kk = d ln|det B|``, with no difference taken (nothing cancels; h = 1e-20 of the ratio of the
    matrices' largest entries, so the O(h^2) terms are far below rounding) and SuperLU's same ordering and pivots
    (the magnitudes it compares are B's to 1e-40).  ``dB`` must lie in B's sparsity pattern or add to it.

    Why: the trace is the slope of the log-determinant along lambda, which the evidence's maximum is the root of.
    Before (issue 31), one LU solve per node; this costs one complex LU, one and a half to three real ones.  With
    one BLAS thread, the machine otherwise idle (``python scripts/bench_evidence.py``, part 4): 32 x 32 l2 43 -> 3.4
    ms, l6 86 -> 12 ms; 64 x 64 l2 0.88 s -> 14 ms, l6 2.59 -> 0.10 s, about ten slopes to a maximum; the same trace to
    1e-16 - 3e-15 (against that loop and a dense solve)."""
    h = 1e-20 * float(abs(B).max()) / max(float(abs(dB).max()), 1e-300)
    lu = saddle_lu((B.astype(complex) + (1j * h) * dB).tocsc())
    u = lu.U.diagonal()
    return float(np.sum(u.imag / u.real)) / h


# ---------------------------------------------------------------------------------------------- evidence paths
def default_values(problem: DensityProblem, param: str = "lambda", n: int = 30) -> np.ndarray:
    """Default values of an evidence path: for lambda, 30 log-spaced values from ``0.1 c / s_max`` to
    ``10 c / s_min``, ``c = max(n_data, 1) / (nx ny)`` the data's curvature per node (``N_X P hy`` for a uniform
    spread) and ``s_min``, ``s_max`` the smallest non-zero and the largest eigenvalue of ``cell K``: from a prior
    weaker than the data on every mode to one stronger on every mode, a decade beyond each.  Other parameters:
    the gate's default range (:data:`bftcore.foundations.config.CHOOSE_DEFAULT_RANGE`) where it has one, else three
    decades either side of the configured value."""
    grid = problem.grid
    if param == "lambda":
        s = grid.cell * problem.K.symbol[:, 1:] if grid.y.n > 1 else grid.cell * problem.K.symbol
        s = s[s > 1e-12 * np.max(s)]
        c = max(float(problem.N.sum()), 1.0) / grid.size
        return np.geomspace(0.1 * c / float(np.max(s)), 10.0 * c / float(np.min(s)), n)
    if param in CHOOSE_DEFAULT_RANGE:
        lo, hi, _ = CHOOSE_DEFAULT_RANGE[param]
        return np.geomspace(lo, hi, n)
    v = float(problem.config["prior"][param]) or 1.0
    return np.geomspace(v * 1e-3, v * 1e3, n)


class _PathProblem:
    """One configuration with one hyperparameter to vary: the energy and prior normaliser at each value."""

    def __init__(self, cfg: dict, param: str):
        if param not in PATH_PARAMS:
            raise ValueError(f"an evidence path varies one of {PATH_PARAMS}, got {param!r}")
        self.cfg, self.param = cfg, param
        self.base = build_density(cfg)
        check_model(self.base)
        if not cfg["data"]:  # ln p(D) = 0 whatever the hyperparameters: a "maximum" would be an arbitrary value
            raise ValueError(f"with no data the evidence p(D | {param}) is 1 for every {param}, so there is "
                             f"nothing to choose; add data points")
        self.template = _template(self.base)
        self._norm: dict = {}

    def problem(self, v: float) -> DensityProblem:
        b = self.base
        pr = b.energy.prior
        if self.param == "lambda":
            K = b.K
            lam = v
        else:
            c = {"lambda_x": b.K.lambda_x, "lambda_y": b.K.lambda_y, "l0": b.K.l0, "l2": b.K.l2, "l4": b.K.l4,
                 "l6": b.K.l6, self.param: v}
            K = PriorOperator(b.grid, c["lambda_x"], c["lambda_y"], c["l0"], c["l2"], c["l4"], c["l6"])
            lam = pr.lam
        prior = Prior(K, lam, None if self.template is None else [self.template])
        cfg = {**self.cfg, "prior": {**self.cfg["prior"], self.param: float(v)}}  # shared data: not copied
        return DensityProblem(cfg, b.grid, b.N, K, LogDensityEnergy(b.grid, b.N, prior), b.P_true)

    def normaliser(self, problem: DensityProblem) -> PriorNormaliser:
        key = None if self.param == "lambda" else problem.K
        if key not in self._norm:
            self._norm[key] = prior_normaliser(problem.K, self.template)
        return self._norm[key]

    def _map(self, v: float, L: np.ndarray | None):
        """The MAP at value v found from L (None: the prior's mode), its factorisation and the prior normaliser."""
        pb = self.problem(v)
        norm = self.normaliser(pb)
        point, fac = map_newton(pb.energy, norm.mode if L is None else L)
        return point, fac, norm

    def solve(self, v: float, L: np.ndarray | None, logdet: str = "auto"):
        point, fac, norm = self._map(v, L)
        return point, fac, _evidence(point, fac, norm, logdet)

    def slope(self, v: float, L: np.ndarray | None) -> float:
        """``d ln p(D | lambda) / d ln lambda`` at lambda = v, the MAP found from L (None: the prior's mode)."""
        return _d_log_evidence(*self._map(v, L))


#: How closely the maximum of an evidence path is located, in ln(value): tight enough that data in other units
#: choose the same lambda to 1e-6 (tests/test_units.py), which a coarser stop (1e-2 in ln lambda, 1 %) did not.
REFINE_XATOL = 1e-8


def _refine_maximum(path: _PathProblem, bracket: tuple[float, float], L: np.ndarray, ends: tuple, best: dict,
                    logdet: str) -> dict:
    """The maximum of the log evidence between the two neighbours of the best value of a path, every solve inside
    warm from that value's MAP ``L`` (so the answer does not depend on the order of the evaluations), the two ends
    from their MAPs ``ends``.

    For lambda, with an exact trace (:data:`EXACT_TRACE_MAX_NODES`), it is the root of the analytic slope
    ``d ln p(D | lambda) / d ln lambda`` (Brent's root finder, to 1e-10 in ln lambda), when the slope changes sign
    from + to - across the bracket.  Decision: the root, not the top of the values, because near its maximum the
    log evidence is flat and its value carries the rounding of the log-determinant of a stiff K (1e-9 for l6 on
    200 nodes): a value-based search then stops anywhere within sqrt(1e-9) of the maximum (3e-4 in lambda,
    measured), while the slope is accurate to its own rounding and locates the root to 1e-8.  That is what lets
    data in other units choose the same lambda to 1e-6 for every order (tests/test_units.py).  Otherwise, and
    for the other parameters, bounded Brent on the values (:data:`REFINE_XATOL`).  The refined point replaces
    ``best`` only if its log evidence is no lower (up to the log evidence's rounding for the root)."""
    param = path.param
    lo, hi = math.log(bracket[0]), math.log(bracket[1])
    if param == "lambda" and path.base.grid.size <= EXACT_TRACE_MAX_NODES:
        try:
            # the ends from their own MAPs on the path (a coarse path's neighbour is too far for Newton from L)
            s_lo, s_hi = path.slope(bracket[0], ends[0]), path.slope(bracket[1], ends[1])
            if s_lo > 0 > s_hi:
                u = float(sopt.brentq(lambda u: path.slope(math.exp(u), L), lo, hi, xtol=1e-10, maxiter=100))
                res = path.solve(math.exp(u), L, logdet)[2]
                if res["log_evidence"] >= best["log_evidence"] - 1e-6:
                    return {param: math.exp(u), "log_evidence": float(res["log_evidence"]), "at_edge": False}
                return best
        except ValueError:  # no converged MAP somewhere in the bracket: the values' search below
            pass

    def negative(u: float) -> float:
        return -path.solve(math.exp(u), L, logdet)[2]["log_evidence"]

    opt = sopt.minimize_scalar(negative, bounds=(lo, hi), method="bounded",
                               options={"xatol": REFINE_XATOL, "maxiter": 60})
    if -opt.fun >= best["log_evidence"]:
        return {param: float(math.exp(opt.x)), "log_evidence": float(-opt.fun), "at_edge": False}
    return best


def evidence_path(config: dict, param: str = "lambda", values=None, warm: bool = True, refine: bool = True,
                  logdet: str = "auto", max_drop: float | None = PATH_MAX_DROP) -> dict:
    """Laplace evidence along one hyperparameter (``"lambda"``, or the order coefficients ``"l0"`` (mass),
    ``"l2"``, ``"l4"``, ``"l6"``) of a density document, and its maximum.

    The MAPs are found by continuation from the largest value down (a stiff prior first, where the MAP is near the
    prior's mode), each start the previous MAP (``warm=True``; for lambda moved along the tangent ``dL*/d ln
    lambda`` from the bordered system, a first-order predictor) or the prior's mode (``warm=False``).  The maximum
    over the values is refined by bounded Brent in ``ln(value)`` between the neighbours of the best value
    (``refine``); a best value at an end of the range is reported as it is, with ``"at_edge": True``.

    Returns ``{param: [...], "log_evidence": [...], "data_fit": [...], "occam": [...], "logdet_stderr": [...],
    "best": {param: x, "log_evidence": y, "at_edge": bool}, "logdet_method": ..., "fields": [MAP L arrays],
    "failed": [{param: v, "reason": ...}]}``, values ascending.  A value where the approximation does not exist
    (no minimum to expand about, e.g. a prior far too weak for two data points) is NaN in the lists, its field
    None and its reason in ``failed``; the path goes on from the last good MAP.  Once the log evidence has fallen
    more than ``max_drop`` below the best value so far (:data:`PATH_MAX_DROP`; None: never), the smaller values
    are not solved: they are NaN and listed in ``skipped``.  Measured (scripts/bench_evidence.py, 2026-11-23):
    30 lambdas on 64 x 64 (l2, 200 data, 2 cores) with the Brent refinement in 0.84 s; 200 nodes of a 1-D density
    (l6, free boundary) in 0.06-0.08 s."""
    cfg = checked(config)
    path = _PathProblem(cfg, param)
    vals = default_values(path.base, param) if values is None else np.asarray(values, dtype=float).ravel()
    if vals.size < 1 or not np.all(np.isfinite(vals)) or np.any(vals <= 0):
        raise ValueError(f"the values of an evidence path must be positive finite numbers, got {vals!r}")
    check_evidence_path(int(vals.size), path.base.grid.size)
    vals = np.unique(vals)
    fields: list = [None] * vals.size
    results: list = [None] * vals.size
    L = None
    failed: list = []
    skipped: list = []
    top, stopped = -math.inf, False
    for k in range(vals.size - 1, -1, -1):
        v = float(vals[k])
        if stopped:
            skipped.append(v)
            results[k] = {"log_evidence": math.nan, "data_fit": math.nan, "occam": math.nan,
                          "logdet_stderr": math.nan, "logdet_method": "none"}
            continue
        try:
            point, fac, res = path.solve(v, L if warm else None, logdet)
        except ValueError as e:  # e.g. no minimum to expand about (a prior too weak for the data): a gap
            failed.append({param: v, "reason": str(e)})
            results[k] = {"log_evidence": math.nan, "data_fit": math.nan, "occam": math.nan,
                          "logdet_stderr": math.nan, "logdet_method": "none"}
            continue
        fields[k], results[k] = point.phi, res
        top = max(top, res["log_evidence"])
        stopped = max_drop is not None and res["log_evidence"] < top - max_drop
        if warm:
            L = point.phi
            if param == "lambda" and k > 0:  # tangent predictor dL*/d ln lambda = -lambda dL... from B
                t = path.template if path.template is not None else 0.0
                rhs = -(v * point.energy.grid.cell) * path.base.K.apply(point.phi - t)
                dL = fac.solve_tangent(rhs)
                L = point.phi + math.log(float(vals[k - 1]) / v) * dL
                if not np.all(np.isfinite(L)) or np.max(np.abs(L - point.phi)) > 5.0:
                    L = point.phi
    logev = np.array([r["log_evidence"] for r in results])
    if not np.any(np.isfinite(logev)):
        raise ValueError(f"no value of the evidence path has a Laplace evidence: {failed[0]['reason']}")
    kbest = int(np.nanargmax(logev))
    best = {param: float(vals[kbest]), "log_evidence": float(logev[kbest]),
            "at_edge": bool(kbest in (0, vals.size - 1) and vals.size > 1)}
    if refine and vals.size >= 3 and not best["at_edge"]:
        best = _refine_maximum(path, (float(vals[kbest - 1]), float(vals[kbest + 1])), fields[kbest],
                               (fields[kbest - 1], fields[kbest + 1]), best, logdet)
    return {param: vals.tolist(), "log_evidence": logev.tolist(),
            "data_fit": [r["data_fit"] for r in results], "occam": [r["occam"] for r in results],
            "logdet_stderr": [r["logdet_stderr"] for r in results],
            "logdet_method": next(r["logdet_method"] for r in results if r["logdet_method"] != "none"),
            "best": best, "fields": fields, "failed": sorted(failed, key=lambda f: f[param]),
            "skipped": sorted(skipped)}


# ------------------------------------------------------------------------------------------- Laplace samples
def _y_basis(ny: int) -> np.ndarray:
    """Orthonormal basis of the fields of y with zero sum: the DCT-II basis functions k = 1..ny-1, ``(ny, ny-1)``."""
    return sfft.idct(np.eye(ny)[:, 1:], type=2, norm="ortho", axis=0)


def _tangent_parts(point: LogPoint) -> tuple[sp.bsr_matrix, sp.csr_matrix, np.ndarray]:
    """``(W, H, U)`` of ``H_g = W^T H W``: U the basis of :func:`_y_basis`, W block-diagonal with one dense
    ``(ny, ny - 1)`` block ``W_i = U - 1 (P_i hy)^T U`` per x (the map J; coordinate ``i (ny - 1) + k``; a BSR
    matrix whose ``data`` are the blocks, built for every x at once) and ``H = lambda cell K + diag(Lambda_X P hy)``
    (sparse, x-major nodes).  H_g couples x nodes only within the reach of K's x stencil, so it is block-banded."""
    E = point.energy
    grid, pr = E.grid, E.prior
    nx, ny = grid.shape
    U = _y_basis(ny)
    p = point.P * grid.hy
    blocks = U[None, :, :] - (p @ U)[:, None, :]  # (nx, ny, ny - 1): W_i = U - 1 (p_i^T U)
    W = sp.bsr_matrix((blocks, np.arange(nx), np.arange(nx + 1)), shape=(nx * ny, nx * (ny - 1)))
    H = (pr.lam * grid.cell) * pr.K.matrix + sp.diags((point.lagrange_multiplier[:, None] * p).ravel())
    return W, sp.csr_matrix(H), U


def _diagonal_blocks(W: sp.spmatrix, nx: int, ny: int) -> np.ndarray:
    """The blocks ``W_i`` ``(nx, ny, ny - 1)`` of a block-diagonal W (rows of x node i, columns ``i (ny - 1)`` to
    ``(i + 1)(ny - 1) - 1``): a BSR matrix's data as they are, any other sparse matrix scattered into them."""
    m = ny - 1
    if sp.issparse(W) and W.format == "bsr" and W.blocksize == (ny, m) and W.indices.size == nx \
            and np.array_equal(W.indices, np.arange(nx)) and np.array_equal(W.indptr, np.arange(nx + 1)):
        return np.asarray(W.data, dtype=float)
    C = sp.coo_matrix(W)
    bi = C.row // ny
    if np.any(C.col // m != bi):
        raise RuntimeError("the map J of the tangent Hessian is not block-diagonal in x")
    out = np.zeros((nx, ny, m))
    np.add.at(out, (bi, C.row % ny, C.col % m), C.data)
    return out


def _tangent_hessian_blocks(W: sp.spmatrix, H: sp.spmatrix, nx: int, ny: int, rows: tuple[int, int] | None = None):
    """The nonzero ``(ny - 1) x (ny - 1)`` blocks of ``H_g = W^T H W`` for W block-diagonal in x (dense blocks
    ``W_i``, :func:`_diagonal_blocks`) and H sparse: ``H_g[i, j] = W_i^T H_ij W_j``, of the block rows
    ``rows = (a, b)`` (all by default).

    Yields ``(i, j, B)``, the block rows i, block columns j and blocks ``B (len(i), m, m)``, one batch per x offset
    ``j - i`` (mod nx: a periodic x axis's wrap-around is one offset more, not a full band).  Per offset,
    ``H_ij W_j`` for every i is one sparse-times-dense product (H's blocks at that offset moved onto the block
    diagonal) and ``W_i^T (H_ij W_j)`` one batched dense product: ``(2 r_x + 1) nx ny (ny - 1)^2`` multiply-adds
    in BLAS, no loop over nodes.  The sparse product ``W^T (H W)`` it replaces did as many in scalar code, about
    30 times slower (105 ms of a 118 ms sample call at nx = 1, ny = 400)."""
    m = ny - 1
    a, b = (0, nx) if rows is None else rows
    Wb = _diagonal_blocks(W, nx, ny)
    C = sp.coo_matrix(sp.csr_matrix(H)[a * ny:b * ny])
    bi = C.row // ny + a
    delta = (C.col // ny - bi) % nx
    for dl in np.unique(delta):
        sel = delta == dl
        # the block rows with a block at this offset (x_0 has none at -1 on a Neumann axis), and H's blocks there
        # moved onto a block diagonal
        i, pos = np.unique(bi[sel], return_inverse=True)
        G = sp.csr_matrix((C.data[sel], (pos * ny + C.row[sel] % ny, pos * ny + C.col[sel] % ny)),
                          shape=(i.size * ny, i.size * ny))
        j = (i + dl) % nx
        HW = (G @ Wb[j].reshape(-1, m)).reshape(i.size, ny, m)
        yield i, j, np.matmul(Wb[i].transpose(0, 2, 1), HW)


def _block_coordinates(i: np.ndarray, j: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of H_g of the entries of the blocks (i, j), in the order of ``B.ravel()``."""
    k = np.arange(m)
    rows = i[:, None, None] * m + k[None, :, None]
    cols = j[:, None, None] * m + k[None, None, :]
    return np.broadcast_to(rows, (i.size, m, m)).ravel(), np.broadcast_to(cols, (i.size, m, m)).ravel()


def _tangent_hessian_sparse(point: LogPoint) -> tuple[sp.csr_matrix, np.ndarray]:
    """``H_g = W^T H W`` (:func:`_tangent_parts`) as a sparse ``(d, d)`` matrix, not symmetrised, and U."""
    W, H, U = _tangent_parts(point)
    nx, ny = point.energy.grid.shape
    m = ny - 1
    rows, cols, vals = [], [], []
    for i, j, B in _tangent_hessian_blocks(W, H, nx, ny):
        r, c = _block_coordinates(i, j, m)
        rows.append(r)
        cols.append(c)
        vals.append(B.ravel())
    d = nx * m
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(d, d)), U


def tangent_hessian_dense(point: LogPoint) -> tuple[np.ndarray, np.ndarray]:
    """``H_g`` as a dense ``(d, d)`` matrix in the orthonormal coordinates ``c`` of G (``g[i] = U c[i]`` with
    :func:`_y_basis` U), and U: ``W^T H W`` with W block-diagonal, ``W_i = U - 1 (P_i hy)^T U`` (the map J),
    assembled block by block (:func:`_tangent_hessian_blocks`) and symmetrised."""
    W, H, U = _tangent_parts(point)
    nx, ny = point.energy.grid.shape
    m = ny - 1
    blocks = np.zeros((nx, m, nx, m))
    for i, j, B in _tangent_hessian_blocks(W, H, nx, ny):
        blocks[i, :, j, :] = B  # each (i, j) once: the offsets are distinct mod nx
    A = blocks.reshape(nx * m, nx * m)
    return 0.5 * (A + A.T), U


def _add_upper_banded(ab: np.ndarray, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> None:
    """Add the entries ``A[rows, cols] = vals`` (no repeated pair) of a square A to ``ab``, the LAPACK upper banded
    storage ``ab[u + i - j, j] = S[i, j]`` (i <= j, ``u = ab.shape[0] - 1``) of its symmetric part
    ``S = (A + A^T) / 2``: an entry above the diagonal goes to ``(i, j) = (row, col)``, one below to its mirror."""
    u = ab.shape[0] - 1
    off = cols - rows  # the row and column dtype (int32 up to 2^31 coordinates): no overflow, |off| < d
    if off.size and np.max(np.abs(off)) > u:
        raise RuntimeError(f"an entry of H_g lies outside the band: offset {np.max(np.abs(off))} > u = {u}")
    dg, up = off == 0, off > 0
    ab[u, cols[dg]] += vals[dg]
    ab[u - off[up], cols[up]] += 0.5 * vals[up]  # the pairs are unique within one statement, so += is exact
    lo = off < 0
    ab[u + off[lo], rows[lo]] += 0.5 * vals[lo]


def _tangent_hessian_banded(point: LogPoint, chunk_nnz: int | None = None) -> tuple[np.ndarray, int, np.ndarray]:
    """``H_g`` in LAPACK upper banded storage ``ab[u + i - j, j] = H_g[i, j]`` (i <= j; Fortran order, ready to be
    factorised in place), its half-bandwidth u and the basis U: ``W^T H W`` of :func:`_tangent_parts` block by
    block (:func:`_tangent_hessian_blocks`), symmetrised ``(H_g + H_g^T) / 2`` as :func:`tangent_hessian_dense`
    does, but never dense and never whole: block rows of about ``chunk_nnz`` nonzeros at a time (default
    :data:`_SAMPLE_CHUNK_NNZ`), so the working memory beyond ``(u + 1) d 8`` bytes is bounded.  u is
    ``(r_x + 1)(ny - 1) - 1`` (r_x the reach of K's x stencil, :func:`_x_reach`; at most d - 1) unless the
    product's far diagonals are all zero, then less."""
    W, H, U = _tangent_parts(point)
    grid = point.energy.grid
    nx, ny = grid.shape
    m = ny - 1
    d = nx * m
    reach = _x_reach(H, ny)
    ub = min(d - 1, (reach + 1) * m - 1)
    ab = np.zeros((ub + 1, d), order="F")
    per_x = (2 * min(reach, nx - 1) + 1) * m * m  # nonzeros of one block row of H_g
    step = max(1, int(chunk_nnz or _SAMPLE_CHUNK_NNZ) // per_x)
    for a in range(0, nx, step):
        for i, j, B in _tangent_hessian_blocks(W, H, nx, ny, rows=(a, min(nx, a + step))):
            rows, cols = _block_coordinates(i, j, m)
            _add_upper_banded(ab, rows, cols, B.ravel())  # one offset: no repeated pairs
    nonzero = np.flatnonzero(np.any(ab != 0, axis=1))
    k0 = int(nonzero[0]) if nonzero.size else ub
    if k0 > 0:  # the far diagonals are zero (a uniform P decouples them): a narrower band
        ab = np.asfortranarray(ab[k0:])
    return ab, ub - k0, U


def _x_reach(K: sp.spmatrix, ny: int) -> int:
    """Largest ``|i - i'|`` over the entries ``K[(i, j), (i', j')]``: the reach of the prior's x stencil (1 for l2,
    2 for l4, 3 for l6), ``nx - 1`` when a periodic x axis wraps around."""
    C = sp.coo_matrix(K)
    return int(np.max(np.abs(C.row // ny - C.col // ny))) if C.nnz else 0


def _x_pairs(K: sp.spmatrix, nx: int, ny: int) -> int:
    """How many ordered pairs of x nodes ``(i, i')`` K couples (i = i' included): H_g has as many nonzero
    ``(ny - 1) x (ny - 1)`` blocks."""
    C = sp.coo_matrix(K)
    X = sp.csr_matrix((np.ones(C.nnz), (C.row // ny, C.col // ny)), shape=(nx, nx))
    X.sum_duplicates()
    return int(max(X.nnz, nx))


def _sample_plan(problem: DensityProblem) -> tuple[bool, int, float, float, float]:
    """How :func:`laplace_samples` factors ``H_g`` on this problem, from the prior's structure alone (nothing
    built): ``(banded, u, bytes, flops, product)``, u the half-bandwidth bound ``(r_x + 1)(ny - 1) - 1``
    (``d - 1``: full), bytes the estimated peak working memory, flops those of the factorisation and product the
    multiply-adds of the sparse product ``W^T (H W)`` (``ny`` per nonzero of H_g).  Banded when it takes fewer flops
    than dense (``d (u + 1)^2 < d^3 / 3``): never for a periodic x axis (its wrap-around fills the band)."""
    nx, ny = problem.grid.shape
    m = ny - 1
    d = nx * m
    K = problem.energy.prior.K.matrix
    reach = _x_reach(K, ny)
    u = min(d - 1, (reach + 1) * m - 1)
    nnz = _x_pairs(K, nx, ny) * m * m  # of the sparse H_g
    product = float(nnz) * ny
    base = 12.0 * nx * ny * m  # W (CSR, 12 bytes a nonzero)
    if 3 * (u + 1) ** 2 < d * d:
        chunk = min(nnz, max(_SAMPLE_CHUNK_NNZ, (2 * reach + 1) * m * m))  # at least one block row at a time
        return True, u, 9.0 * (u + 1) * d + base + _SAMPLE_BYTES_PER_NNZ * chunk, float(d) * (u + 1) ** 2, product
    return False, u, 24.0 * d * d + base + _SAMPLE_BYTES_PER_NNZ * nnz, d ** 3 / 3.0, product


@dataclasses.dataclass
class _TangentFactor:
    """A Cholesky factor ``H_g = R^T R`` (R upper triangular) of the Hessian in the coordinates c of G, and the
    basis U of :func:`_y_basis`: banded (``R`` in LAPACK upper storage ``R[u + i - j, j]``, half-bandwidth u) or
    dense (``R`` the ``(d, d)`` matrix, u = d - 1)."""
    R: np.ndarray
    u: int
    banded: bool
    basis: np.ndarray

    def draw(self, xi: np.ndarray) -> np.ndarray:
        """``R^{-1} xi``: ``N(0, H_g^{-1})`` for ``xi ~ N(0, 1)`` (covariance ``R^{-1} R^{-T} = H_g^{-1}``)."""
        if self.banded:
            c, info = sla.lapack.dtbtrs(self.R, xi, uplo="U", trans="N", diag="N")
            if info != 0:
                raise ValueError(f"the banded triangular solve failed (LAPACK dtbtrs info {info})")
            return c
        return sla.solve_triangular(self.R.T, xi, lower=True, trans="T")

    def upper(self) -> np.ndarray:
        """R as a dense ``(d, d)`` upper-triangular matrix (for tests and small grids)."""
        if not self.banded:
            return np.triu(self.R)
        d = self.R.shape[1]
        R = np.zeros((d, d))
        for k in range(self.u + 1):  # row k of the storage is the diagonal k - u
            i = np.arange(max(0, self.u - k), d)
            R[i - (self.u - k), i] = self.R[k, i]
        return R


def _tangent_factor(point: LogPoint, banded: bool, chunk_nnz: int | None = None) -> _TangentFactor:
    """The Cholesky factor of ``H_g`` at ``point``: banded (:func:`_tangent_hessian_banded`, factorised in place by
    LAPACK ``pbtrf``: ``d (u + 1)^2`` flops) or dense (:func:`tangent_hessian_dense`); the same ValueError either
    way when ``H_g`` is not positive definite."""
    try:
        if banded:
            ab, u, U = _tangent_hessian_banded(point, chunk_nnz)
            R = sla.cholesky_banded(ab, overwrite_ab=True, lower=False, check_finite=False)
            return _TangentFactor(R, u, True, U)
        A, U = tangent_hessian_dense(point)
        return _TangentFactor(np.linalg.cholesky(A).T, A.shape[0] - 1, False, U)
    except np.linalg.LinAlgError:
        raise ValueError("the field is not a local minimum of the energy on the normalised densities (the Hessian "
                         "on the tangent space is not positive definite); solve to a minimum first") from None


def laplace_samples(problem: DensityProblem, L: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` fields L ``(n, nx, ny)`` from the Laplace posterior: ``g = g* + delta`` with ``delta ~ N(0, H_g^{-1})``
    on G (the Gaussian of the Laplace approximation, in the coordinates in which the measure is Lebesgue), mapped
    back to M by normalising per x.  Equivalently ``dL ~ N(0, (H|_T)^{-1})`` on T, then renormalised: the per-x
    constants are what normalisation fixes.  Exact Gaussian draws through a Cholesky factor of ``H_g``, banded
    (H_g couples x nodes within the prior's stencil only) unless x is periodic (grids up to
    :data:`SAMPLE_MAX_NODES` nodes, and a bounded cost: :func:`_sample_plan`)."""
    check_model(problem)
    blas_threads()  # as every run of the API: multithreaded OpenBLAS makes pbtrf 100x slower on shared cores
    grid = problem.grid
    nx, ny = grid.shape
    n = check_samples(n, grid.size, "Laplace samples")
    if grid.size > SAMPLE_MAX_NODES:
        raise ValueError(f"Laplace samples are drawn for grids up to {SAMPLE_MAX_NODES} nodes (a Cholesky factor of "
                         f"the Hessian on the normalised densities, banded unless x is periodic), this one has "
                         f"{grid.size}; use a coarser grid")
    banded = False
    if ny > 1:
        banded, u, mem, flops, product = _sample_plan(problem)
        if mem > _SAMPLE_MAX_BYTES or flops > _SAMPLE_MAX_FLOPS or product > _SAMPLE_MAX_PRODUCT:
            d = nx * (ny - 1)
            kind = (f"banded (half-bandwidth {u})" if banded else
                    "dense (a periodic x axis couples the first and last x nodes)" if grid.x.boundary == "periodic"
                    and nx > 1 else "dense (the band would be about as wide as the matrix)")
            raise ValueError(f"Laplace samples on this {nx} x {ny} grid need a {kind} Cholesky factor of the "
                             f"{d} x {d} Hessian on the normalised densities: about {mem / 2**20:.0f} MiB, "
                             f"{product:.2g} multiply-adds to build it and {flops:.2g} floating-point operations to "
                             f"factorise it, above the limits ({_SAMPLE_MAX_BYTES / 2**20:.0f} MiB, "
                             f"{_SAMPLE_MAX_PRODUCT:.0e}, {_SAMPLE_MAX_FLOPS:.0e}); use a coarser grid, or fewer y "
                             f"nodes")
    point, _ = map_newton(problem.energy, L)
    if ny == 1:
        return np.repeat(point.phi[None], int(n), axis=0)
    fac = _tangent_factor(point, banded)
    xi = rng.standard_normal((nx * (ny - 1), int(n)))
    c = fac.draw(xi)  # R^{-1} xi ~ N(0, H_g^{-1})
    delta = np.einsum("yk,ikn->niy", fac.basis, c.reshape(nx, ny - 1, int(n)))
    out = point.phi[None] + delta
    m = np.max(out, axis=-1, keepdims=True)
    return out - (m + np.log(np.sum(np.exp(out - m), axis=-1, keepdims=True) * grid.hy))


def credible_bands(problem: DensityProblem, samples: np.ndarray, level: float = 0.9) -> dict:
    """Pointwise equal-tailed credible bands at ``level`` from samples of L: of P ``(nx, ny)`` and of the regression
    function ``h(x) = sum_j y_j P hy`` (eq. (709), :func:`bftcore.foundations.metrics.regression_function`).  Returns
    ``level``, ``P_lower``, ``P_upper``, ``P_median``, ``h_lower``, ``h_upper``, ``h_median`` (arrays)."""
    if not 0 < level < 1:
        raise ValueError(f"the credible level must be between 0 and 1, got {level!r}")
    S = np.asarray(samples, dtype=float)
    if S.ndim != 3 or S.shape[1:] != problem.grid.shape or S.shape[0] < 2:
        raise ValueError(f"samples must be an array (n >= 2, {problem.grid.x.n}, {problem.grid.y.n}), got {S.shape}")
    P = np.exp(S)
    h = np.stack([metrics.regression_function(Pk, problem.grid)[0] for Pk in P])
    q = [(1 - level) / 2, 0.5, (1 + level) / 2]
    Pq, hq = np.quantile(P, q, axis=0), np.quantile(h, q, axis=0)
    return {"level": float(level), "P_lower": Pq[0], "P_median": Pq[1], "P_upper": Pq[2],
            "h_lower": hq[0], "h_median": hq[1], "h_upper": hq[2]}


def _json_numbers(values) -> list:
    """JSON has no NaN: a gap in a path is null."""
    return [v if v is not None and np.isfinite(v) else None for v in values]


def path_document(cfg: dict, param: str, values) -> dict:
    """The Laplace evidence path of a validated density document as the evidence document (without the fields;
    gaps as None): what the density kinds answer (:mod:`bftcore.models.problems`)."""
    doc = dict(evidence_path(cfg, param=param, values=values))
    doc.pop("fields", None)
    for key in ("log_evidence", "data_fit", "occam", "logdet_stderr"):
        doc[key] = _json_numbers(doc[key])
    doc["method"] = "laplace"
    return doc


#: How many of the Laplace samples :func:`band_summary` also returns as whole curves h(x) (``h_draws``): what a
#: teaching demo draws over its band, few enough to tell apart.
BAND_DRAWS = 5


def band_summary(cfg: dict, L: np.ndarray, n: int, level: float, rng: np.random.Generator) -> dict:
    """The pointwise ``level`` credible band of the regression function h(x) of p(y|x) from ``n`` Laplace samples
    about the MAP field ``L`` of a validated density document, and the curves h(x) of the first
    :data:`BAND_DRAWS` of those samples (``h_draws``: posterior draws, as a regression's summary has)."""
    problem = build_density(cfg)
    L = np.asarray(L, dtype=float).reshape(problem.grid.shape)
    samples = laplace_samples(problem, L, n, rng)
    bands = credible_bands(problem, samples, level)
    draws = [metrics.regression_function(np.exp(S), problem.grid)[0].tolist() for S in samples[:BAND_DRAWS]]
    return {"x": problem.grid.x.nodes.tolist(), "h_lo": bands["h_lower"].tolist(),
            "h_hi": bands["h_upper"].tolist(), "h_median": bands["h_median"].tolist(), "h_draws": draws,
            "kind": "laplace", "level": level}


__all__ = ["laplace_evidence", "evidence_path", "d_log_evidence_d_log_lambda", "laplace_samples", "credible_bands",
           "check_model", "default_values", "path_document", "band_summary"]
