"""One iteration of any solver, the one shape the solver, the problems, the workflows and the dashboard share.

The solver (:func:`bftcore.foundations.solvers.iterate`) fills what it knows: iteration, energy, step, residual, mixing,
method, change, converged, elapsed time and its own ``field`` (L, P or h).  The problems
(:mod:`bftcore.api`, :mod:`bftcore.models.regression`) complete a record with the errors and the field in the
representations a user reads (``L`` and ``P`` for a density, ``h`` for regression) by
:func:`dataclasses.replace`.  A record holds arrays; it becomes JSON only where it leaves the program
(:meth:`Record.summary`, used by the result documents of CONVENTIONS.md §4).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def finite_or_none(v) -> float | None:
    """A number for a JSON document: None for a missing or non-finite value (JSON has no infinities)."""
    if type(v) is float:  # the common case, without numpy's scalar ufunc call
        return v if math.isfinite(v) else None
    return None if v is None or not np.isfinite(v) else float(v)


@dataclass
class Record:
    """One iteration as the dashboard and the result document see it (iteration 0 is the start)."""

    iteration: int
    energy: float
    train_error: float | None
    test_error: float | None
    mixing: np.ndarray
    step: float
    residual: float
    method: str
    change: float = np.nan
    converged: bool = False
    elapsed_s: float = 0.0
    L: np.ndarray | None = None
    P: np.ndarray | None = None
    h: np.ndarray | None = None
    field: np.ndarray | None = None  # the solver's own field (L, P or h), as it iterates
    verdict: str | None = None  # why the run ended, in words: on the last record of the solvers that say so (IRLS)

    def summary(self) -> dict:
        """The history entry of a result document (CONVENTIONS.md §4): numbers and lists only."""
        return {"iteration": int(self.iteration), "energy": float(self.energy),
                "train_error": finite_or_none(self.train_error), "test_error": finite_or_none(self.test_error),
                "mixing": np.asarray(self.mixing, dtype=float).ravel().tolist(),
                "step": float(self.step), "residual": float(self.residual), "method": str(self.method)}


def finite_list(a) -> list | float:
    """Nested list of an array for a JSON document, non-finite numbers as None (JSON has no infinities)."""
    a = np.asarray(a, dtype=float)
    if a.ndim == 0:
        return np.where(np.isfinite(a), a, np.nan).tolist()
    finite = np.isfinite(a)
    if finite.all():
        return a.tolist()
    out = a.astype(object)
    out[~finite] = None
    return out.tolist()


@dataclass
class FitResult:
    """The outcome of one fit as arrays: every :class:`Record` (iteration 0 is the start; the last one carries
    the solution's fields) and the wall-clock time.  The problems subclass it
    (:class:`bftcore.models.density.DensityFit`, :class:`bftcore.models.regression.RegressionFit`) with what their
    result documents need; :meth:`to_document` turns it into the document of CONVENTIONS.md §4, only where a result
    leaves the program (CLI, download, the API's ``fit``)."""

    history: list[Record]
    elapsed_s: float

    @property
    def last(self) -> Record:
        return self.history[-1]

    @property
    def field(self) -> np.ndarray:
        """The solver's field at the end (L, P or h): the warm start of a next fit."""
        assert self.last.field is not None
        return self.last.field

    def summary(self) -> dict:
        """The few numbers a workflow compares solutions by (energy, mixing, test error, convergence, stability)."""
        raise NotImplementedError

    def to_document(self) -> dict:
        raise NotImplementedError
