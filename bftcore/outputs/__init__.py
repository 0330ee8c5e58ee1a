"""Outputs: result documents read back into arrays, figures (HoloViews), CSV tables of results, writing files.
Imports the foundations only."""
