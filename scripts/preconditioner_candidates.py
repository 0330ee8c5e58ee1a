"""The Newton preconditioner's candidates side by side (issue 31): ``python scripts/preconditioner_candidates.py
[--sizes 64,128] [--repeats 3] [--only WORDS]`` prints, for the benchmark's l6 problems (``python -m bftcore
bench``), the cost of solving one Newton system at the converged field to a relative residual of 1e-8 by
preconditioned CG: the preconditioner's build time, the CG iterations, the solve time and their sum (medians of
``--repeats``).  ``--newton 4,8`` prints whole Newton runs instead: the solver as it is, and with the two-level
candidate (knots every 4 or 8 nodes, cubic) built anew at every step.

Candidates (each keeps the normalisation's constraint, the tangent space ``sum_y P hy d = 0`` per x):

* ``separable qQ``: :class:`bftcore.models.density.SeparablePreconditioner`, strong form, with its x-independent
  data term d(y) taken as the Q-quantile over x of ``Lambda_X P hy`` (the package's choice is its ``quantile``);
* ``SuperLU + exact Schur``: the exact inverse of ``M = lambda cell K + diag(max(Lambda_X, 0) P hy)`` by a sparse LU
  (SciPy's SuperLU, minimum-degree ordering in symmetric mode, :data:`bftcore.foundations.linalg.SADDLE_LU`), the
  constraint by the exact nx x nx Schur complement ``V^T M^-1 V`` (nx solves); one CG iteration, the floor of a
  direct method;
* ``SuperLU + separable Schur``: the same LU, the Schur complement of the separable form;
* ``y-mode Galerkin m``: the Hessian itself (160) projected onto the span of all x nodes times the m lowest
  eigenvectors of K_Y (the constant first), solved exactly there by a banded Cholesky (x-major order, dense m x m
  blocks, half-bandwidth (reach + 1) m - 1), and on the other y modes one banded x system per mode with the data term
  replaced by its diagonal in those modes (:class:`YModeGalerkin`); exact at m = ny;
* ``two-level cC pP``: the strong separable form as the smoother and a coarse grid (:class:`SplineTwoLevel`):
  B-splines of degree P with knots every C nodes on each axis (periodic where the axis is), the Hessian (160)
  projected onto their tensor products (Galerkin, ``Zc = Z^T H Z`` with H's per-x constants lifted) and factorised
  densely, combined multiplicatively and symmetrically (balancing: ``Q + (I - Q H) S (I - H Q)``, ``Q = Z Zc^-1
  Z^T``, S the separable form; two Hessian products and two coarse solves per application); exact when the coarse
  space is everything (C = 1, P = 0); ``two-level additive cC p3``: the same parts added, ``S + Q`` (no Hessian
  product, one coarse solve per application: the cheapest combination, at the price of more iterations);
* ``pyamg SA``: algebraic multigrid (pyamg's smoothed aggregation, one V-cycle) on ``M``, the Schur complement of the
  separable form; only when pyamg is installed (``pip install pyamg``: it is not a dependency of bftcore).

CHOLMOD (scikit-sparse) is not among them: its current release needs SuiteSparse 7 and Debian 12 has 5.12, and the
older release that builds against 5.12 is binary-incompatible with NumPy 2 (docs/performance.md).
A benchmark prints a table; nothing here asserts on time.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from bftcore import api
from bftcore.foundations.limits import UNLIMITED, blas_threads, using
from bftcore.foundations.linalg import saddle_lu
from bftcore.foundations.solvers import NewtonMatrix
from bftcore.models.density import SeparablePreconditioner
from bftcore.studies.bench import bench_config, newton_run


def converged_point(n: int):
    """The converged E_L point of the benchmark's n x n l6 problem."""
    cfg = bench_config((n, n), "l6")
    doc = api.fit(cfg)
    E = api.build_density(cfg).energy
    return E.at(E.normalise(np.asarray(doc["L"]).reshape(E.grid.shape)))


def pcg_count(point, b, precond, tol: float = 1e-8, maxiter: int = 5000) -> int:
    """CG iterations for ``H x = b`` (the Gauss-Newton Hessian of ``point``) to ``|r| <= tol |b|``."""
    def hess(v):
        return point.hessp(v, convexified=True)
    r = b.copy()
    z = precond(r)
    p, rz, x = z.copy(), float(np.vdot(r, z)), np.zeros_like(b)
    nb = float(np.linalg.norm(b))
    for k in range(maxiter):
        Hp = hess(p)
        a = rz / float(np.vdot(p, Hp))
        x += a * p
        r -= a * Hp
        if np.linalg.norm(r) <= tol * nb:
            return k + 1
        z = precond(r)
        rz_new = float(np.vdot(r, z))
        p = z + (rz_new / rz) * p
        rz = rz_new
    return maxiter


def constrained(solve, V, schur):
    """The preconditioner ``A - A V S^-1 V^T A`` with ``A = solve`` and ``S`` = ``schur`` (a Cholesky factor)."""
    def apply(r):
        z = solve(r)
        mu = sla.cho_solve(schur, np.sum(V * z, axis=1))
        return solve(r - V * mu[:, None])
    return apply


class SeparableAt(SeparablePreconditioner):
    """The separable preconditioner with another quantile."""

    def __init__(self, point, q: float):
        self.quantile = q
        super().__init__(point, True, {})


class YModeGalerkin:
    """The y-mode Galerkin candidate (module docstring) at ``point`` with ``m`` low y modes: ``H + c P_1`` (``P_1``
    the per-x projector on the constants, which H does not see) projected onto ``Z = I_x (x) Q_m``.  With
    ``J_i = I - 1 V_i^T`` and the constant in ``Q_m`` (``1 = Q_m q``), ``J_i Q_m = Q_m R_i``, ``R_i = I - q u_i^T``,
    ``u_i = Q_m^T V_i``, so the projection is exact and banded: block (k, i) is ``R_k^T (a_ki I + delta_ki (diag(w_m)
    + Q_m^T diag(D_i) Q_m)) R_i`` (+ ``c q q^T / ny`` on the diagonal), ``a = lambda cell lambda_x K_X``."""

    def __init__(self, point, m: int):
        E = point.energy
        grid = E.grid
        nx, ny = grid.shape
        m = min(m, ny)
        # the dense y and x parts of lambda cell K, as the separable preconditioner builds them
        fixed = SeparablePreconditioner._fixed_parts(E, E.prior.lam * grid.cell, None)
        Ky, Kx = fixed.Ky, fixed.x_matrix
        one = np.full(ny, 1.0 / np.sqrt(ny))
        shift = float(np.abs(Ky).max()) + 1.0  # the constant (K_Y 1 = 0) moved to the front of the spectrum
        w, Q = np.linalg.eigh(Ky - shift * np.outer(one, one))
        w[0] += shift
        V = point.P * grid.hy
        D = np.maximum(point.lagrange_multiplier, 0.0)[:, None] * V
        rows, cols = np.nonzero(Kx)
        reach = max(1, int(np.max(np.abs(rows - cols))))
        Qm = Q[:, :m]
        q = Qm.T @ np.ones(ny)
        R = np.eye(m)[None] - q[None, :, None] * (V @ Qm)[:, None, :]
        Dm = (D @ (Qm[:, :, None] * Qm[:, None, :]).reshape(ny, m * m)).reshape(nx, m, m) + np.diag(w[:m])
        c = float(np.mean(np.abs(np.diagonal(Dm, axis1=1, axis2=2)))) + float(np.max(np.abs(Kx)))
        ab = np.zeros(((reach + 1) * m, nx * m))
        a_, b_ = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
        for off in range(reach + 1):
            a = np.diagonal(Kx, -off)  # K_X[i + off, i]
            if off == 0:
                blocks = R.transpose(0, 2, 1) @ ((a[:, None, None] * np.eye(m) + Dm) @ R)
                blocks += (c / ny) * np.outer(q, q)
            else:
                blocks = a[:, None, None] * (R[off:].transpose(0, 2, 1) @ R[:nx - off])
            band = off * m + a_ - b_  # block (i + off, i), entry (a, b): row (i + off) m + a, column i m + b
            keep = band >= 0
            col = np.arange(nx - off)[:, None] * m + b_[keep][None, :]
            ab[np.broadcast_to(band[keep], col.shape), col] = blocks[:, keep]
        self.low = sla.cholesky_banded(ab, lower=True)
        self.high = None
        if m < ny:  # the other modes: per mode j a banded x system a K_X + diag(w_j + diagonal of the data term)
            Qh = Q[:, m:]
            nh = ny - m
            abh = np.zeros((reach + 1, nh * nx))
            for off in range(reach + 1):
                abh[off] = np.tile(np.concatenate([np.diagonal(Kx, -off), np.zeros(off)]), nh)
            abh[0] += (w[m:][:, None] + (D @ Qh ** 2).T).ravel()
            self.high = sla.cholesky_banded(abh, lower=True)
        self.Q, self.m, self.shape = Q, m, (nx, ny)

    def __call__(self, r):
        nx, ny = self.shape
        m = self.m
        c = np.asarray(r).reshape(nx, ny) @ self.Q
        out = np.empty_like(c)
        out[:, :m] = sla.cho_solve_banded((self.low, True), c[:, :m].ravel()).reshape(nx, m)
        if self.high is not None:
            out[:, m:] = sla.cho_solve_banded((self.high, True), c[:, m:].T.ravel()).reshape(ny - m, nx).T
        z = out @ self.Q.T
        return z - z.mean(axis=1, keepdims=True)


def spline_basis(n: int, c: int, p: int, periodic: bool) -> sp.csr_matrix:
    """``n x m`` matrix of the B-splines of degree ``p`` with knots every ``c`` nodes, sampled at the n nodes and
    scaled to a peak of 1 (``p = 0, c = 1``: the identity); periodic ones wrap around (``m = n // c``), the others
    are cut at the ends (``m = (n - 1) // c + 1``, every node covered)."""
    kern = np.ones(c)
    for _ in range(p):
        kern = np.convolve(kern, np.ones(c))
    kern /= kern.max()
    width, half = len(kern), (len(kern) - 1) / 2.0
    m = n // c if periodic else (n - 1) // c + 1
    idx = np.rint(np.arange(m)[:, None] * c - half).astype(int) + np.arange(width)[None, :]
    vals = np.broadcast_to(kern, idx.shape)
    cols = np.broadcast_to(np.arange(m)[:, None], idx.shape)
    if periodic:
        idx = idx % n
        keep = np.ones(idx.shape, dtype=bool)
    else:
        keep = (idx >= 0) & (idx < n)
    return sp.csr_matrix((vals[keep], (idx[keep], cols[keep])), shape=(n, m))


class SplineTwoLevel:
    """The two-level candidate (module docstring) at ``point``: coarse knots every ``c`` nodes, B-splines of
    degree ``p``.  ``Zc = Z^T J^T M J Z`` is assembled from sparse products (``J Z = Z - U W``, ``W = V^T Z``, U the
    per-x constants), with ``Z^T U U^T Z`` added (scaled to Zc's diagonal) for the per-x constants that H does not
    see (the B-splines of each periodic axis sum to a constant, so Zc alone is singular there)."""

    def __init__(self, point, c: int, p: int, additive: bool = False):
        self.additive = additive
        E = point.energy
        g, pr = E.grid, E.prior
        nx, ny = g.shape
        n = g.size
        self.smoother = SeparablePreconditioner(point, True, {})
        V = point.P * g.hy
        D = np.maximum(point.lagrange_multiplier, 0.0)[:, None] * V
        M = (pr.lam * g.cell * pr.K.matrix + sp.diags(D.ravel())).tocsr()
        self.Bx = spline_basis(nx, c, p, g.x.boundary == "periodic")
        self.By = spline_basis(ny, c, p, g.y.boundary == "periodic")
        Z = sp.kron(self.Bx, self.By, format="csr")
        col = np.arange(n) // ny
        U = sp.csr_matrix((np.ones(n), (np.arange(n), col)), shape=(n, nx))
        W = (sp.csr_matrix((V.ravel(), (np.arange(n), col)), shape=(n, nx)).T @ Z).toarray()
        MZ = M @ Z
        T = (U.T @ MZ).toarray()
        Zc = (Z.T @ MZ).toarray() - T.T @ W - W.T @ T + W.T @ (U.T @ M @ U).toarray() @ W
        Zc = 0.5 * (Zc + Zc.T)
        UZ = (U.T @ Z).toarray()
        Zc += (float(np.mean(np.diag(Zc))) / ny) * (UZ.T @ UZ)
        self.F = sla.cho_factor(Zc)
        self.point, self.shape, self.coarse = point, (nx, ny), (self.Bx.shape[1], self.By.shape[1])

    def coarse_solve(self, r):
        """``Q r = Z Zc^-1 Z^T r`` (Z = Bx (x) By, applied axis by axis)."""
        rc = self.Bx.T @ (self.By.T @ np.asarray(r).reshape(self.shape).T).T
        cc = sla.cho_solve(self.F, rc.ravel()).reshape(self.coarse)
        return self.Bx @ (self.By @ cc.T).T

    def __call__(self, r):
        if self.additive:
            return self.smoother(r) + self.coarse_solve(r)

        def H(v):
            return self.point.hessp(v, convexified=True)
        z1 = self.coarse_solve(r)
        z2 = self.smoother(r - H(z1))
        return z1 + z2 - self.coarse_solve(H(z2))


def candidates(point):
    """``[(name, build)]``: ``build()`` returns the preconditioner."""
    E = point.energy
    g, pr = E.grid, E.prior
    V = point.P * g.hy
    D = np.maximum(point.lagrange_multiplier, 0.0)[:, None] * V
    M = (pr.lam * g.cell * pr.K.matrix + sp.diags(D.ravel())).tocsc()
    M = M + sp.diags(np.full(M.shape[0], 1e-10 * M.diagonal().max()))
    nx = g.shape[0]
    B = sp.csc_matrix((V.ravel(), (np.arange(g.size), np.arange(g.size) // g.shape[1])), shape=(g.size, nx))

    def lu():
        F = saddle_lu(M.tocsc())  # M is symmetric positive definite: the symmetric mode keeps the ordering
        return lambda r: F.solve(np.ravel(r)).reshape(g.shape), F

    def lu_exact():
        solve, F = lu()
        S = B.T @ F.solve(B.toarray())
        return constrained(solve, V, sla.cho_factor(S + 1e-13 * np.trace(S) / nx * np.eye(nx)))

    def lu_separable():
        solve, _ = lu()
        return constrained(solve, V, SeparablePreconditioner(point, True, {}).S)

    out = [(f"separable q{q:g}", lambda q=q: SeparableAt(point, q)) for q in (0.25, 0.1, 0.05)]
    out += [(f"y-mode Galerkin m={m}", lambda m=m: YModeGalerkin(point, m)) for m in (16, 32, 48)]
    out += [(f"two-level c{c} p{p}", lambda c=c, p=p: SplineTwoLevel(point, c, p))
            for c in (4, 8, 16) for p in (3, 5) if (g.shape[0] // c) * (g.shape[1] // c) <= 4096]
    out += [(f"two-level additive c{c} p3", lambda c=c: SplineTwoLevel(point, c, 3, additive=True))
            for c in (4, 8, 16) if (g.shape[0] // c) * (g.shape[1] // c) <= 4096]
    out += [("SuperLU + exact Schur", lu_exact), ("SuperLU + separable Schur", lu_separable)]
    try:
        import pyamg
    except ImportError:
        print("pyamg is not installed (pip install pyamg): its row is left out")
    else:
        def amg():
            ml = pyamg.smoothed_aggregation_solver(M.tocsr(), symmetry="symmetric")
            A = ml.aspreconditioner(cycle="V")
            return constrained(lambda r: (A @ np.ravel(r)).reshape(g.shape), V,
                               SeparablePreconditioner(point, True, {}).S)
        out.append(("pyamg SA + separable Schur", amg))
    return out


class TwoLevelNewton(NewtonMatrix):
    """The solver's Newton learning matrix with :class:`SplineTwoLevel` (knots every ``c`` nodes, degree ``p``) as
    the preconditioner of every step, built anew at each (its coarse matrix follows the point): the ``--newton``
    rows.  ``build_s`` sums the seconds of its builds."""

    def __init__(self, energy, mass2: float, cg_maxiter: int, c: int = 8, p: int = 3):
        super().__init__(energy, mass2, cg_maxiter)
        self.build_s = 0.0

        def newton_preconditioner(point, previous=None, strong=False, cache=None):
            t0 = time.perf_counter()
            out = SplineTwoLevel(point, c, p)
            self.build_s += time.perf_counter() - t0
            return out
        energy.newton_preconditioner = newton_preconditioner  # this energy object only, for this run


def newton_rows(n: int, spacings, p: int, repeats: int) -> None:
    """Print whole Newton runs of the benchmark's n x n l6 problem: the solver as it is, then with the two-level
    preconditioner at every step for each coarse spacing (medians of ``repeats``; steps, CG and energy of the
    first)."""
    cfg = bench_config((n, n), "l6")
    for c in (None, *spacings):
        rows = []
        for _ in range(repeats):
            made: list = []  # the run's matrix, for its build time

            def matrix(energy, mass2, cg_maxiter, c=c):
                made.append(NewtonMatrix(energy, mass2, cg_maxiter) if c is None
                            else TwoLevelNewton(energy, mass2, cg_maxiter, c, p))
                return made[-1]
            t, e, cg, banded = newton_run(cfg, matrix)
            rows.append((t, e, len(cg) + banded, sum(cg), getattr(made[0], "build_s", 0.0)))
        t = float(np.median([r[0] for r in rows]))
        b = float(np.median([r[4] for r in rows]))
        name = "separable (the solver)" if c is None else f"two-level c{c} p{p}"
        _, e, steps, cg, _ = rows[0]
        print(f"{f'{n}x{n}':>8} {name:<28} {steps:6d} {cg:6d} {e:18.10f} {t:9.2f} {b:9.2f}", flush=True)


def _whole_numbers(text: str, lo: int, hi: int, what: str) -> list[int]:
    """``"64,128"`` as [64, 128]; argparse reports a bad list with what is accepted."""
    try:
        out = [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of whole numbers") from None
    if not all(lo <= v <= hi for v in out):
        raise argparse.ArgumentTypeError(f"{text!r}: every {what} must be between {lo} and {hi}")
    return out


def _sizes(text: str) -> list[int]:
    return _whole_numbers(text, 8, 256, "n")


def _spacings(text: str) -> list[int]:
    return _whole_numbers(text, 2, 64, "knot spacing")


def _repeats(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=_sizes, default=[64, 128], help="comma-separated n (n x n grids, 8 to 256; "
                    "default 64,128)")
    ap.add_argument("--repeats", type=_repeats, default=3, help="runs per case, the median is printed (default 3)")
    ap.add_argument("--newton", type=_spacings, default=None, metavar="C,C", help="instead: whole Newton runs of "
                    "the bench's l6 problems, the solver as it is and with the two-level candidate (knots every C "
                    "nodes, cubic) at every step")
    ap.add_argument("--only", default="", help="comma-separated words: only the candidates whose name contains "
                    "one of them (e.g. separable,two-level)")
    args = ap.parse_args(argv)
    blas_threads()
    if args.newton is not None:
        print(f"whole Newton runs, grid family l6; medians of {args.repeats}; seconds")
        print(f"{'size':>8} {'preconditioner':<28} {'steps':>6} {'CG':>6} {'energy':>18} {'total':>9} {'builds':>9}")
        with using(UNLIMITED):
            for n in args.sizes:
                newton_rows(n, args.newton, 3, args.repeats)
        return 0
    print(f"one Newton system at the converged field, CG to 1e-8; medians of {args.repeats}; times in ms")
    print(f"{'size':>8} {'candidate':<28} {'build':>9} {'CG':>6} {'solve':>9} {'total':>9}")
    with using(UNLIMITED):
        for n in args.sizes:
            point = converged_point(n)
            rng = np.random.default_rng(0)
            x = rng.standard_normal(point.P.shape)
            x -= np.sum(point.P * point.energy.grid.hy * x, axis=1, keepdims=True)
            b = point.hessp(x, convexified=True)
            words = [w for w in args.only.split(",") if w]
            for name, build in candidates(point):
                if words and not any(w in name for w in words):
                    continue
                rows = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    pc = build()
                    t1 = time.perf_counter()
                    its = pcg_count(point, b, pc)
                    rows.append((t1 - t0, its, time.perf_counter() - t1))
                tb, its, ts = (float(np.median([r[i] for r in rows])) for i in range(3))
                print(f"{f'{n}x{n}':>8} {name:<28} {tb * 1e3:9.1f} {its:6.0f} {ts * 1e3:9.1f} "
                      f"{(tb + ts) * 1e3:9.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
