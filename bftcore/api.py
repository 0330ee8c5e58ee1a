"""The façade: one entry point for the CLI, the dashboard, the estimator and the tests.  Configuration in,
records or results out; everything here is a thin call into the layer that owns the work.

* :func:`iterate` yields one :class:`~bftcore.foundations.records.Record` per iteration (iteration 0 is the initial
  field); close the generator to stop early.
* :func:`run` runs to the end and returns a :class:`~bftcore.foundations.records.FitResult` holding arrays
  (:class:`bftcore.models.density.DensityFit` or :class:`bftcore.models.regression.RegressionFit`);
  :func:`fit` returns its result document (CONVENTIONS.md §4).
* :func:`sweep_document`, :func:`basins_document`, :func:`fig7_document`: the workflows over many fits
  (:mod:`bftcore.studies.workflows`).
* :func:`learning_curve_document`, :func:`bootstrap_document`: train and test error against n, and bootstrap bands
  on P and h, by real resampling (:mod:`bftcore.studies.learning`), run in process or on Dask
  (:mod:`bftcore.foundations.distributed`).
* :func:`evidence_document`: the log evidence along one hyperparameter and its maximum (density: the Laplace
  approximation of :mod:`bftcore.models.evidence`; regression: exact, :mod:`bftcore.models.regression`);
  :func:`choose_hyperparameters` sets what a document's ``choose`` asks for, and :func:`fit` reports it.
* The fit of a single document, its evidence and its posterior summary are :mod:`bftcore.models.fitting`'s, so that the
  studies below this façade fit documents the same way without importing it.

Warm start: pass the previous field as ``init`` (L for field L, P for field P, h for regression).

Layers, each importing only those below it: the foundations (grid, operators, limits, records, templates, mixing,
the minimiser, and the one gate of a document with the registry of problem kinds) -> the models (each kind of
problem in its module: :mod:`bftcore.models.density`, :mod:`bftcore.models.density_1d`,
:mod:`bftcore.models.regression`; the evidence; :mod:`bftcore.models.problems` registers the kinds;
:mod:`bftcore.models.fitting` fits a document whatever its kind) -> the studies
(:mod:`bftcore.studies.workflows`, :mod:`bftcore.studies.learning`) -> this façade -> estimator, CLI.  A validated
document knows its kind (``cfg.kind``): nothing here compares the document's "model" with a string.
"""
from __future__ import annotations

from .foundations.config import ConfigError, Valid, default_config, grid_from_config, validate_config
from .foundations.mixing import detect_plateaus  # noqa: F401 - part of the API
from .foundations.records import FitResult, Record
from .foundations.templates import paper_true_density, template_density, template_field  # noqa: F401 - part of the API
from .models.density import (  # noqa: F401 - the density problem's parts, part of the API
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
from .models.fitting import (  # noqa: F401 - the work behind the entry points, part of the API
    EDGE_DECADES,
    EDGE_STEPS,
    PATH_PARAMETERS,
    choose_hyperparameters,
    choose_preset,
    evidence_document,
    fit,
    iterate,
    posterior_summary,
    run,
)
from .models.regression import RegressionFit  # noqa: F401 - part of the API
from .studies.learning import bootstrap_document, learning_curve_document  # noqa: F401 - part of the API
from .studies.workflows import basins_document, fig7_document, sweep_document  # noqa: F401 - part of the API

__all__ = ["ConfigError", "Valid", "default_config", "validate_config", "grid_from_config", "build_density", "iterate",
           "run", "fit", "Record", "FitResult", "sweep_document", "basins_document", "fig7_document",
           "evidence_document", "choose_hyperparameters", "choose_preset", "posterior_summary",
           "learning_curve_document", "bootstrap_document"]
