"""Overfitting at the solution (issue 28): the held-out error of the current lambda against the best over a lambda
scan, and a verdict that says which way and what to do.

The early-stopping signature of Fig 27 (:func:`bftcore.foundations.metrics.detect_overfitting`) only sees a run
whose test error first falls and then rises; seven points at lambda = 0.01 overfit from the first iteration and
never show it.  Overfitting is a property of the solution against a better-regularised one, so this module
compares solutions:

* **The scan** (:func:`lambda_scan`): the MAP (Newton, :data:`MAP_SOLVER`) at :data:`SCAN_POINTS` values of lambda,
  log-spaced over the evidence's own range (:func:`bftcore.models.evidence.default_values`: from a prior weaker than the
  data on every mode to one stronger on every mode) with the current lambda among them, each fit warm-started from its
  neighbour's field (from the stiff end down).
* **The held-out error** of each fit, per unit, so that a difference has a standard error:

  - with a truth (``"truth": "paper"``): the test error (711) per x column, ``-sum_y p_true(y|x) L(x, y) hy``;
    the held-out error is their mean over the n_x columns, exact (no sampling), and the units of the paired
    comparison are the columns;
  - without one (the user's own data): K-fold cross-validation (:data:`CV_FOLDS` folds, a fixed permutation), the
    loss ``-L(x_d, y_d)`` of each held-out datum at its node under the fit to the other folds; the units are the
    data.  On a grid over :data:`CV_MAX_NODES` nodes the evidence stands in (``"kind": "evidence"``): it fires when
    the best lambda's log evidence beats the current one's by :data:`EVIDENCE_MARGIN`, and says so.

* **The verdict** (:func:`diagnose`): ``d`` = held-out error at the current lambda minus the lowest over the scan,
  and ``se`` the standard error of the paired differences (their standard deviation over sqrt of their number).
  It fires when ``d > 2 se`` (and d > 0): "overfitting" when the best lambda is larger than the current one
  (the prior is too weak: raise lambda), "underfitting" when it is smaller.  The message gives both errors, the
  best lambda and ``2 se``, the margin the difference had to beat, e.g. ``overfitting (true density): held-out
  error 6.77 against 3.25 at lambda = 0.5 (+-0.2); raise lambda``.

**Regression** (:func:`applies` takes it too): the scan's lambdas span the exact evidence path's default range; the
held-out error is (h - h_true)^2 / 2 per x node against a truth (the fit's test error is their mean), else per
held-out datum (h(x_d) - y_d)^2 / 2 at its node, by the same K-fold cross-validation.

Decisions: the paired standard error, not that of each mean, because the errors of two fits to the same data are
strongly correlated; columns as the units of the truth's test error, because it has no sampling noise of its own
and what varies is how well each x is fitted.  Densities with a prior on L only (the scan's warm starts and the
held-out loss need L); a prior on P gets no diagnosis (``None``).  The best lambda must lie :data:`MIN_DECADES`
decades or more from the current one: neighbouring lambdas are the same regularisation for a class.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Callable

import numpy as np

from ..foundations.config import Valid, checked, copy_document, grid_from_config, kind_of, validate_config
from ..models import evidence
from ..models.density import build_density
from ..models.fitting import evidence_document, run

#: Values of lambda in a scan (the current one is added).
SCAN_POINTS = 13
#: Folds of the cross-validation without a truth.
CV_FOLDS = 5
#: The difference must exceed this many standard errors of the paired differences.
SIGNIFICANCE = 2.0
#: Fewest data for a diagnosis.  Decision: with fewer the fit shows the prior, not learning, and the held-out error
#: is always lowest at the stiffest prior; the paper's two-point figures (fig14, fig16) are not overfitting demos.
MIN_DATA = 5
#: Largest grid cross-validated without a truth: above it (a fitted 30 x 40 grid of a user's table) 5 folds x 14
#: lambdas took 13 s for Old Faithful, so the evidence stands in (one path, about a second).
CV_MAX_NODES = 600
#: The best lambda must be this many decades from the current one (a factor of about 3): neighbours on the scan are
#: the same regularisation for a class, and their tiny, consistent differences pass a paired test (five points of
#: the two_trends regression, lambda 0.88 against 1: "significant" at 2 se and meaningless).
MIN_DECADES = 0.5
#: Without a truth on a larger grid: the evidence's verdict needs the best lambda's log evidence above the current
#: one's by this much (a Bayes factor of 20, "strong" on Kass and Raftery's scale).
EVIDENCE_MARGIN = math.log(20.0)


def applies(cfg: dict) -> bool:
    """Whether the document gets the diagnosis: at least :data:`MIN_DATA` data, and a regression or a density with
    a prior on L."""
    if len(cfg["data"]) < MIN_DATA:
        return False
    return _regression(cfg) or cfg["prior"]["field"] == "L"


def _regression(cfg: dict) -> bool:
    """A function of x (a regression), not a density on the (x, y) grid: by the document's kind."""
    return not kind_of(cfg).y_on_grid


def scan_values(cfg: Valid, n: int = SCAN_POINTS) -> np.ndarray:
    """``n`` lambdas log-spaced over the evidence's range for this document, with its own lambda, ascending (a
    regression's range: its exact evidence path's default, from a prior weaker than the data to one stronger)."""
    if _regression(cfg):
        path = np.asarray(evidence_document(cfg)["lambda"], dtype=float)
        values = np.geomspace(path.min(), path.max(), n)
    else:
        values = evidence.default_values(build_density(cfg), "lambda", n)
    return np.unique(np.append(values, float(cfg["prior"]["lambda"])))


def _truth_units(cfg: dict, fit, grid) -> list | None:
    """The held-out error of a fit against the truth, per unit (module text), or None without a truth: a density's
    test error per x column, a regression's (h - h_true)^2 / 2 per x node (its test error is their mean)."""
    if _regression(cfg):
        truth = fit.model.truth
        return None if truth is None else (0.5 * (np.asarray(fit.h) - truth) ** 2).tolist()
    P_true = fit.problem.P_true
    return None if P_true is None else (-np.sum(P_true * fit.L, axis=1) * grid.hy).tolist()


def _held_out_losses(cfg: dict, fit, grid, pts: np.ndarray) -> np.ndarray:
    """The loss of each held-out datum under a fit to the other folds: -L at its node (density), or
    (h(x_d) - y_d)^2 / 2 at its x node (regression)."""
    if _regression(cfg):
        h = np.asarray(fit.h)
        return 0.5 * (h[fit.model.axis.snap(pts[:, 0])] - pts[:, 1]) ** 2
    ix, iy = grid.snap(pts)
    return -fit.L[ix, iy]


#: The scan's solver: Newton to the MAP, whatever learning algorithm the document shows (Fig 27's 50 iterations of
#: massive relaxation stop short of it; the diagnosis is about solutions).
MAP_SOLVER = {"method": "newton", "min_iter": 1, "max_iter": 200}


def _with(cfg: dict, lam: float, data=None) -> Valid:
    doc = copy_document(cfg)
    doc["prior"]["lambda"] = float(lam)
    doc["solver"].update(MAP_SOLVER)
    if data is not None:
        doc["data"] = data
    doc.pop("choose", None)
    return validate_config(doc)


def _fits(cfg: dict, lambdas: np.ndarray, cancel: Callable[[], bool] | None, on_fit=None):
    """The fits along ``lambdas`` from the stiff end down, each warm from the previous field; None where a fit
    fails (listed in order of ``lambdas``).  ``on_fit(k, fit)`` after each fit that ends."""
    out: list = [None] * len(lambdas)
    init = None
    for k in range(len(lambdas) - 1, -1, -1):
        if cancel is not None and cancel():
            raise InterruptedError("the lambda scan was cancelled")
        try:
            fit = run(_with(cfg, lambdas[k]), init=init)
        except ValueError:
            continue
        out[k] = fit
        init = fit.field
        if on_fit is not None:
            on_fit(k, fit)
    return out


def lambda_scan(config: dict, lambdas=None, folds: int = CV_FOLDS, cancel: Callable[[], bool] | None = None,
                progress: Callable[[dict], None] | None = None) -> dict:
    """Training and held-out error along lambda for a density document (module text).

    Returns ``{"lambda": [...], "train": [...], "held_out": [...], "units": [[...] per lambda], "kind": "truth" or
    "cv", "current": lambda}``; a value whose fit failed is NaN (its units None).  ``progress(doc)``, when given,
    hears the document as it fills in (NaN where nothing is known yet) after each fit on all the data: with a truth
    both errors of each lambda at once, by cross-validation the training errors first and the held-out ones at the
    end (they need every fold)."""
    cfg = checked(config)
    if not applies(cfg):
        raise ValueError(f"the overfitting diagnosis is for a regression, or a density with a prior on L, with at "
                         f"least {MIN_DATA} data")
    lams = scan_values(cfg) if lambdas is None else np.unique(np.asarray(lambdas, dtype=float))
    grid = None if _regression(cfg) else grid_from_config(cfg)
    nan = math.nan
    doc = {"lambda": lams.tolist(), "train": [nan] * lams.size, "held_out": [nan] * lams.size,
           "units": [None] * lams.size, "current": float(cfg["prior"]["lambda"]),
           "truth_name": "true function" if _regression(cfg) else "true density"}
    truth = cfg.get("truth") is not None
    if not truth and grid is not None and grid.size > CV_MAX_NODES:  # held-out data not worth their cost
        return _evidence_scan(cfg, doc)
    doc["kind"] = "truth" if truth else "cv"

    def fitted(k: int, f) -> None:
        doc["train"][k] = float(f.last.train_error)
        units = _truth_units(cfg, f, grid)
        if units is not None:
            doc["units"][k] = units
            doc["held_out"][k] = float(np.mean(units))
        if progress is not None:
            progress(copy.deepcopy(doc))

    _fits(cfg, lams, cancel, fitted)
    if truth and any(u is not None for u in doc["units"]):
        return doc
    doc["kind"] = "cv"
    pts = np.asarray(cfg["data"], dtype=float)
    order = np.random.default_rng(0).permutation(len(pts))
    k_folds = int(min(max(2, folds), len(pts)))
    losses = np.full((lams.size, len(pts)), np.nan)
    for fold in range(k_folds):
        test = order[fold::k_folds]
        train = np.setdiff1d(order, test)
        fold_cfg = _with(cfg, lams[0], pts[train].tolist())
        for k, f in enumerate(_fits(fold_cfg, lams, cancel)):
            if f is not None:
                losses[k, test] = _held_out_losses(cfg, f, grid, pts[test])
    for k in range(lams.size):
        row = losses[k]
        if np.all(np.isfinite(row)):
            doc["units"][k] = row.tolist()
            doc["held_out"][k] = float(np.mean(row))
    return doc


def _evidence_scan(cfg: Valid, doc: dict) -> dict:
    """The evidence standing in for the held-out error (a user's table on a larger grid): ``held_out`` is minus
    the log evidence per datum along the evidence's own path (with the current lambda), ``log_evidence`` the
    path's values."""
    lams = np.unique(np.append(evidence.default_values(build_density(cfg), "lambda", SCAN_POINTS),
                               doc["current"]))
    path = evidence.evidence_path(cfg, values=lams, refine=False, max_drop=None)
    n = len(cfg["data"])
    logev = [float(v) for v in path["log_evidence"]]
    return dict(doc, kind="evidence", **{"lambda": [float(v) for v in path["lambda"]]},
                log_evidence=logev, held_out=[-v / n for v in logev], units=[None] * len(logev),
                train=[math.nan] * len(logev))


def _evidence_verdict(scan: dict, lams: np.ndarray, cur: int) -> dict | None:
    logev = np.asarray(scan["log_evidence"], dtype=float)
    if not np.isfinite(logev[cur]) or not np.any(np.isfinite(logev)):
        return None
    best = int(np.nanargmax(logev))
    gap = float(logev[best] - logev[cur])
    if best == cur or not gap > EVIDENCE_MARGIN or _near(lams, best, cur):
        return None
    over = lams[best] > lams[cur]
    verdict = "overfitting" if over else "underfitting"
    message = (f"{verdict} (evidence, no held-out data): ln p(D | lambda) {logev[cur]:.4g} against "
               f"{logev[best]:.4g} at lambda = {lams[best]:.3g} (a Bayes factor of {math.exp(min(gap, 700)):.2g}); "
               f"{'raise' if over else 'lower'} lambda")
    return {"verdict": verdict, "message": message, "current": float(lams[cur]), "best": float(lams[best]),
            "held_out": float(scan["held_out"][cur]), "best_held_out": float(scan["held_out"][best]),
            "margin": EVIDENCE_MARGIN}


def _near(lams: np.ndarray, best: int, cur: int) -> bool:
    return abs(math.log10(lams[best] / lams[cur])) < MIN_DECADES


def diagnose(scan: dict) -> dict | None:
    """The verdict of a scan (module text): ``{"verdict": "overfitting" | "underfitting", "message", "current",
    "best", "held_out", "best_held_out", "margin"}`` when the current lambda's held-out error exceeds the best by
    more than :data:`SIGNIFICANCE` standard errors of the paired differences and the best lambda is at least
    :data:`MIN_DECADES` decades away, else None."""
    lams = np.asarray(scan["lambda"], dtype=float)
    held = np.asarray(scan["held_out"], dtype=float)
    cur = int(np.argmin(np.abs(np.log(lams) - math.log(scan["current"]))))
    if scan["kind"] == "evidence":
        return _evidence_verdict(scan, lams, cur)
    if not np.isfinite(held[cur]) or scan["units"][cur] is None or not np.any(np.isfinite(held)):
        return None
    best = int(np.nanargmin(held))
    if best == cur or _near(lams, best, cur):
        return None
    diff = np.asarray(scan["units"][cur], dtype=float) - np.asarray(scan["units"][best], dtype=float)
    d = float(np.mean(diff))
    se = float(np.std(diff, ddof=1) / math.sqrt(diff.size)) if diff.size > 1 else math.inf
    margin = SIGNIFICANCE * se
    if not (d > 0 and d > margin):
        return None
    over = lams[best] > lams[cur]
    verdict = "overfitting" if over else "underfitting"
    source = scan.get("truth_name", "true density") if scan["kind"] == "truth" else f"{CV_FOLDS}-fold cross-validation"
    message = (f"{verdict} ({source}): held-out error {held[cur]:.3g} against {held[best]:.3g} at lambda = "
               f"{lams[best]:.3g} (\u00b1{margin:.2g}); {'raise' if over else 'lower'} lambda")
    return {"verdict": verdict, "message": message, "current": float(lams[cur]), "best": float(lams[best]),
            "held_out": float(held[cur]), "best_held_out": float(held[best]), "margin": margin}


__all__ = ["lambda_scan", "diagnose", "applies", "scan_values", "SCAN_POINTS", "CV_FOLDS", "SIGNIFICANCE"]
