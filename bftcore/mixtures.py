"""The name this package's mixture code had before the layers were split (kept so that old imports work): the
formulas live in :mod:`bftcore.mixing`, the workflows over many fits in :mod:`bftcore.workflows`."""
from .mixing import *  # noqa: F401,F403
from .workflows import *  # noqa: F401,F403
