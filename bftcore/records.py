"""One iteration of any solver, the one shape the solver, the problems, the workflows and the dashboard share.

The solver (:func:`bftcore.solvers.iterate`) fills what it knows: iteration, energy, step, residual, mixing,
method, change, converged, elapsed time and its own ``field`` (L, P or h).  The problems
(:mod:`bftcore.api`, :mod:`bftcore.regression`) complete a record with the errors and the field in the
representations a user reads (``L`` and ``P`` for a density, ``h`` for regression) by
:func:`dataclasses.replace`.  A record holds arrays; it becomes JSON only where it leaves the program
(:meth:`Record.summary`, used by the result documents of CONVENTIONS.md §4).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def finite_or_none(v) -> float | None:
    """A number for a JSON document: None for a missing or non-finite value (JSON has no infinities)."""
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

    def summary(self) -> dict:
        """The history entry of a result document (CONVENTIONS.md §4): numbers and lists only."""
        return {"iteration": int(self.iteration), "energy": float(self.energy),
                "train_error": finite_or_none(self.train_error), "test_error": finite_or_none(self.test_error),
                "mixing": [float(a) for a in np.asarray(self.mixing, dtype=float).ravel()],
                "step": float(self.step), "residual": float(self.residual), "method": str(self.method)}
