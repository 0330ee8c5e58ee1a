"""The active-set method for E_P (field P, eqs. (163)-(170), Sect. 7.2.5): the whole of it, in one place.

The feasible set of E_P is ``{P >= 0, sum_j P hy = 1}`` per x.  One iteration (:class:`ActiveSetStep`) takes a step
of the learning matrix on the face ``P > 0`` and projects it back onto that set:

* :func:`project_simplex`: the Euclidean projection onto the feasible set (also the normalisation of
  :class:`bftcore.models.density.ProbabilityEnergy`, which imports it from here);
* :func:`epsilon_active`: Bertsekas' epsilon-active set, the nodes held at P = 0 during a face step;
* :func:`free_set_direction`, :func:`massive_face_direction`: the direction of the learning matrix restricted to
  the face (the KKT system with the normalisation, Sect. 7.2.5 "inverting in subspaces"): A = I (621),
  A = K + m^2 I (632, through the Green's function on small grids) or A = the Hessian (181) of E_P;
* :class:`LineEnergy`: the energy along a face step in closed form, so a trial step length costs a few operations
  on the data nodes;
* :func:`barzilai_borwein`: the first step length the gradient and massive face steps try;
* :class:`ActiveSetStep`: the step itself, with the projected-gradient arc that releases nodes from P = 0.  It is
  created per run by :func:`bftcore.foundations.solvers.iterate` (``ProbabilityEnergy.minimiser_step`` names it) and
  owns the factorisations it reuses (KKT matrices per face, the dense K, the Green's function per mass).

This module knows no solver: the step lengths follow the line search that :mod:`bftcore.foundations.solvers` hands to
the step, and the stopping rule is the solver's.
"""
from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ..foundations.linalg import saddle_lu
from ..foundations.mixing import mixture_energy

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


def epsilon_active(point) -> np.ndarray:
    """Bertsekas' epsilon-active set of a :class:`bftcore.models.density.ProbPoint`: nodes with P <= eps whose reduced
    gradient pushes outwards, with eps = min(1e-3 max P, |P - Proj(P - G)|), so nodes about to hit zero are fixed
    there instead of zigzagging."""
    eps = min(1e-3 * float(np.max(point.phi)), point.residual)
    return (point.phi <= eps) & (point.gradient > 0)


# ------------------------------------------------------------------------------------------ face directions
class FaceCaches:
    """The factorisations the face directions reuse within one run: the KKT solver of massive relaxation per face
    (A = K + m^2 I is constant), the dense K of small grids, and the Green's function ``(K + m^2 I)^{-1}`` per
    mass with the Schur complements of its faces."""

    def __init__(self) -> None:
        self.kkt: dict = {}
        self.dense_K: np.ndarray | None = None
        self.green: dict = {}


def free_set_direction(point, active: np.ndarray, method: str, mass2: float, caches: FaceCaches):
    """Direction for E_P on the face F = {P > 0} less the epsilon-active nodes ``active`` (held fixed): solve the
    KKT system ``[A_FF B; B^T 0] [d; mu] = [-G_F; 0]``
    with ``B`` the per-x normalisation constraint, so d keeps ``sum_j P hy = 1`` and leaves the nodes with P = 0
    alone (Sect. 7.2.5, inverting in subspaces).  Releasing nodes from P = 0 is the job of the projected-gradient
    arc of :class:`ActiveSetStep`."""
    E = point.energy
    grid = E.grid
    nx, ny = grid.shape
    G = point.gradient
    if method == "massive" and grid.size <= 600:
        d = massive_face_direction(point, active, mass2, caches)
        if d is not None and np.vdot(d, G) < 0:
            return d
    free = ~active
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
    cache = caches.kkt
    solve = cache.get(key) if method == "massive" else None  # A = K + m^2 I is constant: reuse per face
    if solve is None:
        K = E.prior.K.matrix
        data = None if method == "massive" else (E.N / np.where(point.P > 0, point.P, 1.0) ** 2).ravel()
        scale = mass2 if method == "massive" else E.prior.lam * grid.cell  # A = K + m^2 I, or lam cell K + N/P^2
        nf = fidx.size
        try:
            if nf + nx <= 600:  # small grids: a dense KKT matrix and LU beat sparse set-up costs
                if caches.dense_K is None:
                    caches.dense_K = K.toarray()
                Kd = caches.dense_K
                kkt = np.zeros((nf + nx, nf + nx))
                if method == "massive":
                    kkt[:nf, :nf] = Kd[np.ix_(fidx, fidx)]
                    kkt[np.arange(nf), np.arange(nf)] += mass2
                else:
                    assert data is not None
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
                solve = saddle_lu(kkt).solve
        except (RuntimeError, ValueError):
            return free_set_direction(point, active, "gradient", mass2, caches)
        if method == "massive":
            if len(cache) > 8:
                cache.clear()
            cache[key] = solve
    sol = solve(rhs)
    if not np.all(np.isfinite(sol)):  # singular KKT matrix: fall back to the gradient on the face
        return free_set_direction(point, active, "gradient", mass2, caches)
    d = np.zeros(grid.size)
    d[fidx] = sol[:fidx.size]
    d = d.reshape(grid.shape)
    if not np.vdot(d, G) < 0:
        return free_set_direction(point, active, "gradient", mass2, caches)
    return d


def massive_face_direction(point, active: np.ndarray, mass2: float, caches: FaceCaches):
    """The massive-relaxation face step of :func:`free_set_direction` on small grids, through the Green's function.

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
    cache = caches.green
    green = cache.get(mass2)
    if green is None:
        Ainv = E.prior.K.inverse_matrix(1.0, mass2)
        AinvB = Ainv.reshape(grid.size, nx, ny).sum(axis=2) * hy  # A^{-1} B, B = per-x sums times hy
        if len(cache) > 4:
            cache.clear()
        new_faces: dict[bytes, tuple] = {}
        green = cache[mass2] = (Ainv, AinvB, new_faces)
    Ainv, AinvB, faces = green
    active = active.ravel()
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


# ------------------------------------------------------------------------------------- the energy on a line
class LineEnergy:
    """``eta -> E_P(Proj(base + eta d))`` along a face step of the active-set method for E_P, for a feasible
    ``base`` and a ``d`` that keeps the normalisation, without building a point per trial.

    Up to ``eta_max`` (the first node reaching zero) the path is the straight line: the prior energies (715) are
    quadratics in eta, ``E_0j(eta) = E_0j + eta (d, K(base - t_j)) + eta^2/2 (d, K d)``, and the data term lives
    on the data nodes only, so after one application of K (two without ``Kbase``) a trial costs a few
    operations on the data nodes.  Beyond it the path is bent by the projection: a trial projects, applies K once
    and evaluates the energy from that, which is what a full point would do, minus the bookkeeping.
    :meth:`accept` returns the accepted point with ``K P`` (and, beyond ``eta_max``, the prior terms) handed to
    its constructor.
    """

    def __init__(self, energy, base: np.ndarray, d: np.ndarray, Kbase=None):
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
        self._bent: dict = {}  # eta -> (P, K P, prior terms) of trials beyond eta_max

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

    def accept(self, eta: float, path):
        """The point at ``eta`` on the path (``path(eta)`` is the projection of ``base + eta d``) with ``K P``
        taken from the line, or from the trial that evaluated it beyond ``eta_max``.  Returns ``(P, point)``."""
        bent = self._bent.get(eta)
        if bent is not None:
            P, KP, prior = bent
            return P, self.energy.at(P, Kphi=KP, prior_terms=prior)
        P = path(eta)
        return P, self.point(eta, P)

    def point(self, eta: float, P: np.ndarray):
        """The point ``P`` (= the projection of ``base + eta d``, equal to it up to rounding for
        ``eta <= eta_max``) with ``K P`` taken from the line."""
        return self.energy.at(P, Kphi=self.Kb + eta * self.Kd)


# -------------------------------------------------------------------------------------------------- the step
def barzilai_borwein(energy, phi, G, prev, method, mass2):
    """The Barzilai-Borwein step length ``(s, A s) / (s, y)`` of the learning matrix A (``s`` the last change of
    the field, ``y`` that of the gradient), or None when the curvature ``(s, y)`` is not positive.

    For the gradient and massive-relaxation iterations of E_P the face step tries this length first and takes it
    when it lowers the energy (:class:`ActiveSetStep`): steepest descent in the metric A with a minimising
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


class ActiveSetStep:
    """One iteration of the active-set method for E_P, as the step of :func:`bftcore.foundations.solvers.iterate`.

    A step of the learning matrix (``method``: "gradient", "massive" or "newton") on the face P > 0 less the
    epsilon-active nodes, along the path ``Proj(base + eta d)`` (with ``base`` the field with those nodes put onto
    the bound), judged by the closed-form :class:`LineEnergy`; a projected-gradient arc ``Proj(P - eta G)`` when
    nodes at P = 0 should be released (their reduced gradient is negative) or the face step cannot decrease the
    energy.  Gradient and massive face steps try the Barzilai-Borwein length first.  The step keeps, for one run,
    the last accepted minimising step length, the previous field and gradient, and the face factorisations
    (:class:`FaceCaches`).
    """

    def __init__(self, energy, method: str, mass2: float, cg_maxiter: int, line_search):
        self.energy, self.method, self.mass2 = energy, method, mass2
        self.line_search = line_search
        self.caches = FaceCaches()
        self.eta_prev = 1.0
        self.prev: tuple | None = None  # (phi, G) of the previous iteration, for the Barzilai-Borwein step

    def take(self, phi: np.ndarray, point):
        """Returns ``(eta, new_phi, new_point, label)``; ``new_point`` is None when no decrease is possible."""
        energy, method, mass2 = self.energy, self.method, self.mass2
        G = point.gradient
        eta_bb = barzilai_borwein(energy, phi, G, self.prev, method, mass2) if method != "newton" else None
        (eta, new_phi, new_point), label = self._step(phi, point, eta_bb)
        if new_point is not None:
            if label != "newton":
                self.eta_prev = eta
            self.prev = (phi, G)
        return eta, new_phi, new_point, label

    def _step(self, phi, point, eta_bb):
        energy, method, mass2, eta_prev = self.energy, self.method, self.mass2, self.eta_prev
        line_search = self.line_search
        G = point.gradient
        E_start = point.value
        zero = phi <= 0
        release = float(np.max(-G, where=zero, initial=0.0))
        face_res = float(np.max(np.abs(G), where=~zero, initial=0.0)) if release > 0 else 0.0
        hy = energy.grid.hy
        out = None
        label = method
        if release <= face_res:
            active = epsilon_active(point)
            d = free_set_direction(point, active, method, mass2, self.caches)
            slope = float(np.vdot(G, d))
            if slope < 0:
                exact = method != "newton"
                # The path starts at phi with the epsilon-active nodes put onto the bound, projected once so that
                # it stays on the simplex without a sort per trial until a node hits 0; acceptance is judged against
                # the energy at phi, so the energy never increases.  Few halvings: when putting those nodes onto the
                # bound itself raises the energy no step length helps, and the projected-gradient arc takes over.
                if np.any(phi[active] > 0):
                    base, Kbase = project_simplex(np.where(active, 0.0, phi), hy), None
                else:  # nothing to move onto the bound: the path starts at phi, whose K phi may be known
                    base, Kbase = phi, point.Kphi
                bb = exact and eta_bb is not None
                out = line_search(energy, phi, d, E_start, slope,
                                  eta0=(eta_bb if bb else eta_prev) if exact else 1.0, exact=exact,
                                  path=lambda eta: project_simplex(base + eta * d, hy), max_halvings=8,
                                  line=LineEnergy(energy, base, d, Kbase), accept_first=bb)
                if out[2] is None:
                    out = None
        if out is None:
            label = "projected-gradient"
            g = point.raw_gradient
            out = line_search(energy, phi, -g, E_start, -float(np.vdot(G, G)), eta0=eta_prev, exact=True,
                              path=lambda eta: project_simplex(phi - eta * g, hy))
        return out, label
