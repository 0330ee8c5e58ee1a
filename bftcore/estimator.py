"""A scikit-learn-like estimator over :mod:`bftcore.api` for notebooks.

>>> est = BFTDensity(grid=Grid.paper("periodic"), l2=0.025, method="newton").fit([[3, 3], [7, 12]])
>>> est.density_.shape, round(est.energy_, 4)
((10, 15), 1.877)

The constructor only stores hyperparameters; validation happens in ``fit`` (through the JSON configuration, so
the estimator, the CLI and the dashboard share one gate and one cost budget); a bad value raises
:class:`bftcore.config.ConfigError` naming the estimator's parameter.  numpy scalars and arrays are accepted wherever
a number or a list is (a grid search over ``np.logspace`` works).  ``grid`` is a :class:`Grid`, a JSON grid object
or one of ``"paper"``, ``"paper-periodic"``, ``"paper-neumann"`` (the paper mesh with a periodic or a neumann x
axis).  Learned state ends in ``_``; ``fit`` returns ``self``.
"""
from __future__ import annotations

import numpy as np

from . import api, metrics
from .config import ConfigError
from .density import DensityFit
from .grid import Grid

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


def _points(X, y=None) -> np.ndarray:
    """Data as an (n, 2) float array, from (n, 2) X or from x = X and y = y."""
    try:
        X = np.asarray(X, dtype=float)
        if y is not None:
            X = np.column_stack([X.ravel(), np.asarray(y, dtype=float).ravel()])
    except (TypeError, ValueError) as e:
        raise ConfigError(f"BFTDensity.fit: X (and y) must be numbers, an (n, 2) array of (x, y) or x and y "
                          f"of equal length ({e})") from None
    if X.size == 0:
        return np.zeros((0, 2))
    if X.ndim != 2 or X.shape[1] != 2:
        raise ConfigError(f"BFTDensity.fit: X must be an (n, 2) array of (x, y) points, got shape {X.shape}")
    return X


class BFTDensity:
    """Nonparametric conditional density p(y|x) with a Gaussian (mixture) prior on L = ln P or on P.

    Parameters mirror the JSON document of CONVENTIONS.md §4: ``grid`` (a :class:`Grid`), ``field`` ("L"/"P"),
    ``lam`` (lambda), ``lambda_x``, ``lambda_y``, ``l0``, ``l2``, ``l4``, ``l6``, ``templates`` (list of template
    dicts), ``weights`` (p_j), ``beta``, ``method``, ``mass2``, ``init``, ``init_mass2``, ``min_iter``, ``max_iter``,
    ``tol``, ``truth`` ("paper" or None), ``warm_start`` (start the next ``fit`` from the current solution).

    Fitted attributes: ``density_`` (P), ``log_density_`` (L), ``energy_``, ``mixing_`` (a_j), ``n_iter_``,
    ``converged_``, ``energy_history_``, ``train_error_history_``, ``test_error_history_``, ``result_`` (the
    result document).
    """

    density_: np.ndarray  # fitted attributes exist only after fit (hasattr tells)
    log_density_: np.ndarray

    def __init__(self, grid: Grid | None = None, field: str = "L", lam: float = 1.0, lambda_x: float = 1.0,
                 lambda_y: float = 1.0, l0: float = 0.0, l2: float = 1.0, l4: float = 0.0, l6: float = 0.0,
                 templates=None, weights=None, beta: float = 1.0, method: str = "newton", mass2: float = 0.01,
                 init: str = "kernel", init_mass2: float = 0.1, min_iter: int = 4, max_iter: int = 50,
                 tol: float = 1e-8, truth: str | None = None, warm_start: bool = False):
        self.grid, self.field, self.lam = grid, field, lam
        self.lambda_x, self.lambda_y, self.l0, self.l2, self.l4, self.l6 = lambda_x, lambda_y, l0, l2, l4, l6
        self.templates, self.weights, self.beta = templates, weights, beta
        self.method, self.mass2, self.init, self.init_mass2 = method, mass2, init, init_mass2
        self.min_iter, self.max_iter, self.tol, self.truth, self.warm_start = min_iter, max_iter, tol, truth, warm_start

    _PARAMS = ("grid", "field", "lam", "lambda_x", "lambda_y", "l0", "l2", "l4", "l6", "templates", "weights",
               "beta", "method", "mass2", "init", "init_mass2", "min_iter", "max_iter", "tol", "truth", "warm_start")

    def get_params(self, deep: bool = True) -> dict:
        return {k: getattr(self, k) for k in self._PARAMS}

    def set_params(self, **params) -> "BFTDensity":
        for k, v in params.items():
            if k not in self._PARAMS:
                raise ValueError(f"unknown parameter {k!r} for BFTDensity; valid: {', '.join(self._PARAMS)}")
            setattr(self, k, v)
        return self

    def to_config(self, X) -> dict:
        """The JSON configuration this estimator fits for data X (an (n, 2) array of (x, y))."""
        return {"model": "density", "grid": _grid_doc(self.grid), "data": _points(X),
                "prior": {"field": self.field, "lambda": self.lam, "lambda_x": self.lambda_x,
                          "lambda_y": self.lambda_y, "l0": self.l0, "l2": self.l2, "l4": self.l4, "l6": self.l6},
                "templates": [] if self.templates is None else self.templates,
                "weights": [] if self.weights is None else self.weights, "beta": self.beta,
                "solver": {"method": self.method, "mass2": self.mass2, "init": self.init,
                           "init_mass2": self.init_mass2, "min_iter": self.min_iter, "max_iter": self.max_iter,
                           "tol": self.tol},
                "truth": self.truth}

    def fit(self, X, y=None) -> "BFTDensity":
        """Fit to data X, an (n, 2) array of (x, y) points, or to x = X and y = y given separately."""
        X = _points(X, y)
        init = None
        if self.warm_start and hasattr(self, "log_density_"):
            init = self.log_density_ if self.field == "L" else self.density_
        try:
            cfg = api.validate_config(self.to_config(X))
        except ConfigError as e:
            raise ConfigError(_name_parameter(str(e))) from None
        result = api.run(cfg, init=init)
        assert isinstance(result, DensityFit)
        self.config_ = cfg
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

    def _check_fitted(self):
        if not hasattr(self, "density_"):
            raise RuntimeError("this BFTDensity is not fitted yet; call fit(X) first")

    def predict_proba(self, X) -> np.ndarray:
        """p(y|x) at the grid nodes nearest to the points X ((n, 2) array); points off the grid are an error."""
        self._check_fitted()
        ix, iy = self.grid_.snap(X)
        return self.density_[ix, iy]

    def score_samples(self, X) -> np.ndarray:
        """ln p(y|x) at the nearest nodes."""
        self._check_fitted()
        ix, iy = self.grid_.snap(X)
        return self.log_density_[ix, iy]

    def score(self, X, y=None) -> float:
        """Mean log-likelihood of held-out points, i.e. minus the training-error formula (710) on X."""
        X = np.asarray(X, dtype=float)
        if y is not None:
            X = np.column_stack([X.ravel(), np.asarray(y, dtype=float).ravel()])
        return float(np.mean(self.score_samples(X)))

    def regression(self) -> tuple[np.ndarray, np.ndarray]:
        """Regression function h(x) (709) and conditional standard deviation on the x nodes."""
        self._check_fitted()
        return metrics.regression_function(self.density_, self.grid_)


def _name_parameter(message: str) -> str:
    """The gate's message with the estimator's parameter named: "prior.lambda must be ..." -> "... (parameter
    lam)"."""
    for key, name in _PARAM_OF_KEY.items():
        if message.startswith(key) or f" {key}" in message:
            return f"BFTDensity parameter {name!r}: {message}"
    return f"BFTDensity: {message}"
