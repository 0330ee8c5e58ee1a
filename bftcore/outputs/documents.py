"""Result documents read back into checked arrays: what the CSV tables (:mod:`bftcore.outputs.result_tables`) and the
figures (:mod:`bftcore.outputs.figures`) of the CLI draw from.

The documents are those the CLI writes (``api.fit``, ``learning-curve``, ``bootstrap``), read again from JSON, so
every key is checked here, once, before a table or a figure sees it: a missing or malformed key is a ValueError
that names the key and says to pass the complete document (or the configuration it was computed with).

Budget (issue 25): every array read from a document is counted against
:attr:`bftcore.foundations.limits.Limits.max_output_values` from its shape or lengths before it is converted (ValueError
naming the array and the way out); the CLI's ``--no-limits`` lifts it with the rest of the budget.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..foundations.config import check_output, grid_from_config, kind_of, length_of
from ..foundations.grid import Grid
from ..foundations.metrics import regression_function

__all__ = ["fit_arrays", "learning_curves", "bootstrap_arrays", "data_of", "bands_of", "check_cells", "record_document"]


def _need(doc, key: str, what: str):
    if not isinstance(doc, dict):
        raise ValueError(f"the {what} must be a JSON object (a dict), got {type(doc).__name__}")
    if key not in doc or doc[key] is None:
        raise ValueError(f"the {what} has no key {key!r}; pass the complete document")
    return doc[key]


#: What to do about a result too large to export.
_EXPORT_FIX = ("export a result of a coarser grid or fewer points, or lift the budget on your own machine "
               "(--no-limits, or bftcore.foundations.limits.using(bftcore.foundations.limits.UNLIMITED))")


def _numbers_in(value) -> int:
    """How many numbers ``value`` holds, from its shape or its lengths (the first row of a nested list stands for
    every row), without converting it."""
    n = length_of(value)
    if n is None:
        return 1
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple):
        return int(np.prod(shape, dtype=object))
    inner = length_of(value[0]) if n else None
    return n * (inner or 1)


def _floats(value, key: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """``value`` (numbers, nulls for gaps) as a float array, nulls as NaN; ValueError naming ``key`` otherwise.  Its
    count is checked against the budget of outputs (:attr:`bftcore.foundations.limits.Limits.max_output_values`) before
    it is converted: every table and figure is drawn from arrays read here."""
    check_output(_numbers_in(value), f"{key} holds {{}} numbers", _EXPORT_FIX)
    try:
        a = np.array(value, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{key} must hold numbers (or null), got {str(value)[:60]}") from None
    if shape is not None and a.shape != shape:
        raise ValueError(f"{key} has shape {a.shape}, expected {shape} (the configuration's grid); pass the "
                         f"configuration the document was computed with")
    return a


def _check_model(cfg, doc, what: str) -> str:
    model = _need(cfg, "model", "configuration")
    if model not in ("density", "regression"):
        raise ValueError(f"configuration model must be 'density' or 'regression', got {model!r}")
    doc_model = _need(doc, "model", what)
    if doc_model != model:
        raise ValueError(f"the {what} is of the {doc_model!r} model but the configuration of the {model!r} model; "
                         f"pass the configuration the document was computed with")
    return model


def _grid(cfg) -> Grid:
    _need(cfg, "grid", "configuration")
    try:
        return grid_from_config(cfg)
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"the configuration's grid is not valid ({e}); pass a validated configuration "
                         f"(bftcore.foundations.config.validate_config)") from None


def check_cells(rows: int, columns: int, table: str) -> None:
    """Refuse a CSV table of more cells than the budget of outputs, before a row is written."""
    check_output(rows * columns, f"the {table} table of {rows} rows x {columns} columns holds {{}} cells", _EXPORT_FIX)


def data_of(cfg) -> np.ndarray:
    data = cfg.get("data") if isinstance(cfg, dict) else None
    if not data:
        return np.zeros((0, 2))
    a = _floats(data, "configuration data")
    if a.ndim != 2 or a.shape[1] != 2:
        raise ValueError(f"configuration data must be a list of [x, y] pairs, got shape {a.shape}")
    return a


def bands_of(doc) -> dict | None:
    """A document's credible band ``{"x", "lo", "hi"}`` (key ``bands``; ``h_lo``/``h_hi`` as
    :func:`bftcore.api.posterior_summary` names them are read too), or None."""
    b = doc.get("bands") if isinstance(doc, dict) else None
    if b is None:
        return None
    if not isinstance(b, dict):
        raise ValueError("bands must be an object {x, lo, hi}")
    out = {}
    for key, alt in (("lo", "h_lo"), ("hi", "h_hi")):
        if key in b:
            out[key] = b[key]
        elif alt in b:
            out[key] = b[alt]
        else:
            raise ValueError(f"the document's bands have no key {key!r}; bands are {{x, lo, hi}}")
    out["x"] = b.get("x")
    return out




def cfg_has_exact(cfg) -> bool:
    """The document's kind has a closed-form part (a regression's exact posterior); a kind without one (a local
    prior) has none to draw."""
    try:
        return bool(kind_of(cfg).has_exact)
    except (KeyError, TypeError):
        return True


def _x_nodes(doc, n: int, fallback: np.ndarray, what: str) -> np.ndarray:
    x = doc.get("x")
    if x is None:
        return fallback
    return _floats(x, f"{what} x", (n,))



def fit_arrays(cfg, doc) -> dict[str, Any]:
    """Everything the fit table and figure need, checked: model, grid, x nodes, the arrays of the document."""
    model = _check_model(cfg, doc, "fit document")
    grid = _grid(cfg)
    nx, ny = grid.shape
    out: dict[str, Any] = {"model": model, "grid": grid}
    if model == "density":
        out["x"], out["y"] = grid.x.nodes, grid.y.nodes
        out["P"] = _floats(_need(doc, "P", "fit document"), "P", (nx, ny))
        out["L"] = _floats(_need(doc, "L", "fit document"), "L", (nx, ny))
        reg = _need(doc, "regression", "fit document")
        out["h"] = _floats(_need(reg, "h", "fit document's regression"), "regression.h", (nx,))
        out["sd"] = _floats(_need(reg, "sd", "fit document's regression"), "regression.sd", (nx,))
    else:
        h = _floats(_need(doc, "h", "fit document"), "h")
        if h.ndim != 1:
            raise ValueError(f"h must be a list of numbers, got shape {h.shape}")
        out["x"] = _x_nodes(doc, len(h), grid.x.nodes if grid.x.n == len(h) else np.arange(len(h), dtype=float),
                            "fit document")
        out["h"] = h
        exact = doc.get("exact") if not cfg_has_exact(cfg) else _need(doc, "exact", "fit document")
        if exact is None:  # a kind without a closed form (a local prior): the MAP h alone
            out["mean"] = out["sd"] = np.full(h.shape, np.nan)
        else:
            out["mean"] = _floats(_need(exact, "mean", "fit document's exact"), "exact.mean", h.shape)
            var = _floats(_need(exact, "var", "fit document's exact"), "exact.var", h.shape)
            with np.errstate(invalid="ignore"):
                out["sd"] = np.where(var >= 0, np.sqrt(np.abs(var)), np.nan)
    bands = bands_of(doc)
    if bands is not None:
        n = len(out["x"])
        out["lo"] = _floats(bands["lo"], "bands.lo", (n,))
        out["hi"] = _floats(bands["hi"], "bands.hi", (n,))
    return out



def _stat(obj, where: str, n: int, required: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``{"mean": [...], "sd": [...]}`` as two arrays of length n (sd may be missing: NaN)."""
    if obj is None and not required:
        return np.full(n, np.nan), np.full(n, np.nan)
    if not isinstance(obj, dict):
        raise ValueError(f"the learning-curve document has no {where} {{mean, sd}}; pass the complete document")
    mean = _floats(_need(obj, "mean", f"learning-curve document's {where}"), f"{where}.mean", (n,))
    sd = _floats(obj["sd"], f"{where}.sd", (n,)) if obj.get("sd") is not None else np.full(n, np.nan)
    return mean, sd


def _n_values(value, where: str) -> np.ndarray:
    n = _floats(value, where)
    if n.ndim != 1:
        raise ValueError(f"{where} must be a list of numbers, got shape {n.shape}")
    return n


def learning_curves(doc) -> dict[str, Any]:
    """The series of a learning-curve document: ``main`` (top level), ``curves`` (list of dicts with label,
    lambda, n, train, test), ``best``, ``replica`` (or None)."""
    n = _n_values(_need(doc, "n", "learning-curve document"), "n")
    curves = doc.get("curves") or []
    if not isinstance(curves, list):
        raise ValueError("curves must be a list of {label, lambda, n, train_error, test_error}")
    required = not curves
    main = {"label": "main", "lambda": None, "n": n,
            "train": _stat(doc.get("train_error") if not required else _need(doc, "train_error",
                                                                               "learning-curve document"),
                           "train_error", len(n), required),
            "test": _stat(doc.get("test_error") if not required else _need(doc, "test_error",
                                                                             "learning-curve document"),
                          "test_error", len(n), required)}
    parsed = []
    for k, c in enumerate(curves):
        where = f"curves[{k}]"
        if not isinstance(c, dict):
            raise ValueError(f"{where} must be an object {{label, lambda, n, train_error, test_error}}")
        cn = _n_values(c["n"], f"{where}.n") if c.get("n") is not None else n
        lam = c.get("lambda")
        if lam is not None and (isinstance(lam, bool) or not isinstance(lam, (int, float))):
            raise ValueError(f"{where}.lambda must be a number or null, got {lam!r}")
        label = c.get("label")
        parsed.append({"label": str(label) if label is not None else
                       (f"lambda={lam:g}" if lam is not None else f"curve {k + 1}"),
                       "lambda": lam, "n": cn,
                       "train": _stat(_need(c, "train_error", f"learning-curve document's {where}"),
                                      f"{where}.train_error", len(cn)),
                       "test": _stat(_need(c, "test_error", f"learning-curve document's {where}"),
                                     f"{where}.test_error", len(cn))})
    best = doc.get("best_lambda")
    best_a = _floats(best, "best_lambda", (len(n),)) if best is not None else None
    replica = doc.get("replica")
    rep = None
    if replica is not None:
        if isinstance(replica, dict) and replica.get("n") is None and replica.get("m") is not None:
            replica = dict(replica, n=replica["m"])  # bftcore.models.replica's curves call the number of data m
        rn = _n_values(_need(replica, "n", "learning-curve document's replica"), "replica.n")
        rep = {"n": rn, "test": _floats(_need(replica, "test_error", "learning-curve document's replica"),
                                        "replica.test_error", rn.shape)}
    return {"main": main, "curves": parsed, "best": best_a, "replica": rep, "n": n}



def bootstrap_arrays(cfg, doc) -> dict[str, Any]:
    model = _check_model(cfg, doc, "bootstrap document")
    grid = _grid(cfg)
    h = _floats(_need(doc, "h", "bootstrap document"), "h")
    if h.ndim != 1:
        raise ValueError(f"h must be a list of numbers, got shape {h.shape}")
    n = len(h)
    out: dict[str, Any] = {"model": model, "grid": grid, "h": h,
                           "x": _floats(_need(doc, "x", "bootstrap document"), "x", (n,))}
    for key in ("h_mean", "h_sd", "h_lo", "h_hi"):
        out[key] = _floats(_need(doc, key, "bootstrap document"), key, (n,))
    out["h_bias"] = _floats(doc["h_bias"], "h_bias", (n,)) if doc.get("h_bias") is not None else None
    level = doc.get("level")
    out["level"] = float(level) if isinstance(level, (int, float)) and not isinstance(level, bool) else None
    if model == "density":
        nx, ny = grid.shape
        out["y"] = _floats(doc["y"], "y", (ny,)) if doc.get("y") is not None else grid.y.nodes
        for key in ("P_mean", "P_sd", "P_bias"):
            out[key] = _floats(doc[key], key, (nx, ny)) if doc.get(key) is not None else None
    return out



def record_document(cfg: dict, record, exact: dict | None = None) -> dict:
    """The part of a fit document that its figure reads (:func:`bftcore.outputs.figures.fit_figure`), from one solver
    record of the validated configuration ``cfg`` (the dashboard's iteration on screen, which may be mid-run):
    density ``P``, ``L`` and the regression function h(x), sd(x) of that P; regression ``x``, ``h`` and ``exact``
    (``{"mean", "var"}``, the exact posterior of the finished run, which the caller supplies)."""
    grid = grid_from_config(cfg)
    if cfg["model"] == "density":
        P = np.asarray(record.P, dtype=float)
        h, sd = regression_function(P, grid)
        return {"model": "density", "P": P, "L": np.asarray(record.L, dtype=float),
                "regression": {"h": h, "sd": sd}}
    if exact is None and cfg_has_exact(cfg):
        raise ValueError("the exact posterior of a regression is computed when its run ends; let the run finish")
    return {"model": "regression", "x": grid.x.nodes, "h": np.asarray(record.h, dtype=float),
            "exact": None if exact is None else {"mean": exact["mean"], "var": exact["var"]}}
