"""Lattice Laplacians, the prior operator K of eqs. (699)-(702), and fast exact solves with K + m^2 I.

Every operator here is diagonalised by a fixed orthogonal transform per axis: the discrete Fourier transform for a
periodic axis and the orthonormal DCT-II for a Neumann axis (the free boundary ``-Delta = W^T W`` with forward
differences W).  Powers Delta^2, Delta^3 are matrix powers of the same Laplacian, so they share the transform and
``K + m^2 I`` is inverted exactly in O(n log n) on every grid, with no factorisation to cache.

The ``"free"`` boundary is DEFT's (Kinney 2014): the order-k term is the sum of squared k-th differences over the
``n - k`` places where they exist, ``(l_2k / h^2k) D_k^T D_k``, so polynomials of degree < k cost nothing (l6 alone
leaves 1, y, y^2 free: a Gaussian's log-density, ln P quadratic, is not penalised at all), where the Neumann
Delta^3 penalises every slope at the ends.  No fixed transform diagonalises it: its eigenbasis is computed once per
axis and coefficients (a dense SVD of its square root, axes up to :data:`FREE_AXIS_MAX_NODES` nodes) and applied as a
matrix product, and the null space gets exact zero eigenvalues with the orthonormalised polynomials (the constant first)
as its basis, so that "mode 0 is the constant" holds for every boundary.  For l2 alone it equals Neumann.
"""
from __future__ import annotations

import functools
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import scipy.fft as sfft
import scipy.sparse as sp

from .grid import Axis, Grid


class SingularOperatorError(ValueError):
    """Raised when a solve needs the inverse of an operator with a zero mode (e.g. lambda = 0, or m^2 = 0)."""


def laplacian_1d(axis: Axis) -> sp.csr_matrix:
    """Lattice Laplacian of one axis, eq. (638): second difference over h^2; periodic wraps, Neumann is -W^T W."""
    n, h2 = axis.n, axis.h ** 2
    if n == 1:
        return sp.csr_matrix((1, 1))
    k = np.arange(n)
    if axis.boundary == "periodic":
        if n == 2:  # both neighbours are the same node
            return sp.csr_matrix(np.array([[-2.0, 2.0], [2.0, -2.0]]) / h2)
        rows = np.concatenate([k, k, k])
        cols = np.concatenate([k, (k + 1) % n, (k - 1) % n])
        vals = np.concatenate([np.full(n, -2.0), np.ones(n), np.ones(n)]) / h2
        return sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
    # Neumann: -W^T W with forward differences W: -1 on the two end nodes' diagonal, -2 inside
    diag = np.full(n, -2.0)
    diag[[0, -1]] = -1.0
    rows = np.concatenate([k, k[:-1], k[1:]])
    cols = np.concatenate([k, k[1:], k[:-1]])
    vals = np.concatenate([diag, np.ones(n - 1), np.ones(n - 1)]) / h2
    return sp.csr_matrix((vals, (rows, cols)), shape=(n, n))


#: Largest free-boundary axis: its eigenbasis is a dense SVD of an (up to 3n, n) matrix.
FREE_AXIS_MAX_NODES = 1024


#: The derivative order k of each smoothness coefficient of a prior: l_2k weighs (d^k f)^2.
ORDERS = ((1, "l2"), (2, "l4"), (3, "l6"))


def highest_order(coeffs: dict) -> int:
    """The largest k whose coefficient l_2k is > 0 (0 for a mass l0 alone): the order that sets how a prior
    scales with the grid's units."""
    return max((k for k, name in ORDERS if coeffs[name] > 0), default=0)


def one_order(coeffs: dict) -> tuple[int, float] | None:
    """``(k, l_2k)`` of a prior of exactly one order and no mass l0, the priors that have a length scale; None
    for any other."""
    present = [(k, float(coeffs[name])) for k, name in ORDERS if coeffs[name]]
    return present[0] if len(present) == 1 and not coeffs["l0"] else None


def difference_matrix(n: int, k: int, h: float) -> sp.csr_matrix:
    """The ``(n - k, n)`` k-th forward differences over ``h^k`` (empty when n <= k)."""
    if n <= k:
        return sp.csr_matrix((0, n))
    coeff = np.array([(-1.0) ** (k - i) * math.comb(k, i) for i in range(k + 1)]) / h ** k
    rows = np.repeat(np.arange(n - k), k + 1)
    cols = (np.arange(n - k)[:, None] + np.arange(k + 1)[None, :]).ravel()
    return sp.csr_matrix((np.tile(coeff, n - k), (rows, cols)), shape=(n - k, n))


def free_root(axis: Axis, l0=0.0, l2=0.0, l4=0.0, l6=0.0) -> sp.csr_matrix:
    """G with ``G^T G`` the free-boundary axis operator: ``sqrt(l0) I`` and ``sqrt(l_2k) D_k`` stacked."""
    n = axis.n
    parts = [np.sqrt(l0) * sp.identity(n, format="csr")] if l0 > 0 else []
    parts += [np.sqrt(c) * difference_matrix(n, k, axis.h) for k, c in ((1, l2), (2, l4), (3, l6)) if c and n > k]
    return sp.csr_matrix(sp.vstack(parts)) if parts else sp.csr_matrix((1, n))


def axis_root(axis: Axis, l0=0.0, l2=0.0, l4=0.0, l6=0.0) -> sp.csr_matrix:
    """G with ``G^T G`` = :func:`axis_operator`: on a free boundary :func:`free_root`; on a Neumann or periodic axis
    the stacked ``sqrt(l0) I``, ``sqrt(l2) W``, ``sqrt(l4) W^T W`` and ``sqrt(l6) W W^T W`` of the forward
    differences W over h (``-Delta = W^T W``; periodic W wraps).  Zero rows for a term that is absent (one node:
    ``sqrt(l0) I`` alone)."""
    n = axis.n
    if axis.boundary == "free" and n > 1:
        return free_root(axis, l0, l2, l4, l6)
    eye = sp.identity(n, format="csr")
    if n == 1:
        return sp.csr_matrix(np.sqrt(l0) * eye) if l0 > 0 else sp.csr_matrix((0, 1))
    k = np.arange(n)
    m = n if axis.boundary == "periodic" else n - 1
    W = sp.csr_matrix((np.concatenate([-np.ones(m), np.ones(m)]),
                       (np.concatenate([k[:m], k[:m]]), np.concatenate([k[:m], (k[:m] + 1) % n]))),
                      shape=(m, n)) / axis.h
    WtW = (W.T @ W).tocsr()
    roots = ((l0, eye), (l2, W), (l4, WtW), (l6, (W @ WtW).tocsr()))
    parts = [np.sqrt(c) * R for c, R in roots if c > 0]
    return sp.csr_matrix(sp.vstack(parts)) if parts else sp.csr_matrix((0, n))


def free_null_dim(axis: Axis, l0=0.0, l2=0.0, l4=0.0, l6=0.0) -> int:
    """Dimension of the null space of a free-boundary axis operator: the polynomials of degree < k, k the lowest
    order present (0 with a mass l0 > 0; at most n)."""
    if l0 > 0:
        return 0
    k = next((k for k, c in ((1, l2), (2, l4), (3, l6)) if c > 0), axis.n)
    return min(k, axis.n)


@functools.lru_cache(maxsize=16)
def free_axis_spectrum(axis: Axis, l0=0.0, l2=0.0, l4=0.0, l6=0.0) -> tuple[np.ndarray, np.ndarray]:
    """``(values, basis)`` of a free-boundary axis operator, values ascending, ``basis[:, a]`` orthonormal: the
    null space first (the orthonormalised monomials of the scaled coordinate, the constant first, values exactly
    0), then the eigenvectors of the operator on its complement.  Read-only arrays, cached per axis and
    coefficients."""
    n = axis.n
    if n > FREE_AXIS_MAX_NODES:
        raise ValueError(f"a free-boundary axis has at most {FREE_AXIS_MAX_NODES} nodes (its eigenbasis is a dense "
                         f"eigendecomposition), this one has {n}; use a neumann boundary or fewer nodes")
    # K = G^T G with G the stacked sqrt(l_2k) D_k (and sqrt(l0) I): its eigenvalues are the squared singular values
    # of G, accurate relative to each other (an eigh of K loses the smallest ones, 13 decades below the largest
    # for l6 on 200 nodes, to the rounding of the largest)
    G = free_root(axis, l0, l2, l4, l6).toarray()
    r = free_null_dim(axis, l0, l2, l4, l6)
    t = np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
    Q = np.linalg.qr(np.stack([t ** k for k in range(r)], axis=1))[0] if r else np.zeros((n, 0))
    if r:
        Q = Q * np.sign(Q[0, 0])  # the constant with a positive sign, as the DCT's mode 0
        G = G - (G @ Q) @ Q.T  # exactly zero on the null space (rounding aside)
    _, sv, Vt = np.linalg.svd(G, full_matrices=True)
    sv = np.concatenate([sv, np.zeros(n - sv.size)])[: n - r][::-1]
    values = np.concatenate([np.zeros(r), sv ** 2])
    basis = np.concatenate([Q, Vt[: n - r][::-1].T], axis=1)
    values.flags.writeable = False
    basis.flags.writeable = False
    return values, basis


def laplacian_eigenvalues(axis: Axis) -> np.ndarray:
    """Eigenvalues of -Delta for one axis, in the order of :func:`forward` 's coefficients."""
    n, h2 = axis.n, axis.h ** 2
    if n == 1:
        return np.zeros(1)
    k = np.arange(n)
    if axis.boundary == "periodic":
        return (2 - 2 * np.cos(2 * np.pi * k / n)) / h2
    return (2 - 2 * np.cos(np.pi * k / n)) / h2


def axis_operator(axis: Axis, l0=0.0, l2=0.0, l4=0.0, l6=0.0) -> sp.csr_matrix:
    """K_X = l0 I - l2 Delta + l4 Delta^2 - l6 Delta^3, eqs. (700), (701); on a free boundary
    ``l0 I + sum_k (l_2k / h^2k) D_k^T D_k`` (module docstring).  A fresh copy of a cached matrix: every fit builds
    its axes' operators, 0.12 ms each on the paper mesh against 10 us for the copy."""
    return _axis_operator(axis, float(l0), float(l2), float(l4), float(l6)).copy()


@functools.lru_cache(maxsize=64)
def _axis_operator(axis: Axis, l0: float, l2: float, l4: float, l6: float) -> sp.csr_matrix:
    if axis.boundary == "free" and axis.n > 1:
        G = free_root(axis, l0, l2, l4, l6)
        return sp.csr_matrix(G.T @ G)
    D, eye = laplacian_1d(axis), sp.identity(axis.n, format="csr")
    if axis.n <= 256:  # small axes: dense powers are far cheaper than sparse products
        D, eye = D.toarray(), np.eye(axis.n)
    K = l0 * eye - l2 * D
    if l4 or l6:
        D2 = D @ D
        K = K + l4 * D2 - l6 * (D2 @ D)
    return sp.csr_matrix(K)


def axis_symbol(axis: Axis, l0=0.0, l2=0.0, l4=0.0, l6=0.0) -> np.ndarray:
    """Eigenvalues of :func:`axis_operator`: ``l0 + l2 s + l4 s^2 + l6 s^3`` with s the eigenvalues of -Delta
    (a free boundary: :func:`free_axis_spectrum`, exact zeros on the null space)."""
    if axis.boundary == "free" and axis.n > 1:
        return np.array(free_axis_spectrum(axis, float(l0), float(l2), float(l4), float(l6))[0])
    s = laplacian_eigenvalues(axis)
    return l0 + s * (l2 + s * (l4 + s * l6))


def _forward(f: np.ndarray, grid: Grid, bases=(None, None)) -> np.ndarray:
    """Spectral coefficients of ``f`` (the last two axes are x and y; leading axes are a batch).  ``bases``: the
    dense eigenbases of free-boundary axes (x, y), from :meth:`PriorOperator.bases`."""
    out = f
    if bases[0] is not None:
        out = np.einsum("...ij,ia->...aj", out, bases[0])
    elif grid.x.boundary == "neumann" and grid.x.n > 1:
        out = sfft.dct(out, type=2, axis=-2, norm="ortho")
    if bases[1] is not None:
        out = out @ bases[1]
    elif grid.y.boundary == "neumann" and grid.y.n > 1:
        out = sfft.dct(out, type=2, axis=-1, norm="ortho")
    axes = tuple(a - 2 for a, ax in enumerate((grid.x, grid.y)) if ax.boundary == "periodic" and ax.n > 1)
    if axes:
        out = sfft.fftn(out, axes=axes)
    return out


def _inverse(c: np.ndarray, grid: Grid, bases=(None, None)) -> np.ndarray:
    out = c
    axes = tuple(a - 2 for a, ax in enumerate((grid.x, grid.y)) if ax.boundary == "periodic" and ax.n > 1)
    if axes:
        out = sfft.ifftn(out, axes=axes).real
    if bases[1] is not None:
        out = out @ bases[1].T
    elif grid.y.boundary == "neumann" and grid.y.n > 1:
        out = sfft.idct(out, type=2, axis=-1, norm="ortho")
    if bases[0] is not None:
        out = np.einsum("...aj,ia->...ij", out, bases[0])
    elif grid.x.boundary == "neumann" and grid.x.n > 1:
        out = sfft.idct(out, type=2, axis=-2, norm="ortho")
    return np.real(out)


#: Grids of at most this many nodes (and no free axis) solve by dense transform matrices (:func:`_axis_transforms`)
#: instead of scipy.fft calls: the same transforms, whose Python overhead is most of a small grid's solve (16 x 16:
#: 95-103 us by FFT/DCT, 27-29 by the matrices; the kernel start of every fit and each massive-relaxation step).
DENSE_TRANSFORM_NODES = 1024


@functools.lru_cache(maxsize=32)
def _axis_transforms(axis: Axis) -> tuple[np.ndarray, np.ndarray]:
    """``(T, T^T)``: an orthonormal eigenbasis of a periodic or Neumann axis operator as a real matrix whose row k
    belongs to the eigenvalue at position k of :func:`axis_symbol`: the orthonormal DCT-II; on a periodic axis the
    real Fourier basis (row k the cosine of frequency k, row n - k its sine, which share the FFT's eigenvalue at k
    and n - k); the identity for one node.  Read-only, cached per axis."""
    n = axis.n
    if n == 1:
        T = np.eye(1)
    elif axis.boundary == "periodic":
        j = np.arange(n)
        T = np.empty((n, n))
        T[0] = 1.0 / np.sqrt(n)
        for k in range(1, (n + 1) // 2):
            T[k] = np.sqrt(2.0 / n) * np.cos(2 * np.pi * k * j / n)
            T[n - k] = np.sqrt(2.0 / n) * np.sin(2 * np.pi * k * j / n)
        if n % 2 == 0:
            T[n // 2] = (-1.0) ** j / np.sqrt(n)
    else:
        T = sfft.dct(np.eye(n), type=2, axis=0, norm="ortho")
    T_t = np.ascontiguousarray(T.T)
    T.flags.writeable = False
    T_t.flags.writeable = False
    return T, T_t


@functools.lru_cache(maxsize=8)
def _symbol(grid: Grid, lambda_x: float, lambda_y: float, l0: float, l2: float, l4: float, l6: float) -> np.ndarray:
    """The eigenvalues of K (:attr:`PriorOperator.symbol`), read-only, kept across operators: every fit builds its
    operator anew, and on a small grid the symbol was a tenth of the build."""
    coeffs = dict(l0=l0, l2=l2, l4=l4, l6=l6)
    sym = lambda_x * axis_symbol(grid.x, **coeffs)[:, None] + lambda_y * axis_symbol(grid.y, **coeffs)[None, :]
    sym.flags.writeable = False
    return sym


#: Sparse prior matrices (K and its root pair) kept across :class:`PriorOperator` instances, keyed by the grid and
#: the coefficients, up to this many bytes in all (least recently used dropped first).  A dashboard rebuilds the
#: same K for every click (each click is a new configuration with the same prior); building it took about half of
#: the first iteration's time on the paper's grid.  The cached matrices are shared, so their arrays are made
#: read-only.
MATRIX_CACHE_BYTES = 32 * 1024 * 1024
_MATRIX_CACHE: OrderedDict = OrderedDict()
_MATRIX_LOCK = threading.Lock()


def _matrix_bytes(K) -> int:
    """Bytes of a sparse matrix, or of a tuple of them."""
    if isinstance(K, tuple):
        return sum(_matrix_bytes(k) for k in K)
    return K.data.nbytes + K.indices.nbytes + K.indptr.nbytes


def _cached_matrix(key, build):
    """The matrix (or tuple of matrices) of ``key`` from :data:`_MATRIX_CACHE`, or ``build()`` kept there (read-only)
    if it fits."""
    with _MATRIX_LOCK:
        K = _MATRIX_CACHE.get(key)
        if K is not None:
            _MATRIX_CACHE.move_to_end(key)
            return K
    K = build()
    size = _matrix_bytes(K)
    if size > MATRIX_CACHE_BYTES // 4:
        return K  # a large grid's matrix is not worth pinning across runs
    for m in (K if isinstance(K, tuple) else (K,)):
        for a in (m.data, m.indices, m.indptr):
            a.flags.writeable = False
    with _MATRIX_LOCK:
        _MATRIX_CACHE[key] = K
        total = sum(_matrix_bytes(m) for m in _MATRIX_CACHE.values())
        while total > MATRIX_CACHE_BYTES and len(_MATRIX_CACHE) > 1:
            _, old = _MATRIX_CACHE.popitem(last=False)
            total -= _matrix_bytes(old)
    return K


@dataclass(frozen=True)
class PriorOperator:
    """The prior operator K of eq. (699): ``lambda_x (K_X (x) 1) + lambda_y (1 (x) K_Y)``.

    The overall prior strength lambda is *not* part of K; energies multiply by it.  ``matrix`` is the sparse
    ``(n, n)`` operator on x-major flattened fields, ``apply`` acts on ``(nx, ny)`` fields, ``symbol`` holds the
    eigenvalues in the spectral basis used by :meth:`solve`.
    """

    grid: Grid
    lambda_x: float = 1.0
    lambda_y: float = 1.0
    l0: float = 0.0
    l2: float = 1.0
    l4: float = 0.0
    l6: float = 0.0
    _cache: dict = field(default_factory=dict, repr=False, compare=False, hash=False)

    def __post_init__(self):
        coeffs = dict(lambda_x=self.lambda_x, lambda_y=self.lambda_y, l0=self.l0, l2=self.l2, l4=self.l4, l6=self.l6)
        for name, v in coeffs.items():
            if not np.isfinite(v) or v < 0:
                raise ValueError(f"prior coefficient {name} must be a finite number >= 0, got {v!r}")

    def _coeffs(self):
        return dict(l0=self.l0, l2=self.l2, l4=self.l4, l6=self.l6)

    @property
    def kx(self) -> sp.csr_matrix:
        if "kx" not in self._cache:
            self._cache["kx"] = axis_operator(self.grid.x, **self._coeffs())
        return self._cache["kx"]

    @property
    def ky(self) -> sp.csr_matrix:
        if "ky" not in self._cache:
            self._cache["ky"] = axis_operator(self.grid.y, **self._coeffs())
        return self._cache["ky"]

    @property
    def matrix(self) -> sp.csr_matrix:
        """Sparse K on x-major flattened fields (index ``i*ny + j``)."""
        if "matrix" not in self._cache:
            key = (self.grid, self.lambda_x, self.lambda_y, self.l0, self.l2, self.l4, self.l6)
            self._cache["matrix"] = _cached_matrix(key, self._build_matrix)
        return self._cache["matrix"]

    def _build_matrix(self) -> sp.csr_matrix:
        nx, ny = self.grid.shape
        kx, ky = self.kx.tocoo(), self.ky.tocoo()
        j, i = np.arange(ny), np.arange(nx)
        # lambda_x (K_X (x) 1) + lambda_y (1 (x) K_Y) from the entries, without sparse kron products
        rows = np.concatenate([(kx.row[:, None] * ny + j).ravel(), (i[:, None] * ny + ky.row).ravel()])
        cols = np.concatenate([(kx.col[:, None] * ny + j).ravel(), (i[:, None] * ny + ky.col).ravel()])
        vals = np.concatenate([np.repeat(self.lambda_x * kx.data, ny), np.tile(self.lambda_y * ky.data, nx)])
        K = sp.csr_matrix((vals, (rows, cols)), shape=(nx * ny, nx * ny))
        K.sum_duplicates()
        K.eliminate_zeros()
        return K

    @property
    def root(self) -> sp.csr_matrix:
        """Sparse G with ``G^T G`` = :attr:`matrix`: ``sqrt(lambda_x) G_X (x) 1`` over ``sqrt(lambda_y) 1 (x) G_Y``,
        the axes' roots (:func:`axis_root`)."""
        return self._root_pair[0]

    @property
    def _root_pair(self) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """(G, G^T), built once."""
        if "root" not in self._cache:
            key = ("root", self.grid, self.lambda_x, self.lambda_y, self.l0, self.l2, self.l4, self.l6)
            self._cache["root"] = _cached_matrix(key, self._build_root_pair)
        return self._cache["root"]

    def _build_root_pair(self) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """(G, G^T) of :attr:`root`; kept across operators as the matrix is (an l6 fit on the paper mesh spent a
        sixth of its time building them)."""
        nx, ny = self.grid.shape
        gx, gy = axis_root(self.grid.x, **self._coeffs()), axis_root(self.grid.y, **self._coeffs())
        parts = [np.sqrt(self.lambda_x) * sp.kron(gx, sp.identity(ny)),
                 np.sqrt(self.lambda_y) * sp.kron(sp.identity(nx), gy)]
        G = sp.csr_matrix(sp.vstack(parts))
        G.eliminate_zeros()
        return G, G.T.tocsr()

    @property
    def bases(self) -> tuple:
        """The dense eigenbases of the free-boundary axes (x, y), None for the others (FFT/DCT)."""
        if "bases" not in self._cache:
            self._cache["bases"] = tuple(
                free_axis_spectrum(ax, float(self.l0), float(self.l2), float(self.l4), float(self.l6))[1]
                if ax.boundary == "free" and ax.n > 1 else None for ax in (self.grid.x, self.grid.y))
        return self._cache["bases"]

    @property
    def flat_modes(self) -> np.ndarray:
        """``(nx, ny)`` mask of the spectral modes the prior leaves flat (symbol exactly 0)."""
        return self.symbol == 0

    def forward(self, f: np.ndarray) -> np.ndarray:
        """Coefficients of ``f`` in the eigenbasis of K (the order of :attr:`symbol`)."""
        return _forward(f, self.grid, self.bases)

    def inverse(self, c: np.ndarray) -> np.ndarray:
        return _inverse(c, self.grid, self.bases)

    @property
    def symbol(self) -> np.ndarray:
        """Eigenvalues of K, ``(nx, ny)``, in the FFT/DCT basis of :meth:`solve`."""
        if "symbol" not in self._cache:
            self._cache["symbol"] = _symbol(self.grid, self.lambda_x, self.lambda_y, self.l0, self.l2, self.l4, self.l6)
        return self._cache["symbol"]

    def apply(self, f: np.ndarray) -> np.ndarray:
        """K f for an ``(nx, ny)`` field, as ``G^T (G f)`` with the root G (:attr:`root`): differences first.
        Decision: the rounding of ``K f`` with the assembled matrix is white noise of size eps |K| |f|, and its
        smooth part, divided by the small curvature of the smooth modes, moved the MAP of an l6 prior by 1e-6
        (the Newton residual stalled at 6e-8 on 200 nodes); through the root the rounding of ``G f`` is smoothed
        away by ``G^T`` (a k-th difference), so the minimiser converges to the same field in any units
        (tests/test_units.py).  Only for the stiff orders (l4, l6): for l2 and l0 the assembled matrix is as
        exact (measured 1e-12 across units) and twice as fast (5-point stencil, 170 against 330 us on 256^2)."""
        if not (self.l4 or self.l6):
            return (self.matrix @ np.ravel(f)).reshape(self.grid.shape)
        G, GT = self._root_pair
        return (GT @ (G @ np.ravel(f))).reshape(self.grid.shape)

    def quadratic(self, f: np.ndarray) -> float:
        """``(f, K f)`` with the grid's inner product."""
        return self.grid.inner(f, self.apply(f))

    def solve(self, rhs: np.ndarray, scale: float = 1.0, mass2: float = 0.0) -> np.ndarray:
        """Exact ``(scale*K + mass2*I)^{-1} rhs`` by FFT/DCT; the massive-relaxation learning matrix, eq. (632)."""
        sym = scale * self.symbol + mass2
        tiny = 1e-12 * float(np.max(np.abs(sym)))  # relative, as the gate's check: the same in any units
        if np.min(sym) <= tiny:
            raise SingularOperatorError(
                f"scale*K + m^2 I is singular (smallest eigenvalue {np.min(sym):.3g}): K has a zero mode "
                f"(the constant field) so a mass m^2 > 0 is needed; with lambda = 0 use m^2 > 0 as well")
        rhs = np.asarray(rhs, dtype=float)
        grid = self.grid
        if grid.size <= DENSE_TRANSFORM_NODES and "free" not in (grid.x.boundary, grid.y.boundary):
            (tx, tx_t), (ty, ty_t) = _axis_transforms(grid.x), _axis_transforms(grid.y)
            return tx_t @ ((tx @ rhs @ ty_t) / sym) @ ty
        return self.inverse(self.forward(rhs) / sym)

    def sample(self, rng: np.random.Generator, size: int = 1, scale: float = 1.0) -> np.ndarray:
        """``size`` random fields ``(size, nx, ny)`` of the Gaussian with precision matrix ``scale * K`` on the node
        values: ``(scale K)^{-1/2} z`` for white noise z, exact through the FFT/DCT basis in which K is diagonal.
        Zero modes of K (the constant field when l0 = 0) are left out: the prior says nothing about them, and
        the normalisation of a density removes them.  The prior ``exp(-(lambda/2)(phi, K phi))`` with the grid's
        inner product has ``scale = lambda * cell``."""
        sym = scale * self.symbol
        tiny = 1e-12 * float(np.max(np.abs(sym)))  # relative, as the gate's check: the same in any units
        with np.errstate(divide="ignore"):
            root = np.where(sym > tiny, 1.0 / np.sqrt(np.maximum(sym, tiny)), 0.0)
        z = rng.standard_normal((int(size),) + self.grid.shape)
        return self.inverse(self.forward(z) * root)

    def inverse_matrix(self, scale: float = 1.0, mass2: float = 0.0) -> np.ndarray:
        """Dense ``(scale*K + mass2*I)^{-1}`` (the Green's function), from the spectral solve of every unit field;
        for small grids only (memory is O(size^2))."""
        n = self.grid.size
        if n > 1600:
            raise ValueError(f"a dense inverse of K is for grids up to 1600 nodes (40 x 40), this one has {n}")
        eye = np.eye(n).reshape((n,) + self.grid.shape)
        return self.solve(eye, scale, mass2).reshape(n, n)
