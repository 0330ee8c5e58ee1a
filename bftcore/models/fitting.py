"""A document fitted, whatever its kind: the work behind :mod:`bftcore.api`'s entry points.

* :func:`iterate` yields one :class:`~bftcore.foundations.records.Record` per iteration (iteration 0 is the initial
  field); :func:`run` runs to the end and returns a :class:`~bftcore.foundations.records.FitResult`; :func:`fit`
  returns its result document (CONVENTIONS.md §4), with the hyperparameters a document's ``choose`` names set first
  (:func:`choose_hyperparameters`).
* :func:`evidence_document`: the log evidence along one hyperparameter and its maximum, the path extended past an
  end of its default range where the maximum lies there.
* :func:`posterior_summary`: what is uncertain about a fit, for a picture.

Each call is dispatched on the validated document's kind (``cfg.kind``, :mod:`bftcore.models.problems`).  It stands
with the models, below the studies, so that the studies (sweeps, learning curves, the benchmark, the diagnoses) fit
documents the way the façade does without importing the façade above them.
"""
from __future__ import annotations

import copy

import numpy as np

from ..foundations.config import (
    KINDS,
    ConfigError,
    check_evidence_path,
    check_samples,
    checked,
    copy_document,
    lambda_bounds,
    validate_config,
)
from ..foundations.limits import blas_threads
from ..foundations.records import FitResult
from . import presets, problems, regression  # noqa: F401 - problems registers the kinds that PATH_PARAMETERS reads

#: The hyperparameters an evidence path can follow, per model: the list of the kind that takes every document of the
#: model (bftcore.models.problems; a more specific kind, such as robust regression, may follow none).
PATH_PARAMETERS = {kind.model: kind.path_parameters for kind in KINDS.values() if not kind.claims}


def _set_hyperparameter(cfg: dict, name: str, value: float) -> None:
    if name == "beta":
        cfg["beta"] = float(value)
    else:
        cfg["prior"][name] = float(value)


#: An evidence path over its default range whose maximum is at an end is extended past that end by
#: :data:`EDGE_DECADES` decades, at most :data:`EDGE_STEPS` times.
EDGE_DECADES = 2.0
EDGE_STEPS = 4


def _edge(doc: dict, param: str) -> str | None:
    """``"lower"`` or ``"upper"`` when the path's best value is its smallest or largest solved value, else None."""
    solved = [v for v, e in zip(doc[param], doc["log_evidence"]) if e is not None and np.isfinite(e)]
    best = doc["best"][param]
    if len(solved) < 2:
        return None
    return "lower" if best <= min(solved) else "upper" if best >= max(solved) else None


def _past_the_edge(values: list, edge: str) -> np.ndarray:
    """The path's values and :data:`EDGE_DECADES` more decades past ``edge``, at the path's own log spacing."""
    v = np.sort(np.asarray(values, dtype=float))
    ratio = (v[-1] / v[0]) ** (1.0 / (v.size - 1)) if v.size > 1 and v[-1] > v[0] else 10.0
    k = max(2, int(np.ceil(EDGE_DECADES / np.log10(ratio))))
    more = v[0] / ratio ** np.arange(k, 0, -1) if edge == "lower" else v[-1] * ratio ** np.arange(1, k + 1)
    return np.concatenate([more, v] if edge == "lower" else [v, more])


def evidence_document(config: dict, param: str = "lambda", values=None) -> dict:
    """The log evidence along ``param`` (log-spaced ``values``, or the problem's default range) and its maximum:
    ``{param: [...], "log_evidence": [...], "best": {param: ..., "log_evidence": ...}, "parameter": param,
    "model": ..., "method": "laplace" | "exact", "edge": None | "lower" | "upper"}`` (the keys of issue 14's CLI
    contract, others added).

    A maximum at an end of the default range is not returned silently: the path is extended past that end
    (:data:`EDGE_DECADES` decades at a time, at most :data:`EDGE_STEPS` times) until the maximum lies inside it.
    ``"edge"`` names the end where the maximum still lies, after the extension or for ``values`` given: the
    evidence may rise beyond it, and the value is a bound, not a maximum."""
    cfg = checked(config)
    blas_threads()  # as every run of the API; fit's choose comes here before its run (and once ran 4-10x slower)
    kind = cfg.kind
    if not kind.path_parameters:
        kind.evidence_path(cfg, param, values)  # a kind that follows no evidence says why
        raise ConfigError(f"the evidence is not defined for a {kind.name.replace('_', ' ')} document (it is for a "
                          f"Gaussian prior and noise); set its hyperparameters by hand and fit it")
    if param not in kind.path_parameters:
        raise ConfigError(f"the evidence path of the {kind.model} model follows one of "
                          f"{', '.join(kind.path_parameters)}; got {param!r}")
    if values is not None:
        values = np.asarray(values, dtype=float)
        check_evidence_path(len(values), kind.nodes(cfg))
    doc = kind.evidence_path(cfg, param, values)
    if values is None:
        lo, hi = lambda_bounds(cfg) if param == "lambda" else (0.0, np.inf)
        for _ in range(EDGE_STEPS):
            edge = _edge(doc, param)
            if edge is None:
                break
            have = np.asarray(doc[param], dtype=float)
            more = np.setdiff1d(_past_the_edge(doc[param], edge), have)
            more = more[(more >= lo) & (more <= hi)]
            if edge == "upper" and np.isfinite(hi) and hi > have.max() and (more.size == 0 or more.max() < hi):
                more = np.append(more, hi)  # up to the stiffest prior the gate accepts, no further
            if edge == "lower" and lo > 0 and lo < have.min() and (more.size == 0 or more.min() > lo):
                more = np.append(more, lo)
            if more.size == 0:  # the gate's bound of lambda is reached: beyond it a fit would be refused
                break
            wider = np.union1d(have, more)
            check_evidence_path(len(wider), kind.nodes(cfg))
            doc = kind.evidence_path(cfg, param, wider)
        if not lo <= doc["best"][param] <= hi:  # the default range itself went past the gate's bounds
            inside = np.unique(np.clip(np.asarray(doc[param], dtype=float), lo, hi))
            doc = kind.evidence_path(cfg, param, inside)
    doc["parameter"], doc["model"], doc["edge"] = param, kind.model, _edge(doc, param)
    return doc


def posterior_summary(config: dict, field=None, n: int = 40, level: float = 0.9, seed: int = 0) -> dict:
    """What is uncertain about the fit, for a picture: density (field L): the pointwise ``level`` credible band
    of the regression function h(x) of p(y|x) from ``n`` Laplace samples about the MAP ``field`` (solved here if
    None), and h(x) of five of those samples -> ``{"x", "h_lo", "h_hi", "h_median", "h_draws", "kind":
    "laplace"}``; regression: ``n`` exact posterior draws of h on the x nodes -> ``{"x", "draws", "kind": "exact"}``;
    regression with a local prior: ``n`` draws given the solution's labels -> ``{"x", "draws", "kind":
    "conditional"}``."""
    cfg = checked(config)
    kind = cfg.kind
    check_samples(n, kind.nodes(cfg))  # before the fit, not after it
    blas_threads()
    return kind.posterior_summary(cfg, field, n, level, np.random.default_rng(seed))


def choose_preset(name: str) -> tuple[dict, dict | None]:
    """:func:`choose_hyperparameters` of preset ``name``'s document (:data:`bftcore.models.presets.PRESETS`): what
    the dashboard computes once per process for a preset on real data (its lambda by the evidence)."""
    return choose_hyperparameters(presets.PRESETS[name][0])


def choose_hyperparameters(config: dict) -> tuple[dict, dict | None]:
    """A validated copy of ``config`` with the hyperparameters its ``choose`` key names set to their evidence
    maximum, and what was chosen: ``{"chosen": {name: value}, "log_evidence": ..., "paths": {name: {...}}}``
    (None when the document chooses nothing).  Density: lambda along its path (Laplace evidence).  Regression:
    the named hyperparameters jointly, by the exact evidence's optimiser started from the best point of each
    path."""
    valid = checked(config)
    # a copy, never the caller's document: the hyperparameters chosen are set into it (the gate's answer to an
    # outside document is a fresh copy already)
    cfg = valid if valid is not config else copy_document(valid)
    choose = cfg.pop("choose", None)
    if not choose:
        return cfg, None
    paths = {}
    for name, spec in choose.items():
        # a density's lambda without a range: the evidence's own range, from the grid and the data
        values = None if spec["min"] is None else np.geomspace(spec["min"], spec["max"], spec["n"])
        paths[name] = evidence_document(cfg, name, values)
        _set_hyperparameter(cfg, name, paths[name]["best"][name])
    chosen = {name: float(paths[name]["best"][name]) for name in choose}
    best = float(paths[next(iter(choose))]["best"]["log_evidence"])
    if len(choose) > 1:  # regression only (the gate): jointly, started from the paths' best points
        bounds = {name: (float(np.min(paths[name][name])), float(np.max(paths[name][name]))) for name in choose}
        opt = regression.optimise_evidence(cfg, params=tuple(choose), start=chosen, bounds=bounds)
        chosen, best = {name: float(opt[name]) for name in choose}, float(opt["log_evidence"])
        for name, value in chosen.items():
            _set_hyperparameter(cfg, name, value)
    return validate_config(cfg), {"chosen": chosen, "log_evidence": best,
                                  "paths": {k: {k: v[k], "log_evidence": v["log_evidence"], "edge": v["edge"]}
                                            for k, v in paths.items()}}


def iterate(config: dict, init=None):
    """Yield a :class:`~bftcore.foundations.records.Record` per iteration of the configured solver; close the
    generator to stop early."""
    cfg = checked(config)
    blas_threads()
    yield from cfg.kind.iterate(cfg, init)


def run(config: dict, init=None, callback=None, check_stability: bool = False) -> FitResult:
    """Run the configured solver to the end and return the result as arrays.

    ``callback(record)`` is called for every iteration; returning True from it stops the run.
    ``check_stability=True`` (density) decides whether the solution is a local minimum
    (:func:`bftcore.models.density.is_local_minimum`), as beta sweeps and basins report it; a regression result
    always says.
    """
    cfg = checked(config)
    blas_threads()
    return cfg.kind.solve(cfg, init, callback, check_stability)


def fit(config: dict, init=None, callback=None, check_stability: bool = False) -> dict:
    """The result document (CONVENTIONS.md §4) of :func:`run`.  A document with ``choose`` has those
    hyperparameters set by :func:`choose_hyperparameters` first; the result then carries ``evidence``: what was
    chosen, its log evidence and the paths."""
    cfg, chosen = choose_hyperparameters(config)
    doc = run(cfg, init, callback, check_stability).to_document()
    if chosen is not None:
        doc["evidence"] = copy.deepcopy(chosen)
    return doc
