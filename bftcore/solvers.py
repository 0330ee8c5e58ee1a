"""Learning algorithms of Sect. 7.2 with a line search on eta, and the observable iteration.

An iteration is ``phi <- normalise(phi + eta d)`` with the direction ``d = -A^{-1} G`` of eq. (611)/(612) for a
learning matrix A:

* ``"gradient"``: A = I (621);
* ``"massive"``: massive relaxation A = K + m^2 I (632), solved exactly by FFT/DCT (field L) or on the free set
  of the active-set method (field P);
* ``"newton"``: A = -H, the normalisation-consistent Hessian (160) (field L) or the Hessian (181) of E_P on the
  free set.  For field L the Newton system is solved by preconditioned conjugate gradients with exact Hessian
  actions; when the Hessian is not positive definite along a CG direction the CG is truncated there (Steihaug),
  so the step is still a descent direction; if that happens on the very first CG direction the step is the
  preconditioned gradient step (a massive-relaxation step) and the record's ``method`` says ``"newton-fallback"``.

Every method uses a line search on eta that only accepts a decrease of the energy, so the energy never increases.
:func:`iterate` is a generator yielding one :class:`IterationRecord` per iteration (iteration 0 is the start);
closing it stops the run between iterations, and any field can be passed back in as a warm start.

Energies: any object with ``at(phi)`` returning a point with ``value``, ``gradient``, ``hessp(v)``, ``mixing``
and ``residual``, plus ``normalise(phi)`` and ``field`` ("L", "P", or "h" for regression).  ``massive_solve(r,
mass2)`` is used when the energy provides it (regression), otherwise the prior operator of the energy.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.fft as sfft
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spl

from .energies import project_simplex
from .limits import check_deadline
from .operators import axis_symbol

METHODS = ("newton", "massive", "gradient")


@dataclass
class IterationRecord:
    """What one iteration reports: the dashboard streams these, the result document stores them."""

    iteration: int
    energy: float
    step: float
    residual: float
    mixing: np.ndarray
    field: np.ndarray
    method: str
    change: float = np.nan
    converged: bool = False
    elapsed_s: float = 0.0


class SolverError(RuntimeError):
    """The iteration produced a non-finite energy or field."""


def _identity_precond(r):
    return r


# ----------------------------------------------------------------------------------------------- line search
def line_search(energy, phi, d, E0, slope, eta0=1.0, exact=False, max_halvings=60, path=None, line=None,
                accept_first=False):
    """Step length eta along d with ``E(normalise(phi + eta d)) < E0``; returns ``(eta, new_phi, new_point)``.

    ``path(eta)`` replaces ``normalise(phi + eta d)`` when given (the projection arc of the active-set method).
    ``line``, when given (a :class:`bftcore.energies.LineEnergy`), returns the energy on the path in closed form
    (or None where it cannot), so that only the accepted step is built as a full point (``line.point``); the step
    lengths tried are the same either way.

    ``exact=False`` (Newton): try eta0, then backtrack with safeguarded quadratic interpolation (Armijo, c = 1e-4).
    ``exact=True`` (gradient and massive relaxation, standing in for the paper's FindMinimum): from eta0 (the last
    accepted step) one step of the quadratic model through E(0), the slope at 0 and E(eta0), or backtracking
    when eta0 does not decrease the energy; two or three energy evaluations per iteration.  ``eta = 0`` (no point)
    when no decrease can be found, which the caller treats as convergence at machine precision.  ``accept_first=True``
    takes eta0 as it is whenever it decreases the energy (eta0 is then a Barzilai-Borwein step, see
    :func:`_barzilai_borwein`).
    """
    def trial(eta):
        if line is not None:
            v = line(eta)
            if v is not None:
                return (v if np.isfinite(v) else np.inf), None, None  # the point is built once accepted
        p = path(eta) if path is not None else energy.normalise(phi + eta * d)
        pt = energy.at(p)
        v = pt.value
        return (v if np.isfinite(v) else np.inf), p, pt

    if line is not None:
        eta, p, pt = _line_search_core(trial, E0, slope, eta0, exact, max_halvings, phi, accept_first)
        if pt is None and eta > 0:  # accepted on the closed form: build the point and check it for real
            q, pt = line.accept(eta, path if path is not None else (lambda e: energy.normalise(phi + e * d)))
            if not pt.value < E0:  # rounding at the last digits: decide with full evaluations instead
                return line_search(energy, phi, d, E0, slope, eta0, exact, max_halvings, path, None, accept_first)
            return eta, q, pt
        return eta, p, pt
    return _line_search_core(trial, E0, slope, eta0, exact, max_halvings, phi, accept_first)


def _line_search_core(trial, E0, slope, eta0, exact, max_halvings, phi, accept_first=False):
    """The step-length rules of :func:`line_search` on a ``trial(eta) -> (E, phi, point)`` function."""
    eta = eta0
    E1, p1, pt1 = trial(eta)
    if accept_first and E1 < E0:
        return eta, p1, pt1
    if not exact:
        for _ in range(max_halvings):
            if E1 <= E0 + 1e-4 * eta * slope and E1 < E0:
                return eta, p1, pt1
            if E1 < E0 and eta < 1e-6:
                return eta, p1, pt1
            denom = 2 * (E1 - E0 - slope * eta)
            new = -slope * eta * eta / denom if np.isfinite(E1) and denom > 0 else 0.5 * eta
            eta = min(max(new, 0.1 * eta), 0.5 * eta)
            E1, p1, pt1 = trial(eta)
        return (eta, p1, pt1) if E1 < E0 else (0.0, phi, None)

    if E1 < E0:
        # one quadratic-model step from E0, the slope at 0 and E(eta0); keep the better of the two points
        denom = 2 * (E1 - E0 - slope * eta)
        eta_q = -slope * eta * eta / denom if denom > 0 else 4 * eta
        eta_q = min(max(eta_q, 0.25 * eta), 8 * eta)
        if abs(eta_q - eta) > 0.05 * eta:
            Eq, pq, ptq = trial(eta_q)
            if Eq < E1:
                return eta_q, pq, ptq
        return eta, p1, pt1
    for _ in range(max_halvings):  # backtrack with safeguarded quadratic interpolation
        denom = 2 * (E1 - E0 - slope * eta)
        new = -slope * eta * eta / denom if np.isfinite(E1) and denom > 0 else 0.5 * eta
        eta = min(max(new, 0.1 * eta), 0.5 * eta)
        E1, p1, pt1 = trial(eta)
        if E1 < E0:
            return eta, p1, pt1
    return 0.0, phi, None


# ------------------------------------------------------------------------------------- learning matrices, L
class SeparablePreconditioner:
    """Approximate inverse of the Newton matrix (160) ``J^T M J`` for field L, ``M = lambda cell K +
    diag(Lambda_X P hy)``, ``J = I - I_X P hy``, on the tangent space of the normalisation.

    ``M`` is replaced by a separable ``M0 = lambda cell K + diag(d)`` with a data term ``d(y)`` that does not
    depend on x: the x axis is then diagonalised by its FFT/DCT, the y axis by one dense eigendecomposition of
    ``lambda cell lambda_y K_Y + diag(d)`` (ny x ny), so ``M0^{-1}`` costs two transforms and two
    (nx, ny) x (ny, ny) products.  Two strengths:

    * ``strong=False`` (cheap to build, one ``M0^{-1}`` per application): ``d`` is the x-average of
      ``max(Lambda_X, 0) P hy`` and the preconditioner is ``M0^{-1}`` itself.  Exact when the data term does not
      depend on x, apart from the per-x offsets it damps that the Hessian does not see.
    * ``strong=True``: ``d`` is the lower quartile of ``Lambda_X P hy`` over the x with ``Lambda_X > 0`` (where P
      is tiny, in the tails in y, the data term varies over x by orders of magnitude and the mean is set by the
      few x with the fattest tails, which over-damps the prior there), and the per-x normalisation is treated as
      the constraint it is: the step is taken in the gauge ``sum_y P hy d = 0`` (per-x constants do not move a
      normalised L) as the KKT solution ``d = M0^{-1}(r - V mu)``, ``V = P hy``, with ``mu`` from the nx x nx
      Schur complement ``S = V^T M0^{-1} V``.  With an exactly separable data term this is the exact
      pseudo-inverse of the Hessian on the tangent space (a test checks it).  It costs two ``M0^{-1}`` per
      application and, to build, one nx x (nx ny) product and an nx x nx Cholesky factorisation.  On the
      128 x 128 l6 benchmark it needs about 20 times fewer CG iterations at the late Newton steps than the
      cheap form; on problems where the cheap form converges in a few iterations it only costs time, so
      :func:`iterate` starts cheap and switches for good once a CG solve needs more than 50 iterations.

    Used only to precondition conjugate gradients, never as the step itself.
    """

    def __init__(self, point, strong: bool = True):
        E = point.energy
        grid, pr = E.grid, E.prior
        K = pr.K
        scale = pr.lam * grid.cell
        self.strong = strong
        d = self.data_term(point)
        self.d = d
        Ky = (scale * K.lambda_y) * K.ky.toarray()
        sx = scale * K.lambda_x * axis_symbol(grid.x, l0=K.l0, l2=K.l2, l4=K.l4, l6=K.l6)
        # the scale of the floor: with lambda_y = 0 and no data, Ky and d vanish and only the x part is left
        ref = max(float(np.max(d)), float(np.max(np.abs(np.diag(Ky)))), float(np.max(sx)), 1e-300)
        w, self.Q = np.linalg.eigh(Ky + np.diag(d + 1e-10 * ref))
        self.inv = 1.0 / np.maximum(sx[:, None] + w[None, :], 1e-12 * ref)
        self.x_periodic = grid.x.boundary == "periodic" and grid.x.n > 1
        self.x_neumann = grid.x.boundary == "neumann" and grid.x.n > 1
        if not strong:
            return
        # Schur complement of the normalisation constraint, S[x, k] = V_x . (M0^{-1} e_k V_k)_x.  With the
        # eigenpairs (e_a, C[:, a]) of the x part, S = sum_a,j C[x,a] W[x,j] C[k,a] W[k,j] / (e_a + w_j), W = V Q:
        # one product Z Z^T, in chunks of a so that Z holds at most 2^21 numbers (16 MB)
        self.V = V = point.P * grid.hy
        nx, ny = V.shape
        x_eig = E.__dict__.setdefault("_x_eig_cache", {})  # the x part is fixed for an energy: one eigh
        if scale not in x_eig:
            x_eig.clear()
            x_eig[scale] = np.linalg.eigh((scale * K.lambda_x) * K.kx.toarray())
        ex, C = x_eig[scale]
        W = V @ self.Q
        S = np.zeros((nx, nx))
        chunk = max(1, min(nx, (1 << 21) // (nx * ny)))
        for a0 in range(0, nx, chunk):
            a = slice(a0, min(nx, a0 + chunk))
            Z = np.multiply(C[:, a, None], W[:, None, :])
            Z *= 1.0 / np.sqrt(np.maximum(ex[a, None] + w[None, :], 1e-12 * ref))
            Z = Z.reshape(nx, -1)
            S += Z @ Z.T
        self.S = sla.cho_factor(S + 1e-13 * np.trace(S) / nx * np.eye(nx))

    def data_term(self, point) -> np.ndarray:
        """The x-independent data term d(y) of ``M0`` (see the class docstring)."""
        lam = point.lagrange_multiplier
        if not self.strong:
            return np.mean(np.maximum(lam, 0.0)[:, None] * point.P, axis=0) * point.energy.grid.hy
        rows = lam > 0
        if not np.any(rows):
            return np.zeros(point.P.shape[1])
        return np.quantile(lam[rows, None] * point.P[rows], 0.25, axis=0) * point.energy.grid.hy

    def still_good(self, point, rel: float = 0.25) -> bool:
        """Whether this preconditioner may be reused at ``point`` (its data term moved by less than ``rel``)."""
        d = self.data_term(point)
        return float(np.max(np.abs(d - self.d))) <= rel * float(np.max(np.abs(self.d)) + 1e-300)

    def solve_separable(self, r: np.ndarray) -> np.ndarray:
        """``M0^{-1} r`` (the last two axes of ``r`` are x and y; leading axes are a batch)."""
        if self.x_periodic:
            c = sfft.fft(r, axis=-2)
        elif self.x_neumann:
            c = sfft.dct(r, type=2, axis=-2, norm="ortho")
        else:
            c = r
        c = ((c @ self.Q) * self.inv) @ self.Q.T
        if self.x_periodic:
            return sfft.ifft(c, axis=-2).real
        if self.x_neumann:
            return sfft.idct(c, type=2, axis=-2, norm="ortho")
        return np.real(c)

    def __call__(self, r: np.ndarray) -> np.ndarray:
        z = self.solve_separable(r)
        if not self.strong:
            return z
        mu = sla.cho_solve(self.S, np.sum(self.V * z, axis=1))
        return self.solve_separable(r - self.V * mu[:, None])


def newton_cg_direction(point, precond, rtol: float, maxiter: int, curvature: list | None = None):
    """Solve ``H d = -G`` by preconditioned CG.

    If CG meets a direction of non-positive curvature (the Hessian is not positive definite there) and the
    point offers a convexified Hessian (``hessp(v, convexified=True)``, Gauss-Newton), the system is solved again
    with it: a descent step of full length instead of a truncated one, labelled ``"newton-convexified"``; the
    direction of negative curvature CG found is appended to ``curvature`` (when a list is given) so that the
    caller can follow it too (a saddle is left along it, which the convexified step alone does only slowly).
    Otherwise CG is truncated there (Steihaug); if that happens on the very first direction the preconditioned
    gradient step is returned, labelled ``"newton-fallback"``.  Returns ``(d, label, cg_iterations)``.
    """
    d, label, k, p = _pcg(point.gradient, point.hessp, precond, rtol, maxiter)
    if label == "negative-curvature":
        if curvature is not None and p is not None:
            curvature.append(p)
        if hasattr(point, "lagrange_multiplier"):  # E_L offers a convexified (Gauss-Newton) Hessian
            def hessp(v):
                return point.hessp(v, convexified=True)
            d2, label2, k2, _ = _pcg(point.gradient, hessp, precond, rtol, maxiter)
            if label2 != "negative-curvature":
                return d2, "newton-convexified", k + k2
        if k == 0:
            return d, "newton-fallback", k
        return d, "newton", k
    return d, label, k


def _pcg(g, hessp, precond, rtol, maxiter):
    """Preconditioned CG for ``H x = -g``; stops at non-positive curvature with label "negative-curvature", the
    iterate so far (the preconditioned gradient if it is the first direction) and that direction (strictly
    negative curvature only, else None).  Returns ``(x, label, iterations, direction)``."""
    r = -g
    z = precond(r)
    p = z.copy()
    rz = float(np.vdot(r, z))
    x = np.zeros_like(g)
    gnorm = float(np.linalg.norm(g))
    for k in range(maxiter):
        Hp = hessp(p)
        pHp = float(np.vdot(p, Hp))
        if not pHp > 1e-14 * float(np.vdot(p, p)) * max(1.0, abs(rz)):
            neg = p if pHp < 0 else None
            return (z if k == 0 else x), "negative-curvature", k, neg
        alpha = rz / pHp
        x += alpha * p
        r -= alpha * Hp
        if np.linalg.norm(r) <= rtol * gnorm:
            return x, "newton", k + 1, None
        z = precond(r)
        rz_new = float(np.vdot(r, z))
        p = z + (rz_new / rz) * p
        rz = rz_new
    return x, "newton", maxiter, None


def _curvature_step(energy, phi, point, p, scale):
    """Follow a direction of negative curvature ``p`` from ``point``: sign chosen downhill, length first ``scale``
    (the size of the step just taken), doubled while the energy keeps falling (up to 8 times), halved when it
    does not fall (up to 8 times).  Returns ``(phi, point)``, unchanged when no decrease is found."""
    G = point.gradient
    p = p - np.mean(p, axis=1, keepdims=True)  # per-x constants do not move a normalised L
    size = float(np.max(np.abs(p)))
    if not size > 0:
        return phi, point
    p = p * (scale / size)
    if np.vdot(G, p) > 0:
        p = -p
    best_phi, best_pt, E_best = phi, point, point.value
    eta = 1.0
    for _ in range(8):
        q = energy.normalise(phi + eta * p)
        pt = energy.at(q)
        if pt.value < E_best:
            best_phi, best_pt, E_best = q, pt, pt.value
            eta *= 2.0
        elif best_pt is point:
            eta *= 0.5
        else:
            break
    return best_phi, best_pt


def _massive_solve(energy, r, mass2):
    if hasattr(energy, "massive_solve"):
        return energy.massive_solve(r, mass2)
    return energy.prior.K.solve(r, 1.0, mass2)


# ------------------------------------------------------------------------------------- active set, field P
def _free_set_direction(point, method: str, mass2: float):
    """Direction for E_P on the face F = {P > 0} less the epsilon-active nodes (held fixed): solve the KKT system
    ``[A_FF B; B^T 0] [d; mu] = [-G_F; 0]``
    with ``B`` the per-x normalisation constraint, so d keeps ``sum_j P hy = 1`` and leaves the nodes with P = 0
    alone (Sect. 7.2.5, inverting in subspaces).  Releasing nodes from P = 0 is the job of the projected-gradient
    step in :func:`iterate`."""
    E = point.energy
    grid = E.grid
    nx, ny = grid.shape
    G = point.gradient
    if method == "massive" and grid.size <= 600:
        d = _massive_face_direction(point, mass2)
        if d is not None and np.vdot(d, G) < 0:
            return d
    free = ~point.eps_active
    fidx = np.flatnonzero(free.ravel())
    rows_x = fidx // ny
    if method == "gradient":
        d = np.zeros(grid.shape)
        Gf = np.where(free, G, 0.0)
        cnt = free.sum(axis=1)
        mean = Gf.sum(axis=1) / np.maximum(cnt, 1)
        d[free] = -(G - mean[:, None])[free]
        return d
    rhs = np.concatenate([-G.ravel()[fidx], np.zeros(nx)])
    key = (method, mass2, free.tobytes())
    cache = E.__dict__.setdefault("_kkt_cache", {})
    solve = cache.get(key) if method == "massive" else None  # A = K + m^2 I is constant: reuse per face
    if solve is None:
        K = E.prior.K.matrix
        data = None if method == "massive" else (E.N / np.where(point.P > 0, point.P, 1.0) ** 2).ravel()
        scale = mass2 if method == "massive" else E.prior.lam * grid.cell  # A = K + m^2 I, or lam cell K + N/P^2
        nf = fidx.size
        try:
            if nf + nx <= 600:  # small grids: a dense KKT matrix and LU beat sparse set-up costs
                Kd = E.__dict__.get("_dense_K")
                if Kd is None:
                    Kd = E.__dict__["_dense_K"] = K.toarray()
                kkt = np.zeros((nf + nx, nf + nx))
                if method == "massive":
                    kkt[:nf, :nf] = Kd[np.ix_(fidx, fidx)]
                    kkt[np.arange(nf), np.arange(nf)] += mass2
                else:
                    kkt[:nf, :nf] = scale * Kd[np.ix_(fidx, fidx)]
                    kkt[np.arange(nf), np.arange(nf)] += data[fidx]
                kkt[np.arange(nf), nf + rows_x] = grid.hy
                kkt[nf + rows_x, np.arange(nf)] = grid.hy
                with warnings.catch_warnings():  # a singular KKT matrix is handled below (non-finite solution)
                    warnings.simplefilter("ignore", sla.LinAlgWarning)
                    lu = sla.lu_factor(kkt, check_finite=False)
                solve = lambda b: sla.lu_solve(lu, b, check_finite=False)  # noqa: E731
            else:
                if method == "massive":
                    A = K + mass2 * sp.identity(grid.size, format="csr")
                else:
                    A = scale * K + sp.diags(data)
                Aff = A[fidx][:, fidx]
                B = sp.csr_matrix((np.full(nf, grid.hy), (np.arange(nf), rows_x)), shape=(nf, nx))
                kkt = sp.bmat([[Aff, B], [B.T, None]], format="csc")
                solve = spl.splu(kkt, permc_spec="MMD_AT_PLUS_A").solve
        except (RuntimeError, ValueError):
            return _free_set_direction(point, "gradient", mass2)
        if method == "massive":
            if len(cache) > 8:
                cache.clear()
            cache[key] = solve
    sol = solve(rhs)
    if not np.all(np.isfinite(sol)):  # singular KKT matrix: fall back to the gradient on the face
        return _free_set_direction(point, "gradient", mass2)
    d = np.zeros(grid.size)
    d[fidx] = sol[:fidx.size]
    d = d.reshape(grid.shape)
    if not np.vdot(d, G) < 0:
        return _free_set_direction(point, "gradient", mass2)
    return d


def _massive_face_direction(point, mass2: float):
    """The massive-relaxation face step of :func:`_free_set_direction` on small grids, through the Green's function.

    The KKT system on the face is the full-space problem ``min 1/2 d^T A d + G^T d`` with ``C^T d = 0``, where the
    columns of ``C`` are the unit vectors of the epsilon-active nodes and the per-x normalisation ``B``.  So
    ``d = -A^{-1} (G + C mu)`` with ``(C^T A^{-1} C) mu = -C^T A^{-1} G``.  ``A^{-1} = (K + m^2 I)^{-1}`` is formed
    once (dense, grids up to 600 nodes); a change of face only refactors the small ``(k + nx)``-square matrix, and a
    step costs two matrix-vector products.  Returns None when that matrix is singular.
    """
    E = point.energy
    grid = E.grid
    nx, ny = grid.shape
    hy = grid.hy
    cache = E.__dict__.setdefault("_green_cache", {})
    green = cache.get(mass2)
    if green is None:
        Ainv = E.prior.K.inverse_matrix(1.0, mass2)
        AinvB = Ainv.reshape(grid.size, nx, ny).sum(axis=2) * hy  # A^{-1} B, B = per-x sums times hy
        if len(cache) > 4:
            cache.clear()
        green = cache[mass2] = (Ainv, AinvB, {})
    Ainv, AinvB, faces = green
    active = point.eps_active.ravel()
    key = active.tobytes()
    face = faces.get(key)
    if face is None:
        a = np.flatnonzero(active)
        AinvC = np.concatenate([Ainv[:, a], AinvB], axis=1)
        M = np.concatenate([AinvC[a], AinvC.reshape(nx, ny, -1).sum(axis=1) * hy], axis=0)  # C^T A^{-1} C
        try:
            Mi = np.linalg.inv(M)
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(Mi)):
            return None
        if len(faces) > 16:
            faces.clear()
        face = faces[key] = (a, AinvC, Mi)
    a, AinvC, Mi = face
    w = Ainv @ point.gradient.ravel()
    mu = Mi @ np.concatenate([w[a], w.reshape(nx, ny).sum(axis=1) * hy])
    d = AinvC @ mu - w
    d[a] = 0.0
    return d.reshape(grid.shape)


def _barzilai_borwein(energy, phi, G, prev, method, mass2):
    """The Barzilai-Borwein step length ``(s, A s) / (s, y)`` of the learning matrix A (``s`` the last change of
    the field, ``y`` that of the gradient), or None when the curvature ``(s, y)`` is not positive.

    For the gradient and massive-relaxation iterations of E_P the face step tries this length first and takes it
    when it lowers the energy (:func:`_probability_step`): steepest descent in the metric A with a minimising
    step zigzags (on Fig 17 the accepted steps alternated 1.08, 4.03, 1.08, ... for 35 iterations), and the
    spectral step breaks that.  Fig 15: 30 -> 19 iterations, Fig 17: 72 -> 56, to the same energy.  The
    direction is unchanged and the energy still never increases.  Field L keeps the minimising line search: the
    iteration-by-iteration curves of Figs 21-28 (overfitting, plateaus) are the paper's.
    """
    if prev is None:
        return None
    s = phi - prev[0]
    y = G - prev[1]
    sy = float(np.vdot(s, y))
    if not sy > 0:
        return None
    As = s if method == "gradient" else energy.prior.K.apply(s) + mass2 * s
    eta = float(np.vdot(s, As)) / sy
    return eta if np.isfinite(eta) and eta > 0 else None


def _probability_step(energy, phi, point, method, mass2, eta_prev, eta_bb=None):
    """One iteration of the active-set method for E_P: a step of the learning matrix on the face P > 0, projected
    back onto ``{P >= 0, sum P hy = 1}``; a projected-gradient arc ``Proj(P - eta G)`` when nodes at P = 0 should be
    released (their reduced gradient is negative) or the face step cannot decrease the energy.  ``eta_bb``, when
    given, is the first step length the face step tries, taken as it is if it lowers the energy."""
    G = point.gradient
    E_start = point.value
    zero = phi <= 0
    release = float(np.max(-G, where=zero, initial=0.0))
    face_res = float(np.max(np.abs(G), where=~zero, initial=0.0)) if release > 0 else 0.0
    hy = energy.grid.hy
    out = None
    label = method
    if release <= face_res:
        d = _free_set_direction(point, method, mass2)
        slope = float(np.vdot(G, d))
        if slope < 0:
            exact = method != "newton"
            # The path starts at phi with the epsilon-active nodes put onto the bound, projected once so that it
            # stays on the simplex without a sort per trial until a node hits 0; acceptance is judged against the
            # energy at phi, so the energy never increases.  Few halvings: when putting those nodes onto the bound
            # itself raises the energy no step length helps, and the projected-gradient arc below takes over.
            active = point.eps_active
            if np.any(phi[active] > 0):
                base, Kbase = project_simplex(np.where(active, 0.0, phi), hy), None
            else:  # nothing to move onto the bound: the path starts at phi, whose K phi may be known
                base, Kbase = phi, point.__dict__.get("_Kphi")
            bb = exact and eta_bb is not None
            out = line_search(energy, phi, d, E_start, slope, eta0=(eta_bb if bb else eta_prev) if exact else 1.0,
                              exact=exact, path=lambda eta: project_simplex(base + eta * d, hy), max_halvings=8,
                              line=energy.line_energy(base, d, Kbase), accept_first=bb)
            if out[2] is None:
                out = None
    if out is None:
        label = "projected-gradient"
        g = point.raw_gradient
        out = line_search(energy, phi, -g, E_start, -float(np.vdot(G, G)), eta0=eta_prev, exact=True,
                          path=lambda eta: project_simplex(phi - eta * g, hy))
    return out, label


# --------------------------------------------------------------------------------------------- the iteration
def iterate(energy, phi0, method: str = "newton", mass2: float = 0.01, min_iter: int = 4, max_iter: int = 50,
            tol: float = 1e-8, cg_maxiter: int | None = None):
    """Run a learning algorithm; yield an :class:`IterationRecord` for the start and after every iteration.

    Stops after ``max_iter`` iterations, or once ``min_iter`` are done and the field changes by less than ``tol``
    (max-abs, the rule of Fig. 22) while the stationarity residual is below ``sqrt(tol)`` (a tiny step alone is
    not convergence), or when the energy cannot decrease any more at machine precision.

    Newton steps solve the Newton system inexactly, to a relative CG residual of ``sqrt(|G|/|G0|)`` (at most 0.1;
    the forcing term).  For field L it is 0.1 until the gradient has fallen ten orders of magnitude below its
    start, and ``sqrt(|G|/|G0|)`` only then, for a superlinear finish.  Far from the minimum the quadratic model
    is poor (where L falls to -100 in the tails of P, each Newton step moves it by tens), so an exact solve buys
    little.  Measured on the benchmark problems (one BLAS thread, CPU time, same final energies): 128 x 128 l6,
    the ``sqrt`` rule throughout took 6,019 CG iterations and 5.4 s, the 0.1 rule 1,795 and 1.6 s; 128 x 128
    l2 = 0.05, 493 and 0.51 s against 448 and 0.24 s; 64 x 64 l6, 782 and 0.24 s against 549 and 0.13 s.
    The preconditioner starts in its cheap form and switches to the strong one (:class:`SeparablePreconditioner`)
    once a CG solve needs more than 50 iterations.
    ``cg_maxiter`` caps the CG iterations of one Newton step; by default it grows with the grid,
    ``min(1000, max(200, size // 16))``, as the conditioning of the Newton system does.
    """
    if method not in METHODS:
        raise ValueError(f"unknown solver method {method!r}; use one of {METHODS}")
    if method == "massive" and not (np.isfinite(mass2) and mass2 > 0):
        raise ValueError(f"massive relaxation needs mass2 > 0 (A = K + m^2 I is singular otherwise), got {mass2!r}")
    t0 = time.perf_counter()
    if cg_maxiter is None:
        cg_maxiter = int(min(1000, max(200, np.size(phi0) // 16)))
    phi = energy.normalise(np.asarray(phi0, dtype=float))
    point = energy.at(phi)
    if not np.isfinite(point.value):
        raise SolverError("the energy is not finite at the initial field (for a prior on P the density must be "
                          "positive at every data point); choose another initialisation")
    yield IterationRecord(0, point.value, 0.0, point.residual, point.mixing, phi, "start",
                          elapsed_s=time.perf_counter() - t0)
    eta_prev = 1.0
    g0 = max(float(np.linalg.norm(point.gradient)), 1e-300)
    precond, strong = None, False
    prev = None  # (phi, G) of the previous iteration, for the Barzilai-Borwein step of E_P
    for it in range(1, max_iter + 1):
        check_deadline()  # a wall-clock budget of the caller (bftcore.limits.deadline), if any
        G = point.gradient
        label = method
        curvature = []
        if energy.field == "P":
            eta_bb = _barzilai_borwein(energy, phi, G, prev, method, mass2) if method != "newton" else None
            (eta, new_phi, new_point), label = _probability_step(energy, phi, point, method, mass2, eta_prev, eta_bb)
            exact = label != "newton"
        elif method == "gradient":
            d = -G
        elif method == "massive":
            d = -_massive_solve(energy, G, mass2)
        else:
            gn = float(np.linalg.norm(G))
            rtol = max(1e-12, np.sqrt(gn / g0))
            if energy.field == "L" and gn > 1e-10 * g0:
                rtol = 0.1
            if hasattr(energy, "newton_preconditioner"):
                precond = energy.newton_preconditioner(point)
            elif energy.field == "L":
                if precond is None or not precond.still_good(point):
                    precond = SeparablePreconditioner(point, strong)
            else:
                precond = _identity_precond
            d, label, cg_its = newton_cg_direction(point, precond, rtol, cg_maxiter, curvature)
            if energy.field == "L" and not strong and cg_its > 50:  # worth the stronger form from now on
                strong, precond = True, None
        if energy.field != "P":
            slope = float(np.vdot(G, d))
            exact = not label.startswith("newton") or label == "newton-fallback"
            eta0 = 1.0 if not exact else eta_prev
            if not slope < 0:
                eta, new_phi, new_point = 0.0, phi, None
            else:
                eta, new_phi, new_point = line_search(energy, phi, d, point.value, slope, eta0=eta0, exact=exact)
        if new_point is None:  # no decrease possible: converged to machine precision (or stalled)
            rec = IterationRecord(it, point.value, 0.0, point.residual, point.mixing, phi, label, 0.0, True,
                                  time.perf_counter() - t0)
            yield rec
            return
        if curvature and energy.field == "L":  # leave a saddle along the negative curvature CG met
            moved_phi, moved_point = _curvature_step(energy, new_phi, new_point, curvature[0],
                                                     float(np.max(np.abs(new_phi - phi))))
            if moved_point is not new_point:
                new_phi, new_point, label = moved_phi, moved_point, label + "+curvature"
        if exact:
            eta_prev = eta
        prev = (phi, G)
        change = float(np.max(np.abs(new_phi - phi)))
        dE = point.value - new_point.value
        phi, point = new_phi, new_point
        total = float(np.sum(phi))  # NaN or +inf anywhere shows in the sum (-inf alone is L where P = 0)
        if not np.isfinite(point.value) or np.isnan(total) or total == np.inf:
            raise SolverError(f"iteration {it} produced a non-finite energy or field")
        small = change < tol or dE <= 1e-15 * max(1.0, abs(point.value))
        converged = it >= min_iter and small and point.residual <= max(np.sqrt(tol), 1e-12)
        yield IterationRecord(it, point.value, eta, point.residual, point.mixing, phi, label, change, converged,
                              time.perf_counter() - t0)
        if converged:
            return
