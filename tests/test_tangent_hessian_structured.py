"""The tangent-space Hessian H_g of the Laplace samples, assembled block by block (issue 31), against the slow
dense reference it replaced: ``W^T H W`` with W the dense block-diagonal map J times the basis U and H the full
Hessian ``lambda cell K + diag(Lambda_X P hy)``, built with a Python loop over the x nodes.  Also against the
Hessian's action ``tangent_hessp`` (a second, independent route); the finite-difference check of H_g is
tests/test_evidence.py's."""
import numpy as np
import pytest
import scipy.linalg as sla

from bftcore.foundations.config import validate_config
from bftcore.models import evidence as ev
from bftcore.models.density import build_density, solve


def config(nx, ny, bx="neumann", by="periodic", n_data=9, seed=0, **prior):
    rng = np.random.default_rng(seed)
    data = [[0.5 * int(rng.integers(nx)), -1.0 + 0.75 * int(rng.integers(ny))] for _ in range(n_data)]
    pr = {"field": "L", "lambda": 0.7, "l2": 1.0}
    pr.update(prior)
    x = {"min": 0.0, "max": 0.5 * (nx - 1), "n": nx, "boundary": bx} if nx > 1 else \
        {"min": 0.0, "max": 0.0, "n": 1, "boundary": bx}
    return validate_config({
        "grid": {"x": x, "y": {"min": -1.0, "max": -1.0 + 0.75 * (ny - 1), "n": ny, "boundary": by}},
        "data": data, "prior": pr, "solver": {"method": "newton", "min_iter": 1, "max_iter": 200, "tol": 1e-12}})


def reference(point):
    """The old construction, dense: one block ``U - 1 (P_i hy)^T U`` per x node in a loop, then ``W^T H W``."""
    E = point.energy
    grid, pr = E.grid, E.prior
    nx, ny = grid.shape
    U = ev._y_basis(ny)
    p = point.P * grid.hy
    W = sla.block_diag(*[U - np.outer(np.ones(ny), p[i] @ U) for i in range(nx)])
    H = (pr.lam * grid.cell) * pr.K.matrix.toarray() + np.diag((point.lagrange_multiplier[:, None] * p).ravel())
    return W.T @ H @ W, U


CASES = [
    (4, 6, {}),
    (5, 7, {"by": "neumann"}),
    (8, 5, {"l2": 0.0, "l6": 1.0}),
    (9, 4, {"l4": 0.5, "l0": 0.2, "by": "neumann"}),
    (6, 5, {"bx": "periodic", "by": "neumann"}),
    (2, 5, {"bx": "periodic"}),  # the offsets +1 and -1 are one block, mod 2
    (3, 6, {"bx": "periodic", "l2": 0.0, "l6": 1.0}),  # the l6 stencil wraps twice round 3 x nodes
    (1, 40, {"n_data": 30}),
    (1, 400, {"n_data": 50, "l2": 0.0, "l6": 1.0}),  # the 1-D density kind's size (issue 31)
]


@pytest.mark.parametrize("nx, ny, kw", CASES)
def test_structured_hessian_equals_the_dense_reference(nx, ny, kw):
    pb = build_density(config(nx, ny, **kw))
    point, _ = ev.map_newton(pb.energy, solve(pb).L)
    ref, U = reference(point)
    scale = np.max(np.abs(ref))
    dense, U2 = ev.tangent_hessian_dense(point)
    assert np.array_equal(U, U2)
    assert np.max(np.abs(dense - 0.5 * (ref + ref.T))) <= 1e-10 * scale
    sparse, _ = ev._tangent_hessian_sparse(point)  # not symmetrised: the product itself
    assert np.max(np.abs(sparse.toarray() - ref)) <= 1e-10 * scale
    # the action of H_g on fields of G (g = U c per x), an independent route
    c = np.random.default_rng(1).standard_normal((3, nx, ny - 1))
    Hv = ev.tangent_hessp(point, np.einsum("yk,rik->riy", U, c))
    assert np.max(np.abs(np.einsum("yk,riy->rik", U, Hv).reshape(3, -1) - c.reshape(3, -1) @ dense)) \
        <= 1e-10 * scale * np.max(np.abs(c)) * dense.shape[0]
    if nx > 3 and kw.get("bx", "neumann") == "neumann":
        for chunk in (None, 1):
            ab, u, _ = ev._tangent_hessian_banded(point, chunk_nnz=chunk)
            i, j = np.triu_indices(dense.shape[0])
            inside = j - i <= u
            assert np.max(np.abs(ab[u + i[inside] - j[inside], j[inside]] - dense[i[inside], j[inside]])) \
                <= 1e-10 * scale
            assert np.max(np.abs(dense[i[~inside], j[~inside]]), initial=0.0) <= 1e-10 * scale


def test_a_sparse_map_that_is_not_bsr_gives_the_same_blocks():
    """Whatever sparse format W comes in (a CSR block diagonal, as a caller may build it), the blocks are the same."""
    pb = build_density(config(5, 6))
    point, _ = ev.map_newton(pb.energy, solve(pb).L)
    W, H, _ = ev._tangent_parts(point)
    nx, ny = 5, 6
    as_bsr = list(ev._tangent_hessian_blocks(W, H, nx, ny))
    as_csr = list(ev._tangent_hessian_blocks(W.tocsr(), H, nx, ny))
    assert len(as_bsr) == len(as_csr) == 3
    for (i, j, B), (i2, j2, B2) in zip(as_bsr, as_csr):
        assert np.array_equal(i, i2) and np.array_equal(j, j2) and np.array_equal(B, B2)
