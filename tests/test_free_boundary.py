"""The free boundary (DEFT's Delta: squared k-th differences where they exist, polynomials of degree < k unpenalised)
and the evidence with the flat polynomial directions it leaves: against dense linear algebra, finite differences
and the proper-prior limit."""
import math

import numpy as np
import pytest

from bftcore import api
from bftcore.foundations.config import ConfigError, validate_config
from bftcore.foundations.grid import Axis, Grid
from bftcore.foundations.limits import Limits
from bftcore.foundations.operators import (
    FREE_AXIS_MAX_NODES,
    PriorOperator,
    axis_operator,
    axis_symbol,
    free_axis_spectrum,
)
from bftcore.models import evidence, regression
from bftcore.models.density import build_density


def test_free_operator_leaves_exactly_the_low_polynomials_free():
    ax = Axis(-2.0, 3.0, 12, "free")
    t = ax.nodes
    for order, k in (("l2", 1), ("l4", 2), ("l6", 3)):
        K = axis_operator(ax, **{order: 1.0}).toarray()
        for deg in range(k):
            assert abs(t ** deg @ K @ t ** deg) < 1e-8 * np.abs(K).max()
        assert t ** k @ K @ t ** k > 1e-3 * np.abs(K).max()
        # its spectrum: exact zeros on the null space, the constant first, and the operator rebuilt from it
        w, B = free_axis_spectrum(ax, 0.0, *(1.0 if o == order else 0.0 for o in ("l2", "l4", "l6")))
        assert np.all(w[:k] == 0) and np.all(w[k:] > 0)
        assert np.allclose(B[:, 0], 1 / math.sqrt(ax.n))
        assert np.allclose(B.T @ B, np.eye(ax.n), atol=1e-12)
        assert np.allclose(B @ np.diag(w) @ B.T, K, atol=1e-9 * np.abs(K).max())


def test_free_l2_is_neumann_l2_and_a_mass_removes_the_null_space():
    a, b = Axis(0.0, 1.0, 9, "free"), Axis(0.0, 1.0, 9, "neumann")
    assert np.allclose(axis_operator(a, l2=1.0).toarray(), axis_operator(b, l2=1.0).toarray())
    assert np.allclose(np.sort(axis_symbol(a, l2=1.0)), np.sort(axis_symbol(b, l2=1.0)))
    assert np.all(axis_symbol(Axis(0.0, 1.0, 9, "free"), l0=0.5, l6=1.0) >= 0.5 - 1e-9)


def test_prior_operator_solve_and_sample_on_a_free_y_axis_match_dense_algebra():
    grid = Grid(Axis(0.0, 1.0, 4, "neumann"), Axis(-1.0, 1.0, 7, "free"))
    K = PriorOperator(grid, 0.7, 1.3, 0.0, 0.0, 1.0, 0.5)
    dense = K.matrix.toarray()
    rhs = np.random.default_rng(1).standard_normal(grid.shape)
    x = K.solve(rhs, 2.0, 0.3)
    assert np.allclose((2.0 * dense + 0.3 * np.eye(grid.size)) @ x.ravel(), rhs.ravel(), atol=1e-9)
    # the basis diagonalises K: forward/inverse are inverse to each other and K = B diag(symbol) B^T
    f = np.random.default_rng(2).standard_normal(grid.shape)
    assert np.allclose(K.inverse(K.forward(f)), f)
    assert np.allclose(K.inverse(K.symbol * K.forward(f)), K.apply(f), atol=1e-9 * np.abs(dense).max())


def _one_d(y, order="l6", boundary="free", lam=0.05, n=60):
    return validate_config({"grid": {"y": {"min": -4.0, "max": 4.0, "n": n, "boundary": boundary}},
                            "data": [float(v) for v in y], "prior": {"field": "L", "lambda": lam, "l2": 0.0,
                                                                       order: 1.0}})


def _dense_evidence(cfg):
    """The same Laplace evidence by a separate route: Newton in the orthonormal DCT coordinates c of the zero-sum
    fields, dense matrices, the flat directions by a pseudo-determinant of the prior."""
    pb = build_density(cfg)
    ny, hy, lam = pb.grid.y.n, pb.grid.hy, cfg["prior"]["lambda"]
    import scipy.fft as sfft
    U = sfft.idct(np.eye(ny)[:, 1:], type=2, norm="ortho", axis=0)
    K = pb.K.matrix.toarray()
    A = U.T @ (hy * lam * K) @ U
    N = pb.N[0]
    n = N.sum()
    c = np.zeros(ny - 1)
    for _ in range(200):
        g = U @ c
        p = np.exp(g - g.max())
        p /= p.sum() * hy
        ph = U.T @ (p * hy)
        grad = -U.T @ N + n * ph + A @ c
        H = n * (U.T @ ((p * hy)[:, None] * U) - np.outer(ph, ph)) + A
        step = np.linalg.solve(H, grad)
        c -= step
        if np.max(np.abs(step)) < 1e-13:
            break
    g = U @ c
    L = g - g.max() - math.log(np.sum(np.exp(g - g.max())) * hy)
    E = -N @ L + 0.5 * c @ A @ c
    ev = np.linalg.eigvalsh(U.T @ (hy * K) @ U)
    flat = int(np.sum(ev < 1e-9 * ev.max()))
    d = ny - 1
    return (-E - 0.5 * np.linalg.slogdet(H)[1] + 0.5 * (d - flat) * math.log(lam)
            + 0.5 * np.sum(np.log(ev[ev >= 1e-9 * ev.max()])) + 0.5 * flat * math.log(2 * math.pi)), flat


@pytest.mark.parametrize("order", ["l4", "l6"])
def test_laplace_evidence_with_flat_polynomials_equals_the_dense_route(order):
    y = np.random.default_rng(3).normal(0.3, 1.1, 40)
    cfg = _one_d(y, order)
    pb = build_density(cfg)
    L = api.run(cfg).L
    ours = evidence.laplace_evidence(pb, L)["log_evidence"]
    dense, flat = _dense_evidence(cfg)
    assert flat == {"l4": 1, "l6": 2}[order] == evidence.flat_mode_count(pb.K)
    assert ours == pytest.approx(dense, abs=1e-7)


def test_lambda_derivative_with_flat_polynomials_matches_finite_differences():
    y = np.random.default_rng(4).normal(-0.5, 0.9, 30)
    cfg = _one_d(y)
    pb = build_density(cfg)
    L = api.run(cfg).L
    g = evidence.d_log_evidence_d_log_lambda(pb, L)
    vals = []
    for s in (-1e-4, 1e-4):
        c = _one_d(y, lam=0.05 * math.exp(s))
        vals.append(evidence.laplace_evidence(build_density(c), api.run(c).L)["log_evidence"])
    assert g == pytest.approx((vals[1] - vals[0]) / 2e-4, rel=1e-4, abs=1e-5)


def test_free_boundary_refusals():
    with pytest.raises(ConfigError, match="free.* y axis of a density"):
        validate_config({"grid": {"x": {"min": 0, "max": 1, "n": 4, "boundary": "free"},
                                  "y": {"min": 0, "max": 1, "n": 4, "boundary": "neumann"}}})
    big = {"grid": {"y": {"min": 0, "max": 1, "n": FREE_AXIS_MAX_NODES + 1, "boundary": "free"}}}
    with pytest.raises(ConfigError, match=f"at most {FREE_AXIS_MAX_NODES} nodes"):  # even where the budget is off
        validate_config(big, limits=Limits(max_axis_nodes=None, max_nodes=None))
    # no data: the flat polynomial directions are not determined, the evidence says so
    cfg = _one_d([])
    with pytest.raises(ValueError, match="no data to determine them"):
        evidence.laplace_evidence(build_density(cfg), api.run(cfg).L)
    # lambda_x = 0: every x column is on its own and one of them has no data
    cfg = validate_config({"grid": {"x": {"min": 0, "max": 1, "n": 2, "boundary": "neumann"},
                                    "y": {"min": -2, "max": 2, "n": 12, "boundary": "free"}},
                           "data": [[0.0, 0.1], [0.0, 0.5]], "prior": {"lambda_x": 0.0, "l2": 0.0, "l4": 1.0}})
    with pytest.raises(ValueError, match="some x column has no data"):
        evidence.laplace_evidence(build_density(cfg), api.run(cfg).L)


def test_evidence_path_stops_after_the_drop_and_keeps_the_same_maximum():
    y = np.random.default_rng(5).normal(0.0, 1.0, 80)
    cfg = _one_d(y, boundary="neumann")
    full = evidence.evidence_path(cfg, "lambda", max_drop=None)
    short = evidence.evidence_path(cfg, "lambda")
    assert not full["skipped"] and short["skipped"]
    assert short["best"]["lambda"] == pytest.approx(full["best"]["lambda"], rel=1e-9)
    kept = [k for k, v in enumerate(short["lambda"]) if v not in short["skipped"]]
    assert np.allclose(np.array(short["log_evidence"])[kept], np.array(full["log_evidence"])[kept])
    # the skipped values are the smallest ones, each below the best by more than the drop in the full path
    assert max(short["skipped"]) < min(short["lambda"][k] for k in kept)
    best = max(v for v in full["log_evidence"] if np.isfinite(v))
    for v, e in zip(full["lambda"], full["log_evidence"]):
        if v in short["skipped"][-1:]:
            assert e < best - evidence.PATH_MAX_DROP


def test_regression_with_a_free_axis_integrates_the_linear_trend():
    """l4 on a free axis leaves 1 and x flat: the restricted evidence (k = 2) equals the proper prior's with a
    small precision eps on (1, x) once its (k/2) ln(beta lambda hx eps / 2 pi) is taken off, as eps -> 0."""
    rng = np.random.default_rng(6)
    x = rng.uniform(0, 5, 25)
    yv = 0.8 * x + np.sin(x) + rng.normal(0, 0.2, 25)
    ax = Axis(0.0, 5.0, 40, "free")
    ix = ax.snap(x)
    ev = regression.RegressionEvidence(ax, ix, yv, [np.zeros(40)], lam=0.3, l2=0.0, l4=1.0)
    assert ev.null_dim == 2
    beta = 4.0
    ours = ev.log_evidence(beta)
    # dense proper-prior route
    K = axis_operator(ax, l4=1.0).toarray()
    t = np.linspace(-1, 1, 40)
    Q, _ = np.linalg.qr(np.stack([np.ones(40), t], 1))
    S = np.zeros((25, 40))
    S[np.arange(25), ix] = 1.0
    for eps in (1e-4, 1e-6):
        prec = beta * 0.3 * ax.h * (K + eps * Q @ Q.T)
        C = S @ np.linalg.inv(prec) @ S.T + np.eye(25) / beta
        sign, ld = np.linalg.slogdet(C)
        lp = -0.5 * yv @ np.linalg.solve(C, yv) - 0.5 * ld - 12.5 * math.log(2 * math.pi)
        limit = lp - math.log(beta * 0.3 * ax.h * eps / (2 * math.pi))
        assert limit == pytest.approx(ours, abs=50 * eps + 1e-6)


def test_regressor_on_a_free_axis_reproduces_a_quadratic_that_neumann_bends():
    """l6 on a free boundary leaves the quadratics flat, so noise-free data on a parabola are fitted by that parabola
    at every node, whatever lambda and beta (the closed form); Neumann's l6 penalises its slope at the ends."""
    from bftcore.estimator import BFTRegressor
    nodes = np.linspace(0.0, 4.0, 41)
    idx = np.random.default_rng(2).choice(41, 12, replace=False)
    parabola = 1.0 - 0.5 * nodes + 0.25 * nodes ** 2
    kw = dict(lam=5.0, beta=2.0, l2=0.0, l6=1.0, n=41, x_min=0.0, x_max=4.0)
    free = BFTRegressor(boundary="free", **kw).fit(nodes[idx], parabola[idx])
    np.testing.assert_allclose(free.predict(nodes), parabola, atol=1e-8)
    bent = BFTRegressor(boundary="neumann", **kw).fit(nodes[idx], parabola[idx])
    assert np.max(np.abs(bent.predict(nodes) - parabola)) > 1e-2
