"""The Newton benchmark of issue 31 (bftcore.studies.bench, ``python -m bftcore bench``): its sparse-direct floor
solves the Newton system exactly and reaches the same minimum as bftcore's preconditioned-CG Newton; its
L-BFGS-B baseline reaches the same energy; the CLI prints the table and the exponents and refuses bad arguments.
No assertion on time."""
from __future__ import annotations

import json

import numpy as np
import pytest

from bftcore import api
from bftcore.__main__ import main
from bftcore.foundations.limits import UNLIMITED, using
from bftcore.studies import bench


@pytest.mark.parametrize("size", ["10x15", "12", "9x14", "24"])
@pytest.mark.parametrize("prior", ["l2", "l6"])
def test_sparse_direct_floor_reaches_the_cg_newton_minimum(size, prior):
    cfg = bench.bench_config(bench.parse_size(size), prior)
    with using(UNLIMITED):
        doc = api.fit(cfg)
        _, e_cg, cg = bench.newton_run(cfg)
        _, e_direct, counts = bench.newton_run(cfg, bench.SparseDirectMatrix)
    assert e_cg == pytest.approx(doc["energy"], rel=1e-12)
    assert e_direct == pytest.approx(e_cg, rel=1e-8)
    assert len(cg) > 0 and all(k >= 0 for k in cg)
    assert counts and set(counts) == {0}


@pytest.mark.parametrize("prior", ["l2", "l6"])
def test_sparse_direct_step_solves_the_newton_system(prior):
    """The floor's step solves ``J^T M J d = -G`` (the Hessian action of (160)) and lies in the gauge
    ``sum_y P hy d = 0``; checked against a dense solve of the same system on a small grid."""
    cfg = bench.bench_config((6, 8), prior)
    problem = api.build_density(cfg)
    E = problem.energy
    L = E.normalise(api.initial_field(problem))
    for _ in range(3):  # a few Newton steps in, where Lambda_X >= 0 (no Gauss-Newton clipping)
        pt = E.at(L)
        d, _, _ = bench.SparseDirectMatrix(E, 0.0, 10).direction(pt)
        L = E.normalise(L + d)
    pt = E.at(L)
    if np.any(pt.lagrange_multiplier < 0):
        pytest.skip("Lambda_X < 0 here: the floor's step is the Gauss-Newton one")
    d, _, _ = bench.SparseDirectMatrix(E, 0.0, 10).direction(pt)
    n = E.grid.size
    H = np.column_stack([pt.hessp(e.reshape(E.grid.shape)).ravel() for e in np.eye(n)])
    assert np.allclose(H, H.T, atol=1e-10 * np.abs(H).max())
    g = pt.gradient.ravel()
    d_dense = np.linalg.lstsq(H, -g, rcond=1e-12)[0].reshape(E.grid.shape)
    V = pt.P * E.grid.hy
    d_dense -= np.sum(V * d_dense, axis=1, keepdims=True)  # the same gauge (J's null space: per-x constants)
    assert np.allclose(np.sum(V * d, axis=1), 0.0, atol=1e-10)
    assert np.allclose(d, d_dense, rtol=1e-7, atol=1e-9 * np.abs(d_dense).max())
    assert np.allclose(pt.hessp(d), -pt.gradient, atol=1e-9 * np.abs(pt.gradient).max())


def test_lbfgs_baseline_reaches_the_newton_energy():
    cfg = bench.bench_config((10, 15), "l2")
    with using(UNLIMITED):
        doc = api.fit(cfg)
    goal = doc["energy"] + 1e-8 * abs(doc["energy"])
    _, energy, nfev = bench.lbfgs_time(cfg, goal, max_seconds=60)
    assert energy <= goal and nfev > 0


@pytest.mark.parametrize("size,prior", [("10x15", "l2"), ("16", "l6")])
def test_newton_to_goal_stops_at_the_first_iterate_of_the_fit_that_reaches_it(size, prior):
    """The solver column times the fit's own iteration: the energies it passes are the fit's history, and it stops at
    the first of them at or below the goal (which the fit's final energy reaches by construction)."""
    cfg = bench.bench_config(bench.parse_size(size), prior)
    with using(UNLIMITED):
        doc = api.fit(cfg)
        energies = [r["energy"] for r in doc["history"]]
        goal = energies[-1] + 1e-8 * abs(energies[-1])
        seconds, energy, steps = bench.newton_to_goal(cfg, goal)
    first = next(i for i, e in enumerate(energies) if e <= goal)
    assert steps == first and energy == pytest.approx(energies[first], rel=1e-13)
    assert 0 < steps < len(energies) - 1  # the goal is reached before the fit's own stop on these problems
    assert seconds > 0


def test_growth_exponent_of_a_power_law():
    nodes = [100, 400, 1600]
    assert bench.growth_exponent(nodes, [2e-3 * n ** 1.3 for n in nodes]) == pytest.approx(1.3)
    assert np.isnan(bench.growth_exponent([100], [1.0]))


@pytest.mark.parametrize("text,expected", [("10x15", (10, 15)), ("64", (64, 64)), ("16X32", (16, 32))])
def test_parse_size(text, expected):
    assert bench.parse_size(text) == expected


@pytest.mark.parametrize("text", ["3", "abc", "10x", "1x2x3", "1000"])
def test_parse_size_refuses(text):
    with pytest.raises(ValueError, match="size"):
        bench.parse_size(text)


def test_bench_cli_quick_prints_table_and_exponents(capsys):
    assert main(["bench", "--quick"]) == 0
    out = capsys.readouterr().out
    for size in ("10x15", "16x16", "32x32"):
        assert sum(line.split()[:1] == [size] for line in out.splitlines()) == 2  # l2 and l6
    assert "solver = L-BFGS-B / to goal" in out and "to goal" in out.splitlines()[-2]
    assert "growth exponents" in out and "l2: bftcore" in out and "l6: bftcore" in out


def test_bench_cli_json():
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["bench", "--sizes", "10x15,12", "--repeats", "1", "--json"]) == 0
    doc = json.loads(buf.getvalue())
    assert [(r["size"], r["prior"]) for r in doc["rows"]] == [("10x15", "l2"), ("10x15", "l6"), ("12x12", "l2"),
                                                               ("12x12", "l6")]
    for r in doc["rows"]:
        assert r["floor_energy"] == pytest.approx(r["energy"], rel=1e-8)
        assert r["lbfgs_reached"]
        assert r["solver_ratio"] == pytest.approx(r["lbfgs_s"] / r["newton_goal_s"])
        assert 0 < r["newton_goal_steps"] <= r["iterations"]
    none = {"bftcore": None, "newton_goal": None, "lbfgs": None}
    assert doc["exponents"] == {"l2": none, "l6": none}


@pytest.mark.parametrize("argv", [["bench", "--repeats", "0"], ["bench", "--sizes", "2"], ["bench", "--sizes", ","],
                                  ["bench", "--lbfgs-max", "-1"], ["bench", "--sizes", "ten"]])
def test_bench_cli_refuses_bad_arguments(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert "error" in capsys.readouterr().err
