"""Grids, axes and boundary conditions (CONVENTIONS.md §1).

A :class:`Grid` is an x axis times a y axis.  Fields are ``(nx, ny)`` arrays, index ``[i, j]`` is
``(x_i, y_j)``; the inner product is ``sum f*g * hx*hy`` and integrals over y are ``sum_j (...) * hy``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

BOUNDARIES = ("periodic", "neumann", "free")


def pairs_array(points) -> np.ndarray:
    """``points`` as a float array (``np.asarray(points, dtype=float)``, whose errors it raises); a list of pairs, the
    gate's form of the data, is read by ``np.fromiter`` (the same conversion of every number): about 30 against
    50-100 us for 200 points."""
    if type(points) is list and points:
        try:
            if set(map(len, points)) == _PAIR:
                return np.fromiter(itertools.chain.from_iterable(points), float, 2 * len(points)).reshape(-1, 2)
        except (TypeError, ValueError):
            pass  # an item without a length, or a value that is not a number: np.asarray says which
    return np.asarray(points, dtype=float)


_PAIR = {2}


@dataclass(frozen=True)
class Axis:
    """One grid axis: nodes ``min + k*h``, ``k = 0..n-1``, ``h = (max-min)/(n-1)`` (h = 1 for n = 1)."""

    min: float
    max: float
    n: int
    boundary: str = "periodic"

    def __post_init__(self):
        if not isinstance(self.n, (int, np.integer)) or self.n < 1:
            raise ValueError(f"axis n must be a whole number >= 1, got {self.n!r}")
        if not (np.isfinite(self.min) and np.isfinite(self.max)):
            raise ValueError(f"axis bounds must be finite numbers, got min={self.min!r}, max={self.max!r}")
        if self.n > 1 and not self.max > self.min:
            raise ValueError(f"axis max ({self.max}) must be larger than min ({self.min})")
        if self.boundary not in BOUNDARIES:
            raise ValueError(f"axis boundary must be one of {BOUNDARIES}, got {self.boundary!r}")

    @property
    def h(self) -> float:
        return 1.0 if self.n == 1 else (self.max - self.min) / (self.n - 1)

    @property
    def nodes(self) -> np.ndarray:
        return self.min + self.h * np.arange(self.n)

    def outside(self, values) -> np.ndarray:
        """Which values are off the axis: not finite, or outside ``[min, max]`` by more than 1e-9 spacings (the one
        home of the off-grid rule: the gate, the problems and the dashboard's clicks all ask here)."""
        v = np.asarray(values, dtype=float)
        return ~np.isfinite(v) | (v < self.min - 1e-9 * self.h) | (v > self.max + 1e-9 * self.h)

    def snap(self, values, name: str = "x") -> np.ndarray:
        """Index of the nearest node for each value; values outside ``[min, max]`` are an error."""
        v = np.asarray(values, dtype=float)
        bad = self.outside(v)
        if np.any(bad):
            shown = ", ".join(f"{b:g}" for b in v[bad][:5])
            raise ValueError(f"{int(bad.sum())} data value(s) outside {name} in [{self.min:g}, {self.max:g}]: "
                             f"{shown}; move the points onto the grid or widen the axis")
        return self.nearest(v)

    def nearest(self, v: np.ndarray) -> np.ndarray:
        """Index of the nearest node for each value of the float array ``v``, which :meth:`outside` has passed."""
        return np.minimum(np.maximum(np.rint((v - self.min) / self.h).astype(int), 0), self.n - 1)  # (np.clip: 2x)

    def to_dict(self) -> dict:
        return {"min": self.min, "max": self.max, "n": int(self.n), "boundary": self.boundary}


@dataclass(frozen=True)
class Grid:
    """The (x, y) grid of density estimation p(y|x); the regression model uses only its x axis."""

    x: Axis
    y: Axis

    @property
    def shape(self) -> tuple[int, int]:
        return (self.x.n, self.y.n)

    @property
    def size(self) -> int:
        return self.x.n * self.y.n

    @property
    def hx(self) -> float:
        return self.x.h

    @property
    def hy(self) -> float:
        return self.y.h

    @property
    def cell(self) -> float:
        """Volume element ``hx*hy`` of the inner product."""
        return self.x.h * self.y.h

    def inner(self, f: np.ndarray, g: np.ndarray) -> float:
        """Inner product ``(f, g) = sum f*g hx*hy``."""
        return float(np.vdot(f, g)) * self.cell

    def check_points(self, points, x_only: bool = False) -> np.ndarray:
        """``points`` as an ``(n, 2)`` array, or a ValueError naming the points off the grid (:meth:`Axis.outside`;
        ``x_only`` for regression, whose y values are not on an axis)."""
        pts = pairs_array(points)
        if pts.size == 0:
            return np.zeros((0, 2))
        if pts.ndim != 2 or pts.shape[1] != 2:
            raise ValueError(f"data must be a list of [x, y] pairs, got an array of shape {pts.shape}")
        bad = self.x.outside(pts[:, 0])
        if x_only:
            bad |= ~np.isfinite(pts[:, 1])
        else:
            bad |= self.y.outside(pts[:, 1])
        if np.any(bad):
            shown = ", ".join(f"({p[0]:g}, {p[1]:g})" for p in pts[bad][:5])
            more = "" if bad.sum() <= 5 else f" and {int(bad.sum()) - 5} more"
            where = f"x in [{self.x.min:g}, {self.x.max:g}]" if x_only else (
                f"the grid x in [{self.x.min:g}, {self.x.max:g}], y in [{self.y.min:g}, {self.y.max:g}]")
            raise ValueError(f"data point(s) {shown}{more} outside {where}; remove them or widen the grid")
        return pts

    def snap(self, points) -> tuple[np.ndarray, np.ndarray]:
        """Node indices ``(ix, iy)`` of data points given as an ``(n, 2)`` array of (x, y)."""
        pts = self.check_points(points)  # every point checked once, here
        return self.x.nearest(pts[:, 0]), self.y.nearest(pts[:, 1])

    def counts(self, points) -> np.ndarray:
        """Data field ``N[i, j]``: the number of data snapped to node (i, j), eq. (111)."""
        ix, iy = self.snap(points)
        return np.bincount(ix * self.y.n + iy, minlength=self.size).astype(float).reshape(self.shape)

    @property
    def mesh(self) -> tuple[np.ndarray, np.ndarray]:
        """Node coordinates ``(X, Y)`` as two ``(nx, ny)`` arrays."""
        return np.meshgrid(self.x.nodes, self.y.nodes, indexing="ij")

    def to_dict(self) -> dict:
        return {"x": self.x.to_dict(), "y": self.y.to_dict()}

    @classmethod
    def paper(cls, boundary_x: str = "periodic") -> "Grid":
        """The paper mesh: x = 1..10, y = 1..15, spacing 1, periodic in y."""
        return cls(Axis(1, 10, 10, boundary_x), Axis(1, 15, 15, "periodic"))


def prolong(field: np.ndarray, shape: tuple[int, int], boundaries: tuple[str, str]) -> np.ndarray:
    """A field on a coarser grid of the same domain carried onto ``shape`` nodes, axis by axis, by cubic splines
    that keep each axis's boundary: periodic along a periodic axis (node k of n at k/n of the period, on either
    grid), zero slope at the ends of a Neumann axis, and not-a-knot (no condition) at the ends of a free one.  An
    axis of the same length is copied (the coarse nodes keep their values); an axis of one node is repeated.  The
    multilevel start (``solver.init: "coarse"``, :func:`bftcore.models.density.coarse_start`) uses it."""
    from scipy.interpolate import CubicSpline  # the one user of scipy.interpolate: imported when a start needs it

    out = np.asarray(field, dtype=float)
    for axis, (n, boundary) in enumerate(zip(shape, boundaries)):
        m = out.shape[axis]
        if m == n:
            continue
        if m == 1:
            out = np.repeat(out, n, axis=axis)
        elif boundary == "periodic":
            vals = np.concatenate([out, out.take([0], axis=axis)], axis=axis)
            out = CubicSpline(np.arange(m + 1) / m, vals, axis=axis, bc_type="periodic")(np.arange(n) / n)
        else:
            bc = "clamped" if boundary == "neumann" else "not-a-knot"
            if m < 4 and bc == "not-a-knot":
                bc = "natural"  # not-a-knot needs four nodes
            out = CubicSpline(np.linspace(0.0, 1.0, m), out, axis=axis, bc_type=bc)(np.linspace(0.0, 1.0, n))
    return out
