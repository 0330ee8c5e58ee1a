"""The façade: one entry point for the CLI, the dashboard, the estimator and the tests.  Configuration in,
records or results out; everything here is a thin call into the layer that owns the work.

* :func:`iterate` yields one :class:`~bftcore.records.Record` per iteration (iteration 0 is the initial field);
  close the generator to stop early.
* :func:`run` runs to the end and returns a :class:`~bftcore.records.FitResult` holding arrays
  (:class:`bftcore.density.DensityFit` or :class:`bftcore.regression.RegressionFit`);
  :func:`fit` returns its result document (CONVENTIONS.md §4).
* :func:`sweep_document`, :func:`basins_document`, :func:`fig7_document`: the workflows over many fits
  (:mod:`bftcore.workflows`).

Warm start: pass the previous field as ``init`` (L for field L, P for field P, h for regression).

Layers, each importing only those below it: grid, operators, limits, records, templates, mixing (formulas) ->
config (the one gate) -> energies, active set, solvers -> the problems (:mod:`bftcore.density`,
:mod:`bftcore.regression`) -> :mod:`bftcore.workflows` -> this façade -> estimator, CLI, presets, benchmarks.
"""
from __future__ import annotations

from . import density, regression
from .config import ConfigError, default_config, grid_from_config, validate_config
from .density import (  # noqa: F401 - the density problem's parts, part of the API
    EMPIRICAL_EPS,
    DensityFit,
    DensityProblem,
    build_density,
    empirical_density,
    initial_field,
    is_local_minimum,
    kernel_density,
    prior_samples,
)
from .limits import blas_threads
from .mixing import detect_plateaus  # noqa: F401 - part of the API
from .records import FitResult, Record
from .regression import RegressionFit  # noqa: F401 - part of the API
from .templates import paper_true_density, template_density, template_field  # noqa: F401 - part of the API
from .workflows import basins_document, fig7_document, sweep_document  # noqa: F401 - part of the API

__all__ = ["ConfigError", "default_config", "validate_config", "grid_from_config", "build_density", "iterate",
           "run", "fit", "Record", "FitResult", "sweep_document", "basins_document", "fig7_document"]


def iterate(config: dict, init=None):
    """Yield a :class:`Record` per iteration of the configured solver; close the generator to stop early."""
    cfg = validate_config(config)
    blas_threads()
    if cfg["model"] == "regression":
        yield from regression.iterate(cfg, init, validated=True)
        return
    yield from density.records(build_density(cfg, validated=True), init)


def run(config: dict, init=None, callback=None, check_stability: bool = False) -> FitResult:
    """Run the configured solver to the end and return the result as arrays.

    ``callback(record)`` is called for every iteration; returning True from it stops the run.
    ``check_stability=True`` (density) decides whether the solution is a local minimum
    (:func:`is_local_minimum`), as beta sweeps and basins report it; a regression result always says.
    """
    cfg = validate_config(config)
    blas_threads()
    if cfg["model"] == "regression":
        return regression.solve(cfg, init, validated=True)
    return density.solve(build_density(cfg, validated=True), init, callback, check_stability)


def fit(config: dict, init=None, callback=None, check_stability: bool = False) -> dict:
    """The result document (CONVENTIONS.md §4) of :func:`run`."""
    return run(config, init, callback, check_stability).to_document()
