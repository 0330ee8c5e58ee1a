"""Lattice Laplacians, the prior operator K of eqs. (699)-(702), and fast exact solves with K + m^2 I.

Every operator here is diagonalised by a fixed orthogonal transform per axis: the discrete Fourier transform for a
periodic axis and the orthonormal DCT-II for a Neumann axis (the free boundary ``-Delta = W^T W`` with forward
differences W).  Powers Delta^2, Delta^3 are matrix powers of the same Laplacian, so they share the transform and
``K + m^2 I`` is inverted exactly in O(n log n) on every grid, with no factorisation to cache.
"""
from __future__ import annotations

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
    """K_X = l0 I - l2 Delta + l4 Delta^2 - l6 Delta^3, eqs. (700), (701)."""
    D, eye = laplacian_1d(axis), sp.identity(axis.n, format="csr")
    if axis.n <= 256:  # small axes: dense powers are far cheaper than sparse products
        D, eye = D.toarray(), np.eye(axis.n)
    K = l0 * eye - l2 * D
    if l4 or l6:
        D2 = D @ D
        K = K + l4 * D2 - l6 * (D2 @ D)
    return sp.csr_matrix(K)


def axis_symbol(axis: Axis, l0=0.0, l2=0.0, l4=0.0, l6=0.0) -> np.ndarray:
    """Eigenvalues of :func:`axis_operator`: ``l0 + l2 s + l4 s^2 + l6 s^3`` with s the eigenvalues of -Delta."""
    s = laplacian_eigenvalues(axis)
    return l0 + s * (l2 + s * (l4 + s * l6))


def _forward(f: np.ndarray, grid: Grid) -> np.ndarray:
    """Spectral coefficients of ``f`` (the last two axes are x and y; leading axes are a batch)."""
    out = f
    if grid.x.boundary == "neumann" and grid.x.n > 1:
        out = sfft.dct(out, type=2, axis=-2, norm="ortho")
    if grid.y.boundary == "neumann" and grid.y.n > 1:
        out = sfft.dct(out, type=2, axis=-1, norm="ortho")
    axes = tuple(a - 2 for a, ax in enumerate((grid.x, grid.y)) if ax.boundary == "periodic" and ax.n > 1)
    if axes:
        out = sfft.fftn(out, axes=axes)
    return out


def _inverse(c: np.ndarray, grid: Grid) -> np.ndarray:
    out = c
    axes = tuple(a - 2 for a, ax in enumerate((grid.x, grid.y)) if ax.boundary == "periodic" and ax.n > 1)
    if axes:
        out = sfft.ifftn(out, axes=axes).real
    if grid.y.boundary == "neumann" and grid.y.n > 1:
        out = sfft.idct(out, type=2, axis=-1, norm="ortho")
    if grid.x.boundary == "neumann" and grid.x.n > 1:
        out = sfft.idct(out, type=2, axis=-2, norm="ortho")
    return np.real(out)


#: Sparse prior matrices kept across :class:`PriorOperator` instances, keyed by the grid and the coefficients, up to
#: this many bytes in all (least recently used dropped first).  A dashboard rebuilds the same K for every click
#: (each click is a new configuration with the same prior); building it took about half of the first iteration's
#: time on the paper's grid.  The cached matrices are shared, so their arrays are made read-only.
MATRIX_CACHE_BYTES = 32 * 1024 * 1024
_MATRIX_CACHE: OrderedDict = OrderedDict()
_MATRIX_LOCK = threading.Lock()


def _matrix_bytes(K: sp.csr_matrix) -> int:
    return K.data.nbytes + K.indices.nbytes + K.indptr.nbytes


def _cached_matrix(key, build) -> sp.csr_matrix:
    """The matrix of ``key`` from :data:`_MATRIX_CACHE`, or ``build()`` kept there (read-only) if it fits."""
    with _MATRIX_LOCK:
        K = _MATRIX_CACHE.get(key)
        if K is not None:
            _MATRIX_CACHE.move_to_end(key)
            return K
    K = build()
    size = _matrix_bytes(K)
    if size > MATRIX_CACHE_BYTES // 4:
        return K  # a large grid's matrix is not worth pinning across runs
    for a in (K.data, K.indices, K.indptr):
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
    def symbol(self) -> np.ndarray:
        """Eigenvalues of K, ``(nx, ny)``, in the FFT/DCT basis of :meth:`solve`."""
        if "symbol" not in self._cache:
            sx = axis_symbol(self.grid.x, **self._coeffs())
            sy = axis_symbol(self.grid.y, **self._coeffs())
            self._cache["symbol"] = self.lambda_x * sx[:, None] + self.lambda_y * sy[None, :]
        return self._cache["symbol"]

    def apply(self, f: np.ndarray) -> np.ndarray:
        """K f for an ``(nx, ny)`` field."""
        return (self.matrix @ np.ravel(f)).reshape(self.grid.shape)

    def quadratic(self, f: np.ndarray) -> float:
        """``(f, K f)`` with the grid's inner product."""
        return self.grid.inner(f, self.apply(f))

    def solve(self, rhs: np.ndarray, scale: float = 1.0, mass2: float = 0.0) -> np.ndarray:
        """Exact ``(scale*K + mass2*I)^{-1} rhs`` by FFT/DCT; the massive-relaxation learning matrix, eq. (632)."""
        sym = scale * self.symbol + mass2
        tiny = 1e-12 * max(1.0, float(np.max(np.abs(sym))))
        if np.min(sym) <= tiny:
            raise SingularOperatorError(
                f"scale*K + m^2 I is singular (smallest eigenvalue {np.min(sym):.3g}): K has a zero mode "
                f"(the constant field) so a mass m^2 > 0 is needed; with lambda = 0 use m^2 > 0 as well")
        return _inverse(_forward(np.asarray(rhs, dtype=float), self.grid) / sym, self.grid)

    def sample(self, rng: np.random.Generator, size: int = 1, scale: float = 1.0) -> np.ndarray:
        """``size`` random fields ``(size, nx, ny)`` of the Gaussian with precision matrix ``scale * K`` on the node
        values: ``(scale K)^{-1/2} z`` for white noise z, exact through the FFT/DCT basis in which K is diagonal.
        Zero modes of K (the constant field when l0 = 0) are left out: the prior says nothing about them, and
        the normalisation of a density removes them.  The prior ``exp(-(lambda/2)(phi, K phi))`` with the grid's
        inner product has ``scale = lambda * cell``."""
        sym = scale * self.symbol
        tiny = 1e-12 * max(1.0, float(np.max(np.abs(sym))))
        with np.errstate(divide="ignore"):
            root = np.where(sym > tiny, 1.0 / np.sqrt(np.maximum(sym, tiny)), 0.0)
        z = rng.standard_normal((int(size),) + self.grid.shape)
        return _inverse(_forward(z, self.grid) * root, self.grid)

    def inverse_matrix(self, scale: float = 1.0, mass2: float = 0.0) -> np.ndarray:
        """Dense ``(scale*K + mass2*I)^{-1}`` (the Green's function), from the spectral solve of every unit field;
        for small grids only (memory is O(size^2))."""
        n = self.grid.size
        if n > 1600:
            raise ValueError(f"a dense inverse of K is for grids up to 1600 nodes (40 x 40), this one has {n}")
        eye = np.eye(n).reshape((n,) + self.grid.shape)
        return self.solve(eye, scale, mass2).reshape(n, n)
