"""The 2-D density versions of the local priors (bftcore.models.local_density, issue 29): the local prior mixture
on L = ln P with EM on the labels, the log-stiffness hyperfield, cuts; each against an independent route."""
import numpy as np
import pytest

from bftcore.foundations.grid import Axis, Grid
from bftcore.foundations.solvers import iterate
from bftcore.models import local_density as ld
from bftcore.models.density import LogDensityEnergy, Prior, normalise_log


def two_branch_data(seed: int, n: int = 30, a: float = 1.0, b: float = 0.0, c: float = 1.0, d: float = 0.0):
    """Two branches in y (0.5 and 1.5) over x in [0, 1], y in [0, 2], mapped by x -> a x + b, y -> c y + d."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, n)
    y = np.clip(np.where(rng.uniform(0, 1, n) < 0.5, 0.5, 1.5) + 0.2 * rng.normal(size=n), 0, 2)
    return np.column_stack([a * x + b, c * y + d])


def make_grid(a: float = 1.0, b: float = 0.0, c: float = 1.0, d: float = 0.0, nx: int = 9, ny: int = 10) -> Grid:
    return Grid(Axis(b, a + b, nx, "neumann"), Axis(d, 2 * c + d, ny, "neumann"))


def reference_fit(grid, data, lam, lambda_x, lambda_y, template=None):
    """The ordinary Gaussian-prior density fit of bftcore.models.density (its own Newton-CG), to its rounding."""
    from bftcore.foundations.operators import PriorOperator

    K = PriorOperator(grid, lambda_x, lambda_y, 0.0, 1.0)
    E = LogDensityEnergy(grid, grid.counts(data), Prior(K, lam, None if template is None else [template]))
    rec = list(iterate(E, np.zeros(grid.shape), method="newton", max_iter=200, tol=1e-24))[-1]
    assert rec.converged
    return E, rec.field


# ------------------------------------------------------------------------------------------------ the mixture
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_em_energy_never_increases(seed):
    """EM on the labels: E(L) after every sweep <= before (to the energy's rounding, 1e-15 relative), on random
    problems with filter switching and with template switching; and S(L; a) = E(L) where a was taken."""
    rng = np.random.default_rng(100 + seed)
    grid = make_grid()
    data = two_branch_data(seed)
    kinds = [dict(stiffness=[1.0, rng.uniform(0.001, 0.05)], pis=[0.9, 0.1]),
             dict(stiffness=[2.0], pis=[0.5, 0.5], templates=rng.normal(size=(2,) + grid.shape))]
    for kw in kinds:
        E = ld.local_mixture_density(grid, data, rng.uniform(0.2, 1.0), beta=rng.uniform(0.5, 3.0), lambda_x=1.0,
                                     lambda_y=0.5, **kw)
        fit = ld.fit_local_density(E, L0=rng.normal(size=grid.shape), max_iter=1000)
        assert fit.converged
        e = np.asarray(fit.energy)
        assert np.all(np.diff(e) <= 1e-15 * np.abs(e[1:])), np.diff(e).max()
        assert e[-1] < e[0]
        L = normalise_log(rng.normal(size=grid.shape), grid.hy)
        pt = E.at(L)
        assert E.surrogate(pt.responsibilities).at(L).value == pytest.approx(pt.value, rel=1e-13)


def test_one_component_is_the_gaussian_density_fit():
    """m = 1 (beta = 1, r = 1, with a template): the fit of bftcore.models.density with the same lambda and operator.
    Measured agreement 1e-15; asserted 1e-10.  Value, g-gradient and Hessian actions agree at a random L."""
    grid = make_grid()
    data = two_branch_data(5)
    t = 0.3 * np.sin(grid.mesh[1]) - 0.2 * grid.mesh[0]
    E = ld.local_mixture_density(grid, data, 0.5, [1.0], [1.0], 1.0, 1.0, 0.7, templates=t[None])
    ref, L_ref = reference_fit(grid, data, 0.5, 1.0, 0.7, t)
    L = normalise_log(np.random.default_rng(3).normal(size=grid.shape), grid.hy)
    v = np.random.default_rng(4).normal(size=grid.shape)
    a, b = E.at(L), ref.at(L)
    assert a.value == pytest.approx(b.value, rel=1e-13)
    assert np.allclose(a.gradient, b.gradient, rtol=1e-12, atol=1e-12)
    assert np.allclose(a.hessp(v), b.hessp(v), rtol=1e-10, atol=1e-12)
    assert np.allclose(a.hessp(v, convexified=True), b.hessp(v, convexified=True), rtol=1e-10, atol=1e-12)
    fit = ld.fit_local_density(E, tol=1e-14)
    assert fit.converged
    assert np.max(np.abs(fit.L - L_ref)) < 1e-10


@pytest.mark.parametrize("templates", [False, True])
def test_full_energy_gradient_matches_finite_differences(templates):
    """The g-gradient of the non-quadratic mixture energy against central differences of E(normalise(L + e v)); the
    edge curvature against differences of the edge derivative."""
    rng = np.random.default_rng(7)
    grid = make_grid(nx=6, ny=7)
    data = two_branch_data(2, 15)
    kw = dict(stiffness=[1.0], pis=[0.6, 0.4], templates=rng.normal(size=(2,) + grid.shape)) if templates else \
        dict(stiffness=[1.0, 0.01, 0.2], pis=[0.7, 0.2, 0.1])
    E = ld.local_mixture_density(grid, data, 0.4, beta=2.0, lambda_x=1.0, lambda_y=0.8, **kw)
    L = normalise_log(rng.normal(size=grid.shape), grid.hy)
    pt = E.at(L)
    for _ in range(3):
        v = rng.normal(size=grid.shape)
        eps = 1e-6
        fd = (E.at(E.normalise(L + eps * v)).value - E.at(E.normalise(L - eps * v)).value) / (2 * eps)
        assert np.vdot(pt.gradient, v) == pytest.approx(fd, rel=1e-6, abs=1e-8)
    w = rng.normal(size=grid.shape)
    eps = 1e-6
    up, down = E.at(L + eps * w), E.at(L - eps * w)
    du = E.lattice.G @ np.ravel(w)
    fd = (up.edge_derivative - down.edge_derivative) / (2 * eps)
    assert np.allclose(fd, pt.edge_curvature * du, rtol=1e-5, atol=1e-6)


def test_units_rescaled_data_give_the_rescaled_answer():
    """x -> a x + b, y -> c y + d with lambda -> lambda/(a c), lambda_x -> a^2 lambda_x, lambda_y -> c^2 lambda_y
    (the same Gaussian prior): the mixture fit is L - ln c, the labels the same; likewise the hyperfield."""
    a, b, c, d = 3.0, -2.0, 0.05, 7.0
    data, data2 = two_branch_data(4), two_branch_data(4, a=a, b=b, c=c, d=d)
    g1, g2 = make_grid(), make_grid(a, b, c, d)
    kw = dict(stiffness=[1.0, 0.02], pis=[0.9, 0.1], beta=2.0)
    f1 = ld.fit_local_density(ld.local_mixture_density(g1, data, 0.6, lambda_x=1.0, lambda_y=0.5, **kw), tol=1e-13)
    f2 = ld.fit_local_density(ld.local_mixture_density(g2, data2, 0.6 / (a * c), lambda_x=a * a,
                                                       lambda_y=0.5 * c * c, **kw), tol=1e-13)
    assert f1.converged and f2.converged
    assert np.max(np.abs(f2.L - (f1.L - np.log(c)))) < 1e-8
    assert np.max(np.abs(f2.a - f1.a)) < 1e-8
    h1 = ld.fit_density_hyperfield(ld.density_hyperfield(g1, data, 0.6, 0.2, 2.0, 0.5, 1.0, 0.5), tol=1e-12)
    h2 = ld.fit_density_hyperfield(ld.density_hyperfield(g2, data2, 0.6 / (a * c), 0.2, 2.0, 0.5, a * a,
                                                         0.5 * c * c), tol=1e-12)
    assert np.max(np.abs(h2.L - (h1.L - np.log(c)))) < 1e-8
    assert np.max(np.abs(h2.theta - h1.theta)) < 1e-8


def test_soft_edges_open_at_a_jump_in_x():
    """Data whose conditional density jumps at x = 0.5 (branch y = 0.5 left, y = 1.5 right): started from the soft
    Gaussian fit, EM opens soft x-edges across the jump, on the rows of the branches (where L jumps), and keeps
    every other edge stiff (measured: a_soft = 1.000 on 6 of the 12 edges at x = 0.5, at most 0.006 on x-edges
    further than 0.25 from it, at most 0.012 on y-edges)."""
    rng = np.random.default_rng(11)
    x = rng.uniform(0, 1, 80)
    data = np.column_stack([x, np.clip(np.where(x < 0.5, 0.5, 1.5) + 0.15 * rng.normal(size=80), 0, 2)])
    grid = make_grid(nx=12, ny=12)
    E = ld.local_mixture_density(grid, data, 8.0, [1.0, 0.01], [0.95, 0.05], 1.0, 1.0, 0.2)
    _, L0 = reference_fit(grid, data, 8.0 * 0.01, 1.0, 0.2)
    fit = ld.fit_local_density(E, L0=L0, max_iter=500)
    assert fit.converged
    lat, soft = E.lattice, fit.a[1]
    xe = lat.direction == 0
    near = soft[xe & (np.abs(lat.edge_x - 0.5) < 0.05)]
    assert np.sum(near > 0.99) >= 4
    assert soft[xe & (np.abs(lat.edge_x - 0.5) > 0.25)].max() < 0.05
    assert soft[lat.direction == 1].max() < 0.05


def test_bad_mixture_input_is_named():
    grid = make_grid()
    data = two_branch_data(0)
    with pytest.raises(ValueError, match="periodic"):
        ld.local_mixture_density(Grid(Axis(0, 1, 5, "periodic"), Axis(0, 1, 5, "neumann")), [[0.5, 0.5]], 1.0,
                                 [1.0], [1.0])
    with pytest.raises(ValueError, match="stiffness"):
        ld.local_mixture_density(grid, data, 1.0, [1.0, 0.0], [0.5, 0.5])
    with pytest.raises(ValueError, match="pis"):
        ld.local_mixture_density(grid, data, 1.0, [1.0, 0.1], [0.5, 0.6])
    with pytest.raises(ValueError, match="beta"):
        ld.local_mixture_density(grid, data, 1.0, [1.0, 0.1], [0.5, 0.5], beta=0.0)
    with pytest.raises(ValueError, match="between two nodes"):
        ld.local_mixture_density(grid, data, 1.0, [1.0], [1.0], cuts=[0.5])
    with pytest.raises(ValueError, match="outside"):
        ld.local_mixture_density(grid, data, 1.0, [1.0], [1.0], cuts=[1.5])


# ------------------------------------------------------------------------------------------------ the hyperfield
def test_hyperfield_alternation_is_monotone_and_theta_gradient_matches_fd():
    grid = make_grid()
    data = two_branch_data(6)
    model = ld.density_hyperfield(grid, data, 0.5, 0.0, 1.0, 1.0, 1.0, 0.5)
    fit = ld.fit_density_hyperfield(model)
    assert fit.converged
    e = np.asarray(fit.energy)
    assert np.all(np.diff(e) <= 1e-15 * np.abs(e[1:]))
    rng = np.random.default_rng(2)
    theta = rng.normal(size=model.lattice.n_edges)
    L = normalise_log(rng.normal(size=grid.shape), grid.hy)
    g = model.theta_gradient(theta, L)
    for _ in range(3):
        v = rng.normal(size=theta.size)
        eps = 1e-6
        fd = (model.theta_energy(theta + eps * v, L) - model.theta_energy(theta - eps * v, L)) / (2 * eps)
        assert g @ v == pytest.approx(fd, rel=1e-7)
    # the theta of the fit is stationary and the L of the fit solves the L problem at that theta
    assert np.max(np.abs(model.theta_gradient(fit.theta, fit.L))) < 1e-8
    assert model.L_energy(fit.theta).at(fit.L).residual < 1e-8


def test_hyperfield_stiff_hyperprior_is_the_gaussian_fit_at_theta0():
    """gamma_theta -> infinity: theta = theta_0 + O(1/gamma) and L the Gaussian density fit at lambda e^theta_0."""
    grid = make_grid()
    data = two_branch_data(8)
    theta0 = 0.7
    fit = ld.fit_density_hyperfield(ld.density_hyperfield(grid, data, 0.5, theta0, 1e9, 1.0, 1.0, 0.5))
    _, L_ref = reference_fit(grid, data, 0.5 * np.exp(theta0), 1.0, 0.5)
    assert np.max(np.abs(fit.theta - theta0)) < 1e-8
    assert np.max(np.abs(fit.L - L_ref)) < 1e-7


def test_hyperfield_runaway_is_reported_not_nan():
    grid = make_grid()
    data = two_branch_data(6)
    with pytest.raises(ld.HyperpriorTooWeak, match=r"too weak.*runs away.*raise gamma_theta"):
        ld.fit_density_hyperfield(ld.density_hyperfield(grid, data, 0.5, 0.0, 0.01, 0.01, 1.0, 0.5))
    with pytest.raises(ValueError, match="gamma_theta"):
        ld.density_hyperfield(grid, data, 0.5, 0.0, -1.0, 0.01)


def test_local_log_det_is_exact_on_chains_and_its_2d_gap_is_measured():
    """-1/2 sum theta against the exact -1/2 ln det' G^T diag(e^theta) G (both relative to theta = 0).  Exact when
    the edges form chains (lambda_x = 0: one chain per x column).  On the 2-D 5 x 5 lattice (40 edges, 25 nodes)
    the exact slope along a uniform shift is -1/2 (nodes - 1) = -12, the local one -1/2 edges = -20 (each edge's
    leverage is 0.6 on average, not 1); for theta ~ N(0, 0.3^2) the exact term is -0.760, the local one -1.245
    (measured).  This is the size of the approximation the module docstring declares."""
    rng = np.random.default_rng(0)
    grid = make_grid(nx=5, ny=5)
    chains = ld.lattice(grid, 1.0, 0.0, 1.0)
    theta = rng.normal(size=chains.n_edges)
    exact = ld.exact_log_det_term(chains, theta) - ld.exact_log_det_term(chains, np.zeros_like(theta))
    assert exact == pytest.approx(-0.5 * theta.sum(), abs=1e-9)
    full = ld.lattice(grid, 1.0, 1.0, 1.0)
    assert full.n_edges == 40
    theta = 0.3 * rng.normal(size=full.n_edges)
    exact = ld.exact_log_det_term(full, theta) - ld.exact_log_det_term(full, np.zeros_like(theta))
    assert exact == pytest.approx(-0.760, abs=1e-3)
    assert -0.5 * theta.sum() == pytest.approx(-1.245, abs=1e-3)
    one = np.ones(full.n_edges)
    shift = ld.exact_log_det_term(full, one) - ld.exact_log_det_term(full, 0 * one)
    assert shift == pytest.approx(-0.5 * (grid.size - 1), rel=1e-10)


# ------------------------------------------------------------------------------------------------ cuts
def test_cut_makes_the_left_fit_independent_of_the_right_data():
    grid = make_grid(nx=9, ny=10)
    data = two_branch_data(3, 40)
    cut = 0.5625  # between x = 0.5 and 0.625
    left = data[data[:, 0] < cut]
    right = two_branch_data(9, 25)
    right = right[right[:, 0] > cut]
    right_moved = right.copy()
    right_moved[:, 1] = 2.0 - right_moved[:, 1] ** 1.3 / 2 ** 0.3
    cols = grid.x.nodes < cut
    kw = dict(lam=0.5, stiffness=[1.0, 0.02], pis=[0.9, 0.1], lambda_x=1.0, lambda_y=0.5, cuts=[cut])
    fits = [ld.fit_local_density(ld.local_mixture_density(grid, d, **kw), tol=1e-14)
            for d in (np.vstack([left, right]), np.vstack([left, right_moved]), left)]
    assert all(f.converged for f in fits)
    for f in fits[1:]:
        assert np.max(np.abs(f.L[cols] - fits[0].L[cols])) < 1e-10
    # without the cut the right data do move the left fit
    kw["cuts"] = []
    a, b = (ld.fit_local_density(ld.local_mixture_density(grid, d, **kw), tol=1e-14)
            for d in (np.vstack([left, right]), left))
    assert np.max(np.abs(a.L[cols] - b.L[cols])) > 1e-3
    # the hyperfield: theta's neighbours across the cut are dropped too
    hs = [ld.fit_density_hyperfield(ld.density_hyperfield(grid, d, 0.5, 0.0, 1.0, 1.0, 1.0, 0.5, cuts=[cut]),
                                    tol=1e-13) for d in (np.vstack([left, right]), left)]
    assert np.max(np.abs(hs[0].L[cols] - hs[1].L[cols])) < 1e-10
