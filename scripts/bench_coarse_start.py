"""The multilevel start against the kernel start (issue 31): ``python scripts/bench_coarse_start.py [--sizes
64,128] [--family grid,refined] [--prior l2,l6] [--repeats 3]``.

For each benchmark problem (``python -m bftcore bench``'s: the grid family's random_problem(n) and the refined
family's random_problem(32) on n x n) it fits the document as it is (``"init": "kernel"``) and with ``"init":
"coarse"`` (:func:`bftcore.models.density.coarse_start`: the document solved on a quarter of the nodes per axis,
nested, and prolonged), the two taken in turn run by run, and prints the medians of the whole fit (the gate, the
coarse levels, the fine iteration, the document), the fine Newton steps, the final energies and the ratio kernel /
coarse (> 1: the coarse start is faster).  A measurement over 3 s is run once.  A benchmark prints a table; nothing
here asserts on time.
"""
from __future__ import annotations

import argparse
import statistics
import time

from bftcore.foundations.limits import UNLIMITED, blas_threads, using
from bftcore.models.fitting import fit
from bftcore.studies.bench import FAMILIES, PRIORS, bench_config


def measure(cfg: dict, repeats: int) -> dict:
    """init -> (median seconds, fine iterations, energy) of whole fits of ``cfg`` with each start."""
    docs = {init: {**cfg, "solver": {**cfg["solver"], "init": init}} for init in ("kernel", "coarse")}
    times: dict = {init: [] for init in docs}
    last: dict = {}
    for k in range(repeats):
        for init, doc in docs.items():
            if k and times[init][0] > 3.0:
                continue
            t = time.perf_counter()
            last[init] = fit(doc)
            times[init].append(time.perf_counter() - t)
    return {init: (statistics.median(times[init]), int(last[init]["iterations"]), float(last[init]["energy"]))
            for init in docs}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="64,128", help="comma-separated n of n x n grids, 16 to 512 (default 64,128)")
    ap.add_argument("--family", default="grid,refined", help=f"comma-separated, of {', '.join(FAMILIES)}")
    ap.add_argument("--prior", default="l2,l6", help=f"comma-separated, of {', '.join(PRIORS)}")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        ap.error(f"--sizes takes whole numbers separated by commas, got {args.sizes!r}")
    families, priors = args.family.split(","), args.prior.split(",")
    if not all(16 <= n <= 512 for n in sizes):
        ap.error(f"--sizes must lie from 16 to 512, got {args.sizes!r}")
    if not set(families) <= set(FAMILIES) or not set(priors) <= set(PRIORS):
        ap.error(f"--family takes {', '.join(FAMILIES)} and --prior {', '.join(PRIORS)}")
    if not 1 <= args.repeats <= 50:
        ap.error(f"--repeats must lie from 1 to 50, got {args.repeats}")
    blas_threads()
    print(f"medians of {args.repeats} whole fit(s), kernel and coarse in turn; seconds")
    print(f"{'family':<8} {'size':>9} {'prior':<5} {'kernel s':>9} {'steps':>5} {'coarse s':>9} {'steps':>5} "
          f"{'kernel / coarse':>15}  {'energy (kernel)':>17} {'energy (coarse)':>17}")
    with using(UNLIMITED):
        for family in families:
            for n in sizes:
                for prior in priors:
                    r = measure(bench_config((n, n), prior, family), args.repeats)
                    (tk, ik, ek), (tc, ic, ec) = r["kernel"], r["coarse"]
                    print(f"{family:<8} {f'{n}x{n}':>9} {prior:<5} {tk:>9.4f} {ik:>5} {tc:>9.4f} {ic:>5} "
                          f"{tk / tc:>15.2f}  {ek:>17.10f} {ec:>17.10f}", flush=True)


if __name__ == "__main__":
    main()
