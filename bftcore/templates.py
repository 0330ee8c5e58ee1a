"""Density templates evaluated on a grid: one home for the forms of the template kinds of CONVENTIONS.md §2, §4,
with the paper's true density (708) and templates (719), (720), raw at the nodes (:mod:`bftcore.presets` re-exports
them with the paper's data sets and figure configurations).

Used by the input gate (:mod:`bftcore.config` evaluates every template once to refuse one that is not finite, not
a density or absurdly large) and by the problem builder (:func:`bftcore.api.build_density`).  Errors are
``ValueError`` with the reason; the gate turns them into a :class:`~bftcore.config.ConfigError` naming the
template.
"""
from __future__ import annotations

import numpy as np

from .grid import Grid

SIGMA_0 = 1.5          # width of the true density (708)
SIGMA_T = 2.0          # width of the templates (719), (720)
MU_2 = 7.5
MU_A = MU_2 + 25 / 9
MU_B = MU_2 - 25 / 9


def _gauss(y, mu, sigma):
    return np.exp(-(y - mu) ** 2 / (2 * sigma ** 2)) / (np.sqrt(2 * np.pi) * sigma)


def paper_true_density(grid: Grid) -> np.ndarray:
    """True conditional density (708): equal mixture of N(h_a(x), 1.5^2) and N(h_b(x), 1.5^2),
    h_a = 125/18 + 5x/9, h_b = 145/18 - 5x/9, raw at the nodes."""
    X, Y = grid.mesh
    ha = 125 / 18 + 5 * X / 9
    hb = 145 / 18 - 5 * X / 9
    return 0.5 * (_gauss(Y, ha, SIGMA_0) + _gauss(Y, hb, SIGMA_0))


def paper_t1(grid: Grid) -> np.ndarray:
    """Template t_1 (719): two Gaussians of width 2 at mu_a = 7.5 + 25/9 and mu_b = 7.5 - 25/9, x-independent."""
    _, Y = grid.mesh
    return 0.5 * (_gauss(Y, MU_A, SIGMA_T) + _gauss(Y, MU_B, SIGMA_T))


def paper_t2(grid: Grid) -> np.ndarray:
    """Template t_2 (720): one Gaussian of width 2 at mu_2 = 7.5, x-independent."""
    _, Y = grid.mesh
    return _gauss(Y, MU_2, SIGMA_T)


def template_density(spec: dict, grid: Grid) -> np.ndarray:
    """A density template as a density (raw at the nodes): uniform, paper t_1 (719), t_2 (720), gaussian."""
    kind = spec["kind"]
    if kind == "uniform":
        return np.full(grid.shape, 1.0 / (grid.y.n * grid.hy))
    if kind == "paper_t1":
        return paper_t1(grid)
    if kind == "paper_t2":
        return paper_t2(grid)
    if kind == "gaussian":
        _, Y = grid.mesh
        s = spec["sigma"]
        with np.errstate(over="ignore", under="ignore"):
            return np.exp(-(Y - spec["mu"]) ** 2 / (2 * s * s)) / (np.sqrt(2 * np.pi) * s)
    raise ValueError(f"template kind {kind!r} has no density form")


def template_field(spec: dict, grid: Grid, fld: str) -> np.ndarray:
    """Template in the representation of the field: ln of the density for field L, the density for field P."""
    if spec["kind"] == "array":
        t = np.asarray(spec["values"], dtype=float)
        if t.shape != grid.shape or not np.all(np.isfinite(t)):
            raise ValueError(f"an array template must be {grid.shape[0]} x {grid.shape[1]} finite numbers, "
                             f"got shape {t.shape}")
        return t
    P = template_density(spec, grid)
    if fld == "P":
        return P
    with np.errstate(divide="ignore"):
        L = np.log(P)
    if not np.all(np.isfinite(L)):
        raise ValueError("it underflows to 0 on the grid, so its log is -inf; widen it or move it onto the grid")
    return L
