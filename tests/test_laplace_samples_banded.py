"""Laplace samples through a banded Cholesky factor of H_g (bftcore.models.evidence): the factor reproduces the dense
Hessian, its draws have covariance exactly H_g^{-1}, the banded and dense routes give the same samples, a periodic x
axis goes the dense route, and the refusals (non-positive-definite Hessian, grids too large, costs too high)."""
import numpy as np
import pytest
import scipy.sparse as sp

from bftcore.foundations.config import validate_config
from bftcore.foundations.limits import UNLIMITED
from bftcore.models import evidence as ev
from bftcore.models.density import build_density, solve
from bftcore.models.presets import random_problem


def config(nx, ny, lam=0.7, bx="neumann", by="periodic", n_data=9, seed=0, limits=None, **prior):
    rng = np.random.default_rng(seed)
    data = [[0.5 * int(rng.integers(nx)), -1.0 + 0.75 * int(rng.integers(ny))] for _ in range(n_data)]
    pr = {"field": "L", "lambda": lam, "l2": 1.0}
    pr.update(prior)
    return validate_config({
        "grid": {"x": {"min": 0.0, "max": 0.5 * (nx - 1), "n": nx, "boundary": bx},
                 "y": {"min": -1.0, "max": -1.0 + 0.75 * (ny - 1), "n": ny, "boundary": by}},
        "data": data, "prior": pr,
        "solver": {"method": "newton", "min_iter": 1, "max_iter": 200, "tol": 1e-12}}, limits)


def map_point(cfg):
    pb = build_density(cfg)
    L = solve(pb).L
    point, _ = ev.map_newton(pb.energy, L)
    return pb, L, point


# (nx, ny, reach of the x stencil, config keywords)
CASES = [
    (4, 6, 1, {}),
    (5, 7, 1, {"by": "neumann"}),
    (8, 5, 3, {"l2": 0.0, "l6": 1.0}),
    (9, 4, 2, {"l4": 0.5, "l0": 0.2, "by": "neumann"}),
    (1, 6, 0, {}),
]


@pytest.mark.parametrize("nx, ny, reach, kw", CASES)
def test_banded_factor_reproduces_the_dense_hessian(nx, ny, reach, kw):
    _, _, point = map_point(config(nx, ny, **kw))
    Hg, U = ev.tangent_hessian_dense(point)
    d = nx * (ny - 1)
    assert Hg.shape == (d, d)
    fac = ev._tangent_factor(point, banded=True)
    assert fac.banded and fac.R.shape == (fac.u + 1, d)
    # the half-bandwidth is the block band of the x stencil (all of it for nx = 1)
    assert fac.u == min(d - 1, (reach + 1) * (ny - 1) - 1)
    R = fac.upper()
    assert np.array_equal(R, np.triu(R))
    assert np.max(np.abs(R.T @ R - Hg)) <= 1e-10 * np.max(np.abs(Hg))
    assert np.allclose(fac.basis, U)
    # the storage itself: ab[u + i - j, j] = Hg[i, j] for i <= j, from the sparse H_g, whole or one x at a time
    i, j = np.triu_indices(d)
    for chunk in (None, 1):
        ab, u, _ = ev._tangent_hessian_banded(point, chunk_nnz=chunk)
        assert u == fac.u and ab.shape == (u + 1, d) and ab.flags.f_contiguous
        inside = j - i <= u
        assert np.max(np.abs(ab[u + i[inside] - j[inside], j[inside]] - Hg[i[inside], j[inside]])) \
            <= 1e-13 * np.max(np.abs(Hg))
        assert np.all(Hg[i[~inside], j[~inside]] == 0)


def test_the_band_is_the_products_when_its_far_diagonals_vanish(monkeypatch):
    """The half-bandwidth comes from the product's entries, not only the stencil's bound: with W made of unit
    columns the x-coupling blocks of W^T H W are diagonal, and the band narrows from 2 (ny - 1) - 1 to ny - 1."""
    nx, ny = 5, 6
    _, _, point = map_point(config(nx, ny))
    real = ev._tangent_parts

    def unit_columns(p):
        _, H, U = real(p)
        return sp.block_diag([np.eye(ny)[:, 1:]] * nx, format="csr"), H, U
    monkeypatch.setattr(ev, "_tangent_parts", unit_columns)
    W, H, _ = ev._tangent_parts(point)
    A = (W.T @ H @ W).toarray()
    for chunk in (None, 1):
        ab, u, _ = ev._tangent_hessian_banded(point, chunk_nnz=chunk)
        assert u == ny - 1 and ab.shape == (u + 1, nx * (ny - 1)) and ab.flags.f_contiguous
        i, j = np.triu_indices(A.shape[0])
        inside = j - i <= u
        assert np.allclose(ab[u + i[inside] - j[inside], j[inside]], A[i[inside], j[inside]], rtol=1e-14, atol=0)


@pytest.mark.parametrize("nx, ny, reach, kw", CASES)
def test_draws_have_covariance_inverse_hessian(nx, ny, reach, kw):
    """The draw is the linear map xi -> R^{-1} xi: its covariance R^{-1} R^{-T} must be H_g^{-1}, exactly; the
    banded and dense factors give the same draws."""
    _, _, point = map_point(config(nx, ny, **kw))
    Hg, _ = ev.tangent_hessian_dense(point)
    d = Hg.shape[0]
    banded, dense = ev._tangent_factor(point, banded=True), ev._tangent_factor(point, banded=False)
    assert not dense.banded
    Rinv = banded.draw(np.eye(d))
    assert np.allclose(Rinv, np.triu(Rinv), rtol=0, atol=0)
    cov = Rinv @ Rinv.T
    Hinv = np.linalg.inv(Hg)
    assert np.max(np.abs(cov - Hinv)) <= 1e-8 * np.max(np.abs(Hinv))
    xi = np.random.default_rng(1).standard_normal((d, 7))
    assert np.allclose(banded.draw(xi), dense.draw(xi), rtol=1e-9, atol=1e-9 * np.max(np.abs(dense.draw(xi))))
    assert np.allclose(banded.upper() @ banded.draw(xi), xi, rtol=0, atol=1e-10 * np.max(np.abs(xi)))


def test_laplace_samples_banded_and_dense_routes_agree(monkeypatch):
    cfg = config(6, 5, n_data=12, seed=2)
    pb, L, _ = map_point(cfg)
    banded, u = ev._sample_plan(pb)[:2]
    assert banded and u == 2 * 4 - 1
    S_banded = ev.laplace_samples(pb, L, 50, np.random.default_rng(5))
    real = ev._sample_plan
    monkeypatch.setattr(ev, "_sample_plan", lambda problem: (False,) + real(problem)[1:])
    S_dense = ev.laplace_samples(pb, L, 50, np.random.default_rng(5))
    assert S_banded.shape == (50, 6, 5)
    assert np.allclose(np.exp(S_banded).sum(axis=2) * pb.grid.hy, 1.0)
    assert np.allclose(S_banded, S_dense, rtol=0, atol=1e-9)


def test_periodic_x_goes_the_dense_route_and_is_correct():
    cfg = config(6, 5, bx="periodic", by="neumann")
    pb, L, point = map_point(cfg)
    banded, u = ev._sample_plan(pb)[:2]
    d = 6 * 4
    assert not banded and u == d - 1
    assert ev._x_reach(pb.energy.prior.K.matrix, 5) == 5  # the wrap-around couples x_0 and x_5
    Hg, _ = ev.tangent_hessian_dense(point)
    for fac in (ev._tangent_factor(point, banded=False), ev._tangent_factor(point, banded=True)):
        R = fac.upper()
        assert np.max(np.abs(R.T @ R - Hg)) <= 1e-10 * np.max(np.abs(Hg))
        Rinv = fac.draw(np.eye(d))
        assert np.allclose(Rinv @ Rinv.T, np.linalg.inv(Hg), rtol=1e-8, atol=1e-10)
    S = ev.laplace_samples(pb, L, 20, np.random.default_rng(0))
    assert S.shape == (20, 6, 5) and np.all(np.isfinite(S))


def test_small_and_narrow_grids_go_dense():
    for nx in (1, 2, 3):
        pb, L, _ = map_point(config(nx, 6))
        banded, u = ev._sample_plan(pb)[:2]
        assert not banded, nx
        assert ev.laplace_samples(pb, L, 3, np.random.default_rng(0)).shape == (3, nx, 6)


@pytest.mark.parametrize("banded", [True, False])
def test_not_positive_definite_is_refused_the_same_way(monkeypatch, banded):
    _, _, point = map_point(config(5, 4))
    real = ev._tangent_parts

    def negated(p):
        W, H, U = real(p)
        return W, -H, U
    monkeypatch.setattr(ev, "_tangent_parts", negated)
    with pytest.raises(ValueError, match="not a local minimum of the energy on the normalised densities"):
        ev._tangent_factor(point, banded=banded)


def test_grids_beyond_the_limits_are_refused_before_any_work():
    nx, ny = 1, ev.SAMPLE_MAX_NODES + 1
    pb = build_density(config(nx, ny, n_data=3, limits=UNLIMITED))
    with pytest.raises(ValueError, match=f"grids up to {ev.SAMPLE_MAX_NODES} nodes"):
        ev.laplace_samples(pb, np.zeros(pb.grid.shape), 2, np.random.default_rng(0))
    # within the node limit but a wide band: tall grids (banded, u = 2 (ny - 1) - 1) ...
    pb = build_density(config(9, 1024, n_data=3, limits=UNLIMITED))
    banded, u, mem, flops, product = ev._sample_plan(pb)
    assert banded and u == 2 * 1023 - 1 and flops > ev._SAMPLE_MAX_FLOPS and product > ev._SAMPLE_MAX_PRODUCT
    with pytest.raises(ValueError, match=r"9 x 1024 grid need a banded \(half-bandwidth 2045\) Cholesky factor "
                                         r"of the 9207 x 9207 Hessian .* MiB"):
        ev.laplace_samples(pb, np.zeros(pb.grid.shape), 2, np.random.default_rng(0))
    pb = build_density(config(18, 512, n_data=3, limits=UNLIMITED))
    banded, u, mem, flops, product = ev._sample_plan(pb)
    # the sparse product is the cost here
    assert banded and flops < ev._SAMPLE_MAX_FLOPS and mem < ev._SAMPLE_MAX_BYTES and product > ev._SAMPLE_MAX_PRODUCT
    with pytest.raises(ValueError, match=r"multiply-adds to build it"):
        ev.laplace_samples(pb, np.zeros(pb.grid.shape), 2, np.random.default_rng(0))
    # ... and a periodic x axis, whose factor is dense
    pb = build_density(config(90, 90, bx="periodic", n_data=3, limits=UNLIMITED))
    assert not ev._sample_plan(pb)[0]
    with pytest.raises(ValueError, match="dense \\(a periodic x axis couples"):
        ev.laplace_samples(pb, np.zeros(pb.grid.shape), 2, np.random.default_rng(0))


def test_the_64_by_64_benchmark_problem_goes_banded_within_the_limits():
    """The grid of scripts/bench_evidence.py (an l2 prior, x Neumann, y periodic) is sampled through the banded
    factor, at (u + 1) d 8 bytes = 126 x 4032 x 8 bytes (4 MiB) for the factor."""
    pb = build_density(validate_config(random_problem(64, {"l2": 1.0}, seed=0)))
    banded, u, mem, flops, product = ev._sample_plan(pb)
    assert banded and u == 125
    assert mem < ev._SAMPLE_MAX_BYTES and flops < ev._SAMPLE_MAX_FLOPS and product < ev._SAMPLE_MAX_PRODUCT
