"""The posterior of a regression function h at any x, between the nodes and beyond them (issue 27).

The model of :mod:`bftcore.models.regression` is a Gaussian field on the x nodes.  A query x is answered by the
field's own continuum reading, exactly (every quantity below is a linear functional of a Gaussian mixture):

* **between two nodes** ``x_i <= x <= x_{i+1}``: ``h(x) = (1 - t) h_i + t h_{i+1}``, ``t = (x - x_i) / h``, the
  piecewise-linear field the lattice stands for (a periodic axis joins its last node to its first);
* **beyond the grid** (neumann and free boundaries): the prior continues the lattice with the same spacing and the
  same orders, as a *free* chain: the extra nodes ``e`` have the prior precision ``beta lam hx Q`` of the free
  operator of :func:`bftcore.foundations.operators.axis_operator` on the chain of the last ``k`` nodes and the
  extra ones (``k`` the highest order), so ``h_e | h = t_e + M (h_last - t_last) + eps``,
  ``M = -Q_ee^{-1} Q_e,last`` and ``eps ~ N(0, (beta lam hx Q_ee)^{-1})``.  For a free boundary and a prior of one
  order (l2, l4 or l6 alone, no l0) this *is* the posterior of the same model on a longer grid: integrating the
  extra nodes out of the longer chain gives back the prior on the grid, because each extra difference row is the
  only one to hold its outermost node (``tests/test_regression_query.py`` checks it to 1e-9).  With several orders,
  or l0, or a neumann boundary, it is a choice, the free continuation of the fitted field: integrating a longer
  chain out would change the prior on the grid itself.  With l2 the mean
  continues the edge's level (a constant; with l4 its slope, with l6 its curvature), and the variance grows with
  the distance, as a Gaussian process's does away from the data.  A template is evaluated at the extra nodes
  (an ``array`` template continues with its edge value).

Continuations longer than :data:`MAX_EXTENSION` spacings are refused with a message: the extra chain's
covariance is dense.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ..foundations.grid import Axis
from ..foundations.operators import axis_operator, highest_order
from ..foundations.templates import template_values

#: Most grid spacings a query may lie beyond the grid's edge (about ten times the range of a 200-node grid).
MAX_EXTENSION = 2000
#: Columns of ``A^{-1} H^T`` solved at a time (memory ``n x BLOCK``).
BLOCK = 256


@dataclass
class Continuation:
    """The prior's continuation on one side of the grid: extra nodes ``x_ext`` (nearest first), the map ``M`` from
    the ``last`` edge nodes, and ``C``, the covariance of ``eps`` times beta (``(lam hx Q_ee)^{-1}``)."""

    x_ext: np.ndarray
    last: np.ndarray
    M: np.ndarray
    C: np.ndarray


@dataclass
class QueryMap:
    """Each query as a linear functional of the node values plus the continuation: ``h(x_q) = H_q h + c_jq +
    (W eps)_q`` for component j.  ``H`` (q x n, sparse), ``offsets`` (m x q), and per side ``(rows, W, C)``."""

    H: sp.csr_matrix
    offsets: np.ndarray
    noise: list


def _templates_at(model, x: np.ndarray, edge: int) -> np.ndarray:
    """The templates at the continuation's nodes (an array template keeps its value at node ``edge``)."""
    out = np.empty((model.m, x.size))
    for j, spec in enumerate(model.template_specs):
        out[j] = model.templates[j, edge] if spec.get("kind") == "array" else template_values(spec, x)
    return out


def _continuation(model, side: str, m: int) -> Continuation:
    """The continuation over ``m`` extra nodes to the ``right`` or the ``left`` (module docstring)."""
    n, h, coeffs = model.n, model.hx, model.coeffs
    if model.lam == 0 or not any(coeffs.values()):
        raise ValueError("BFTRegressor: with lambda = 0 (or every prior order 0) the prior says nothing beyond the "
                         "grid; predict within [x_min, x_max], or fit with a prior")
    k = max(highest_order(coeffs), 1)
    k = min(k, n)
    Q = axis_operator(Axis(0.0, h * (k + m - 1), k + m, "free"), **coeffs).toarray()
    if side == "right":
        inner, ext = np.arange(k), np.arange(k, k + m)
        last = np.arange(n - k, n)
        x_ext = model.axis.max + h * np.arange(1, m + 1)
    else:  # the mirror image: extra nodes first (far to near), then the first k nodes
        inner, ext = np.arange(m, m + k), np.arange(m - 1, -1, -1)  # nearest first
        last = np.arange(k)
        x_ext = model.axis.min - h * np.arange(1, m + 1)
    Qee = Q[np.ix_(ext, ext)]
    Qei = Q[np.ix_(ext, inner)]
    try:
        chol = sla.cho_factor(Qee)
    except np.linalg.LinAlgError:
        raise ValueError("BFTRegressor: the prior's continuation beyond the grid is singular; predict within "
                         "[x_min, x_max]") from None
    M = -sla.cho_solve(chol, Qei)
    C = sla.cho_solve(chol, np.eye(m)) / (model.lam * h)
    return Continuation(x_ext, last, M, 0.5 * (C + C.T))


def query_map(model, x) -> QueryMap:
    """:class:`QueryMap` of the query points ``x`` (finite numbers, any shape flattened) for ``model`` (a
    :class:`bftcore.models.regression.RegressionModel`)."""
    x = np.asarray(x, dtype=float).ravel()
    axis, n, h = model.axis, model.n, model.hx
    q = x.size
    rows, cols, vals = [], [], []
    offsets = np.zeros((model.m, q))
    noise = []
    u = (x - axis.min) / h if n > 1 else np.zeros(q)
    if axis.boundary == "periodic" and n > 1:
        u = np.mod(u, n)
        i = np.minimum(np.floor(u).astype(int), n - 1)
        t = u - i
        j = (i + 1) % n
        inside = np.ones(q, bool)
    else:
        inside = (u >= -1e-9) & (u <= n - 1 + 1e-9)
        uc = np.clip(u, 0, n - 1)
        i = np.minimum(np.floor(uc).astype(int), max(n - 2, 0))
        t = uc - i if n > 1 else np.zeros(q)
        j = np.minimum(i + 1, n - 1)
    idx = np.flatnonzero(inside)
    rows += [idx, idx]
    cols += [i[idx], j[idx]]
    vals += [1 - t[idx], t[idx]]
    for side, far in (("right", u > n - 1 + 1e-9), ("left", u < -1e-9)):
        sel = np.flatnonzero(far & ~inside)
        if not sel.size:
            continue
        e = u[sel] - (n - 1) if side == "right" else -u[sel]          # spacings beyond the edge, > 0
        m = int(np.ceil(e.max() - 1e-9))
        if m > MAX_EXTENSION:
            worst = x[sel][int(np.argmax(e))]
            raise ValueError(f"BFTRegressor: x = {worst:g} lies {e.max():.0f} grid spacings beyond the fitted grid "
                             f"[{axis.min:g}, {axis.max:g}]; predictions reach at most {MAX_EXTENSION} spacings "
                             f"beyond it (fit with x_min, x_max covering the points, or fewer nodes)")
        c = _continuation(model, side, m)
        a = np.minimum(np.floor(e).astype(int), m - 1)                 # between extra node a and a + 1 (0: the edge)
        s = e - a
        edge = n - 1 if side == "right" else 0
        t_last = model.templates[:, c.last]                            # (m_templates, k)
        t_ext = _templates_at(model, c.x_ext, edge)                    # (m_templates, m)
        W = np.zeros((sel.size, m))
        for r, (ar, sr) in enumerate(zip(a, s)):
            for node, weight in ((ar, 1 - sr), (ar + 1, sr)):
                if weight == 0:
                    continue
                if node == 0:
                    rows.append(np.array([sel[r]]))
                    cols.append(np.array([edge]))
                    vals.append(np.array([weight]))
                    continue
                row = c.M[node - 1]
                rows.append(np.full(c.last.size, sel[r]))
                cols.append(c.last)
                vals.append(weight * row)
                offsets[:, sel[r]] += weight * (t_ext[:, node - 1] - t_last @ row)
                W[r, node - 1] += weight
        noise.append((sel, W, c.C))
    H = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(q, n))
    return QueryMap(H, offsets, noise)


def _within(model, H: sp.csr_matrix, full: bool) -> np.ndarray:
    """``H A^{-1} H^T`` (``full``) or its diagonal, by sparse solves of ``BLOCK`` columns at a time."""
    q = H.shape[0]
    HT = H.T.tocsc()
    out = np.zeros((q, q)) if full else np.zeros(q)
    for s0 in range(0, q, BLOCK):
        cols = slice(s0, min(q, s0 + BLOCK))
        Y = model.solve_A(HT[:, cols].toarray())                      # n x block
        if full:
            out[:, cols] = H @ Y
        else:
            out[cols] = np.einsum("ij,ij->j", HT[:, cols].toarray(), Y)
    return 0.5 * (out + out.T) if full else out


def posterior_at(model, x, beta: float, b: np.ndarray, full: bool = False):
    """Posterior mean of h at ``x``, and its variance (``full``: its covariance), noise-free: the mixture over
    components j with weights ``b`` of ``N(H t̄_j + c_j, (H A^{-1} H^T + W C W^T) / beta)``."""
    qm = query_map(model, x)
    comp = (qm.H @ model.component_solutions.T).T + qm.offsets       # (m, q)
    mean = b @ comp
    spread = comp - mean
    within = _within(model, qm.H, full)
    if full:
        cov = within / beta + (spread.T * b) @ spread
        for sel, W, C in qm.noise:
            cov[np.ix_(sel, sel)] += W @ C @ W.T / beta
        return mean, 0.5 * (cov + cov.T)
    var = within / beta + b @ spread ** 2
    for sel, W, C in qm.noise:
        var[sel] += np.einsum("ij,jk,ik->i", W, C, W) / beta
    return mean, np.maximum(var, 0.0)


def samples_at(model, x, beta: float, n: int, rng) -> np.ndarray:
    """Exact draws of h at ``x`` (shape (n, q)): each draw's component j ~ b_j, its node values from the exact
    posterior (:meth:`~bftcore.models.regression.RegressionModel.posterior_samples`), then the continuation's own
    noise beyond the grid."""
    qm = query_map(model, x)
    gen = np.random.default_rng(rng)  # one stream for the nodes and the continuation
    comps, nodes = model.posterior_draws(beta, n, gen)
    out = (qm.H @ nodes.T).T + qm.offsets[comps]
    for sel, W, C in qm.noise:
        L = np.linalg.cholesky(C / beta)
        out[:, sel] += (W @ (L @ gen.standard_normal((C.shape[0], n)))).T
    return out
