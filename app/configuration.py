"""The dashboard's parameters <-> the JSON configuration document of CONVENTIONS.md §4.

:func:`to_config` writes the document of a session's parameter values, :func:`params_from_config` reads a validated
document back into parameter values.  Any valid document loads: what the controls cannot show (several prior orders
at once, repeated or array templates, unnormalised weights, another grid or domain, a regression truth) is kept as it
is in parameters of its own (``extra_orders``, ``file_templates``, ``file_weights``, ``regression_truth``,
``local_prior``, ``robust_prior``) and written back unchanged.  The template menu is the registry of
:mod:`bftcore.foundations.templates` (its menu kinds, labels and keys); :data:`TEMPLATE_PARAMS` names the
parameter that holds each key of a menu template.

The functions read the values as attributes of ``values`` (a :class:`app.session.BFTSession`, or anything with the
same attributes); nothing here knows the session's runs or views.
"""
from __future__ import annotations

import copy
import re
from typing import Any

import numpy as np

from bftcore.foundations import config
from bftcore.foundations.config import kind_of
from bftcore.foundations.templates import kinds

#: Largest number of data points a session accepts (clicks beyond it are refused with a message).
MAX_POINTS = 2000
#: Grid resolutions offered, nx×ny on the paper domain x in [1, 10], y in [1, 15].
GRID_SIZES = {"10×15 (paper)": (10, 15), "19×29": (19, 29), "28×43": (28, 43),
              "46×71": (46, 71), "64×96": (64, 96), "91×141": (91, 141)}
#: Menu entry shown when the grid came from a file or preset that is not one of GRID_SIZES.
CUSTOM_GRID = "as loaded (custom)"
X_RANGE = (1.0, 10.0)
Y_RANGE = (1.0, 15.0)

#: The model menu: entry -> (the document's model, its prior field).
MODELS = {"density, prior on L": ("density", "L"), "density, prior on P": ("density", "P"),
          "regression": ("regression", None)}
KEEP_CURRENT = "keep current"
#: The initialisation menu: the document's solver.init values ("coarse", the multilevel start, is the kernel start on
#: grids under 64 nodes a side, as the dashboard's presets are; a loaded document on a larger grid keeps it).
INITS = ["uniform", "kernel", "empirical", "coarse", "template 1", "template 2", "template 3", "template 4",
         KEEP_CURRENT]
#: "template N" of the initialisation menu (N up to 16, any of a file's templates) is the document's "template:N-1".
TEMPLATE_INIT = re.compile(r"template ([1-9]|1[0-6])")
ORDERS = ["l2", "l4", "l6"]
METHODS = list(config.METHODS)
#: The parameter holding each key of a menu template, by (kind, key); the weight p_j of kind k is ``w_<k>``.
TEMPLATE_PARAMS = {("gaussian", "mu"): "gauss_mu", ("gaussian", "sigma"): "gauss_sigma",
                   ("constant", "value"): "const_value",
                   ("linear", "slope"): "lin_slope", ("linear", "intercept"): "lin_intercept"}

#: Parameters that define the problem; changing one restarts the solver (warm).  ``l0`` is the prior's l0 (the
#: mass m² of the prior); ``solver_mass2`` is the document's solver.mass2 (the mass of massive relaxation).
CONFIG_PARAMS = ["model", "x_min", "x_max", "nx", "y_min", "y_max", "ny", "boundary_x", "boundary_y", "lam",
                 "lam_x", "lam_y", "l0", "order", "order_coef", "extra_orders", "templates", "w_uniform",
                 "w_paper_t1", "w_paper_t2", "w_gaussian", "gauss_mu", "gauss_sigma", "w_constant", "const_value",
                 "w_linear", "lin_slope", "lin_intercept", "file_templates", "file_weights", "beta", "method",
                 "solver_mass2", "init", "init_mass2", "min_iter", "max_iter", "tol", "truth", "regression_truth",
                 "data", "labels", "local_prior", "robust_prior"]
#: Parameters kept in the URL so that a link reproduces the state.
URL_PARAMS = CONFIG_PARAMS + ["grid_size", "display", "frame_ms", "preset", "layout", "theme", "font_size"]
#: The screen layouts (issue 28): "auto" is the presenter layout in a landscape window at least 1200 px wide (a
#: projector's 1280x720 or 1920x1080, a laptop), else the workbench (the controls beside one column of plots).
LAYOUTS = ["auto", "presenter", "workbench"]
THEMES = ["light", "dark"]
#: Font sizes (px) of the size control; the default is what a projector's back row reads.
FONT_SIZES = (12, 28)
DEFAULT_FONT = 16


def model_of(values) -> tuple[str, str | None]:
    """The document's model and prior field of the model menu's entry."""
    return MODELS[values.model]


def kind_of_values(values):
    """The problem kind of a document of these parameter values (the model menu's entry on this grid), found as a
    validated document finds it (:func:`bftcore.foundations.config.kind_of`)."""
    model, field = MODELS[values.model]
    doc = {"model": model, "grid": {"x": {"n": int(values.nx)}},
           "prior": {"field": field, **local_keys(values, model)}, "solver": {"method": values.method}}
    if robust_of(values, model):
        doc["solver"]["method"] = config.IRLS
    return kind_of(doc)


#: A local prior's defaults per type, as the dashboard's toggle sets them (the step demo's, bftcore.models.presets).
LOCAL_DEFAULTS = {"switch": {"type": "switch", "stiffness": [1.0, 0.001], "pi": [0.95, 0.05]},
                  "hyperfield": {"type": "hyperfield", "theta0": 0.0, "gamma_theta": 1.0, "mu_theta": 1.0}}


def local_keys(values, model: str) -> dict:
    """The prior's ``local`` and ``cuts`` of a problem with a local prior (``values.local_prior``: a regression's on
    its chain of x nodes, a density's on its grid's edges, :mod:`bftcore.models.local_density`), else {}."""
    lp = getattr(values, "local_prior", None) or {}
    return copy.deepcopy(lp) if lp else {}


#: The prior potentials of the dashboard's selector (Fig 12, :data:`bftcore.foundations.config.POTENTIAL_PRESETS`):
#: "off" is no robust prior (the Gaussian prior and data term, solved by the model's own solver).
POTENTIALS = ("off", "quadratic", "cup", "cusp", "inverted_cup")
#: The data terms of the selector (Fig 5, :data:`bftcore.foundations.config.DATA_TERM_PARAMETERS`); a regression's.
DATA_TERMS = tuple(config.DATA_TERM_PARAMETERS)


def robust_of(values, model: str) -> dict:
    """The robust prior of the values (``values.robust_prior``: ``{"potential": {...}, "data_term": {...}}``, the
    document's ``prior.potential`` and ``data_term``) as the model takes it: a regression both, a density the
    potential only (its data term is its counts); {} for none."""
    rb = getattr(values, "robust_prior", None) or {}
    if model == "density":  # the counts are its data term, and the quadratic potential is its own Gaussian prior
        rb = {k: v for k, v in rb.items() if k == "potential" and v.get("name") != "quadratic"}
    return copy.deepcopy(rb)


def menu_kinds(model: str) -> tuple[str, ...]:
    """The template kinds the menu offers for a model ("density" or "regression"), in the document's order."""
    return kinds(model, menu=True)


def fits_model(spec: dict, kind) -> bool:
    """A template object belongs to the problem ``kind`` (arrays by their shape: an nx × ny field where the data's y
    lies on the grid, values on the x nodes otherwise)."""
    if spec["kind"] == "array":
        values = spec.get("values") or []
        return kind.y_on_grid == bool(values and isinstance(values[0], list))
    return spec["kind"] in menu_kinds(kind.model)


def template_kinds(values) -> list[str]:
    """Active menu template kinds of the model, in the fixed order of the configuration (none with file templates)."""
    if values.file_templates:
        return []
    return [k for k in menu_kinds(model_of(values)[0]) if k in values.templates]


def template_dict(values, kind: str) -> dict:
    """The template object of a menu kind, its keys from :data:`TEMPLATE_PARAMS`."""
    return {"kind": kind, **{key: getattr(values, name) for (k, key), name in TEMPLATE_PARAMS.items() if k == kind}}


def template_specs(values) -> tuple[list[dict], list[float]]:
    """The templates and prior weights p_j of the configuration: the file's, or the menu's (normalised)."""
    if values.file_templates:
        return copy.deepcopy(values.file_templates), [float(w) for w in values.file_weights]
    active = template_kinds(values)
    weights = [float(getattr(values, f"w_{k}")) for k in active]
    total = sum(weights)
    return [template_dict(values, k) for k in active], [w / total for w in weights]


def to_config(values) -> dict:
    """The JSON configuration document (CONVENTIONS §4) of the values."""
    model, field = model_of(values)
    templates, weights = template_specs(values)
    prior = {"lambda": values.lam, "lambda_x": values.lam_x, "lambda_y": values.lam_y, "l0": values.l0,
             "l2": 0.0, "l4": 0.0, "l6": 0.0}
    prior.update({k: float(v) for k, v in values.extra_orders.items() if k in ORDERS})
    prior[values.order] = values.order_coef
    prior.update(local_keys(values, model))
    robust = robust_of(values, model)
    if "potential" in robust:
        prior["potential"] = robust["potential"]
    if field:
        prior = {"field": field, **prior}
    init = values.init
    if TEMPLATE_INIT.fullmatch(init):
        init = f"template:{int(init.split()[1]) - 1}"
    elif init == KEEP_CURRENT:
        init = "kernel"  # the solver gets the current field separately; see export_config for files
    doc = {
        "model": model,
        "grid": {"x": {"min": float(values.x_min), "max": float(values.x_max), "n": int(values.nx),
                       "boundary": values.boundary_x},
                 "y": {"min": float(values.y_min), "max": float(values.y_max), "n": int(values.ny),
                       "boundary": values.boundary_y}},
        "data": [[float(x), float(y)] for x, y in values.data],
        "prior": prior,
        "templates": templates,
        "weights": weights,
        "beta": float(values.beta),
        # a prior potential or a data term is solved by IRLS (the gate's rule); the method menu waits
        "solver": {"method": config.IRLS if robust else values.method, "mass2": values.solver_mass2, "init": init,
                   "init_mass2": values.init_mass2, "min_iter": int(values.min_iter),
                   "max_iter": int(values.max_iter), "tol": float(values.tol)},
    }
    if "data_term" in robust:
        doc["data_term"] = robust["data_term"]
    if model == "density" and values.truth == "paper":  # the paper truth (708) is a density
        doc["truth"] = "paper"
    elif model == "regression" and values.regression_truth is not None:
        doc["truth"] = copy.deepcopy(values.regression_truth)
    if values.labels:
        doc["labels"] = dict(values.labels)
    return doc


def export_config(values, start) -> dict:
    """The document to download: :func:`to_config`, except that with the initialisation "keep current" the start
    field ``start`` (the iteration-0 record of the warm-started run on screen, or None) is written into the file, so
    `python -m bftcore fit` replays that run.

    ``solver.init`` of CONVENTIONS §4 takes no array, so the start field goes in as an extra template of kind
    "array" with prior weight p = 0 (a_j = 0 exactly: it changes neither the energy minimised nor its
    minimum) and ``solver.init`` points at it.  A problem without templates gets the zero template
    t = 0 with p = 1 first, which is the prior of "no template".  The mixing list of the result then has one
    more entry (0) per added template."""
    doc = to_config(values)
    if values.init != KEEP_CURRENT or start is None:
        return doc
    model, field = model_of(values)
    if model == "regression":
        field_values = np.asarray(start.h, float).tolist()
    else:
        field_values = np.asarray(start.L if field == "L" else start.P, float).tolist()
    if not doc["templates"]:
        zero = np.zeros(values.nx).tolist() if model == "regression" else np.zeros((values.nx, values.ny)).tolist()
        doc["templates"], doc["weights"] = [{"kind": "array", "values": zero}], [1.0]
    doc["templates"].append({"kind": "array", "values": field_values})
    doc["weights"].append(0.0)
    doc["solver"]["init"] = f"template:{len(doc['templates']) - 1}"
    return doc


def menu_templates(doc: dict, model: str) -> dict | None:
    """Parameter values that show the document's templates with the menu, or None when it cannot (then they are
    kept as file templates)."""
    allowed = menu_kinds(model)
    tpl, weights = doc.get("templates", []), [float(w) for w in doc.get("weights", [])]
    found = [t["kind"] for t in tpl]
    if len(set(found)) != len(found) or any(k not in allowed for k in found):
        return None
    if found != [k for k in allowed if k in found]:  # the menu writes templates in a fixed order
        return None
    if tpl and (any(w <= 0 for w in weights) or [w / sum(weights) for w in weights] != weights):
        return None  # the menu writes normalised weights; anything else must stay exactly as in the file
    out: dict[str, Any] = {"templates": found, "file_templates": [], "file_weights": []}
    for t, w in zip(tpl, weights):
        out[f"w_{t['kind']}"] = w
        out.update({name: t[key] for (k, key), name in TEMPLATE_PARAMS.items() if k == t["kind"]})
    return out


def params_from_config(doc: dict) -> dict:
    """Parameter values for a validated document (anything ``validate_config`` accepts).  A document with more
    than :data:`MAX_POINTS` points is refused (ValueError); the parameters judge the values themselves."""
    out: dict[str, Any] = {}
    model = doc.get("model", "density")
    field = doc.get("prior", {}).get("field", "L")
    out["model"] = "regression" if model == "regression" else f"density, prior on {field}"
    g = doc["grid"]
    out.update(x_min=float(g["x"]["min"]), x_max=float(g["x"]["max"]), nx=int(g["x"]["n"]),
               y_min=float(g["y"]["min"]), y_max=float(g["y"]["max"]), ny=int(g["y"]["n"]),
               boundary_x=g["x"]["boundary"], boundary_y=g["y"]["boundary"])
    size = (out["nx"], out["ny"])
    paper = (out["x_min"], out["x_max"], out["y_min"], out["y_max"]) == (*X_RANGE, *Y_RANGE)
    names = {v: k for k, v in GRID_SIZES.items()}
    out["grid_size"] = names[size] if paper and size in names else CUSTOM_GRID
    pr = doc["prior"]
    out.update(lam=pr["lambda"], lam_x=pr["lambda_x"], lam_y=pr["lambda_y"], l0=pr.get("l0", 0.0))
    orders = [o for o in ORDERS if pr.get(o, 0.0)]
    out["order"] = orders[0] if orders else "l2"
    out["order_coef"] = float(pr.get(out["order"], 0.0))
    out["extra_orders"] = {o: float(pr[o]) for o in orders[1:]}
    out["local_prior"] = ({"local": copy.deepcopy(pr["local"]), "cuts": [float(c) for c in pr.get("cuts", [])]}
                          if "local" in pr else {})
    robust = {"potential": copy.deepcopy(pr["potential"])} if "potential" in pr else {}
    if "data_term" in doc:
        robust["data_term"] = copy.deepcopy(doc["data_term"])
    out["robust_prior"] = robust
    menu = menu_templates(doc, model)
    if menu is None:
        menu = {"templates": [], "file_templates": copy.deepcopy(doc.get("templates", [])),
                "file_weights": [float(w) for w in doc.get("weights", [])]}
    out.update(menu)
    out["beta"] = float(doc.get("beta", 1.0))
    s = doc["solver"]
    init = s.get("init", "kernel")
    if init.startswith("template:"):
        init = f"template {int(init.split(':')[1]) + 1}"
    if s["method"] != config.IRLS:  # IRLS follows from the robust prior; the method menu keeps its own choice
        out["method"] = s["method"]
    out.update(solver_mass2=s.get("mass2", 0.01), init=init,
               init_mass2=s.get("init_mass2", 0.1), min_iter=int(s.get("min_iter", 4)),
               max_iter=int(s.get("max_iter", 50)), tol=float(s.get("tol", 1e-8)))
    if model == "density":
        out["truth"] = "paper" if doc.get("truth") == "paper" else "none"
        out["regression_truth"] = None
    else:
        out["regression_truth"] = copy.deepcopy(doc.get("truth"))
    out["data"] = [[float(x), float(y)] for x, y in doc.get("data", [])]
    out["labels"] = dict(doc.get("labels") or {})
    if len(out["data"]) > MAX_POINTS:
        raise ValueError(f"{len(out['data'])} data points; the dashboard takes at most {MAX_POINTS}")
    return out
