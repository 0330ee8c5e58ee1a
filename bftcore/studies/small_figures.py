"""The small figures of chapters 2-5 of [000] (Lemm, *Bayesian Field Theory*), as JSON documents, and the registry of
figures that ``python -m bftcore reproduce NAME`` computes without a grid solver.

* ``fig3`` (§2.1.5, eqs (32), (39), (40)): the decay of the mutual information M(Y_a; Y_b | f) of the predictive
  density under sequential Bayes updates, four states h_l with (h_l(x_a), h_l(x_b)) in {+-1}^2.
* ``fig6`` (§5.3.6): the joint posterior of h and the regularisation parameter gamma, 0-dimensional, y_D = 0,
  y_D0 = 1, for a uniform and for the compensating hyperprior.
* ``fig9``, ``fig10`` (§6.3): the joint posterior of h and the inverse temperature beta of the 0-dimensional prior
  mixture with templates +-1.
* ``fig1_002``: Fig 1 of [002] (Malzahn & Opper), replica learning curves of GP regression on Boston housing
  (:mod:`bftcore.models.replica_tables`, whose docstring states the choices the paper leaves open).

The paper leaves several things open; the decisions:

* Fig 3: sigma = 1, the correlated prior (0.45, 0.05, 0.05, 0.45), the factorial prior (0.7, 0.3) x (0.4, 0.6);
  50 data from the true h = (+1, +1) drawn by ``default_rng(1)`` as ``x = x_b if u >= 1/2`` with ``u = rng.random(50)``,
  then ``y = h(x) + sigma * rng.standard_normal(50)``.  The "unlucky" order is the same 50 data sorted by increasing
  y (stable): the likelihood ratio of h(x) = +1 to -1 is exp(2 y / sigma^2) at either x, so the data most in favour
  of the wrong sign come first.  As the caption says, the factorial panel uses the same (unlucky) data.  The draw
  convention matters for the digest's check "M < 1e-3 after 2 points": it holds here (M(2) = 9.1e-5), but x drawn
  by ``rng.integers(0, 2, 50)`` first gives M(2) = 0.058 (its first y is -0.89, which favours (-1, -1)).  In the
  unlucky order M rises again (to 0.07 near n = 18) while the posterior moves from (-1, -1) to the true (+1, +1).
  M is computed by a product trapezoid rule (:func:`mutual_information`), checked against 961 nodes and against
  Monte Carlo (:func:`mutual_information_mc`).
* Fig 6 / 9 / 10: ``log_p`` is the log of the joint density with respect to dh dgamma (dh dbeta), up to a constant,
  on a log-spaced gamma (beta) grid: its maximum is the paper's, the grid's spacing does not enter it.
* Fig 9: the caption says y_D = 0.1, the printed formula has h^2 (y_D = 0): both are drawn.  The compensating
  hyperprior is p(beta) ∝ 1/beta (the printed formula has no ln beta left: the likelihood and the prior each bring a
  normalisation sqrt(beta), together beta), not the 1/sqrt(beta) the caption states.  With 1/sqrt(beta) the
  maximum would be inside the grid (h = y_D roughly, beta near 1), not at beta = 0 as the caption says.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.optimize import minimize, minimize_scalar
from scipy.special import kl_div

from ..foundations import potentials
from ..models import image_completion as ic
from ..models import replica_tables
from .byy_demo import byy_document
from .learning import parse_sizes

__all__ = ["STATES", "CORRELATED_PRIOR", "FACTORIAL_PRIOR", "mutual_information", "mutual_information_mc",
           "fig3_data", "sequential_posteriors", "fig3_document", "fig6_log_p", "fig6_document", "mixture_log_p",
           "fig9_document", "fig10_document", "grid_maxima", "SmallFigure", "SMALL_FIGURES", "PAPER_000", "PAPER_001",
           "PAPER_002", "PAPER_004", "fig1_002_document", "image_completion_document"]

PAPER_000 = "000 (Lemm, BFT)"
PAPER_001 = "001 (Lemm, prior mixtures)"
PAPER_002 = "002 (Malzahn & Opper)"
PAPER_004 = "004 (Xu, BYY)"

# ============================================================================================ Fig 3
#: The four states of Nature (h_l(x_a), h_l(x_b)), in the order of every prior and posterior vector.
STATES = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
#: A prior correlating the signs at x_a and x_b (the paper does not give its prior).
CORRELATED_PRIOR = (0.45, 0.05, 0.05, 0.45)
#: A factorial prior p(h) = p(h(x_a)) p(h(x_b)), (0.7, 0.3) x (0.4, 0.6): M = 0 for it and all its posteriors (37).
FACTORIAL_PRIOR = tuple(float(v) for v in np.outer([0.7, 0.3], [0.4, 0.6]).ravel())
FIG3_SIGMA = 1.0
FIG3_DATA = 50
FIG3_SEED = 1
FIG3_TRUE = (1.0, 1.0)
#: Nodes per axis of the quadrature of (32) on [-1 - 10 sigma, 1 + 10 sigma]; 961 nodes agree to 1e-14.
QUADRATURE_NODES = 241


def _gauss(y: np.ndarray, mean: np.ndarray, sigma: float) -> np.ndarray:
    """N(y; mean, sigma^2) for every mean (rows) and y (columns)."""
    return np.exp(-(y[None, :] - mean[:, None]) ** 2 / (2 * sigma ** 2)) / (math.sqrt(2 * math.pi) * sigma)


def mutual_information(weights, sigma: float = FIG3_SIGMA, nodes: int = QUADRATURE_NODES) -> float:
    """Mutual information M(Y_a; Y_b | f), eq. (32), of the predictive density (39)
    p(y_a, y_b | f) = sum_l w_l N(y_a; h_l(x_a), sigma^2) N(y_b; h_l(x_b), sigma^2).

    Product trapezoid rule on a uniform grid of ``nodes`` per axis over [-1 - 10 sigma, 1 + 10 sigma] (the integrand is
    smooth and decays like a Gaussian, so the rule converges geometrically).  The marginals are exact (sums of
    Gaussians), and the integrand is written p ln(p / q) - p + q with q = p(y_a) p(y_b): it has the same integral
    (both integrate to the same value on this grid, which is symmetric about 0) and is >= 0 at every node, so that
    rounding leaves M >= 0 and a factorial state gives M at the level of rounding, not of the quadrature error.
    """
    w = np.asarray(weights, dtype=float)
    half = 1.0 + 10.0 * sigma
    y = np.linspace(-half, half, nodes)
    dy = y[1] - y[0]
    na, nb = _gauss(y, STATES[:, 0], sigma), _gauss(y, STATES[:, 1], sigma)
    joint = np.einsum("l,li,lj->ij", w, na, nb)
    q = np.outer(w @ na, w @ nb)
    # kl_div is >= 0 in exact arithmetic; its rounding can dip to -1e-30 at nodes where p = q
    return float(np.maximum(kl_div(joint, q), 0.0).sum() * dy * dy)


def mutual_information_mc(weights, sigma: float = FIG3_SIGMA, samples: int = 200_000,
                          seed: int = 0) -> tuple[float, float]:
    """M of (32) by Monte Carlo (an independent route to :func:`mutual_information`): the mean of
    ln p(y_a, y_b) - ln p(y_a) - ln p(y_b) over draws from the predictive density, and its standard error."""
    w = np.asarray(weights, dtype=float)
    rng = np.random.default_rng(seed)
    state = rng.choice(len(w), size=samples, p=w / w.sum())
    ya = STATES[state, 0] + sigma * rng.standard_normal(samples)
    yb = STATES[state, 1] + sigma * rng.standard_normal(samples)
    na, nb = _gauss(ya, STATES[:, 0], sigma), _gauss(yb, STATES[:, 1], sigma)
    terms = np.log(w @ (na * nb)) - np.log(w @ na) - np.log(w @ nb)
    return float(terms.mean()), float(terms.std(ddof=1) / math.sqrt(samples))


def fig3_data(n: int = FIG3_DATA, seed: int = FIG3_SEED, true_h=FIG3_TRUE, sigma: float = FIG3_SIGMA,
              unlucky: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The training data of Fig 3: the index of x (0 = x_a, 1 = x_b, each with p = 1/2) and y ~ N(h(x), sigma^2).
    ``unlucky``: the same data sorted by increasing y, those most in favour of the wrong sign first."""
    rng = np.random.default_rng(seed)
    x = (rng.random(n) >= 0.5).astype(int)
    y = np.asarray(true_h, dtype=float)[x] + sigma * rng.standard_normal(n)
    if unlucky:
        order = np.argsort(y, kind="stable")
        x, y = x[order], y[order]
    return x, y


def sequential_posteriors(prior, x: np.ndarray, y: np.ndarray, sigma: float = FIG3_SIGMA) -> np.ndarray:
    """p(h_l | D_n, ..., D_0) for n = 0 .. len(x) by Bayes' rule (40), one datum at a time (rows: n)."""
    w = np.asarray(prior, dtype=float) / np.sum(prior)
    out = [w]
    for xi, yi in zip(x, y):
        log_like = -(yi - STATES[:, xi]) ** 2 / (2 * sigma ** 2)
        w = w * np.exp(log_like - log_like.max())
        w = w / w.sum()
        out.append(w)
    return np.array(out)


def fig3_document() -> dict:
    """Fig 3: three panels (correlated prior; correlated prior with the unlucky order; factorial prior with the
    unlucky data, as the caption's (e, f)), each with M(n) and the posterior for n = 0 .. 50."""
    panels = []
    for label, prior, unlucky in (("correlated prior", CORRELATED_PRIOR, False),
                                  ("correlated prior, unlucky order", CORRELATED_PRIOR, True),
                                  ("factorial prior (0.7, 0.3) x (0.4, 0.6)", FACTORIAL_PRIOR, True)):
        x, y = fig3_data(unlucky=unlucky)
        post = sequential_posteriors(prior, x, y)
        panels.append({"label": label, "prior": [float(v) for v in prior], "sigma": FIG3_SIGMA,
                       "order": "increasing y" if unlucky else "as drawn",
                       "M": [mutual_information(w) for w in post], "posterior": post.tolist(),
                       "data": [[int(a), float(b)] for a, b in zip(x, y)]})
    return {"figure": "fig3", "states": STATES.tolist(), "true_h": list(FIG3_TRUE), "seed": FIG3_SEED,
            "quadrature": {"nodes": QUADRATURE_NODES, "range": [-1 - 10 * FIG3_SIGMA, 1 + 10 * FIG3_SIGMA]},
            "panels": panels}


# ============================================================================================ Figs 6, 9, 10
#: The log-spaced grid of gamma (Fig 6) and beta (Figs 9, 10), and its number of nodes; the h grid's nodes.
LOG_RANGE = (1e-3, 1e3)
LOG_NODES = 121
H_NODES = 121


def fig6_log_p(h, gamma, hyperprior: str = "uniform"):
    """log p(h, gamma | y_D = 0, y_D0 = 1) + const of Fig 6: -h^2/2 - (gamma/2)(h - 1)^2 + (1/2) ln gamma + ln p(gamma),
    with p(gamma) = 1 (``uniform``) or the compensating 1/sqrt(gamma) (``compensating``), which cancels the prior's
    normalisation: the profile over h is then decreasing in gamma, so that the maximum is at gamma = 0, h = 0."""
    h, gamma = np.asarray(h, dtype=float), np.asarray(gamma, dtype=float)
    out = -0.5 * h ** 2 - 0.5 * gamma * (h - 1.0) ** 2
    return out + 0.5 * np.log(gamma) if hyperprior == "uniform" else out


def mixture_log_p(h, beta, y_d: float, hyperprior: str = "uniform"):
    """log p(h, beta | y_D, y_D0 = +-1) + const of Figs 9 and 10: ln beta - beta (h - y_D)^2 / 2
    + ln(e^{-beta (h-1)^2/2} + e^{-beta (h+1)^2/2}) + ln p(beta), with p(beta) = 1 (``uniform``) or the compensating
    1/beta (``compensating``: the formula printed in Fig 9; see the module docstring)."""
    h, beta = np.asarray(h, dtype=float), np.asarray(beta, dtype=float)
    out = -0.5 * beta * (h - y_d) ** 2 + np.logaddexp(-0.5 * beta * (h - 1.0) ** 2, -0.5 * beta * (h + 1.0) ** 2)
    return out + np.log(beta) if hyperprior == "uniform" else out


def grid_maxima(log_p: Callable, h: np.ndarray, s: np.ndarray) -> list[dict]:
    """The local maxima of ``log_p(h, s)`` (s the log-spaced parameter): every node above its 8 neighbours (ties
    broken by position), refined by L-BFGS-B in (h, ln s) within the grid; a maximum on the first or last s row is
    reported there with ``edge`` "lower" or "upper" (the maximum runs off the grid) and h maximised along that row.
    Each maximum has ``h``, ``s``, ``log_p`` and ``edge`` (None inside the grid); sorted by log_p, largest first."""
    H, S = np.meshgrid(h, s, indexing="ij")
    z = log_p(H, S)
    padded = np.pad(z, 1, constant_values=-np.inf)
    core = padded[1:-1, 1:-1]
    is_max = np.ones_like(z, dtype=bool)
    for di in (-1, 0, 1):
        for dj in (-1, 0, 1):
            if di or dj:
                neighbour = padded[1 + di:padded.shape[0] - 1 + di, 1 + dj:padded.shape[1] - 1 + dj]
                # strictly above the neighbours before, at least as high as those after: one node per flat top
                is_max &= core > neighbour if (di, dj) < (0, 0) else core >= neighbour
    found: list[dict] = []
    bounds = [(float(h[0]), float(h[-1])), (math.log(s[0]), math.log(s[-1]))]
    for i, j in zip(*np.nonzero(is_max)):
        if j in (0, len(s) - 1):
            edge = "lower" if j == 0 else "upper"
            best = minimize_scalar(lambda v, sj=s[j]: -float(log_p(v, sj)), bounds=(h[0], h[-1]), method="bounded",
                                   options={"xatol": 1e-10})
            hv, sv = float(best.x), float(s[j])
        else:
            edge = None
            hv, sv = _climb(log_p, [h[i], math.log(s[j])], bounds)
        if any(abs(m["h"] - hv) < 1e-6 and abs(math.log(m["s"] / sv)) < 1e-6 for m in found):
            continue
        if edge is None and not _is_maximum(log_p, hv, sv, bounds):
            continue  # a saddle the grid took for a maximum (Fig 9 at y_D = 0: h = 0, beta = 2, between two maxima)
        found.append({"h": hv, "s": sv, "log_p": float(log_p(hv, sv)), "edge": edge})
    return sorted(found, key=lambda m: -m["log_p"])


def _climb(log_p: Callable, start, bounds) -> tuple[float, float]:
    """L-BFGS-B uphill from ``start`` = (h, ln s) within ``bounds``: the point reached, as (h, s)."""
    res = minimize(lambda v: -float(log_p(v[0], math.exp(v[1]))), start, method="L-BFGS-B", bounds=bounds,
                   options={"ftol": 1e-15, "gtol": 1e-12})
    return float(res.x[0]), float(math.exp(res.x[1]))


def _is_maximum(log_p: Callable, h: float, s: float, bounds, radius: float = 0.05) -> bool:
    """Whether no climb from 8 points around (h, s) (a ring of ``radius`` in (h, ln s)) ends higher: a saddle with a
    degenerate Hessian (Fig 9 at y_D = 0: h = 0, beta = 2) passes a test of the Hessian, not this one."""
    top = float(log_p(h, s))
    for angle in np.linspace(0, 2 * math.pi, 8, endpoint=False):
        start = [h + radius * math.cos(angle), math.log(s) + radius * math.sin(angle)]
        start = [min(max(v, lo), hi) for v, (lo, hi) in zip(start, bounds)]
        if float(log_p(*_climb(log_p, start, bounds))) > top + 1e-9:
            return False
    return True


def _heatmap_panel(log_p: Callable, h: np.ndarray, name: str, extra: dict) -> dict:
    s = np.geomspace(*LOG_RANGE, LOG_NODES)
    H, S = np.meshgrid(h, s, indexing="ij")
    maxima = []
    for m in grid_maxima(log_p, h, s):
        entry = {"h": m["h"], name: m["s"], "log_p": m["log_p"]}
        if m["edge"] is not None:
            entry["edge"] = m["edge"]
        maxima.append(entry)
    return {**extra, "h": h.tolist(), name: s.tolist(), "log_p": log_p(H, S).tolist(), "maxima": maxima}


def fig6_document() -> dict:
    """Fig 6: log p(h, gamma) on h in [-0.5, 1.5] x gamma in [1e-3, 1e3] (log-spaced), for the uniform and the
    compensating hyperprior, with the maxima (``edge`` when the maximum runs off the grid: uniform at the upper
    edge, gamma -> infinity, h -> 1; compensating at the lower edge, gamma -> 0, h -> 0)."""
    h = np.linspace(-0.5, 1.5, H_NODES)
    panels = [_heatmap_panel(lambda a, b, k=kind: fig6_log_p(a, b, k), h, "gamma",
                             {"hyperprior": kind, "y_D": 0.0, "y_D0": 1.0}) for kind in ("uniform", "compensating")]
    return {"figure": "fig6", "density": "log p with respect to dh dgamma, up to a constant", "panels": panels}


def _mixture_document(name: str, cases) -> dict:
    h = np.linspace(-1.5, 1.5, H_NODES)
    panels = [_heatmap_panel(lambda a, b, yd=y_d, k=kind: mixture_log_p(a, b, yd, k), h, "beta",
                             {"hyperprior": kind, "y_D": y_d, "y_D0": [1.0, -1.0]}) for y_d, kind in cases]
    return {"figure": name, "density": "log p with respect to dh dbeta, up to a constant",
            "compensating": "p(beta) ∝ 1/beta (the formula printed in Fig 9; its text says 1/sqrt(beta))",
            "panels": panels}


def fig9_document() -> dict:
    """Fig 9: y_D = 0 (the printed formula) and y_D = 0.1 (the caption), each for the uniform and the compensating
    hyperprior on beta."""
    return _mixture_document("fig9", [(y, k) for y in (0.0, 0.1) for k in ("uniform", "compensating")])


def fig10_document() -> dict:
    """Fig 10: the uniform hyperprior at y_D = 0.3 and 0.5; the maximum approaches the one-component asymptote
    h* = (1 + y_D)/2, beta* = 4/(1 - y_D)^2 as y_D grows."""
    return _mixture_document("fig10", [(0.3, "uniform"), (0.5, "uniform")])


# ============================================================================================ [002] Fig 1
#: Fig 1's sizes m: the paper says only that the 506 rows are "highly oversampled"; 10 log-spaced sizes from 10 to
#: 10 N = 5060 reach that regime (about 10 s with one core).
FIG1_002_SIZES = "10:5060:10"


def fig1_002_document() -> dict:
    """Seed 002's Fig 1 on Boston housing (:mod:`bftcore.models.replica_tables`): inputs onto [0, 1] (docs/replica.md),
    l^2 = 147.1, v_i = sqrt(var_i), sigma^2 = 0.01, the whole table and its halves, replica theory and bootstrap
    simulation (20 resamples a size,
    seed 0) at :data:`FIG1_002_SIZES`; ``rows`` as ``python -m bftcore replica --json`` prints them, and the
    figure's ``panels``."""
    s = replica_tables.BOSTON_SETTINGS
    doc = replica_tables.replica_rows(replica_tables.boston_table(), s.l2, s.noise,
                                      parse_sizes(FIG1_002_SIZES, "sizes"), scales=s.scales, halves=True,
                                      inputs=s.inputs)
    doc.update(figure="fig1_002", panels=replica_tables.figure_panels(doc))
    return doc


# ============================================================================================ the registry
# ============================================================================================ 001 Fig 4
#: The temperatures of the figure, in units of beta_c, and of the sweep (up from the ghost, down from the frown).
IMAGE_TEMPERATURES = (5.0, 0.1)
IMAGE_SWEEP = (0.1, 0.3, 0.6, 1.0, 1.5, 2.5, 3.5, 5.0, 10.0)


def _rmse(a, b) -> float:
    return float(np.sqrt(np.mean((np.asarray(a, dtype=float) - np.asarray(b, dtype=float)) ** 2)))


def image_completion_document(shape=ic.TEST_SHAPE) -> dict:
    """[001] Fig 4 with synthetic faces (:mod:`bftcore.models.image_completion`): the completion at 5 beta_c and
    0.1 beta_c from a cold start, and the beta sweep of a_1 that shows the hysteresis of 001 Fig 3.

    ``sweep``: ``beta_over_beta_c`` (increasing), ``a1_up`` (warm-started upward from the cold solution at the
    lowest beta: it follows the smiling branch), ``a1_down`` (warm-started downward from the frowning component
    solution t̄_2 at the highest beta: the metastable frowning branch, a_1 ~ 0, until it ends and the completion
    jumps to the smiling one), ``hysteresis`` (true if some beta has a_1 > 0.9 up and < 0.1 down) and
    ``down_jump_beta_over_beta_c`` (the first beta on the way down at which a_1 > 0.5 again, or null).
    The images are 90 x 120 (width x height), the tests' size: the paper's 180 x 240 is ``shape=ic.DEMO_SHAPE``."""
    (smile, frown), original, data = ic.synthetic_problem(shape)
    model = ic.ImageCompletion((smile, frown), data)
    temperatures = []
    images: dict = {"original": original, "data_mask": data.mask(), "templates": [smile, frown]}
    for f in IMAGE_TEMPERATURES:
        s = model.complete(f * model.beta_c)
        temperatures.append({"beta_over_beta_c": f, "a": s.a.tolist(),
                             "theta": [ic.theta_dict(t) for t in s.theta], "rmse": _rmse(s.h, original),
                             "iterations": s.iterations, "converged": s.converged})
        images[f"h_{f:g}"] = s.h
    up: list[float] = []
    state = None
    for f in IMAGE_SWEEP:
        state = model.complete(f * model.beta_c, init=state, tol=1e-4)
        up.append(float(state.a[0]))
    identity = np.tile(ic.THETA_IDENTITY, (2, 1))
    state = ic.CompletionState(model.component_solutions(identity)[1], np.array([0.0, 1.0]), identity, 0.0)
    down: list[float] = []
    for f in IMAGE_SWEEP[::-1]:
        state = model.complete(f * model.beta_c, init=state, tol=1e-4)
        down.append(float(state.a[0]))
    down = down[::-1]
    jump = next((f for f, a in zip(IMAGE_SWEEP[::-1], down[::-1]) if a > 0.5), None)
    return {"figure": "image_completion", "paper": PAPER_001, "shape": list(shape), "n_data": int(data.pixels.size),
            "sigma": data.sigma, "seed": ic.SEED, "lam": model.lam, "beta_c": model.beta_c,
            "rmse_template": _rmse(smile, original), "theta_true": ic.theta_dict(ic.THETA_TRUE),
            "temperatures": temperatures,
            "sweep": {"beta_over_beta_c": list(IMAGE_SWEEP), "a1_up": up, "a1_down": down,
                      "hysteresis": bool(any(u > 0.9 and d < 0.1 for u, d in zip(up, down))),
                      "down_jump_beta_over_beta_c": jump},
            "_images": images}


@dataclass(frozen=True)
class SmallFigure:
    """A figure computed without a grid solver: ``compute()`` returns its JSON document, ``drawer`` names the
    declaration of :data:`bftcore.outputs.figures.DRAWERS` that draws it (``"mutual_information"``,
    ``"joint_posterior"``, or ``"curves"`` for a document of panels of named x/y curves)."""
    paper: str
    figure: str
    title: str
    compute: Callable[[], dict]
    drawer: str
    #: The same figure at the paper's full size, where it differs from the tests' (``reproduce NAME --full-size``).
    full_size: Callable[[], dict] | None = None


#: name -> the figure: ``python -m bftcore reproduce NAME`` computes, prints (``--json``) and draws (``--png``) each
#: of them, and ``reproduce --list`` names them.  A figure of curves is one more entry, e.g.
#: ``"fig5": SmallFigure(PAPER_000, "Fig 5", "robust error functions", robust_errors_document, "curves"),``
#: with ``robust_errors_document()`` returning ``{"figure": "fig5", "panels": [{"title": ..., "xlabel": ...,
#: "ylabel": ..., "curves": [{"label": ..., "x": [...], "y": [...]}, ...]}, ...]}``.
SMALL_FIGURES: dict[str, SmallFigure] = {
    "fig3": SmallFigure(PAPER_000, "Fig 3", "decay of mutual information under sequential Bayes updates",
                        fig3_document, "mutual_information"),
    "fig6": SmallFigure(PAPER_000, "Fig 6", "joint posterior of h and gamma, uniform vs compensating hyperprior",
                        fig6_document, "joint_posterior"),
    "fig9": SmallFigure(PAPER_000, "Fig 9", "joint posterior of h and beta, prior mixture, y_D = 0 and 0.1",
                        fig9_document, "joint_posterior"),
    "fig10": SmallFigure(PAPER_000, "Fig 10", "joint posterior of h and beta, prior mixture, y_D = 0.3 and 0.5",
                         fig10_document, "joint_posterior"),
    "fig5": SmallFigure(PAPER_000, "Fig 5", "robust error functions: two and eleven Gaussians, ε-insensitive",
                        potentials.fig5_document, "curves"),
    "fig12": SmallFigure(PAPER_000, "Fig 12", "non-quadratic potentials ψ and ψ′: cusp, cup, inverted cup",
                         potentials.fig12_document, "curves"),
    "fig1_002": SmallFigure(PAPER_002, "Fig 1", "replica learning curves on Boston housing: theory, bootstrap "
                            "simulation, the halves", fig1_002_document, "curves"),
    # its BFT reference density is a (1-D, fast) grid fit: bftcore.studies.byy_demo
    "byy": SmallFigure(PAPER_004, "appendix", "BYY harmony learning prunes a 6-component start to 3; ML keeps more",
                       byy_document, "curves"),
    "image_completion": SmallFigure(PAPER_001, "Fig 4", "image completion with two deformable templates "
                                    "(synthetic faces), low and high temperature", image_completion_document,
                                    "image_completion", lambda: image_completion_document(ic.DEMO_SHAPE)),
}
