"""Results as CSV tables and PNG figures (what the CLI writes next to its JSON documents).

Tables (``*_tables`` return ``{suffix: csv_text}``; :func:`write_outputs` writes ``<prefix>_<suffix>.csv``).  Every
table is comma-separated with one header line and ``\\n`` line ends; numbers are Python's shortest round-trip text
of the float (``repr``: ``float(cell)`` gives back the document's value exactly), whole numbers (n) without a
decimal point, and a cell is empty where the document has null or a non-finite value (a failed fit, P = 0 -> L).

* :func:`fit_tables` of a density fit (``api.fit``):

  - ``P``: ``x,y,P,L``, one row per grid node, x the outer loop and y the inner (nx*ny rows): the MAP density
    P(y|x) at (x_i, y_j) and its field L = log P.
  - ``h``: ``x,h,sd[,lo,hi]``, one row per x node: the regression function h(x) = E[y|x] of P and the conditional
    standard deviation sd(x) of y; ``lo,hi`` when the document carries credible ``bands`` (:func:`bands_of`).

* :func:`fit_tables` of a regression fit: ``h``: ``x,h,mean,sd[,lo,hi]``, one row per x node: the MAP h(x), the
  exact posterior mean and sqrt of the exact posterior variance of h(x) (``exact.mean``, ``exact.var``), and the
  band's ``lo,hi`` when the document has ``bands``.
* :func:`learning_curve_table` (one text, ``<prefix>.csv``): ``curve,lambda,n,train_mean,train_sd,test_mean,
  test_sd``, long format, one row per curve per n: first the document's top-level series (curve ``main``, lambda
  empty), then every entry of ``curves`` (its ``label``, its ``lambda``), then, if present, the replica-theory
  prediction (curve ``replica``: only ``test_mean`` filled; its ``n`` may be called ``m`` as in
  :mod:`bftcore.replica`).  ``unique_fraction`` and the replica posterior variance are not tabulated (they stay in
  the JSON document).
* :func:`bootstrap_tables`: ``h``: ``x,h,h_mean,h_sd,h_lo,h_hi[,h_bias]`` per x node (the fit to all data, the
  bootstrap mean, sd and the equal-tailed band at ``level``, the bias estimate when the document has one); density
  also ``P``: ``x,y,P_mean,P_sd[,P_bias]``, long format as the fit's ``P``.

Figures (``*_png`` return PNG bytes, :data:`FIGURE_SIZE` = 800 x 560 RGB on white, drawn with Pillow at twice the
size and reduced, thick lines and 15-22 px text for a projector; non-finite values are gaps, never drawn):

* :func:`fit_png`, density: a heatmap of P over the grid (x across, y up, origin bottom-left, one cell per node,
  colour map viridis scaled from the smallest to the largest P, colour bar "P(y|x)"), the regression function h(x)
  as a white line outlined in black, h ± sd as thin white dashed lines, the data as red dots.  Regression: the
  exact posterior mean ± 2 sd as a shaded blue band, the mean dashed, the MAP h(x) solid, the data as dots, a
  credible band's edges as dotted lines when the document has ``bands``.
* :func:`learning_curve_png`: test error (solid, with markers) and training error (dashed) means against n, each
  with its ± sd as a shaded band, one colour per curve (the top-level series too, in black, unless it repeats one
  of the curves); n on a log axis when it spans more than a factor 10; the best lambda per n as a black ring on
  that lambda's test curve; the replica prediction (if present) as a dotted line "replica theory (approx.)".
* :func:`bootstrap_png`: the fit's h(x) (solid), the bootstrap mean (dashed) and the band [h_lo, h_hi] (shaded);
  density: over a heatmap of the bootstrap standard deviation P_sd of P (where the estimate is uncertain; P_mean
  when the document has no P_sd), colour bar "sd of P(y|x) (bootstrap)".

The axis transforms of the figures are public (:func:`fit_axes`, :func:`learning_curve_axes`,
:func:`bootstrap_axes` -> :class:`Axes`, whose :meth:`Axes.to_pixel` maps data to pixel coordinates of the PNG)
and so is the colour map (:func:`colormap`), so that a test can find a value's pixel and its expected colour.

Budget (issue 25): a figure is always :data:`FIGURE_SIZE`; what it draws and what a table writes is counted first.
Every array read from a document, and every table's rows x columns, is checked against
:attr:`bftcore.limits.Limits.max_output_values` from its shape or lengths before it is converted or a row is written
(ValueError naming the array and the way out); the CLI's ``--no-limits`` lifts it with the rest of the budget.
"""
from __future__ import annotations

import csv
import functools
import io
import math
import os
import re
import stat
from typing import Any, Sequence

import numpy as np

from .config import check_output, grid_from_config, length_of
from .grid import Grid

__all__ = ["fit_tables", "learning_curve_table", "bootstrap_tables", "fit_png", "learning_curve_png",
           "bootstrap_png", "write_outputs", "fit_axes", "learning_curve_axes", "bootstrap_axes", "Axes",
           "colormap", "FIGURE_SIZE", "NAN_COLOUR"]

#: Width and height of every figure in pixels.
FIGURE_SIZE = (800, 560)
#: Supersampling factor: figures are drawn this many times larger and reduced (smooth lines and text).
_SCALE = 2
#: Plot box (left, top, right, bottom) in pixels, without and with a colour bar on the right.
_BOX = (96, 58, 770, 482)
_BOX_CBAR = (96, 78, 640, 482)  # heatmaps: their legend stands in a row above the box
_BOX_LEGEND = (96, 58, 545, 482)  # the learning curve's legend stands to the right of the box
#: Colour of a heatmap cell with no finite value.
NAN_COLOUR = (200, 200, 200)
#: viridis at 0, 1/8, ..., 1 (matplotlib's table); :func:`colormap` interpolates linearly in between.
_VIRIDIS = np.array([(68, 1, 84), (72, 40, 120), (62, 73, 137), (49, 104, 142), (38, 130, 142), (31, 158, 137),
                     (53, 183, 121), (110, 206, 88), (253, 231, 37)], dtype=float)
_LUT = np.stack([np.interp(np.linspace(0, 1, 256), np.linspace(0, 1, len(_VIRIDIS)), _VIRIDIS[:, c])
                 for c in range(3)], axis=1).round().astype(np.uint8)
#: Line colours of curves (Okabe-Ito, without the yellow that vanishes on white).
_PALETTE = [(0, 114, 178), (213, 94, 0), (0, 158, 115), (204, 121, 167), (86, 180, 233), (230, 159, 0),
            (120, 120, 120)]
#: Dash and gap, and the spacing of dots, in units of the line width.
_DASH, _DOT = (4.0, 2.5), 2.2
_BLACK, _WHITE, _DATA = (0, 0, 0), (255, 255, 255), (220, 30, 60)
#: Legend entries: (label, style) (:meth:`_Canvas.legend`).
_Entries = list[tuple[str, dict[str, Any]]]
_CSV_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


# ============================================================================================ checking documents
def _need(doc, key: str, what: str):
    if not isinstance(doc, dict):
        raise ValueError(f"the {what} must be a JSON object (a dict), got {type(doc).__name__}")
    if key not in doc or doc[key] is None:
        raise ValueError(f"the {what} has no key {key!r}; pass the complete document")
    return doc[key]


#: What to do about a result too large to export.
_EXPORT_FIX = ("export a result of a coarser grid or fewer points, or lift the budget on your own machine "
               "(--no-limits, or bftcore.limits.using(bftcore.limits.UNLIMITED))")


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
    count is checked against the budget of outputs (:attr:`bftcore.limits.Limits.max_output_values`) before it is
    converted: every table and figure is drawn from arrays read here."""
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
                         f"(bftcore.config.validate_config)") from None


def _check_cells(rows: int, columns: int, table: str) -> None:
    """Refuse a CSV table of more cells than the budget of outputs, before a row is written."""
    check_output(rows * columns, f"the {table} table of {rows} rows x {columns} columns holds {{}} cells", _EXPORT_FIX)


def _data(cfg) -> np.ndarray:
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


# ============================================================================================ CSV
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


def _x_nodes(doc, n: int, fallback: np.ndarray, what: str) -> np.ndarray:
    x = doc.get("x")
    if x is None:
        return fallback
    return _floats(x, f"{what} x", (n,))


def _fit_arrays(cfg, doc) -> dict[str, Any]:
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
        exact = _need(doc, "exact", "fit document")
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


def fit_tables(cfg: dict, doc: dict) -> dict[str, str]:
    """CSV tables of a fit document (``api.fit``) for its configuration ``cfg``: density ``{"P", "h"}``, regression
    ``{"h"}`` (columns in the module docstring)."""
    a = _fit_arrays(cfg, doc)
    band = ["lo", "hi"] if "lo" in a else []
    extra = [a[k] for k in band]
    _check_cells(len(a["x"]), 4 + len(band), "h")
    if a["model"] == "density":
        _check_cells(a["grid"].size, 4, "P")
        return {"P": _csv(["x", "y", "P", "L"], _long_rows(a["x"], a["y"], a["P"], a["L"])),
                "h": _csv(["x", "h", "sd", *band], zip(a["x"], a["h"], a["sd"], *extra))}
    return {"h": _csv(["x", "h", "mean", "sd", *band], zip(a["x"], a["h"], a["mean"], a["sd"], *extra))}


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


def _learning_curves(doc) -> dict[str, Any]:
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
            replica = dict(replica, n=replica["m"])  # bftcore.replica's curves call the number of data m
        rn = _n_values(_need(replica, "n", "learning-curve document's replica"), "replica.n")
        rep = {"n": rn, "test": _floats(_need(replica, "test_error", "learning-curve document's replica"),
                                        "replica.test_error", rn.shape)}
    return {"main": main, "curves": parsed, "best": best_a, "replica": rep, "n": n}


def _n_cell(v: float):
    return int(v) if math.isfinite(v) and v == math.floor(v) and abs(v) < 2 ** 53 else v


def learning_curve_table(doc: dict) -> str:
    """One CSV text of a learning-curve document, long format (columns in the module docstring)."""
    lc = _learning_curves(doc)
    _check_cells(sum(len(c["n"]) for c in [lc["main"], *lc["curves"]])
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


def _bootstrap_arrays(cfg, doc) -> dict[str, Any]:
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


def bootstrap_tables(cfg: dict, doc: dict) -> dict[str, str]:
    """CSV tables of a bootstrap document: ``{"h"}``, density also ``"P"`` when the document has P_mean and P_sd
    (columns in the module docstring)."""
    a = _bootstrap_arrays(cfg, doc)
    cols = ["h", "h_mean", "h_sd", "h_lo", "h_hi"] + (["h_bias"] if a["h_bias"] is not None else [])
    _check_cells(len(a["x"]), 1 + len(cols), "h")
    if a["model"] == "density":
        _check_cells(a["grid"].size, 5, "P")
    tables = {"h": _csv(["x", *cols], zip(a["x"], *(a[k] for k in cols)))}
    if a["model"] == "density" and (a["P_mean"] is not None or a["P_sd"] is not None):
        nx, ny = a["grid"].shape
        pcols = ["P_mean", "P_sd"] + (["P_bias"] if a["P_bias"] is not None else [])
        fields = [a[k] if a[k] is not None else np.full((nx, ny), np.nan) for k in pcols]
        tables["P"] = _csv(["x", "y", *pcols], _long_rows(a["x"], a["y"], *fields))
    return tables


# ============================================================================================ writing
def refuse_special_target(path: str) -> None:
    """ValueError, before anything is opened, when an output ``path`` exists and is not a regular file: open() for
    writing of a named pipe waits for a reader forever, and a device or a directory is no place for a result."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise ValueError(f"cannot write {path}: {e.strerror or e}") from None
    if not stat.S_ISREG(mode):
        kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode) else
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
        raise ValueError(f"{path} is {kind}, not a regular file; write the results to a file name")


def write_outputs(prefix, tables: dict[str, str] | str | None, png: bytes | None) -> list[str]:
    """Write ``<prefix>_<key>.csv`` per table (``<prefix>.csv`` for a single text) and ``<prefix>.png``; return the
    paths written.  ValueError (nothing written) when the directory of ``prefix`` does not exist."""
    prefix = os.fspath(prefix)
    directory, base = os.path.split(prefix)
    if not base:
        raise ValueError(f"output prefix {prefix!r} names a directory; give a file name prefix such as "
                         f"{os.path.join(prefix or '.', 'result')!r}")
    if directory and not os.path.isdir(directory):
        raise ValueError(f"output directory {directory!r} does not exist; create it first (mkdir -p {directory}) "
                         f"or choose another prefix")
    if tables is not None and not isinstance(tables, (str, dict)):
        raise ValueError(f"tables must be a CSV text or a dict of them, got {type(tables).__name__}")
    if isinstance(tables, dict):
        for key in tables:
            if not isinstance(key, str) or not _CSV_NAME.match(key):
                raise ValueError(f"table name {key!r} is not usable in a file name; use letters, digits, _ and -")
    if png is not None and not isinstance(png, (bytes, bytearray)):
        raise ValueError(f"png must be bytes, got {type(png).__name__}")
    jobs: list[tuple[str, str | bytes]] = []
    if isinstance(tables, str):
        jobs.append((prefix + ".csv", tables))
    elif isinstance(tables, dict):
        jobs.extend((f"{prefix}_{key}.csv", text) for key, text in tables.items())
    if png is not None:
        jobs.append((prefix + ".png", bytes(png)))
    for path, _ in jobs:
        refuse_special_target(path)
    written = []
    for path, content in jobs:
        if isinstance(content, str):
            with open(path, "w", encoding="utf-8", newline="") as fh:
                fh.write(content)
        else:
            with open(path, "wb") as fh:
                fh.write(content)
        written.append(path)
    return written


# ============================================================================================ plotting helper
def colormap(values) -> np.ndarray:
    """viridis colours (uint8 RGB, shape ``values.shape + (3,)``) of values in [0, 1] (clipped; NaN ->
    :data:`NAN_COLOUR`).  ``colormap(0.0)`` is the bottom colour, ``colormap(1.0)`` the top one."""
    t = np.asarray(values, dtype=float)
    idx = np.rint(np.clip(np.nan_to_num(t, nan=0.0), 0.0, 1.0) * (len(_LUT) - 1)).astype(int)
    out = _LUT[idx]
    out[~np.isfinite(t)] = NAN_COLOUR
    return out


class Axes:
    """Map data coordinates to pixel coordinates of a figure: ``box`` = (left, top, right, bottom) in pixels (the
    data limits sit on its edges; y grows upwards), ``xlim``/``ylim`` the data ranges, ``xlog``/``ylog`` base-10
    log scales.  Pixel (i, j) of the PNG covers [i, i+1) x [j, j+1) in these coordinates."""

    def __init__(self, box: tuple[int, int, int, int], xlim: tuple[float, float], ylim: tuple[float, float],
                 xlog: bool = False, ylog: bool = False):
        self.box, self.xlim, self.ylim, self.xlog, self.ylog = box, xlim, ylim, xlog, ylog

    @staticmethod
    def _unit(v, lim, log) -> np.ndarray:
        v = np.asarray(v, dtype=float)
        lo, hi = lim
        if log:
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.where(v > 0, np.log10(np.where(v > 0, v, 1.0)), np.nan)
            lo, hi = math.log10(lo), math.log10(hi)
        return (v - lo) / (hi - lo)

    def to_pixel(self, x, y) -> tuple[np.ndarray, np.ndarray]:
        """Pixel coordinates (float) of data points; NaN where a value is not finite (or <= 0 on a log axis)."""
        left, top, right, bottom = self.box
        with np.errstate(over="ignore", invalid="ignore"):
            px = left + self._unit(x, self.xlim, self.xlog) * (right - left)
            py = bottom - self._unit(y, self.ylim, self.ylog) * (bottom - top)
        return np.where(np.isfinite(px), px, np.nan), np.where(np.isfinite(py), py, np.nan)

    def from_pixel(self, px, py) -> tuple[np.ndarray, np.ndarray]:
        left, top, right, bottom = self.box
        ux = (np.asarray(px, dtype=float) - left) / (right - left)
        uy = (bottom - np.asarray(py, dtype=float)) / (bottom - top)

        def back(u, lim, log):
            if log:
                lo, hi = math.log10(lim[0]), math.log10(lim[1])
                return 10 ** (lo + u * (hi - lo))
            return lim[0] + u * (lim[1] - lim[0])
        return back(ux, self.xlim, self.xlog), back(uy, self.ylim, self.ylog)


def _limits(values: Sequence[np.ndarray], pad: float = 0.05, log: bool = False) -> tuple[float, float]:
    """A padded data range of the finite values (positive ones on a log axis); (0, 1) when there are none."""
    finite = [np.asarray(v, dtype=float).ravel() for v in values]
    a = np.concatenate(finite) if finite else np.zeros(0)
    a = a[np.isfinite(a) & (np.abs(a) < 1e150)]
    if log:
        a = a[a > 0]
        if a.size == 0:
            return 1.0, 10.0
        lo, hi = math.log10(float(a.min())), math.log10(float(a.max()))
        span = hi - lo if hi > lo else 1.0
        return 10 ** (lo - pad * span), 10 ** (hi + pad * span)
    if a.size == 0:
        return 0.0, 1.0
    lo, hi = float(a.min()), float(a.max())
    if hi <= lo:
        d = 0.5 if lo == 0 else 0.1 * abs(lo)
        return lo - d, hi + d
    return lo - pad * (hi - lo), hi + pad * (hi - lo)


def _ticks(lo: float, hi: float, target: int = 6) -> tuple[np.ndarray, float]:
    raw = (hi - lo) / max(target, 1)
    if not raw > 0 or not math.isfinite(raw):
        return np.array([lo]), 1.0
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    start = math.ceil(lo / step - 1e-9)
    stop = math.floor(hi / step + 1e-9)
    ticks = np.arange(start, stop + 1) * step
    ticks[np.abs(ticks) < step * 1e-9] = 0.0
    return ticks, step


def _tick_label(v: float, step: float) -> str:
    big = max(abs(v), step)
    if big >= 1e6 or step < 1e-4:
        return f"{v:.3g}"
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    if round(step / 10.0 ** -decimals, 6) % 1:  # a step of 2.5 x 10^k needs one more digit
        decimals += 1
    return f"{v:.{decimals}f}"


def _log_ticks(lo: float, hi: float) -> list[tuple[float, str]]:
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mults = (1,) if math.log10(hi / lo) > 2.5 else (1, 2, 5)
    out = []
    for k in range(a, b + 1):
        for m in mults:
            v = m * 10.0 ** k
            if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9):
                out.append((v, f"{v:g}" if 1e-3 <= v < 1e6 else f"{m}e{k}" if m > 1 else f"1e{k}"))
    return out


def _clip_segment(xa, ya, xb, yb, box) -> tuple[float, float, float, float, bool, bool] | None:
    """Liang-Barsky: the part of segment a-b inside ``box``, and whether each end was kept as it is."""
    x0, y0, x1, y1 = box
    dx, dy = xb - xa, yb - ya
    t0, t1 = 0.0, 1.0
    for p, q in ((-dx, xa - x0), (dx, x1 - xa), (-dy, ya - y0), (dy, y1 - ya)):
        if p == 0:
            if q < 0:
                return None
            continue
        r = q / p
        if p < 0:
            t0 = max(t0, r)
        else:
            t1 = min(t1, r)
        if t0 > t1:
            return None
    return xa + t0 * dx, ya + t0 * dy, xa + t1 * dx, ya + t1 * dy, t0 == 0.0, t1 == 1.0


def _clip_polyline(xs: np.ndarray, ys: np.ndarray, box) -> list[list[tuple[float, float]]]:
    """Finite runs of a polyline cut to ``box``: a list of point lists (NaN ends a run)."""
    pieces: list[list[tuple[float, float]]] = []
    cur: list[tuple[float, float]] = []
    ok = np.isfinite(xs) & np.isfinite(ys) & (np.abs(xs) < 1e150) & (np.abs(ys) < 1e150)
    x0, y0, x1, y1 = box
    for k in range(len(xs)):
        if not ok[k]:
            if cur:
                pieces.append(cur)
            cur = []
            continue
        if k == 0 or not ok[k - 1]:
            if x0 <= xs[k] <= x1 and y0 <= ys[k] <= y1:
                cur = [(float(xs[k]), float(ys[k]))]
            continue
        seg = _clip_segment(float(xs[k - 1]), float(ys[k - 1]), float(xs[k]), float(ys[k]), box)
        if seg is None:
            if cur:
                pieces.append(cur)
            cur = []
            continue
        ax, ay, bx, by, keep_a, keep_b = seg
        if not (keep_a and cur):
            if cur:
                pieces.append(cur)
            cur = [(ax, ay)]
        cur.append((bx, by))
        if not keep_b:
            pieces.append(cur)
            cur = []
    if cur:
        pieces.append(cur)
    return pieces


def _clip_polygon(pts: list[tuple[float, float]], box) -> list[tuple[float, float]]:
    """Sutherland-Hodgman: a polygon cut to the rectangle ``box``."""
    x0, y0, x1, y1 = box
    edges = [(lambda p: p[0] >= x0, 0, x0), (lambda p: p[0] <= x1, 0, x1),
             (lambda p: p[1] >= y0, 1, y0), (lambda p: p[1] <= y1, 1, y1)]
    for inside, axis, c in edges:
        if not pts:
            break
        out = []
        prev = pts[-1]
        for p in pts:
            if inside(p) != inside(prev):
                t = (c - prev[axis]) / (p[axis] - prev[axis])
                q = (prev[0] + t * (p[0] - prev[0]), prev[1] + t * (p[1] - prev[1]))
                out.append(q)
            if inside(p):
                out.append(p)
            prev = p
        pts = out
    return pts


def _dashes(pts: list[tuple[float, float]], on: float, off: float) -> list[list[tuple[float, float]]]:
    """The dashes of a polyline: pieces of length ``on`` every ``on + off`` pixels along it."""
    out: list[list[tuple[float, float]]] = []
    drawing, remaining = True, on
    cur = [pts[0]]
    for a, b in zip(pts, pts[1:]):
        length = math.hypot(b[0] - a[0], b[1] - a[1])
        pos = 0.0
        while remaining <= length - pos:
            pos += remaining
            q = (a[0] + (b[0] - a[0]) * pos / length, a[1] + (b[1] - a[1]) * pos / length)
            if drawing:
                cur.append(q)
                out.append(cur)
                cur = []
            else:
                cur = [q]
            drawing = not drawing
            remaining = on if drawing else off
        remaining -= length - pos
        if drawing:
            cur.append(b)
    if drawing and len(cur) >= 2:
        out.append(cur)
    return out


class _Canvas:
    """A white figure drawn at ``_SCALE`` times its size; coordinates in final pixels."""

    def __init__(self, box: tuple[int, int, int, int]):
        from PIL import Image, ImageDraw
        self.size, self.box, self.s = FIGURE_SIZE, box, _SCALE
        self.img = Image.new("RGB", (FIGURE_SIZE[0] * _SCALE, FIGURE_SIZE[1] * _SCALE), _WHITE)
        self.draw = ImageDraw.Draw(self.img, "RGBA")
        self.fonts: dict[int, tuple[Any, int]] = {}
        self.ink: list[tuple[float, float]] = []  # points drawn in the box, for placing the legend

    # ---------------------------------------------------------------- text
    def _font(self, size: int) -> tuple[Any, int]:
        """A font of ``size`` final pixels and the integer factor its tiles are enlarged by (FreeType fonts of
        Pillow >= 10.1 scale; otherwise the bitmap default font is enlarged)."""
        if size not in self.fonts:
            from PIL import ImageFont
            try:
                font: Any = ImageFont.load_default(size=size * self.s)
            except (TypeError, OSError, ImportError, AttributeError):
                font = None
            if font is not None and isinstance(font, ImageFont.FreeTypeFont):
                self.fonts[size] = (font, 1)
            else:
                font = ImageFont.load_default()
                self.fonts[size] = (font, max(1, round(size * self.s / 11)))
        return self.fonts[size]

    def _tile(self, text: str, size: int):
        from PIL import Image, ImageDraw
        font, k = self._font(size)
        probe = ImageDraw.Draw(Image.new("L", (1, 1)))
        left, _, right, bottom = probe.textbbox((0, 0), text, font=font)
        try:
            ascent, descent = font.getmetrics()
            height = ascent + descent
        except AttributeError:
            height = bottom
        tile = Image.new("L", (max(1, int(right - min(0, left)) + 1), max(1, int(height) + 1)), 0)
        ImageDraw.Draw(tile).text((-min(0, left), 0), text, font=font, fill=255)
        if k > 1:
            tile = tile.resize((tile.width * k, tile.height * k), Image.Resampling.NEAREST)
        return tile

    def text_size(self, text: str, size: int) -> tuple[float, float]:
        tile = self._tile(text, size)
        return tile.width / self.s, tile.height / self.s

    def text(self, x: float, y: float, text: str, size: int, anchor: str = "mm", fill=_BLACK,
             vertical: bool = False) -> None:
        """``text`` placed by ``anchor`` (horizontal l/m/r, vertical t/m/b of its box) at (x, y); ``vertical``
        turns it a quarter to read upwards."""
        tile = self._tile(text, size)
        if vertical:
            tile = tile.rotate(90, expand=True)
        w, h = tile.size
        fx = {"l": 0.0, "m": 0.5, "r": 1.0}[anchor[0]]
        fy = {"t": 0.0, "m": 0.5, "b": 1.0}[anchor[1]]
        X, Y = round(x * self.s - fx * w), round(y * self.s - fy * h)
        self.img.paste(tuple(fill), (X, Y, X + w, Y + h), tile)

    # ---------------------------------------------------------------- shapes
    def _scaled(self, pts):
        return [(p[0] * self.s, p[1] * self.s) for p in pts]

    def _record(self, pts) -> None:
        for a, b in zip(pts, pts[1:] or pts):
            k = max(1, int(math.hypot(b[0] - a[0], b[1] - a[1]) // 8))
            self.ink.extend((a[0] + (b[0] - a[0]) * i / k, a[1] + (b[1] - a[1]) * i / k) for i in range(k + 1))

    def polyline(self, px, py, colour, width: float, style: str = "solid", clip=None,
                 unit: float | None = None) -> None:
        """A line through the finite points (gaps at NaN), cut to the plot box; style solid, dashed or dotted (the
        dash pattern scales with ``unit``, the width by default: an outline and its line share it)."""
        unit = unit or width
        left, top, right, bottom = clip or self.box
        pieces = _clip_polyline(np.asarray(px, dtype=float), np.asarray(py, dtype=float), (left, top, right, bottom))
        w = max(1, round(width * self.s))
        for pts in pieces:
            self._record(pts)
            if len(pts) == 1:
                self.dot(pts[0][0], pts[0][1], width, colour)
                continue
            if style == "solid":
                self.draw.line(self._scaled(pts), fill=tuple(colour), width=w, joint="curve")
                for end in (pts[0], pts[-1]):  # round caps, except where the box cuts the line
                    if left < end[0] < right and top < end[1] < bottom:
                        self.dot(end[0], end[1], width / 2, colour)
            elif style == "dashed":
                for dash in _dashes(pts, _DASH[0] * unit, _DASH[1] * unit):
                    self.draw.line(self._scaled(dash), fill=tuple(colour), width=w, joint="curve")
            else:
                for dash in _dashes(pts, 0.01, _DOT * unit):
                    self.dot(dash[0][0], dash[0][1], 0.7 * width, colour)

    def dot(self, x: float, y: float, r: float, fill, outline=None, outline_width: float = 0.0) -> None:
        s = self.s
        self.draw.ellipse([(x - r) * s, (y - r) * s, (x + r) * s, (y + r) * s], fill=tuple(fill) if fill else None,
                          outline=tuple(outline) if outline else None,
                          width=max(1, round(outline_width * s)) if outline else 0)

    def markers(self, px, py, r: float, fill, outline=_BLACK, outline_width: float = 1.5) -> None:
        left, top, right, bottom = self.box
        for x, y in zip(np.asarray(px, dtype=float), np.asarray(py, dtype=float)):
            if np.isfinite(x) and np.isfinite(y) and left <= x <= right and top <= y <= bottom:
                self.dot(x, y, r, fill, outline, outline_width)
                self.ink.append((x, y))

    def band(self, px, lo, hi, rgba) -> None:
        """The region between two curves over the points where all three are finite (a gap elsewhere)."""
        px, lo, hi = (np.asarray(a, dtype=float) for a in (px, lo, hi))
        ok = np.isfinite(px) & np.isfinite(lo) & np.isfinite(hi) & (np.abs(lo) < 1e150) & (np.abs(hi) < 1e150)
        k = 0
        while k < len(px):
            if not ok[k]:
                k += 1
                continue
            j = k
            while j < len(px) and ok[j]:
                j += 1
            xs = px[k:j]
            pts = list(zip(xs, hi[k:j])) + list(zip(xs[::-1], lo[k:j][::-1]))
            if j - k == 1:  # one point: a thin bar
                pts = [(xs[0] - 1, hi[k]), (xs[0] + 1, hi[k]), (xs[0] + 1, lo[k]), (xs[0] - 1, lo[k])]
            poly = _clip_polygon([(float(a), float(b)) for a, b in pts], self.box)
            if len(poly) >= 3:
                self.draw.polygon(self._scaled(poly), fill=tuple(rgba))
            k = j

    def heatmap(self, ax: Axes, x0: float, hx: float, y0: float, hy: float, rgb: np.ndarray) -> None:
        """Cells of colours ``rgb`` (nx, ny, 3) centred on nodes x0 + i hx, y0 + j hy, every supersampled pixel of
        the box coloured by the node nearest to its centre."""
        from PIL import Image
        s = self.s
        left, top, right, bottom = self.box
        cols = (np.arange(left * s, right * s) + 0.5) / s
        rows = (np.arange(top * s, bottom * s) + 0.5) / s
        xd, yd = ax.from_pixel(cols, rows)
        nx, ny = rgb.shape[:2]
        ix = np.clip(np.rint((xd - x0) / hx), 0, nx - 1).astype(int)
        iy = np.clip(np.rint((yd - y0) / hy), 0, ny - 1).astype(int)
        tile = np.ascontiguousarray(rgb[ix[None, :], iy[:, None]], dtype=np.uint8)
        self.img.paste(Image.fromarray(tile, "RGB"), (left * s, top * s))

    # ---------------------------------------------------------------- furniture
    @staticmethod
    def _axis_ticks(ax: Axes):
        if ax.xlog:
            xt = _log_ticks(*ax.xlim)
        else:
            v, step = _ticks(*ax.xlim, target=7)
            xt = [(t, _tick_label(t, step)) for t in v]
        if ax.ylog:
            yt = _log_ticks(*ax.ylim)
        else:
            v, step = _ticks(*ax.ylim, target=6)
            yt = [(t, _tick_label(t, step)) for t in v]
        xs = ax.to_pixel([t for t, _ in xt], np.full(len(xt), ax.ylim[0]))[0]
        ys = ax.to_pixel(np.full(len(yt), ax.xlim[0]), [t for t, _ in yt])[1]
        return xt, yt, xs, ys

    def gridlines(self, ax: Axes) -> None:
        """Light grey lines at the ticks (drawn first, under the data)."""
        left, top, right, bottom = self.box
        s = self.s
        _, _, xs, ys = self._axis_ticks(ax)
        for x in xs:
            self.draw.line([(x * s, top * s), (x * s, bottom * s)], fill=(225, 225, 225), width=s)
        for y in ys:
            self.draw.line([(left * s, y * s), (right * s, y * s)], fill=(225, 225, 225), width=s)

    def frame(self, ax: Axes, title: str, xlabel: str, ylabel: str) -> None:
        """The box, ticks and their labels, the title and the axis labels (drawn last, over the data)."""
        left, top, right, bottom = self.box
        s = self.s
        xt, yt, xs, ys = self._axis_ticks(ax)
        last = -1e9
        for x, (_, label) in zip(xs, xt):
            self.draw.line([(x * s, bottom * s), (x * s, (bottom + 7) * s)], fill=_BLACK, width=2 * s)
            w = self.text_size(label, 15)[0]
            if x - w / 2 > last + 6:  # skip a label that would touch its neighbour
                self.text(x, bottom + 10, label, 15, "mt")
                last = x + w / 2
        for y, (_, label) in zip(ys, yt):
            self.draw.line([((left - 7) * s, y * s), (left * s, y * s)], fill=_BLACK, width=2 * s)
            self.text(left - 10, y, label, 15, "rm")
        self.draw.rectangle([left * s, top * s, right * s, bottom * s], outline=_BLACK, width=2 * s)
        self.text((left + right) / 2, 24, title, 21, "mm")
        self.text((left + right) / 2, bottom + 48, xlabel, 18, "mm")
        self.text(20, (top + bottom) / 2, ylabel, 18, "mm", vertical=True)

    def colorbar(self, vmin: float, vmax: float, label: str) -> None:
        from PIL import Image
        s = self.s
        _, top, right, bottom = self.box
        x0, x1 = right + 22, right + 44
        rows = (np.arange(top * s, bottom * s) + 0.5) / s
        t = (bottom - rows) / (bottom - top)
        strip = np.repeat(colormap(t)[:, None, :], (x1 - x0) * s, axis=1)
        self.img.paste(Image.fromarray(np.ascontiguousarray(strip), "RGB"), (x0 * s, top * s))
        self.draw.rectangle([x0 * s, top * s, x1 * s, bottom * s], outline=_BLACK, width=2 * s)
        if vmax > vmin:
            v, step = _ticks(vmin, vmax, target=6)
            for tick in v:
                y = bottom - (tick - vmin) / (vmax - vmin) * (bottom - top)
                self.draw.line([(x1 * s, y * s), ((x1 + 6) * s, y * s)], fill=_BLACK, width=2 * s)
                self.text(x1 + 9, y, _tick_label(tick, step), 15, "lm")
        else:
            self.text(x1 + 9, (top + bottom) / 2, f"{vmin:.3g}", 15, "lm")
        self.text(FIGURE_SIZE[0] - 16, (top + bottom) / 2, label, 18, "mm", vertical=True)

    def _fit_text(self, text: str, size: int, width: float) -> str:
        """``text``, shortened with "..." to at most ``width`` pixels."""
        if self.text_size(text, size)[0] <= width:
            return text
        while len(text) > 1 and self.text_size(text + "...", size)[0] > width:
            text = text[:-1]
        return text + "..."

    def legend(self, entries: list[tuple[str, dict]], where: str = "inside",
               background=(255, 255, 255, 225)) -> None:
        """Entries (label, style): style ``line`` (colour, width, style, outline), ``band`` (rgba) or ``marker``
        (fill, outline, r).  ``where``: "inside" the box, in the corner that covers the fewest drawn points;
        "right" of the box; "above" it, in one row (labels shortened to fit the figure when needed)."""
        if not entries:
            return
        s = self.s
        left, top, right, bottom = self.box
        row, swatch, pad = 25, 40, 9
        if where == "above":
            swatch, gap = 32, 22
            labels = [lbl for lbl, _ in entries]
            widths = [swatch + 8 + self.text_size(lbl, 15)[0] for lbl in labels]
            while sum(widths) + gap * (len(entries) - 1) > FIGURE_SIZE[0] - 20 and max(map(len, labels)) > 4:
                k = int(np.argmax(widths))  # shorten the widest label
                labels[k] = self._fit_text(labels[k], 15, widths[k] - swatch - 8 - 6)
                widths[k] = swatch + 8 + self.text_size(labels[k], 15)[0]
            entries = [(lbl, st) for lbl, (_, st) in zip(labels, entries)]
            x = max(10.0, (left + right) / 2 - (sum(widths) + gap * (len(entries) - 1)) / 2)
            y_row = top - 17.0
            for (label, st), w in zip(entries, widths):
                self._swatch(x, x + swatch, y_row, st)
                self.text(x + swatch + 8, y_row, label, 15, "lm")
                x += w + gap
            return
        if where == "right":
            room = FIGURE_SIZE[0] - (right + 12) - 4 - swatch - 10 - 2 * pad
            entries = [(self._fit_text(lbl, 15, room), st) for lbl, st in entries]
        width = swatch + 10 + max(self.text_size(lbl, 15)[0] for lbl, _ in entries) + 2 * pad
        height = row * len(entries) + 2 * pad - 4
        ink = np.array(self.ink) if self.ink else np.zeros((0, 2))
        best = None
        corners = [(right + 12, top)] if where == "right" else [
            (right - 10 - width, top + 10), (left + 10, top + 10), (right - 10 - width, bottom - 10 - height),
            (left + 10, bottom - 10 - height)]
        for cx, cy in corners:
            covered = int(np.sum((ink[:, 0] >= cx - 4) & (ink[:, 0] <= cx + width + 4) & (ink[:, 1] >= cy - 4)
                                 & (ink[:, 1] <= cy + height + 4)))
            if best is None or covered < best[0]:
                best = (covered, cx, cy)
        assert best is not None
        _, cx, cy = best
        self.draw.rectangle([cx * s, cy * s, (cx + width) * s, (cy + height) * s], fill=background,
                            outline=(90, 90, 90), width=s)
        for k, (label, st) in enumerate(entries):
            y = cy + pad + row * k + row / 2 - 2
            self._swatch(cx + pad, cx + pad + swatch, y, st)
            self.text(cx + pad + swatch + 10, y, label, 15, "lm")

    def _swatch(self, xa: float, xb: float, y: float, st: dict) -> None:
        s = self.s
        kind = st["kind"]
        if kind == "band":
            self.draw.rectangle([xa * s, (y - 7) * s, xb * s, (y + 7) * s], fill=tuple(st["rgba"]))
        elif kind == "marker":
            self.dot((xa + xb) / 2, y, st.get("r", 5.0), st.get("fill"), st.get("outline", _BLACK),
                     st.get("outline_width", 1.5))
        else:
            if st.get("outline") is not None:
                self._line([(xa, y), (xb, y)], st["outline"], st["width"] + 3, st.get("style", "solid"), st["width"])
            self._line([(xa, y), (xb, y)], st["colour"], st["width"], st.get("style", "solid"))

    def _line(self, pts, colour, width, style, unit: float | None = None) -> None:
        """An unclipped line for the legend (no ink recorded)."""
        w = max(1, round(width * self.s))
        unit = unit or width
        if style == "solid":
            self.draw.line(self._scaled(pts), fill=tuple(colour), width=w)
        elif style == "dashed":
            for dash in _dashes(pts, _DASH[0] * unit, _DASH[1] * unit):
                self.draw.line(self._scaled(dash), fill=tuple(colour), width=w)
        else:
            for dash in _dashes(pts, 0.01, _DOT * unit):
                self.dot(dash[0][0], dash[0][1], 0.7 * width, colour)

    def png(self) -> bytes:
        out = io.BytesIO()
        self.img.reduce(self.s).save(out, format="PNG", optimize=True)
        return out.getvalue()


def _outlined(canvas: _Canvas, px, py, colour, width: float, style: str = "solid", outline=_BLACK) -> None:
    canvas.polyline(px, py, outline, width + 3, style, unit=width)
    canvas.polyline(px, py, colour, width, style)


def _heat_colours(values: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Colours of a field scaled from its smallest to its largest finite value (a constant field: the middle)."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return colormap(np.full(values.shape, np.nan)), 0.0, 1.0
    vmin, vmax = float(finite.min()), float(finite.max())
    with np.errstate(invalid="ignore", over="ignore"):
        t = (values - vmin) / (vmax - vmin) if vmax > vmin else np.where(np.isfinite(values), 0.5, np.nan)
    return colormap(t), vmin, vmax


def _grid_axes(grid: Grid, box) -> Axes:
    hx, hy = grid.hx, grid.hy
    return Axes(box, (grid.x.min - hx / 2, grid.x.max + hx / 2), (grid.y.min - hy / 2, grid.y.max + hy / 2))


def _regression_axes(x: np.ndarray, grid: Grid, ys: Sequence[np.ndarray]) -> Axes:
    if grid.x.n > 1:
        xlim = (grid.x.min, grid.x.max)
    else:
        xlim = _limits([x])
    return Axes(_BOX, xlim, _limits(ys, 0.06))


# ============================================================================================ figures
def _quiet(f):
    """Arithmetic on huge or missing values gives inf/NaN, which the drawing skips: no warnings about it."""
    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return f(*args, **kwargs)
    return wrapped


@_quiet
def fit_axes(cfg: dict, doc: dict) -> Axes:
    """The axis transform of :func:`fit_png` (density: grid cells centred on the nodes fill the box)."""
    a = _fit_arrays(cfg, doc)
    return _fit_axes(a, _data(cfg))


def _fit_axes(a: dict, data: np.ndarray) -> Axes:
    if a["model"] == "density":
        return _grid_axes(a["grid"], _BOX_CBAR)
    ys = [a["h"], a["mean"] + 2 * a["sd"], a["mean"] - 2 * a["sd"], data[:, 1]]
    ys += [a[k] for k in ("lo", "hi") if k in a]
    return _regression_axes(a["x"], a["grid"], ys)


def _one_node(a: dict, ax: Axes, keys: Sequence[str]) -> dict:
    """A one-node x axis (a 1-D density, the 0-dimensional regression): its curves are constants, drawn as
    horizontal lines across the box."""
    if len(a["x"]) != 1:
        return a
    a = dict(a, x=np.array(ax.xlim, dtype=float))
    for k in keys:
        if a.get(k) is not None:
            a[k] = np.repeat(a[k], 2)
    return a


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


@_quiet
def fit_png(cfg: dict, doc: dict) -> bytes:
    """The figure of a fit document (module docstring); PNG bytes, :data:`FIGURE_SIZE`, RGB."""
    a = _fit_arrays(cfg, doc)
    data = _data(cfg)
    ax = _fit_axes(a, data)
    canvas = _Canvas(ax.box)
    entries: _Entries
    prior = cfg.get("prior")
    lam = prior.get("lambda") if isinstance(prior, dict) else None
    lam_text = f", lambda = {lam:g}" if isinstance(lam, (int, float)) else ""
    a = _one_node(a, ax, ("h", "sd", "mean", "lo", "hi"))
    x = a["x"]
    hx, hy = ax.to_pixel(x, a["h"])
    if a["model"] == "density":
        grid = a["grid"]
        rgb, vmin, vmax = _heat_colours(a["P"])
        canvas.heatmap(ax, grid.x.min, grid.hx, grid.y.min, grid.hy, rgb)
        entries = []
        if "lo" in a:
            canvas.band(hx, ax.to_pixel(x, a["lo"])[1], ax.to_pixel(x, a["hi"])[1], (255, 255, 255, 70))
            entries.append(("credible band of h", {"kind": "band", "rgba": (160, 160, 160, 255)}))
        for sign in (1, -1):
            _outlined(canvas, hx, ax.to_pixel(x, a["h"] + sign * a["sd"])[1], _WHITE, 2.0, "dashed")
        _outlined(canvas, hx, hy, _WHITE, 4.5)
        canvas.markers(*ax.to_pixel(data[:, 0], data[:, 1]), 5.5, _DATA, _WHITE, 1.5)
        entries = [("h(x) = E[y|x]", {"kind": "line", "colour": _WHITE, "width": 4.5, "outline": _BLACK}),
                   ("h(x) ± sd(y|x)", {"kind": "line", "colour": _WHITE, "width": 2.0, "outline": _BLACK,
                                       "style": "dashed"})] + entries
        if len(data):
            entries.append((_count(len(data), "data point"), {"kind": "marker", "fill": _DATA, "outline": _WHITE}))
        canvas.frame(ax, f"MAP density P(y|x) ({_count(len(data), 'data point')}{lam_text})", "x", "y")
        canvas.colorbar(vmin, vmax, "P(y|x)")
        canvas.legend(entries, "above")
        return canvas.png()
    canvas.gridlines(ax)
    mean = a["mean"]
    _, up = ax.to_pixel(x, mean + 2 * a["sd"])
    _, down = ax.to_pixel(x, mean - 2 * a["sd"])
    blue = _PALETTE[0]
    canvas.band(hx, up, down, (*blue, 60))
    entries = [("exact mean ± 2 sd", {"kind": "band", "rgba": (*blue, 90)})]
    canvas.polyline(hx, ax.to_pixel(x, mean)[1], blue, 3.0, "dashed")
    entries.append(("exact posterior mean", {"kind": "line", "colour": blue, "width": 3.0, "style": "dashed"}))
    if "lo" in a:
        for key in ("lo", "hi"):
            canvas.polyline(hx, ax.to_pixel(x, a[key])[1], (90, 90, 90), 2.5, "dotted")
        entries.append(("credible band", {"kind": "line", "colour": (90, 90, 90), "width": 2.5, "style": "dotted"}))
    canvas.polyline(hx, hy, _BLACK, 4.0)
    entries.insert(0, ("MAP h(x)", {"kind": "line", "colour": _BLACK, "width": 4.0}))
    canvas.markers(*ax.to_pixel(data[:, 0], data[:, 1]), 6.0, _PALETTE[1], _BLACK, 1.5)
    if len(data):
        entries.append((_count(len(data), "data point"), {"kind": "marker", "fill": _PALETTE[1], "r": 6.0}))
    beta = cfg.get("beta")
    beta_text = f", beta = {beta:g}" if isinstance(beta, (int, float)) else ""
    canvas.frame(ax, f"Regression h(x) ({_count(len(data), 'data point')}{lam_text}{beta_text})", "x", "h(x)")
    canvas.legend(entries)
    return canvas.png()


@_quiet
def learning_curve_axes(doc: dict) -> Axes:
    """The axis transform of :func:`learning_curve_png` (n on a log axis when it spans more than a factor 10)."""
    return _lc_axes(_learning_curves(doc))


def _lc_series(lc: dict) -> list[dict]:
    """The curves drawn: every entry of ``curves``, and the top-level series unless it repeats one of them."""
    series = list(lc["curves"])
    main = lc["main"]

    def same(c):
        return (len(c["n"]) == len(main["n"]) and np.array_equal(c["n"], main["n"]) and
                np.allclose(c["test"][0], main["test"][0], equal_nan=True) and
                np.allclose(c["train"][0], main["train"][0], equal_nan=True))
    has_values = np.isfinite(main["test"][0]).any() or np.isfinite(main["train"][0]).any()
    if has_values and not any(same(c) for c in series):
        series.insert(0, {**main, "label": "all" if series else "fit", "colour": _BLACK})
    return series


def _lc_axes(lc: dict) -> Axes:
    ns, ys = [lc["n"]], []
    for c in _lc_series(lc):
        ns.append(c["n"])
        for mean, sd in (c["train"], c["test"]):
            finite_sd = np.where(np.isfinite(sd), sd, 0.0)
            with np.errstate(over="ignore", invalid="ignore"):
                ys += [mean, mean + finite_sd, mean - finite_sd]
    if lc["replica"] is not None:
        ns.append(lc["replica"]["n"])
        ys.append(lc["replica"]["test"])
    nv = np.concatenate(ns) if ns else np.zeros(0)
    nv = nv[np.isfinite(nv)]
    xlog = bool(nv.size and nv.min() > 0 and nv.max() > 10 * nv.min())
    return Axes(_BOX_LEGEND, _limits([nv], 0.04, xlog), _limits(ys, 0.06), xlog=xlog)


@_quiet
def learning_curve_png(doc: dict) -> bytes:
    """The figure of a learning-curve document (module docstring); PNG bytes, :data:`FIGURE_SIZE`, RGB."""
    lc = _learning_curves(doc)
    ax = _lc_axes(lc)
    canvas = _Canvas(ax.box)
    canvas.gridlines(ax)
    series = _lc_series(lc)
    entries: _Entries = []
    k = 0
    for c in series:
        if "colour" not in c:
            c["colour"] = _PALETTE[k % len(_PALETTE)]
            k += 1
    for c in series:  # bands first, so that no band hides a line
        px = ax.to_pixel(c["n"], np.zeros(len(c["n"])))[0]
        for (mean, sd), alpha in ((c["test"], 55), (c["train"], 30)):
            with np.errstate(over="ignore", invalid="ignore"):
                lo, hi = mean - sd, mean + sd
            canvas.band(px, ax.to_pixel(c["n"], lo)[1], ax.to_pixel(c["n"], hi)[1], (*c["colour"], alpha))
    for c in series:
        colour = c["colour"]
        px, test_y = ax.to_pixel(c["n"], c["test"][0])
        canvas.polyline(px, ax.to_pixel(c["n"], c["train"][0])[1], colour, 3.0, "dashed")
        canvas.polyline(px, test_y, colour, 4.0)
        canvas.markers(px, test_y, 4.5, colour, _WHITE, 1.2)
        entries.append((c["label"], {"kind": "line", "colour": colour, "width": 4.0}))
    if lc["replica"] is not None:
        rep = lc["replica"]
        canvas.polyline(*ax.to_pixel(rep["n"], rep["test"]), _BLACK, 3.5, "dotted")
        entries.append(("replica theory (approx.)", {"kind": "line", "colour": _BLACK, "width": 3.5,
                                                     "style": "dotted"}))
    if lc["best"] is not None:
        rings = 0
        for nk, lam in zip(lc["n"], lc["best"]):
            if not np.isfinite(lam):
                continue
            for c in series:
                if c["lambda"] is None or not math.isclose(float(c["lambda"]), float(lam), rel_tol=1e-9):
                    continue
                hit = np.flatnonzero(c["n"] == nk)
                if hit.size:
                    px, py = ax.to_pixel([nk], [c["test"][0][hit[0]]])
                    canvas.markers(px, py, 10.0, None, _BLACK, 2.5)
                    rings += int(np.isfinite(px[0]) and np.isfinite(py[0]))
        if rings:
            entries.append(("best lambda at n", {"kind": "marker", "fill": None, "r": 8.0, "outline_width": 2.5}))
    entries.append(("test error (solid)", {"kind": "line", "colour": (60, 60, 60), "width": 4.0}))
    entries.append(("train error (dashed)", {"kind": "line", "colour": (60, 60, 60), "width": 3.0,
                                             "style": "dashed"}))
    if not canvas.ink:
        left, top, right, bottom = ax.box
        canvas.text((left + right) / 2, (top + bottom) / 2, "no finite error values to draw", 18, "mm",
                    fill=(110, 110, 110))
    mode = doc.get("mode")
    model = doc.get("model")
    what = ", ".join(str(v) for v in (model, mode) if isinstance(v, str))
    canvas.frame(ax, "Learning curve" + (f" ({what})" if what else ""), "n (number of data)" +
                 (", log scale" if ax.xlog else ""), "error")
    canvas.legend(entries, "right")
    return canvas.png()


@_quiet
def bootstrap_axes(cfg: dict, doc: dict) -> Axes:
    """The axis transform of :func:`bootstrap_png`."""
    a = _bootstrap_arrays(cfg, doc)
    return _bootstrap_axes(a, _data(cfg))


def _bootstrap_axes(a: dict, data: np.ndarray) -> Axes:
    if a["model"] == "density":
        return _grid_axes(a["grid"], _BOX_CBAR)
    return _regression_axes(a["x"], a["grid"], [a["h"], a["h_mean"], a["h_lo"], a["h_hi"], data[:, 1]])


@_quiet
def bootstrap_png(cfg: dict, doc: dict) -> bytes:
    """The figure of a bootstrap document (module docstring); PNG bytes, :data:`FIGURE_SIZE`, RGB."""
    a = _bootstrap_arrays(cfg, doc)
    data = _data(cfg)
    ax = _bootstrap_axes(a, data)
    canvas = _Canvas(ax.box)
    entries: _Entries
    a = _one_node(a, ax, ("h", "h_mean", "h_lo", "h_hi"))
    x = a["x"]
    px, hy = ax.to_pixel(x, a["h"])
    lo, hi = ax.to_pixel(x, a["h_lo"])[1], ax.to_pixel(x, a["h_hi"])[1]
    mean_y = ax.to_pixel(x, a["h_mean"])[1]
    level = f"{a['level'] * 100:g}% band" if a["level"] is not None and 0 < a["level"] < 1 else "band"
    title = f"Bootstrap of h(x) ({_count(len(data), 'data point')})"
    if a["model"] == "density":
        field, label = (a["P_sd"], "sd of P(y|x) (bootstrap)") if a["P_sd"] is not None else \
            (a["P_mean"], "mean of P(y|x) (bootstrap)")
        if field is not None:
            title = f"Bootstrap of h(x) over the {label.split(' (')[0]} ({_count(len(data), 'data point')})"
        grid = a["grid"]
        if field is None:
            field = np.full(grid.shape, np.nan)
        rgb, vmin, vmax = _heat_colours(field)
        canvas.heatmap(ax, grid.x.min, grid.hx, grid.y.min, grid.hy, rgb)
        canvas.band(px, lo, hi, (255, 255, 255, 80))
        for edge in (lo, hi):
            _outlined(canvas, px, edge, _WHITE, 1.5)
        _outlined(canvas, px, mean_y, _WHITE, 2.5, "dashed")
        _outlined(canvas, px, hy, _WHITE, 4.5)
        canvas.markers(*ax.to_pixel(data[:, 0], data[:, 1]), 5.5, _DATA, _WHITE, 1.5)
        entries = [("h(x) of the fit", {"kind": "line", "colour": _WHITE, "width": 4.5, "outline": _BLACK}),
                   ("bootstrap mean", {"kind": "line", "colour": _WHITE, "width": 2.5, "outline": _BLACK,
                                       "style": "dashed"}),
                   (f"bootstrap {level}", {"kind": "line", "colour": _WHITE, "width": 1.5, "outline": _BLACK})]
        if len(data):
            entries.append((_count(len(data), "data point"), {"kind": "marker", "fill": _DATA, "outline": _WHITE}))
        canvas.frame(ax, title, "x", "y")
        canvas.colorbar(vmin, vmax, label)
        canvas.legend(entries, "above")
        return canvas.png()
    canvas.gridlines(ax)
    blue = _PALETTE[0]
    canvas.band(px, lo, hi, (*blue, 60))
    canvas.polyline(px, mean_y, blue, 3.0, "dashed")
    canvas.polyline(px, hy, _BLACK, 4.0)
    canvas.markers(*ax.to_pixel(data[:, 0], data[:, 1]), 6.0, _PALETTE[1], _BLACK, 1.5)
    entries = [("h(x), fit to all data", {"kind": "line", "colour": _BLACK, "width": 4.0}),
               ("bootstrap mean", {"kind": "line", "colour": blue, "width": 3.0, "style": "dashed"}),
               (f"bootstrap {level}", {"kind": "band", "rgba": (*blue, 90)})]
    if len(data):
        entries.append((_count(len(data), "data point"), {"kind": "marker", "fill": _PALETTE[1], "r": 6.0}))
    canvas.frame(ax, title, "x", "h(x)")
    canvas.legend(entries)
    return canvas.png()
