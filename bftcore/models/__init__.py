"""Models: the energies and their problems (conditional density, 1-D density, regression), the evidence, the replica
theory, the problem kinds and the presets.  Imports the foundations only."""
