"""Results as CSV tables (what the CLI's ``--csv PREFIX`` writes next to its JSON documents).

Tables (``*_tables`` return ``{suffix: csv_text}``; :func:`bftcore.outputs.export.write_outputs` writes
``<prefix>_<suffix>.csv``).  Every table is comma-separated with one header line and ``\\n`` line ends; numbers are
Python's shortest round-trip text of the float (``repr``: ``float(cell)`` gives back the document's value exactly),
whole numbers (n) without a decimal point, and a cell is empty where the document has null or a non-finite value (a
failed fit, P = 0 -> L).

* :func:`fit_tables` of a density fit (``api.fit``):

  - ``P``: ``x,y,P,L``, one row per grid node, x the outer loop and y the inner (nx*ny rows): the MAP density
    P(y|x) at (x_i, y_j) and its field L = log P.
  - ``h``: ``x,h,sd[,lo,hi]``, one row per x node: the regression function h(x) = E[y|x] of P and the conditional
    standard deviation sd(x) of y; ``lo,hi`` when the document carries credible ``bands``
    (:func:`bftcore.outputs.documents.bands_of`).

* :func:`fit_tables` of a regression fit: ``h``: ``x,h,mean,sd[,lo,hi]``, one row per x node: the MAP h(x), the
  exact posterior mean and sqrt of the exact posterior variance of h(x) (``exact.mean``, ``exact.var``), and the
  band's ``lo,hi`` when the document has ``bands``.
* :func:`learning_curve_table` (one text, ``<prefix>.csv``): ``curve,lambda,n,train_mean,train_sd,test_mean,
  test_sd``, long format, one row per curve per n: first the document's top-level series (curve ``main``, lambda
  empty), then every entry of ``curves`` (its ``label``, its ``lambda``), then, if present, the replica-theory
  prediction (curve ``replica``: only ``test_mean`` filled; its ``n`` may be called ``m`` as in
  :mod:`bftcore.models.replica`).  ``unique_fraction`` and the replica posterior variance are not tabulated (they stay
  in the JSON document).
* :func:`bootstrap_tables`: ``h``: ``x,h,h_mean,h_sd,h_lo,h_hi[,h_bias]`` per x node (the fit to all data, the
  bootstrap mean, sd and the equal-tailed band at ``level``, the bias estimate when the document has one); density
  also ``P``: ``x,y,P_mean,P_sd[,P_bias]``, long format as the fit's ``P``.

Budget: every table's rows x columns is checked against :attr:`bftcore.foundations.limits.Limits.max_output_values`
before a row is written (the arrays themselves were counted when :mod:`bftcore.outputs.documents` read them).
"""
from __future__ import annotations

import csv
import io
import math
from typing import Sequence

import numpy as np

from .documents import bootstrap_arrays, check_cells, fit_arrays, learning_curves

__all__ = ["fit_tables", "learning_curve_table", "bootstrap_tables"]


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return repr(f) if math.isfinite(f) else ""


def _csv(header: Sequence[str], rows) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow([_cell(v) for v in r])
    return out.getvalue()


def _long_rows(x: np.ndarray, y: np.ndarray, *fields: np.ndarray):
    for i, xi in enumerate(x):
        for j, yj in enumerate(y):
            yield [xi, yj, *(f[i, j] for f in fields)]



def _n_cell(v: float):
    return int(v) if math.isfinite(v) and v == math.floor(v) and abs(v) < 2 ** 53 else v



def fit_tables(cfg: dict, doc: dict) -> dict[str, str]:
    """CSV tables of a fit document (``api.fit``) for its configuration ``cfg``: density ``{"P", "h"}``, regression
    ``{"h"}`` (columns in the module docstring)."""
    a = fit_arrays(cfg, doc)
    band = ["lo", "hi"] if "lo" in a else []
    extra = [a[k] for k in band]
    check_cells(len(a["x"]), 4 + len(band), "h")
    if a["model"] == "density":
        check_cells(a["grid"].size, 4, "P")
        return {"P": _csv(["x", "y", "P", "L"], _long_rows(a["x"], a["y"], a["P"], a["L"])),
                "h": _csv(["x", "h", "sd", *band], zip(a["x"], a["h"], a["sd"], *extra))}
    return {"h": _csv(["x", "h", "mean", "sd", *band], zip(a["x"], a["h"], a["mean"], a["sd"], *extra))}



def learning_curve_table(doc: dict) -> str:
    """One CSV text of a learning-curve document, long format (columns in the module docstring)."""
    lc = learning_curves(doc)
    check_cells(sum(len(c["n"]) for c in [lc["main"], *lc["curves"]])
                 + (len(lc["replica"]["n"]) if lc["replica"] is not None else 0), 7, "learning-curve")
    rows = []
    for c in [lc["main"], *lc["curves"]]:
        (trm, trs), (tem, tes) = c["train"], c["test"]
        for k, nk in enumerate(c["n"]):
            rows.append([c["label"], c["lambda"], _n_cell(nk), trm[k], trs[k], tem[k], tes[k]])
    if lc["replica"] is not None:
        for nk, t in zip(lc["replica"]["n"], lc["replica"]["test"]):
            rows.append(["replica", None, _n_cell(nk), None, None, t, None])
    return _csv(["curve", "lambda", "n", "train_mean", "train_sd", "test_mean", "test_sd"], rows)



def bootstrap_tables(cfg: dict, doc: dict) -> dict[str, str]:
    """CSV tables of a bootstrap document: ``{"h"}``, density also ``"P"`` when the document has P_mean and P_sd
    (columns in the module docstring)."""
    a = bootstrap_arrays(cfg, doc)
    cols = ["h", "h_mean", "h_sd", "h_lo", "h_hi"] + (["h_bias"] if a["h_bias"] is not None else [])
    check_cells(len(a["x"]), 1 + len(cols), "h")
    if a["model"] == "density":
        check_cells(a["grid"].size, 5, "P")
    tables = {"h": _csv(["x", *cols], zip(a["x"], *(a[k] for k in cols)))}
    if a["model"] == "density" and (a["P_mean"] is not None or a["P_sd"] is not None):
        nx, ny = a["grid"].shape
        pcols = ["P_mean", "P_sd"] + (["P_bias"] if a["P_bias"] is not None else [])
        fields = [a[k] if a[k] is not None else np.full((nx, ny), np.nan) for k in pcols]
        tables["P"] = _csv(["x", "y", *pcols], _long_rows(a["x"], a["y"], *fields))
    return tables

