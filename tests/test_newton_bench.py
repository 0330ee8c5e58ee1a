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
        _, e_cg, cg, banded = bench.newton_run(cfg)
        _, e_direct, counts, none = bench.newton_run(cfg, bench.SparseDirectMatrix)
    assert e_cg == pytest.approx(doc["energy"], rel=1e-12)
    assert e_direct == pytest.approx(e_cg, rel=1e-8)
    assert len(cg) + banded > 0 and all(k >= 0 for k in cg)
    assert counts and set(counts) == {0} and none == 0


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
    for size, rows in (("10x15", 2), ("16x16", 4), ("32x32", 4)):  # l2 and l6; the paper mesh in the grid family
        assert sum(line.split()[:1] == [size] for line in out.splitlines()) == rows
    assert "grid family:" in out and "refined family: random_problem(32)" in out
    assert "solver = L-BFGS-B / to goal" in out and "to goal" in out.splitlines()[-4]
    assert "growth exponents" in out and "  l2: bftcore" in out and "  l6: bftcore" in out
    assert "  refined l2: bftcore" in out and "  refined l6: bftcore" in out


@pytest.mark.parametrize("prior", ["l2", "l6"])
def test_refined_family_is_one_problem_on_finer_grids(prior):
    """The refined family keeps the data, the domain and the priors of its base problem and changes only the grid;
    on the base's own grid it is the grid family's problem."""
    base = bench.bench_config((32, 32), prior, "grid")
    for n in (16, 32, 64):
        cfg = bench.bench_config((n, n + 1), prior, "refined")
        assert cfg["data"] == base["data"] and cfg["prior"] == base["prior"]
        assert cfg["grid"]["x"] == {**base["grid"]["x"], "n": n}
        assert cfg["grid"]["y"] == {**base["grid"]["y"], "n": n + 1}
    assert bench.bench_config((32, 32), prior, "refined") == base
    other = bench.bench_config((20, 20), prior, "refined", base=16)
    assert other["grid"]["x"]["max"] == 16 and len(other["data"]) == 200
    with pytest.raises(ValueError, match="family"):
        bench.bench_config((16, 16), prior, "finer")


@pytest.mark.parametrize("prior", ["l2", "l6"])
def test_refined_family_converges_under_refinement(prior):
    """What makes the refined family a refinement: lambda and the orders mean the same in data units on every grid,
    so the fitted density converges as the grid is refined (grids 32, 63 and 125 share every 2nd and 4th node).  With
    a prior in grid units the finer fits would move away from the coarse one instead.  (l2 in 2-D converges slowly:
    its field is logarithmic at a point datum.)"""
    P = {}
    with using(UNLIMITED):
        for n, step in ((32, 1), (63, 2), (125, 4)):
            P[n] = np.array(api.fit(bench.bench_config((n, n), prior, "refined"))["P"])[::step, ::step]
    d1, d2 = np.abs(P[63] - P[32]).max(), np.abs(P[125] - P[63]).max()
    assert d2 < 0.8 * d1
    assert d2 < 0.25 * P[125].max()


def test_bench_cli_json():
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["bench", "--sizes", "10x15,12", "--repeats", "1", "--json"]) == 0
    doc = json.loads(buf.getvalue())
    cases = [("10x15", "l2"), ("10x15", "l6"), ("12x12", "l2"), ("12x12", "l6")]
    assert [(r["family"], r["size"], r["prior"]) for r in doc["rows"]] == [("grid", *c) for c in cases] + \
        [("refined", *c) for c in cases]
    assert doc["families"] == ["grid", "refined"] and doc["base"] == bench.REFINED_BASE
    for r in doc["rows"]:
        assert r["floor_energy"] == pytest.approx(r["energy"], rel=1e-8)
        assert r["lbfgs_reached"]
        assert r["solver_ratio"] == pytest.approx(r["lbfgs_s"] / r["newton_goal_s"])
        assert 0 < r["newton_goal_steps"] <= r["iterations"]
    none = {"bftcore": None, "newton_goal": None, "lbfgs": None}
    assert doc["exponents"] == {"l2": none, "l6": none} and doc["exponents_refined"] == {"l2": none, "l6": none}


def test_bench_exponents_per_family():
    rows = [{"family": f, "size": f"{n}x{n}", "nodes": n * n, "prior": "l6", "bftcore_s": c * n ** (2 * k),
             "newton_goal_s": c * n ** (2 * k), "lbfgs_s": 1.0}
            for f, c, k in (("grid", 1e-6, 1.5), ("refined", 3e-6, 1.0)) for n in (16, 32, 64)]
    rows.append({**rows[0], "size": "10x15", "nodes": 150, "bftcore_s": 1e3})  # the paper mesh: left out
    assert bench.exponents(rows)["l6"]["bftcore"] == pytest.approx(1.5)
    assert bench.exponents(rows, "refined")["l6"]["newton_goal"] == pytest.approx(1.0)
    assert bench.exponents(rows, "refined")["l6"]["lbfgs"] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("argv", [["bench", "--repeats", "0"], ["bench", "--sizes", "2"], ["bench", "--sizes", ","],
                                  ["bench", "--lbfgs-max", "-1"], ["bench", "--sizes", "ten"],
                                  ["bench", "--family", "finer"], ["bench", "--family", ","],
                                  ["bench", "--base", "3"], ["bench", "--base", "4096"], ["bench", "--base", "x"],
                                  ["bench", "--quick", "--sizes", "0"], ["bench", "--quick", "--sizes", "64"]])
def test_bench_cli_refuses_bad_arguments(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert "error" in capsys.readouterr().err


def test_newton_run_from_a_given_start():
    """``newton_run(start=...)`` (scripts/newton_starts.py): started near the solution, the same iteration reaches
    the same minimum in fewer steps than from the kernel start; a start far from it still reaches it."""
    cfg = bench.bench_config((24, 24), "l6")
    with using(UNLIMITED):
        L_star = api.run(cfg).field
        _, e_kernel, cg_kernel, b_kernel = bench.newton_run(cfg)
        _, e_near, cg_near, b_near = bench.newton_run(cfg, start=lambda p, L0: L_star + 1e-4 * (L0 - L_star))
        _, e_far, _, _ = bench.newton_run(cfg, start=lambda p, L0: L0 + 3.0 * np.sin(np.arange(L0.shape[1])))
    assert e_near == pytest.approx(e_kernel, rel=1e-10) and e_far == pytest.approx(e_kernel, rel=1e-8)
    assert len(cg_near) + b_near < len(cg_kernel) + b_kernel


def _script(name: str):
    """The module of ``scripts/<name>.py``."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _newton_starts_module():
    return _script("newton_starts")


def test_newton_starts_script_prints_its_table(capsys):
    mod = _newton_starts_module()
    mod.main(["--sizes", "12", "--repeats", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["size", "start", "steps"] and len(lines) == 1 + len(mod.starts(np.zeros(1)))
    energies = {float(line.split()[-3]) for line in lines[1:]}
    assert max(energies) - min(energies) <= 1e-8 * max(abs(e) for e in energies)
    with pytest.raises(SystemExit):
        mod.main(["--repeats", "0"])


def test_coarse_start_reaches_the_same_minimum():
    """A multilevel start, the same document solved on a coarser grid and prolonged, reaches the kernel start's
    minimum, and the coarse solve's seconds are recorded."""
    mod = _newton_starts_module()
    cfg = bench.bench_config((32, 32), "l6")
    with using(UNLIMITED):
        L_star = api.run(cfg).field
        coarse: dict = {}
        starts = mod.starts(L_star, cfg, coarse)
        assert {"coarse 16", "coarse 8"} <= set(starts)
        _, e_kernel, _, _ = bench.newton_run(cfg)
        _, e_coarse, _, _ = bench.newton_run(cfg, start=starts["coarse 16"])
    assert e_coarse == pytest.approx(e_kernel, rel=1e-8)
    assert len(coarse["coarse 16"]) == 1 and coarse["coarse 16"][0] > 0


def test_bench_coarse_start_prints_kernel_and_coarse_fits_of_the_same_minimum(capsys):
    mod = _script("bench_coarse_start")
    mod.main(["--sizes", "64", "--family", "grid", "--prior", "l6", "--repeats", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:4] == ["family", "size", "prior", "kernel"] and len(lines) == 3
    row = lines[2].split()
    assert row[:3] == ["grid", "64x64", "l6"]
    assert int(row[6]) < int(row[4])  # fewer fine Newton steps from the coarse start (12 against 17, measured)
    assert float(row[-1]) == pytest.approx(float(row[-2]), rel=1e-10)
    for bad in (["--sizes", "8"], ["--family", "coarse"], ["--repeats", "0"], ["--sizes", "a"]):
        with pytest.raises(SystemExit):
            mod.main(bad)


def test_batch_size_fills_the_batch_time():
    assert bench.batch_size(bench.BATCH_S * 2) == 1
    assert bench.batch_size(bench.BATCH_S / 10) == 10
    assert bench.batch_size(bench.BATCH_S / 9.5) == 10  # rounded up: a batch lasts at least BATCH_S
    assert bench.batch_size(0.0) == bench.MAX_BATCH


def test_bench_times_a_fast_case_as_the_mean_of_a_batch(monkeypatch):
    """A case whose warm-up fit takes 1-3 ms is timed in batches: each of the repeats calls the fit batch_size
    times and records the mean (the fit's own calls counted), and the row says how many."""
    calls = {"fit": 0, "goal": 0, "lbfgs": 0}
    fit, to_goal, lbfgs = bench.fit, bench.newton_to_goal, bench.lbfgs_time

    def counted(name, f):
        def g(*a, **k):
            calls[name] += 1
            return f(*a, **k)
        return g

    monkeypatch.setattr(bench, "fit", counted("fit", fit))
    monkeypatch.setattr(bench, "newton_to_goal", counted("goal", to_goal))
    monkeypatch.setattr(bench, "lbfgs_time", counted("lbfgs", lbfgs))
    monkeypatch.setattr(bench, "BATCH_S", 0.2)  # several calls of a 12 x 12 fit on any machine
    (row,) = bench.run(sizes=["12"], priors=("l2",), repeats=2, floor_max_nodes=0)
    b = row["batch"]
    assert b["fit"] > 1 and b["to_goal"] > 1 and b["lbfgs"] > 1
    assert calls == {"fit": 1 + 2 * b["fit"], "goal": 1 + 2 * b["to_goal"], "lbfgs": 1 + 2 * b["lbfgs"]}
    assert row["lbfgs_reached"] and row["bftcore_s"] > 0 and row["newton_goal_s"] > 0  # no assertion on time


def test_column_newton_script_measures_both_starts_and_agrees_with_its_dense_newton(capsys):
    """scripts/column_newton.py: the column's fit from both starts reaches one minimum, the uniform start in fewer
    steps (18 against 8 at 64 nodes, measured), and the script's own dense Newton, written independently of the
    package's energy objects, reaches the same energy (to the far side's rounding, ln P at -585)."""
    mod = _script("column_newton")
    mod.main(["--sizes", "64", "--points", "1"])
    lines = capsys.readouterr().out.splitlines()
    fit_row = lines[2].split()
    assert fit_row[0] == "64" and int(fit_row[2]) < int(fit_row[1])
    assert float(fit_row[3]) == pytest.approx(float(fit_row[4]), rel=1e-9)
    dense_row = lines[-1].split()
    assert dense_row[:2] == ["1", "64"]
    assert float(dense_row[3]) == pytest.approx(float(fit_row[4]), rel=1e-8)
    assert float(dense_row[4]) == pytest.approx(float(fit_row[5]), abs=1.0)
    for bad in (["--sizes", "8"], ["--points", "0"], ["--points", "a"]):
        with pytest.raises(SystemExit):
            mod.main(bad)


@pytest.mark.parametrize("bad", [["--concurrent", "17"], ["--concurrent", "-1"], ["--concurrent", "a"],
                                 ["--repeats", "0"]])
def test_bench_sweeps_refuses_bad_options(bad, capsys):
    """scripts/bench_sweeps.py refuses a count of curves at once outside 0-16 and fewer than one repeat, before it
    starts a cluster, saying what it takes."""
    with pytest.raises(SystemExit):
        _script("bench_sweeps").main(bad)
    assert "--concurrent" in capsys.readouterr().err


def test_islands_are_runs_of_support_without_data():
    """The island count of scripts/column_newton.py on a hand-made periodic column: the data's own run is not an
    island, a run without data is, and a run across the wrap-around counts once."""
    mod = _script("column_newton")
    L = np.full(20, -100.0)
    d = np.zeros(20)
    L[8:11], d[9] = 0.0, 1.0  # the data's run
    assert mod.islands(L, d) == 0
    L[14:16] = -10.0  # an island
    assert mod.islands(L, d) == 1
    L[[19, 0, 1]] = -20.0  # an island across the wrap
    assert mod.islands(L, d) == 2
    assert mod.islands(np.zeros(20), d) == 0  # all support
