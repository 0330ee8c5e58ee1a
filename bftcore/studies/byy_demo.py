"""The BYY demo of seed 004 (issue 30 part 2), ``python -m bftcore reproduce byy``: harmony learning against
maximum likelihood on three Gaussians, with Lemm's nonparametric density of the same samples as the reference.

Data: N(-4, 1), N(0, 1), N(4, 1), 100 samples each from ``default_rng(seed)`` (one cluster after the other), seeds
0..9.  Start: 6 components at the quantiles (:func:`bftcore.models.byy.quantile_start`).  Per seed: the number of
components with weight > 0.05 for harmony and for ML, their fitted mixtures, and the held-out log-loss
``-mean ln p(y)`` of each on 10^4 samples of the true mixture drawn by ``default_rng(HELDOUT_SEED)``; the BFT density
(the 1-D density kind, prior l2 on L, lambda at its Laplace-evidence maximum) of the same samples on its grid, whose
log-density is interpolated linearly between nodes for the log-loss.  The true mixture's own log-loss is the floor.

Decisions: the BFT grid is [-10, 10] with 201 nodes (the held-out sample lies inside it: beyond 10 the true density is
below 1e-9 of its peak); the held-out seed 2026 is not among the training seeds.
"""
from __future__ import annotations

import numpy as np

from ..models import byy
from ..models.fitting import fit

CENTRES = (-4.0, 0.0, 4.0)
PER_CLUSTER = 100
SEEDS = tuple(range(10))
START_COMPONENTS = 6
HELDOUT_SEED = 2026
HELDOUT_SIZE = 10_000
Y_MIN, Y_MAX, Y_NODES = -10.0, 10.0, 201
GRID = {"y": {"min": Y_MIN, "max": Y_MAX, "n": Y_NODES, "boundary": "neumann"}}
TRUE = byy.Mixture(np.full(3, 1 / 3), np.array(CENTRES), np.ones(3))


def samples(seed: int) -> np.ndarray:
    """The training sample of one seed: 100 from each cluster."""
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(m, 1.0, PER_CLUSTER) for m in CENTRES])


def heldout(size: int = HELDOUT_SIZE, seed: int = HELDOUT_SEED) -> np.ndarray:
    """Samples of the true mixture (equal weights), for the held-out log-loss."""
    rng = np.random.default_rng(seed)
    return np.asarray(CENTRES)[rng.integers(0, len(CENTRES), size)] + rng.standard_normal(size)


def bft_density(x: np.ndarray) -> dict:
    """The 1-D density of Lemm's field theory of the samples x, lambda chosen by the Laplace evidence: the grid,
    the density and the chosen lambda."""
    res = fit({"grid": GRID, "prior": {"field": "L", "l2": 1.0}, "data": np.asarray(x).tolist(),
               "choose": {"lambda": "evidence"}})
    y = np.linspace(Y_MIN, Y_MAX, Y_NODES)
    return {"y": y, "P": np.asarray(res["P"], dtype=float)[0], "lambda": float(res["evidence"]["chosen"]["lambda"])}


def grid_log_loss(y: np.ndarray, P: np.ndarray, test: np.ndarray) -> float:
    """-mean ln p at the test points, ln p interpolated linearly between the grid's nodes."""
    if test.min() < y[0] or test.max() > y[-1]:
        raise ValueError(f"held-out samples in [{test.min():.3g}, {test.max():.3g}] leave the grid "
                         f"[{y[0]:.3g}, {y[-1]:.3g}]; widen the grid")
    return float(-np.mean(np.interp(test, y, np.log(P))))


def byy_document(seeds=SEEDS) -> dict:
    """The demo's document (module text), with a "panels" list of curves for ``--png`` (seed 0's densities, and its
    weights over the iterations for harmony and for ML)."""
    test = heldout()
    rows, first = [], None
    for seed in seeds:
        x = samples(seed)
        h = byy.fit_mixture(x, "harmony", k=START_COMPONENTS)
        m = byy.fit_mixture(x, "ml", k=START_COMPONENTS)
        bft = bft_density(x)
        rows.append({"seed": int(seed), "harmony_components": h.kept, "ml_components": m.kept,
                     "harmony": h.mixture.to_dict(), "ml": m.mixture.to_dict(),
                     "harmony_iterations": len(h.history), "ml_iterations": len(m.history),
                     "held_out_log_loss": {"harmony": float(-np.mean(h.mixture.log_density(test))),
                                           "ml": float(-np.mean(m.mixture.log_density(test))),
                                           "bft": grid_log_loss(bft["y"], bft["P"], test)},
                     "bft_lambda": bft["lambda"]})
        if first is None:
            first = (x, h, m, bft)
    summary = {"harmony_components": [r["harmony_components"] for r in rows],
               "ml_components": [r["ml_components"] for r in rows],
               "median_harmony_components": float(np.median([r["harmony_components"] for r in rows])),
               "median_ml_components": float(np.median([r["ml_components"] for r in rows])),
               "harmony_never_more_than_ml": all(r["harmony_components"] <= r["ml_components"] for r in rows),
               "mean_held_out_log_loss": {k: float(np.mean([r["held_out_log_loss"][k] for r in rows]))
                                          for k in ("harmony", "ml", "bft")},
               "true_held_out_log_loss": float(-np.mean(TRUE.log_density(test)))}
    panels = []
    if first is not None:
        x, h, m, bft = first
        y = bft["y"]
        panels.append({"title": f"seed {rows[0]['seed']}: densities", "xlabel": "y", "ylabel": "p(y)",
                       "curves": [{"label": "true", "x": y.tolist(), "y": TRUE.density(y).tolist()},
                                  {"label": f"harmony ({h.kept} kept)", "x": y.tolist(),
                                   "y": h.mixture.density(y).tolist()},
                                  {"label": f"ML ({m.kept} kept)", "x": y.tolist(), "y": m.mixture.density(y).tolist()},
                                  {"label": f"BFT, λ = {bft['lambda']:.3g}", "x": y.tolist(), "y": bft["P"].tolist()}]})
        for name, learned in (("harmony", h), ("ML", m)):
            w = np.array(learned.weights_history)
            panels.append({"title": f"seed {rows[0]['seed']}: {name} weights over the iterations",
                           "xlabel": "iteration", "ylabel": "weight α_ℓ",
                           "curves": [{"label": f"component {j + 1}", "x": list(range(len(w))),
                                       "y": w[:, j].tolist()} for j in range(w.shape[1])]})
    return {"figure": "byy", "data": {"centres": list(CENTRES), "width": 1.0, "per_cluster": PER_CLUSTER},
            "start_components": START_COMPONENTS, "keep_threshold": byy.KEEP, "prune_threshold": byy.PRUNE,
            "held_out": {"seed": HELDOUT_SEED, "size": HELDOUT_SIZE}, "bft": {"grid": GRID, "prior": "l2 on L",
                                                                             "lambda": "Laplace evidence"},
            "seeds": rows, "summary": summary, "panels": panels}
