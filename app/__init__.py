"""The bftcore Panel dashboard; `panel serve app` runs app/main.py.

Its modules, each importing only those listed before it: ``transport`` (Bokeh messages), ``configuration``
(parameters <-> the JSON document), ``runner`` (the run / frame pump), ``session`` (the parameters and the user's
actions), ``views`` (one module per plot or panel), ``main`` (the page); ``harness`` (the browser/server harness of
the UI tests and the load scripts) stands apart.
"""
