"""Image completion with a mixture of two deformable templates, [001] Sect. 5, eqs. (18)-(25), (47), Fig 4.

Regression h(x) on a pixel grid, observed on about 1000 pixels with Gaussian noise sigma.  The prior is a mixture
of two Gaussian components with one covariance ``K_0 = lam * L``, L the 3 x 3 negative Laplacian filter (the
5-point stencil), and means t_j(theta_j), two template images deformed by theta_j.

* Energy (18)-(20) with equal weights: ``E = -(1/beta) ln sum_j exp(-beta [E_T(h) + E_0j(h, theta_j)])``,
  ``E_T = (1/2)(h - t_T, K_T (h - t_T))``, ``K_T = diag(n_x) / sigma^2`` (one datum per observed pixel, t_T its
  value), ``E_0j = (1/2)(h - t_j(theta_j), K_0 (h - t_j(theta_j)))``.  K_0 does not depend on theta, so the
  normalisations c_j are equal and drop out (no determinants).
* Stationarity for h, (21)/(25): ``(K_T + K_0) h = K_T t_T + K_0 sum_j a_j t_j(theta_j)``, a_j the softmax of
  ``-beta E_0j`` (23) (E_T is common to both components).  Two solvers: the exact one, the default, a sparse
  direct solve (:meth:`ImageCompletion.solve_h_exact`; K_T + K_0 does not depend on a or theta, so it is factorised
  once per data set); in :meth:`ImageCompletion.complete` it solves h and a together at fixed theta through the
  reduced fixed point (42)-(43) of :class:`~bftcore.foundations.mixing.ReducedMixture` (h = sum_j a_j t̄_j, one
  unknown for m = 2), which removes the critical slowing down of alternating h and a near beta_c.  And the paper's
  relaxation (47) (:meth:`ImageCompletion.solve_h_relaxation`) ``h <- h + eta A^-1 [K_T (t_T - h) + K_0 (sum_j
  a_j t_j - h)]`` with A^-1 the 5 x 5 binomial filter and eta = 0.05, kept for fidelity; it is slow (2000 steps
  for a tenfold reduction of the error at 90 x 120: the low modes of K_0 between the data), so ``complete`` with
  ``solver="relaxation"`` alternates RELAXATION_STEPS of its steps with a and theta, as the paper does.
* Stationarity for theta, (22)/(24): with h fixed, theta minimises ``-(1/beta) ln sum_j exp(-beta E_0j(theta_j))``
  whose gradient is ``sum_j a_j dE_0j/dtheta_j``, ``dE_0j/dtheta_j = -(dt_j/dtheta_j, K_0 (h - t_j))``
  (:meth:`ImageCompletion.theta_objective`).  With per-template theta each theta_j therefore minimises its own
  E_0j: Levenberg-Marquardt on 4 parameters (:meth:`ImageCompletion.optimise_theta`, checked against
  ``scipy.optimize.least_squares``).  :meth:`ImageCompletion.complete` alternates theta and h, as the paper does,
  until a and theta stop moving.
* The beta sweep (``reproduce image_completion``): up from the ghost, a_1 rises smoothly through beta_c (the data
  favour the smile: the mean-field equation is tilted); down from the frowning face, the metastable frowning
  branch survives to between 3.5 and 2.5 beta_c, then jumps: the hysteresis of [001] Fig 3.

Decisions (the paper leaves them open):

* theta is per template: theta_j = (shift_x, shift_y, scale, angle_deg) for each j.  The deformed template is
  ``t_j(theta)(p) = T_j(q)`` with ``p = c + s R(angle) (q - c) + shift``: template point q moves to pixel p
  (scaled by s and rotated by angle about the image centre c, then shifted).  x is the column, y the row (down),
  R(angle) = [[cos, -sin], [sin, cos]] acting on (x, y), so a positive angle turns clockwise on the screen.
* Interpolation is bilinear (order 1), with coordinates clipped to the image (the border pixel continues outward,
  scipy's ``mode="nearest"``); :func:`warp` computes value and exact gradient of that interpolant in one pass and
  is tested against ``scipy.ndimage.map_coordinates(order=1, mode="nearest")``.
* Borders are free (Neumann): L is the graph Laplacian of the 4-neighbour pixel grid, ``D^T D`` with forward
  differences, no differences across the border.  It has the constants as null space; K_T makes K_T + K_0
  positive definite as soon as one pixel is observed.
* Units: h, t_T and the templates are intensities (the faces are in [0, 1]); sigma is in intensity units; lam is
  in 1/intensity^2 (default ``1/sigma^2``, so that a unit Laplacian step costs as much as a one-sigma miss).
  Scaling all intensities and sigma by c and lam by 1/c^2 scales h by c and leaves a, theta and beta_c alone.
* The relaxation (47) measures its gradient in units of the data precision (multiplies it by sigma^2), so that its
  K_T is the paper's diag(n_x) and eta = 0.05 is a dimensionless step.
* beta_c, the unit of the inverse temperature: the pitchfork of the two-component mean-field equation (45)-(46),
  ``beta_c = 4 / b`` with ``b = (t̄_1 - t̄_2, (K_T + K_0)(t̄_1 - t̄_2))`` from
  :meth:`bftcore.foundations.mixing.ReducedMixture.tanh_form`, t̄_j the component solutions
  ``(K_T + K_0)^-1 (K_T t_T + K_0 t_j)`` of the *undeformed* templates: a number fixed by the data before any fit.

Synthetic faces (:func:`face`) replace the paper's images: grey faces in [0, 1] with smooth (logistic) edges, so
that warps are differentiable; the original is the smiling face deformed by :data:`THETA_TRUE`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import scipy.sparse as sp
from scipy.ndimage import convolve
from scipy.sparse.linalg import splu

from ..foundations.mixing import ReducedMixture, mixing_coefficients, mixture_energy

__all__ = ["THETA_KEYS", "THETA_TRUE", "THETA_IDENTITY", "TEST_SHAPE", "DEMO_SHAPE", "face", "warp",
           "negative_laplacian", "grid_differences", "binomial_filter", "ImageData", "observe", "synthetic_problem",
           "ImageCompletion", "CompletionState", "theta_dict"]

THETA_KEYS = ("shift_x", "shift_y", "scale", "angle_deg")
#: The original: the smiling face shifted by (+4, -3) px, scaled by 1.05, rotated by 6 degrees.
THETA_TRUE = np.array([4.0, -3.0, 1.05, 6.0])
THETA_IDENTITY = np.array([0.0, 0.0, 1.0, 0.0])
#: (rows, columns): 90 wide by 120 high for the tests, 180 x 240 for the demo (the paper's size).
TEST_SHAPE = (120, 90)
DEMO_SHAPE = (240, 180)
N_DATA = 1000
SIGMA = 0.05
SEED = 4
RELAXATION_ETA = 0.05
#: Steps of (47) between two theta steps when ``complete`` uses the relaxation.
RELAXATION_STEPS = 200


def theta_dict(theta) -> dict:
    """theta as the JSON keys ``shift_x, shift_y, scale, angle_deg``."""
    return {k: float(v) for k, v in zip(THETA_KEYS, np.ravel(theta))}


# ============================================================================================ the faces
def _edge(signed_distance, width):
    """Smooth step from 1 (inside, negative distance) to 0, logistic of the signed distance in pixels."""
    return 0.5 * (1.0 - np.tanh(signed_distance / (2.0 * width)))


def face(shape=TEST_SHAPE, smile: bool = True) -> np.ndarray:
    """A synthetic grey face in [0, 1]: a head ellipse (0.75) on a dark background (0.1), two dark eyes and a dark
    mouth arc, curved up (``smile=True``) or down.  Every edge is a logistic of the distance in pixels with width
    ``min(shape) / 45`` (2 px at 90 x 120), so bilinear warps of it vary smoothly with theta."""
    rows, cols = int(shape[0]), int(shape[1])
    if rows < 16 or cols < 16:
        raise ValueError(f"a face needs at least 16 x 16 pixels, got shape {shape!r}")
    y, x = np.mgrid[0:rows, 0:cols].astype(float)
    cy, cx = (rows - 1) / 2.0, (cols - 1) / 2.0
    w = min(rows, cols) / 45.0
    ry, rx = 0.42 * rows, 0.42 * cols
    r = np.hypot((x - cx) / rx, (y - cy) / ry)
    head = _edge((r - 1.0) * min(rx, ry), w)
    img = 0.1 + 0.65 * head
    eye_r = 0.075 * cols
    for ex in (cx - 0.18 * cols, cx + 0.18 * cols):
        eye = _edge(np.hypot(x - ex, y - (cy - 0.12 * rows)) - eye_r, w)
        img = img - 0.55 * eye * head
    half = 0.2 * cols
    depth = 0.07 * rows * (1.0 if smile else -1.0)
    u = np.clip((x - cx) / half, -1.0, 1.0)
    mouth_y = cy + 0.2 * rows + depth * (1.0 - u ** 2) - (0.0 if smile else depth)
    thick = 0.025 * rows
    band = _edge(np.abs(y - mouth_y) - thick, w) * _edge(np.abs(x - cx) - half, w)
    img = img - 0.55 * band * head
    return np.clip(img, 0.0, 1.0)


# ============================================================================================ the warp
@lru_cache(maxsize=8)
def _pixels(shape):
    rows, cols = shape
    y, x = np.mgrid[0:rows, 0:cols].astype(float)
    y.flags.writeable = False
    x.flags.writeable = False
    return y, x


def _coordinates(shape, theta):
    """Template coordinates (rows q_y, columns q_x) sampled by every pixel, and their derivatives in theta."""
    rows, cols = shape
    y, x = _pixels((int(rows), int(cols)))
    cy, cx = (rows - 1) / 2.0, (cols - 1) / 2.0
    sx, sy, s, ang = (float(v) for v in theta)
    if not s > 0:
        raise ValueError(f"the scale of a deformation must be > 0, got {s!r}")
    a = np.deg2rad(ang)
    c, sn = np.cos(a), np.sin(a)
    u, v = x - cx - sx, y - cy - sy           # p - c - shift
    # q - c = R^T (p - c - shift) / s
    qx = (c * u + sn * v) / s
    qy = (-sn * u + c * v) / s
    d = np.pi / 180.0
    # derivatives of (qx, qy) with respect to (shift_x, shift_y, scale, angle_deg)
    dqx = [-c / s * np.ones_like(u), -sn / s * np.ones_like(u), -qx / s, (-sn * u + c * v) / s * d]
    dqy = [sn / s * np.ones_like(u), -c / s * np.ones_like(u), -qy / s, (-c * u - sn * v) / s * d]
    return qy + cy, qx + cx, dqy, dqx


def warp(template: np.ndarray, theta, gradient: bool = False):
    """The deformed template t(theta), bilinear with clipped coordinates; with ``gradient=True`` also
    dt/dtheta, shape (4, rows, cols), the exact derivative of the bilinear interpolant (piecewise smooth in theta;
    at a pixel line it is the one-sided derivative from above)."""
    T = np.asarray(template, dtype=float)
    rows, cols = T.shape
    qy, qx, dqy, dqx = _coordinates(T.shape, theta)
    iny = (qy >= 0) & (qy <= rows - 1)
    inx = (qx >= 0) & (qx <= cols - 1)
    qy, qx = np.clip(qy, 0, rows - 1), np.clip(qx, 0, cols - 1)
    i0 = np.minimum(np.floor(qy).astype(int), rows - 2)
    j0 = np.minimum(np.floor(qx).astype(int), cols - 2)
    fy, fx = qy - i0, qx - j0
    t00, t01, t10, t11 = T[i0, j0], T[i0, j0 + 1], T[i0 + 1, j0], T[i0 + 1, j0 + 1]
    top = t00 + fx * (t01 - t00)
    bottom = t10 + fx * (t11 - t10)
    value = top + fy * (bottom - top)
    if not gradient:
        return value
    gx = np.where(inx, (t01 - t00) + fy * (t11 - t10 - t01 + t00), 0.0)
    gy = np.where(iny, bottom - top, 0.0)
    return value, np.stack([gy * dqy[k] + gx * dqx[k] for k in range(4)])


# ============================================================================================ the operators
def negative_laplacian(shape) -> sp.csr_matrix:
    """The 3 x 3 negative Laplacian filter (5-point stencil) with free borders: ``D^T D``, D the forward
    differences between 4-neighbours inside the image (row-major pixel order)."""
    D = grid_differences(shape)
    return (D.T @ D).tocsr()


def grid_differences(shape) -> sp.csr_matrix:
    """Forward differences D between 4-neighbours inside an image (rows: x-edges, then y-edges)."""
    rows, cols = shape

    def diff(n):
        return sp.diags([-np.ones(n - 1), np.ones(n - 1)], [0, 1], shape=(n - 1, n))

    Dx = sp.kron(sp.identity(rows), diff(cols))
    Dy = sp.kron(diff(rows), sp.identity(cols))
    return sp.vstack([Dx, Dy]).tocsr()


def binomial_filter(image: np.ndarray) -> np.ndarray:
    """The learning matrix A^-1 of (47): the 5 x 5 binomial filter (1, 4, 6, 4, 1)/16 in each direction, with
    mirrored borders."""
    k = np.array([1.0, 4.0, 6.0, 4.0, 1.0]) / 16.0
    return convolve(np.asarray(image, dtype=float), np.outer(k, k), mode="mirror")


# ============================================================================================ the data
@dataclass(frozen=True)
class ImageData:
    """Observed pixels: flat indices (row-major, distinct) and values, on an image of ``shape``, noise sigma."""
    shape: tuple
    pixels: np.ndarray
    values: np.ndarray
    sigma: float

    def __post_init__(self):
        n = int(np.prod(self.shape))
        p = np.asarray(self.pixels)
        if p.ndim != 1 or p.size == 0 or p.size != np.asarray(self.values).size:
            raise ValueError(f"need one value per observed pixel and at least one pixel, got {p.size} pixels and "
                             f"{np.asarray(self.values).size} values")
        if np.any(p < 0) or np.any(p >= n) or np.unique(p).size != p.size:
            raise ValueError(f"observed pixels must be distinct flat indices in [0, {n}) of an image of shape "
                             f"{tuple(self.shape)}")
        if not (np.isfinite(self.sigma) and self.sigma > 0):
            raise ValueError(f"the noise sigma must be a finite number > 0, got {self.sigma!r}")

    def mask(self) -> np.ndarray:
        m = np.zeros(int(np.prod(self.shape)), dtype=bool)
        m[self.pixels] = True
        return m.reshape(self.shape)


def observe(original: np.ndarray, n: int = N_DATA, sigma: float = SIGMA, seed: int = SEED) -> ImageData:
    """n distinct random pixels of ``original`` with Gaussian noise sigma, from ``default_rng(seed)``."""
    img = np.asarray(original, dtype=float)
    if not 1 <= n <= img.size:
        raise ValueError(f"can observe 1 to {img.size} pixels of a {img.shape} image, asked for {n}")
    rng = np.random.default_rng(seed)
    pixels = np.sort(rng.choice(img.size, size=n, replace=False))
    values = img.ravel()[pixels] + sigma * rng.standard_normal(n)
    return ImageData(tuple(img.shape), pixels, values, float(sigma))


def synthetic_problem(shape=TEST_SHAPE, n: int = N_DATA, sigma: float = SIGMA, seed: int = SEED):
    """(templates (smiling, frowning), original, data): the original is the smiling face warped by THETA_TRUE."""
    smile, frown = face(shape, True), face(shape, False)
    original = warp(smile, THETA_TRUE)
    return (smile, frown), original, observe(original, n, sigma, seed)


# ============================================================================================ the model
@dataclass
class CompletionState:
    """A stationary point (or the last iterate): h, mixing coefficients a, per-template theta (2 x 4)."""
    h: np.ndarray
    a: np.ndarray
    theta: np.ndarray
    beta: float
    iterations: int = 0
    converged: bool = False
    history: list = field(default_factory=list)


class ImageCompletion:
    """The two-template mixture model of [001] Sect. 5 on one data set.

    ``templates``: two images of the data's shape; ``lam``: the prior strength of K_0 = lam L (default 1/sigma^2);
    ``deform``: optimise theta (else theta stays at the identity).  ``beta`` arguments are absolute; ``beta_c``
    is the unit the figure and the dashboard use.
    """

    def __init__(self, templates, data: ImageData, lam: float | None = None, deform: bool = True):
        self.templates = [np.asarray(t, dtype=float) for t in templates]
        if len(self.templates) != 2 or any(t.shape != tuple(data.shape) for t in self.templates):
            raise ValueError(f"need two templates of the data's shape {tuple(data.shape)}, got shapes "
                             f"{[t.shape for t in self.templates]}")
        self.data = data
        self.lam = 1.0 / data.sigma ** 2 if lam is None else float(lam)
        if not (np.isfinite(self.lam) and self.lam > 0):
            raise ValueError(f"the prior strength lam must be a finite number > 0, got {lam!r}")
        self.deform = bool(deform)
        self.shape = tuple(data.shape)
        n = int(np.prod(self.shape))
        self._D = grid_differences(self.shape)
        self.K0 = (self.lam * (self._D.T @ self._D)).tocsr()
        kt = np.zeros(n)
        kt[data.pixels] = 1.0 / data.sigma ** 2
        self.kt = kt
        self.tt = np.zeros(n)
        self.tt[data.pixels] = data.values
        self._lu = splu((sp.diags(kt) + self.K0).tocsc())
        self._kt_tt = kt * self.tt
        self.beta_c = self.critical_beta()

    # --- energies ----------------------------------------------------------------------------------------
    def deformed(self, theta) -> list[np.ndarray]:
        """t_j(theta_j), flat."""
        th = np.asarray(theta, dtype=float).reshape(2, 4)
        return [warp(t, th[j]).ravel() for j, t in enumerate(self.templates)]

    def prior_energies(self, h, theta) -> np.ndarray:
        """E_0j = (1/2)(h - t_j(theta_j), K_0 (h - t_j(theta_j))), eq. (20)."""
        return self._prior_energies_of(h, self.deformed(theta))

    def _prior_energies_of(self, h, deformed) -> np.ndarray:
        h = np.ravel(h)
        return np.array([0.5 * float((h - t) @ (self.K0 @ (h - t))) for t in deformed])

    def _mixing_of(self, h, deformed, beta) -> np.ndarray:
        return mixing_coefficients(self._prior_energies_of(h, deformed), [0.5, 0.5], beta)

    def data_energy(self, h) -> float:
        d = np.ravel(h) - self.tt
        return 0.5 * float(d @ (self.kt * d))

    def energy(self, h, theta, beta: float) -> float:
        """E_T + (mixture energy of the E_0j), eq. (18) divided by beta with equal weights."""
        return self.data_energy(h) + mixture_energy(self.prior_energies(h, theta), [0.5, 0.5], beta)

    def mixing(self, h, theta, beta: float) -> np.ndarray:
        """a_j = softmax_j(-beta E_0j), eq. (23)."""
        return mixing_coefficients(self.prior_energies(h, theta), [0.5, 0.5], beta)

    # --- the h step ----------------------------------------------------------------------------------------
    def solve_h_exact(self, a, theta) -> np.ndarray:
        """(K_T + K_0) h = K_T t_T + K_0 sum_j a_j t_j(theta_j), eq. (21)/(25), sparse LU (factorised once)."""
        tbar = sum(aj * t for aj, t in zip(a, self.deformed(theta)))
        return self._lu.solve(self._kt_tt + self.K0 @ tbar)

    def h_residual(self, h, a, theta) -> float:
        """Relative residual of (21): |(K_T + K_0) h - K_T t_T - K_0 sum_j a_j t_j| / |K_T t_T + K_0 sum_j a_j t_j|."""
        h = np.ravel(h)
        rhs = self._kt_tt + self.K0 @ sum(aj * t for aj, t in zip(a, self.deformed(theta)))
        return float(np.linalg.norm(self.kt * h + self.K0 @ h - rhs) / np.linalg.norm(rhs))

    def solve_h_relaxation(self, a, theta, h0, eta: float = RELAXATION_ETA, tol: float = 1e-8,
                           max_iter: int = 20_000, strict: bool = True) -> tuple[np.ndarray, int]:
        """The relaxation (47) at fixed a and theta, from h0, until the relative residual of (21) is below tol.
        Returns (h, iterations); if max_iter is reached it raises (``strict``) or returns the last iterate.
        It is slow: the low modes of K_0 between the data relax at a rate of about eta lam sigma^2 (pi / n)^2."""
        tbar = sum(aj * t for aj, t in zip(a, self.deformed(theta)))
        return self._relax(tbar, h0, eta, tol, max_iter, strict)

    def _relax(self, tbar, h0, eta: float = RELAXATION_ETA, tol: float = 1e-8, max_iter: int = 20_000,
               strict: bool = True):
        rhs = self._kt_tt + self.K0 @ tbar
        scale = float(np.linalg.norm(rhs))
        s2 = self.data.sigma ** 2
        h = np.array(np.ravel(h0), dtype=float)
        for it in range(1, max_iter + 1):
            g = rhs - self.kt * h - self.K0 @ h
            if np.linalg.norm(g) <= tol * scale:
                return h, it - 1
            h += eta * s2 * binomial_filter(g.reshape(self.shape)).ravel()
        if not strict:
            return h, max_iter
        raise RuntimeError(f"the relaxation (47) did not reach a residual of {tol:g} in {max_iter} steps with "
                           f"eta = {eta:g}; use the exact solver, a larger tol or more steps")

    # --- the theta step --------------------------------------------------------------------------------------
    def theta_objective(self, theta, h, beta: float) -> tuple[float, np.ndarray]:
        """``-(1/beta) ln sum_j exp(-beta E_0j(theta_j))`` (equal weights) and its gradient in theta (8,),
        ``sum_j a_j dE_0j/dtheta_j`` with ``dE_0j/dtheta_j = -(dt_j/dtheta_j, K_0 (h - t_j))``, eq. (24)."""
        th = np.asarray(theta, dtype=float).reshape(2, 4)
        h = np.ravel(h)
        E, grads = np.zeros(2), np.zeros((2, 4))
        for j, T in enumerate(self.templates):
            t, dt = warp(T, th[j], gradient=True)
            r = self.K0 @ (h - t.ravel())
            E[j] = 0.5 * float((h - t.ravel()) @ r)
            grads[j] = -dt.reshape(4, -1) @ r
        a = mixing_coefficients(E, [0.5, 0.5], beta)
        return mixture_energy(E, [0.5, 0.5], beta), (a[:, None] * grads).ravel()

    def _residual(self, T, z, h):
        """r = sqrt(lam) D (h - t(z)) (so E_0 = |r|^2 / 2) and its Jacobian in theta (n_edges x 4)."""
        t, dt = warp(T, z, gradient=True)
        root = np.sqrt(self.lam)
        return root * (self._D @ (h - t.ravel())), -root * (self._D @ dt.reshape(4, -1).T)

    def optimise_theta(self, theta0, h, steps: int = 2, tol: float = 1e-10) -> np.ndarray:
        """theta at fixed h, eq. (24).  With per-template theta the gradient for theta_j is a_j dE_0j/dtheta_j, so
        (for a_j > 0, and as the limit a_j -> 0) each theta_j minimises its own E_0j = |r_j|^2 / 2, a least-squares
        problem in the residual ``r_j = sqrt(lam) D (h - t_j(theta_j))`` (K_0 = lam D^T D).  Levenberg-Marquardt
        on the 4 x 4 normal equations, at most ``steps`` steps from theta0 (an inexact step of the alternation).
        Written here rather than ``scipy.optimize.least_squares`` because that costs 17 ms an evaluation on the
        21,000 residuals at 90 x 120 against 2.5 ms here (measured), which the live dashboard cannot afford; the
        tests check it against ``least_squares``."""
        th = np.array(theta0, dtype=float).reshape(2, 4)
        h = np.ravel(h)
        for j, T in enumerate(self.templates):
            z = th[j]
            r, J = self._residual(T, z, h)
            E = 0.5 * float(r @ r)
            mu = 1e-3
            for _ in range(steps):
                A, g = J.T @ J, J.T @ r
                if float(np.max(np.abs(g) * np.sqrt(np.diag(A)))) <= tol * max(E, 1e-300) + 1e-300:
                    break
                while mu < 1e12:
                    delta = np.linalg.solve(A + mu * np.diag(np.diag(A)), -g)
                    if not z[2] + delta[2] > 0:
                        mu *= 4.0
                        continue
                    r_new, J_new = self._residual(T, z + delta, h)
                    E_new = 0.5 * float(r_new @ r_new)
                    if E_new <= E:
                        z, r, J, E = z + delta, r_new, J_new, E_new
                        mu = max(mu / 3.0, 1e-9)
                        break
                    mu *= 4.0
            th[j] = z
        return th

    # --- the alternation -------------------------------------------------------------------------------------
    def complete(self, beta: float, init: CompletionState | None = None, solver: str = "exact",
                 max_iter: int = 200, tol: float = 1e-5) -> CompletionState:
        """Alternate the theta step (24) and the h step (21) at inverse temperature beta, from ``init`` (a warm
        start) or from theta = identity and h = the exact solution at a = (1/2, 1/2) (for the relaxation: the
        templates' mean).  Stops when a moves by less than tol and theta by less than tol (in px, degrees, and
        hundredths of scale).  ``solver``: ``"exact"`` (sparse LU and the reduced fixed point for a) or
        ``"relaxation"`` (RELAXATION_STEPS of (47) per theta step; its stopping test sees theta and a, and h can
        lag: at 5 beta_c it stops with a as the exact solver's to 1e-7 and h within 0.023, measured)."""
        if solver not in ("exact", "relaxation"):
            raise ValueError(f"solver must be 'exact' or 'relaxation', got {solver!r}")
        beta = float(beta)
        if init is None:
            theta = np.tile(THETA_IDENTITY, (2, 1))
            a = np.array([0.5, 0.5])
            # the relaxation starts where the paper's would, from the templates' mean
            t0, t1 = self.deformed(theta)
            h = self.solve_h_exact(a, theta) if solver == "exact" else 0.5 * (t0 + t1)
        else:
            theta, h = np.array(init.theta, dtype=float), np.ravel(init.h).copy()
        t = self.deformed(theta)
        a = self._mixing_of(h, t, beta)
        history = []
        w = np.array([1.0, 1.0, 100.0, 1.0])
        converged = False
        for it in range(1, max_iter + 1):
            theta_new = self.optimise_theta(theta, h) if self.deform else theta
            t = self.deformed(theta_new)
            a_new = self._mixing_of(h, t, beta)
            if solver == "exact":
                a_new, h = self._reduced_step(t, a_new, beta)
            else:
                h = self._relax(a_new[0] * t[0] + a_new[1] * t[1], h, max_iter=RELAXATION_STEPS, strict=False)[0]
            E0 = self._prior_energies_of(h, t)
            a_new = mixing_coefficients(E0, [0.5, 0.5], beta)
            step = max(float(np.max(np.abs(a_new - a))), float(np.max(np.abs((theta_new - theta) * w))))
            theta, a = theta_new, a_new
            history.append(self.data_energy(h) + mixture_energy(E0, [0.5, 0.5], beta))
            if step < tol:
                converged = True
                break
        return CompletionState(h.reshape(self.shape), a, theta, beta, it, converged, history)

    def _reduced_step(self, deformed, a0, beta):
        """(a, h) stationary for fixed theta, by the reduced fixed point (42)-(43): h = sum_j a_j t̄_j, a the local
        minimum of :class:`ReducedMixture` reached by descent from a0 (so a warm start stays on its branch)."""
        tb = [self._lu.solve(self._kt_tt + self.K0 @ t) for t in deformed]
        reduced = self._reduced(tb, deformed)
        y = reduced.minimize(beta, reduced.point(a0))["y"]
        a = reduced.mixing(y, beta)
        return a, a[0] * tb[0] + a[1] * tb[1]

    def _reduced(self, tb, deformed) -> ReducedMixture:
        V = np.array([self.data_energy(t) + 0.5 * float((t - tj) @ (self.K0 @ (t - tj)))
                      for t, tj in zip(tb, deformed)])
        M = [self.kt * t + self.K0 @ t for t in tb]
        G = np.array([[float((tb[k] - tb[0]) @ (M[i] - M[0])) for i in range(2)] for k in range(2)])
        return ReducedMixture([0.5, 0.5], V, G)

    # --- the unit of beta --------------------------------------------------------------------------------------
    def component_solutions(self, theta=None) -> list[np.ndarray]:
        """t̄_j = (K_T + K_0)^-1 (K_T t_T + K_0 t_j(theta_j)), the low-temperature solutions (42)."""
        th = np.tile(THETA_IDENTITY, (2, 1)) if theta is None else theta
        return [self._lu.solve(self._kt_tt + self.K0 @ t) for t in self.deformed(th)]

    def critical_beta(self, theta=None) -> float:
        """beta_c = 4 / b, the pitchfork of (45)-(46), b from :meth:`ReducedMixture.tanh_form` with the Gram matrix
        of the component solutions t̄_j in the metric K_T + K_0 (undeformed templates unless theta is given)."""
        th = np.tile(THETA_IDENTITY, (2, 1)) if theta is None else theta
        b, _ = self._reduced(self.component_solutions(th), self.deformed(th)).tanh_form(1.0)
        return 4.0 / b
