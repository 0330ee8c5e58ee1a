"""Foundations: the grid and its operators, the limits of a request, the record of an iteration, templates, the
mixture formulas, the metrics, the minimiser, the one gate of a JSON document, data tables and the task runner.
Imports nothing else of bftcore."""
