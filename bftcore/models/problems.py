"""The kinds of problem bftcore solves, and the one place where a validated document chooses code.

A *problem kind* (:class:`ProblemKind`) is what the façade (:mod:`bftcore.api`), the dashboard's runner and the
workflows ask of a kind of problem: how large its field is, how to iterate and solve it, which hyperparameters its
evidence can follow and how, what is uncertain about its fit, what is exact about its solution, its result type
and how it is drawn.  Each kind is one object registered here (:func:`register`); :func:`kind_of` finds the kind of
a validated document: the last registered kind whose document ``"model"`` is the document's and which
:meth:`~ProblemKind.claims` it.  Callers ask the kind instead of comparing ``cfg["model"]`` with a string.

Today's kinds: :data:`DENSITY` (the conditional density p(y|x) of Lemm's Sect. 3), :data:`DENSITY_1D` (the 1-D
density p(y), its own module :mod:`bftcore.models.density_1d`) and :data:`REGRESSION` (Gaussian regression with mixtures
of GP priors, seed 001).  A new kind (non-Gaussian priors, image completion, BYY...) is a module defining a class with
these attributes and methods, and one line here that registers it.

This module sits above the problems it registers (:mod:`bftcore.models.density`, :mod:`bftcore.models.density_1d`,
:mod:`bftcore.models.regression`, :mod:`bftcore.models.evidence`) and below the workflows and the façade.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import numpy as np

from ..foundations.config import grid_from_config
from ..foundations.records import FitResult, Record
from . import density, density_1d, evidence, regression


class ProblemKind(Protocol):
    """What every kind of problem answers (see the module's text).  Every ``cfg`` is a validated document
    (:func:`bftcore.foundations.config.validate_config`)."""

    #: The kind's own name (unique).
    name: str
    #: The document's ``"model"`` (several kinds may share one; :meth:`claims` decides).
    model: str
    #: The fit's type (:meth:`solve` returns one).
    result_type: type[FitResult]
    #: How its result is drawn: ``"heatmap"`` (p(y|x) over the grid), ``"curve"`` (a function of x with a band),
    #: ``"density"`` (p(y) against y).
    drawn_as: str
    #: The hyperparameters an evidence path can follow.
    path_parameters: tuple[str, ...]
    #: Its solution has a closed-form part (:meth:`exact` returns a document, never None).
    has_exact: bool

    def claims(self, cfg: dict) -> bool:
        """Whether this kind solves the validated document (its ``"model"`` already matched)."""
        ...

    def nodes(self, cfg: dict) -> int:
        """Unknowns of the field (the size of one solve)."""
        ...

    def is_sparse_heavy(self, cfg: dict) -> bool:
        """Its solves factorise large sparse matrices (the dashboard's runner gives them a smaller node budget)."""
        ...

    def iterate(self, cfg: dict, init=None) -> Iterator[Record]:
        """One record per iteration of the configured solver (iteration 0 is the start field)."""
        ...

    def solve(self, cfg: dict, init=None, callback=None, check_stability: bool = False) -> FitResult:
        """The configured solver run to the end."""
        ...

    def evidence_path(self, cfg: dict, param: str, values) -> dict:
        """The log evidence along ``param`` (``values``, or the kind's default range) and its maximum."""
        ...

    def posterior_summary(self, cfg: dict, field, n: int, level: float, rng: np.random.Generator) -> dict:
        """What is uncertain about the fit, for a picture (``field``: the MAP field if known, else None)."""
        ...

    def exact(self, cfg: dict) -> dict | None:
        """What is exact about the solution in closed form (regression's predictive mean and variance), or None."""
        ...


KINDS: dict[str, ProblemKind] = {}


def register(kind: ProblemKind) -> ProblemKind:
    """Make ``kind`` a kind of the documents whose ``"model"`` is ``kind.model``; it is asked before the kinds
    registered earlier (a more specific kind is registered after the general one)."""
    KINDS[kind.name] = kind
    return kind


def kind_of(cfg: dict) -> ProblemKind:
    """The kind of a validated document (the gate has refused any other ``"model"``)."""
    for kind in reversed(KINDS.values()):
        if kind.model == cfg["model"] and kind.claims(cfg):
            return kind
    raise KeyError(f"no problem kind solves a document of model {cfg['model']!r}")


class _Density:
    name: str = "density"
    model: str = "density"
    path_parameters: tuple[str, ...] = evidence.PATH_PARAMS
    has_exact: bool = False
    result_type: type[FitResult] = density.DensityFit
    drawn_as: str = "heatmap"

    def claims(self, cfg: dict) -> bool:
        return True

    def nodes(self, cfg: dict) -> int:
        return cfg["grid"]["x"]["n"] * cfg["grid"]["y"]["n"]

    def is_sparse_heavy(self, cfg: dict) -> bool:
        return cfg["prior"]["field"] == "P"

    def iterate(self, cfg: dict, init=None) -> Iterator[Record]:
        yield from density.records(density.build_density(cfg), init)

    def solve(self, cfg: dict, init=None, callback=None, check_stability: bool = False) -> FitResult:
        return density.solve(density.build_density(cfg), init, callback, check_stability)

    def evidence_path(self, cfg: dict, param: str, values) -> dict:
        return evidence.path_document(cfg, param, values)

    def posterior_summary(self, cfg: dict, field, n: int, level: float, rng: np.random.Generator) -> dict:
        """The pointwise ``level`` credible band of the regression function h(x) of p(y|x) from ``n`` Laplace
        samples about the MAP field L (solved here if None)."""
        return evidence.band_summary(cfg, self.solve(cfg).field if field is None else field, n, level, rng)

    def exact(self, cfg: dict) -> dict | None:
        return None


class _Regression:
    name: str = "regression"
    model: str = "regression"
    path_parameters: tuple[str, ...] = regression.SCALAR_PARAMETERS
    has_exact: bool = True
    result_type: type[FitResult] = regression.RegressionFit
    drawn_as: str = "curve"

    def claims(self, cfg: dict) -> bool:
        return True

    def nodes(self, cfg: dict) -> int:
        return cfg["grid"]["x"]["n"]

    def is_sparse_heavy(self, cfg: dict) -> bool:
        return False

    def iterate(self, cfg: dict, init=None) -> Iterator[Record]:
        yield from regression.iterate(cfg, init)

    def solve(self, cfg: dict, init=None, callback=None, check_stability: bool = False) -> FitResult:
        return regression.solve(cfg, init)

    def evidence_path(self, cfg: dict, param: str, values) -> dict:
        """The exact path, its optimum between the path's ends refined from its best point (the path alone stops
        at a grid value)."""
        doc = dict(regression.evidence_path(cfg, param, values))
        lo, hi = float(np.min(doc[param])), float(np.max(doc[param]))
        opt = regression.optimise_evidence(cfg, (param,), bounds={param: (lo, hi)},
                                           start={param: float(doc["best"][param])})
        if opt["log_evidence"] >= doc["best"]["log_evidence"]:
            doc["best"] = {param: float(opt[param]), "log_evidence": float(opt["log_evidence"])}
        doc["method"] = "exact"
        return doc

    def posterior_summary(self, cfg: dict, field, n: int, level: float, rng: np.random.Generator) -> dict:
        """``n`` exact posterior draws of h on the x nodes."""
        model = regression.RegressionModel.from_config(cfg)
        draws = model.posterior_samples(cfg["beta"], n, rng)
        return {"x": grid_from_config(cfg).x.nodes.tolist(), "draws": np.asarray(draws).tolist(), "kind": "exact"}

    def exact(self, cfg: dict) -> dict | None:
        return regression.exact_posterior(cfg)


#: The conditional density p(y|x).
DENSITY: ProblemKind = register(_Density())
#: Gaussian regression with mixtures of GP priors.
REGRESSION: ProblemKind = register(_Regression())
#: The 1-D density p(y) (a prior on L; with a prior on P it is the conditional density's, one x node).
DENSITY_1D: ProblemKind = register(density_1d.Density1D())
