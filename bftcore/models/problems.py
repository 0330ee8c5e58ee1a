"""The problem kinds bftcore solves, registered: the one list a new kind joins.

A *problem kind* (:class:`bftcore.foundations.config.ProblemKind`) is what the dashboard's runner, the façade
(:mod:`bftcore.api`) and the workflows ask of a kind of problem: how large its field is, how to iterate and solve it,
which hyperparameters its evidence can follow and how, what is uncertain about its fit, what is exact about its
solution, its result type and how it is drawn.  Each kind is a class of its own module; this module registers one
object of each (:func:`~bftcore.foundations.config.register`), and a validated document finds its kind by what the
kinds declare (:func:`~bftcore.foundations.config.kind_of`, :attr:`~bftcore.foundations.config.Valid.kind`).

Today's kinds: :data:`DENSITY` (the conditional density p(y|x) of Lemm's Sect. 3, :mod:`bftcore.models.density`, with
the Laplace evidence of :mod:`bftcore.models.evidence` added here: that module sits above the density's),
:data:`REGRESSION` (Gaussian regression with mixtures of GP priors, seed 001, :mod:`bftcore.models.regression`) and
:data:`DENSITY_1D` (the 1-D density p(y), :mod:`bftcore.models.density_1d`), and the regressions with a local prior,
:data:`LOCAL_SWITCH` and :data:`LOCAL_HYPERFIELD` (:mod:`bftcore.models.local_regression`, documents with
``prior.local``; registered after the plain regression, so asked first), and the non-quadratic priors of Sect. 6.5 by
IRLS, :data:`ROBUST_REGRESSION` and :data:`ROBUST_DENSITY` (:mod:`bftcore.models.robust`, documents with
``prior.potential``: the gate sets ``solver.method`` "irls", which they claim).  A new kind (non-Gaussian priors, image
completion, BYY...) is a module defining a class with the protocol's attributes and methods, and one line here.

Importing :mod:`bftcore` imports this module, so every kind is registered before a document asks for its kind.
"""
from __future__ import annotations

import numpy as np

from ..foundations.config import KINDS, ProblemKind, kind_of, register  # noqa: F401 - the registry, re-exported
from . import density, density_1d, evidence, local_density, local_regression, regression, robust


class _Density(density.DensityKind):
    """The conditional density with its Laplace evidence (:mod:`bftcore.models.evidence`)."""

    path_parameters: tuple[str, ...] = evidence.PATH_PARAMS

    def evidence_path(self, cfg: dict, param: str, values) -> dict:
        return evidence.path_document(cfg, param, values)

    def posterior_summary(self, cfg: dict, field, n: int, level: float, rng: np.random.Generator) -> dict:
        """The pointwise ``level`` credible band of the regression function h(x) of p(y|x) from ``n`` Laplace
        samples about the MAP field L (solved here if None)."""
        return evidence.band_summary(cfg, self.solve(cfg).field if field is None else field, n, level, rng)


#: The conditional density p(y|x).
DENSITY: ProblemKind = register(_Density())
#: Gaussian regression with mixtures of GP priors.
REGRESSION: ProblemKind = register(regression.RegressionKind())
#: The 1-D density p(y) (a prior on L; with a prior on P it is the conditional density's, one x node).
DENSITY_1D: ProblemKind = register(density_1d.Density1D())
#: Regression with a non-quadratic prior potential and a robust data term (Sects. 6.5, 3.7.4), by IRLS: it claims the
#: regression documents with ``solver.method: "irls"`` (the gate sets it when prior.potential or data_term is given).
ROBUST_REGRESSION: ProblemKind = register(robust.RobustRegressionKind())
#: Regression with a local prior mixture (filter switching, Sect. 6.4) and/or cuts.
LOCAL_SWITCH: ProblemKind = register(local_regression.LocalRegressionKind("switch"))
#: Regression with a log-stiffness hyperfield (Sects. 5.3.3, 5.6) and/or cuts.
LOCAL_HYPERFIELD: ProblemKind = register(local_regression.LocalRegressionKind("hyperfield"))
#: The conditional density with a prior potential on L (Sect. 6.5 on the 2-D grid), by IRLS: it claims the density
#: documents with ``solver.method: "irls"`` (the gate sets it when prior.potential is given).
ROBUST_DENSITY: ProblemKind = register(robust.RobustDensityKind())
#: The conditional density (field L) with a local prior mixture on the grid's edges (Sect. 6.4) and/or cuts.
DENSITY_LOCAL_SWITCH: ProblemKind = register(local_density.LocalDensityKind("switch"))
#: The conditional density (field L) with a log-stiffness hyperfield on the grid's edges (Sects. 5.3.3, 5.6).
DENSITY_LOCAL_HYPERFIELD: ProblemKind = register(local_density.LocalDensityKind("hyperfield"))
