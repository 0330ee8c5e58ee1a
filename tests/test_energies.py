"""E_L and E_P (CONVENTIONS.md §2): values against the written-out formulas with a dense K, gradients and Hessian
actions against central finite differences, symmetry, zero modes, and the prior mixture (713)-(718)."""
import numpy as np
import pytest

from bftcore import api
from bftcore.foundations.config import ConfigError, validate_config
from bftcore.foundations.grid import Axis, Grid
from bftcore.foundations.operators import PriorOperator
from bftcore.models import presets
from bftcore.models.density import LogDensityEnergy, Prior, ProbabilityEnergy, normalise_log

LAM, BETA = 0.7, 1.9


def small_grid():
    """Neumann x, periodic y, non-unit spacings (hx = 0.5, hy = 0.75) so that every cell factor matters."""
    return Grid(Axis(0.0, 2.5, 6, "neumann"), Axis(-3.0, 3.0, 9, "periodic"))


def make_data(grid, n=9, seed=1):
    rng = np.random.default_rng(seed)
    pts = np.column_stack([rng.choice(grid.x.nodes, n), rng.choice(grid.y.nodes, n)])
    pts[1] = pts[0]  # a repeated point
    return grid.counts(pts)


def templates(grid, fld):
    """Two smooth, x-dependent templates (log-densities for L, densities for P)."""
    X, Y = grid.mesh
    P1 = np.exp(-(Y - 0.4 * X + 1.0) ** 2 / 2.0)
    P2 = np.exp(-(Y + 0.3 * X - 1.5) ** 2 / 4.5) + 0.05
    Ps = [P / (P.sum(axis=1, keepdims=True) * grid.hy) for P in (P1, P2)]
    return [np.log(P) for P in Ps] if fld == "L" else Ps


def energy(fld, mixture, beta=BETA, l6=0.0, weights=(0.3, 0.7)):
    g = small_grid()
    K = PriorOperator(g, 1.3, 0.8, 0.05, 1.0, 0.0, l6)
    t = templates(g, fld)
    prior = Prior(K, LAM, t if mixture else t[:1], list(weights) if mixture else None, beta)
    cls = LogDensityEnergy if fld == "L" else ProbabilityEnergy
    return cls(g, make_data(g), prior)


def random_L(grid, seed=5):
    return normalise_log(np.random.default_rng(seed).normal(scale=0.8, size=grid.shape), grid.hy)


def random_P(grid, seed=5):
    P = np.exp(np.random.default_rng(seed).normal(scale=0.5, size=grid.shape))
    return P / (P.sum(axis=1, keepdims=True) * grid.hy)


def dense_prior_energy(E, phi):
    """-(1/beta) ln sum_j p_j exp(-beta lambda E_0j), E_0j = 1/2 (phi - t_j, K (phi - t_j)), from the dense K."""
    pr, g = E.prior, E.grid
    M = pr.K.matrix.toarray()
    E0 = np.array([0.5 * (phi - t).ravel() @ M @ (phi - t).ravel() * g.hx * g.hy for t in pr.templates])
    if len(E0) == 1:
        return pr.lam * E0[0], np.ones(1)
    z = -pr.beta * pr.lam * E0
    w = pr.weights * np.exp(z - z.max())
    return -(np.log(w.sum()) + z.max()) / pr.beta, w / w.sum()


def E_of_g(E, g):
    return E.at(normalise_log(g, E.grid.hy)).value


CASES = [("single", False, 1.0), ("mixture", True, BETA), ("mixture-beta1", True, 1.0)]


# ---------------------------------------------------------------------------------------------- values
@pytest.mark.parametrize("fld", ["L", "P"])
@pytest.mark.parametrize("name, mixture, beta", CASES)
def test_value_matches_written_out_formula(fld, name, mixture, beta):
    E = energy(fld, mixture, beta)
    phi = random_L(E.grid) if fld == "L" else random_P(E.grid)
    prior_value, a = dense_prior_energy(E, phi)
    data_term = -np.sum(E.N * phi) if fld == "L" else -np.sum(E.N * np.log(phi))
    pt = E.at(phi)
    assert pt.value == pytest.approx(data_term + prior_value, rel=1e-12)
    assert np.allclose(pt.mixing, a, rtol=1e-10, atol=1e-14)


# ---------------------------------------------------------------------------------------------- E_L
@pytest.mark.parametrize("name, mixture, beta", CASES)
def test_log_gradient_matches_finite_differences_in_g_space(name, mixture, beta):
    """The g-gradient: perturb g = L + eps e_k, renormalise with normalise_log, central differences."""
    E = energy("L", mixture, beta, l6=0.01)
    L = random_L(E.grid)
    G = E.at(L).gradient
    eps = 1e-6
    fd = np.zeros_like(L)
    for k in np.ndindex(L.shape):
        e = np.zeros_like(L)
        e[k] = eps
        fd[k] = (E_of_g(E, L + e) - E_of_g(E, L - e)) / (2 * eps)
    assert np.allclose(G, fd, rtol=1e-6, atol=1e-7 * np.abs(G).max())


@pytest.mark.parametrize("name, mixture, beta", CASES)
def test_log_hessian_action_matches_finite_differences(name, mixture, beta):
    E = energy("L", mixture, beta, l6=0.01)
    g, L = E.grid, random_L(small_grid())
    rng = np.random.default_rng(11)
    pt = E.at(L)
    eps = 1e-5
    for _ in range(3):
        v = rng.normal(size=L.shape)
        Hv = pt.hessp(v)
        fd = (E.at(normalise_log(L + eps * v, g.hy)).gradient - E.at(normalise_log(L - eps * v, g.hy)).gradient) / (
            2 * eps)
        assert np.allclose(Hv, fd, rtol=1e-5, atol=1e-6 * np.abs(Hv).max())
        # the quadratic form against second differences of the energy alone (no gradient code involved)
        e2 = 1e-4
        q = (E_of_g(E, L + e2 * v) - 2 * pt.value + E_of_g(E, L - e2 * v)) / e2 ** 2
        assert np.vdot(v, Hv) == pytest.approx(q, rel=1e-4, abs=1e-6 * abs(np.vdot(v, Hv)))


@pytest.mark.parametrize("fld", ["L", "P"])
@pytest.mark.parametrize("name, mixture, beta", CASES)
def test_hessian_is_symmetric(fld, name, mixture, beta):
    E = energy(fld, mixture, beta)
    phi = random_L(E.grid) if fld == "L" else random_P(E.grid)
    pt = E.at(phi)
    rng = np.random.default_rng(3)
    for _ in range(3):
        u, v = rng.normal(size=phi.shape), rng.normal(size=phi.shape)
        a, b = np.vdot(u, pt.hessp(v)), np.vdot(v, pt.hessp(u))
        assert a == pytest.approx(b, rel=1e-11, abs=1e-12)


@pytest.mark.parametrize("name, mixture, beta", CASES)
def test_log_energy_zero_modes_are_per_x_constants(name, mixture, beta):
    E = energy("L", mixture, beta)
    g = E.grid
    L = random_L(g)
    pt = E.at(L)
    c = np.random.default_rng(2).normal(size=(g.x.n, 1)) * np.ones(g.shape)
    assert np.allclose(pt.hessp(c), 0.0, atol=1e-12 * np.abs(pt.hessp(np.random.default_rng(4).normal(
        size=g.shape))).max())
    assert np.allclose(pt.gradient.sum(axis=1), 0.0, atol=1e-12 * np.abs(pt.gradient).max())  # G orthogonal to c(x)
    # E(g + c(x)) = E(g): the energy itself is invariant
    assert E_of_g(E, L + c) == pytest.approx(pt.value, rel=1e-13)


def test_log_hessian_has_exactly_nx_zero_modes_at_the_fig14_minimum():
    """Notes §7.4: -H_g has exactly lx zero modes (10 on the paper mesh); positive on the rest at the minimum."""
    problem = api.build_density(presets.figure_config("fig14"))
    L = np.array(api.fit(presets.figure_config("fig14"))["L"])
    pt = problem.energy.at(L)
    n = problem.grid.size
    H = np.column_stack([pt.hessp(e.reshape(problem.grid.shape)).ravel() for e in np.eye(n)])
    ev = np.linalg.eigvalsh(0.5 * (H + H.T))
    assert np.sum(np.abs(ev) < 1e-10 * ev.max()) == problem.grid.x.n
    assert ev.min() > -1e-10 * ev.max()


def test_lagrange_multiplier_of_E_L():
    """Lambda_X = N_X - lambda hx hy sum_j [K (L - t̄)]_j (137)/(717) on the discrete energy."""
    E = energy("L", True)
    L = random_L(E.grid)
    pt = E.at(L)
    tbar = np.tensordot(pt.mixing, E.prior.templates, axes=1)
    KL = (E.prior.K.matrix @ (L - tbar).ravel()).reshape(L.shape)
    expected = E.N.sum(axis=1) - LAM * E.grid.hx * E.grid.hy * KL.sum(axis=1)
    assert np.allclose(pt.lagrange_multiplier, expected, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------- E_P
@pytest.mark.parametrize("name, mixture, beta", CASES)
def test_probability_raw_gradient_matches_finite_differences(name, mixture, beta):
    E = energy("P", mixture, beta, l6=0.01)
    P = random_P(E.grid)
    pt = E.at(P)
    eps = 1e-7
    fd = np.zeros_like(P)
    for k in np.ndindex(P.shape):
        e = np.zeros_like(P)
        e[k] = eps
        fd[k] = (E.at(P + e).value - E.at(P - e).value) / (2 * eps)
    assert np.allclose(pt.raw_gradient, fd, rtol=1e-6, atol=1e-7 * np.abs(fd).max())


@pytest.mark.parametrize("name, mixture, beta", CASES)
def test_probability_reduced_gradient_along_feasible_directions(name, mixture, beta):
    """For v with sum_j v hy = 0 per x (stays normalised), dE/ds(P + s v) = (G, v); and sum_j P G = 0 per x."""
    E = energy("P", mixture, beta)
    P = random_P(E.grid)
    pt = E.at(P)
    rng = np.random.default_rng(8)
    for _ in range(3):
        v = rng.normal(size=P.shape)
        v -= v.mean(axis=1, keepdims=True)
        eps = 1e-7
        fd = (E.at(P + eps * v).value - E.at(P - eps * v).value) / (2 * eps)
        assert np.vdot(pt.gradient, v) == pytest.approx(fd, rel=1e-6, abs=1e-8)
    assert np.allclose((P * pt.gradient).sum(axis=1), 0.0, atol=1e-10)


@pytest.mark.parametrize("name, mixture, beta", CASES)
def test_probability_hessian_action_matches_finite_differences(name, mixture, beta):
    E = energy("P", mixture, beta, l6=0.01)
    P = random_P(E.grid)
    pt = E.at(P)
    rng = np.random.default_rng(9)
    eps = 1e-6
    for _ in range(3):
        v = rng.normal(size=P.shape)
        Hv = pt.hessp(v)
        fd = (E.at(P + eps * v).raw_gradient - E.at(P - eps * v).raw_gradient) / (2 * eps)
        assert np.allclose(Hv, fd, rtol=1e-5, atol=1e-6 * np.abs(Hv).max())


def test_probability_energy_infinite_where_data_have_zero_density():
    E = energy("P", False)
    P = random_P(E.grid)
    i, j = np.argwhere(E.N > 0)[0]
    P[i, j] = 0.0
    assert E.at(P).value == np.inf


# ---------------------------------------------------------------------------------------------- mixtures
@pytest.mark.parametrize("fld", ["L", "P"])
def test_mixture_beta_to_zero_gives_prior_weights(fld):
    E = energy(fld, True, beta=1e-9)
    phi = random_L(E.grid) if fld == "L" else random_P(E.grid)
    a = E.at(phi).mixing
    assert np.allclose(a, [0.3, 0.7], atol=1e-7)
    # while at beta = 1 the components are far from p_j on this field (the test above can fail)
    assert not np.allclose(energy(fld, True, beta=1.0).at(phi).mixing, [0.3, 0.7], atol=1e-3)


@pytest.mark.parametrize("beta", [1e-6, 1e-2, 1.0, 1e2, 1e6])
def test_mixture_finite_and_normalised_for_extreme_beta(beta):
    """Templates far apart: beta lambda (E_02 - E_01) reaches ~1e9 at beta = 1e6; nothing may overflow."""
    g = small_grid()
    K = PriorOperator(g, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0)
    t1 = normalise_log(np.zeros(g.shape), g.hy)
    X, Y = g.mesh
    t2 = normalise_log(-5.0 * Y ** 2 + 3 * np.cos(X), g.hy)
    E = LogDensityEnergy(g, make_data(g), Prior(K, 10.0, [t1, t2], [0.5, 0.5], beta))
    L = normalise_log(0.8 * t1 + 0.2 * t2, g.hy)  # closer to t_1: lambda (E_02 - E_01) is large
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        pt = E.at(L)
        vals = (pt.value, pt.gradient, pt.hessp(np.ones(g.shape)), pt.mixing)
    assert all(np.all(np.isfinite(v)) for v in vals)
    assert pt.mixing.sum() == pytest.approx(1.0, abs=1e-14)
    assert np.all(pt.mixing >= 0)
    lamE0 = [0.5 * E.prior.lam * E.prior.K.quadratic(L - t) for t in (t1, t2)]
    assert lamE0[1] - lamE0[0] > 100
    if beta >= 1e2:
        assert pt.mixing[0] > 1 - 1e-12   # winner takes all: the nearer template
    if beta <= 1e-6:
        assert np.allclose(pt.mixing, 0.5, atol=1e-2)


@pytest.mark.parametrize("fld", ["L", "P"])
def test_swapping_components_swaps_mixing(fld):
    g = small_grid()
    K = PriorOperator(g, 1.3, 0.8, 0.05, 1.0)
    t1, t2 = templates(g, fld)
    cls = LogDensityEnergy if fld == "L" else ProbabilityEnergy
    N = make_data(g)
    E12 = cls(g, N, Prior(K, LAM, [t1, t2], [0.2, 0.8], BETA))
    E21 = cls(g, N, Prior(K, LAM, [t2, t1], [0.8, 0.2], BETA))
    phi = random_L(g) if fld == "L" else random_P(g)
    a, b = E12.at(phi), E21.at(phi)
    assert np.allclose(a.mixing, b.mixing[::-1], rtol=1e-12)
    assert a.value == pytest.approx(b.value, rel=1e-13)
    assert np.allclose(a.gradient, b.gradient, rtol=1e-11, atol=1e-13)
    v = np.random.default_rng(0).normal(size=g.shape)
    assert np.allclose(a.hessp(v), b.hessp(v), rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("fld", ["L", "P"])
def test_one_component_and_identical_components_equal_single_gaussian(fld):
    """A one-component mixture, or two identical templates with any p_j and beta, is the single Gaussian prior
    (lambda/2)(phi - t, K (phi - t)), here written out with the dense K."""
    g = small_grid()
    K = PriorOperator(g, 1.3, 0.8, 0.05, 1.0)
    t = templates(g, fld)[0]
    cls = LogDensityEnergy if fld == "L" else ProbabilityEnergy
    N = make_data(g)
    phi = random_L(g) if fld == "L" else random_P(g)
    d = (phi - t).ravel()
    data_term = -np.sum(N * phi) if fld == "L" else -np.sum(N * np.log(phi))
    expected = data_term + 0.5 * LAM * d @ K.matrix.toarray() @ d * g.hx * g.hy
    single = cls(g, N, Prior(K, LAM, [t]))
    twin = cls(g, N, Prior(K, LAM, [t, t], [0.1, 0.9], 3.0))
    v = np.random.default_rng(1).normal(size=g.shape)
    for E in (single, twin):
        pt = E.at(phi)
        assert pt.value == pytest.approx(expected, rel=1e-12)
    assert np.allclose(twin.at(phi).gradient, single.at(phi).gradient, rtol=1e-12, atol=1e-12)
    assert np.allclose(twin.at(phi).hessp(v), single.at(phi).hessp(v), rtol=1e-12, atol=1e-12)
    assert np.allclose(twin.at(phi).mixing, [0.1, 0.9], rtol=1e-12)


@pytest.mark.parametrize("fld", ["L", "P"])
def test_zero_template_and_training_error_against_written_out_formulas(fld):
    """No template (the zero template, whose energy skips the subtraction) against the formula with a dense K and
    against an explicit template of zeros; the training error kept with the energy (its data nodes found once) and
    :func:`metrics.training_error` against (710) written out, with and without data."""
    from bftcore.foundations import metrics
    g = small_grid()
    K = PriorOperator(g, 1.3, 0.8, 0.05, 1.0)
    cls = LogDensityEnergy if fld == "L" else ProbabilityEnergy
    N = make_data(g)
    phi = random_L(g) if fld == "L" else random_P(g)
    data_term = -np.sum(N * phi) if fld == "L" else -np.sum(N * np.log(phi))
    expected = data_term + 0.5 * LAM * phi.ravel() @ K.matrix.toarray() @ phi.ravel() * g.hx * g.hy
    none, zeros = cls(g, N, Prior(K, LAM)), cls(g, N, Prior(K, LAM, [np.zeros(g.shape)]))
    assert none.prior.zero_template and not zeros.prior.zero_template
    assert none.at(phi).value == pytest.approx(expected, rel=1e-12)
    assert zeros.at(phi).value == pytest.approx(expected, rel=1e-12)
    assert np.allclose(none.at(phi).gradient, zeros.at(phi).gradient, rtol=1e-12, atol=1e-12)
    L = np.log(phi) if fld == "P" else phi
    written_out = -float(np.sum(N * L)) / float(N.sum())  # (710), over every node
    assert none.training_error(L) == pytest.approx(written_out, rel=1e-12)
    assert metrics.training_error(L, N) == pytest.approx(written_out, rel=1e-12)
    empty = cls(g, np.zeros(g.shape), Prior(K, LAM))
    assert np.isnan(empty.training_error(L)) and np.isnan(metrics.training_error(L, np.zeros(g.shape)))


def test_mixture_gradient_uses_effective_template():
    """(716): the mixture gradient equals the single-Gaussian gradient with t̄ = sum_j a_j t_j."""
    E = energy("L", True)
    g = E.grid
    L = random_L(g)
    pt = E.at(L)
    tbar = np.tensordot(pt.mixing, E.prior.templates, axes=1)
    eff = LogDensityEnergy(g, E.N, Prior(E.prior.K, LAM, [tbar]))
    assert np.allclose(pt.gradient, eff.at(L).gradient, rtol=1e-11, atol=1e-12)


def test_zero_lambda_is_rejected():
    """The gate refuses lambda = 0 by name; the prior itself only asserts (it is built from validated documents)."""
    with pytest.raises(ConfigError, match="prior.lambda"):
        validate_config({"prior": {"lambda": 0.0}})
    with pytest.raises(AssertionError, match="lambda"):
        Prior(PriorOperator(small_grid()), 0.0)
