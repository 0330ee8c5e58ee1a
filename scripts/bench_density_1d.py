"""The 1-D density kind (bftcore.models.density_1d) against the conditional density's solver on one x node: the same
documents, solved to the same tolerance; median wall time of several runs, iterations, and the largest difference
of the two L.  ``python scripts/bench_density_1d.py [--runs 5]``."""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from bftcore.foundations.config import validate_config
from bftcore.foundations.limits import blas_threads
from bftcore.models import density, density_1d


def doc(n: int, prior: dict, boundary: str) -> dict:
    rng = np.random.default_rng(0)
    y = np.concatenate([rng.normal(-1.5, 0.5, 100), rng.normal(1.0, 0.8, 100)])
    return validate_config({"grid": {"y": {"min": -4, "max": 4, "n": n, "boundary": boundary}}, "data": y.tolist(),
                            "prior": prior, "solver": {"tol": 1e-10, "max_iter": 200}})


def timed(f, runs):
    out, times = None, []
    for _ in range(runs):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=5)
    runs = ap.parse_args().runs
    blas_threads()
    cases = [("l2, neumann", {"lambda": 1.0}, "neumann", (200, 1000)),
             ("l6, free", {"lambda": 1.0, "l2": 0, "l6": 1}, "free", (100, 200)),  # l6 on 1000 nodes: too stiff
             ("l4, periodic", {"lambda": 0.5, "l2": 0, "l4": 1}, "periodic", (200, 1000))]
    print(f"{'prior':14} {'ny':>5} | {'1-D kind s':>10} {'its':>4} | {'one-node density s':>18} {'its':>4} | "
          f"{'max |dL|':>9}")
    for name, prior, boundary, sizes in cases:
        for n in sizes:
            cfg = doc(n, prior, boundary)
            t1, a = timed(lambda: density_1d.solve(density_1d.build(cfg)), runs)
            t2, b = timed(lambda: density.solve(density.build_density(cfg)), runs)
            print(f"{name:14} {n:5d} | {t1:10.4f} {a.last.iteration:4d} | {t2:18.4f} {b.last.iteration:4d} | "
                  f"{float(np.max(np.abs(a.L - b.L))):9.1e}")


if __name__ == "__main__":
    main()
