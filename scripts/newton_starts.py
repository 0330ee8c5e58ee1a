"""How much of a Newton fit is the start's fault (issue 31): ``python scripts/newton_starts.py [--sizes 64,128]
[--prior l6] [--family grid] [--repeats 3]`` runs the benchmark's problem (``python -m bftcore bench``) with the
solver as it is, from the kernel start and from starts built out of the converged solution L*:

* ``mix a``: ``L* + a (L0 - L*)``, a fraction a of the way from the solution back to the kernel start L0;
* ``tails of L*``: L* where the kernel start lies more than 10 below its column's maximum, L0 elsewhere;
* ``bulk of L*``: L* where L* lies within 10 of its column's maximum, L0 elsewhere;
* ``coarse m``: a realistic start, the same document (its domain, data and priors) solved on an m x m grid (m = n/2
  and n/4: the refined family's relation between grids), prolonged by cubic splines (periodic along a periodic
  axis, clamped along a Neumann one; :func:`bftcore.foundations.grid.prolong`), the start of a multilevel
  (coarse-to-fine) solve; the solver's own ``"init": "coarse"`` is the n/4 one, nested.

(every start normalised per x as a warm start is).  It prints the Newton steps, the CG iterations, the final energy,
the seconds of the iteration and, for the coarse starts, the seconds of the coarse solve that made the start (median
of ``--repeats``).  ``mix 1e-4`` starts at the answer to four digits:
what it still costs is the linear algebra of the last steps, which no realistic start or globalisation removes.  A
benchmark prints a table; nothing here asserts on time.
"""
from __future__ import annotations

import argparse
import copy
import time

import numpy as np

from bftcore.foundations.grid import prolong
from bftcore.foundations.limits import UNLIMITED, using
from bftcore.models.density import coarse_start as coarse_start_of
from bftcore.models.fitting import run
from bftcore.studies.bench import FAMILIES, PRIORS, bench_config, newton_run, parse_size


def coarse_start(cfg: dict, m: int, seconds: list):
    """``start(problem, L0)``: ``cfg`` solved on an m x m grid and prolonged; appends the coarse solve's seconds."""
    coarse = copy.deepcopy(cfg)
    coarse["grid"]["x"]["n"] = coarse["grid"]["y"]["n"] = m

    def start(problem, L0):
        t = time.perf_counter()
        L = run(coarse).field
        seconds.append(time.perf_counter() - t)
        g = problem.grid
        return prolong(L, g.shape, (g.x.boundary, g.y.boundary))
    return start


def starts(L_star: np.ndarray, cfg: dict | None = None, coarse_seconds: dict | None = None) -> dict:
    """name -> ``start(problem, L0)`` for :func:`bftcore.studies.bench.newton_run`; with ``cfg`` (a square grid of
    at least 32 nodes a side) also the coarse starts, whose solves' seconds go to ``coarse_seconds[name]``."""
    out = {"kernel start": None}
    for a in (1e-4, 1e-2, 0.3):
        out[f"mix {a:g}"] = lambda p, L0, a=a: L_star + a * (L0 - L_star)
    out["tails of L*"] = lambda p, L0: np.where(L0 < L0.max(axis=1, keepdims=True) - 10.0, L_star, L0)
    out["bulk of L*"] = lambda p, L0: np.where(L_star < L_star.max(axis=1, keepdims=True) - 10.0, L0, L_star)
    n = L_star.shape[0]
    if cfg is not None and coarse_seconds is not None and L_star.shape[1] == n and n >= 32:
        for m in (n // 2, n // 4):
            coarse_seconds[f"coarse {m}"] = []
            out[f"coarse {m}"] = coarse_start(cfg, m, coarse_seconds[f"coarse {m}"])
        coarse_seconds["init coarse"] = []
        out["init coarse"] = solver_coarse_start(coarse_seconds["init coarse"])
    return out


def solver_coarse_start(seconds: list):
    """``start(problem, L0)``: the solver's own ``"init": "coarse"`` (:func:`bftcore.models.density.coarse_start`,
    nested quarters); appends its seconds."""
    def start(problem, L0):
        t = time.perf_counter()
        L = coarse_start_of(problem)
        seconds.append(time.perf_counter() - t)
        return L
    return start


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="64,128", help="comma-separated sizes, n or NXxNY (default 64,128)")
    ap.add_argument("--prior", default="l6", choices=PRIORS)
    ap.add_argument("--family", default="grid", choices=FAMILIES)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    try:
        sizes = [parse_size(s) for s in args.sizes.split(",")]
    except ValueError as e:
        ap.error(str(e))
    print(f"{'size':>9} {'start':<14} {'steps':>5} {'CG':>6} {'energy':>18} {'seconds':>8} {'coarse s':>8}")
    with using(UNLIMITED):
        for size in sizes:
            cfg = bench_config(size, args.prior, args.family)
            L_star = run(cfg).field
            coarse: dict = {}
            for name, start in starts(L_star, cfg, coarse).items():
                runs = [newton_run(cfg, start=start) for _ in range(args.repeats)]
                _, energy, cg, banded = runs[0]
                seconds = float(np.median([r[0] for r in runs]))
                made = f"{np.median(coarse[name]):>8.3f}" if coarse.get(name) else f"{'-':>8}"
                print(f"{size[0]:>4}x{size[1]:<4} {name:<14} {len(cg) + banded:>5} {sum(cg):>6} {energy:>18.10f} "
                      f"{seconds:>8.3f} {made}", flush=True)


if __name__ == "__main__":
    main()
