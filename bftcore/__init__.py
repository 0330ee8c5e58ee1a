"""bftcore: J. C. Lemm's Bayesian field theory on a grid.

Density estimation p(y|x) with Gaussian (mixture) priors on L = ln P or on P, normalised per x, the learning
algorithms of Sect. 7.2, and Gaussian regression with mixtures of Gaussian-process priors.
"""
import os

# The solver does many small dense and sparse operations; multithreaded OpenBLAS only adds contention there (and
# becomes very slow when the cores are shared, e.g. a classroom server).  Set before numpy loads; override by
# exporting the variable yourself.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from .config import ConfigError, default_config, load_config, validate_config
from .grid import Axis, Grid
from .operators import PriorOperator, SingularOperatorError

__all__ = ["Axis", "Grid", "PriorOperator", "SingularOperatorError", "ConfigError", "default_config",
           "load_config", "validate_config"]
__version__ = "0.1.0"
