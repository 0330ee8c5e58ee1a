"""Where Newton's steps go in one column (issue 31, docs/performance.md, twenty-ninth session).

The grid family's l6 problems take more Newton steps as the grid grows.  An earlier session took one periodic column
(a 1 x ny grid of unit spacing, lambda = 1, l6 = 0.1) with one data point as the simplest form of that growth.  This
script measures two things on such columns:

1. bftcore's fit of that column with one point in the middle, from the kernel start and from the uniform start:
   Newton steps, the energy, and how deep ln P falls on the far side.
2. exact Newton on the same energy with 1 to 9 points (drawn around the middle, seeded), written out densely here.
   In one column, with g = L + const, ``E(g) = 1/2 g.Kg - d.g + N ln sum_y e^g`` is convex.  The Hessian is solved
   by LU, with a backtracking line search.  It starts uniform and stops when the step is under 1e-9 or the energy
   stops falling.  For each run it prints the steps, and the most runs of the support (L above its maximum - 36)
   without a data node that any one iterate had: the "islands" that move across the empty side a node or two a step.

A table of numbers, nothing asserted.  ``python scripts/column_newton.py [--sizes 128,256,512] [--points 1,2,3,5,9]``.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import scipy.linalg as sla
from scipy.special import logsumexp

from bftcore.foundations.limits import UNLIMITED, using
from bftcore.models.density import build_density
from bftcore.models.fitting import fit

#: Depth below a column's maximum of ln P that counts as support (e^-36 is about 2e-16).
SUPPORT_DEPTH = 36.0


def column_config(ny: int, y_points, init: str) -> dict:
    """A density document on a 1 x ny grid (unit spacing, y periodic), data at the 1-based y nodes ``y_points``."""
    return {"model": "density",
            "grid": {"x": {"min": 0, "max": 1, "n": 1, "boundary": "neumann"},
                     "y": {"min": 1, "max": ny, "n": ny, "boundary": "periodic"}},
            "data": [[0.0, float(y)] for y in y_points],
            "prior": {"field": "L", "lambda": 1.0, "lambda_x": 1.0, "lambda_y": 1.0, "l0": 0, "l2": 0, "l4": 0,
                      "l6": 0.1},
            "solver": {"method": "newton", "init": init, "init_mass2": 0.1, "min_iter": 1, "max_iter": 400,
                       "tol": 1e-9}}


def islands(L: np.ndarray, data: np.ndarray) -> int:
    """Runs of the periodic support ``L > max L - SUPPORT_DEPTH`` that hold no data node."""
    s = L > L.max() - SUPPORT_DEPTH
    if s.all():
        return 0
    shift = -int(np.argmin(s))  # start the cycle at a node outside the support
    s, has = np.roll(s, shift), np.roll(data > 0, shift)
    edges = np.diff(np.concatenate([[0], s.astype(int), [0]]))
    return sum(1 for a, b in zip(np.nonzero(edges == 1)[0], np.nonzero(edges == -1)[0]) if not has[a:b].any())


def dense_newton(K: np.ndarray, d: np.ndarray, max_steps: int = 400) -> tuple[int, float, float, int]:
    """Exact Newton from the uniform start on the convex one-column energy: (steps, energy, lowest L below the
    maximum, the most islands of any iterate)."""
    n, total = len(d), float(d.sum())
    ones = np.full(n, 1.0 / np.sqrt(n))

    def energy(g):
        return 0.5 * g @ K @ g - d @ g + total * float(logsumexp(g))

    g, most, steps = np.zeros(n), 0, 0
    for steps in range(1, max_steps + 1):
        p = np.exp(g - logsumexp(g))
        grad = K @ g - d + total * p
        H = K + total * (np.diag(p) - np.outer(p, p)) + np.outer(ones, ones)  # the constant: no change of E
        step = -sla.lu_solve(sla.lu_factor(H), grad)
        step -= step.mean()
        e0, t, slope = energy(g), 1.0, float(grad @ step)
        e1 = energy(g + step)
        while e1 > e0 + 1e-4 * t * slope and t > 1e-12:  # Armijo backtracking
            t *= 0.5
            e1 = energy(g + t * step)
        g = g + t * step
        most = max(most, islands(g, d))
        if np.max(np.abs(t * step)) < 1e-9 or abs(e0 - e1) <= 1e-14 * abs(e0):
            break
    return steps, float(energy(g)), float(g.min() - g.max()), most


def _ints(text: str, lo: int, hi: int, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise SystemExit(f"--{what} {text!r}: give whole numbers separated by commas") from None
    if not values or not all(lo <= v <= hi for v in values):
        raise SystemExit(f"--{what} {text!r}: every value must lie between {lo} and {hi}")
    return values


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="128,256,512", help="column lengths ny, 16 to 1024 (default 128,256,512)")
    ap.add_argument("--points", default="1,2,3,5,9", help="points per column for part 2, 1 to 20")
    args = ap.parse_args(argv)
    sizes = _ints(args.sizes, 16, 1024, "sizes")
    points = _ints(args.points, 1, 20, "points")

    print("1. bftcore's fit, one point in the middle: Newton steps (kernel start | uniform start)")
    print(f"{'ny':>5} {'kernel':>7} {'uniform':>8} {'energy (kernel)':>18} {'energy (uniform)':>18} "
          f"{'lowest ln P':>12}")
    for ny in sizes:
        with using(UNLIMITED):
            runs = {init: fit(column_config(ny, [ny // 2 + 1], init)) for init in ("kernel", "uniform")}
        L = np.asarray(runs["uniform"]["L"]).ravel()
        print(f"{ny:>5} {runs['kernel']['iterations']:>7} {runs['uniform']['iterations']:>8} "
              f"{runs['kernel']['energy']:>18.10f} {runs['uniform']['energy']:>18.10f} {L.min() - L.max():>12.0f}")

    print("\n2. exact dense Newton from the uniform start, k points around the middle (seed 0)")
    print(f"{'k':>3} {'ny':>5} {'steps':>6} {'energy':>16} {'lowest L':>10} {'islands (most)':>15}")
    rng = np.random.default_rng(0)
    for k in points:
        for ny in sizes:
            ys = [ny // 2] if k == 1 else np.clip(np.rint(rng.normal(ny / 2, ny / 8, k)), 0, ny - 1).astype(int)
            problem = build_density(column_config(ny, [y + 1 for y in ys], "uniform"))
            K = (problem.K.matrix * (problem.energy.prior.lam * problem.grid.cell)).toarray()
            d = problem.N.ravel().astype(float)
            steps, e, low, most = dense_newton(K, d)
            print(f"{k:>3} {ny:>5} {steps:>6} {e:>16.10f} {low:>10.0f} {most:>15}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
