"""The JSON configuration document of CONVENTIONS.md §4: parse, validate, fill defaults, round-trip.

``validate_config(doc)`` returns a new, complete document (every key present) or raises :class:`ConfigError`
naming the offending key and what to do.  The document is a public contract: keys are only ever added.

Defaults for omitted keys:

* ``model`` "density"; ``grid`` the paper mesh (x = 1..10, y = 1..15, both periodic); ``data`` [];
* ``prior``: field "L", lambda = lambda_x = lambda_y = 1; of l0, l2, l4, l6 the missing ones are 0, except that
  when none of them is given l2 = 1 (a plain -Delta prior);
* ``templates`` [] (the zero template); ``weights`` equal p_j = 1/m; ``beta`` 1 (the paper);
* ``solver``: method "newton", mass2 0.01, init "kernel", init_mass2 0.1, min_iter 4, max_iter 50, tol 1e-8;
* ``truth`` null (no test error).  Density: "paper" (eq. 708).  Regression (an extension): the true h(x) as a
  template object or a list of values on the x nodes; the test error is then the mean of (h - h_true)^2 / 2.

Extensions of the contract: density templates ``{"kind": "gaussian", "mu": m, "sigma": s}`` (a Gaussian in y,
the same at every x, raw at the nodes like the paper's) and ``{"kind": "array", "values": [[...]]}`` (an nx x ny
template in the representation of the field: log-density for field L, density for field P).
"""
from __future__ import annotations

import copy
import json
import math

from .grid import Axis, Grid

MAX_AXIS_NODES = 1024
MAX_POINTS = 100_000


class ConfigError(ValueError):
    """A configuration document is malformed; the message names the key and the fix."""


TOP_KEYS = ("model", "grid", "data", "prior", "templates", "weights", "beta", "solver", "truth")
PRIOR_KEYS = ("field", "lambda", "lambda_x", "lambda_y", "l0", "l2", "l4", "l6")
SOLVER_KEYS = ("method", "mass2", "init", "init_mass2", "min_iter", "max_iter", "tol")
AXIS_KEYS = ("min", "max", "n", "boundary")
DENSITY_TEMPLATES = {"uniform": (), "paper_t1": (), "paper_t2": (), "gaussian": ("mu", "sigma"),
                     "array": ("values",)}
REGRESSION_TEMPLATES = {"constant": ("value",), "linear": ("slope", "intercept"), "array": ("values",)}
METHODS = ("newton", "massive", "gradient")
INITS = ("uniform", "kernel", "empirical")


def default_config(model: str = "density") -> dict:
    """A complete, valid document with every default filled in (the paper mesh, no data)."""
    return validate_config({"model": model})


def _keys(d, allowed, where):
    if not isinstance(d, dict):
        raise ConfigError(f"{where} must be a JSON object, got {type(d).__name__}")
    unknown = [k for k in d if k not in allowed]
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(map(repr, unknown))} in {where}; "
                          f"known keys are {', '.join(allowed)}")


def _num(v, where, lo=None, hi=None, lo_open=False, integer=False):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(f"{where} must be a number, got {v!r}")
    if not math.isfinite(v):
        raise ConfigError(f"{where} must be a finite number, got {v!r}")
    if integer and int(v) != v:
        raise ConfigError(f"{where} must be a whole number, got {v!r}")
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise ConfigError(f"{where} must be {'>' if lo_open else '>='} {lo}, got {v!r}")
    if hi is not None and v > hi:
        raise ConfigError(f"{where} must be <= {hi}, got {v!r}")
    return int(v) if integer else float(v)


def _axis(d, where, default):
    d = {**default, **(d or {})}
    _keys(d, AXIS_KEYS, where)
    n = _num(d["n"], f"{where}.n", 1, MAX_AXIS_NODES, integer=True)
    lo, hi = _num(d["min"], f"{where}.min"), _num(d["max"], f"{where}.max")
    if n > 1 and not hi > lo:
        raise ConfigError(f"{where}: max ({hi:g}) must be larger than min ({lo:g})")
    if d["boundary"] not in ("periodic", "neumann"):
        raise ConfigError(f"{where}.boundary must be \"periodic\" or \"neumann\", got {d['boundary']!r}")
    return {"min": lo, "max": hi, "n": n, "boundary": d["boundary"]}


def _template(t, i, model, ny):
    kinds = DENSITY_TEMPLATES if model == "density" else REGRESSION_TEMPLATES
    where = f"templates[{i}]"
    if not isinstance(t, dict) or "kind" not in t:
        raise ConfigError(f"{where} must be an object with a \"kind\" (one of {', '.join(kinds)})")
    if t["kind"] not in kinds:
        raise ConfigError(f"{where}.kind {t['kind']!r} is not known for the {model} model; "
                          f"use one of {', '.join(kinds)}")
    need = kinds[t["kind"]]
    _keys(t, ("kind",) + need, where)
    out = {"kind": t["kind"]}
    for k in need:
        if k not in t:
            raise ConfigError(f"{where} of kind {t['kind']!r} needs the key {k!r}")
        if k == "values":
            out[k] = t[k]
        else:
            out[k] = _num(t[k], f"{where}.{k}", 0, lo_open=True) if k == "sigma" else _num(t[k], f"{where}.{k}")
    return out


def validate_config(doc) -> dict:
    """Check a configuration document and return a complete copy with defaults; raise ConfigError otherwise."""
    if not isinstance(doc, dict):
        raise ConfigError(f"the configuration must be a JSON object, got {type(doc).__name__}")
    _keys(doc, TOP_KEYS, "the configuration")
    model = doc.get("model", "density")
    if model not in ("density", "regression"):
        raise ConfigError(f"model must be \"density\" or \"regression\", got {model!r}")
    g = doc.get("grid", {}) or {}
    _keys(g, ("x", "y"), "grid")
    x = _axis(g.get("x"), "grid.x", {"min": 1, "max": 10, "n": 10, "boundary": "periodic"})
    y = _axis(g.get("y"), "grid.y", {"min": 1, "max": 15, "n": 15, "boundary": "periodic"})
    grid = Grid(Axis(**x), Axis(**y))

    data = doc.get("data", [])
    if not isinstance(data, list) or len(data) > MAX_POINTS:
        raise ConfigError(f"data must be a list of at most {MAX_POINTS} [x, y] pairs")
    pts = []
    for k, p in enumerate(data):
        if not isinstance(p, (list, tuple)) or len(p) != 2:
            raise ConfigError(f"data[{k}] must be an [x, y] pair, got {p!r}")
        pts.append([_num(p[0], f"data[{k}][0] (x)"), _num(p[1], f"data[{k}][1] (y)")])
    try:
        if model == "density":
            grid.snap(pts)
        else:
            grid.x.snap([p[0] for p in pts])
    except ValueError as e:
        raise ConfigError(str(e)) from None

    pr = doc.get("prior", {}) or {}
    _keys(pr, PRIOR_KEYS, "prior")
    field = pr.get("field", "L")
    if field not in ("L", "P"):
        raise ConfigError(f"prior.field must be \"L\" or \"P\", got {field!r}")
    lam = _num(pr.get("lambda", 1.0), "prior.lambda", 0, lo_open=True)
    prior = {"field": field, "lambda": lam,
             "lambda_x": _num(pr.get("lambda_x", 1.0), "prior.lambda_x", 0),
             "lambda_y": _num(pr.get("lambda_y", 1.0), "prior.lambda_y", 0)}
    given = [k for k in ("l0", "l2", "l4", "l6") if k in pr]
    for k in ("l0", "l2", "l4", "l6"):
        prior[k] = _num(pr.get(k, 1.0 if (k == "l2" and not given) else 0.0), f"prior.{k}", 0)
    if prior["lambda_x"] + prior["lambda_y"] == 0:
        raise ConfigError("prior: lambda_x and lambda_y are both 0, so K = 0 and the prior is empty; "
                          "set lambda_x > 0 or lambda_y > 0")
    if prior["l0"] + prior["l2"] + prior["l4"] + prior["l6"] == 0:
        raise ConfigError("prior: all of l0, l2, l4, l6 are 0, so K = 0 and the prior is empty; "
                          "set l2 > 0 (smoothness) or l0 > 0 (mass)")

    tpl = doc.get("templates", []) or []
    if not isinstance(tpl, list):
        raise ConfigError("templates must be a list of template objects")
    templates = [_template(t, i, model, grid.y.n) for i, t in enumerate(tpl)]
    w = doc.get("weights", None)
    if w in (None, []):
        weights = [1.0 / len(templates)] * len(templates) if templates else []
    else:
        if not isinstance(w, list) or len(w) != len(templates):
            raise ConfigError(f"weights must be a list with one p_j per template ({len(templates)}), got {w!r}")
        weights = [_num(v, f"weights[{i}]", 0) for i, v in enumerate(w)]
        if templates and sum(weights) <= 0:
            raise ConfigError("weights are all 0; give at least one template a positive weight p_j")
    beta = _num(doc.get("beta", 1.0), "beta", 1e-12, 1e12)
    if beta <= 0:
        raise ConfigError("beta must be > 0")

    so = doc.get("solver", {}) or {}
    _keys(so, SOLVER_KEYS, "solver")
    method = so.get("method", "newton")
    if method not in METHODS:
        raise ConfigError(f"solver.method must be one of {', '.join(METHODS)}, got {method!r}")
    init = so.get("init", "kernel")
    if not isinstance(init, str) or not (init in INITS or init.startswith("template:")):
        raise ConfigError(f"solver.init must be one of {', '.join(INITS)} or \"template:<index>\", got {init!r}")
    if init.startswith("template:"):
        idx = init.split(":", 1)[1]
        if not idx.isdigit() or int(idx) >= len(templates):
            raise ConfigError(f"solver.init {init!r} names no template; there are {len(templates)} "
                              f"(indices 0..{len(templates) - 1})")
    solver = {"method": method,
              "mass2": _num(so.get("mass2", 0.01), "solver.mass2", 0),
              "init": init,
              "init_mass2": _num(so.get("init_mass2", 0.1), "solver.init_mass2", 0, lo_open=True),
              "min_iter": _num(so.get("min_iter", 4), "solver.min_iter", 0, 100_000, integer=True),
              "max_iter": _num(so.get("max_iter", 50), "solver.max_iter", 0, 100_000, integer=True),
              "tol": _num(so.get("tol", 1e-8), "solver.tol", 0)}
    if method == "massive" and solver["mass2"] <= 0:
        raise ConfigError("solver.mass2 must be > 0 for massive relaxation (A = K + m^2 I is singular otherwise)")
    truth = doc.get("truth", None)
    if model == "density":
        if truth not in (None, "paper"):
            raise ConfigError(f"truth must be \"paper\" or omitted, got {truth!r}")
    elif truth == "paper":
        raise ConfigError("truth \"paper\" is the density (708); for regression give the true h(x) as a template "
                          "object (constant, linear, array) or a list of values on the x nodes")
    elif isinstance(truth, dict):
        truth = _template(truth, 0, model, grid.y.n)
    elif isinstance(truth, list):
        if len(truth) != grid.x.n:
            raise ConfigError(f"truth must have one value per x node ({grid.x.n}), got {len(truth)}")
        truth = [_num(v, f"truth[{i}]") for i, v in enumerate(truth)]
    elif truth is not None:
        raise ConfigError(f"truth for regression must be a template object or a list of values, got {truth!r}")
    out = {"model": model, "grid": {"x": x, "y": y}, "data": pts, "prior": prior, "templates": templates,
           "weights": weights, "beta": beta, "solver": solver, "truth": truth}
    return copy.deepcopy(out)


def grid_from_config(cfg: dict) -> Grid:
    g = cfg["grid"]
    return Grid(Axis(**g["x"]), Axis(**g["y"]))


def load_config(path) -> dict:
    """Read and validate a JSON configuration file; errors name the file and the problem."""
    try:
        with open(path) as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"no such configuration file: {path}") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    return validate_config(doc)
