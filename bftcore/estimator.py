"""scikit-learn-like estimators for notebooks: :class:`BFTDensity` over :mod:`bftcore.api`, and
:class:`BFTRegressor`, exact GP regression on a grid with Lemm's lattice prior over :mod:`bftcore.models.regression`
(hyperparameters fixed or chosen by maximising the exact evidence).

>>> est = BFTDensity(grid=Grid.paper("periodic"), l2=0.025, method="newton").fit([[3, 3], [7, 12]])
>>> est.density_.shape, round(est.energy_, 4)
((10, 15), 1.877)

The constructor only stores hyperparameters; validation happens in ``fit`` (through the JSON configuration, so
the estimator, the CLI and the dashboard share one gate and one cost budget); a bad value raises
:class:`bftcore.foundations.config.ConfigError` naming the estimator's parameter.  numpy scalars and arrays are accepted
wherever a number or a list is (a grid search over ``np.logspace`` works).  ``grid`` is a :class:`Grid`, a JSON grid
object or one of ``"paper"``, ``"paper-periodic"``, ``"paper-neumann"`` (the paper mesh with a periodic or a neumann x
axis).  Learned state ends in ``_``; ``fit`` returns ``self``.
"""
from __future__ import annotations

import functools
import inspect
import math
import warnings

import numpy as np
import scipy.sparse

from . import api
from .foundations import metrics
from .foundations.config import FIT_PAD, ConfigError, _fmt_int, check_output, fitted_grid, length_of
from .foundations.grid import Grid
from .foundations.limits import active
from .foundations.operators import one_order
from .models import regression
from .models.density import DensityFit
from .models.regression_query import posterior_at, samples_at

#: ``grid`` strings the estimator accepts: the paper mesh x = 1..10, y = 1..15 (y periodic), x periodic or neumann.
GRID_NAMES = {"paper": "periodic", "paper-periodic": "periodic", "paper-neumann": "neumann"}
#: Where each document key comes from, so that an error names the estimator's parameter.
_PARAM_OF_KEY = {"prior.lambda_x": "lambda_x", "prior.lambda_y": "lambda_y", "prior.lambda": "lam",
                 "prior.field": "field", "prior.l0": "l0", "prior.l2": "l2", "prior.l4": "l4", "prior.l6": "l6",
                 "templates": "templates", "weights": "weights", "beta": "beta", "solver.method": "method",
                 "solver.mass2": "mass2", "solver.init_mass2": "init_mass2", "solver.init": "init",
                 "solver.min_iter": "min_iter", "solver.max_iter": "max_iter", "solver.tol": "tol", "truth": "truth",
                 "grid": "grid", "data": "X"}


def _grid_doc(grid) -> dict:
    """The JSON grid object of the ``grid`` parameter: a :class:`Grid`, a JSON grid object or a name of
    :data:`GRID_NAMES` (None: the paper mesh, periodic)."""
    if grid is None:
        return Grid.paper("periodic").to_dict()
    if isinstance(grid, Grid):
        return grid.to_dict()
    if isinstance(grid, dict):
        return grid
    if isinstance(grid, str) and grid in GRID_NAMES:
        return Grid.paper(GRID_NAMES[grid]).to_dict()
    raise ConfigError(f"grid {str(grid)[:60]!r} is not a grid: give a bftcore.Grid, a JSON grid object "
                      f"{{\"x\": {{...}}, \"y\": {{...}}}} or one of {', '.join(map(repr, GRID_NAMES))}")


# ----------------------------------------------------------------------------------------- the estimators' doors
class _LocalNotFittedError(ValueError, AttributeError):
    """scikit-learn's NotFittedError, when scikit-learn is not installed (the same bases as sklearn's)."""


@functools.cache
def _not_fitted_error() -> type:
    """The class of :data:`NotFittedError`, made on first use: a subclass of scikit-learn's ``NotFittedError`` when
    scikit-learn can be imported (so ``except sklearn.exceptions.NotFittedError`` catches it), else of a local class
    with the same bases (ValueError, AttributeError).  scikit-learn is optional and takes seconds to import, so it is
    imported here, when an error is raised or the name is asked for, not with this module."""
    try:
        from sklearn.exceptions import NotFittedError as base
    except ImportError:
        base = _LocalNotFittedError
    return type("NotFittedError", (base,), {"__module__": __name__,
                                             "__doc__": "An estimator was used before fit."})


def __getattr__(name: str):
    if name == "NotFittedError":  # bftcore.estimator.NotFittedError, made on first use (_not_fitted_error)
        return _not_fitted_error()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _not_fitted(est) -> None:
    """Raise NotFittedError unless ``est`` has been fitted (its fitted attributes end in ``_``)."""
    if not hasattr(est, "n_features_in_"):
        who = type(est).__name__
        raise _not_fitted_error()(f"this {who} is not fitted yet; call fit({'X, y' if who == 'BFTRegressor' else 'X'}) "
                                  f"first")


def _sklearn_tags(estimator_type: str | None, target_required: bool, one_d: bool):
    """scikit-learn's tags of an estimator (``__sklearn_tags__``; only scikit-learn asks, so it is importable).
    ``one_d``: X may have shape (n,) (BFTRegressor's one input; scikit-learn's common checks then pass it so)."""
    from sklearn.utils import InputTags, RegressorTags, Tags, TargetTags
    return Tags(estimator_type=estimator_type, target_tags=TargetTags(required=target_required),
                regressor_tags=RegressorTags() if estimator_type == "regressor" else None,
                input_tags=InputTags(one_d_array=one_d, two_d_array=True))


def _repr(est) -> str:
    """``Name(param=value, ...)`` with the parameters that differ from the constructor's defaults, as
    scikit-learn shows an estimator (and names its test cases)."""
    defaults = {k: p.default for k, p in inspect.signature(type(est).__init__).parameters.items() if k != "self"}
    given = [f"{k}={v!r}" for k, v in est.get_params().items()
             if not (k in defaults and type(v) is type(defaults[k]) and _same(v, defaults[k]))]
    text = f"{type(est).__name__}({', '.join(given)})"
    return text if len(text) <= 200 else text[:197] + "..."


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # arrays compare elementwise
        return a is b


def _count_points(X, who: str, name: str = "X") -> None:
    """Refuse data over the budget's data points from their length, before they are converted."""
    n, cap = length_of(X), active().max_points
    if n is not None and cap is not None and n > cap:
        raise ConfigError(f"{who}: {name} has {_fmt_int(n)} points, over the limit of {_fmt_int(cap)} points of a "
                          f"data set; use fewer points")


def _count_queries(X, who: str, per_point: int = 1, draws: int = 1) -> None:
    """Refuse a query whose result (``per_point`` numbers a query point, times ``draws``) would be over the
    budget's :attr:`~bftcore.foundations.limits.Limits.max_output_values`, from X's length alone: before X is converted
    or anything is allocated."""
    n = length_of(X)
    if n is None:
        return
    cap = active().max_output_values
    if cap is None:
        return
    lift = ("or lift the budget on your own machine: with "
            "bftcore.foundations.limits.using(bftcore.foundations.limits.UNLIMITED): ...")
    if draws > 1:
        what = f"{who}: {_fmt_int(draws)} draws at {_fmt_int(n)} query points are {{}} numbers"
        per_draw = max(1, n * per_point)
        fix = (f"draw fewer at a time (batches of at most {_fmt_int(cap // per_draw)} draws at these points), {lift}"
               if per_draw <= cap else
               f"ask for at most {_fmt_int(max(1, cap // (per_point * draws)))} query points a call, {lift}")
    else:
        what = (f"{who}: {_fmt_int(n)} query points" + (f" ({per_point} numbers each)" if per_point > 1 else "")
                + " are {} numbers")
        fix = f"ask for at most {_fmt_int(max(1, cap // per_point))} query points a call (in batches), {lift}"
    check_output(n * per_point * draws, what, fix)


def _numbers(X, who: str, name: str) -> np.ndarray:
    """X as a float array: a masked array with masked values, complex values and anything that is not numbers are
    refused with a message naming ``name``, never converted with a loss (numpy would drop an imaginary part with a
    warning and ignore a mask)."""
    if scipy.sparse.issparse(X):
        raise ConfigError(f"{who}: {name} is a sparse matrix, and sparse input is not supported (the data are a "
                          f"handful of coordinates); pass {name}.toarray()")
    if np.ma.isMaskedArray(X):
        masked = int(np.ma.count_masked(X))
        if masked:
            raise ConfigError(f"{who}: {name} is a masked array with {_fmt_int(masked)} masked value(s); bftcore does "
                              f"not guess what they were: drop them first (e.g. {name}.compressed() for 1-D data, or "
                              f"the rows without a mask) or fill them")
        X = np.ma.getdata(X)
    try:
        a = np.asarray(X)
        if a.dtype.kind == "c" or (a.dtype.kind == "O" and any(isinstance(v, complex) for v in a.flat)):
            raise ConfigError(f"{who}: {name} holds complex numbers (Complex data not supported); give real numbers "
                              f"(the real part, {name}.real, or the modulus, abs({name}), whichever you mean)")
        return a.astype(float, copy=False)
    except (TypeError, ValueError) as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"{who}: {name} must be real numbers ({_one_line(e)})") from None


def _one_line(e) -> str:
    text = " ".join(str(e).split())
    return text[:200]


def _named_columns(X) -> list[str] | None:
    """The column names of a table-like X (a pandas DataFrame or anything with ``.columns`` and column access by
    name), when they are names (strings); None for arrays and for tables whose columns are positions (0, 1)."""
    columns = getattr(X, "columns", None)
    if columns is None or isinstance(X, np.ndarray):
        return None
    names = list(columns)
    return names if names and all(isinstance(c, str) for c in names) else None


def _xy_by_name(X, who: str):
    """X with named columns x and y (any order, any case) as the (n, 2) array of (x, y) read by name; one named
    column as its values (the y values of a 1-D density); other names refused with the names X has.  X without
    named columns is returned as it is."""
    names = _named_columns(X)
    if names is None:
        return X
    if len(names) == 1:
        return _numbers(X[names[0]], who, f"X[{names[0]!r}]")
    keys = [c.strip().lower() for c in names]
    if sorted(keys) != ["x", "y"]:
        shown = ", ".join(repr(c[:40]) for c in names[:6]) + (", ..." if len(names) > 6 else "")
        raise ConfigError(f"{who}: X has the columns {shown}; a conditional density reads two columns named x and "
                          f"y (in either order): rename them, or pass X[[\"x\", \"y\"]] (by position: "
                          f"X.to_numpy())")
    x, y = (_numbers(X[names[keys.index(k)]], who, f"X[{names[keys.index(k)]!r}]") for k in ("x", "y"))
    return np.column_stack([np.ravel(x), np.ravel(y)])


def _density_data(X, y, who: str) -> tuple[np.ndarray, bool]:
    """The data of a density: ``(values, one_d)``, the y values of a one-dimensional density (a 1-D X, or one
    column) or an (n, 2) array of (x, y) points (two columns, by name when X names them, or x = X and y = y)."""
    _count_points(X, who)
    if y is not None:
        _count_points(y, who, "y")
        xa = _numbers(X, who, "X")
        if xa.ndim > 2 or (xa.ndim == 2 and xa.shape[1] != 1):
            raise ConfigError(f"{who}: with y given, X holds the x values, of shape (n,) or (n, 1), got shape "
                              f"{xa.shape}; or pass (x, y) points as X alone")
        x, yv = np.ravel(xa), np.ravel(_numbers(y, who, "y"))
        if x.size != yv.size:
            raise ConfigError(f"{who}: x = X and y must have equal lengths, got {x.size} and {yv.size}")
        a, one_d = np.column_stack([x, yv]), False
    else:
        a = _numbers(_xy_by_name(X, who), who, "X")
        one_d = a.ndim == 1 or (a.ndim == 2 and a.shape[1] == 1)
        if one_d:
            a = a.ravel()
        elif a.ndim == 2 and a.shape[1] == 0:
            raise ConfigError(f"{who}: X has 0 feature(s) (shape={a.shape}) while a minimum of 1 is required; give "
                              f"the y values of a one-dimensional density or (x, y) points")
        elif a.ndim != 2 or a.shape[1] != 2:
            raise ConfigError(f"{who}: X must be an (n, 2) array of (x, y) points or the y values of a "
                              f"one-dimensional density, got shape {a.shape}")
    if a.shape[0] == 0:
        raise ConfigError(f"{who}: X is empty (shape {a.shape}); give at least one data point")
    return a, one_d


def _points_1d(y: np.ndarray) -> np.ndarray:
    return np.column_stack([np.zeros_like(y), y])


#: Most nodes an estimator chooses by itself (a 1-D density's y with a length scale, :class:`BFTRegressor`'s x with
#: ``n=None``): a free boundary's eigenbasis is dense, and 1000 nodes keep a fit to 20 000 points within seconds.
AUTO_NODES_MAX = 1000
#: Nodes per length scale an estimator's own grid gives a length scale (given, or chosen by the evidence).
NODES_PER_LENGTH = 8
#: Most nodes per axis a conditional density's fitted grid gets from its length scales (64 x 64: an evidence path
#: of 30 lambdas in about a second, docs/units.md).
AUTO_NODES_2D = 64
#: The stiffest prior an estimator's own node count gives a length scale: ``lambda cell K`` over the data's
#: curvature per node (the gate refuses above 1e12, :data:`bftcore.foundations.config.MAX_CONDITION`; a hundredth of
#: it keeps the solves accurate).
AUTO_STIFFNESS = 1e10


def _nodes_within_stiffness(n: int, box: float, ell: float | None, k: int, per_data: float = 1.0) -> int:
    """``n`` nodes over ``box``, or fewer where a length scale ``ell`` of a prior of order k would be too stiff for
    them.  With the estimators' conventions lambda cell K_max over the data's curvature per node is about
    ``4^k (ell / h)^(2k) / per_data`` (``per_data`` = 1 for regression, the number of data for a density), so the
    spacing h is kept above ``ell (4^k / (AUTO_STIFFNESS per_data))^(1/2k)``: about 23 nodes per length for an l6
    regression, 158 for l4.  Decision: a length scale as long as the data's range or longer gets fewer nodes (a
    smooth fit needs few) instead of a refusal; at least ``2k + 2`` nodes, below which the gate says "too stiff"."""
    if not ell or not k or not (box > 0):
        return n
    most = box / ell * (AUTO_STIFFNESS * per_data / 4 ** k) ** (1.0 / (2 * k)) + 1
    return int(max(min(n, math.floor(most)), 2 * k + 2))


def _grid_1d(grid, y: np.ndarray, length_scale: float | None = None, order: int = 0, nodes: int = 200) -> dict:
    """The grid of a one-dimensional density: ``grid`` if given (a y-only JSON grid, or a Grid with one x node),
    else free-boundary nodes over the data's range padded by 10 % (0.5 for one value): DEFT's model, see
    :func:`bftcore.foundations.config._fitted_grid`.  ``nodes`` (200), or eight per ``length_scale`` when that is
    more (at most :data:`AUTO_NODES_MAX`), or fewer for a long length scale of a prior of ``order`` k
    (:func:`_nodes_within_stiffness`)."""
    if grid is None:
        finite = y[np.isfinite(y)]
        if finite.size == 0:
            raise ConfigError("BFTDensity.fit: give at least one finite y value for a one-dimensional density "
                              "(parameter X)")
        lo, hi = float(finite.min()), float(finite.max())
        pad = 0.1 * (hi - lo) if hi > lo else 0.5
        n = int(nodes)
        if length_scale is not None and np.isfinite(length_scale) and length_scale > 0:
            n = int(min(AUTO_NODES_MAX, max(n, math.ceil(NODES_PER_LENGTH * (hi - lo + 2 * pad) / length_scale))))
            n = _nodes_within_stiffness(n, hi - lo + 2 * pad, length_scale, order, float(finite.size))
        return {"y": {"min": lo - pad, "max": hi + pad, "n": n, "boundary": "free"}}
    doc = _grid_doc(grid)
    if "x" in doc and doc["x"] is not None and not (isinstance(doc["x"], dict) and doc["x"].get("n") == 1):
        raise ConfigError("BFTDensity.fit: 1-D data (y values) need a one-dimensional grid: a JSON grid with only "
                          "\"y\", or a Grid with one x node (parameter grid)")
    return {"y": doc["y"]} if "y" in doc else doc


def _positive_or_none(v) -> float | None:
    """A number > 0 from a parameter that may hold anything (its own check says what is wrong), else None."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) and f > 0 else None


class BFTDensity:
    """Nonparametric conditional density p(y|x) with a Gaussian (mixture) prior on L = ln P or on P.

    Parameters mirror the JSON document of CONVENTIONS.md §4: ``grid`` (a :class:`Grid`), ``field`` ("L"/"P"),
    ``lam`` (lambda), ``lambda_x``, ``lambda_y``, ``l0``, ``l2``, ``l4``, ``l6``, ``templates`` (list of template
    dicts), ``weights`` (p_j), ``beta``, ``method``, ``mass2``, ``init``, ``init_mass2``, ``min_iter``, ``max_iter``,
    ``tol``, ``truth`` ("paper" or None), ``warm_start`` (start the next ``fit`` from the current solution).

    Fitted attributes: ``density_`` (P), ``log_density_`` (L), ``energy_``, ``mixing_`` (a_j), ``n_iter_``,
    ``converged_``, ``energy_history_``, ``train_error_history_``, ``test_error_history_``, ``result_`` (the
    result document), ``lam_`` (the lambda used).

    ``lam="evidence"`` chooses lambda in ``fit`` by the maximum of the Laplace evidence (:mod:`bftcore.models.evidence`)
    along ``lam_range`` = (min, max, n) log-spaced values, refined between grid values; then ``log_evidence_``,
    ``evidence_path_`` ({"lambda": [...], "log_evidence": [...], "edge": ...}) and ``evidence_edge_`` are set too.
    Without ``lam_range`` (the default) the range follows the grid and the data (from a prior weaker than the data
    on every mode to one stronger on every mode, :func:`bftcore.models.evidence.default_values`), so it is the same
    range in any units, and it is extended past an end where the evidence is still rising; a maximum left at an end
    sets ``evidence_edge_`` ("lower"/"upper") and warns.

    Length scale (one-dimensional densities, a prior of one order k: l0 = 0 and one of l2, l4, l6 > 0):
    ``length_scale`` sets lambda by DEFT's convention (suftware's ``ell``, with its ``alpha`` = k): DEFT's posterior
    is ``exp(-(N/G) S)``, ``S = 1/2 e^-t phi^T Delta phi + ...`` on G cells of spacing h, with ``ell = h (e^-t
    N)^(1/(2 alpha))``, and ``phi = -ln p``; matched term by term with ``(lambda/2) (L, K L) hy``, ``K = l_k
    (-Delta)^k / h^(2k)``, that is ``lambda = ell^(2k) / (l_k * L)``, ``L = n h`` the box of the n nodes.  After
    every fit ``length_scale_`` is that ell of the lambda used (None for other priors).  scikit-learn's RBF
    ``length_scale`` has no exact counterpart: a lattice prior of one order is not a squared-exponential kernel.

    Conditional densities p(y|x) take a pair, ``length_scale=(ell_x, ell_y)``, each in its axis' units:
    ``lambda = 1 / (l_k L_x L_y)``, ``lambda_x = ell_x^(2k)``, ``lambda_y = ell_y^(2k)``.  Why this form: where
    every x sees the same data the fit is constant in x, its x term vanishes, and each column is the 1-D density of
    all the data with the length ell_y (the y term weighs ``lambda lambda_y L_x``, which is the 1-D lambda of ell_y;
    tests/test_units.py checks it); ell_x enters the same way along x.  ``length_scale_`` is then that pair for the
    lambda, lambda_x and lambda_y of the fit, also when the evidence chose lambda.  A length scale too long for
    the nodes is refused by name; in 1-D the default grid takes fewer nodes for a long length instead.

    Units: lambda has units (length^(2k-1) for a prior of order k on the data's y), so a lambda given by hand
    means different things for data in metres and in millimetres; a length_scale is in the data's units.  With
    ``lam="evidence"`` (or a length_scale) and the default grid the fit is the same in any units (rescaled data
    give the rescaled density, ``tests/test_units.py``).  ``mass2`` and ``init_mass2`` (None: the paper's 0.01 and
    0.1 in the grid's internal coordinates, nodes spaced 1) follow the grid the same way.

    Without a ``grid``, (x, y) data get a grid fitted to their ranges (each axis padded by 10 % of its range on both
    sides, 30 x 40 nodes, Neumann in x and free in y: the gate's ``"grid": {"fit": true}``), in the data's own units;
    ``grid="paper"`` is the paper's mesh (x = 1..10, y = 1..15, periodic in y).  ``lambda_x``, ``lambda_y`` (None) are
    then set by the gate so that the prior is isotropic in units of each axis's span (lambda_y / lambda_x = (span_y /
    span_x)^(2k), :func:`bftcore.foundations.config._isotropic_ratio`): the same fit in any units of x and y.  On a
    grid given by hand, None means 1 (the paper's).

    One-dimensional densities p(y): ``fit(y)`` with a 1-D array of y values (or an (n, 1) array).  Without a
    ``grid`` the y axis is 200 free-boundary nodes (DEFT's model; eight per ``length_scale`` when that is more, at
    most 1000, fewer for a length too long for them; with ``lam="evidence"`` eight per chosen length when that is
    more, lambda then chosen again on the finer grid) over the data's range padded by 10 % of it on each side (0.5
    for a single value); a ``grid`` for 1-D data is a JSON grid object with only ``"y"``, or a Grid with one x
    node.
    """

    density_: np.ndarray  # fitted attributes exist only after fit (hasattr tells)
    log_density_: np.ndarray

    def __init__(self, grid: Grid | None = None, field: str = "L", lam: float = 1.0, lambda_x: float | None = None,
                 lambda_y: float | None = None, l0: float = 0.0, l2: float = 1.0, l4: float = 0.0, l6: float = 0.0,
                 templates=None, weights=None, beta: float = 1.0, method: str = "newton", mass2: float | None = None,
                 init: str = "kernel", init_mass2: float | None = None, min_iter: int = 4, max_iter: int = 50,
                 tol: float = 1e-8, truth: str | None = None, warm_start: bool = False, lam_range=None,
                 length_scale: float | None = None):
        self.grid, self.field, self.lam, self.lam_range = grid, field, lam, lam_range
        self.length_scale = length_scale
        self.lambda_x, self.lambda_y, self.l0, self.l2, self.l4, self.l6 = lambda_x, lambda_y, l0, l2, l4, l6
        self.templates, self.weights, self.beta = templates, weights, beta
        self.method, self.mass2, self.init, self.init_mass2 = method, mass2, init, init_mass2
        self.min_iter, self.max_iter, self.tol, self.truth, self.warm_start = min_iter, max_iter, tol, truth, warm_start

    _PARAMS = ("grid", "field", "lam", "lambda_x", "lambda_y", "l0", "l2", "l4", "l6", "templates", "weights",
               "beta", "method", "mass2", "init", "init_mass2", "min_iter", "max_iter", "tol", "truth", "warm_start",
               "lam_range", "length_scale")

    def get_params(self, deep: bool = True) -> dict:
        return {k: getattr(self, k) for k in self._PARAMS}

    def set_params(self, **params) -> "BFTDensity":
        for k, v in params.items():
            if k not in self._PARAMS:
                raise ValueError(f"unknown parameter {k!r} for BFTDensity; valid: {', '.join(self._PARAMS)}")
            setattr(self, k, v)
        return self

    def __sklearn_tags__(self):
        return _sklearn_tags(None, False, False)

    def __repr__(self) -> str:
        return _repr(self)

    def _by_evidence(self) -> bool:
        return isinstance(self.lam, str) and self.lam == "evidence"

    def _order(self) -> tuple[int, float]:
        """The one order k and its coefficient l_k of a prior that has a length scale, or a ConfigError."""
        order = one_order({"l0": self.l0, "l2": self.l2, "l4": self.l4, "l6": self.l6})
        if order is None:
            raise ConfigError("BFTDensity parameter 'length_scale': a length scale belongs to a prior of one order "
                              f"(one of l2, l4, l6 > 0, l0 = 0), got l0={self.l0}, l2={self.l2}, l4={self.l4}, "
                              f"l6={self.l6}; set the others to 0, or give lam instead")
        return order

    @staticmethod
    def _box(grid: dict, name: str = "y") -> float:
        """``L = n h``, the box of the n nodes of one axis of a JSON grid (1 for an absent x axis)."""
        a = grid.get(name)
        if a is None:
            return 1.0
        return (float(a["max"]) - float(a["min"])) * int(a["n"]) / max(int(a["n"]) - 1, 1)

    def _lengths(self, one_d: bool) -> tuple[float, ...]:
        """``length_scale`` checked: one number (units of y) for 1-D data, a pair (units of x, units of y) for (x, y)
        data."""
        v = self.length_scale
        if one_d:
            ell = _positive_or_none(v)
            if ell is None or isinstance(v, (tuple, list, np.ndarray)):
                raise ConfigError(f"BFTDensity parameter 'length_scale' must be a finite number > 0 in the units of "
                                  f"y, got {str(v)[:60]!r}")
            return (ell,)
        pair = tuple(_positive_or_none(e) for e in v) if isinstance(v, (tuple, list, np.ndarray)) else ()
        if len(pair) != 2 or None in pair:
            raise ConfigError(f"BFTDensity parameter 'length_scale': for (x, y) data give a pair (length in x, length "
                              f"in y), each a finite number > 0 in its axis' units, got {str(v)[:60]!r}")
        if self.lambda_x is not None or self.lambda_y is not None:
            raise ConfigError("BFTDensity: give a length_scale pair or lambda_x, lambda_y, not both (parameter "
                              "'length_scale')")
        return pair

    def _prior_scales(self, grid: dict, one_d: bool) -> dict:
        """lambda (and for (x, y) data lambda_x, lambda_y) from ``length_scale`` (else ``lam`` as given), by DEFT's
        convention (see the class text): ``lambda = ell^(2k) / (l_k L)`` in 1-D; for (x, y) data ``lambda =
        1 / (l_k L_x L_y)``, ``lambda_x = ell_x^(2k)``, ``lambda_y = ell_y^(2k)``, L = n h the box of each axis."""
        if self.length_scale is None:
            return {"lambda": self.lam}
        ells = self._lengths(one_d)
        k, coef = self._order()
        if one_d:
            return {"lambda": ells[0] ** (2 * k) / (coef * self._box(grid))}
        return {"lambda": 1.0 / (coef * self._box(grid, "x") * self._box(grid)),
                "lambda_x": ells[0] ** (2 * k), "lambda_y": ells[1] ** (2 * k)}

    def _fitted_lengths(self, cfg: dict, one_d: bool):
        """``length_scale_`` of a fit with a prior of one order: ell of its lambda (1-D), or (ell_x, ell_y) of
        lambda lambda_x and lambda lambda_y ((x, y) data); None for other priors."""
        order = one_order({"l0": self.l0, "l2": self.l2, "l4": self.l4, "l6": self.l6})
        if order is None:
            return None
        k, coef = order
        pr, g = cfg["prior"], cfg["grid"]
        if one_d:
            return (pr["lambda"] * coef * self._box(g)) ** (1.0 / (2 * k))
        box = coef * self._box(g, "x") * self._box(g)
        return tuple((pr["lambda"] * pr[name] * box) ** (1.0 / (2 * k)) for name in ("lambda_x", "lambda_y"))

    def _choose(self) -> dict:
        r = self.lam_range
        if r is None:  # the evidence's own range, from the grid and the data, extended past an edge maximum
            return {"lambda": "evidence"}
        if not (isinstance(r, (tuple, list)) and len(r) == 3):
            raise ConfigError(f"lam_range must be (min, max, n), got {str(r)[:60]!r}")
        return {"lambda": {"by": "evidence", "min": r[0], "max": r[1], "n": r[2]}}

    def to_config(self, X, nodes=None) -> dict:
        """The JSON configuration this estimator fits for data X: an (n, 2) array of (x, y), or the y values of a
        one-dimensional density (a 1-D array).  ``nodes``: the default grid's, a number for 1-D data (200, see
        :func:`_grid_1d`), ``(nx, ny)`` for (x, y) data (30 x 40, see :meth:`_nodes_2d`)."""
        values, one_d = _density_data(X, None, "BFTDensity")
        pts = _points_1d(values) if one_d else values
        if one_d:
            ell = self._lengths(True)[0] if self.length_scale is not None else None
            grid = _grid_1d(self.grid, pts[:, 1], ell, self._order()[0] if ell else 0, nodes or 200)
        elif self.grid is None:  # fitted to the data's ranges by the gate (30 x 40 nodes, padded 10 %)
            grid, pts = {"fit": True}, np.asarray(pts, dtype=float).tolist()
            if self.length_scale is not None:  # the boxes of the axes are needed now
                grid = fitted_grid(pts, shape=self._nodes_2d(pts, nodes))
            elif nodes is not None:
                grid = {"fit": True, "x": {"n": int(nodes[0])}, "y": {"n": int(nodes[1])}}
        else:
            grid = _grid_doc(self.grid)
        scales = {"lambda": 1.0} if self._by_evidence() else self._prior_scales(grid, one_d)
        doc = {"model": "density", "grid": grid, "data": pts,
               "prior": {"field": self.field,
                         # lambda_x, lambda_y None: the gate's, isotropic in the spans of a grid fitted to (x, y)
                         # data, else 1
                         **{k: v for k, v in (("lambda_x", self.lambda_x), ("lambda_y", self.lambda_y))
                            if v is not None},
                         **scales,
                         "l0": self.l0, "l2": self.l2, "l4": self.l4, "l6": self.l6},
                "templates": [] if self.templates is None else self.templates,
                "weights": [] if self.weights is None else self.weights, "beta": self.beta,
                "solver": {"method": self.method, "init": self.init, "min_iter": self.min_iter,
                           "max_iter": self.max_iter, "tol": self.tol,
                           # None: the gate's default, the paper's masses in the grid's internal coordinates
                           **{k: v for k, v in (("mass2", self.mass2), ("init_mass2", self.init_mass2))
                              if v is not None}},
                "truth": self.truth}
        if self._by_evidence():
            doc["choose"] = self._choose()
        return doc

    def fit(self, X, y=None) -> "BFTDensity":
        """Fit to data X, an (n, 2) array of (x, y) points, or to x = X and y = y given separately; a 1-D X (and no
        y) is a one-dimensional density's y values.  A table with named columns (a pandas DataFrame) is read by
        its names x and y, in either order; empty, complex or masked data are refused."""
        X, one_d = _density_data(X, y, "BFTDensity.fit")
        init = None
        if self.warm_start and hasattr(self, "log_density_"):
            init = self.log_density_ if self.field == "L" else self.density_
        if isinstance(self.lam, str) and not self._by_evidence():
            raise ConfigError(f"lam must be a number > 0 or \"evidence\", got {self.lam[:40]!r} (parameter 'lam')")
        if self.length_scale is not None and self._by_evidence():
            raise ConfigError("BFTDensity: give lam=\"evidence\" or a length_scale, not both (parameter "
                              "'length_scale')")
        try:
            cfg, chosen = api.choose_hyperparameters(self.to_config(X))
        except ConfigError as e:
            raise ConfigError(_name_parameter(str(e), self.length_scale)) from None
        self.length_scale_ = self._fitted_lengths(cfg, one_d)
        if self.grid is None and chosen is not None and self.length_scale_ is not None:
            cfg, chosen = self._refine_nodes(X, cfg, chosen)
        self.lam_ = float(cfg["prior"]["lambda"])
        if chosen is not None:
            self.log_evidence_ = float(chosen["log_evidence"])
            self.evidence_path_ = chosen["paths"]["lambda"]
            self.evidence_edge_ = chosen["paths"]["lambda"]["edge"]
            if self.evidence_edge_ is not None:
                where = ("Widen lam_range or leave it None (the range then follows the grid and the data)"
                         if self.lam_range is not None else
                         "The range reached the bound of this grid: a stiffer (or weaker) prior would be "
                         "ill-conditioned. At the stiff end the fit is close to the prior's limit (for l6 alone, "
                         "a Gaussian); a finer grid or a lower-order prior widens the range")
                warnings.warn(f"BFTDensity: the evidence is largest at the {self.evidence_edge_} end of the lambda "
                              f"range ({self.lam_:.3g}); it may rise beyond it. {where}", stacklevel=2)
        result = api.run(cfg, init=init)
        assert isinstance(result, DensityFit)
        self.config_ = cfg
        self.n_features_in_ = 1 if one_d else 2
        self.grid_ = api.grid_from_config(cfg)
        self.result_ = result.to_document()
        self.density_ = result.P.copy()
        self.log_density_ = result.L.copy()
        self.energy_ = float(result.last.energy)
        self.mixing_ = np.asarray(result.last.mixing, dtype=float)
        self.n_iter_ = int(result.last.iteration)
        self.converged_ = bool(result.last.converged)
        self.energy_history_ = np.array([r.energy for r in result.history], dtype=float)
        self.train_error_history_ = np.array([r.train_error for r in result.history], dtype=float)
        self.test_error_history_ = np.array([np.nan if r.test_error is None else r.test_error
                                             for r in result.history], dtype=float)
        self.test_error_history_[~np.isfinite(self.test_error_history_)] = np.nan  # as in the result document
        return self

    def _nodes_2d(self, pts: list, nodes=None) -> tuple[int, int]:
        """``nodes``, or the nodes of a grid fitted to (x, y) data with a length-scale pair: 30 x 40, or eight per
        length on an axis where that is more (at most :data:`AUTO_NODES_2D` per axis), fewer where the length is too
        long for them (:func:`_nodes_within_stiffness`)."""
        if nodes is not None:
            return int(nodes[0]), int(nodes[1])
        ells = self._lengths(False)
        k = self._order()[0]
        arr = np.asarray(pts, dtype=float)
        out = []
        for default, values, ell in ((30, arr[:, 0], ells[0]), (40, arr[:, 1], ells[1])):
            box = (1 + 2 * FIT_PAD) * float(np.ptp(values)) if np.ptp(values) > 0 else 1.0
            n = max(default, min(AUTO_NODES_2D, math.ceil(NODES_PER_LENGTH * box / ell)))
            out.append(_nodes_within_stiffness(n, box, ell, k, float(len(arr))))
        return out[0], out[1]

    def _refine_nodes(self, X, cfg: dict, chosen: dict) -> tuple[dict, dict]:
        """The default grid after the evidence chose lambda: where the chosen length scale spans fewer than four
        nodes of an axis, eight per length on that axis (at most :data:`AUTO_NODES_MAX` in 1-D,
        :data:`AUTO_NODES_2D` per axis in 2-D), and lambda chosen again on it (at most twice).  Measured (docs/
        units.md): three peaks of width 0.05 on a range of 12, 3000 points: the evidence chose ell = 0.22 on 200
        nodes (3.5 per length) and held-out ln p 0.35; on 477 nodes ell = 0.20 and 0.44.  Decision: four, not
        eight, triggers it: Old Faithful's l6 fit (5.7 nodes per length in x) gained 0.001 in held-out ln p from
        43 x 43 nodes and took three times as long (7.1 against 2.3 s)."""
        one_d = not isinstance(self.length_scale_, tuple)
        for _ in range(2):
            g = cfg["grid"]
            axes = ("y",) if one_d else ("x", "y")
            ells = (self.length_scale_,) if one_d else self.length_scale_
            most = AUTO_NODES_MAX if one_d else AUTO_NODES_2D
            have = [int(g[a]["n"]) for a in axes]
            want = [max(n, min(most, math.ceil(NODES_PER_LENGTH * self._box(g, a) / ell)))
                    for a, n, ell in zip(axes, have, ells)]
            if all(w <= 2 * n for w, n in zip(want, have)):  # four nodes per length or more: resolved
                break
            try:
                finer, again = api.choose_hyperparameters(self.to_config(X, nodes=want[0] if one_d else want))
            except ConfigError as e:
                raise ConfigError(_name_parameter(str(e), self.length_scale)) from None
            if again is None:
                break
            cfg, chosen = finer, again
            self.length_scale_ = self._fitted_lengths(cfg, one_d)
        return cfg, chosen

    def learning_curve(self, X, y=None, sizes=(5, 10, 20, 50, 100), resamples: int = 20, lambdas=None,
                       evidence: bool | None = None, seed: int = 0, scheduler: str | None = None,
                       progress=None) -> dict:
        """Train and test error against n for this estimator's prior on data X (as ``fit`` takes it), by
        resampling (:func:`bftcore.studies.learning.learning_curve_document`): teacher mode when ``truth`` is set (fresh
        draws from it; X then only fixes the grid), else the bootstrap of X (test error out of bag).  ``evidence``
        (default: ``lam="evidence"``) adds the curve at each data set's evidence-chosen lambda."""
        X, _ = _density_data(X, y, "BFTDensity.learning_curve")
        doc = self.to_config(X)
        doc.pop("choose", None)
        return api.learning_curve_document(doc, sizes, resamples, lambdas,
                                           self._by_evidence() if evidence is None else evidence, seed=seed,
                                           scheduler=scheduler, progress=progress)

    def bootstrap(self, X, y=None, resamples: int = 50, level: float = 0.9, seed: int = 0,
                  scheduler: str | None = None) -> dict:
        """Bootstrap bands on h(x) and P for data X (:func:`bftcore.studies.learning.bootstrap_document`), at ``lam`` (a
        number; with ``lam="evidence"`` the lambda the evidence chooses for all of X)."""
        X, _ = _density_data(X, y, "BFTDensity.bootstrap")
        cfg, _ = api.choose_hyperparameters(self.to_config(X))
        return api.bootstrap_document(cfg, resamples, level, seed, scheduler)

    def _query(self, X, y=None, who: str = "BFTDensity.score_samples") -> np.ndarray:
        """Query points as an ``(n, 2)`` array of (x, y), checked before anything is converted: fitted, the result
        within the budget's output numbers, named columns read by name, as many features as fit saw."""
        _not_fitted(self)
        _count_queries(X, who)
        if y is not None:
            _count_queries(y, who)
            pts = np.column_stack([np.ravel(_numbers(X, who, "X")), np.ravel(_numbers(y, who, "y"))])
        else:
            pts = _numbers(_xy_by_name(X, who), who, "X")
            if pts.ndim == 1 and self.n_features_in_ == 1:
                pts = pts[:, None]
            features = pts.shape[1] if pts.ndim == 2 else None
            # a one-dimensional density also takes (x, y) points on its one x node, as it did before n_features_in_
            if features != self.n_features_in_ and not (self.n_features_in_ == 1 and features == 2):
                raise ValueError(f"X has {features if features is not None else 'no'} features, but BFTDensity is "
                                 f"expecting {self.n_features_in_} features as input (shape {pts.shape}: "
                                 + ("the y values of the one-dimensional density it was fitted to)"
                                    if self.n_features_in_ == 1 else "(x, y) points)"))
            if features == 1:
                pts = np.column_stack([np.full(len(pts), self.grid_.x.min), pts[:, 0]])
        return pts

    def _log_density_at(self, pts: np.ndarray) -> np.ndarray:
        """ln p(y|x) at any points: linear between the nodes in y (and in x), ``-inf`` for y outside the grid's
        support (p = 0 there, as scikit-learn's KernelDensity far from its data); x outside the grid, or a value
        that is not finite, is an error (p(y|x) is not defined there)."""
        g = self.grid_
        g.x.snap(pts[:, 0])  # the off-grid rule of x, with its message
        if not np.all(np.isfinite(pts[:, 1])):
            raise ValueError(f"y values must be finite numbers, got {pts[~np.isfinite(pts[:, 1]), 1][:5].tolist()}")
        out = np.full(len(pts), -np.inf)
        inside = ~g.y.outside(pts[:, 1])
        if not np.any(inside):
            return out

        def cells(axis, v):
            f = np.clip((v - axis.min) / axis.h, 0.0, axis.n - 1.0) if axis.n > 1 else np.zeros_like(v)
            k = np.minimum(np.floor(f).astype(int), max(axis.n - 2, 0))
            return k, np.minimum(k + 1, axis.n - 1), f - k

        i0, i1, fx = cells(g.x, pts[inside, 0])
        j0, j1, fy = cells(g.y, pts[inside, 1])
        L = self.log_density_
        value = np.zeros(len(i0))
        for ii, jj, w in ((i0, j0, (1 - fx) * (1 - fy)), (i1, j0, fx * (1 - fy)), (i0, j1, (1 - fx) * fy),
                          (i1, j1, fx * fy)):
            value = value + np.where(w > 0, w * L[ii, jj], 0.0)  # a zero weight keeps a -inf neighbour out
        out[inside] = value
        return out

    def predict_proba(self, X) -> np.ndarray:
        """p(y|x) at the points X ((n, 2) array, or the y values of a one-dimensional density), per unit of y:
        ``exp`` of :meth:`score_samples`; 0 outside the grid's y range."""
        return np.exp(self.score_samples(X))

    def score_samples(self, X) -> np.ndarray:
        """ln p(y|x) at the points X, per unit of y: linear in ln p between the nodes, ``-inf`` for y outside the
        grid's support (``(n, 2)`` points, or the y values of a one-dimensional density)."""
        return self._log_density_at(self._query(X))

    def score(self, X, y=None) -> float:
        """Mean log-likelihood of held-out points, i.e. minus the training-error formula (710) on X (at nodes;
        between them ln p is interpolated, and a point outside the grid's y range makes it ``-inf``)."""
        return float(np.mean(self._log_density_at(self._query(X, y, "BFTDensity.score"))))

    def sample(self, n_samples: int = 1, random_state=None) -> np.ndarray:
        """``n_samples`` y values drawn from a fitted one-dimensional density, as scikit-learn's
        ``KernelDensity.sample``: a node by its probability ``P hy``, then uniformly within its cell (clipped to the
        grid).  A conditional density p(y|x) has no p(x) to draw x from: it refuses."""
        _not_fitted(self)
        if self.n_features_in_ != 1:
            raise ValueError("BFTDensity.sample draws from a one-dimensional density p(y); this estimator was fitted "
                             "to (x, y) points, a conditional density p(y|x) with no p(x) to draw x from")
        if isinstance(n_samples, bool) or not (isinstance(n_samples, (int, np.integer)) and n_samples >= 1):
            raise ValueError(f"BFTDensity.sample: n_samples must be a whole number >= 1, got {n_samples!r}")
        n = int(n_samples)
        check_output(n, "BFTDensity.sample: {} draws", "draw fewer at a time")
        rng = np.random.default_rng(random_state)
        y = self.grid_.y
        p = np.maximum(self.density_[0], 0.0)
        nodes = rng.choice(y.n, size=n, p=p / p.sum())
        return np.clip(y.nodes[nodes] + (rng.random(n) - 0.5) * y.h, y.min, y.max)

    def regression(self) -> tuple[np.ndarray, np.ndarray]:
        """Regression function h(x) (709) and conditional standard deviation on the x nodes."""
        _not_fitted(self)
        return metrics.regression_function(self.density_, self.grid_)


def _too_long(who: str, ell, message: str) -> str | None:
    """The gate's "too stiff" refusal said in terms of a length scale the user gave (None for other messages)."""
    if ell is None or not ("too stiff" in message or "too small for this prior" in message):
        return None
    shown = f"{ell:g}" if isinstance(ell, (int, float)) else str(tuple(float(e) for e in ell))
    return (f"{who} parameter 'length_scale': {shown} is too long for these data: the prior would be too stiff to "
            f"solve on the nodes the data allow (for a prior of order k a length far beyond the data's range leaves "
            f"only the polynomials of degree < k). Give a shorter length_scale, a lower order, or lam=\"evidence\" "
            f"({message})")


def _name_parameter(message: str, ell=None) -> str:
    """The gate's message with the estimator's parameter named: "prior.lambda must be ..." -> "... (parameter
    lam)"; a "too stiff" prior set by a length scale ``ell`` names the length scale."""
    said = _too_long("BFTDensity", ell, message)
    if said:
        return said
    if message.startswith("BFTDensity"):  # the estimator's own message names its parameter already
        return message
    for key, name in _PARAM_OF_KEY.items():
        if message.startswith(key) or f" {key}" in message:
            return f"BFTDensity parameter {name!r}: {message}"
    return f"BFTDensity: {message}"


# --------------------------------------------------------------------------------------------------------------
# Gaussian regression with a (mixture of) Gaussian process prior(s) on a grid
# --------------------------------------------------------------------------------------------------------------
#: Keys of the regression document and the BFTRegressor parameter each comes from (for error messages).
_REGRESSOR_PARAM_OF_KEY = (("prior.lambda", "lam"), ("prior.l0", "l0"), ("prior.l2", "l2"), ("prior.l4", "l4"),
                           ("prior.l6", "l6"), ("prior", "l0, l2, l4, l6"), ("grid.x.n", "n"),
                           ("grid.x.boundary", "boundary"), ("grid.x", "x_min, x_max"), ("templates", "templates"),
                           ("weights", "weights"), ("beta", "beta"), ("data", "X"))
#: Hyperparameters BFTRegressor can set by maximising the evidence, and their document names.
_EVIDENCE_NAMES = {"lam": "lambda", "l0": "l0", "beta": "beta"}


class BFTRegressor:
    """Gaussian process regression on a grid of x nodes with Lemm's lattice prior (CONVENTIONS.md §3, [001]).

    The regression function h lives on ``n`` nodes from ``x_min`` to ``x_max`` (``boundary`` "neumann",
    "periodic" or "free"; on a free boundary K_X is the sum of (l_2k / h^2k) D_k^T D_k, so the polynomials of degree
    below the highest order are unpenalised: with ``l2=0, l6=1`` a smoothing spline); data are snapped to the
    nearest node (the model of [001]: K_T counts the data per node).  ``predict`` and ``sample_y`` answer at any x:
    between the nodes by the piecewise-linear field the lattice stands for, beyond ``x_min``/``x_max`` by the prior's
    continuation, whose standard deviation grows with the distance from the data
    (:mod:`bftcore.models.regression_query`).  Component j of the prior is
    h ~ N(t_j, (beta lam hx K_X)^{-1}) with K_X = l0 I - l2 Delta + l4 Delta^2 - l6 Delta^3 and mean ``templates[j]``
    (template dicts of :mod:`bftcore.foundations.templates`; default one zero template), mixed with ``weights`` p_j; the
    noise variance is 1/beta ([001] eqs. (6), (7)).  Everything is exact (Gaussian integrals):
    :class:`bftcore.models.regression.RegressionModel` and :class:`~bftcore.models.regression.RegressionEvidence`.

    Parameters: ``x_min``, ``x_max`` (None: the data's range padded by 5 % on each side, or by 0.5 for a single
    x), ``n`` (None: at least 200 nodes, two per distinct x, eight per ``length_scale`` over the data's range, at
    most :data:`AUTO_NODES_MAX`), ``boundary`` ("neumann"), ``lam`` (number > 0 or ``"evidence"``), ``beta`` (number > 0
    or ``"evidence"``), ``l0`` (number >= 0 or ``"evidence"``; 0 is the improper prior flat on the constants, whose
    evidence is the restricted one), ``l2`` (1), ``l4``, ``l6``, ``templates``, ``weights``.  ``"evidence"``
    chooses the value by maximising the exact log evidence (:func:`bftcore.models.regression.optimise_evidence`, type-II
    maximum likelihood) in ``fit``, over ranges from the grid and the data
    (:func:`bftcore.models.regression.default_range`: lambda from a prior weaker than the data on every mode to one
    stronger, beta over 1e-3 to 1e8 divided by the variance of y),
    so that data in other units give the same fit in those units (``tests/test_units.py``); a maximum on the edge of
    a range warns.  Units: lambda has the units of x^(2k-1) for a prior of order k (the data term and the prior
    are both in units of y^2), beta those of 1/y^2.

    Length scale: with a prior of one order k (l0 = 0, one of l2, l4, l6), ``length_scale`` (in the units of x)
    sets lambda instead: ``lam = length_scale^(2k) * N / (l_k * L)``, N the number of data and L = n h the box of
    the n nodes.  It is Silverman's (1984) bandwidth of the smoothing spline's equivalent kernel at the mean data
    density N / L: the energy 1/2 sum (h - y)^2 + (lam/2) l_k int (h^(k))^2 dx balances its two terms over that
    length.  After every fit ``length_scale_`` is that length of the lambda used (None for other priors).
    scikit-learn's RBF ``length_scale`` has no exact counterpart (a spline prior is not a squared-exponential
    kernel); both are the distance over which the fit averages the data.

    Fitted attributes: ``lam_``, ``beta_``, ``l0_`` (the values used), ``x_`` (the nodes), ``h_`` (the exact
    posterior mean sum_j b_j t̄_j of (27) on the nodes; for one template the MAP), ``std_`` (posterior standard
    deviation of h on the nodes), ``b_`` (exact posterior weights (28)), ``log_marginal_likelihood_value_``
    (ln p(y | X) at the fitted hyperparameters), ``theta_`` (= ln [lam_, beta_]), ``evidence_result_`` (the
    optimiser's dict, None without ``"evidence"``), ``model_``, ``config_`` (the validated document),
    ``length_scale_``.

    Like scikit-learn's ``GaussianProcessRegressor`` with the noise given as ``alpha``, ``predict``'s standard
    deviation and covariance and ``sample_y``'s draws are those of the noise-free function h; add ``1 / beta_``
    to the variance for a new noisy observation.
    """

    h_: np.ndarray  # fitted attributes exist only after fit (hasattr tells)

    _PARAMS = ("x_min", "x_max", "n", "boundary", "lam", "beta", "l0", "l2", "l4", "l6", "templates", "weights",
               "length_scale")

    def __init__(self, x_min=None, x_max=None, n: int | None = None, boundary: str = "neumann", lam=1.0, beta=1.0,
                 l0=0.0, l2: float = 1.0, l4: float = 0.0, l6: float = 0.0, templates=None, weights=None,
                 length_scale: float | None = None):
        self.x_min, self.x_max, self.n, self.boundary = x_min, x_max, n, boundary
        self.lam, self.beta, self.l0, self.l2, self.l4, self.l6 = lam, beta, l0, l2, l4, l6
        self.templates, self.weights, self.length_scale = templates, weights, length_scale

    def _order(self) -> tuple[int, float] | None:
        """The one order k and its coefficient l_k of a prior with a length scale (l0 = 0, one of l2, l4, l6), or
        None."""
        l0 = self.l0 if isinstance(self.l0, (int, float)) else 0.0  # "evidence": the l0 chosen is not known yet
        return one_order({"l0": l0, "l2": self.l2, "l4": self.l4, "l6": self.l6})

    def _length(self) -> float | None:
        """``length_scale`` checked: None, or a finite number > 0 with a prior of one order and a lambda not asked
        of the evidence."""
        if self.length_scale is None:
            return None
        try:
            ell = float(self.length_scale)
        except (TypeError, ValueError):
            ell = math.nan
        if not (math.isfinite(ell) and ell > 0):
            raise ConfigError(f"BFTRegressor parameter 'length_scale' must be a finite number > 0 in the units of x, "
                              f"got {self.length_scale!r}")
        if self._order() is None:
            raise ConfigError("BFTRegressor parameter 'length_scale': a length scale belongs to a prior of one order "
                              f"(one of l2, l4, l6 > 0, l0 = 0), got l0={self.l0}, l2={self.l2}, l4={self.l4}, "
                              f"l6={self.l6}; set the others to 0, or give lam instead")
        if isinstance(self.lam, str) and self.lam == "evidence":
            raise ConfigError("BFTRegressor: give lam=\"evidence\" or a length_scale, not both (parameter "
                              "'length_scale')")
        return ell

    def _nodes(self, x) -> int:
        """``n``, or when None: at least 200, two per distinct x (so snapping moves no datum past its neighbour's
        node) and eight per length scale over the data's range, at most :data:`AUTO_NODES_MAX`, and fewer where
        a long length scale would make the prior too stiff for them (:func:`_nodes_within_stiffness`)."""
        if self.n is not None:
            return self.n
        span = float(np.max(x) - np.min(x)) if len(x) else 0.0
        ell = self._length()
        per_length = int(math.ceil(NODES_PER_LENGTH * span / ell)) if ell and span > 0 else 0
        n = int(min(AUTO_NODES_MAX, max(200, 2 * np.unique(x).size, per_length)))
        order = self._order()
        return _nodes_within_stiffness(n, span, ell, order[0] if ell and order else 0)

    def get_params(self, deep: bool = True) -> dict:
        return {k: getattr(self, k) for k in self._PARAMS}

    def set_params(self, **params) -> "BFTRegressor":
        for k, v in params.items():
            if k not in self._PARAMS:
                raise ValueError(f"unknown parameter {k!r} for BFTRegressor; valid: {', '.join(self._PARAMS)}")
            setattr(self, k, v)
        return self

    def __sklearn_tags__(self):
        return _sklearn_tags("regressor", True, True)

    def __repr__(self) -> str:
        return _repr(self)

    def __getstate__(self) -> dict:
        # the fitted model holds a sparse factorisation (SuperLU), which does not pickle; it is rebuilt from the
        # validated document config_ on unpickling, so a fitted regressor pickles (joblib, multiprocessing)
        state = dict(self.__dict__)
        state.pop("model_", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if "config_" in state:
            self.model_ = regression.RegressionModel.from_config(state["config_"])

    # --- fit -----------------------------------------------------------------------------------------------------
    def _hyper(self, name: str, allow_zero: bool = False):
        """A number, or "evidence" (returned as None)."""
        v = getattr(self, name)
        if isinstance(v, str):
            if v == "evidence":
                return None
            raise ValueError(f"BFTRegressor parameter {name!r} must be a number or \"evidence\" (chosen by "
                             f"maximising the evidence), got {v!r}")
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"BFTRegressor parameter {name!r} must be a number or \"evidence\", got {v!r}") from None
        if not (np.isfinite(f) and (f >= 0 if allow_zero else f > 0)):
            need = ">= 0" if allow_zero else "> 0"
            raise ValueError(f"BFTRegressor parameter {name!r} must be a finite number {need} or \"evidence\", "
                             f"got {v!r}")
        return f

    def to_config(self, x, y, lam: float, beta: float, l0: float) -> dict:
        """The JSON regression document this estimator fits for data x, y at the given hyperparameters."""
        x_min, x_max = self.x_min, self.x_max
        if x_min is None or x_max is None:
            lo, hi = float(np.min(x)), float(np.max(x))
            pad = 0.05 * (hi - lo) if hi > lo else 0.5
            x_min = lo - pad if x_min is None else x_min
            x_max = hi + pad if x_max is None else x_max
        n = self._nodes(x)
        ell = self._length()
        if ell is not None:  # Silverman's equivalent-kernel bandwidth at the mean data density (class text)
            k, coef = self._order()  # type: ignore[misc]
            box = (float(x_max) - float(x_min)) * n / max(n - 1, 1)
            lam = ell ** (2 * k) * len(x) / (coef * box)
        return {"model": "regression",
                "grid": {"x": {"min": x_min, "max": x_max, "n": n, "boundary": self.boundary}},
                "data": np.column_stack([x, y]),
                "prior": {"lambda": lam, "l0": l0, "l2": self.l2, "l4": self.l4, "l6": self.l6},
                "templates": [{"kind": "constant", "value": 0.0}] if self.templates is None else self.templates,
                "weights": [] if self.weights is None else self.weights, "beta": beta}

    def _evidence_ranges(self, x, y, given: dict) -> dict:
        """Where the evidence looks for each hyperparameter: :func:`bftcore.models.regression.default_range`, from
        the grid and the data (the same search in any units)."""
        placeholder = {k: (1.0 if v is None else v) for k, v in given.items()}
        doc = self.to_config(x, y, placeholder["lam"], placeholder["beta"], placeholder["l0"])
        doc["choose"] = {"lambda": "evidence"}  # the gate checks what holds for every lambda
        cfg = self._validate(doc)
        return {name: regression.default_range(cfg, name) for name in ("lambda", "beta", "l0")}

    def _validate(self, doc: dict) -> dict:
        try:
            return api.validate_config(doc)
        except ConfigError as e:
            msg = str(e)
            said = _too_long("BFTRegressor", _positive_or_none(self.length_scale), msg)
            if said:
                raise ConfigError(said) from None
            for key, name in _REGRESSOR_PARAM_OF_KEY:
                if msg.startswith(key) or f" {key}" in msg:
                    raise ConfigError(f"BFTRegressor parameter {name!r}: {msg}") from None
            raise ConfigError(f"BFTRegressor: {msg}") from None

    def fit(self, X, y) -> "BFTRegressor":
        """Fit to inputs X (shape (n,) or (n, 1)) and targets y (shape (n,)); hyperparameters given as
        ``"evidence"`` are chosen first by maximising the exact log evidence."""
        x, yv = _regression_xy(X, y)
        given = {name: self._hyper(name, allow_zero=name == "l0") for name in _EVIDENCE_NAMES}
        chosen = [_EVIDENCE_NAMES[k] for k, v in given.items() if v is None]
        bounds = self._evidence_ranges(x, yv, given) if chosen else {}
        start = {k: (float(np.sqrt(np.prod(bounds[_EVIDENCE_NAMES[k]]))) if v is None else v)
                 for k, v in given.items()}
        cfg = self._validate(self.to_config(x, yv, start["lam"], start["beta"], start["l0"]))
        self.evidence_result_ = None
        if chosen:
            res = regression.optimise_evidence(cfg, params=chosen, bounds={q: bounds[q] for q in chosen})
            self.evidence_result_ = res
            if res.get("at_bound"):
                warnings.warn(f"BFTRegressor: the evidence is largest on the edge of the range of "
                              f"{', '.join(res['at_bound'])} (from the grid and the data); it may rise beyond it",
                              stacklevel=2)
            cfg = self._validate(self.to_config(x, yv, res["lambda"], res["beta"], res["l0"]))
        model = regression.RegressionModel.from_config(cfg)
        beta = float(cfg["beta"])
        exact = model.exact(beta)
        self.config_, self.model_ = cfg, model
        self.lam_, self.beta_, self.l0_ = float(cfg["prior"]["lambda"]), beta, float(cfg["prior"]["l0"])
        self.theta_ = np.log([self.lam_, self.beta_])
        order = self._order()
        self.length_scale_ = None
        if order is not None and self.l0_ == 0:  # the inverse of to_config's conversion (class text)
            k, coef = order
            self.length_scale_ = float((self.lam_ * coef * model.axis.n * model.hx / x.size) ** (1 / (2 * k)))
        self.n_features_in_ = 1
        self.x_ = model.nodes.copy()
        self.h_ = exact["mean"]
        self.std_ = np.sqrt(exact["var"])
        self.b_ = exact["b"]
        self.log_marginal_likelihood_value_ = model.log_evidence(beta)
        return self

    def _resampling_config(self, X, y) -> dict:
        """The document of the learning curve and the bootstrap: hyperparameters given as ``"evidence"`` at the
        values a fit to all of (X, y) chooses."""
        x, yv = _regression_xy(X, y)
        given = {name: self._hyper(name, allow_zero=name == "l0") for name in _EVIDENCE_NAMES}
        if any(v is None for v in given.values()):
            self.fit(X, y)
            given = {"lam": self.lam_, "beta": self.beta_, "l0": self.l0_}
        return self._validate(self.to_config(x, yv, given["lam"], given["beta"], given["l0"]))

    def learning_curve(self, X, y, sizes=(5, 10, 20, 50, 100), resamples: int = 20, lambdas=None,
                       evidence: bool | None = None, seed: int = 0, scheduler: str | None = None,
                       progress=None) -> dict:
        """Train and test error against n by the bootstrap of (X, y) (:func:`bftcore.studies.learning
        .learning_curve_document`: in-bag and out-of-bag mean of (h - y)^2 / 2), with the replica theory of seed 002
        beside it for one template.  ``evidence`` (default: ``lam="evidence"``) adds the curve at each resample's
        evidence-chosen lambda."""
        cfg = self._resampling_config(X, y)
        return api.learning_curve_document(cfg, sizes, resamples, lambdas,
                                           (self.lam == "evidence") if evidence is None else evidence, seed=seed,
                                           scheduler=scheduler, progress=progress)

    def bootstrap(self, X, y, resamples: int = 50, level: float = 0.9, seed: int = 0,
                  scheduler: str | None = None) -> dict:
        """Bootstrap bands on h(x) (:func:`bftcore.studies.learning.bootstrap_document`)."""
        return api.bootstrap_document(self._resampling_config(X, y), resamples, level, seed, scheduler)

    # --- after fit -----------------------------------------------------------------------------------------------
    def _queries(self, X, who: str = "BFTRegressor.predict", per_point: int = 1, draws: int = 1) -> np.ndarray:
        """The query points X, checked before X is converted: fitted, and the result of ``per_point`` numbers a
        point times ``draws`` within the budget of outputs."""
        _not_fitted(self)
        _count_queries(X, who, per_point, draws)
        return _regression_x(X, "X")

    def predict(self, X, return_std: bool = False, return_cov: bool = False):
        """Posterior mean of h at X, at any x: between the nodes the piecewise-linear field the lattice stands
        for, beyond the grid the prior's continuation (its standard deviation grows with the distance, as a
        Gaussian process's does; :mod:`bftcore.models.regression_query`).  With ``return_std`` also its posterior
        standard deviation, with ``return_cov`` its posterior covariance (noise-free, see the class docstring)."""
        _not_fitted(self)
        if return_std and return_cov:
            raise ValueError("BFTRegressor.predict: ask for at most one of return_std and return_cov")
        n = length_of(X)
        if return_cov and n is not None:  # the covariance is n x n: checked from X's length, before anything else
            check_output(n * n, f"BFTRegressor.predict: the covariance of {_fmt_int(n)} query points is {{}} numbers",
                         f"ask for the covariance of at most {_fmt_int(int((active().max_output_values or 1) ** 0.5))} "
                         f"points, or return_std=True for the variances alone")
        x = self._queries(X, per_point=2 if return_std else 1)
        mean, spread = posterior_at(self.model_, x, self.beta_, self.b_, full=return_cov)
        if return_std:
            return mean, np.sqrt(spread)
        if return_cov:
            return mean, spread
        return mean

    def sample_y(self, X, n_samples: int = 1, random_state=0) -> np.ndarray:
        """Exact draws of h from the posterior at X, shape (len(X), n_samples) as in scikit-learn
        (:func:`bftcore.models.regression_query.samples_at`; noise-free)."""
        if isinstance(n_samples, bool) or not (isinstance(n_samples, (int, np.integer)) and n_samples >= 1):
            raise ValueError(f"BFTRegressor.sample_y: n_samples must be a whole number >= 1, got {n_samples!r}")
        # draws x query points counted from X's length before X is converted (the draws x nodes of the posterior
        # are counted by posterior_samples)
        x = self._queries(X, "BFTRegressor.sample_y", draws=int(n_samples))
        return samples_at(self.model_, x, self.beta_, int(n_samples), random_state).T

    def log_marginal_likelihood(self, theta=None, eval_gradient: bool = False):
        """ln p(y | X, lam, l0, beta, p), exact, at ``theta = ln [lam, beta]`` (None: the fitted values).  With
        ``eval_gradient`` also its derivatives by ln lam and ln beta (as scikit-learn)."""
        _not_fitted(self)
        if theta is None:
            lam, beta = self.lam_, self.beta_
        else:
            th = np.asarray(theta, dtype=float)
            if th.shape != (2,) or not np.all(np.isfinite(th)):
                raise ValueError(f"BFTRegressor.log_marginal_likelihood: theta must be [ln lam, ln beta] (two "
                                 f"finite numbers), got {theta!r}")
            lam, beta = float(np.exp(th[0])), float(np.exp(th[1]))
        ev = self.model_.evidence
        value = ev.log_evidence(beta, lam=lam)
        if not eval_gradient:
            return value
        g = ev.gradient(beta, lam=lam)
        return value, np.array([g["lambda"], g["beta"]])

    def score(self, X, y) -> float:
        """Coefficient of determination R^2 of :meth:`predict` on (X, y), as scikit-learn's regressors."""
        _not_fitted(self)
        _count_queries(X, "BFTRegressor.score")
        x, yv = _regression_xy(X, y, fit=False)
        r = yv - self.predict(x)
        return float(1.0 - (r @ r) / np.sum((yv - yv.mean()) ** 2))


def _regression_x(X, name: str) -> np.ndarray:
    """Inputs of shape (n,) or (n, 1) as a finite (n,) array; otherwise a ValueError naming ``name`` (complex or
    masked values refused, :func:`_numbers`)."""
    x = _numbers(X, "BFTRegressor", name)
    if not np.all(np.isfinite(x)):  # before the shape: whatever its shape, a NaN is the first thing to say
        raise ValueError(f"BFTRegressor: {name} contains NaN or infinite values at positions "
                         f"{np.argwhere(~np.isfinite(x))[:5].tolist()}; drop or impute them")
    if x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    if x.ndim == 2 and x.shape[1] == 0:
        raise ValueError(f"BFTRegressor: {name} has 0 feature(s) (shape={x.shape}) while a minimum of 1 is required; "
                         f"give the inputs as shape (n,) or (n, 1)")
    if x.ndim != 1:
        raise ValueError(f"BFTRegressor: {name} must have shape (n,) or (n, 1) (one input dimension), got shape "
                         f"{x.shape}; reshape with X.reshape(-1, 1)")
    return x


def _regression_xy(X, y, fit: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and targets of a fit (counted against the budget's data points before they are converted) or of
    :meth:`BFTRegressor.score`."""
    if y is None:
        raise ValueError("BFTRegressor requires y to be passed, but the target y is None; call fit(X, y) with the "
                         "targets y")
    if fit:
        _count_points(X, "BFTRegressor")
        _count_points(y, "BFTRegressor", "y")
    x = _regression_x(X, "X")
    yv = _numbers(y, "BFTRegressor", "y")
    if yv.ndim == 2 and yv.shape[1] == 1:
        yv = yv[:, 0]
    if yv.shape != x.shape:
        raise ValueError(f"BFTRegressor: y must have shape ({x.size},) like X, got shape {yv.shape}")
    if x.size == 0:
        raise ValueError("BFTRegressor: fit needs at least one data point (X and y are empty)")
    if not np.all(np.isfinite(yv)):
        raise ValueError(f"BFTRegressor: y contains NaN or infinite values at positions "
                         f"{np.flatnonzero(~np.isfinite(yv))[:5].tolist()}; drop or impute them")
    return x, yv
