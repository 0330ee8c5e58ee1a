"""Grid, snapping, lattice Laplacians and the prior operator K of (699)-(702), checked against independent dense
constructions written out here from the definitions of CONVENTIONS.md §1 (explicit second differences with wrap or
reflecting ghost nodes, matrix powers, Kronecker products, numpy dense solves and eigenvalues)."""
import itertools

import numpy as np
import pytest

from bftcore.foundations import operators
from bftcore.foundations.grid import Axis, Grid
from bftcore.foundations.operators import PriorOperator, SingularOperatorError, axis_operator, axis_symbol, laplacian_1d

BOUNDARY_PAIRS = list(itertools.product(("periodic", "neumann"), repeat=2))
COEFFS = [  # (l0, l2, l4, l6): each order alone and a combination of all four
    (0.3, 0.0, 0.0, 0.0), (0.0, 1.0, 0.0, 0.0), (0.0, 0.0, 0.7, 0.0), (0.0, 0.0, 0.0, 0.2), (0.1, 0.5, 0.05, 0.01)]


# ------------------------------------------------------------------------------------ independent constructions
def second_difference(f, h, boundary):
    """(f[k-1] - 2 f[k] + f[k+1]) / h^2 along axis 0: periodic wraps; neumann mirrors (ghost f[-1] = f[0],
    f[n] = f[n-1]), which is the free boundary -W^T W of forward differences."""
    if boundary == "periodic":
        left, right = np.roll(f, 1, axis=0), np.roll(f, -1, axis=0)
    else:
        left = np.concatenate([f[:1], f[:-1]], axis=0)
        right = np.concatenate([f[1:], f[-1:]], axis=0)
    return (left - 2 * f + right) / h ** 2


def dense_laplacian(n, h, boundary):
    return second_difference(np.eye(n), h, boundary)  # column k is the second difference of e_k


def dense_K(grid, lambda_x, lambda_y, l0, l2, l4, l6):
    def kaxis(ax):
        D = dense_laplacian(ax.n, ax.h, ax.boundary)
        mp = np.linalg.matrix_power
        return l0 * np.eye(ax.n) - l2 * D + l4 * mp(D, 2) - l6 * mp(D, 3)

    nx, ny = grid.shape
    return lambda_x * np.kron(kaxis(grid.x), np.eye(ny)) + lambda_y * np.kron(np.eye(nx), kaxis(grid.y))


def odd_grid(bx, by):
    """Non-square grid with non-unit, different spacings on the two axes."""
    return Grid(Axis(0.0, 2.0, 7, bx), Axis(-1.0, 3.5, 10, by))


# ------------------------------------------------------------------------------------------------ grid, snapping
def test_axis_nodes_and_spacing():
    ax = Axis(1.0, 10.0, 10, "periodic")
    assert ax.h == 1.0
    assert np.array_equal(ax.nodes, np.arange(1.0, 11.0))
    ax = Axis(-1.0, 3.5, 10, "neumann")
    assert ax.h == pytest.approx(0.5)
    assert ax.nodes[-1] == pytest.approx(3.5)
    assert Axis(2.0, 2.0, 1).h == 1.0


def test_snapping_to_nearest_node_and_repeated_points_count():
    g = Grid.paper()
    pts = [[3.4, 5.6], [3.0, 6.0], [2.6, 6.4], [1.0, 1.0], [10.0, 15.0], [9.51, 14.49]]
    ix, iy = g.snap(pts)
    assert ix.tolist() == [2, 2, 2, 0, 9, 9]
    assert iy.tolist() == [5, 5, 5, 0, 14, 13]
    N = g.counts(pts)
    assert N.shape == (10, 15)
    assert N[2, 5] == 3 and N[0, 0] == 1 and N[9, 14] == 1 and N[9, 13] == 1
    assert N.sum() == len(pts)


@pytest.mark.parametrize("points", [
    [[1.0, 2.0], [3.5, 4.0]], [[1, 2], [3, 4.5]], [[True, 2.0]], [(1.0, 2.0), (3.0, 4.0)], [np.array([1.0, 2.0])],
    [[1.0, "2.5"]], [[1.0, 2.0, 3.0]], [], [1.0, 2.0], [[1.0, 2.0], [3.0]], [[1.0, "x"]], [[1.0, [2.0]]],
    [[1.0, None]], [{"x": 1}], np.array([[1.0, 2.0]])])
def test_points_read_at_once_are_what_numpy_reads(points):
    """The data's fast reading (:func:`pairs_array`, np.fromiter over the pairs) gives np.asarray's array, or its
    error, for every kind of input."""
    from bftcore.foundations.grid import pairs_array
    try:
        expected = np.asarray(points, dtype=float)
    except (TypeError, ValueError) as e:
        with pytest.raises(type(e)):
            pairs_array(points)
        return
    got = pairs_array(points)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert np.array_equal(got, expected, equal_nan=True)


def test_snapping_on_non_unit_spacing():
    g = odd_grid("periodic", "neumann")   # x nodes 0, 1/3, ..., 2; y nodes -1, -0.5, ..., 3.5
    ix, iy = g.snap([[0.9, 0.26], [2.0, -1.0]])
    assert ix.tolist() == [3, 6]          # 0.9 is nearest to 1.0 = node 3
    assert iy.tolist() == [3, 0]          # 0.26 is nearest to 0.5 = node 3


@pytest.mark.parametrize("point, shown", [([12.0, 3.0], "12"), ([3.0, 15.5], "15.5"), ([0.0, 4.0], "(0, 4)"),
                                          ([-7.25, 2.0], "-7.25")])
def test_off_grid_point_raises_naming_the_point(point, shown):
    g = Grid.paper()
    with pytest.raises(ValueError) as exc:
        g.snap([[3.0, 3.0], point, [7.0, 12.0]])
    assert shown in str(exc.value)
    with pytest.raises(ValueError):
        g.counts([point])


def test_nan_point_raises():
    with pytest.raises(ValueError):
        Grid.paper().snap([[float("nan"), 3.0]])


# ------------------------------------------------------------------------------------------------- Laplacians
@pytest.mark.parametrize("boundary", ["periodic", "neumann"])
@pytest.mark.parametrize("n, h", [(2, 1.0), (3, 0.5), (9, 1.0), (16, 0.25)])
def test_laplacian_equals_explicit_second_differences(boundary, n, h):
    ax = Axis(0.0, h * (n - 1), n, boundary)
    rng = np.random.default_rng(n)
    f = rng.normal(size=n)
    expected = second_difference(f, h, boundary)
    assert np.allclose(laplacian_1d(ax) @ f, expected, rtol=1e-13, atol=1e-12)


def test_neumann_laplacian_is_minus_WtW_and_kills_constants():
    n, h = 6, 0.5
    W = (np.eye(n, k=1) - np.eye(n))[:-1] / h      # forward differences
    L = laplacian_1d(Axis(0.0, h * (n - 1), n, "neumann")).toarray()
    assert np.allclose(L, -W.T @ W, atol=1e-13)
    assert np.allclose(L @ np.ones(n), 0.0, atol=1e-13)


# --------------------------------------------------------------------------------------------- prior operator K
@pytest.mark.parametrize("bx, by", BOUNDARY_PAIRS)
@pytest.mark.parametrize("coeffs", COEFFS)
def test_K_matrix_equals_dense_definition(bx, by, coeffs):
    g = odd_grid(bx, by)
    K = PriorOperator(g, 1.7, 0.6, *coeffs)
    assert np.allclose(K.matrix.toarray(), dense_K(g, 1.7, 0.6, *coeffs), rtol=1e-12, atol=1e-9)


def test_K_matrix_is_shared_across_operators_of_the_same_prior_and_cannot_be_changed():
    """The matrix cache (a dashboard rebuilds K for every click): the same grid and coefficients give the same,
    read-only matrix; other coefficients give another, still equal to the dense definition."""
    g = odd_grid("neumann", "periodic")
    a, b = PriorOperator(g, 1.7, 0.6, 0.1, 1.0, 0.2, 0.0), PriorOperator(g, 1.7, 0.6, 0.1, 1.0, 0.2, 0.0)
    assert a.matrix is b.matrix
    with pytest.raises(ValueError):
        a.matrix.data[0] = 99.0
    # the root pair and the symbol are kept the same way
    assert a.root is b.root and a.symbol is b.symbol
    with pytest.raises(ValueError):
        a.root.data[0] = 99.0
    with pytest.raises(ValueError):
        a.symbol[0, 0] = 99.0
    c = PriorOperator(g, 1.7, 0.6, 0.1, 1.0, 0.3, 0.0)
    assert c.matrix is not a.matrix and c.root is not a.root and c.symbol is not a.symbol
    assert np.allclose(c.matrix.toarray(), dense_K(g, 1.7, 0.6, 0.1, 1.0, 0.3, 0.0), rtol=1e-12, atol=1e-9)
    assert np.allclose(a.matrix.toarray(), dense_K(g, 1.7, 0.6, 0.1, 1.0, 0.2, 0.0), rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("bx, by", BOUNDARY_PAIRS)
@pytest.mark.parametrize("coeffs", COEFFS)
@pytest.mark.parametrize("scale, mass2", [(1.0, 0.05), (0.3, 2.0)])
@pytest.mark.parametrize("dense_nodes", [0, operators.DENSE_TRANSFORM_NODES])
def test_solve_equals_dense_solve(bx, by, coeffs, scale, mass2, dense_nodes, monkeypatch):
    """Both routes of the solve: scipy.fft's transforms (``dense_nodes`` 0) and, on small grids, the same
    transforms as matrices."""
    monkeypatch.setattr(operators, "DENSE_TRANSFORM_NODES", dense_nodes)
    g = odd_grid(bx, by)
    K = PriorOperator(g, 1.7, 0.6, *coeffs)
    rhs = np.random.default_rng(7).normal(size=g.shape)
    A = scale * dense_K(g, 1.7, 0.6, *coeffs) + mass2 * np.eye(g.size)
    expected = np.linalg.solve(A, rhs.ravel()).reshape(g.shape)
    got = K.solve(rhs, scale, mass2)
    assert np.allclose(got, expected, rtol=1e-9, atol=1e-9 * np.max(np.abs(expected)))
    # and the solve really inverts the operator it is meant to invert
    assert np.allclose(scale * K.apply(got) + mass2 * got, rhs, atol=1e-8)


@pytest.mark.parametrize("boundary", ["periodic", "neumann"])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 16])
def test_the_small_grids_transform_is_an_orthonormal_eigenbasis_in_the_symbols_order(boundary, n):
    """The matrix of the small grids' solve (:func:`operators._axis_transforms`): ``T T^T = I`` and ``T A T^T`` is
    diagonal with :func:`axis_symbol`'s eigenvalues in their order, for every order of the prior (the real Fourier
    basis of a periodic axis pairs frequencies k and n - k, which share an eigenvalue)."""
    ax = Axis(0.0, 2.0, n, boundary)
    T, T_t = operators._axis_transforms(ax)
    assert np.allclose(T @ T_t, np.eye(n), rtol=0, atol=1e-13) and np.array_equal(T_t, T.T)
    for coeffs in COEFFS:
        A = axis_operator(ax, *coeffs).toarray()
        D = T @ A @ T.T
        scale = max(1.0, np.abs(A).max())
        assert np.allclose(D, np.diag(axis_symbol(ax, *coeffs)), rtol=0, atol=1e-12 * scale)


@pytest.mark.parametrize("bx, by", BOUNDARY_PAIRS)
@pytest.mark.parametrize("coeffs", COEFFS)
def test_symbol_equals_dense_eigenvalues(bx, by, coeffs):
    g = odd_grid(bx, by)
    K = PriorOperator(g, 1.7, 0.6, *coeffs)
    ev = np.linalg.eigvalsh(dense_K(g, 1.7, 0.6, *coeffs))
    sym = np.sort(K.symbol.ravel())
    assert np.allclose(sym, ev, rtol=1e-9, atol=1e-9 * ev.max())


@pytest.mark.parametrize("bx, by", BOUNDARY_PAIRS)
@pytest.mark.parametrize("coeffs", COEFFS)
def test_K_symmetric_positive_semidefinite(bx, by, coeffs):
    g = odd_grid(bx, by)
    M = PriorOperator(g, 1.7, 0.6, *coeffs).matrix.toarray()
    assert np.allclose(M, M.T, rtol=0, atol=1e-12 * np.abs(M).max())
    ev = np.linalg.eigvalsh(M)
    assert ev.min() >= -1e-10 * ev.max()
    if coeffs[0] > 0:  # l0 > 0: K >= (lambda_x + lambda_y) l0 I, strictly positive definite
        assert ev.min() >= (1.7 + 0.6) * coeffs[0] * (1 - 1e-9)


@pytest.mark.parametrize("bx, by", BOUNDARY_PAIRS)
def test_constant_field_in_kernel_when_l0_is_zero(bx, by):
    g = odd_grid(bx, by)
    for coeffs in COEFFS:
        K = PriorOperator(g, 1.7, 0.6, *coeffs)
        K1 = K.apply(np.ones(g.shape))
        assert np.allclose(K1, (1.7 + 0.6) * coeffs[0], atol=1e-9), coeffs


@pytest.mark.parametrize("bx, by", BOUNDARY_PAIRS)
def test_singular_operator_error_for_zero_mode(bx, by):
    g = odd_grid(bx, by)
    K = PriorOperator(g, 1.0, 1.0, 0.0, 1.0, 0.0, 0.01)
    with pytest.raises(SingularOperatorError):
        K.solve(np.ones(g.shape), 1.0, 0.0)
    with pytest.raises(ValueError):  # what the CLI and the dashboard catch as a user error
        K.solve(np.ones(g.shape), 1.0, 0.0)
    # the same operator with a mass, or with l0 > 0, is invertible
    assert np.all(np.isfinite(K.solve(np.ones(g.shape), 1.0, 1e-3)))
    Km = PriorOperator(g, 1.0, 1.0, 0.2, 1.0, 0.0, 0.0)
    assert np.allclose(Km.solve(np.ones(g.shape), 1.0, 0.0), 1.0 / (2 * 0.2))


def test_quadratic_form_uses_the_grid_inner_product():
    g = odd_grid("neumann", "periodic")
    K = PriorOperator(g, 1.3, 0.8, 0.1, 1.0, 0.0, 0.0)
    f = np.random.default_rng(3).normal(size=g.shape)
    expected = f.ravel() @ dense_K(g, 1.3, 0.8, 0.1, 1.0, 0.0, 0.0) @ f.ravel() * g.hx * g.hy
    assert K.quadratic(f) == pytest.approx(expected, rel=1e-12)


def test_negative_prior_coefficient_rejected():
    with pytest.raises(ValueError):
        PriorOperator(Grid.paper(), 1.0, 1.0, 0.0, -1.0)


# ------------------------------------------------------------------------------------------ prior samples
@pytest.mark.parametrize("bx, by", [("periodic", "periodic"), ("neumann", "periodic"), ("neumann", "neumann")])
def test_prior_samples_have_the_covariance_of_the_inverse_operator(bx, by):
    """Independent route: the sample covariance of (scale K)^{-1/2} z against the dense inverse of scale K."""
    grid = Grid(Axis(0.0, 3.0, 4, bx), Axis(0.0, 4.0, 5, by))
    K = PriorOperator(grid, 1.0, 0.7, l0=0.5, l2=1.0, l4=0.1)
    scale = 0.3
    samples = K.sample(np.random.default_rng(1), 40000, scale).reshape(40000, -1)
    C = np.linalg.inv(scale * K.matrix.toarray())
    emp = samples.T @ samples / len(samples)
    assert np.max(np.abs(emp - C)) < 0.03 * np.max(np.abs(C))


def test_prior_samples_leave_out_the_zero_mode():
    grid = Grid(Axis(0.0, 3.0, 6, "periodic"), Axis(0.0, 4.0, 7, "neumann"))
    K = PriorOperator(grid, 1.0, 1.0, l0=0.0, l2=1.0)
    s = K.sample(np.random.default_rng(2), 50)
    assert np.allclose(s.mean(axis=(1, 2)), 0.0, atol=1e-12)     # the constant field is K's zero mode
    assert np.all(s.std(axis=(1, 2)) > 0.01)


@pytest.mark.parametrize("boundary", ["neumann", "periodic", "free"])
@pytest.mark.parametrize("coeffs", [dict(l0=0.3, l2=1.0), dict(l2=0.0, l4=2.0), dict(l2=0.5, l6=1.0)])
@pytest.mark.parametrize("shape", [(1, 9), (2, 2), (5, 12)])
def test_the_root_of_K_squares_to_K_and_applies_it(boundary, coeffs, shape):
    """G^T G equals the assembled K (eqs. (699)-(702)) on every boundary, including one- and two-node axes; K f
    through the root equals the matrix product."""
    grid = Grid(Axis(0.0, 2.0, shape[0], boundary), Axis(-1.0, 3.0, shape[1], boundary))
    K = PriorOperator(grid, lambda_x=0.7, lambda_y=1.9, **coeffs)
    G = K.root.toarray()
    dense = K.matrix.toarray()
    np.testing.assert_allclose(G.T @ G, dense, rtol=0, atol=1e-9 * np.abs(dense).max())
    f = np.random.default_rng(1).normal(size=shape)
    np.testing.assert_allclose(K.apply(f).ravel(), dense @ f.ravel(), rtol=0, atol=1e-9 * np.abs(dense).max())


def test_axis_operators_are_cached_but_never_shared():
    """The 1-D operators are cached across problems; each call gets its own copy, so a caller that changes its
    matrix in place changes nobody else's, and the cached one equals a build from scratch."""
    from bftcore.foundations.operators import _axis_operator, axis_operator
    ax = Axis(0.0, 3.0, 12, "neumann")
    A = axis_operator(ax, l2=1.0, l6=0.5)
    A.data[:] = 99.0
    B = axis_operator(ax, l2=1.0, l6=0.5)
    fresh = _axis_operator.__wrapped__(ax, 0.0, 1.0, 0.0, 0.5)
    assert B is not A and abs(B - fresh).max() == 0 and not np.any(B.data == 99.0)
