"""The kinds of problem bftcore solves, and the one place where a validated document's ``"model"`` chooses code.

A *problem kind* (:class:`ProblemKind`) is what the façade (:mod:`bftcore.api`), the dashboard's runner and the
workflows ask of a kind of problem: how large its field is, how to iterate and solve it, which hyperparameters its
evidence can follow and how, what is uncertain about its fit, and what is exact about its solution.  Each kind is
one object registered under its document name (:func:`register`); :func:`kind_of` finds the kind of a validated
document.  Callers ask the kind instead of comparing ``cfg["model"]`` with a string.

Today's kinds: :data:`DENSITY` (the conditional density p(y|x) of Lemm's Sect. 3, also a 1-D density p(y) as a
one-node x axis) and :data:`REGRESSION` (Gaussian regression with mixtures of GP priors, seed 001).  A new kind
(non-Gaussian priors, image completion, BYY...) is a module defining an object with these methods and calling
:func:`register` at import; :mod:`bftcore.api` imports it.

This module sits above the problems it registers (:mod:`bftcore.density`, :mod:`bftcore.regression`,
:mod:`bftcore.evidence`) and below the workflows and the façade.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import numpy as np

from . import density, evidence, regression
from .config import grid_from_config
from .records import FitResult, Record


class ProblemKind(Protocol):
    """What every kind of problem answers (see the module's text).  Every ``cfg`` is a validated document
    (:func:`bftcore.config.validate_config`)."""

    #: The document's ``"model"``.
    name: str
    #: The hyperparameters an evidence path can follow.
    path_parameters: tuple[str, ...]
    #: Its solution has a closed-form part (:meth:`exact` returns a document, never None).
    has_exact: bool

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
    """Make ``kind`` the kind of the documents whose ``"model"`` is ``kind.name``."""
    KINDS[kind.name] = kind
    return kind


def kind_of(cfg: dict) -> ProblemKind:
    """The kind of a validated document (the gate has refused any other ``"model"``)."""
    return KINDS[cfg["model"]]


def _json_numbers(values) -> list:
    """JSON has no NaN: a gap in a path is null."""
    return [v if v is not None and np.isfinite(v) else None for v in values]


class _Density:
    name: str = "density"
    path_parameters: tuple[str, ...] = evidence.PATH_PARAMS
    has_exact: bool = False

    def nodes(self, cfg: dict) -> int:
        return cfg["grid"]["x"]["n"] * cfg["grid"]["y"]["n"]

    def is_sparse_heavy(self, cfg: dict) -> bool:
        return cfg["prior"]["field"] == "P"

    def iterate(self, cfg: dict, init=None) -> Iterator[Record]:
        yield from density.records(density.build_density(cfg), init)

    def solve(self, cfg: dict, init=None, callback=None, check_stability: bool = False) -> FitResult:
        return density.solve(density.build_density(cfg), init, callback, check_stability)

    def evidence_path(self, cfg: dict, param: str, values) -> dict:
        doc = dict(evidence.evidence_path(cfg, param=param, values=values))
        doc.pop("fields", None)
        for key in ("log_evidence", "data_fit", "occam", "logdet_stderr"):
            doc[key] = _json_numbers(doc[key])
        doc["method"] = "laplace"
        return doc

    def posterior_summary(self, cfg: dict, field, n: int, level: float, rng: np.random.Generator) -> dict:
        """The pointwise ``level`` credible band of the regression function h(x) of p(y|x) from ``n`` Laplace
        samples about the MAP field L (solved here if None)."""
        problem = density.build_density(cfg)
        if field is None:
            fit = self.solve(cfg)
            assert isinstance(fit, density.DensityFit)
            L = fit.L
        else:
            L = np.asarray(field, dtype=float)
        bands = evidence.credible_bands(problem, evidence.laplace_samples(problem, L, n, rng), level)
        x = grid_from_config(cfg).x.nodes
        return {"x": x.tolist(), "h_lo": bands["h_lower"].tolist(), "h_hi": bands["h_upper"].tolist(),
                "h_median": bands["h_median"].tolist(), "kind": "laplace", "level": level}

    def exact(self, cfg: dict) -> dict | None:
        return None


class _Regression:
    name: str = "regression"
    path_parameters: tuple[str, ...] = regression.SCALAR_PARAMETERS
    has_exact: bool = True

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


#: The conditional density p(y|x) (and the 1-D density p(y), one x node).
DENSITY: ProblemKind = register(_Density())
#: Gaussian regression with mixtures of GP priors.
REGRESSION: ProblemKind = register(_Regression())
