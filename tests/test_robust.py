"""Regression with non-quadratic prior potentials and robust data terms, solved by IRLS (bftcore.models.robust)."""
import json

import numpy as np
import pytest

from bftcore.foundations.grid import Axis
from bftcore.foundations.potentials import data_term, prior_potential
from bftcore.models.regression import RegressionModel
from bftcore.models.robust import (
    RobustRegression,
    solve,
    step_cases,
    step_demo,
    step_measures,
    step_outlier_data,
)

SMALL = Axis(0.0, 2.0, 12, "neumann")
SMALL_DATA = [[0.0, 0.3], [0.35, -0.2], [0.55, 0.4], [0.9, 1.6], [1.1, 1.1], [1.1, 2.9], [1.45, 1.0], [2.0, 0.8]]

COMBOS = [("gaussian", {"sigma": 0.5}, "cup", {"b": 2.0}),
          ("mixture2", {"sigma": 0.4, "mu": 0.6}, "inverted_cup", {"b": 3.0, "s0": 0.2}),
          ("mixture11", {"sigma": 0.3, "mu": 0.2}, "cusp", {"a": 2.0, "b": 1.5}),
          ("insensitive", {"eps": 0.3, "sigma": 0.5}, "quadratic", {})]


# ---------------------------------------------------------------------------------------------- the demo
@pytest.fixture(scope="module")
def demo():
    """The demo's fits (decisions in :func:`bftcore.models.robust.step_cases`), with the problems and the truth."""
    axis, data, truth = step_outlier_data()
    fits = {}
    for key in ("quadratic", "cup", "cup_grey", "insensitive", "mixture2"):
        rho, psi, lam = step_cases()[key]
        problem = RobustRegression(axis, data, rho, psi, lam=lam)
        fit = solve(problem)
        fits[key] = (problem, fit, step_measures(fit.h, truth))
    return fits


def pull(m):
    return (m["h_019"], m["h_020"], m["h_021"])


def test_demo_runs_converge_with_monotone_energy(demo):
    for key, (problem, fit, _) in demo.items():
        assert fit.converged, (key, fit.verdict)
        assert np.all(np.diff(fit.energy) <= 0), key  # the line search on the true energy
        assert fit.energy[-1] < fit.energy[0] or key == "quadratic"
        assert len(fit.records) == fit.iterations + 1 and fit.records[-1].energy == fit.energy[-1]


def test_insensitive_data_term_ignores_the_outlier(demo):
    q, r = demo["quadratic"][2], demo["insensitive"][2]
    assert max(abs(v) for v in pull(r)) < 0.15 < 0.7 < min(pull(q))  # measured 0.083 against 0.85-1.13
    assert r["rmse"] < 0.5 * q["rmse"]


def test_cup_prior_keeps_the_jump(demo):
    q, c = demo["quadratic"][2], demo["cup"][2]
    assert q["jump"] < 0.3 and c["jump"] > 0.8  # one edge carries most of the unit step


def test_cup_prior_with_gaussian_data_fits_the_outlier_as_a_plateau(demo):
    """A finding, not the hoped-for robustness: with a Gaussian data term the cup makes the outlier's node (two data,
    mean 1.47) part of a flat piece; the fit there moves *closer* to the data's mean than the quadratic prior's."""
    problem, fit, c = demo["cup"]
    mean20 = problem.y[problem.ix == 20].mean()
    assert abs(c["h_020"] - mean20) < 0.01 < abs(demo["quadratic"][2]["h_020"] - mean20)


def test_cup_with_b_rescaled_by_range_alone_stops_smoothing(demo):
    """b = 3 grey levels -> 1.18 y per x: below the noise's slopes, so every edge is in the flat tail and the fit goes
    through the data (within 5e-3 of each datum at a node with one datum; rmse above the quadratic's)."""
    problem, fit, m = demo["cup_grey"]
    single = np.bincount(problem.ix, minlength=problem.n) == 1
    assert np.max(np.abs(fit.h[problem.ix] - problem.y)[single[problem.ix]]) < 5e-3  # noise 0.1
    assert m["rmse"] > demo["quadratic"][2]["rmse"]


def test_two_gaussian_mixture_is_not_robust_to_a_large_outlier(demo):
    """e^2/2 - ln cosh e has quadratic tails: the outlier pulls as much as under the Gaussian error (within 10%)."""
    q, m = demo["quadratic"][2], demo["mixture2"][2]
    assert m["h_020"] == pytest.approx(q["h_020"], rel=0.1)


def test_step_demo_document():
    doc = json.loads(json.dumps(step_demo(["quadratic", "insensitive"])))
    assert set(doc) == {"quadratic", "insensitive"} and len(doc["insensitive"]["h"]) == 101
    assert doc["insensitive"]["converged"] and doc["insensitive"]["h_020"] < doc["quadratic"]["h_020"]


# ---------------------------------------------------------------------------------------------- the energy
@pytest.mark.parametrize("rho_name, rho_params, psi_name, psi_params", COMBOS)
def test_gradient_matches_finite_differences(rho_name, rho_params, psi_name, psi_params):
    problem = RobustRegression(SMALL, SMALL_DATA, data_term(rho_name, **rho_params),
                               prior_potential(psi_name, **psi_params), lam=0.7, template={"kind": "constant",
                                                                                        "value": 0.1})
    rng = np.random.default_rng(3)
    h = rng.normal(0.8, 1.0, SMALL.n)
    g = problem.gradient(h)
    for _ in range(3):
        v = rng.standard_normal(SMALL.n)
        eps = 1e-6
        fd = (problem.value(h + eps * v) - problem.value(h - eps * v)) / (2 * eps)
        assert g @ v == pytest.approx(fd, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("rho_name, rho_params, psi_name, psi_params", COMBOS[:3])
def test_hessian_matches_finite_differences_of_the_gradient(rho_name, rho_params, psi_name, psi_params):
    """The Hessian the saddle test uses, column by column against central differences of the gradient."""
    problem = RobustRegression(SMALL, SMALL_DATA, data_term(rho_name, **rho_params),
                               prior_potential(psi_name, **psi_params), lam=0.7)
    h = np.random.default_rng(6).normal(0.8, 1.0, SMALL.n)
    H = problem.hessian(h).toarray()
    eps = 1e-6
    fd = np.stack([(problem.gradient(h + eps * e) - problem.gradient(h - eps * e)) / (2 * eps)
                   for e in np.eye(SMALL.n)], axis=1)
    assert np.allclose(H, fd, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("boundary, coeffs", [("neumann", {"l2": 1.0}), ("periodic", {"l0": 0.3, "l2": 0.5, "l4": 0.2}),
                                              ("free", {"l4": 1.0})])
def test_quadratic_limit_is_gaussian_regression(boundary, coeffs):
    """psi = s^2/2 and rho = e^2/2 give regression.py's single-component fit t̄ = A^{-1}(K_T t_T + K_0 t), eq. (29)
    [001], for the same lambda, grid, data and template; from the Gaussian start and from h = 0."""
    axis = Axis(0.0, 2.0, 12, boundary)
    template = {"kind": "linear", "slope": 0.4, "intercept": -0.2}
    coeffs = {"l0": 0.0, "l2": 0.0, "l4": 0.0, "l6": 0.0, **coeffs}
    reference = RegressionModel(axis, SMALL_DATA, [template], lam=0.7, **coeffs).component_solutions[0]
    problem = RobustRegression(axis, SMALL_DATA, "gaussian", "quadratic", lam=0.7, template=template, **coeffs)
    for init in ("gaussian", np.zeros(axis.n)):
        fit = solve(problem, init=init)
        assert fit.converged, fit.verdict
        assert np.max(np.abs(fit.h - reference)) < 1e-10
    assert solve(problem, init=np.zeros(axis.n)).iterations <= 2  # IRLS is Newton for a quadratic energy


FULL_DATA = [[x, float(np.sin(2 * x) + 0.3 * (x > 1))] for x in SMALL.nodes]  # a datum at every node


@pytest.mark.parametrize("rho_name, rho_params, psi_name, psi_params, data", [
    (*COMBOS[0], SMALL_DATA), ("mixture2", {"sigma": 0.4, "mu": 0.3}, "cup", {"b": 1.0}, SMALL_DATA),
    (*COMBOS[1], FULL_DATA), ("gaussian", {"sigma": 0.3}, "inverted_cup", {"b": 0.5}, FULL_DATA)])
def test_stationary_at_the_solution(rho_name, rho_params, psi_name, psi_params, data):
    problem = RobustRegression(SMALL, data, data_term(rho_name, **rho_params),
                               prior_potential(psi_name, **psi_params), lam=0.7)
    fit = solve(problem)
    assert fit.converged, fit.verdict
    g_data, g_prior = problem.gradient_parts(fit.h)
    assert np.max(np.abs(g_data + g_prior)) < 1e-6 * max(np.max(np.abs(g_data)), 1.0)
    assert np.all(np.diff(fit.energy) <= 0)
    # a local minimum, not a saddle: no small move lowers the energy
    rng = np.random.default_rng(5)
    assert all(problem.value(fit.h + 1e-4 * rng.standard_normal(SMALL.n)) > fit.energy[-1] for _ in range(20))


def test_irls_stops_on_a_saddle_and_the_curvature_step_leaves_it():
    """The cup on the small data: plain IRLS ends where the Hessian has a negative eigenvalue (a data-free node held
    between its neighbours); with the step along that eigenvector the run ends lower, at a local minimum."""
    problem = RobustRegression(SMALL, SMALL_DATA, data_term("gaussian", sigma=0.5), prior_potential("cup", b=2.0),
                               lam=0.7, template=0.2 + 0.1 * SMALL.nodes)
    plain, full = solve(problem, max_escapes=0), solve(problem)
    assert plain.converged and "curvature" not in plain.steps
    assert np.linalg.eigvalsh(problem.hessian(plain.h).toarray())[0] < 0
    assert full.converged and full.steps.count("curvature") >= 1 and "saddle" in full.verdict
    assert full.energy[-1] < plain.energy[-1] - 1e-3
    assert np.linalg.eigvalsh(problem.hessian(full.h).toarray())[0] > 0


def test_inverted_cup_has_no_minimum_at_a_node_without_data():
    """psi decreases towards a < 0 as |omega| grows: a node without data runs away, and the run says so."""
    problem = RobustRegression(SMALL, SMALL_DATA, data_term("gaussian", sigma=0.5),
                               prior_potential("inverted_cup", b=3.0), lam=0.7)
    fit = solve(problem, max_iter=200)
    assert not fit.converged and fit.verdict.startswith("not converged")
    assert np.all(np.diff(fit.energy) <= 0)
    assert np.max(np.abs(fit.h)) > 10 * np.max(np.abs(problem.y))


def test_cusp_converges_on_its_kink():
    """gamma < 1: psi' has no zero at s0, so the run ends on the field's change; the fit still beats the start."""
    axis, data, _ = step_outlier_data()
    rho, psi, lam = step_cases()["cusp"]
    problem = RobustRegression(axis, data, rho, psi, lam=lam)
    fit = solve(problem)
    assert fit.converged, fit.verdict
    assert np.all(np.diff(fit.energy) <= 0) and fit.energy[-1] < fit.energy[0]


def test_not_converged_says_why():
    axis, data, _ = step_outlier_data()
    rho, psi, lam = step_cases()["insensitive"]
    problem = RobustRegression(axis, data, rho, psi, lam=lam)
    fit = solve(problem, max_iter=3)
    assert not fit.converged and fit.iterations == 3
    assert fit.verdict.startswith("not converged after 3 iterations") and "raise max_iter" in fit.verdict


# ---------------------------------------------------------------------------------------------- units
@pytest.mark.parametrize("rho_name, rho_params, psi_name, psi_params", [COMBOS[0], COMBOS[3],
                                                                        ("mixture2", {"sigma": 0.4, "mu": 0.3},
                                                                         "cusp", {"b": 1.0, "s0": 0.1})])
def test_equivariance_under_rescaling_x_and_y(rho_name, rho_params, psi_name, psi_params):
    """x -> alpha x, y -> c y: omega -> (c/alpha) omega and the cell hx -> alpha hx.  With sigma, mu, eps, the template
    times c, b and s0 times c/alpha, and lambda' = lambda / alpha (a cup family: psi'(c s / alpha) = psi(s)) or
    lambda' = lambda alpha / c^2 (the quadratic), the fit is c h (at the x nodes alpha x)."""
    alpha, c = 3.0, 0.25
    rho, psi = data_term(rho_name, **rho_params), prior_potential(psi_name, **psi_params)
    template = 0.2 + 0.1 * SMALL.nodes
    base = RobustRegression(SMALL, SMALL_DATA, rho, psi, lam=0.7, template=template)
    axis = Axis(alpha * SMALL.min, alpha * SMALL.max, SMALL.n, SMALL.boundary)
    data = [[alpha * x, c * y] for x, y in SMALL_DATA]
    if psi.kind == "quadratic":
        psi2, lam2 = psi.scaled(c / alpha), 0.7 * alpha / c ** 2
    else:
        psi2, lam2 = psi.scaled(c / alpha), 0.7 / alpha
    scaled = RobustRegression(axis, data, rho.scaled(c), psi2, lam=lam2, template=c * template)
    h, h2 = solve(base).h, solve(scaled).h
    assert scaled.value(c * h) == pytest.approx(base.value(h), rel=1e-12)  # the same energy, not just the same fit
    assert np.max(np.abs(h2 - c * h)) < 1e-7 * c


# ---------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs, match", [({"lam": 0.0}, "lambda must be > 0"), ({"lam": -1.0}, "lambda must be > 0"),
                                           ({"psi": "wiggle"}, "unknown prior potential 'wiggle'"),
                                           ({"rho": "cauchy"}, "unknown data term 'cauchy'"),
                                           ({"l2": 0.0}, "one > 0"), ({"l2": -1.0}, "one > 0"),
                                           ({"template": [1.0, 2.0]}, "one finite value per x node")])
def test_bad_problem_is_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RobustRegression(SMALL, SMALL_DATA, **kwargs)


def test_bad_solver_input_is_named():
    problem = RobustRegression(SMALL, SMALL_DATA)
    with pytest.raises(ValueError, match="init must be"):
        solve(problem, init="kernel")
    with pytest.raises(ValueError, match="one value per x node"):
        solve(problem, init=np.zeros(3))
    with pytest.raises(ValueError, match="outside x"):
        RobustRegression(SMALL, [[5.0, 1.0]])


# ---------------------------------------------------------------------------------------------- density p(y|x)
def density_setup(potential="quadratic", lam=0.8, template=True):
    from bftcore.foundations.grid import Grid
    from bftcore.foundations.operators import PriorOperator
    from bftcore.models.robust import PotentialLogDensityEnergy

    grid = Grid(Axis(1.0, 6.0, 6, "neumann"), Axis(1.0, 8.0, 8, "periodic"))
    N = grid.counts([[2, 3], [2, 4], [5, 7], [3, 2], [6, 6], [4, 4]])
    K = PriorOperator(grid, 1.0, 0.7, 0.0, 1.0)
    t = 0.3 * np.sin(grid.mesh[1]) - 0.1 * grid.mesh[0] if template else None
    psi = potential if not isinstance(potential, str) else prior_potential(potential)
    return grid, N, K, t, PotentialLogDensityEnergy(grid, N, K, lam, psi, t)


def test_density_quadratic_limit_is_the_gaussian_prior():
    """psi = s^2/2: value, gradient, Hessian and the fit equal those of LogDensityEnergy with the same K, lambda, t."""
    from bftcore.models.density import LogDensityEnergy, Prior, normalise_log
    from bftcore.models.robust import solve_density

    grid, N, K, t, energy = density_setup()
    reference = LogDensityEnergy(grid, N, Prior(K, 0.8, [t]))
    L = normalise_log(np.random.default_rng(1).normal(size=grid.shape), grid.hy)
    a, b = energy.at(L), reference.at(L)
    v = np.random.default_rng(2).normal(size=grid.shape)
    assert a.value == pytest.approx(b.value, rel=1e-12)
    assert np.allclose(a.gradient, b.gradient, rtol=1e-12, atol=1e-12)
    assert np.allclose(a.hessp(v), b.hessp(v), rtol=1e-10, atol=1e-12)
    assert np.allclose(a.hessp(v, convexified=True), b.hessp(v, convexified=True), rtol=1e-10, atol=1e-12)
    from bftcore.foundations.solvers import iterate
    ref_fit = list(iterate(reference, np.zeros(grid.shape), method="newton", max_iter=50, tol=1e-12))[-1]
    fit = solve_density(energy, max_iter=100, tol=1e-12)[-1]
    assert fit.converged and ref_fit.converged
    assert np.max(np.abs(fit.field - ref_fit.field)) < 1e-8


@pytest.mark.parametrize("name, params", [("cup", {"b": 0.8}), ("inverted_cup", {"b": 1.5}),
                                          ("cusp", {"a": 1.0, "b": 0.5})])
def test_density_gradient_matches_finite_differences(name, params):
    """The g-gradient against central differences of E(normalise(L + e v)) on the normalised L."""
    from bftcore.models.density import normalise_log

    grid, N, K, t, energy = density_setup(prior_potential(name, **params))
    rng = np.random.default_rng(4)
    L = normalise_log(rng.normal(size=grid.shape), grid.hy)
    g = energy.at(L).gradient
    for _ in range(3):
        v = rng.normal(size=grid.shape)
        eps = 1e-6

        def E(s):
            return energy.at(energy.normalise(L + s * v)).value

        assert np.vdot(g, v) == pytest.approx((E(eps) - E(-eps)) / (2 * eps), rel=1e-6, abs=1e-8)


def test_density_cup_fit_is_normalised_and_stationary():
    from bftcore.models.robust import solve_density

    grid, N, K, t, energy = density_setup(prior_potential("cup", b=1.0), lam=2.0)
    records = solve_density(energy, max_iter=200, tol=1e-10)
    last = records[-1]
    assert last.converged, (last.method, last.residual)
    assert np.all(np.diff([r.energy for r in records]) <= 0)
    assert np.allclose(np.exp(last.field).sum(axis=1) * grid.hy, 1.0, rtol=1e-12)
    assert energy.at(last.field).residual < 1e-6
    assert {r.method for r in records[1:]} <= {"irls", "gradient"}
    newton = solve_density(energy, max_iter=100, tol=1e-12, method="newton")[-1]  # the exact Hessian, another route
    assert newton.converged and np.max(np.abs(newton.field - last.field)) < 1e-6


def test_density_bad_input_is_named():
    from bftcore.models.robust import PotentialLogDensityEnergy, solve_density

    grid, N, K, t, energy = density_setup()
    with pytest.raises(ValueError, match="lambda must be > 0"):
        PotentialLogDensityEnergy(grid, N, K, 0.0, "cup")
    with pytest.raises(ValueError, match="unknown prior potential"):
        PotentialLogDensityEnergy(grid, N, K, 1.0, "bump")
    with pytest.raises(ValueError, match="template must be a finite field"):
        PotentialLogDensityEnergy(grid, N, K, 1.0, "cup", np.zeros((2, 2)))
    with pytest.raises(ValueError, match="L0 must have the grid's shape"):
        solve_density(energy, np.zeros(3))


def test_density_irls_direction_solves_the_irls_matrix():
    """The direct (KKT) direction against the IRLS matrix's action: hessp(d, convexified=True) = -G, sum_y P d = 0."""
    from bftcore.models.density import normalise_log
    from bftcore.models.robust import IRLSDensityStep

    grid, N, K, t, energy = density_setup(prior_potential("cup", b=0.8))
    L = normalise_log(np.random.default_rng(8).normal(size=grid.shape), grid.hy)
    point = energy.at(L)
    d = IRLSDensityStep(energy).direction(point)
    assert np.allclose(point.hessp(d, convexified=True), -point.gradient, rtol=1e-9, atol=1e-11)
    assert np.allclose(np.sum(point.P * d, axis=1), 0.0, atol=1e-12)
