"""The problem kinds (bftcore/models/problems.py): one per model the gate accepts, each answering the whole protocol,
each answer checked against a route that does not go through the kind (the record's own arrays, the problem's own
solver, the closed form); and the callers that ask the kind no longer compare the model's name."""
import inspect
import pathlib
import re

import numpy as np
import pytest

from bftcore import api
from bftcore.foundations.config import validate_config
from bftcore.models import density, presets, problems, regression

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = {"density": lambda: presets.figure_config("fig14"),
           "regression": lambda: presets.regression_presets()["two_trends"],
           "density_1d": lambda: {"grid": {"y": {"min": -3, "max": 3, "n": 40, "boundary": "neumann"}},
                                  "data": [-1.0, -0.5, 0.2, 0.3, 1.1]},
           "robust_regression": lambda: {**presets.regression_presets()["two_trends"], "templates": [
               {"kind": "constant", "value": 1.0}], "weights": [1.0], "data_term": {"name": "insensitive"},
               "solver": {"max_iter": 100}},
           "robust_density": lambda: {**presets.figure_config("fig14"), "prior": {
               **presets.figure_config("fig14")["prior"], "potential": {"name": "cup", "b": 0.5}},
               "solver": {"max_iter": 30}},
           "regression-local-switch": lambda: presets.PRESETS["local_switch"][0],
           "regression-local-hyperfield": lambda: presets.PRESETS["local_hyperfield"][0],
           "density-local-switch": lambda: _local_density({"type": "switch", "stiffness": [1.0, 0.01],
                                                           "pi": [0.95, 0.05]}),
           "density-local-hyperfield": lambda: _local_density({"type": "hyperfield", "theta0": 0.0,
                                                               "gamma_theta": 1.0, "mu_theta": 1.0})}


def _local_density(local: dict) -> dict:
    """A small density document (field L, open grid) with a local prior (bftcore.models.local_density)."""
    return {"model": "density", "grid": {"x": {"min": 0, "max": 1, "n": 8, "boundary": "neumann"},
                                         "y": {"min": 0, "max": 2, "n": 8, "boundary": "neumann"}},
            "data": [[0.1, 0.5], [0.3, 0.6], [0.7, 1.5], [0.9, 1.4]],
            "prior": {"field": "L", "lambda": 4.0, "l2": 1.0, "local": local}}


def test_there_is_one_kind_per_model_the_gate_accepts_and_each_answers_the_whole_protocol():
    assert set(problems.KINDS) == {"density", "regression", "density_1d", "robust_regression", "robust_density",
                                   "regression-local-switch", "regression-local-hyperfield",
                                   "density-local-switch", "density-local-hyperfield"}
    for name, kind in problems.KINDS.items():
        cfg = validate_config(CONFIGS[name]())
        assert cfg["model"] == kind.model  # the gate accepts it
        assert problems.kind_of(cfg) is kind
    with pytest.raises(ValueError, match="model"):
        validate_config({"model": "image"})                      # and no other
    wanted = {n for n, v in vars(problems.ProblemKind).items() if inspect.isfunction(v)}
    assert wanted >= {"nodes", "iterate", "solve", "evidence_path", "posterior_summary", "exact"}
    attributes = set(problems.ProblemKind.__annotations__)
    assert attributes >= {"name", "model", "claims", "result_type", "drawn_as", "path_parameters", "has_exact",
                          "y_on_grid", "default_templates"}
    for name, kind in problems.KINDS.items():
        assert all(hasattr(kind, a) for a in attributes), name
        assert isinstance(kind.claims, dict) and isinstance(kind.y_on_grid, bool)
        assert kind.name == name and kind.drawn_as in ("heatmap", "curve", "density")
        # a kind follows its evidence along some hyperparameters, or has none and refuses to (robust regression, a
        # local prior)
        assert (kind.path_parameters or name in ("robust_regression", "robust_density")
                or "-local-" in kind.name)
        assert isinstance(api.run(validate_config(CONFIGS[name]())), kind.result_type)
        for method in wanted:
            assert callable(getattr(kind, method)), (name, method)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_kinds_node_count_is_the_size_of_its_field(name):
    cfg = validate_config(CONFIGS[name]())
    gen = api.iterate(cfg)
    start = next(gen)
    gen.close()
    field = start.h if name.startswith("regression") or name == "robust_regression" else start.field
    assert problems.kind_of(cfg).nodes(cfg) == np.asarray(field).size


def test_the_density_kind_solves_what_the_density_problem_solves():
    cfg = validate_config(CONFIGS["density"]())
    via_kind = api.run(cfg)
    direct = density.solve(density.build_density(cfg))
    assert len(via_kind.history) == len(direct.history) > 1
    np.testing.assert_array_equal(via_kind.last.P, direct.last.P)
    assert problems.DENSITY.exact(cfg) is None and not problems.DENSITY.has_exact
    assert problems.DENSITY.is_sparse_heavy(validate_config({**CONFIGS["density"](), "prior": {"field": "P"}}))


def test_the_regression_kind_solves_what_the_regression_model_solves_and_its_exact_is_the_closed_form():
    cfg = validate_config(CONFIGS["regression"]())
    via_kind = api.run(cfg)
    direct = regression.solve(cfg)
    np.testing.assert_array_equal(via_kind.last.h, direct.last.h)
    exact = problems.REGRESSION.exact(cfg)
    closed = regression.exact_posterior(cfg)
    np.testing.assert_array_equal(exact["mean"], closed["mean"])
    assert not problems.REGRESSION.is_sparse_heavy(cfg) and problems.REGRESSION.has_exact


def test_callers_that_ask_the_kind_do_not_compare_the_models_name():
    """The façade and the dashboard's runner choose code by the kind (issue 26: "regression" compared only where
    a document is read)."""
    paths = ["bftcore/api.py", "app/runner.py", "app/session.py", "bftcore/studies/learning.py",
             "bftcore/studies/workflows.py", "bftcore/models/density_1d.py", "bftcore/models/problems.py",
             "bftcore/models/density.py",
             "bftcore/models/local_regression.py"]
    paths += [str(p.relative_to(ROOT)) for p in (ROOT / "app" / "views").glob("*.py")]
    for path in paths:
        text = (ROOT / path).read_text()
        assert not re.search(r"""\[["']model["']\]\s*[!=]=""", text), path
        assert not re.search(r"""[!=]=\s*["'](regression|density)["']""", text), path
