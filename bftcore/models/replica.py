"""Replica / variational theory of Gaussian-process regression learning curves (Malzahn & Opper, seed 002).

What it is.  An *approximation* to the average-case learning curves of GP regression with the posterior mean as
predictor: the data-averaged posterior variance ``[G(x, x)]_x`` and the squared generalisation error
``eps = [(<f(x)> - y)^2]_{D, x, y}`` as functions of the number m of training examples.  It is cheap (a handful of
N x N solves per m, with no resampling) and is meant to be drawn *beside* simulated learning curves, labelled
as an approximation.  The results carry ``"kind": "replica"`` and ``"approximation": True``.

Two versions:

* :func:`bootstrap_curve`: the empirical distribution of N data points, eq. (18).  It predicts the *simple
  bootstrap*: train on m points drawn with replacement from the N, test on all N (m may exceed N; for m >~ N
  the error is optimistically biased because about N(1 - e^{-m/N}) of the test points were trained on).
* :func:`teacher_curve` (and :func:`teacher_curve_from_precision`): a known input distribution p over the sites of
  a grid, a known true function f_true and true noise variance sigma_true^2 ("teacher mode", for class demos).

Where it is accurate and where not.  The Gaussian trial Hamiltonian (6) becomes asymptotically exact for large m.
For a smooth, well-conditioned prior (e.g. an RBF kernel on 1-D inputs, notes §1.5 B) theory and simulation agree
within about 1 % for m >= 100; at small m the theory *underestimates* the posterior variance (10-20 % at m <= 20).
With lattice priors K0 = lambda (-Delta + m^2)^k and weak regularisation (large prior variance relative to sigma^2,
data sparse on the grid) it is *much worse* at intermediate m: in the notes' 1-D lattice example the posterior
variance came out 0.166 against 0.441 simulated at m = 100, and in 2-D the error eps was low by a factor of 1.3-2.2;
in teacher mode on 60 sites with lambda = 1, m^2 = 0.01, sigma^2 = 0.04 it is 64 % low at m = 100 (0.048 against
0.134, tests/test_replica.py).  Once every site has many data (m >> number of sites) it is accurate again (0.3 % at
m = 1000 there), and a well-regularised lattice prior (prior variance ~ 4 sigma^2) is within 1.5 % from m = 300 on.
Real resampling is therefore the primary learning-curve engine; this module supplies the labelled theory overlay.
The prior is taken to have zero mean: pass residuals y - t0 (and f_true - t0).

Equations (numbers of seed 002; ``[.]_x`` is the average over the input distribution p(x)):

* (12)/(19) ``G = (K^-1 + u)^-1 = (I + K u)^-1 K`` with ``u = diag(p_i DeltaQhat_i)``; computed in the symmetric,
  stable form ``G = K - K U^1/2 (I + U^1/2 K U^1/2)^-1 U^1/2 K`` (Cholesky of ``I + U^1/2 K U^1/2 >= I``; no K^-1).
* (14) ``DeltaQhat_i = m / (sigma^2 + G_ii)``, so ``u_i = p_i m / (sigma^2 + G_ii)`` (``p_i = 1/N`` for (18)).
* (10)+(15) the mean prediction ``R = G (u * y)`` (teacher mode: ``y -> f_true``).
* (11)+(16) the variance of the predictor over data sets, ``V_ii = sum_j A_ij (b_j + V_jj)`` with
  ``A_ij = G_ij^2 p_j m / (sigma^2 + G_jj)^2`` and ``b = (R - y)^2`` (teacher: ``(R - f_true)^2 + sigma_true^2``),
  i.e. ``v = (I - A)^-1 A b``.  A is similar to the symmetric ``D^1/2 (G o G) D^1/2`` (``D = diag(p m/(sigma^2+g)^2)``,
  PSD by the Schur product theorem), which is what is solved (Cholesky); a Cholesky failure means the spectral
  radius of A is >= 1 and there is no nonnegative solution (raised, never seen in practice).
* (17) ``eps = [(R - y)^2 + V]_{x, y} = sum_i p_i (b_i + v_i)``; the posterior-variance curve is ``sum_i p_i G_ii``.
* (20) the "quasi-classical" diagonal, which neglects that u and K^-1 do not commute (exact for constant u):
  ``G_ii ~ sum_k V_ki^2 mu_k / (1 + mu_k u_i)`` with ``K = sum_k mu_k v_k v_k^T``; together with (14) a scalar root
  per point (brentq on ``[0, K_ii]``), used only to *initialise* the iteration of (19)+(14).

Iteration and convergence.  From the (20) initialisation, the fixed point ``g = F(g) = diag G(u(g))`` of (19)+(14)
is iterated, with Anderson mixing of the last 3 sweeps (the plain sweep is order preserving, larger g -> smaller
u -> larger G, and converges, but needs thousands of sweeps when a mode of K has a prior variance far above sigma^2
and m is of order 1; mixing brings that to ~10).  It stops when ``|F(g)_i - g_i| <= tol (sigma^2 + F(g)_i)`` for
every i, i.e. when every u_i has converged to a relative ``tol`` (plus the rounding level ``64 eps K_ii`` of the
symmetric form), and G, R and V are those of that u.  Sweeps: ~14 at m = 5 down to 4 at m = 1600 in the §1.5 B
setup (the plain sweep: 24 to 5).  If it has not converged after ``max_iter`` sweeps,
:class:`ReplicaConvergenceError` is *raised*: no partial curve is returned, so an unconverged number is never plotted
as theory.

Cost: an eigen-decomposition of K (for (20)), then per m one N x N Cholesky factorisation per sweep (4-25 sweeps);
a 200-point curve of 8 m values takes ~0.2 s with one BLAS thread.  The work is dense, so N (or the number of grid
sites) of a few thousand is the practical limit.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.optimize import brentq

from ..foundations.limits import MAX_CONDITION, blas_threads

__all__ = ["ReplicaConvergenceError", "DENSE_PRECISION_MAX_SITES", "bootstrap_curve", "bootstrap_state",
           "teacher_curve", "teacher_state", "teacher_curve_from_precision"]

#: largest number of sites for which :func:`teacher_curve_from_precision` inverts the prior precision densely
DENSE_PRECISION_MAX_SITES = 2000

_SYM_RTOL = 1e-8      # |K - K^T| allowed, relative to max |K|
_PSD_RTOL = 1e-8      # negative eigenvalues allowed (rounding), relative to the largest eigenvalue
_P_SUM_ATOL = 1e-8    # |sum p - 1| allowed


class ReplicaConvergenceError(RuntimeError):
    """The replica equations (19)+(14) did not converge, or (11)+(16) has no nonnegative solution."""


# ------------------------------------------------------------------------------------------------ validation

def _finite_positive(value: Any, name: str, allow_zero: bool = False) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    if not np.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        need = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {need}, got {x!r}")
    return x


def _m_values(m_values: Any) -> np.ndarray:
    try:
        m = np.asarray(m_values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"m_values must be a sequence of numbers of training examples, got {m_values!r}") from None
    if m.ndim == 0:
        m = m.reshape(1)
    if m.ndim != 1 or m.size == 0:
        raise ValueError(f"m_values must be a non-empty 1-D sequence of numbers of training examples, "
                         f"got shape {m.shape}")
    if not np.all(np.isfinite(m)):
        raise ValueError("m_values contains a non-finite value (nan or inf): give finite numbers of examples")
    if np.any(m < 0):
        raise ValueError(f"m_values must be >= 0 (numbers of training examples), got {float(m.min())!r}")
    return m


def _vector(x: Any, n: int, name: str, what: str) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a 1-D array of {n} real numbers ({what})") from None
    if a.shape != (n,):
        raise ValueError(f"{name} must be a 1-D array of length {n} ({what}), got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains non-finite values (nan or inf): remove or impute them first")
    return a


def _covariance(K: Any, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Checked symmetric PSD covariance, with its eigen-decomposition (eigenvalues clipped at 0)."""
    if sp.issparse(K):
        raise ValueError(f"{name} must be a dense covariance matrix, got a sparse matrix: for a prior precision "
                         f"use teacher_curve_from_precision")
    try:
        a = np.asarray(K, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a square matrix of real numbers") from None
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty square (n x n) covariance matrix, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains non-finite values (nan or inf): check the kernel and its inputs")
    scale = float(np.max(np.abs(a)))
    asym = float(np.max(np.abs(a - a.T)))
    if asym > _SYM_RTOL * max(scale, np.finfo(float).tiny):
        raise ValueError(f"{name} is not symmetric (max |{name} - {name}.T| = {asym:.3g}): a covariance must be "
                         f"symmetric; symmetrise with ({name} + {name}.T) / 2 if the asymmetry is rounding")
    a = 0.5 * (a + a.T)
    mu, vecs = np.linalg.eigh(a)
    if mu[0] < -_PSD_RTOL * max(float(mu[-1]), 0.0) or mu[-1] < 0:
        raise ValueError(f"{name} is not positive semi-definite (smallest eigenvalue {mu[0]:.3g}, largest "
                         f"{mu[-1]:.3g}): it is not a covariance; check the kernel or add jitter to the diagonal")
    return a, np.clip(mu, 0.0, None), vecs


def _iteration_args(tol: Any, max_iter: Any) -> tuple[float, int]:
    t = _finite_positive(tol, "tol")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}")
    return t, int(max_iter)


# ------------------------------------------------------------------------------------------------ the theory

def _posterior_covariance(K: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Eq. (19), ``G = (I + K U)^-1 K``, in the symmetric form ``K - K U^1/2 (I + U^1/2 K U^1/2)^-1 U^1/2 K``."""
    s = np.sqrt(u)
    W = s[:, None] * K
    M = W * s[None, :]
    M[np.diag_indices_from(M)] += 1.0
    L = sla.cholesky(M, lower=True, check_finite=False)
    Z = sla.solve_triangular(L, W, lower=True, check_finite=False)
    G = K - Z.T @ Z
    return 0.5 * (G + G.T)


def _quasi_classical_diagonal(mu: np.ndarray, vecs: np.ndarray, kdiag: np.ndarray, w: np.ndarray,
                              noise_var: float, m: float) -> np.ndarray:
    """Eq. (20) with (14): per point the root g of ``sum_k V_ki^2 mu_k / (1 + mu_k w_i m / (sigma^2 + g)) = g``."""
    g = kdiag.copy()
    v2mu = vecs ** 2 * mu[None, :]
    for i in range(kdiag.size):
        if w[i] * m == 0.0 or kdiag[i] <= 0.0:
            continue              # u_i = 0: G_ii = K_ii exactly; or a point of zero prior variance

        def phi(gi: float, i: int = i) -> float:
            return float(np.sum(v2mu[i] / (1.0 + mu * (w[i] * m / (noise_var + gi))))) - gi

        # phi(0) > 0 and phi(K_ii) <= 0 (each term is at most v_ki^2 mu_k), so [0, K_ii] brackets the root
        g[i] = brentq(phi, 0.0, float(kdiag[i]), xtol=1e-14 * float(kdiag[i]), rtol=4 * np.finfo(float).eps)
    return g


class _Problem(NamedTuple):
    """A checked problem: covariance K with its eigen-decomposition, input weights w (1/N or p), target (y or
    f_true), the model's sigma^2, the extra term of b (0 or sigma_true^2) and the stopping rule."""

    K: np.ndarray
    mu: np.ndarray
    vecs: np.ndarray
    w: np.ndarray
    target: np.ndarray
    noise_var: float
    b_extra: float
    tol: float
    max_iter: int


_ANDERSON_DEPTH = 3   # previous sweeps mixed into the next iterate


def _anderson_step(hist_g: list[np.ndarray], hist_f: list[np.ndarray], g: np.ndarray, f: np.ndarray, restart: bool,
                   kdiag: np.ndarray) -> np.ndarray:
    """Next iterate of ``g = F(g)``, ``F(g) = diag G(u(g))``: Anderson mixing of the last sweeps (Walker & Ni 2011).

    The plain sweep ``g <- F(g)`` is order preserving and converges, but slowly (thousands of sweeps) when a mode
    of K has a prior variance far above sigma^2 and m is of order 1; mixing the last :data:`_ANDERSON_DEPTH`
    residuals ``F(g) - g`` removes that.  Safeguards: the history restarts when the residual grew, and the iterate
    is clipped to ``[0, K_ii]``, where every G_ii lies.  Convergence is judged on the residual of the plain map at
    the current iterate, so the mixing changes the path, not the fixed point."""
    if restart:
        hist_g.clear()
        hist_f.clear()
    hist_g.append(g)
    hist_f.append(f)
    del hist_g[:-(_ANDERSON_DEPTH + 1)], hist_f[:-(_ANDERSON_DEPTH + 1)]
    if len(hist_g) < 2:
        return f
    F = np.array(hist_f).T
    dR = np.diff(F - np.array(hist_g).T, axis=1)
    gamma = np.linalg.lstsq(dR, f - g, rcond=None)[0]
    nxt = f - np.diff(F, axis=1) @ gamma
    return np.clip(nxt, 0.0, kdiag) if np.all(np.isfinite(nxt)) else f


def _solve(pb: _Problem, m: float) -> dict[str, Any]:
    """The replica fields at m examples: G, u, R, V_ii, b and the two curves."""
    K, mu, vecs, w, target, noise_var, b_extra, tol, max_iter = pb
    kdiag = np.diag(K).copy()
    n = kdiag.size
    if m == 0.0:
        # no data: G = K, u = 0, R = 0, V = 0, eps = [y^2 + sigma_true^2]_x
        b0 = target ** 2 + b_extra
        return {"G": K.copy(), "u": np.zeros(n), "R": np.zeros(n), "V": np.zeros(n), "b": b0,
                "posterior_variance": float(w @ kdiag), "test_error": float(w @ b0), "iterations": 0}
    floor = 64 * np.finfo(float).eps * kdiag                                # rounding level of G = K - Z^T Z
    g = _quasi_classical_diagonal(mu, vecs, kdiag, w, noise_var, m)        # eq. (20): the initial G_ii
    hist_g: list[np.ndarray] = []
    hist_f: list[np.ndarray] = []
    previous = np.inf
    iterations = 0
    while True:
        u = w * m / (noise_var + g)                                         # eq. (14), u_i = p_i DeltaQhat_i
        G = _posterior_covariance(K, u)                                     # eq. (19)
        f = np.diag(G).copy()
        iterations += 1
        r = f - g
        if np.all(np.abs(r) <= tol * (noise_var + np.abs(f)) + floor):
            break
        size = float(np.max(np.abs(r)))
        if iterations >= max_iter:
            raise ReplicaConvergenceError(
                f"the replica equations (19)+(14) did not converge at m = {m:g} within max_iter = {max_iter} "
                f"sweeps (last max |G_ii(u(g)) - g_i| = {size:.3g}; tol = {tol:g} relative to sigma^2 + G_ii): raise "
                f"max_iter or tol")
        g = _anderson_step(hist_g, hist_f, g, f, size > previous, kdiag)
        previous = size
    # G = G(u(g)), and diag G agrees with g to within the tolerance: from here on g is diag G
    g = np.clip(f, 0.0, None)
    R = G @ (u * target)                                                    # eqs. (10)+(15)
    b = (R - target) ** 2 + b_extra
    d = np.sqrt(w * m) / (noise_var + g)                                    # D^1/2, D_j = p_j m / (sigma^2+g_j)^2
    S = G * G
    IB = -(d[:, None] * S * d[None, :])                                     # I - B, B = D^1/2 (G o G) D^1/2
    IB[np.diag_indices_from(IB)] += 1.0
    try:
        cf = sla.cho_factor(IB, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        raise ReplicaConvergenceError(
            f"the variance equations (11)+(16) have no nonnegative solution at m = {m:g} (spectral radius of A "
            f">= 1): the replica theory does not apply to this setup") from None
    z = sla.cho_solve(cf, d * b, check_finite=False)                        # (I - B) z = D^1/2 b
    v = S @ (d * z)                                                         # v = (I - A)^-1 A b, eqs. (11)+(16)
    return {"G": G, "u": u, "R": R, "V": v, "b": b, "posterior_variance": float(w @ g),   # [G(x, x)]_x
            "test_error": float(w @ (b + v)), "iterations": iterations}               # eq. (17)


def _curve(pb: _Problem, m_values: np.ndarray) -> dict:
    out: dict[str, Any] = {"m": [], "posterior_variance": [], "test_error": [], "iterations": [],
                           "kind": "replica", "approximation": True}
    for m in m_values:
        st = _solve(pb, float(m))
        out["m"].append(_m_out(m))
        for key in ("posterior_variance", "test_error", "iterations"):
            out[key].append(st[key])
    return out


def _m_out(m: float) -> int | float:
    return int(m) if float(m).is_integer() else float(m)


# ------------------------------------------------------------------------------------------------ public API

def _bootstrap_inputs(K: Any, y: Any, noise_var: Any, tol: Any, max_iter: Any) -> _Problem:
    blas_threads()   # as every run of the API: one BLAS thread (bftcore.foundations.limits), many small dense solves
    Kd, mu, vecs = _covariance(K, "K")
    n = Kd.shape[0]
    yv = _vector(y, n, "y", "one output per row of K")
    s2 = _finite_positive(noise_var, "noise_var")
    t, it = _iteration_args(tol, max_iter)
    return _Problem(Kd, mu, vecs, np.full(n, 1.0 / n), yv, s2, 0.0, t, it)


def _teacher_inputs(C: Any, p: Any, f_true: Any, noise_var: Any, noise_var_true: Any, tol: Any,
                    max_iter: Any) -> _Problem:
    blas_threads()
    Cd, mu, vecs = _covariance(C, "C")
    n = Cd.shape[0]
    pv = _vector(p, n, "p", "the input probability of each site")
    if np.any(pv < 0):
        raise ValueError(f"p must be >= 0 (a probability distribution over the sites), got min {pv.min():.3g}")
    if abs(float(pv.sum()) - 1.0) > _P_SUM_ATOL:
        raise ValueError(f"p must sum to 1 (a probability distribution over the sites), it sums to "
                         f"{float(pv.sum()):.10g}: normalise it with p / p.sum()")
    f = _vector(f_true, n, "f_true", "the true function at each site")
    s2 = _finite_positive(noise_var, "noise_var")
    s2_true = s2 if noise_var_true is None else _finite_positive(noise_var_true, "noise_var_true", allow_zero=True)
    t, it = _iteration_args(tol, max_iter)
    return _Problem(Cd, mu, vecs, pv, f, s2, s2_true, t, it)


def _state(pb: _Problem, m: Any) -> dict[str, Any]:
    ms = _m_values(m)
    if ms.size != 1:
        raise ValueError(f"m must be a single number of training examples, got {ms.size} values: use the *_curve "
                         f"functions for several")
    st = _solve(pb, float(ms[0]))
    st.update(m=_m_out(ms[0]), kind="replica", approximation=True)
    return st


def bootstrap_curve(K: Any, y: Any, noise_var: float, m_values: Any, tol: float = 1e-10,
                    max_iter: int = 500) -> dict:
    """Replica prediction of the simple-bootstrap learning curves of GP regression (empirical version, eq. (18)).

    Training sets are m points drawn *with replacement* from the N data, the test set is all N data.  In
    eqs. (14)-(16) ``p(x_i) = 1/N``: ``u_i = m / (N (sigma^2 + G_ii))``, ``R = G (u * y)``, ``b = (R - y)^2``,
    ``A_ij = G_ij^2 m / (N (sigma^2 + G_jj)^2)``, ``v = (I - A)^-1 A b``.

    Parameters
    ----------
    K : (N, N) array
        Prior covariance at the N data inputs (on a BFT grid: C restricted to the data sites, C_DD).
    y : (N,) array
        Outputs, as residuals ``y - t0`` (the theory assumes a zero prior mean).
    noise_var : float
        The model's noise variance sigma^2 > 0, eq. (13).
    m_values : sequence of float
        Numbers of training examples (>= 0; may exceed N; non-integers are allowed by the theory).
    tol, max_iter
        Stop when every ``u_i`` has converged to a relative ``tol``, i.e. ``|G_ii(u(g)) - g_i| <= tol (sigma^2 +
        G_ii)`` (module docstring); raise :class:`ReplicaConvergenceError` after ``max_iter`` sweeps of (19)+(14).

    Returns
    -------
    dict with lists ``m``, ``posterior_variance`` (``tr G / N``), ``test_error`` (eq. (17): ``mean(b + v)``, which
    contains the output noise since y is the noisy target), ``iterations`` (sweeps of (19)+(14) after the (20)
    initialisation; 0 at m = 0), and ``kind = "replica"``, ``approximation = True``.

    Raises
    ------
    ValueError for malformed inputs; ReplicaConvergenceError (a RuntimeError) if the iteration does not converge.
    """
    args = _bootstrap_inputs(K, y, noise_var, tol, max_iter)
    ms = _m_values(m_values)
    return _curve(args, ms)


def bootstrap_state(K: Any, y: Any, noise_var: float, m: float, tol: float = 1e-10, max_iter: int = 500) -> dict:
    """The replica fields behind one point of :func:`bootstrap_curve` (for bias and variance bands, and checks).

    Returns a dict with the arrays ``G`` (N x N, eq. (19)), ``u`` (``diag`` of eq. (12), ``m/(N(sigma^2+G_ii))``),
    ``R`` (the mean prediction over bootstrap sets, eq. (10)), ``V`` (its variance over bootstrap sets, ``V_ii`` of
    eq. (11)), ``b`` (``(R - y)^2``), and the scalars ``posterior_variance``, ``test_error``, ``iterations``, ``m``,
    ``kind``, ``approximation`` as in :func:`bootstrap_curve`.
    """
    return _state(_bootstrap_inputs(K, y, noise_var, tol, max_iter), m)


def teacher_curve(C: Any, p: Any, f_true: Any, noise_var: float, m_values: Any, noise_var_true: float | None = None,
                  tol: float = 1e-10, max_iter: int = 500) -> dict:
    """Replica learning curves with a known input distribution and teacher ("teacher mode" on a grid).

    Training sets are m inputs drawn i.i.d. from p over the sites, with outputs ``f_true + noise`` (variance
    ``noise_var_true``); the model is GP regression with prior covariance C and noise variance ``noise_var``; the
    test point is a fresh draw ``(x ~ p, y = f_true(x) + noise)``.  In eqs. (14)-(16) ``1/N -> p_i``, ``y -> f_true``
    and ``[(R - y)^2]_{y|x} = (R - f_true)^2 + sigma_true^2``:

        ``u_i = p_i m / (sigma^2 + G_ii)``,  ``R = G (u * f_true)``,  ``b = (R - f_true)^2 + sigma_true^2``,
        ``A_ij = G_ij^2 p_j m / (sigma^2 + G_jj)^2``,  ``v = (I - A)^-1 A b``.

    On the BFT grid ``G = (K0 + diag u)^-1``.  Sites with ``p_i = 0`` are never trained on and carry no weight.
    With ``p = 1/N``, ``f_true = y`` and ``noise_var_true = 0`` this is :func:`bootstrap_curve`.

    Parameters
    ----------
    C : (n, n) array
        Prior covariance over the grid sites (dense).
    p : (n,) array
        Input distribution over the sites (>= 0, sums to 1).
    f_true : (n,) array
        The true function at the sites, as a residual ``f_true - t0``.
    noise_var : float
        The model's sigma^2 > 0.
    m_values : sequence of float
        Numbers of training examples (>= 0).
    noise_var_true : float, optional
        The true data noise variance (>= 0); defaults to ``noise_var``.
    tol, max_iter
        As in :func:`bootstrap_curve`.

    Returns
    -------
    dict as :func:`bootstrap_curve`; ``posterior_variance = sum_i p_i G_ii`` and ``test_error = sum_i p_i (b_i +
    v_i)`` (p-weighted means, eq. (17); eps includes the test noise sigma_true^2).
    """
    args = _teacher_inputs(C, p, f_true, noise_var, noise_var_true, tol, max_iter)
    ms = _m_values(m_values)
    return _curve(args, ms)


def teacher_state(C: Any, p: Any, f_true: Any, noise_var: float, m: float, noise_var_true: float | None = None,
                  tol: float = 1e-10, max_iter: int = 500) -> dict:
    """The replica fields behind one point of :func:`teacher_curve` (keys as :func:`bootstrap_state`, with
    ``u_i = p_i m / (sigma^2 + G_ii)`` and ``b = (R - f_true)^2 + sigma_true^2``)."""
    return _state(_teacher_inputs(C, p, f_true, noise_var, noise_var_true, tol, max_iter), m)


def _dense_covariance_from_precision(K0: Any, max_sites: int) -> np.ndarray:
    if sp.issparse(K0):
        shape = K0.shape
    else:
        try:
            K0 = np.asarray(K0, dtype=float)
        except (TypeError, ValueError):
            raise ValueError("K0 must be a square matrix of real numbers (dense array or scipy.sparse)") from None
        shape = K0.shape
    if len(shape) != 2 or shape[0] != shape[1] or shape[0] == 0:
        raise ValueError(f"K0 must be a non-empty square (n x n) precision matrix, got shape {shape}")
    n = int(shape[0])
    if n > max_sites:
        raise ValueError(f"K0 has {n} sites, more than max_sites = {max_sites}: the prior covariance K0^-1 is "
                         f"formed densely (O(n^2) memory, O(n^3) per sweep); use a coarser grid, or raise max_sites "
                         f"if you accept the cost")
    a = K0.toarray().astype(float) if sp.issparse(K0) else np.array(K0, dtype=float)
    if not np.all(np.isfinite(a)):
        raise ValueError("K0 contains non-finite values (nan or inf): check the operator's coefficients")
    scale = float(np.max(np.abs(a)))
    if float(np.max(np.abs(a - a.T))) > _SYM_RTOL * max(scale, np.finfo(float).tiny):
        raise ValueError("K0 is not symmetric: a prior precision must be symmetric; symmetrise with (K0 + K0.T) / 2 "
                         "if the asymmetry is rounding")
    a = 0.5 * (a + a.T)
    blas_threads()
    improper = ("K0 is not positive definite{}: the prior is improper (e.g. no mass term); add a mass m^2 > 0 or a "
                "constraint so that K0^-1 exists")
    try:
        cf = sla.cho_factor(a, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        raise ValueError(improper.format("")) from None
    # a singular K0 can pass Cholesky with a pivot at rounding level.  max K0_ii / min pivot^2 is a lower bound on
    # the condition number of K0: refuse it above MAX_CONDITION, the bound of the operators the solver inverts
    if float(np.max(np.diag(a))) > MAX_CONDITION * float(np.min(np.diag(cf[0]))) ** 2:
        raise ValueError(improper.format(f" to working precision (condition number above {MAX_CONDITION:g})"))
    C = sla.cho_solve(cf, np.eye(n), check_finite=False)
    return 0.5 * (C + C.T)


def teacher_curve_from_precision(K0: Any, p: Any, f_true: Any, noise_var: float, m_values: Any,
                                 noise_var_true: float | None = None, tol: float = 1e-10, max_iter: int = 500,
                                 max_sites: int = DENSE_PRECISION_MAX_SITES) -> dict:
    """:func:`teacher_curve` for a prior given by its precision ``K0`` (dense array or scipy.sparse matrix), e.g.
    ``lambda (-Delta + m^2)`` on the grid (then ``G = (K0 + diag u)^-1``).

    ``C = K0^-1`` is formed densely (Cholesky), so grids above ``max_sites`` sites (default
    :data:`DENSE_PRECISION_MAX_SITES` = 2000) are refused with a ValueError: the cost is O(n^3) per sweep and
    O(n^2) memory (2000 sites: 32 MB per matrix, a few seconds per m).  K0 must be symmetric positive definite (a
    proper prior, e.g. with a mass term m^2 > 0).
    """
    C = _dense_covariance_from_precision(K0, max_sites)
    return teacher_curve(C, p, f_true, noise_var, m_values, noise_var_true=noise_var_true, tol=tol,
                         max_iter=max_iter)
