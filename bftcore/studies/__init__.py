"""Studies over many fits: beta sweeps, basins, learning curves and the bootstrap.  Imports models and foundations."""
