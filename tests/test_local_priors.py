"""Local prior mixtures (Sect. 6.4), hyperfields (Sects. 5.3.3, 5.6) and cuts ((519)-(522)) on a 1-D chain."""
import numpy as np
import pytest
from scipy.optimize import minimize

from bftcore.foundations.grid import Axis
from bftcore.models.local_priors import (
    HyperpriorTooWeak,
    beta_continuation,
    hyperfield,
    hyperfield_fit,
    local_mixture,
    local_mixture_fit,
    mass_field_fit,
)
from bftcore.models.regression import RegressionModel

AXIS = Axis(0.0, 1.0, 101, "neumann")
SIGMA = 0.1
STIFF_SOFT = (0.1, 1e-4)         # kappa per edge, the digest's filter switching
PI = (0.95, 0.05)
HYPER = dict(theta0=np.log(0.1), gamma_theta=1.0, mu_theta=1.0)
SOFT_FRACTION = 0.1              # a hyperfield edge is soft when e^theta < 0.1 * its median


def step_data():
    """The issue's step: 40 distinct nodes of 101 on [0, 1], y = step + 0.1 N(0, 1), one generator (seed 0) for the
    nodes and then the noise.  The truth is 1 for x > 0.5: the node at 0.5 (no datum there) counts as "before"."""
    rng = np.random.default_rng(0)
    idx = rng.choice(101, 40, replace=False)
    truth = (AXIS.nodes > 0.5).astype(float)
    return AXIS.nodes[idx], truth[idx] + 0.1 * rng.standard_normal(40), truth


def small_data(n=21, seed=3):
    ax = Axis(0.0, 2.0, n, "neumann")
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 2, 12)
    y = np.where(x > 1.03, 1.0, 0.0) + 0.1 * rng.standard_normal(12)
    return ax, x, y


def rmse(phi, truth):
    return float(np.sqrt(np.mean((phi - truth) ** 2)))


def gaussian_fit(ax, x, y, lam):
    """The Gaussian regression fit of bftcore.models.regression (template 0, l2 = 1): the independent route."""
    model = RegressionModel(ax, np.column_stack([x, y]), [{"kind": "constant", "value": 0.0}], lam=lam, l2=1.0)
    return model.component_solutions[0]


def fd_gradient(f, v, eps=1e-6):
    g = np.zeros_like(v)
    for i in range(v.size):
        e = np.zeros_like(v)
        e[i] = eps
        g[i] = (f(v + e) - f(v - e)) / (2 * eps)
    return g


# ------------------------------------------------------------------------------------------ local mixture
@pytest.mark.parametrize("beta", [1.0, 2.5])
def test_one_alternative_is_the_gaussian_regression_fit(beta):
    """m = 1 with the kept 1/2: lambda hx = sigma^2 beta kappa gives regression.py's fit to 1e-10."""
    ax, x, y = small_data()
    lam = 0.37
    kappa = lam * ax.h / (SIGMA ** 2 * beta)
    fit = local_mixture_fit(x, y, ax, SIGMA, [kappa], [1.0], beta=beta)
    assert fit.converged
    np.testing.assert_allclose(fit.phi, gaussian_fit(ax, x, y, lam), rtol=0, atol=1e-10)


def test_energy_never_increases_under_em():
    x, y, _ = step_data()
    start = local_mixture_fit(x, y, AXIS, SIGMA, [0.01], [1.0]).phi
    for kappas, pis in ((STIFF_SOFT, PI), ((1.0, 1e-4), PI), ((1.0, 0.1, 1e-3), (0.5, 0.3, 0.2))):
        fit = local_mixture_fit(x, y, AXIS, SIGMA, kappas, pis, beta=1.0, init=start)
        e = np.array(fit.energy)
        assert fit.converged and len(e) > 2
        assert np.all(np.diff(e) <= 1e-10 * np.abs(e[:-1])), np.diff(e).max()


def test_responsibilities_are_eq_588_evaluated_directly():
    ax, x, y = small_data()
    model = local_mixture(x, y, ax, SIGMA, (0.5, 0.02, 1e-3), (0.6, 0.3, 0.1), beta=0.7)
    phi = np.sin(3 * ax.nodes)
    a = model.responsibilities(phi)
    for e in range(ax.n - 1):
        u = (phi[e + 1] - phi[e]) / ax.h
        w = np.array([p * np.exp(-0.7 / 2 * k * u ** 2 + 0.5 * np.log(k)) for k, p in zip(model.kappas, model.pis)])
        np.testing.assert_allclose(a[:, e], w / w.sum(), rtol=1e-12)
    # template switching: ln Z = 0 and omega_k = sqrt(kappa) D (phi - t_k)
    t = np.vstack([np.zeros(ax.n), ax.nodes])
    model = local_mixture(x, y, ax, SIGMA, [0.3], (0.4, 0.6), beta=2.0, templates=t)
    a = model.responsibilities(phi)
    for e in range(ax.n - 1):
        om = [np.sqrt(0.3) * ((phi[e + 1] - tk[e + 1]) - (phi[e] - tk[e])) / ax.h for tk in t]
        w = np.array([0.4 * np.exp(-om[0] ** 2), 0.6 * np.exp(-om[1] ** 2)])
        np.testing.assert_allclose(a[:, e], w / w.sum(), rtol=1e-12)


@pytest.mark.parametrize("templates", [None, "linear"])
def test_converged_field_is_stationary(templates):
    """The finite-difference gradient of E at the EM fixed point vanishes (and agrees with the analytic one)."""
    ax, x, y = small_data()
    if templates is None:
        model_args = dict(kappas=(0.05, 1e-4), pis=(0.9, 0.1))
    else:
        model_args = dict(kappas=[0.5], pis=(0.5, 0.5), templates=np.vstack([np.zeros(ax.n), 3 * (ax.nodes - 1)]))
    fit = local_mixture_fit(x, y, ax, SIGMA, beta=1.5, tol=1e-13, max_iter=5000, **model_args)
    assert fit.converged and np.ptp(fit.a) > 0.9  # labels decided differently on different edges
    g = fd_gradient(fit.model.value, fit.phi)
    scale = np.max(np.abs(fit.model.chain.KD @ fit.phi))
    assert np.max(np.abs(g)) < 1e-6 * scale
    probe = fit.phi + 0.1 * np.cos(5 * ax.nodes)
    np.testing.assert_allclose(fit.model.gradient(probe), fd_gradient(fit.model.value, probe), rtol=1e-5, atol=1e-6)


def test_small_beta_limit_of_the_responsibilities():
    """beta -> 0: a_k -> pi_k e^{-ln Z_k} / sum (pi_k sqrt(kappa_k) / sum for filters, pi_k for templates)."""
    ax, x, y = small_data()
    kappas, pis = np.array([0.5, 1e-3]), np.array([0.7, 0.3])
    fit = local_mixture_fit(x, y, ax, SIGMA, kappas, pis, beta=1e-9)
    target = pis * np.sqrt(kappas) / np.sum(pis * np.sqrt(kappas))
    np.testing.assert_allclose(fit.a, np.broadcast_to(target[:, None], fit.a.shape), atol=1e-8)
    t = np.vstack([np.zeros(ax.n), 3 * ax.nodes])
    fit = local_mixture_fit(x, y, ax, SIGMA, [0.5], pis, beta=1e-9, templates=t)
    np.testing.assert_allclose(fit.a, np.broadcast_to(pis[:, None], fit.a.shape), atol=1e-8)


def test_beta_continuation_warm_starts_and_ends_at_a_fixed_point():
    x, y, truth = step_data()
    betas = np.geomspace(0.05, 1.0, 6)
    fits = beta_continuation(x, y, AXIS, SIGMA, STIFF_SOFT, PI, betas)
    assert [f.beta for f in fits] == pytest.approx(list(betas))
    assert all(f.converged for f in fits)
    # each warm start is the previous solution: the EM trace of the next beta starts at E(previous phi)
    for prev, nxt in zip(fits, fits[1:]):
        assert nxt.energy[0] == pytest.approx(nxt.model.value(prev.phi), rel=1e-14)
    direct = local_mixture_fit(x, y, AXIS, SIGMA, STIFF_SOFT, PI, beta=1.0, init=fits[-1].phi)
    assert direct.iterations <= 2
    assert np.flatnonzero(fits[-1].a[1] > 0.5).tolist() == [49, 50, 51]


def test_rescaled_units_give_the_rescaled_fit():
    """x -> a x, y -> c y with sigma -> c sigma, kappa -> kappa a^2 / c^2, t_k -> c t_k, cuts -> a cuts (pi, beta
    unchanged) give phi -> c phi and the same responsibilities."""
    ax, x, y = small_data()
    a, c = 7.5, 0.02
    ax2 = Axis(a * ax.min, a * ax.max, ax.n, ax.boundary)
    for extra, extra2 in ((dict(kappas=(0.05, 1e-4)), dict(kappas=(0.05 * a * a / c / c, 1e-4 * a * a / c / c))),
                          (dict(kappas=[0.05], templates=np.vstack([0 * ax.nodes, ax.nodes])),
                           dict(kappas=[0.05 * a * a / c / c], templates=c * np.vstack([0 * ax.nodes, ax.nodes])))):
        f1 = local_mixture_fit(x, y, ax, SIGMA, pis=(0.8, 0.2), beta=1.3, cuts=[0.51], **extra)
        f2 = local_mixture_fit(a * x, c * y, ax2, c * SIGMA, pis=(0.8, 0.2), beta=1.3, cuts=[0.51 * a], **extra2)
        np.testing.assert_allclose(f2.phi, c * f1.phi, rtol=1e-9, atol=1e-12 * c)
        np.testing.assert_allclose(f2.a, f1.a, atol=1e-9)


# ------------------------------------------------------------------------------------------ cuts
def test_a_cut_makes_the_two_sides_independent():
    ax, x, y = small_data()
    left = x < 1.05
    y2 = y.copy()
    y2[~left] += np.linspace(3.0, -2.0, (~left).sum())
    side = ax.nodes < 1.05
    for fit in (lambda yy: local_mixture_fit(x, yy, ax, SIGMA, (0.05, 1e-3), (0.9, 0.1), cuts=[1.05]).phi,
                lambda yy: hyperfield_fit(x, yy, ax, SIGMA, cuts=[1.05], **HYPER).phi):
        p1, p2 = fit(y), fit(y2)
        np.testing.assert_allclose(p2[side], p1[side], rtol=0, atol=1e-12)
        assert np.max(np.abs(p2[~side] - p1[~side])) > 0.1


def test_a_cut_removes_exactly_the_edges_it_crosses():
    ax, x, y = small_data()
    m = local_mixture(x, y, ax, SIGMA, [1.0], [1.0], cuts=[0.45, 1.55])
    assert m.chain.D.shape == (ax.n - 3, ax.n)
    assert sorted(set(range(ax.n - 1)) - set(m.chain.edge_left.tolist())) == [4, 15]
    assert np.allclose(m.chain.D.T @ m.chain.D @ np.ones(ax.n), 0)


# ------------------------------------------------------------------------------------------ hyperfield
def test_hyperfield_joint_energy_is_monotone_and_stationary():
    ax, x, y = small_data()
    fit = hyperfield_fit(x, y, ax, SIGMA, theta0=np.log(0.05), gamma_theta=1.0, mu_theta=0.5, tol=1e-12)
    e = np.array(fit.energy)
    assert fit.converged
    assert np.all(np.diff(e) <= 1e-10 * np.abs(e[:-1]))
    m = fit.model
    assert np.max(np.abs(m.theta_gradient(fit.theta, fit.phi))) < 1e-8
    joint = fd_gradient(lambda p: m.value(p, fit.theta), fit.phi)
    assert np.max(np.abs(joint)) < 1e-6 * np.max(np.abs(m.chain.rhs))


def test_theta_gradient_against_finite_differences():
    ax, x, y = small_data()
    m = hyperfield(x, y, ax, SIGMA, **HYPER)
    phi = np.sin(2 * ax.nodes) + ax.nodes
    theta = np.log(0.1) + 0.3 * np.cos(4 * m.chain.edge_x)
    np.testing.assert_allclose(m.theta_gradient(theta, phi), fd_gradient(lambda t: m.theta_energy(t, phi), theta),
                               rtol=1e-6, atol=1e-7)


def test_theta_step_reaches_the_convex_minimum():
    ax, x, y = small_data()
    m = hyperfield(x, y, ax, SIGMA, theta0=-2.0, gamma_theta=0.5, mu_theta=0.3)
    phi = np.tanh(5 * (ax.nodes - 1.0))
    theta, _ = m.theta_step(np.full(ax.n - 1, -2.0), phi)
    ref = minimize(lambda t: m.theta_energy(t, phi), np.full(ax.n - 1, -2.0), jac=lambda t: m.theta_gradient(t, phi),
                   method="L-BFGS-B", options=dict(ftol=1e-15, gtol=1e-11, maxiter=10000))
    assert m.theta_energy(theta, phi) <= ref.fun + 1e-10
    np.testing.assert_allclose(theta, ref.x, atol=1e-5)


def test_a_weak_hyperprior_is_reported_in_words_not_nan():
    x, y, _ = step_data()
    with pytest.raises(HyperpriorTooWeak, match=r"too weak: the stiffness diverges on flat stretches near "
                                                r"x = 0\.\d+-0\.\d+.*raise gamma_theta") as err:
        hyperfield_fit(x, y, AXIS, SIGMA, theta0=np.log(0.1), gamma_theta=1.0, mu_theta=0.01)
    assert "nan" not in str(err.value).lower()
    # the same data with the demo's hyperprior stay bounded: the verdict is about gamma_theta mu_theta, not the data
    fit = hyperfield_fit(x, y, AXIS, SIGMA, **HYPER)
    assert np.all(np.isfinite(fit.phi)) and np.max(fit.theta - HYPER["theta0"]) < 1.0


# ------------------------------------------------------------------------------------------ the step demo
def test_step_demo_opens_only_at_the_step_and_beats_every_single_gaussian():
    x, y, truth = step_data()
    lams = np.logspace(-4, 1, 51)
    gauss = [rmse(gaussian_fit(AXIS, x, y, lam), truth) for lam in lams]
    best = min(gauss)
    near = lambda ex: np.all(np.abs(ex - 0.5) <= 2 * AXIS.h)  # noqa: E731  edges within two cells of the step

    start = local_mixture_fit(x, y, AXIS, SIGMA, [0.01], [1.0]).phi  # the Gaussian fit at lambda = 0.01
    mix = local_mixture_fit(x, y, AXIS, SIGMA, STIFF_SOFT, PI, beta=1.0, init=start)
    opened = mix.edge_x[mix.a[1] > 0.5]
    assert mix.converged and opened.size >= 1 and near(opened)
    assert rmse(mix.phi, truth) < best

    hf = hyperfield_fit(x, y, AXIS, SIGMA, **HYPER)
    s = hf.stiffness
    soft = hf.edge_x[s < SOFT_FRACTION * np.median(s)]
    assert hf.converged and soft.size >= 1 and near(soft)
    assert rmse(hf.phi, truth) < best


def test_too_stiff_a_stiff_state_opens_spurious_edges():
    """The over-flexibility warning (L.3029): with kappa_stiff = 1 edges open at noise, away from the step."""
    x, y, _ = step_data()
    start = local_mixture_fit(x, y, AXIS, SIGMA, [0.01], [1.0]).phi
    fit = local_mixture_fit(x, y, AXIS, SIGMA, (1.0, 1e-4), PI, beta=1.0, init=start)
    opened = fit.edge_x[fit.a[1] > 0.5]
    assert np.any(np.abs(opened - 0.5) > 0.1)


# ------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("kw, msg", [
    (dict(pis=(0.5, 0.4)), "pis .* sum to 1"),
    (dict(kappas=(0.1, 0.0)), "kappas .* > 0"),
    (dict(kappas=(0.1, -1.0)), "kappas .* > 0"),
    (dict(kappas=[], pis=[]), "at least one"),
    (dict(cuts=[1.5]), "cut at x = 1.5 is outside"),
    (dict(cuts=[0.5]), "falls on a node"),
    (dict(cuts=[0.025, 0.045]), r"block x in \[0.03, 0.04\] between cuts has no data"),
    (dict(beta=0.0), "beta .* > 0"),
    (dict(beta=-1.0), "beta .* > 0"),
    (dict(pis=(0.5, 0.5, 0.0)), "one prior probability per alternative"),
])
def test_bad_input_names_the_parameter(kw, msg):
    x, y, _ = step_data()
    args = dict(kappas=STIFF_SOFT, pis=PI, beta=1.0)
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        local_mixture_fit(x, y, AXIS, SIGMA, **args)


def test_a_periodic_axis_is_refused():
    x, y, _ = step_data()
    with pytest.raises(ValueError, match="periodic.*'neumann' or 'free'"):
        local_mixture_fit(x, y, Axis(0.0, 1.0, 101, "periodic"), SIGMA, STIFF_SOFT, PI)


@pytest.mark.parametrize("kw, msg", [(dict(gamma_theta=0.0), "gamma_theta"), (dict(mu_theta=-1.0), "mu_theta"),
                                     (dict(theta0=np.nan), "theta0"), (dict(cuts=[-0.1]), "outside")])
def test_bad_hyperfield_input(kw, msg):
    x, y, _ = step_data()
    args = dict(HYPER)
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        hyperfield_fit(x, y, AXIS, SIGMA, **args)


def test_rescaled_units_give_the_rescaled_hyperfield_fit():
    """theta_0 -> theta_0 + ln(a^2/c^2), gamma_theta, mu_theta unchanged: phi -> c phi, theta -> theta + ln(a^2/c^2)."""
    ax, x, y = small_data()
    a, c = 7.5, 0.02
    ax2 = Axis(a * ax.min, a * ax.max, ax.n, ax.boundary)
    f1 = hyperfield_fit(x, y, ax, SIGMA, theta0=np.log(0.05), gamma_theta=1.0, mu_theta=0.5, tol=1e-12)
    f2 = hyperfield_fit(a * x, c * y, ax2, c * SIGMA, theta0=np.log(0.05 * a * a / c / c), gamma_theta=1.0,
                        mu_theta=0.5, tol=1e-12)
    np.testing.assert_allclose(f2.phi, c * f1.phi, rtol=1e-8, atol=1e-10 * c)
    np.testing.assert_allclose(f2.theta - f1.theta, np.log(a * a / c / c), atol=1e-8)


# ------------------------------------------------------------------------------------------ local mass field
def test_mass_field_log_det_and_inverse_diagonal_against_dense_algebra():
    ax, x, y = small_data()
    model = mass_field_fit(x, y, ax, SIGMA, kappa=0.05, theta0=0.0, gamma_theta=1.0, mu_theta=0.5, cuts=[1.05],
                           max_iter=1).model
    theta = np.random.default_rng(2).normal(size=ax.n)
    K = np.diag(np.exp(theta)) + 0.05 * (model.chain.D.T @ model.chain.D).toarray()
    ld, z = model.log_det(theta)
    assert ld == pytest.approx(np.linalg.slogdet(K)[1], abs=1e-12)
    np.testing.assert_allclose(z, np.diag(np.linalg.inv(K)), rtol=1e-12)
    phi = np.sin(3 * ax.nodes)
    np.testing.assert_allclose(model.theta_gradient(theta, phi),
                               fd_gradient(lambda t: model.theta_energy(t, phi), theta), rtol=1e-6, atol=1e-7)


def test_mass_field_joint_energy_is_monotone_and_stationary():
    ax, x, y = small_data()
    fit = mass_field_fit(x, y, ax, SIGMA, kappa=0.05, theta0=np.log(10.0), gamma_theta=0.3, mu_theta=1.0,
                         template=np.full(ax.n, 0.5), tol=1e-10)
    e = np.array(fit.energy)
    assert fit.converged and e[0] - e[-1] > 1.0 and np.ptp(fit.theta) > 1.0
    assert np.all(np.diff(e) <= 1e-12 * np.abs(e[:-1]))
    m = fit.model
    assert np.max(np.abs(m.theta_gradient(fit.theta, fit.phi))) < 1e-6
    assert np.max(np.abs(fd_gradient(lambda p: m.value(p, fit.theta), fit.phi))) < 1e-6 * np.max(m.chain.rhs)


def test_mass_field_bad_kappa():
    ax, x, y = small_data()
    with pytest.raises(ValueError, match="kappa .* > 0"):
        mass_field_fit(x, y, ax, SIGMA, kappa=0.0, theta0=0.0, gamma_theta=1.0, mu_theta=1.0)


def test_a_weak_mass_hyperprior_is_reported():
    """With gamma_theta mu_theta = 0.01 the mass on the data-free end (x > 1.8) copies the template at infinite mass."""
    ax, x, y = small_data()
    with pytest.raises(HyperpriorTooWeak, match=r"local mass diverges near x = 1\.9-2; raise gamma_theta"):
        mass_field_fit(x, y, ax, SIGMA, kappa=0.05, theta0=np.log(10.0), gamma_theta=0.1, mu_theta=0.1,
                       template=np.full(ax.n, 0.5))
