"""bftcore: J. C. Lemm's Bayesian field theory on a grid.

Density estimation p(y|x) with Gaussian (mixture) priors on L = ln P or on P, normalised per x, the learning
algorithms of Sect. 7.2, and Gaussian regression with mixtures of Gaussian-process priors.
"""
from .config import ConfigError, default_config, load_config, validate_config
from .grid import Axis, Grid
from .operators import PriorOperator, SingularOperatorError

__all__ = ["Axis", "Grid", "PriorOperator", "SingularOperatorError", "ConfigError", "default_config",
           "load_config", "validate_config"]
__version__ = "0.1.0"
