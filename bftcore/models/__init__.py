"""Models: one module per kind of problem (conditional density, 1-D density, regression), each with its energy; the
evidence, the replica theory, the registration of the problem kinds and the presets.  Imports the foundations only."""
