"""The banded exact Newton step against CG on small grids (issue 31): ``python scripts/banded_newton_ab.py
[--repeats 60] [--seeds 0,1,2,3] [--sizes 12,16,20,24,32] [--no-bounds]`` prints, for the paper's Figs 14, 16 and
21 and for :func:`bftcore.models.presets.random_problem` of each size, prior (l2 = 1, l6 = 0.1) and seed, the whole
Newton iteration of E_L (the fit's start and stopping rule, off the clock: the problem built and the start made
first) taken two ways, alternated in one process so that the machine's drift falls on both: as the package runs it
(the banded step of :mod:`bftcore.models.banded_newton` where it applies) and with CG only.  Min over ``--repeats``
(a third of them above 400 nodes), the Newton steps, the change of time and the relative difference of the final
energies.  ``--no-bounds`` takes the banded step at every size (the measurement behind
:data:`bftcore.models.banded_newton.MAX_NODES`).  A benchmark prints a table; nothing here asserts on time.
"""
from __future__ import annotations

import argparse
import time

from bftcore import api
from bftcore.__main__ import at_least  # the CLI's own check of a count
from bftcore.foundations.limits import UNLIMITED, blas_threads, using
from bftcore.foundations.solvers import iterate
from bftcore.models import banded_newton
from bftcore.models.density import LogDensityEnergy
from bftcore.models.presets import figure_config, random_problem


def timed_runs(cfg: dict, repeats: int) -> dict:
    """``{"banded": (seconds, steps, energy), "cg": (...)}``: the min time over ``repeats`` of each route."""
    problem = api.build_density(cfg)
    E, so = problem.energy, problem.config["solver"]
    phi0 = api.initial_field(problem)
    package = LogDensityEnergy.newton_direct

    def run():
        t0 = time.perf_counter()
        for rec in iterate(E, phi0, method="newton", min_iter=so["min_iter"], max_iter=so["max_iter"],
                           tol=so["tol"]):
            pass
        return time.perf_counter() - t0, rec.iteration, rec.energy

    out: dict = {"banded": [], "cg": []}
    try:
        for i in range(repeats + 3):  # three warm-up rounds
            for route in ("banded", "cg"):
                LogDensityEnergy.newton_direct = package if route == "banded" else (lambda self: None)
                result = run()
                if i >= 3:
                    out[route].append(result)
    finally:
        LogDensityEnergy.newton_direct = package
    return {k: (min(r[0] for r in v), v[0][1], v[0][2]) for k, v in out.items()}


def int_list(lo: int, hi: int):
    """An argparse type: comma-separated integers between ``lo`` and ``hi``, or an error that says so."""
    def parse(text: str) -> list[int]:
        try:
            values = [int(t) for t in text.split(",") if t.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
        if not values or not all(lo <= v <= hi for v in values):
            raise argparse.ArgumentTypeError(f"{text!r}: give integers between {lo} and {hi}, e.g. {lo},{lo + 1}")
        return values
    return parse


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=at_least(1), default=60, help="runs per route (the min is printed)")
    ap.add_argument("--seeds", type=int_list(0, 2 ** 31 - 1), default=[0, 1, 2, 3], help="random_problem seeds")
    ap.add_argument("--sizes", type=int_list(4, 64), default=[12, 16, 20, 24, 32], help="n of the n x n grids")
    ap.add_argument("--no-bounds", action="store_true", help="the banded step at every size")
    args = ap.parse_args()
    blas_threads()
    if args.no_bounds:
        banded_newton.MAX_NODES, banded_newton.MAX_WORK = 10 ** 9, 1e15
        banded_newton._banded_newton.cache_clear()
    cases = [(name, figure_config(name)) for name in ("fig14", "fig16", "fig21")]
    repeats = args.repeats
    for n in args.sizes:
        for prior in ({"l2": 1.0}, {"l6": 0.1}):
            for seed in args.seeds:
                cases.append((f"{n}x{n} {next(iter(prior))} seed {seed}", random_problem(n, prior, seed=seed)))
    print(f"whole Newton iterations, min of {repeats} (a third above 400 nodes), ms; the package's route "
          f"(banded where it applies) against CG only{'; banded at every size' if args.no_bounds else ''}")
    print(f"{'case':>22} {'nodes':>5} {'banded':>9} {'steps':>5} {'CG only':>9} {'steps':>5} {'change':>7} "
          f"{'energies':>9}")
    with using(UNLIMITED):
        for name, cfg in cases:
            nodes = cfg["grid"]["x"]["n"] * cfg["grid"]["y"]["n"]
            r = timed_runs(cfg, repeats if nodes <= 400 else max(1, repeats // 3))
            (tb, sb, eb), (tc, sc, ec) = r["banded"], r["cg"]
            print(f"{name:>22} {nodes:>5} {tb * 1e3:>9.3f} {sb:>5} {tc * 1e3:>9.3f} {sc:>5} "
                  f"{100 * (tb / tc - 1):>+6.0f}% {abs(eb - ec) / max(abs(ec), 1e-300):>9.1e}")


if __name__ == "__main__":
    main()
