"""Training and test error, KL divergence, regression function, residuals (eqs. (709)-(712)).

Conventions of CONVENTIONS.md §2: the test error weights ``L`` with the true density evaluated raw at the nodes
and averages uniformly over x.
"""
from __future__ import annotations

import numpy as np

from .grid import Grid


def training_error(L: np.ndarray, N: np.ndarray) -> float:
    """Training error (710): ``-(1/n) sum_data L(x_d, y_d)``."""
    n = float(N.sum())
    if n == 0:
        return float("nan")
    data = N > 0
    return -float(np.dot(N[data], L[data])) / n


def test_error(L: np.ndarray, P_true: np.ndarray, grid: Grid) -> float:
    """Test error (711): ``-(1/nx) sum_i sum_j P_true[i, j] L[i, j] hy``.  Infinite where L = -inf
    (P = 0, possible with a prior on P) under a positive truth."""
    truth = P_true > 0
    return -float(np.dot(P_true[truth], L[truth])) * grid.hy / grid.x.n


def kl_to_truth(L: np.ndarray, P_true: np.ndarray, grid: Grid) -> float:
    """Expected Kullback-Leibler divergence (712) ``(1/nx) sum_x sum_y p̂ (ln p̂ - L) hy`` with the truth
    p̂ renormalised per x; >= 0, and 0 only for L = ln p̂."""
    Pn = P_true / (P_true.sum(axis=1, keepdims=True) * grid.hy)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(Pn > 0, Pn * (np.log(Pn) - L), 0.0)
    return float(np.sum(terms) * grid.hy / grid.x.n)


def regression_function(P: np.ndarray, grid: Grid) -> tuple[np.ndarray, np.ndarray]:
    """Regression function (709) ``h(x) = sum_j y_j P[i, j] hy`` and the conditional standard deviation."""
    y = grid.y.nodes
    h = (P * y[None, :]).sum(axis=1) * grid.hy
    var = (P * (y[None, :] - h[:, None]) ** 2).sum(axis=1) * grid.hy
    return h, np.sqrt(np.maximum(var, 0.0))


def normalisation_error(P: np.ndarray, grid: Grid) -> float:
    """``max_x |sum_y P hy - 1|``."""
    return float(np.max(np.abs(P.sum(axis=1) * grid.hy - 1.0)))


def detect_overfitting(energy, test_error_trace) -> int | None:
    """First iteration after which the test error rises while the energy still falls (the overfitting signature
    of Fig. 27: 'the test error grows while the energy is decreasing'); None if it never happens.

    The test error must rise at that iteration and stay above its minimum to the end of the trace.
    """
    E = np.asarray(energy, dtype=float)
    T = np.asarray(test_error_trace, dtype=float)
    if T.size < 3 or not np.all(np.isfinite(T)):
        return None
    k = int(np.argmin(T))
    if k >= T.size - 1:
        return None
    rises = T[-1] > T[k] + 1e-9 * max(1.0, abs(T[k]))
    falls = E[-1] < E[k]
    return k if (rises and falls) else None
