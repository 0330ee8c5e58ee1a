"""The Laplace evidence of the density model (bftcore.models.evidence): against brute-force integration over M, the
bordered log-determinant against a finite-difference Hessian in the coordinates of G, the lambda-derivative against
finite differences of the whole evidence (MAP re-solved), Laplace samples against the Laplace covariance, the
stochastic log-determinant within its error bars, the evidence path's maximum, and the refusals."""
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import logsumexp

from bftcore.foundations.config import validate_config
from bftcore.models import evidence as ev
from bftcore.models.density import build_density, solve


def config(nx, ny, data, lam=1.0, bx="neumann", by="periodic", templates=(), **prior):
    pr = {"field": "L", "lambda": lam, "l2": 1.0}
    pr.update(prior)
    return validate_config({
        "grid": {"x": {"min": 0.0, "max": 0.5 * (nx - 1), "n": nx, "boundary": bx},
                 "y": {"min": -1.0, "max": -1.0 + 0.75 * (ny - 1), "n": ny, "boundary": by}},
        "data": data, "prior": pr, "templates": list(templates), "weights": [1.0] if templates else [],
        "solver": {"method": "newton", "min_iter": 1, "max_iter": 200, "tol": 1e-12}})


def random_data(nx, ny, n, seed=0):
    rng = np.random.default_rng(seed)
    return [[0.5 * int(rng.integers(nx)), -1.0 + 0.75 * int(rng.integers(ny))] for _ in range(n)]


def problem_and_map(cfg):
    pb = build_density(cfg)
    return pb, solve(pb).L


GAUSS_TEMPLATE = {"kind": "gaussian", "mu": 0.5, "sigma": 1.5}


def brute_force_log_evidence(pb, radius=12.0, m=801):
    """nx = 1, ny = 3: M is 2-dimensional; integrate exp(-E_L) and the prior over g in G (Lebesgue in orthonormal
    coordinates, the measure of the module docstring), L = g - ln sum exp(g) hy."""
    g, E = pb.grid, pb.energy
    U = ev._y_basis(g.y.n)
    u = np.linspace(-radius, radius, m)
    a, b = np.meshgrid(u, u, indexing="ij")
    G = a[..., None] * U[:, 0] + b[..., None] * U[:, 1]
    L = G - logsumexp(G, axis=-1, keepdims=True) - np.log(g.hy)
    D = L - E.prior.templates[0][0]
    prior = 0.5 * E.prior.lam * g.cell * np.einsum("abi,ij,abj->ab", D, pb.K.matrix.toarray(), D)
    return float(logsumexp(L @ pb.N[0] - prior) - logsumexp(-prior))


def test_laplace_evidence_converges_to_brute_force_as_data_grow():
    errors = []
    for k in (1, 4, 16, 64):
        data = [[0.0, y] for y, c in zip((-1.0, -0.25, 0.5), (3 * k, 2 * k, k)) for _ in range(c)]
        pb, L = problem_and_map(config(1, 3, data, lam=0.3))
        res = ev.laplace_evidence(pb, L)
        errors.append(abs(res["log_evidence"] - brute_force_log_evidence(pb)))
        assert res["logdet_method"] == "exact" and res["logdet_stderr"] == 0.0
        assert res["log_evidence"] == pytest.approx(res["data_fit"] + res["occam"])
    assert all(e2 < e1 for e1, e2 in zip(errors, errors[1:])), errors
    assert errors[-1] < 0.1 * errors[0] and errors[-1] < 5e-3, errors


def test_prior_normaliser_against_brute_force_with_a_template_and_mass():
    """A template and a mass make the prior non-Gaussian in g: the Laplace Z_0 is an approximation there, good
    for a stiff prior; the evidence without data is exactly 0 either way (numerator = denominator)."""
    for lam in (3.0, 30.0):
        pb, L = problem_and_map(config(1, 3, [[0.0, -1.0]] * 3, lam=lam, l0=0.5, templates=[GAUSS_TEMPLATE]))
        assert ev.laplace_evidence(pb, L)["log_evidence"] == pytest.approx(brute_force_log_evidence(pb),
                                                                           abs=0.3 / lam)
    for cfg in (config(4, 5, [], lam=0.7), config(4, 5, [], l0=0.2, templates=[GAUSS_TEMPLATE])):
        pb, L = problem_and_map(cfg)
        assert ev.laplace_evidence(pb, L)["log_evidence"] == pytest.approx(0.0, abs=1e-9)


def energy_in_g(pb, Lstar, U):
    """E_L(L(g* + U c)) as a function of the orthonormal coordinates c of G."""
    g = pb.grid
    nx, ny = g.shape
    gstar = Lstar - Lstar.mean(axis=1, keepdims=True)

    def f(c):
        G = gstar + (U @ c.reshape(nx, ny - 1).T).T
        return pb.energy.at(ev.normalise_log(G, g.hy)).value
    return f


@pytest.mark.parametrize("kw", [{}, {"l0": 0.3, "lambda_x": 2.0}, {"lambda_x": 0.0},
                                {"templates": [GAUSS_TEMPLATE], "l4": 0.1}, {"bx": "periodic", "by": "neumann"}])
def test_exact_logdet_equals_finite_difference_hessian_in_g(kw):
    nx, ny = 3, 4
    pb, L = problem_and_map(config(nx, ny, random_data(nx, ny, 7), lam=0.8, **kw))
    point, fac = ev.map_newton(pb.energy, L)
    U = ev._y_basis(ny)
    f = energy_in_g(pb, point.phi, U)
    d = nx * (ny - 1)
    h = 1e-4
    Hfd = np.zeros((d, d))
    eye = np.eye(d)
    for a in range(d):
        for b in range(a, d):
            Hfd[a, b] = Hfd[b, a] = (f(h * (eye[a] + eye[b])) - f(h * (eye[a] - eye[b])) - f(h * (eye[b] - eye[a]))
                                     + f(-h * (eye[a] + eye[b]))) / (4 * h * h)
    Hg, _ = ev.tangent_hessian_dense(point)
    assert np.allclose(Hg, Hfd, atol=2e-5 * np.max(np.abs(Hg)))
    assert fac.logdet_g() == pytest.approx(np.linalg.slogdet(Hfd)[1], abs=1e-5)


@pytest.mark.parametrize("kw", [{}, {"templates": [GAUSS_TEMPLATE], "l0": 0.1}])
def test_d_log_evidence_d_log_lambda_against_finite_differences(kw):
    nx, ny = 4, 5
    data = random_data(nx, ny, 9, seed=3)

    def logev(lam):
        pb, L = problem_and_map(config(nx, ny, data, lam=lam, **kw))
        return pb, L, ev.laplace_evidence(pb, L)["log_evidence"]

    lam, h = 0.6, 1e-4
    pb, L, _ = logev(lam)
    fd = (logev(lam * np.exp(h))[2] - logev(lam * np.exp(-h))[2]) / (2 * h)
    assert ev.d_log_evidence_d_log_lambda(pb, L) == pytest.approx(fd, rel=1e-5, abs=1e-6)


def test_laplace_samples_have_the_laplace_mean_and_covariance():
    """In the tangent coordinates (the per-x zero-mean part of L), samples are N(g*, H_g^{-1}); the covariance is
    computed independently from the inverse of the bordered matrix: (B^{-1})_HH projected onto G."""
    nx, ny = 2, 4
    pb, L = problem_and_map(config(nx, ny, random_data(nx, ny, 6, seed=2), lam=0.5))
    point, fac = ev.map_newton(pb.energy, L)
    n = 20000
    S = ev.laplace_samples(pb, L, n, np.random.default_rng(7))
    assert np.allclose(np.exp(S).sum(axis=2) * pb.grid.hy, 1.0)
    g = (S - S.mean(axis=2, keepdims=True)).reshape(n, -1)
    gstar = (point.phi - point.phi.mean(axis=1, keepdims=True)).ravel()
    X = np.linalg.inv(fac.B.toarray())[:pb.grid.size, :pb.grid.size]
    Pg = np.kron(np.eye(nx), np.eye(ny) - 1.0 / ny)
    cov = Pg @ X @ Pg
    sd = np.sqrt(np.diag(cov))
    mean_z = (g.mean(axis=0) - gstar) / (sd / np.sqrt(n))
    assert np.max(np.abs(mean_z)) < 4.5
    emp = np.cov(g, rowvar=False)
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov ** 2) / n)
    assert np.max(np.abs(emp - cov) / se) < 5.0
    bands = ev.credible_bands(pb, S[:2000], level=0.8)
    assert np.all(bands["P_lower"] <= bands["P_median"]) and np.all(bands["P_median"] <= bands["P_upper"])
    assert np.all(bands["h_lower"] < bands["h_upper"])
    inside = np.mean((np.exp(S[:2000]) >= bands["P_lower"]) & (np.exp(S[:2000]) <= bands["P_upper"]), axis=0)
    assert np.allclose(inside, 0.8, atol=0.01)


def test_stochastic_logdet_within_its_error_bars():
    nx, ny = 16, 12
    pb, L = problem_and_map(config(nx, ny, random_data(nx, ny, 60, seed=4), lam=0.3, lambda_x=1.5))
    exact = ev.laplace_evidence(pb, L, logdet="exact")
    for seed in (0, 1, 2):
        st = ev.laplace_evidence(pb, L, logdet="stochastic", rng=np.random.default_rng(seed))
        assert st["logdet_method"] == "stochastic" and st["logdet_stderr"] > 0
        assert abs(st["log_evidence"] - exact["log_evidence"]) < 4 * 0.5 * st["logdet_stderr"]
        assert st["data_fit"] == exact["data_fit"]


def test_evidence_path_maximum_is_stationary_and_matches_single_evaluations():
    nx, ny = 6, 8
    rng = np.random.default_rng(5)
    xs = rng.integers(nx, size=40)
    ys = np.clip(np.rint(2 + 0.8 * xs + rng.normal(0, 0.7, 40)), 0, ny - 1)
    cfg = config(nx, ny, [[0.5 * a, -1.0 + 0.75 * b] for a, b in zip(xs, ys)], by="neumann")
    out = ev.evidence_path(cfg, values=np.geomspace(0.01, 30, 12))
    assert len(out["lambda"]) == len(out["log_evidence"]) == len(out["fields"]) == 12
    k = 4
    pb = build_density(dict(cfg, prior=dict(cfg["prior"], **{"lambda": out["lambda"][k]})))
    assert ev.laplace_evidence(pb, out["fields"][k])["log_evidence"] == pytest.approx(out["log_evidence"][k],
                                                                                      abs=1e-8)
    best = out["best"]
    assert not best["at_edge"] and best["log_evidence"] >= max(out["log_evidence"])
    # the refinement is bounded Brent in ln(lambda) to xatol = 1e-2 (bftcore.models.evidence.evidence_path), not a zero
    # of the slope: the maximum lies within xatol of best, so the slope changes sign across best * exp(-+xatol)
    xatol = 1e-2

    def slope(lam):
        pb = build_density(dict(cfg, prior=dict(cfg["prior"], **{"lambda": lam})))
        return ev.d_log_evidence_d_log_lambda(pb, solve(pb).L)
    below, above = (slope(best["lambda"] * math.exp(s * xatol)) for s in (-1, 1))
    assert below > 0 > above, (below, above)
    cold = ev.evidence_path(cfg, values=out["lambda"], warm=False, refine=False)
    assert np.allclose(cold["log_evidence"], out["log_evidence"], atol=1e-8)
    mass = ev.evidence_path(dict(cfg, prior=dict(cfg["prior"], l0=0.1)), param="l0", values=[0.01, 0.1, 1.0],
                            refine=False)
    assert mass["l0"] == [0.01, 0.1, 1.0] and np.all(np.isfinite(mass["log_evidence"]))


def test_refusals_say_why_and_what_to_do():
    data = random_data(4, 5, 5)
    pP = build_density(validate_config(dict(config(4, 5, data), prior={"field": "P", "lambda": 1.0, "l2": 1.0})))
    with pytest.raises(ValueError, match=r"P >= 0 .*active.*use prior.field \"L\""):
        ev.laplace_evidence(pP, np.log(np.full(pP.grid.shape, 0.25)))
    mix = validate_config(dict(config(4, 5, data), templates=[{"kind": "paper_t1"}, {"kind": "paper_t2"}],
                               weights=[0.5, 0.5]))
    with pytest.raises(ValueError, match="prior mixtures .* not implemented.*at most one template"):
        ev.evidence_path(mix, values=[1.0])
    pb, L = problem_and_map(config(4, 5, data, lambda_y=0.0))
    with pytest.raises(ValueError, match="improper.*lambda_y > 0 or l0 > 0"):
        ev.laplace_evidence(pb, L)
    pb, L = problem_and_map(config(4, 5, data, lambda_y=0.0, l0=0.1))  # a mass makes it proper
    assert np.isfinite(ev.laplace_evidence(pb, L)["log_evidence"])


def test_the_evidence_newton_is_the_one_minimiser_with_its_own_step_and_rule():
    """map_newton is bftcore.foundations.solvers.iterate with the exact KKT step and the stationarity rule: from a rough
    start (a flat field) the energy never rises, it ends below the tolerance, and at the MAP the package's own Newton
    finds with its own step and stopping rule (an independent route), to the tolerance."""
    from bftcore.foundations.solvers import iterate
    nx, ny = 6, 8
    pb, L_map = problem_and_map(config(nx, ny, random_data(nx, ny, 12, seed=3), lam=0.5, l4=0.2))
    energy = pb.energy
    tol = 1e-10 * max(1.0, float(energy.N.sum()))
    step, rule = ev.BorderedNewtonStep(energy, tol), ev.StationarityRule(tol, 60)
    records = list(iterate(energy, np.zeros((nx, ny)), step=step, controller=rule))
    energies = [r.energy for r in records]
    assert all(b <= a + 1e-12 * abs(a) for a, b in zip(energies, energies[1:]))
    assert records[-1].converged and records[-1].residual <= tol
    assert {r.method for r in records[1:]} <= {"bordered-newton", "newton-fallback"}
    assert len(records) <= 15                                   # Newton's quadratic finish, not a slow crawl
    point, _ = ev.map_newton(energy, np.zeros((nx, ny)))
    assert np.allclose(point.phi, records[-1].field, atol=1e-12)
    # the independent route: the package's Newton (CG on the projected Hessian) to a tight tolerance
    assert np.allclose(np.exp(point.phi), np.exp(L_map), atol=1e-7)
    # a start at the minimum ends at once, with no step
    at_min = list(iterate(energy, point.phi, step=ev.BorderedNewtonStep(energy, tol),
                          controller=ev.StationarityRule(tol, 60)))
    assert len(at_min) == 1 and at_min[0].converged


@pytest.mark.parametrize("prior, boundary", [("l2", "periodic"), ("l6", "neumann"), ("l6", "free")])
def test_the_complex_step_trace_is_the_dense_trace(prior, boundary):  # boundary: the y axis
    """tr(B^{-1} dB), by the complex step (one complex LU of the evidence's bordered Hessian B), against a dense
    solve for a random symmetric dB on B's pattern, and against the closed form tr(D) for dB = B D (D diagonal); the
    slope's own dB is checked by the finite differences above."""
    from bftcore.studies.bench import bench_config
    cfg = bench_config((12, 14), prior)
    cfg["grid"]["y"]["boundary"] = boundary
    pb = build_density(cfg)
    path = ev._PathProblem(pb.config, "lambda")
    point, fac, _ = path._map(float(cfg["prior"]["lambda"]), None)
    B = fac.B
    rng = np.random.default_rng(3)
    R = B.copy()
    R.data = rng.normal(size=R.data.size)
    R = (R + R.T).tocsc()
    dense = float(np.trace(np.linalg.solve(B.toarray(), R.toarray())))
    assert ev.trace_by_complex_step(B, R) == pytest.approx(dense, rel=1e-10, abs=1e-10)
    d = rng.uniform(0.5, 2.0, B.shape[0])
    assert ev.trace_by_complex_step(B, (B @ sp.diags(d)).tocsc()) == pytest.approx(d.sum(), rel=1e-12)
