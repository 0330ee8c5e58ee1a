"""One iteration of any solver as the dashboard, the API and the result documents see it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Record:
    """One iteration as the dashboard and the result document see it."""

    iteration: int
    energy: float
    train_error: float
    test_error: float | None
    mixing: np.ndarray
    step: float
    residual: float
    method: str
    change: float
    converged: bool
    elapsed_s: float
    L: np.ndarray | None = None
    P: np.ndarray | None = None
    h: np.ndarray | None = None
