"""Training and test error, KL divergence, regression function, residuals (eqs. (709)-(712)).

Conventions of CONVENTIONS.md §2: the test error weights ``L`` with the true density evaluated raw at the nodes
and averages uniformly over x.
"""
from __future__ import annotations

import numpy as np

from .grid import Grid


def training_error(L: np.ndarray, N: np.ndarray) -> float:
    """Training error (710): ``-(1/n) sum_data L(x_d, y_d)``."""
    index = np.flatnonzero(N > 0)
    return training_error_at(L, index, np.ravel(N)[index])


def training_error_at(L: np.ndarray, index: np.ndarray, counts: np.ndarray) -> float:
    """:func:`training_error` from the data nodes found once: the flat ``index`` of the nodes with data and their
    ``counts`` (a record of every iteration asks for it)."""
    n = float(counts.sum())
    if n == 0:
        return float("nan")
    return -float(np.dot(counts, np.ravel(L)[index])) / n


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


#: Overfitting rule (:func:`detect_overfitting`): the share of the test error the fit had gained (start to minimum)
#: that it must give back, and the rise relative to the minimum, before the marker fires.
OVERFIT_GIVE_BACK = 0.25
OVERFIT_RELATIVE_RISE = 0.01


def detect_overfitting(energy, test_error_trace) -> int | None:
    """The early-stopping iteration of an overfitting run, or None (the overfitting signature of Fig. 27: "the
    test error grows while the energy is decreasing").

    The rule, stated so that a class can check it: let ``T`` be the test error per iteration (iteration 0 is the
    start), ``k`` the iteration of its minimum.  Overfitting is reported at ``k`` when

    * ``k >= 1``: the fit first *learned* something (a test error lowest at the start means the data made it
      worse from the first step, which is no onset of overfitting);
    * the rise is sustained: from the first iteration after ``k`` where ``T`` exceeds ``T[k] + rise / 2`` it never
      falls back below ``T[k] + rise / 4`` (``rise = T[-1] - T[k]``; Newton's steps zigzag a little);
    * the rise is large: it gives back at least :data:`OVERFIT_GIVE_BACK` (a quarter) of what the fit had gained,
      ``T[0] - T[k]``, and at least :data:`OVERFIT_RELATIVE_RISE` (1 %) of ``T[k]`` — the drift of a few
      thousandths after the minimum of Figs 21-26 or of a metastable mixture is not overfitting;
    * the energy still falls after ``k`` (``E[-1] < E[k]``).

    Measured on the shipped presets: fig27 (and the ``overfitting`` preset) give back 79 % and rise 6.3 %; the
    largest of the others is fig23 with 10 % and 0.8 %.  Evaluated on the trace so far, so a streaming run shows
    the marker once the rise is large enough.
    """
    E = np.asarray(energy, dtype=float)
    T = np.asarray(test_error_trace, dtype=float)
    if T.size < 3 or not np.all(np.isfinite(T)) or E.shape != T.shape:
        return None
    k = int(np.argmin(T))
    if k < 1 or k >= T.size - 1:
        return None
    gained = T[0] - T[k]
    rise = T[-1] - T[k]
    if not (rise >= OVERFIT_GIVE_BACK * gained and rise >= OVERFIT_RELATIVE_RISE * abs(T[k]) and rise > 0):
        return None
    after = T[k + 1:]
    first = int(np.argmax(after > T[k] + 0.5 * rise))  # after[-1] is above that line, so there is a first
    if np.any(after[first:] < T[k] + 0.25 * rise):
        return None
    return k if E[-1] < E[k] else None
