"""The exact Newton step of E_L on small grids (bftcore.models.banded_newton): the band is the Hessian (160) that
CG's matrix-free action applies, the step solves Newton's system, it declines where the Hessian is not positive
definite on the tangent space, and fits that take it end where the CG route ends."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.linalg import lapack

from bftcore import api
from bftcore.foundations.grid import Axis, Grid
from bftcore.foundations.operators import PriorOperator
from bftcore.foundations.solvers import iterate
from bftcore.models import banded_newton, presets
from bftcore.models.banded_newton import BandedNewton, BandedRun, x_order
from bftcore.models.density import LogDensityEnergy, Prior, normalise_log
from bftcore.models.evidence import _y_basis, tangent_hessian_dense
from bftcore.models.robust import PotentialLogDensityEnergy
from bftcore.studies.bench import bench_config


def energy_on(nx, ny, bx, by, orders, lam, lx, ly, rng, counts=6):
    grid = Grid(Axis(0.0, 2.0 * nx, nx, bx), Axis(-1.0, 0.5 * ny, ny, by))
    K = PriorOperator(grid, lx, ly, **orders)
    N = np.zeros(grid.shape)
    np.add.at(N, (rng.integers(0, nx, counts), rng.integers(0, ny, counts)), 1.0)
    return LogDensityEnergy(grid, N, Prior(K, lam))


def dense_band(b: BandedNewton, abT: np.ndarray) -> np.ndarray:
    """The symmetric matrix of the lower banded storage, back in the grid's x order."""
    n, u = abT.shape[0], abT.shape[1] - 1
    A = np.zeros((n, n))
    for k in range(u + 1):
        i = np.arange(n - k)
        A[i + k, i] = abT[i, k]
        A[i, i + k] = abT[i, k]
    idx = (b.order[:, None] * b.ny + np.arange(b.ny)).ravel()  # band position -> grid node
    out = np.empty_like(A)
    out[np.ix_(idx, idx)] = A
    return out


def hessian_columns(point, shape) -> np.ndarray:
    n = shape[0] * shape[1]
    return np.column_stack([point.hessp(e.reshape(shape)).ravel() for e in np.eye(n)])


def tangent_basis(nx, ny) -> np.ndarray:
    """Orthonormal basis of the fields with zero sum over y at every x (the tangent space of the normalisation)."""
    return np.kron(np.eye(nx), _y_basis(ny)) if ny > 1 else np.zeros((nx, 0))


problems = st.tuples(
    st.integers(1, 8), st.integers(2, 9),
    st.sampled_from(["periodic", "neumann", "free"]), st.sampled_from(["periodic", "neumann", "free"]),
    st.sampled_from([{"l2": 1.0}, {"l0": 0.3, "l2": 1.0}, {"l4": 1.0}, {"l6": 1.0}, {"l2": 0.5, "l6": 0.2}]),
    st.floats(0.05, 20.0), st.floats(0.2, 5.0), st.floats(0.2, 5.0), st.integers(0, 2 ** 31 - 1))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems)
def test_band_is_the_hessian_of_cg_and_the_step_solves_newtons_system(problem):
    """The band equals the matrix of ``point.hessp`` (the Hessian action CG uses, assembled column by column) plus
    ``c 1 1^T`` per x, and on the tangent space the Laplace samples' ``H_g``; where that is positive definite the
    step solves ``H d = -G`` with zero sum per x, and where the Hessian has a negative direction on the tangent
    space the step is declined."""
    nx, ny, bx, by, orders, lam, lx, ly, seed = problem
    rng = np.random.default_rng(seed)
    E = energy_on(nx, ny, bx, by, orders, lam, lx, ly, rng)
    b = BandedNewton.for_energy(E)
    assert b is not None  # every grid here is within the bounds
    pt = E.at(normalise_log(rng.normal(0.0, 1.5, E.grid.shape), E.grid.hy))
    H = hessian_columns(pt, E.grid.shape)
    abT = b.band(pt)
    Q = tangent_basis(nx, ny)
    tangent = np.linalg.eigvalsh(Q.T @ H @ Q)
    scale = float(np.max(np.abs(H)))
    if abT is None:  # only where the diagonal is not positive
        assert tangent[0] < 1e-9 * scale
        return
    A = dense_band(b, abT)
    const = np.kron(np.eye(nx), np.ones((ny, ny)))
    c = (A - H)[0, 0]
    assert c > 0
    assert np.allclose(A - H, c * const, rtol=0, atol=1e-12 * scale)  # c 1 1^T on each x block, nothing else
    # a third route: the Laplace samples' H_g (W^T H W, assembled from the sparse K) is the band on the tangent space
    Hg, U = tangent_hessian_dense(pt)
    W = np.kron(np.eye(nx), U)
    assert np.allclose(W.T @ A @ W, Hg, rtol=0, atol=1e-10 * scale)
    d = b(pt)
    if tangent[0] > 1e-6 * scale:
        assert d is not None
    if tangent[0] < -1e-6 * scale:
        assert d is None
    if d is not None:
        G = pt.gradient
        rounding = 1e-12 * scale * np.abs(d).max()
        assert np.linalg.norm(pt.hessp(d) + G) <= 1e-7 * np.linalg.norm(G) + rounding
        assert np.allclose(d.sum(axis=1), 0.0, atol=1e-9 * max(1.0, np.abs(d).max()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems, st.floats(0.0, 1.5))
def test_the_bordered_form_gives_the_projected_forms_step(problem, spread):
    """Where every Lagrange multiplier is >= 0, the bordered system (M's banded Cholesky and the nx x nx Schur
    complement of the constraints) gives the same Newton step as the projected form's band ``H + c 1 1^T`` (both
    with zero sum per x), and it solves ``H d = -G``; with a negative multiplier it declines (the projected form,
    or CG, takes the step)."""
    nx, ny, bx, by, orders, lam, lx, ly, seed = problem
    rng = np.random.default_rng(seed)
    E = energy_on(nx, ny, bx, by, orders, lam, lx, ly, rng, counts=8 * nx)
    b = BandedNewton.for_energy(E)
    pt = E.at(normalise_log(rng.normal(0.0, spread, E.grid.shape), E.grid.hy))
    bordered = b.factorise_bordered(pt)
    if np.min(pt.lagrange_multiplier) < 0:
        assert bordered is None
        return
    abT = b.band(pt)
    if bordered is None or abT is None:  # M singular to rounding (a column without data and no x coupling)
        return
    R, info = lapack.dpbtrf(abT.T, lower=1)
    assert info == 0
    projected = b.solve(("projected", R), pt)
    d = b.solve(bordered, pt)
    assert d is not None and projected is not None
    scale = max(1.0, float(np.max(np.abs(projected))))
    assert np.allclose(d, projected, rtol=0, atol=1e-7 * scale)
    G = pt.gradient
    assert np.linalg.norm(pt.hessp(d) + G) <= 1e-7 * np.linalg.norm(G) + 1e-10 * scale
    assert np.allclose(d.sum(axis=1), 0.0, atol=1e-9 * scale)


def test_the_bench_problem_takes_the_bordered_form_and_the_paper_mesh_the_projected():
    """random_problem(16) (data in every column) starts with every Lambda_i > 0, so its steps are bordered; the
    paper mesh has columns whose multiplier is negative, and keeps the projected form there."""
    for cfg, form in ((bench_config((16, 16), "l2"), "bordered"), (presets.figure_config("fig14"), "projected")):
        prob = api.build_density(cfg)
        E = prob.energy
        start = E.at(E.normalise(api.initial_field(prob)))
        assert (np.min(start.lagrange_multiplier) >= 0) == (form == "bordered")
        assert BandedNewton.for_energy(E).factorise(start)[0] == form


def test_interleaved_order_keeps_a_periodic_band_narrow():
    """0, n-1, 1, n-2, ...: neighbours on the ring are at most two places apart."""
    for n in range(3, 12):
        order = x_order(n, True)
        assert sorted(order) == list(range(n))
        pos = np.empty(n, int)
        pos[order] = np.arange(n)
        assert max(abs(pos[i] - pos[(i + 1) % n]) for i in range(n)) <= 2
    assert list(x_order(7, False)) == list(range(7))


def newton_records(prob) -> list:
    """The records of a Newton run of a built problem from its kernel start, with the configuration's stop."""
    so = prob.config["solver"]
    return list(iterate(prob.energy, api.initial_field(prob), method="newton", min_iter=so["min_iter"],
                        max_iter=so["max_iter"], tol=so["tol"]))


def fit_both_ways(monkeypatch, cfg):
    """(records with the banded step, records with CG only, banded steps taken)."""
    calls = []
    call = BandedRun.__call__

    def counted(self, point):
        d = call(self, point)
        calls.append(d is not None)
        return d
    monkeypatch.setattr(BandedRun, "__call__", counted)
    prob = api.build_density(cfg)
    banded = newton_records(prob)
    taken = sum(calls)
    with monkeypatch.context() as m:
        m.setattr(LogDensityEnergy, "newton_direct", lambda self: None)
        cg = newton_records(prob)
    return banded, cg, taken


def _free_y(cfg):
    cfg["grid"]["y"]["boundary"] = "free"
    return cfg


@pytest.mark.parametrize("name, make", [
    ("fig14 (periodic x, l2)", lambda: presets.figure_config("fig14")),
    ("fig16 (periodic x, l6)", lambda: presets.figure_config("fig16")),
    ("fig21 (Neumann x, 50 points)", lambda: presets.figure_config("fig21")),
    ("16 x 16 l2", lambda: bench_config((16, 16), "l2")),
    ("16 x 16 l6", lambda: bench_config((16, 16), "l6")),
    ("fig21 on a free y axis", lambda: _free_y(presets.figure_config("fig21"))),
])
def test_fits_end_where_the_cg_route_ends(monkeypatch, name, make):
    """The banded step changes the path, not the answer: the same energy (1e-12 relative) and field (1e-7), in
    no more Newton steps; and it was taken."""
    banded, cg, taken = fit_both_ways(monkeypatch, make())
    assert taken > 0
    assert banded[-1].converged and cg[-1].converged
    assert abs(banded[-1].energy - cg[-1].energy) <= 1e-12 * abs(cg[-1].energy)
    assert np.max(np.abs(banded[-1].field - cg[-1].field)) < 1e-7
    assert banded[-1].iteration <= cg[-1].iteration


def test_an_indefinite_hessian_goes_to_cg(monkeypatch):
    """Fig 16 (l6) from the kernel start: the Hessian is not positive definite on the tangent space at first, the
    step is declined there and CG's convexified step is taken, as before; the banded step takes over later."""
    cfg = presets.figure_config("fig16")
    prob = api.build_density(cfg)
    E = prob.energy
    start = E.at(E.normalise(api.initial_field(prob)))
    assert BandedNewton.for_energy(E)(start) is None
    banded, cg, taken = fit_both_ways(monkeypatch, cfg)
    assert banded[1].method == cg[1].method and banded[1].method.startswith("newton-convexified")
    assert taken > 0


def test_not_for_mixtures_other_priors_or_large_grids(monkeypatch):
    """A mixture of priors (a dense low-rank Hessian term), a subclass with its own prior Hessian and grids above
    the bounds keep CG."""
    mixture = api.build_density(presets.figure_config("fig23")).energy
    assert mixture.prior.m == 2 and mixture.newton_direct() is None
    fig14 = api.build_density(presets.figure_config("fig14"))
    potential = PotentialLogDensityEnergy(fig14.grid, fig14.N, fig14.K, 1.0)
    assert potential.newton_direct() is None
    assert fig14.energy.newton_direct() is not None
    assert api.build_density(bench_config((32, 32), "l2")).energy.newton_direct() is None
    rng = np.random.default_rng(0)
    thin = energy_on(1, 400, "neumann", "neumann", {"l2": 1.0}, 1.0, 1.0, 1.0, rng)  # u = 399: a full band
    assert BandedNewton.for_energy(thin) is None
    small = energy_on(1, 40, "neumann", "neumann", {"l2": 1.0}, 1.0, 1.0, 1.0, rng)
    assert BandedNewton.for_energy(small) is not None
    monkeypatch.setattr(banded_newton, "MAX_NODES", 39)
    banded_newton._banded_newton.cache_clear()
    try:
        assert BandedNewton.for_energy(energy_on(1, 40, "neumann", "neumann", {"l2": 1.0}, 1.0, 1.0, 1.0, rng)) is None
    finally:
        banded_newton._banded_newton.cache_clear()


def test_a_chord_step_follows_a_small_step_once():
    """After an exact step of at most CHORD_STEP the next step solves with that step's factor: ``H_prev d = -G`` at
    the new point (a descent direction), once; the step after it factorises again.  After a larger step, or with
    CHORD_STEP = 0, every step is exact."""
    prob = api.build_density(presets.figure_config("fig14"))
    E = prob.energy
    fields = [r.field for r in newton_records(prob)]
    banded = BandedNewton.for_energy(E)
    steps = [banded(E.at(f)) for f in fields[:-1]]
    small = [k for k, d in enumerate(steps) if np.max(np.abs(d)) <= banded_newton.CHORD_STEP]
    assert small and small[0] >= 1  # the start's step is large: the fixture reaches the chord phase
    run = banded.run()
    a, b = E.at(fields[small[0]]), E.at(fields[small[0] + 1])
    large = E.at(fields[small[0] - 1])
    assert np.array_equal(run(large), banded(large)) and run.chord_steps == 0  # after a large step: exact
    assert np.array_equal(run(a), banded(a)) and run.chord_steps == 0
    chord = run(b)
    assert run.chord_steps == 1
    assert not np.allclose(chord, banded(b), rtol=0, atol=0)  # not the exact step at b ...
    G = b.gradient
    assert np.linalg.norm(a.hessp(chord) + G) <= 1e-8 * np.linalg.norm(G)  # ... but the one of a's Hessian
    assert float(np.vdot(G, chord)) < 0
    assert np.array_equal(run(b), banded(b)) and run.chord_steps == 1  # once per factor


def test_fits_with_chord_steps_end_where_exact_steps_end(monkeypatch):
    """The chord steps change the last step or two, not the answer (1e-12 relative in E, 1e-7 in L), nor the step
    count, on the problems of the fit test above."""
    for cfg in (presets.figure_config("fig14"), presets.figure_config("fig21"), bench_config((16, 16), "l2")):
        prob = api.build_density(cfg)
        with_chord = newton_records(prob)
        with monkeypatch.context() as m:
            m.setattr(banded_newton, "CHORD_STEP", 0.0)
            exact = newton_records(prob)
        assert with_chord[-1].converged and exact[-1].converged
        assert abs(with_chord[-1].energy - exact[-1].energy) <= 1e-12 * abs(exact[-1].energy)
        assert np.max(np.abs(with_chord[-1].field - exact[-1].field)) < 1e-7
        assert with_chord[-1].iteration == exact[-1].iteration
        # the records say which steps were chord steps: each right after an exact step that moved L by <= CHORD_STEP
        chords = [k for k, r in enumerate(with_chord) if r.method == "newton-chord"]
        assert chords and not any(r.method == "newton-chord" for r in exact)
        assert all(with_chord[k - 1].method == "newton" and with_chord[k - 1].change <= banded_newton.CHORD_STEP
                   for k in chords)


@pytest.mark.parametrize("argv, says", [(["--sizes", "3x"], "not a comma-separated list of integers"),
                                         (["--sizes", "2"], "between 4 and 64"), (["--seeds", "a"], "--seeds"),
                                         (["--repeats", "0"], "whole number >= 1")])
def test_the_ab_script_refuses_bad_arguments(argv, says):
    """scripts/banded_newton_ab.py says what is wrong with an argument (argparse's exit 2), not a traceback."""
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parents[1] / "scripts" / "banded_newton_ab.py"
    out = subprocess.run([sys.executable, str(script), *argv], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr
