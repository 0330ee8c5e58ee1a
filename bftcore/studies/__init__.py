"""Studies over many fits: beta sweeps, basins, learning curves and the bootstrap; and the small figures of chapters
2-5, which need no fit.  Imports models and foundations."""
