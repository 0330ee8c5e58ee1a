"""bftcore: J. C. Lemm's Bayesian field theory on a grid.

Density estimation p(y|x) with Gaussian (mixture) priors on L = ln P or on P, normalised per x, the learning
algorithms of Sect. 7.2, and Gaussian regression with mixtures of Gaussian-process priors.

The folders are the layers, each importing only those below it: ``foundations`` (grid, operators, the gate of a
document and the registry of problem kinds, the minimiser, ...) < ``models`` (one module per kind of problem, the
evidence) and ``outputs`` (result documents, figures, tables) < ``studies`` (sweeps, learning curves) < this folder's
interfaces: :mod:`bftcore.api`, :mod:`bftcore.estimator` and the command line (``python -m bftcore``).
"""
from .foundations.config import ConfigError, default_config, load_config, validate_config
from .foundations.grid import Axis, Grid
from .foundations.operators import PriorOperator, SingularOperatorError
from .models import problems as _kinds  # noqa: F401 - registers the problem kinds (a document's Valid.kind)

__all__ = ["Axis", "Grid", "PriorOperator", "SingularOperatorError", "ConfigError", "default_config",
           "load_config", "validate_config"]
__version__ = "0.1.0"
