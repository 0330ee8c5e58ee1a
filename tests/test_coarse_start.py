"""The multilevel start, ``solver.init: "coarse"`` (issue 31): the same document solved on a coarser grid, prolonged
by cubic splines (:func:`bftcore.foundations.grid.prolong`), is a start that reaches the kernel start's minimum in
fewer fine steps; the gate refuses it where there is no coarser version of the document."""
import copy

import numpy as np
import pytest

from bftcore import api
from bftcore.foundations.config import ConfigError, validate_config
from bftcore.foundations.grid import prolong
from bftcore.foundations.limits import UNLIMITED, using
from bftcore.models import density
from bftcore.models.presets import figure_config
from bftcore.studies.bench import bench_config


def smooth(nx, ny, bx, by):
    """A smooth field that meets each axis's boundary: periodic along a periodic axis (nodes at k/n of the period),
    zero slope at the ends of a Neumann one, neither at the ends of a free one."""
    def along(n, b):
        if b == "periodic":
            s = np.arange(n) / n
            return 1.0 + 0.5 * np.sin(2 * np.pi * s)
        t = np.linspace(0.0, 1.0, n)
        return np.cos(np.pi * t) if b == "neumann" else np.exp(t) + t ** 3
    return along(nx, bx)[:, None] * along(ny, by)[None, :]


@pytest.mark.parametrize("bx", ["neumann", "periodic", "free"])
@pytest.mark.parametrize("by", ["neumann", "periodic", "free"])
def test_prolong_carries_a_smooth_field_onto_a_finer_grid_of_each_boundary(bx, by):
    fine = prolong(smooth(16, 16, bx, by), (64, 64), (bx, by))
    assert fine.shape == (64, 64)
    np.testing.assert_allclose(fine, smooth(64, 64, bx, by), atol=3e-4)
    # the same grid is a copy, and an axis of one node is repeated
    np.testing.assert_allclose(prolong(smooth(16, 16, bx, by), (16, 16), (bx, by)), smooth(16, 16, bx, by), atol=0)
    column = prolong(smooth(1, 16, bx, by), (1, 64), (bx, by))
    np.testing.assert_allclose(prolong(smooth(1, 16, bx, by), (5, 64), (bx, by)), np.repeat(column, 5, axis=0),
                               atol=1e-12)


def test_prolong_keeps_the_boundary_it_is_given():
    """A field periodic along y prolonged as if y were not periodic is off near the ends: the condition matters."""
    f = smooth(16, 16, "neumann", "periodic")
    right = prolong(f, (64, 64), ("neumann", "periodic"))
    wrong = prolong(f, (64, 64), ("neumann", "neumann"))
    exact = smooth(64, 64, "neumann", "periodic")
    assert np.max(np.abs(right - exact)) < 3e-4 < 1e-3 < np.max(np.abs(wrong - exact))


def test_the_coarse_grid_is_a_quarter_of_each_long_axis():
    assert density.coarse_shape((128, 128)) == (32, 32)
    assert density.coarse_shape((256, 100)) == (64, 25)
    assert density.coarse_shape((63, 64)) == (63, 16)
    assert density.coarse_shape((1, 257)) == (1, 65)
    assert density.coarse_shape((10, 15)) == (10, 15)


@pytest.mark.parametrize("family, prior", [("grid", "l6"), ("refined", "l6"), ("grid", "l2")])
def test_a_coarse_start_reaches_the_kernel_starts_minimum_in_fewer_steps(family, prior):
    """The same minimum; fewer fine steps with the stiff prior (17 -> 12 and 15 -> 10 measured), no more with l2
    (8 and 8: l2 converges fast from the kernel start already)."""
    cfg = bench_config((64, 64), prior, family)
    with using(UNLIMITED):
        kernel = api.run(cfg)
        coarse = api.run({**cfg, "solver": {**cfg["solver"], "init": "coarse"}})
    assert coarse.last.energy == pytest.approx(kernel.last.energy, rel=1e-10)
    np.testing.assert_allclose(coarse.field, kernel.field, rtol=0, atol=1e-5 * np.max(np.abs(kernel.field)))
    assert len(coarse.history) < len(kernel.history) if prior == "l6" else len(coarse.history) <= len(kernel.history)


def test_the_coarse_start_is_a_solution_on_the_coarse_grid_carried_over():
    """The start itself: the coarse document's own fit (nested: from its own coarse start), prolonged and
    normalised; its energy on the fine grid is far below the kernel start's."""
    cfg = validate_config({**bench_config((64, 64), "l6"), "solver": {"method": "newton", "init": "coarse"}})
    with using(UNLIMITED):
        problem = density.build_density(cfg)
        start = density.initial_field(problem)
        small = copy.deepcopy(dict(cfg))
        small["grid"]["x"]["n"] = small["grid"]["y"]["n"] = 16
        L16 = api.run(small).field
        kernel = density.initial_field(problem, "kernel")
    expected = density.normalise_log(prolong(L16, (64, 64), ("neumann", "periodic")), problem.grid.hy)
    np.testing.assert_allclose(start, expected, rtol=0, atol=1e-9)
    np.testing.assert_allclose(np.exp(start).sum(axis=1) * problem.grid.hy, 1.0, rtol=1e-12)
    E = problem.energy
    assert E.at(start).value < E.at(kernel).value


def test_field_p_takes_a_coarse_start_too():
    cfg = bench_config((64, 64), "l2")
    cfg["prior"]["field"] = "P"
    cfg["solver"].update(max_iter=400)
    with using(UNLIMITED):
        kernel = api.run(cfg)
        coarse = api.run({**cfg, "solver": {**cfg["solver"], "init": "coarse"}})
    assert coarse.last.energy == pytest.approx(kernel.last.energy, rel=1e-8)
    assert np.all(coarse.field >= 0)


def test_on_a_small_grid_the_coarse_start_is_the_kernel_start():
    cfg = figure_config("fig16")
    kernel = api.fit(cfg)
    coarse = api.fit({**cfg, "solver": {**cfg.get("solver", {}), "init": "coarse"}})
    assert coarse["iterations"] == kernel["iterations"]
    assert coarse["energy"] == kernel["energy"]
    assert coarse["L"] == kernel["L"]


@pytest.mark.parametrize("a, c", [(1e3, 1e3), (1e-3, 1e-3), (10.0, 0.5)])
def test_a_coarse_start_in_other_units_gives_the_same_fit_in_those_units(a, c):
    """x -> a x + b, y -> c y + d with the prior carried along (l6: lambda c^5 / a, lambda_x / lambda_y =
    (a / c)^6, so that every term of the energy keeps its value; the masses follow the grid): ln p(y|x) is the
    reference's minus ln c, and the coarse start in the new units ends where the kernel start does."""
    cfg = bench_config((64, 64), "l6")
    b, d = -7.0, 5.0
    moved = copy.deepcopy(cfg)
    moved["grid"]["x"].update(min=a * 1 + b, max=a * 64 + b)
    moved["grid"]["y"].update(min=c * 1 + d, max=c * 64 + d)
    moved["data"] = [[a * x + b, c * y + d] for x, y in cfg["data"]]
    for doc in (cfg, moved):
        doc["solver"].pop("init_mass2")  # its default follows the grid
        doc["solver"]["init"] = "coarse"
    moved["prior"].update({"lambda": cfg["prior"]["lambda"] * c ** 5 / a, "lambda_x": (a / c) ** 6, "lambda_y": 1.0})
    with using(UNLIMITED):
        ref, fit = api.run(cfg), api.run(moved)
        kernel_moved = api.run({**moved, "solver": {**moved["solver"], "init": "kernel"}})
    np.testing.assert_allclose(fit.field, ref.field - np.log(c), rtol=0, atol=1e-6)
    np.testing.assert_allclose(fit.field, kernel_moved.field, rtol=0, atol=1e-5 * np.max(np.abs(fit.field)))


@pytest.mark.parametrize("doc, words", [
    ({"model": "regression", "templates": [{"kind": "constant", "value": 0.0}]}, ["coarse", "regression", "kernel"]),
    ({"grid": {"x": {"min": 0, "max": 0, "n": 1, "boundary": "neumann"},
               "y": {"min": 0, "max": 10, "n": 80, "boundary": "neumann"}},
      "data": [[0, 3], [0, 4]]}, ["coarse", "density_1d", "kernel"]),
    ({"templates": [{"kind": "array", "values": [[0.0] * 15] * 10}]}, ["coarse", "array template", "kernel"]),
    ({"prior": {"l2": 1.0, "potential": {"name": "cup", "b": 0.5}}}, ["coarse", "robust", "kernel"]),
    ({"grid": {"x": {"min": 0, "max": 1, "n": 12, "boundary": "neumann"},
               "y": {"min": 0, "max": 2, "n": 12, "boundary": "neumann"}},
      "data": [[0.2, 0.5], [0.8, 1.5]], "prior": {"l2": 1.0, "cuts": [0.52]}}, ["coarse", "local", "kernel"]),
])
def test_the_gate_refuses_a_coarse_start_where_there_is_no_coarser_document(doc, words):
    base = {"model": "density", "data": [[2, 3], [5, 8]], "solver": {"init": "coarse"}}
    with pytest.raises(ConfigError) as err:
        validate_config({**base, **doc, "solver": {"init": "coarse"}})
    for w in words:
        assert w in str(err.value)
    validate_config({**base, **doc, "solver": {"init": "kernel"}})  # the same document with the kernel start
