"""The shortcuts taken for speed, each against an independent route: the simplex projection against bisection on
its threshold, the closed-form line energy against full evaluations, the Green's-function face step of massive
relaxation against the KKT system built here, the dense inverse and the assembled K against dense algebra and
sparse Kronecker products, the records' error metrics against bftcore.foundations.metrics, the negative-curvature step
of Newton against the Hessian itself, and the strong Newton preconditioner against the Hessian and against
column-by-column solves."""
import copy

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp

from bftcore import api
from bftcore.foundations import metrics
from bftcore.foundations.grid import BOUNDARIES, Axis, Grid
from bftcore.foundations.operators import PriorOperator, axis_operator, laplacian_1d
from bftcore.foundations.solvers import _curvature_step, _pcg
from bftcore.models import active_set, presets
from bftcore.models.active_set import FaceCaches, LineEnergy, epsilon_active, massive_face_direction, project_simplex
from bftcore.models.density import SeparablePreconditioner
from bftcore.models.presets import random_problem


def bisection_projection(row: np.ndarray, hy: float) -> np.ndarray:
    """Projection of one row onto {p >= 0, sum p hy = 1} by bisection on the threshold theta of
    ``p = max(q - theta, 0)`` (q = row hy), independent of the sort-based formula."""
    q = row * hy
    lo, hi = q.min() - 1.0, q.max()
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.maximum(q - mid, 0).sum() > 1.0:
            lo = mid
        else:
            hi = mid
    return np.maximum(q - 0.5 * (lo + hi), 0) / hy


@pytest.mark.parametrize("seed", range(6))
def test_simplex_projection_matches_bisection(seed):
    rng = np.random.default_rng(seed)
    hy = [1.0, 0.5, 0.25][seed % 3]
    P = rng.normal(0.3, 0.5, (7, 11))
    if seed % 2:  # nearly feasible rows: the no-sort shortcut must give the same answer
        P = np.abs(P)
        P /= P.sum(axis=1, keepdims=True) * hy
    out = project_simplex(P, hy)
    ref = np.array([bisection_projection(r, hy) for r in P])
    np.testing.assert_allclose(out, ref, atol=1e-10)
    np.testing.assert_allclose(out.sum(axis=1) * hy, 1.0, atol=1e-13)
    assert out.min() >= 0


def p_mixture():
    c = presets.figure_config("fig15")
    c["templates"] = [{"kind": "paper_t1"}, {"kind": "paper_t2"}]
    c["weights"] = [0.3, 0.7]
    c["prior"]["lambda"] = 0.4
    return c


@pytest.mark.parametrize("make", [lambda: presets.figure_config("fig17"), p_mixture], ids=["one-prior", "mixture"])
def test_line_energy_equals_full_evaluation(make):
    problem = api.build_density(make())
    E = problem.energy
    base = api.initial_field(problem)
    rng = np.random.default_rng(1)
    d = rng.normal(size=base.shape)
    d -= d.mean(axis=1, keepdims=True)  # keeps the normalisation
    line = LineEnergy(E, base, d)
    assert np.isfinite(line.eta_max) and line.eta_max > 0
    for eta in np.linspace(0, line.eta_max, 7)[:-1]:
        full = E.at(base + eta * d).value
        assert line(eta) == pytest.approx(full, rel=1e-12, abs=1e-12)
        pt = line.point(eta, base + eta * d)  # K P taken from the line: same value and gradient
        np.testing.assert_allclose(pt.gradient, E.at(base + eta * d).gradient, rtol=1e-9, atol=1e-10)
    # beyond it the path is the projection (bent where nodes reach zero): the same value and point as in full
    for eta in line.eta_max * np.array([1.01, 1.5, 3.0]):
        P = project_simplex(base + eta * d, problem.grid.hy)
        full = E.at(P)
        assert line(eta) == pytest.approx(full.value, rel=1e-12, abs=1e-12)
        q, pt = line.accept(eta, lambda e: project_simplex(base + e * d, problem.grid.hy))
        np.testing.assert_array_equal(q, P)
        assert pt.value == pytest.approx(full.value, rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(pt.gradient, full.gradient, rtol=1e-9, atol=1e-10)


def dense_face_step(pt, active: np.ndarray, A: np.ndarray) -> np.ndarray:
    """The face step of field P at ``pt`` for the learning matrix ``A`` (dense, all nodes), with the nodes ``active``
    held at zero: the KKT system ``[A_FF B; B^T 0] [d; mu] = [-G_F; 0]`` (B the per-x normalisation) built densely
    and solved by numpy; the step on the whole grid, flattened."""
    grid = pt.energy.grid
    free = np.flatnonzero(~active.ravel())
    nf, nx, ny = free.size, grid.shape[0], grid.shape[1]
    kkt = np.zeros((nf + nx, nf + nx))
    kkt[:nf, :nf] = A[np.ix_(free, free)]
    kkt[np.arange(nf), nf + free // ny] = grid.hy
    kkt[nf + free // ny, np.arange(nf)] = grid.hy
    sol = np.linalg.solve(kkt, np.concatenate([-pt.gradient.ravel()[free], np.zeros(nx)]))
    ref = np.zeros(grid.size)
    ref[free] = sol[:nf]
    return ref


def test_green_face_step_equals_the_kkt_solution():
    """Massive relaxation's face step through (K + m^2 I)^{-1} equals the KKT system on the face, solved densely."""
    cfg = presets.figure_config("fig17")
    recs = list(api.iterate(cfg))
    problem = api.build_density(cfg)
    E, grid = problem.energy, problem.grid
    pt = E.at(recs[len(recs) // 4].P)
    active = epsilon_active(pt)
    assert active.any()  # the test is about a face with nodes held at zero
    mass2 = cfg["solver"]["mass2"]
    d = massive_face_direction(pt, active, mass2, FaceCaches())
    ref = dense_face_step(pt, active, problem.K.matrix.toarray() + mass2 * np.eye(grid.size))
    np.testing.assert_allclose(d.ravel(), ref, atol=1e-10 * np.abs(ref).max())
    np.testing.assert_allclose(d.sum(axis=1), 0, atol=1e-12)


@pytest.mark.parametrize("method", ["newton", "massive"])
def test_sparse_face_step_equals_the_kkt_solution_solved_densely(method):
    """Above 600 unknowns the face step of field P factorises its KKT matrix sparsely (SuperLU with a symmetric
    ordering, bftcore.foundations.linalg.SADDLE_LU): the same direction as the KKT system built here and solved
    densely, on a face with nodes held at zero."""
    cfg = presets.figure_config("fig17")
    cfg["grid"]["x"]["n"], cfg["grid"]["y"]["n"] = 32, 30  # 960 nodes: the sparse route
    cfg["solver"].update(method="newton", min_iter=1, max_iter=6)
    problem = api.build_density(cfg)
    E, grid = problem.energy, problem.grid
    recs = list(api.iterate(cfg))
    pt = E.at(recs[-1].P)
    active = epsilon_active(pt)
    assert active.any() and (~active).sum() + grid.shape[0] > 600  # a face with nodes at zero, the sparse route
    mass2 = 1.0
    d = active_set.free_set_direction(pt, active, method, mass2, FaceCaches())
    K = problem.K.matrix.toarray()
    if method == "massive":
        A = K + mass2 * np.eye(grid.size)
    else:  # the Hessian (181) of E_P: lambda cell K + N / P^2
        A = E.prior.lam * grid.cell * K + np.diag((E.N / np.where(pt.P > 0, pt.P, 1.0) ** 2).ravel())
    ref = dense_face_step(pt, active, A)
    np.testing.assert_allclose(d.ravel(), ref, atol=1e-9 * np.abs(ref).max())
    np.testing.assert_allclose(d.sum(axis=1), 0, atol=1e-10 * np.abs(ref).max())


@pytest.mark.parametrize("bx, by", [("periodic", "neumann"), ("neumann", "neumann"), ("periodic", "periodic")])
def test_dense_inverse_and_assembled_operator(bx, by):
    grid = Grid(Axis(0, 3, 7, bx), Axis(-1, 1, 9, by))
    K = PriorOperator(grid, 1.5, 0.7, l0=0.1, l2=0.5, l4=0.2, l6=0.05)
    ref = 1.5 * sp.kron(K.kx, sp.identity(9)) + 0.7 * sp.kron(sp.identity(7), K.ky)
    np.testing.assert_allclose(K.matrix.toarray(), ref.toarray(), atol=1e-12)
    inv = K.inverse_matrix(2.0, 0.3)
    np.testing.assert_allclose(inv @ (2.0 * ref.toarray() + 0.3 * np.eye(63)), np.eye(63), atol=1e-9)
    for n in (20, 300):  # short axes take dense powers, long ones sparse products: both equal dense algebra
        ax = Axis(0, 1, n, "neumann")
        D = laplacian_1d(ax).toarray()
        np.testing.assert_allclose(axis_operator(ax, l0=0.2, l2=1, l4=0.3, l6=0.1).toarray(),
                                   0.2 * np.eye(n) - D + 0.3 * D @ D - 0.1 * D @ D @ D, rtol=1e-12, atol=1e-6)


@pytest.mark.parametrize("name", ["fig15", "fig21", "fig23"])
def test_record_errors_equal_the_metrics(name):
    cfg = presets.figure_config(name)
    problem = api.build_density(cfg)
    for rec in list(api.iterate(cfg))[::5]:
        assert rec.train_error == pytest.approx(metrics.training_error(rec.L, problem.N), rel=1e-13)
        assert rec.test_error == pytest.approx(metrics.test_error(rec.L, problem.P_true, problem.grid), rel=1e-13)


def test_pcg_returns_a_direction_of_negative_curvature():
    H = np.diag([3.0, 2.0, -1.0, 1.0])
    g = np.array([1.0, -1.0, 0.5, 0.2])
    x, label, k, p = _pcg(g, lambda v: H @ v, lambda r: r, 1e-12, 50)
    assert label == "negative-curvature" and p is not None
    assert p @ H @ p < 0
    x, label, k, p = _pcg(g, lambda v: np.abs(H) @ v, lambda r: r, 1e-12, 50)  # positive definite: solved
    assert label == "newton" and p is None
    np.testing.assert_allclose(np.abs(H) @ x, -g, atol=1e-10)


def test_pcg_stops_as_solved_when_the_preconditioned_residual_vanishes():
    """A positive semidefinite preconditioner that does not see part of the residual (for E_L the per-x constants)
    ends CG there as solved, with the step it has, not as a direction of negative curvature (nor by dividing by
    zero when rounding leaves r.z = 0 with z != 0: the test below)."""
    H = np.array([[2.0, 1.0], [1.0, 2.0]])
    blind = np.diag([0.0, 1.0])  # symmetric, positive semidefinite, blind to the first axis
    g = np.array([1.0, 1.0])
    x, label, k, p = _pcg(g, lambda v: H @ v, lambda r: blind @ r, 1e-12, 50)
    assert label == "newton" and p is None and k == 1
    np.testing.assert_allclose(blind @ (H @ x + g), 0.0, atol=1e-15)  # H x = -g where the preconditioner sees


def test_pcg_goes_on_through_a_negative_preconditioned_residual():
    """Only r.z = 0 exactly ends CG as solved: a negative r.z goes on as CG always did.  Here a symmetric,
    indefinite preconditioner (P H has the two eigenvalues -0.2 and 1) gives r.z < 0 after the first iteration, and
    the second solves H x = -g.  Stopping at r.z <= 0 (82be347) returned after the first with 16 % of the residual
    left; on the grid family's 256 x 256 l6 problem that guard took 154 Newton steps to a higher local minimum
    instead of 39."""
    H = np.diag(np.arange(1.0, 7.0))
    P = np.diag(np.r_[-0.2, 1.0 / np.arange(2.0, 7.0)])
    g = np.array([0.126, -0.132, 0.64, 0.105, -0.536, 0.362])
    r1 = -g - (g @ P @ g) / (g @ P @ H @ P @ g) * (H @ (P @ -g))  # the residual after CG's first iteration
    assert float(r1 @ P @ r1) < 0  # the case this test is about
    x, label, k, p = _pcg(g, lambda v: H @ v, lambda r: P @ r, 1e-12, 50)
    assert label == "newton" and k == 2
    np.testing.assert_allclose(H @ x, -g, atol=1e-12)


def test_newton_ends_a_fit_whose_cg_residual_leaves_the_preconditioner():
    """One column of 256 nodes, a sixth-order prior and three points: ln P falls to about -4900 on the far side of
    the periodic y axis. At the end of the run the CG residual of the last Newton step lay where the preconditioner
    gives r.z = 0 in rounding, and the fit stopped with a ZeroDivisionError; it converges."""
    cfg = {"model": "density",
           "grid": {"x": {"min": 1, "max": 1, "n": 1, "boundary": "neumann"},
                    "y": {"min": 1, "max": 256, "n": 256, "boundary": "periodic"}},
           "data": [[1.0, 120.0], [1.0, 130.0], [1.0, 140.0]],
           "prior": {"field": "L", "lambda": 1.0, "l2": 0.0, "l6": 0.1},
           "solver": {"method": "newton", "init": "kernel", "min_iter": 1, "max_iter": 200, "tol": 1e-9}}
    doc = api.fit(cfg)
    assert doc["converged"] and doc["residual"] < 1e-6
    assert abs(float(np.sum(np.exp(doc["L"]))) - 1.0) < 1e-9  # hy = 1: normalised


def test_curvature_step_leaves_a_saddle_downhill():
    """From the kernel start of a 64 x 64 problem the Hessian (160) has negative curvature; CG finds it, the
    direction has negative curvature under the Hessian action, and following it lowers the energy and keeps every
    x-row normalised."""
    cfg = random_problem(64, {"l2": 0.05})
    problem = api.build_density(cfg)
    E = problem.energy
    phi = api.initial_field(problem)
    pt = E.at(phi)
    x, label, k, p = _pcg(pt.gradient, pt.hessp, SeparablePreconditioner(pt), 1e-10, 200)
    assert label == "negative-curvature" and p is not None
    assert np.vdot(p, pt.hessp(p)) < 0
    new_phi, new_pt = _curvature_step(E, phi, pt, p, 1.0)
    assert new_pt.value < pt.value
    np.testing.assert_allclose(np.exp(new_phi).sum(axis=1) * problem.grid.hy, 1.0, atol=1e-12)
    same_phi, same_pt = _curvature_step(E, phi, pt, np.zeros_like(p), 1.0)
    assert same_pt is pt


def test_newton_with_curvature_steps_reaches_a_local_minimum():
    """A bench problem (200 points) on 48 x 48: Newton (with convexified and curvature steps) ends at a point
    where the Hessian has no negative eigenvalue, at an energy no higher than gradient descent from the same
    start reaches."""
    cfg = random_problem(48, {"l2": 0.05})
    doc = api.fit(cfg, check_stability=True)
    assert doc["converged"] and doc["stable"]
    assert any("curvature" in h["method"] or "convexified" in h["method"] for h in doc["history"])
    slow = copy.deepcopy(cfg)
    slow["solver"].update(method="massive", mass2=0.1, max_iter=400, tol=1e-10)
    assert doc["energy"] <= api.fit(slow)["energy"] + 1e-8 * abs(doc["energy"])


def _x_independent_problem(prior: dict, x_boundary: str):
    """Every x row holds the same data, and the field is the same in every row: then the data term
    Lambda_X P hy of the Newton matrix does not depend on x, which is the case the separable preconditioner
    inverts exactly."""
    nx, ny = 6, 11
    pts = [[x, y] for x in range(1, nx + 1) for y in (3, 5, 5, 6, 8, 8, 8, 9)]
    cfg = random_problem(nx, prior)
    cfg["grid"] = {"x": {"min": 1, "max": nx, "n": nx, "boundary": x_boundary},
                   "y": {"min": 1, "max": ny, "n": ny, "boundary": "periodic"}}
    cfg["data"] = pts
    problem = api.build_density(cfg)
    y = problem.grid.y.nodes
    row = -0.5 * ((y - 6.5) / 2.0) ** 2 + 0.1 * np.sin(y)
    L = problem.energy.normalise(np.tile(row, (nx, 1)))
    return problem, problem.energy.at(L)


@pytest.mark.parametrize("prior", [{"l2": 0.3}, {"l6": 0.05, "l0": 0.01}])
@pytest.mark.parametrize("x_boundary,dense", [("neumann", True), ("periodic", True), ("neumann", False),
                                              ("periodic", False)])
def test_strong_preconditioner_is_the_exact_inverse_when_the_data_term_is_separable(prior, x_boundary, dense,
                                                                                    monkeypatch):
    """With a data term that does not depend on x the strong form is the pseudo-inverse of the Hessian (160)
    on the tangent space: H (P H v) = H v for any v; the cheap form is not (it damps per-x offsets).  Both ways of
    transforming the x axis: its dense eigenbasis (small grids) and the FFT/DCT."""
    monkeypatch.setattr(SeparablePreconditioner, "dense_x_max", 96 if dense else 0)
    problem, pt = _x_independent_problem(prior, x_boundary)
    lam = pt.lagrange_multiplier
    assert np.all(lam > 0) and np.ptp(lam) < 1e-9 * np.max(lam)
    rng = np.random.default_rng(3)
    v = rng.standard_normal(pt.phi.shape)
    Hv = pt.hessp(v)
    strong = SeparablePreconditioner(pt, strong=True)
    np.testing.assert_allclose(pt.hessp(strong(Hv)), Hv, atol=1e-9 * np.max(np.abs(Hv)))
    cheap = SeparablePreconditioner(pt, strong=False)
    assert np.max(np.abs(pt.hessp(cheap(Hv)) - Hv)) > 1e-3 * np.max(np.abs(Hv))


@pytest.mark.parametrize("dense", [True, False])
def test_strong_preconditioner_schur_complement_matches_separable_solves(dense, monkeypatch):
    """The Schur complement S = V^T M0^{-1} V, built in one product from the eigenpairs of the x part, equals
    the one assembled column by column from the solve (the dense eigenbasis of x, or the FFT/DCT), on a bench
    problem (the data term varies with x)."""
    monkeypatch.setattr(SeparablePreconditioner, "dense_x_max", 96 if dense else 0)
    problem = api.build_density(random_problem(16, {"l6": 0.1}))
    pt = problem.energy.at(api.initial_field(problem))
    P = SeparablePreconditioner(pt, strong=True)
    nx, ny = pt.phi.shape
    V = pt.P * problem.grid.hy
    S = np.empty((nx, nx))
    for k in range(nx):
        B = np.zeros((nx, ny))
        B[k] = V[k]
        S[:, k] = np.sum(V * P.solve_separable(B), axis=1)
    c, lower = P.S  # the Cholesky factor S = U^T U (cho_factor's other triangle holds leftovers)
    U = np.triu(c) if not lower else np.tril(c).T
    np.testing.assert_allclose(U.T @ U, S, rtol=1e-8, atol=1e-12 * np.max(np.abs(S)))


@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("y_boundary", BOUNDARIES)
@pytest.mark.parametrize("x_boundary", ["neumann", "periodic"])
def test_strong_preconditioner_in_one_pass_is_the_two_solves_written_out(x_boundary, y_boundary, dense, monkeypatch):
    """The strong form applied in one pass through the eigenbasis (two products with Q) is the KKT solution
    ``M0^{-1}(r - V mu)``, ``mu = S^{-1} V^T M0^{-1} r``, written out with two separable solves, for every x
    boundary of a density's x axis, every y boundary and both x transforms (the dense eigenbasis, the FFT/DCT)."""
    monkeypatch.setattr(SeparablePreconditioner, "dense_x_max", 96 if dense else 0)
    cfg = random_problem(12, {"l6": 0.1})
    cfg["grid"]["x"]["boundary"] = x_boundary
    cfg["grid"]["y"]["boundary"] = y_boundary
    problem = api.build_density(cfg)
    pt = problem.energy.at(api.initial_field(problem))
    P = SeparablePreconditioner(pt, strong=True)
    assert (P.C is not None) == dense
    r = np.random.default_rng(11).standard_normal(pt.phi.shape)
    z = P.solve_separable(r)
    mu = sla.cho_solve(P.S, np.sum(P.V * z, axis=1))
    expected = P.solve_separable(r - P.V * mu[:, None])
    got = P(r)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-11 * np.max(np.abs(expected)))
    # the tangent-space gauge of the step: sum_y P hy d = 0 per x
    np.testing.assert_allclose(np.sum(P.V * got, axis=1), 0.0, atol=1e-9 * np.max(np.abs(got)))


@pytest.mark.parametrize("x_boundary", ["neumann", "periodic"])
def test_dense_x_basis_and_fft_give_the_same_separable_solve(x_boundary, monkeypatch):
    """``M0^{-1} r`` through the dense eigenbasis of the x part equals the FFT/DCT route on the same point (two
    independent transforms of the same operator), for a batch of right-hand sides, cheap and strong forms."""
    cfg = random_problem(12, {"l6": 0.1})
    cfg["grid"]["x"]["boundary"] = x_boundary
    problem = api.build_density(cfg)
    pt = problem.energy.at(api.initial_field(problem))
    r = np.random.default_rng(5).standard_normal((3,) + pt.phi.shape)
    for strong in (False, True):
        dense = SeparablePreconditioner(pt, strong=strong)
        assert dense.C is not None
        monkeypatch.setattr(SeparablePreconditioner, "dense_x_max", 0)
        fft = SeparablePreconditioner(pt, strong=strong)
        monkeypatch.undo()
        assert fft.C is None
        a, b = dense.solve_separable(r), fft.solve_separable(r)
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10 * np.max(np.abs(b)))
        np.testing.assert_allclose(dense(r[0]), fft(r[0]), rtol=1e-8, atol=1e-9 * np.max(np.abs(fft(r[0]))))


@pytest.mark.parametrize("fig", ["fig15", "fig17"])
def test_barzilai_borwein_first_trial_keeps_the_minimum_and_monotonicity(fig, monkeypatch):
    """Massive relaxation of E_P tries the Barzilai-Borwein step first: the energy still never increases, the run
    ends at the same minimum as Newton (to 1e-10) and as the minimising line search alone, in fewer iterations."""
    cfg = presets.figure_config(fig)
    doc = api.fit(cfg)
    energies = [h["energy"] for h in doc["history"]]
    assert all(b <= a for a, b in zip(energies, energies[1:]))
    newton = copy.deepcopy(cfg)
    newton["solver"]["method"] = "newton"
    assert doc["energy"] == pytest.approx(api.fit(newton)["energy"], rel=1e-10)
    monkeypatch.setattr(active_set, "barzilai_borwein", lambda *a: None)
    plain = api.fit(cfg)
    assert doc["energy"] == pytest.approx(plain["energy"], rel=1e-10)
    assert doc["iterations"] < plain["iterations"]


def test_preconditioner_run_cache_gives_what_a_fresh_build_gives():
    """The run's cache of the fixed parts (dense y part, x symbol, x eigenpairs) is reused across points of one energy
    and rebuilt for another lambda: a preconditioner built from a used cache applies exactly as one built without."""
    cfg = random_problem(12, {"l6": 0.1})
    problem = api.build_density(cfg)
    E = problem.energy
    L0 = E.normalise(api.initial_field(problem))
    L1 = E.normalise(L0 + 0.3 * np.random.default_rng(2).standard_normal(L0.shape))
    r = np.random.default_rng(3).standard_normal(L0.shape)
    cache: dict = {}
    for strong in (False, True):
        SeparablePreconditioner(E.at(L0), strong, cache)  # fills the cache at another point
        np.testing.assert_array_equal(SeparablePreconditioner(E.at(L1), strong, cache)(r),
                                      SeparablePreconditioner(E.at(L1), strong)(r))
    cfg["prior"]["lambda"] = 3.0 * cfg["prior"]["lambda"]  # another scale lambda cell: the cache must not answer
    E3 = api.build_density(cfg).energy
    np.testing.assert_array_equal(SeparablePreconditioner(E3.at(L1), True, cache)(r),
                                  SeparablePreconditioner(E3.at(L1), True)(r))
