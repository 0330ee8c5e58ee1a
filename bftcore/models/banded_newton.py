"""The exact Newton step of E_L on small grids: one banded Cholesky factorisation instead of conjugate gradients.

Newton's system for field L is ``H d = -G`` with the normalisation-consistent Hessian (160)
``H = J^T M J``, ``M = lambda cell K + diag(Lambda_X P hy)``, ``J = I - I_X P hy`` (per x node i,
``J_i = I - 1 V_i^T``, ``V_i = P_i hy``).  For a single Gaussian prior ``K = lambda_x K_X (x) 1 + lambda_y 1 (x) K_Y``
couples x nodes only within the reach of K_X's stencil (1 for l2, 3 for l6), so H, in x-major order, is banded with
dense ``ny x ny`` blocks:

* diagonal block i: ``J_i^T (A_i) J_i`` with ``A_i = lambda cell (lambda_x K_X[i, i] + lambda_y K_Y) + diag(Lambda_i
  V_i)``; written out, ``A_i + V_i w_i^T + w_i V_i^T`` with ``c_i = 1^T A_i`` and ``w_i = (1^T c_i / 2) V_i - c_i``;
* off-diagonal block (i, k): ``a J_i^T J_k = a (I + (ny V_i - 1) V_k^T - V_i 1^T)``, ``a = lambda cell lambda_x
  K_X[i, k]``.

H is singular along the per-x constants (``J_i 1 = 0``: they do not move a normalised L), which are also orthogonal
to G.  Adding ``c 1 1^T`` to each diagonal block (c > 0) leaves H unchanged on the tangent space and makes the
whole positive definite exactly when H is positive definite there; the solution then has zero sum per x, and
``normalise`` removes any per-x constant anyway.  So one LAPACK banded Cholesky (``pbtrf``) either gives the exact
Newton step or says the Hessian is not positive definite, and the caller takes the conjugate-gradient route, which
handles negative curvature (:func:`bftcore.foundations.solvers.newton_cg_direction`).

A periodic x axis couples its first and last nodes; ordered 0, nx-1, 1, nx-2, ... (interleaved) the reach r of
K_X's stencil becomes 2r, so the band stays narrow.  The half-bandwidth is ``u = (reach + 1) ny - 1`` and the
factorisation costs about ``n (u + 1)^2`` multiply-adds (n = nx ny): cheaper than CG's fixed costs per Newton step
on the smallest grids only (:data:`MAX_NODES`).

Where every ``Lambda_i >= 0`` (the usual case: a Lagrange multiplier is the data count of its x column corrected
by the prior), M itself is positive definite and the same step comes from the bordered system
``[M W; W^T 0] [d; mu] = [-G; 0]``, ``W`` the ``nx`` columns ``V_i`` (the gauge ``sum_y P hy d = 0``, shifted to zero
sum per x afterwards): ``M = R R^T`` by a banded Cholesky, ``Y = R^{-1} W``, ``S = Y^T Y`` (``nx x nx``), then
``mu = S^{-1} Y^T z`` with ``z = -R^{-1} G`` and ``d = R^{-T} (z - Y mu)``.  M's band is the prior's, the same at
every point but for its diagonal: no dense blocks to build, and its half-bandwidth is ``reach ny`` against
``(reach + 1) ny - 1`` (16 against 31 on a 16 x 16 grid with l2).  This is the *bordered form*, taken first; the
*projected form* above (``H + c 1 1^T``) where some ``Lambda_i < 0`` or M's factorisation shows it singular.

Near the minimum a run reuses a factor once (:class:`BandedRun`): after an exact step that changed L by at most
:data:`CHORD_STEP`, the next step is ``-H_prev^{-1} G`` with the previous factor, a triangular solve.

The same Hessian in the orthonormal coordinates of the tangent space is built for the Laplace samples
(:func:`bftcore.models.evidence.tangent_hessian_dense`, from the sparse K); the tests check the band against it and
against the matrix of the Hessian action CG uses (``point.hessp``).
"""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy.linalg import lapack

from ..foundations.grid import Grid
from ..foundations.limits import blas_threads
from ..foundations.operators import axis_operator

#: The banded step is taken instead of CG on grids of at most this many nodes whose factorisation costs at most
#: :data:`MAX_WORK` multiply-adds (``n (u + 1)^2``).  Decision, measured (``python scripts/banded_newton_ab.py``:
#: whole Newton iterations, the two routes alternated; docs/performance.md "seventh session"): a banded step costs
#: about what CG's fixed costs per Newton step do on the smallest grids, and it is exact, so a run takes fewer steps.
#: Faster on every problem of up to 256 nodes measured (Figs 14, 16, 21 and random_problem of 12 x 12 and 16 x 16,
#: l2 and l6, seeds 0-3: 9-50 % less time, fig14 6 steps against 9), and on 20 x 20 with l2 (3-9 %, work 6.4e5);
#: 20 x 20 with l6 (work 2.6e6) went -22 % to +35 % over the seeds; 24 x 24 l2 and 32 x 32 were slower (32 x 32 l2 3.3
#: against 1.7 ms).  The work bound also keeps out the long thin grids whose band is full (1 x 400: u = 399).
MAX_NODES = 400
MAX_WORK = 2e6


def x_order(nx: int, periodic: bool) -> np.ndarray:
    """The x nodes in band order: interleaved 0, nx-1, 1, nx-2, ... on a periodic axis (its wrap-around then
    couples neighbours in the order), else as they are."""
    if not periodic or nx <= 2:
        return np.arange(nx)
    order = np.empty(nx, dtype=int)
    order[0::2] = np.arange((nx + 1) // 2)
    order[1::2] = nx - 1 - np.arange(nx // 2)
    return order


def band_reach(kx: np.ndarray) -> int:
    """How far from the diagonal the x operator ``kx`` (dense, in band order) reaches: its half-bandwidth in
    x nodes."""
    rows, cols = np.nonzero(kx)
    return int(np.max(np.abs(rows - cols))) if rows.size else 0


@functools.lru_cache(maxsize=16)
def _banded_newton(grid: Grid, lambda_x: float, lambda_y: float, l0: float, l2: float, l4: float, l6: float,
                   lam: float) -> "BandedNewton | None":
    """The :class:`BandedNewton` of a grid and a single Gaussian prior, or None above :data:`MAX_NODES` or
    :data:`MAX_WORK`; kept (the pattern is at most about a megabyte below those bounds)."""
    nx, ny = grid.shape
    order = x_order(nx, grid.x.boundary == "periodic")
    kx = axis_operator(grid.x, l0, l2, l4, l6).toarray()
    reach = band_reach(kx[np.ix_(order, order)])
    if nx * ny > MAX_NODES or nx * ny * ((reach + 1) * ny) ** 2 > MAX_WORK:
        return None
    scale = lam * grid.cell
    ky = axis_operator(grid.y, l0, l2, l4, l6).toarray()
    return BandedNewton(grid, (scale * lambda_x) * kx, (scale * lambda_y) * ky)


class BandedNewton:
    """The exact Newton step of E_L at a point (module text) for one grid and prior: the pattern (the x order,
    where each block goes in LAPACK's lower banded storage, the prior's blocks) is built once and kept across runs
    (a dashboard solves the same grid and prior at every click); a call builds the band at the point, factorises it
    and solves.  Nothing is changed by a call, so runs in several threads share one.

    ``BandedNewton.for_energy(energy)`` is the constructor the solver uses: None where the step does not apply
    (a mixture of priors, whose Hessian has a dense low-rank term) or costs more than CG
    (:data:`MAX_NODES`, :data:`MAX_WORK`)."""

    @staticmethod
    def for_energy(energy) -> "BandedNewton | None":
        prior = energy.prior
        if prior.m != 1:
            return None
        blas_threads()  # as every run of the API: a multithreaded OpenBLAS makes pbtrf 100 times slower here
        K = prior.K
        return _banded_newton(energy.grid, K.lambda_x, K.lambda_y, K.l0, K.l2, K.l4, K.l6, prior.lam)

    def __init__(self, grid: Grid, kx: np.ndarray, ky: np.ndarray):
        """``kx`` and ``ky``: the dense x and y parts of ``lambda cell K`` (``lambda cell lambda_x K_X`` and
        ``lambda cell lambda_y K_Y``)."""
        nx, ny = grid.shape
        self.order = order = x_order(nx, grid.x.boundary == "periodic")
        # how a point's (nx, ny) arrays are put in band order: a view where the order is the grid's own
        self.rows_in_order = slice(None) if np.array_equal(order, np.arange(nx)) else order
        kx = kx[np.ix_(order, order)]
        self.ky = ky
        self.ky_sums = ky.sum(axis=0)
        self.kx_diag = np.diag(kx).copy()
        self.rows, self.cols = np.nonzero(np.tril(kx, -1))  # the off-diagonal blocks (i > k), in band order
        self.kx_off = kx[self.rows, self.cols]
        reach = band_reach(kx)
        self.nx, self.ny, self.n = nx, ny, nx * ny
        self.u = u = (reach + 1) * ny - 1
        # LAPACK's lower banded storage ab[k, c] = H[c + k, c] (k = 0..u), kept as the C-ordered transpose
        # abT[c, k] so that ab = abT.T is the Fortran array pbtrf takes without a copy: flat index c (u + 1) + k
        j, jj = np.arange(ny)[:, None], np.arange(ny)[None, :]
        i = np.arange(nx)[:, None, None]
        lower = np.broadcast_to(j >= jj, (nx, ny, ny))
        self.diag_src = np.flatnonzero(lower)
        self.diag_dst = np.broadcast_to((i * ny + jj) * (u + 1) + (j - jj), (nx, ny, ny))[lower]
        r, c = self.rows[:, None, None], self.cols[:, None, None]
        self.off_dst = ((c * ny + jj) * (u + 1) + (r - c) * ny + (j - jj)).ravel()
        self.eye = np.eye(ny)
        self.diag_flat = np.arange(ny) * (ny + 1)
        # the bordered form: M's band without its diagonal term (the prior's, in band order) and where W's entries go
        m = np.kron(kx, np.eye(ny)) + np.kron(np.eye(nx), ky)
        v = max(reach * ny, ny - 1)  # M's half-bandwidth
        mr, mc = np.nonzero(np.tril(m))
        self.m_band = np.zeros((self.n, v + 1))
        self.m_band[mc, mr - mc] = m[mr, mc]
        self.w_index = np.arange(self.n) * nx + np.repeat(np.arange(nx), ny)  # flat index of W[c, i(c)], (n, nx)
        for a in vars(self).values():
            if isinstance(a, np.ndarray):
                a.flags.writeable = False

    def band(self, point) -> np.ndarray | None:
        """``H + c 1 1^T`` per x block at ``point`` in band order, as the C-ordered transpose of LAPACK's lower
        banded storage (``band(point).T[k, i] = H[i + k, i]``), or None when the diagonal is not positive (H is then
        not positive definite on the tangent space)."""
        nx, ny, order = self.nx, self.ny, self.rows_in_order
        V = point._V[order]
        diag = self.kx_diag[:, None] + point.lagrange_multiplier[order, None] * V  # A_i's diagonal beyond K_Y
        c = self.ky_sums + diag  # 1^T A_i (A_i is symmetric)
        w = (0.5 * c.sum(axis=1))[:, None] * V - c
        Hd = V[:, :, None] * w[:, None, :]
        Hd += Hd.transpose(0, 2, 1)
        Hd += self.ky
        flat = Hd.reshape(nx, ny * ny)
        dg = flat[:, self.diag_flat] + diag
        flat[:, self.diag_flat] = dg
        gauge = float(dg.sum()) / self.n  # c of c 1 1^T: the mean of the diagonal
        if not gauge > 0:
            return None
        Hd += gauge / ny
        abT = np.zeros((self.n, self.u + 1))
        dst = abT.reshape(-1)
        dst[self.diag_dst] = Hd.reshape(-1)[self.diag_src]
        if self.rows.size:
            Vr, Vc = V[self.rows], V[self.cols]
            Ho = (ny * Vr - 1.0)[:, :, None] * Vc[:, None, :]
            Ho -= Vr[:, :, None]
            Ho += self.eye
            Ho *= self.kx_off[:, None, None]
            dst[self.off_dst] = Ho.reshape(-1)
        return abT

    def factorise(self, point) -> tuple | None:
        """The factorisation of Newton's system at ``point`` (module text): the bordered form's
        ``("bordered", R, Y, C)`` (M's banded Cholesky factor R, ``Y = R^{-1} W`` and the Cholesky factor C of
        ``S = Y^T Y``) where every ``Lambda_i >= 0`` and M is safely positive definite, else the projected form's
        ``("projected", R)`` (the banded Cholesky factor of ``H + c 1 1^T``); None where H is not positive definite
        on the tangent space (or a factorisation fails for rounding)."""
        bordered = self.factorise_bordered(point)
        if bordered is not None:
            return bordered
        abT = self.band(point)
        if abT is None:
            return None
        R, info = lapack.dpbtrf(abT.T, lower=1, overwrite_ab=1)
        return ("projected", R) if info == 0 else None

    def factorise_bordered(self, point) -> tuple | None:
        """The bordered form's factors at ``point`` (:meth:`factorise`), or None where it does not apply: some
        ``Lambda_i < 0`` (M may be indefinite), or a pivot of M's Cholesky below 1e-10 of M's largest diagonal
        entry (M is singular to rounding, e.g. a column without data and no x coupling: the projected form's gauge
        handles that)."""
        order, nx = self.rows_in_order, self.nx
        lam = point.lagrange_multiplier[order]
        if not lam.min() >= 0.0:
            return None
        V = point._V[order]
        abT = self.m_band.copy()
        abT[:, 0] += (lam[:, None] * V).reshape(-1)
        top = float(abT[:, 0].max())
        R, info = lapack.dpbtrf(abT.T, lower=1, overwrite_ab=1)
        if info != 0 or not float(R[0].min()) ** 2 > 1e-10 * top:
            return None
        W = np.zeros((self.n, nx))
        W.reshape(-1)[self.w_index] = V.reshape(-1)
        Y, info = lapack.dtbtrs(R, W, uplo="L")
        if info != 0:
            return None
        C, info = lapack.dpotrf(Y.T @ Y, lower=1)
        return ("bordered", R, Y, C) if info == 0 else None

    def solve(self, factor: tuple, point) -> np.ndarray | None:
        """``-H^{-1} G`` at ``point`` with the factorisation ``factor`` of :meth:`factorise` (of this point: the
        Newton step; of an earlier one: a chord step), zero sum per x; None if the solve gives no finite step."""
        order, nx, ny = self.rows_in_order, self.nx, self.ny
        rhs = -point.gradient[order].reshape(-1)
        if factor[0] == "bordered":
            _, R, Y, C = factor
            z, info = lapack.dtbtrs(R, rhs[:, None], uplo="L")
            mu, info2 = lapack.dpotrs(C, Y.T @ z, lower=1)
            step, info3 = lapack.dtbtrs(R, z - Y @ mu, uplo="L", trans="T")
            info = info or info2 or info3
            step = step.reshape(nx, ny)
            step -= step.sum(axis=1, keepdims=True) * (1.0 / ny)  # the projected form's gauge: the same step
        else:
            step, info = lapack.dpbtrs(factor[1], rhs, lower=1)
            step = step.reshape(nx, ny)
        if info != 0 or not math.isfinite(float(step.sum())):
            return None
        if type(order) is slice:
            return step
        out = np.empty((nx, ny))
        out[order] = step
        return out

    def __call__(self, point) -> np.ndarray | None:
        """The Newton step ``d`` (``H d = -G`` on the tangent space, zero sum per x) at ``point`` of E_L, or None
        where H is not positive definite on the tangent space (or the factorisation fails for rounding)."""
        factor = self.factorise(point)
        return None if factor is None else self.solve(factor, point)

    def run(self) -> "BandedRun":
        """The step function of one run (:class:`BandedRun`): the steps of this object, and one chord step after a
        small one."""
        return BandedRun(self)


#: A step whose largest change of L (a units-free log-density) is at most this lets the next step reuse its factor
#: (:class:`BandedRun`).  Decision, measured (docs/performance.md, "eighth session"): the last step of a run then
#: costs a triangular solve (6-10 us) instead of a band and a factorisation (85-100 us); whole fits 3-8 % faster
#: on the paper's meshes and random problems of 12-20 nodes a side, in as many steps, to the same energy (1e-16).
#: Near the minimum the chord step's error is the exact step's times about the change since the factor; 1e-1 took
#: a step more now and then; reusing each factor once whatever the step, up to 7 more (16 x 16 l6: 18 steps against 11).
CHORD_STEP = 1e-3


class BandedRun:
    """One run's banded Newton steps (the solver asks :meth:`LogDensityEnergy.newton_direct` once per run; the
    :class:`BandedNewton` it wraps is shared between runs and threads, this object is not).

    A step is the exact Newton step, except right after an exact step that changed L by at most :data:`CHORD_STEP`
    (max-abs): the next step then solves with that step's factor (a chord step, ``-H_prev^{-1} G``: a descent
    direction, as H_prev is positive definite), once, and the step after it factorises again.  Near the minimum the
    Hessian hardly moves over such a change, so the chord step is as good as the exact one for the stopping rule.
    Such steps are the last one or two of a run, where the band and the factorisation were most of a step's time
    (``chord_steps`` counts them)."""

    def __init__(self, banded: BandedNewton):
        self.banded = banded
        self.factor: tuple | None = None  # the last exact step's factorisation, while it may be reused once
        self.chord_steps = 0

    def __call__(self, point) -> np.ndarray | None:
        if self.factor is not None:
            previous, self.factor = self.factor, None
            d = self.banded.solve(previous, point)
            if d is not None:
                self.chord_steps += 1
                return d
        factor = self.banded.factorise(point)
        if factor is None:
            return None
        d = self.banded.solve(factor, point)
        if d is not None and float(abs(d).max()) <= CHORD_STEP:
            self.factor = factor
        return d
