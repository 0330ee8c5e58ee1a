"""Replica / variational learning curves of GP regression (Malzahn & Opper, seed 002; notes §1.2-§1.6).

The theory is an approximation, so it is checked three ways: against the notes' table (§1.5 B), against real
resampling simulated here with the textbook GP formulas (an independent route), and through the exact identities
of §1.6 (invariants 1-6).
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.optimize import brentq

from bftcore.foundations.limits import blas_threads
from bftcore.models.replica import (
    DENSE_PRECISION_MAX_SITES,
    ReplicaConvergenceError,
    _posterior_covariance,
    bootstrap_curve,
    bootstrap_state,
    teacher_curve,
    teacher_curve_from_precision,
    teacher_state,
)

# ------------------------------------------------------------------------------------------ §1.5 B: the table

TABLE_M = [5, 20, 50, 100, 200, 400, 800, 1600]
# the rows as printed in the notes (strings: the number of printed digits sets the rounding tolerance)
TABLE_THEORY_PV = ["0.401", "0.0712", "0.0242", "0.01174", "0.00594", "0.00306", "0.00159", "0.00083"]
TABLE_SIM_PV = ["0.443", "0.0854", "0.0256", "0.01180", "0.00596", "0.00306", "0.00159", "0.00083"]
TABLE_THEORY_EPS = ["0.218", "0.108", "0.0845", "0.0769", "0.0730", "0.0708", "0.0694", "0.0684"]
TABLE_SIM_EPS = ["0.238", "0.109", "0.0850", "0.0768", "0.0729", "0.0708", "0.0694", "0.0684"]
SIGMA2 = 0.09


def table_setup(seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """N = 200, x ~ U(0, 1), y = sin 2 pi x + 0.3 noise, K = exp(-(x - x')^2 / 0.02) (notes §1.5 B).

    ``np.random.default_rng(1)``, x drawn before the noise, reproduces all 16 theory numbers of the table to their
    printed digits, so seed 1 is taken to be the notes' draw."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, 200)
    y = np.sin(2 * np.pi * x) + 0.3 * rng.standard_normal(200)
    K = np.exp(-(x[:, None] - x[None, :]) ** 2 / 0.02)
    return x, y, K


def half_unit(printed: str) -> float:
    """Half a unit in the last printed digit of a decimal string."""
    return 0.5 * 10.0 ** -len(printed.split(".")[1])


def simulate_bootstrap(K: np.ndarray, y: np.ndarray, noise_var: float, m: int, resamples: int,
                       rng: np.random.Generator) -> tuple[float, float, float, float]:
    """Real resampling: m of the N points drawn with replacement, the exact GP posterior, tested on all N.

    Textbook form on the distinct points D with counts n (a point drawn n times with noise sigma^2 is one point
    with noise sigma^2/n and the same y): ``A = K_DD + sigma^2 diag(1/n)``, posterior variance
    ``K_ii - K_iD A^-1 K_Di``, posterior mean ``K_ND A^-1 y_D``.  Returns the means over resamples of the average
    posterior variance and of the squared error on all N points, with their standard errors."""
    blas_threads()
    N = y.size
    pv, err = np.empty(resamples), np.empty(resamples)
    for r in range(resamples):
        counts = np.bincount(rng.integers(0, N, m), minlength=N)
        D = np.flatnonzero(counts)
        A = K[np.ix_(D, D)] + np.diag(noise_var / counts[D])
        W = sla.cho_solve(sla.cho_factor(A, lower=True), K[D, :])
        pv[r] = np.mean(np.diag(K) - np.einsum("dn,dn->n", K[D, :], W))
        err[r] = np.mean((W.T @ y[D] - y) ** 2)
    return pv.mean(), pv.std(ddof=1) / np.sqrt(resamples), err.mean(), err.std(ddof=1) / np.sqrt(resamples)


@pytest.fixture(scope="module")
def table_theory():
    _, y, K = table_setup()
    return bootstrap_curve(K, y, SIGMA2, TABLE_M)


@pytest.fixture(scope="module")
def table_simulation():
    _, y, K = table_setup()
    rng = np.random.default_rng(2002)
    # 800 resamples at m = 100, where the spread over resamples is widest among the asserted m (standard error of
    # the posterior variance 0.5 %); 200 elsewhere (<= 0.3 % for m >= 200; m <= 50 is not compared tightly)
    return {m: simulate_bootstrap(K, y, SIGMA2, m, 800 if m == 100 else 200, rng) for m in TABLE_M}


def test_table_theory_rows_reproduced(table_theory):
    # The theory is deterministic given the draw, and the draw is the notes' (see table_setup): every entry must
    # agree to within the rounding of the printed value (half a unit in its last digit).
    assert table_theory["m"] == TABLE_M
    assert table_theory["kind"] == "replica" and table_theory["approximation"] is True
    for key, row in (("posterior_variance", TABLE_THEORY_PV), ("test_error", TABLE_THEORY_EPS)):
        for m, got, printed in zip(TABLE_M, table_theory[key], row):
            assert abs(got - float(printed)) <= half_unit(printed) + 1e-12, (key, m, got, printed)
    # the paper's claim, seen in the notes too: few sweeps when m is large (14 at m = 5, 4 at m = 1600 here)
    its = table_theory["iterations"]
    assert all(a >= b for a, b in zip(its, its[1:])) and its[-1] <= 8, its


@pytest.mark.parametrize("seed", [2, 3])
def test_table_posterior_variance_other_draws(seed):
    # The posterior-variance curve depends on the inputs only (not on y) and only weakly on their draw: over 30
    # draws it stayed within 4.8 % of the table at m = 20 and within 2.5 % for m >= 50 (standard deviation about
    # 1 %), so 6 % is an honest bound for m >= 20.  eps is not compared: it depends on the noise draw (12 %
    # standard deviation over draws), i.e. only the notes' own draw can reproduce that row.
    _, y, K = table_setup(seed)
    curve = bootstrap_curve(K, y, SIGMA2, TABLE_M[1:])
    for m, got, printed in zip(TABLE_M[1:], curve["posterior_variance"], TABLE_THEORY_PV[1:]):
        assert abs(got / float(printed) - 1.0) < 0.06, (seed, m, got, printed)


def test_theory_against_simulation(table_theory, table_simulation):
    for m, th_pv, th_eps, tab_pv, tab_eps in zip(TABLE_M, table_theory["posterior_variance"],
                                                 table_theory["test_error"], TABLE_SIM_PV, TABLE_SIM_EPS):
        pv, pv_se, eps, eps_se = table_simulation[m]
        if m >= 100:
            # §1.6 invariant 8: the replica theory is asymptotically exact; measured |rel. difference| <= 1.0 % for
            # the posterior variance and <= 0.3 % for eps, with simulation standard errors <= 0.5 %
            assert abs(th_pv - pv) / pv < 0.02, (m, th_pv, pv, pv_se)
            assert abs(th_eps - eps) / eps < 0.02, (m, th_eps, eps, eps_se)
            # and this simulation is the notes' simulation (their row, same setup, independent resamples)
            assert abs(pv / float(tab_pv) - 1.0) < 0.02, (m, pv, tab_pv)
            assert abs(eps / float(tab_eps) - 1.0) < 0.02, (m, eps, tab_eps)
        if m <= 20:
            # the known caveat (module docstring): at small m the theory underestimates the posterior variance
            # (by 7 % at m = 5 and 17 % at m = 20 here, 5-7 standard errors); its size is not asserted
            assert th_pv < pv - 2 * pv_se, (m, th_pv, pv, pv_se)


# ------------------------------------------------------------------------------------------ §1.6 invariants 1-6

def small_setup(n: int = 50, seed: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A smaller, well-conditioned problem for the exact identities: an exponential (Ornstein-Uhlenbeck) kernel,
    whose dense inverse is accurate, so K^-1 can be used as an independent route."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0.0, 1.0, n))
    y = np.cos(3 * x) + 0.2 * rng.standard_normal(n)
    K = 0.8 * np.exp(-np.abs(x[:, None] - x[None, :]) / 0.2)
    return x, y, K


def test_m_to_zero_limits():
    # invariant 1: no data, G = K, R = 0, V = 0, eps = mean(y^2); continuous as m -> 0
    _, y, K = small_setup()
    curve = bootstrap_curve(K, y, 0.05, [0, 1e-9])
    assert curve["m"] == [0, 1e-9] and curve["iterations"][0] == 0
    assert curve["posterior_variance"][0] == pytest.approx(np.trace(K) / y.size, rel=1e-14)
    assert curve["test_error"][0] == pytest.approx(np.mean(y ** 2), rel=1e-14)
    assert curve["posterior_variance"][1] == pytest.approx(np.trace(K) / y.size, rel=1e-8)
    assert curve["test_error"][1] == pytest.approx(np.mean(y ** 2), rel=1e-8)
    st = bootstrap_state(K, y, 0.05, 1e-9)
    np.testing.assert_allclose(st["G"], K, atol=1e-9)
    assert np.max(np.abs(st["R"])) < 1e-9 and np.max(st["V"]) < 1e-9


def test_posterior_variance_independent_of_outputs():
    # invariant 2: the posterior variance depends on the inputs only; R and eps do depend on y
    _, y, K = small_setup()
    ms = [3, 30, 300]
    a = bootstrap_curve(K, y, 0.05, ms)
    b = bootstrap_curve(K, 5.0 * y[::-1] - 1.0, 0.05, ms)
    np.testing.assert_allclose(a["posterior_variance"], b["posterior_variance"], rtol=1e-12)
    assert all(abs(e1 - e2) > 1e-3 for e1, e2 in zip(a["test_error"], b["test_error"]))


def test_posterior_variance_non_increasing_in_m():
    # invariant 3, on a dense grid of m (non-integer m included: the theory allows them)
    _, y, K = small_setup()
    ms = np.concatenate([[0.0], np.geomspace(0.1, 1e4, 40)])
    pv = np.array(bootstrap_curve(K, y, 0.05, ms)["posterior_variance"])
    assert np.all(np.diff(pv) <= 1e-12 * pv[0]), np.diff(pv).max()
    assert pv[-1] < 0.01 * pv[0]


def test_constant_u_eigen_formula_exact():
    # invariant 4: for constant u eq. (20) is exact, G_ii = sum_k v_ki^2 / (1/mu_k + u), and so is the symmetric
    # form of eq. (19); both against the dense inverse (K^-1 + u)^-1
    _, _, K = small_setup()
    mu, vecs = np.linalg.eigh(K)
    for u in (1e-3, 0.7, 40.0):
        eig = (vecs ** 2) @ (1.0 / (1.0 / mu + u))
        dense = np.linalg.inv(np.linalg.inv(K) + u * np.eye(K.shape[0]))
        G = _posterior_covariance(K, np.full(K.shape[0], u))
        np.testing.assert_allclose(eig, np.diag(dense), rtol=1e-9)
        np.testing.assert_allclose(G, dense, rtol=1e-8, atol=1e-12)


def test_constant_u_fixed_point_is_the_scalar_root():
    # Translation-invariant kernel on equally spaced points of a circle: diag G is constant, so u is constant,
    # the (20) initialisation is already the fixed point (one sweep), and the curve is the root of the scalar
    # equation g = (1/N) sum_k mu_k / (1 + mu_k u(g)), u(g) = m / (N (sigma^2 + g)) (Fourier eigenvectors).
    n, s2 = 40, 0.1
    theta = 2 * np.pi * np.arange(n) / n
    K = np.exp((np.cos(theta[:, None] - theta[None, :]) - 1.0) / 0.3)
    mu = np.linalg.eigvalsh(K)
    ms = [1, 10, 100, 1000]
    curve = bootstrap_curve(K, np.sin(theta), s2, ms)
    assert curve["iterations"] == [1] * len(ms)
    for m, pv in zip(ms, curve["posterior_variance"]):
        g = brentq(lambda g: np.mean(mu / (1 + mu * m / (n * (s2 + g)))) - g, 0.0, 1.0, xtol=1e-15)
        assert pv == pytest.approx(g, rel=1e-9)


@pytest.mark.parametrize("m", [2.0, 25.0, 400.0])
def test_fixed_point_self_consistency(m):
    # invariant 5: g_i = [(K^-1 + diag(m / (N (sigma^2 + g))))^-1]_ii; (I + K U)^-1 K equals the symmetric form;
    # G is symmetric positive semi-definite
    _, y, K = small_setup()
    n, s2 = y.size, 0.05
    st = bootstrap_state(K, y, s2, m)
    G = st["G"]
    g = np.diag(G)
    u = m / (n * (s2 + g))
    np.testing.assert_allclose(st["u"], u, rtol=1e-8)
    np.testing.assert_allclose(np.diag(np.linalg.inv(np.linalg.inv(K) + np.diag(u))), g, rtol=1e-8)
    np.testing.assert_allclose(np.linalg.solve(np.eye(n) + K * u[None, :], K), G, rtol=1e-8, atol=1e-12)
    assert np.array_equal(G, G.T)
    assert np.linalg.eigvalsh(G).min() > -1e-12
    assert st["posterior_variance"] == pytest.approx(np.mean(g), rel=1e-12)
    assert st["R"] == pytest.approx(G @ (u * y), rel=1e-8, abs=1e-12)          # eqs. (10)+(15)


@pytest.mark.parametrize("m", [2.0, 25.0, 400.0])
def test_bootstrap_variance_nonnegative(m):
    # invariant 6: V solves v = A (b + v), A_ij = G_ij^2 m / (N (sigma^2 + g_j)^2) (here by a general dense solve,
    # not the module's symmetric Cholesky route); v >= 0 and eps >= mean(b)
    _, y, K = small_setup()
    n, s2 = y.size, 0.05
    st = bootstrap_state(K, y, s2, m)
    G, v, b = st["G"], st["V"], st["b"]
    g = np.diag(G)
    A = G ** 2 * (m / (n * (s2 + g) ** 2))[None, :]
    np.testing.assert_allclose(b, (st["R"] - y) ** 2, rtol=1e-12)
    np.testing.assert_allclose(v, np.linalg.solve(np.eye(n) - A, A @ b), rtol=1e-8, atol=1e-14)
    assert np.all(v >= 0) and np.max(v) > 0
    assert st["test_error"] >= np.mean(b)
    assert st["test_error"] == pytest.approx(np.mean(b + v), rel=1e-12)


# ------------------------------------------------------------------------------------------ teacher mode

def lattice_precision(n: int, lam: float, mass2: float) -> np.ndarray:
    """``lambda (-Delta + m^2)`` on n sites, unit spacing, Neumann ends (second difference + mass), dense."""
    D2 = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    D2[0, 0] = D2[-1, -1] = 1.0
    return lam * (D2 + mass2 * np.eye(n))


def simulate_teacher(K0: np.ndarray, p: np.ndarray, f: np.ndarray, noise_var: float, noise_var_true: float, m: int,
                     resamples: int, rng: np.random.Generator) -> tuple[float, float]:
    """Monte Carlo on the grid: m sites drawn from p, y = f + noise, posterior precision K0 + diag(n/sigma^2),
    posterior mean G sum(y)/sigma^2; test on a fresh (x ~ p, y): p-weighted (mean - f)^2 + sigma_true^2."""
    blas_threads()
    n = p.size
    pv, err = np.empty(resamples), np.empty(resamples)
    for r in range(resamples):
        idx = rng.choice(n, size=m, p=p)
        counts = np.bincount(idx, minlength=n)
        ysum = np.bincount(idx, weights=f[idx] + np.sqrt(noise_var_true) * rng.standard_normal(m), minlength=n)
        G = sla.cho_solve(sla.cho_factor(K0 + np.diag(counts / noise_var)), np.eye(n))
        pv[r] = p @ np.diag(G)
        err[r] = p @ (G @ (ysum / noise_var) - f) ** 2 + noise_var_true
    return pv.mean(), err.mean()


TEACHER_N = 60
TEACHER_X = np.arange(TEACHER_N) / TEACHER_N
TEACHER_F = np.sin(2 * np.pi * TEACHER_X) + 0.5 * np.cos(6 * np.pi * TEACHER_X)


def nonuniform_p() -> np.ndarray:
    p = 1.0 + 0.8 * np.sin(2 * np.pi * TEACHER_X)
    p[:5] = 0.0                                       # sites never drawn: no weight, no data
    return p / p.sum()


@pytest.mark.parametrize("p, noise_true", [(np.full(TEACHER_N, 1.0 / TEACHER_N), 0.1), (nonuniform_p(), 0.05)],
                         ids=["uniform", "nonuniform"])
def test_teacher_lattice_against_monte_carlo(p, noise_true):
    # A well-regularised lattice prior (lambda = 10, m^2 = 0.02: prior variance 0.39 against sigma^2 = 0.1,
    # correlation length 7 sites).  With m/n = 5 and 17 draws per site the posterior is concentrated and the
    # Gaussian approximation is nearly exact: measured (theory - simulation)/simulation -1.3 to -1.4 % (pv) and
    # +0.1 to +0.2 % (eps) at m = 300, -0.2 to -0.8 % and +0.0 % at m = 1000, Monte Carlo standard errors 0.1-0.3 %;
    # hence 4 % / 2 % at m = 300 and 1.5 % at m = 1000.  (Intermediate m on lattices is where the theory is poor:
    # see the caveat test below.)
    K0 = lattice_precision(TEACHER_N, 10.0, 0.02)
    ms = [0, 300, 1000]
    th = teacher_curve_from_precision(K0, p, TEACHER_F, 0.1, ms, noise_var_true=noise_true)
    C = np.linalg.inv(K0)
    assert th["posterior_variance"][0] == pytest.approx(p @ np.diag(C), rel=1e-12)        # m -> 0 limits
    assert th["test_error"][0] == pytest.approx(p @ TEACHER_F ** 2 + noise_true, rel=1e-12)
    rng = np.random.default_rng(33)
    for m, pv_th, eps_th, tol_pv, tol_eps in zip(ms[1:], th["posterior_variance"][1:], th["test_error"][1:],
                                                 (0.04, 0.015), (0.02, 0.015)):
        pv, eps = simulate_teacher(K0, p, TEACHER_F, 0.1, noise_true, m, 200, rng)
        assert abs(pv_th / pv - 1.0) < tol_pv, (m, pv_th, pv)
        assert abs(eps_th / eps - 1.0) < tol_eps, (m, eps_th, eps)


def test_lattice_caveat_weak_regularisation():
    # The module's documented caveat (notes §1.5 B): with a weak lattice prior (prior variance 5.8 against
    # sigma^2 = 0.04, data sparse on the grid) the theory is far off at intermediate m: the posterior variance is
    # 64 % low at m = 100 (simulation 0.134).  Asserted as "more than 30 % low" so that the docstring's warning
    # stays true; if this fails, the theory improved and the docstring should say so.
    K0 = lattice_precision(TEACHER_N, 1.0, 0.01)
    p = np.full(TEACHER_N, 1.0 / TEACHER_N)
    th = teacher_curve_from_precision(K0, p, TEACHER_F, 0.04, [100])
    pv, _ = simulate_teacher(K0, p, TEACHER_F, 0.04, 0.04, 100, 100, np.random.default_rng(5))
    assert th["posterior_variance"][0] < 0.7 * pv


def test_teacher_with_empirical_distribution_is_the_bootstrap():
    # p = 1/N, f_true = y and no extra noise turn eqs. (14)-(16) of teacher mode into those of eq. (18)
    _, y, K = small_setup()
    ms = [0, 4, 40, 4000]
    a = bootstrap_curve(K, y, 0.05, ms)
    b = teacher_curve(K, np.full(y.size, 1.0 / y.size), y, 0.05, ms, noise_var_true=0.0)
    for key in ("posterior_variance", "test_error"):
        np.testing.assert_allclose(a[key], b[key], rtol=1e-12)
    assert a["iterations"] == b["iterations"] and a["m"] == b["m"]


def test_teacher_from_precision_dense_and_sparse():
    K0 = lattice_precision(30, 3.0, 0.1)
    p = np.full(30, 1.0 / 30)
    f = np.sin(np.arange(30) / 5.0)
    ref = teacher_curve(np.linalg.inv(K0), p, f, 0.2, [0, 7, 70], noise_var_true=0.1)
    for prec in (K0, sp.csr_matrix(K0)):
        got = teacher_curve_from_precision(prec, p, f, 0.2, [0, 7, 70], noise_var_true=0.1)
        np.testing.assert_allclose(got["posterior_variance"], ref["posterior_variance"], rtol=1e-10)
        np.testing.assert_allclose(got["test_error"], ref["test_error"], rtol=1e-10)
    st = teacher_state(np.linalg.inv(K0), p, f, 0.2, 70, noise_var_true=0.1)
    np.testing.assert_allclose(st["b"], (st["R"] - f) ** 2 + 0.1, rtol=1e-12)
    np.testing.assert_allclose(np.linalg.inv(K0 + np.diag(st["u"])), st["G"], rtol=1e-8, atol=1e-12)  # (K0+u)^-1


# ------------------------------------------------------------------------------------------ bad inputs

def _ok():
    _, y, K = small_setup(n=8)
    return K, y


@pytest.mark.parametrize("change, match", [
    (lambda K, y: (K[:, :5], y, 0.1, [1]), "square"),
    (lambda K, y: (K[0], y, 0.1, [1]), "square"),
    (lambda K, y: (np.where(np.eye(8) > 0, np.nan, K), y, 0.1, [1]), "K contains non-finite"),
    (lambda K, y: (K + np.triu(K, 1) * 0.1, y, 0.1, [1]), "not symmetric"),
    (lambda K, y: (K - 2 * np.eye(8), y, 0.1, [1]), "not positive semi-definite"),
    (lambda K, y: (sp.csr_matrix(K), y, 0.1, [1]), "sparse"),
    (lambda K, y: (K, y[:5], 0.1, [1]), "y must be a 1-D array of length 8"),
    (lambda K, y: (K, np.where(np.arange(8) == 2, np.inf, y), 0.1, [1]), "y contains non-finite"),
    (lambda K, y: (K, y, 0.0, [1]), "noise_var must be finite and > 0"),
    (lambda K, y: (K, y, -1.0, [1]), "noise_var must be finite and > 0"),
    (lambda K, y: (K, y, np.nan, [1]), "noise_var must be finite and > 0"),
    (lambda K, y: (K, y, 0.1, [1, -2]), "m_values must be >= 0"),
    (lambda K, y: (K, y, 0.1, [1, np.nan]), "non-finite"),
    (lambda K, y: (K, y, 0.1, []), "non-empty"),
    (lambda K, y: (K, y, 0.1, [[1, 2]]), "1-D"),
], ids=["not-square", "vector", "nan", "asymmetric", "not-psd", "sparse", "y-length", "y-inf", "noise-zero",
        "noise-negative", "noise-nan", "m-negative", "m-nan", "m-empty", "m-2d"])
def test_bootstrap_bad_inputs(change, match):
    K, y = _ok()
    with pytest.raises(ValueError, match=match):
        bootstrap_curve(*change(K, y))


def test_iteration_arguments_and_non_convergence():
    K, y = _ok()
    with pytest.raises(ValueError, match="tol must be finite and > 0"):
        bootstrap_curve(K, y, 0.1, [1], tol=0.0)
    with pytest.raises(ValueError, match="max_iter must be an integer >= 1"):
        bootstrap_curve(K, y, 0.1, [1], max_iter=0)
    with pytest.raises(ValueError, match="m must be a single number"):
        bootstrap_state(K, y, 0.1, [1, 2])
    # non-convergence is raised (never a partial curve); the message names m, max_iter and what to change
    with pytest.raises(ReplicaConvergenceError, match=r"did not converge at m = 3 within max_iter = 1.*raise max_iter"):
        bootstrap_curve(K, y, 0.1, [3], max_iter=1)
    assert issubclass(ReplicaConvergenceError, RuntimeError)


def test_teacher_bad_inputs():
    K, y = _ok()
    p = np.full(8, 1 / 8)
    with pytest.raises(ValueError, match="p must be >= 0"):
        teacher_curve(K, p - np.where(np.arange(8) == 0, 0.2, 0.0), y, 0.1, [1])
    with pytest.raises(ValueError, match=r"p must sum to 1.*p / p.sum\(\)"):
        teacher_curve(K, 2 * p, y, 0.1, [1])
    with pytest.raises(ValueError, match="p must be a 1-D array of length 8"):
        teacher_curve(K, p[:4], y, 0.1, [1])
    with pytest.raises(ValueError, match="f_true must be a 1-D array of length 8"):
        teacher_curve(K, p, y[:, None], 0.1, [1])
    with pytest.raises(ValueError, match="noise_var_true must be finite and >= 0"):
        teacher_curve(K, p, y, 0.1, [1], noise_var_true=-0.1)
    with pytest.raises(ValueError, match="C is not symmetric"):
        teacher_curve(K + np.triu(K, 1) * 0.1, p, y, 0.1, [1])


def test_precision_bad_inputs():
    p, f = np.full(20, 1 / 20), np.zeros(20)
    with pytest.raises(ValueError, match="more than max_sites = 10"):
        teacher_curve_from_precision(lattice_precision(20, 1.0, 0.1), p, f, 0.1, [1], max_sites=10)
    n = DENSE_PRECISION_MAX_SITES + 1                 # refused before anything dense is allocated
    with pytest.raises(ValueError, match=f"K0 has {n} sites, more than max_sites = {DENSE_PRECISION_MAX_SITES}"):
        teacher_curve_from_precision(sp.identity(n, format="csr"), np.full(n, 1 / n), np.zeros(n), 0.1, [1])
    with pytest.raises(ValueError, match="K0 is not positive definite.*mass"):
        teacher_curve_from_precision(lattice_precision(20, 1.0, 0.0), p, f, 0.1, [1])    # Neumann, no mass
    with pytest.raises(ValueError, match="K0 is not symmetric"):
        teacher_curve_from_precision(lattice_precision(20, 1.0, 0.1) + np.eye(20, k=1), p, f, 0.1, [1])
    with pytest.raises(ValueError, match="square"):
        teacher_curve_from_precision(np.ones((3, 4)), p, f, 0.1, [1])
    with pytest.raises(ValueError, match="K0 contains non-finite"):
        teacher_curve_from_precision(np.full((20, 20), np.inf), p, f, 0.1, [1])
