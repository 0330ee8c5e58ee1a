"""Issue 31 benchmark: parallel sweeps and structured Hessians.  Prints two tables of medians over ``--repeats`` runs.

    python scripts/bench_sweeps.py [--repeats 3] [--skip-hessian] [--skip-sweeps] [--concurrent 4]

1. The tangent-space Hessian H_g of the Laplace samples: its build (:func:`bftcore.models.evidence.
   tangent_hessian_dense`, block by block) against the scalar sparse product ``W^T (H W)`` it replaced (rebuilt
   here), and the whole sample call (10 samples), on the 1-D density at ny = 400 and a 64 x 64 grid.  Target: the
   build under 20 ms at ny = 400.
2. The README's learning curve (fig21's preset, ``--n 5:200:8 --resamples 20``, the 5 default lambdas: 800 fits)
   on each engine: ``serial``; the default (no scheduler given); ``local:2`` (a LocalCluster of two worker
   processes started and closed by the call: start-up included); and a running two-worker cluster reached by its
   address (:func:`bftcore.foundations.distributed.running_cluster`: start-up paid once, as with
   ``--scheduler tcp://host:8786``).  The engines take turns within each repeat (the machine's load drifts).
   ``x serial`` is the serial time over the engine's: the throughput ratio.  ``same`` checks that the document
   equals the serial one.  Targets: default <= serial; two workers >= 1.7x.  Below the table: the CPU seconds the
   calling process (where a LocalCluster's scheduler and nannies run) and the two workers spent per curve on the
   running cluster (psutil; ``busy``: the workers' CPU over the wall times their number, the share of the curve
   they were at work, the least noisy of these figures on this machine), their CPU a second while idle, and
   ``--concurrent K`` curves sent at once from K threads to the running cluster against K serial curves one
   after another (the throughput of a cluster shared by several users: no curve's tail leaves a worker idle).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import scipy.sparse as sp

from bftcore import api
from bftcore.foundations.config import validate_config
from bftcore.foundations.distributed import running_cluster
from bftcore.foundations.limits import UNLIMITED, blas_threads, using
from bftcore.models import evidence as ev
from bftcore.models.density import build_density, solve
from bftcore.models.presets import figure_config, random_problem


def one_d_problem():
    rng = np.random.default_rng(0)
    return validate_config({"grid": {"y": {"min": 0, "max": 10, "n": 400, "boundary": "neumann"}},
                            "data": [[0, float(v)] for v in rng.uniform(2, 8, 60)],
                            "prior": {"field": "L", "lambda": 1.0, "l2": 1.0},
                            "solver": {"method": "newton", "max_iter": 100, "tol": 1e-10}})


def scalar_sparse_product(point) -> np.ndarray:
    """The construction before issue 31: W (block-diagonal, dense blocks) as CSR, ``W^T (H W)`` by SpGEMM."""
    W, H, _ = ev._tangent_parts(point)
    W = sp.csr_matrix(W)
    A = sp.csr_matrix(W.T @ (H @ W)).toarray()
    return 0.5 * (A + A.T)


def median_ms(f, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def hessian_table(repeats: int) -> None:
    blas_threads()
    print(f"{'H_g (tangent Hessian)':<30} {'old build ms':>12} {'new build ms':>12} {'max |diff|':>11} "
          f"{'samples(10) ms':>14}")
    cases = [("1-D density, ny = 400", one_d_problem()),
             ("64 x 64, l2", validate_config(random_problem(64, {"l2": 1.0}, seed=0)))]
    for name, cfg in cases:
        pb = build_density(cfg)
        L = solve(pb).L
        point, _ = ev.map_newton(pb.energy, L)
        diff = float(np.max(np.abs(ev.tangent_hessian_dense(point)[0] - scalar_sparse_product(point))))
        old = median_ms(lambda: scalar_sparse_product(point), max(3, repeats))
        new = median_ms(lambda: ev.tangent_hessian_dense(point), max(3, repeats))
        rng = np.random.default_rng(0)
        samples = median_ms(lambda: ev.laplace_samples(pb, L, 10, rng), max(3, repeats))
        print(f"{name:<30} {old:>12.1f} {new:>12.1f} {diff:>11.1e} {samples:>14.1f}", flush=True)


def strip(doc: dict) -> str:
    return json.dumps({k: v for k, v in doc.items() if k not in ("elapsed_s", "scheduler")}, sort_keys=True)


def cpu_seconds(procs) -> list[float]:
    """User + system CPU seconds of each process so far."""
    return [sum(p.cpu_times()[:2]) for p in procs]


def sweep_table(repeats: int, concurrent: int = 0) -> None:
    import psutil  # comes with dask.distributed
    cfg = figure_config("fig21")
    kw = {"sizes": [5, 8, 14, 24, 42, 71, 119, 200], "resamples": 20}
    with using(UNLIMITED), running_cluster(2) as address:
        ref = strip(api.learning_curve_document(cfg, scheduler="serial", **kw))
        api.learning_curve_document(cfg, scheduler=address, **kw)  # the workers import bftcore once
        me = psutil.Process()
        procs = [me] + [p for p in me.children(recursive=True) if "resource_tracker" not in " ".join(p.cmdline())]
        before = cpu_seconds(procs)
        time.sleep(3.0)
        idle = [(b - a) / 3.0 for a, b in zip(before, cpu_seconds(procs))]
        engines = [("serial", "serial"), ("default (none given)", None), ("local:2 (start-up incl.)", "local:2"),
                   ("running 2 workers (tcp://)", address)]
        times: dict[str, list[float]] = {name: [] for name, _ in engines}
        same = {name: True for name, _ in engines}
        busy: list[list[float]] = []
        for _ in range(repeats):
            for name, scheduler in engines:
                c0 = cpu_seconds(procs) if scheduler == address else []
                t0 = time.perf_counter()
                doc = api.learning_curve_document(cfg, scheduler=scheduler, **kw)
                times[name].append(time.perf_counter() - t0)
                if c0:
                    busy.append([b - a for a, b in zip(c0, cpu_seconds(procs))])
                same[name] = same[name] and strip(doc) == ref
        shared = concurrent_curves(cfg, kw, address, concurrent, repeats, ref) if concurrent > 1 else None
    base = statistics.median(times["serial"])
    print(f"\n{'learning curve, fig21, 800 fits':<30} {'median s':>9} {'x serial':>9}  {'runs (s)':<24} same")
    for name, _ in engines:
        med = statistics.median(times[name])
        runs = ", ".join(f"{t:.2f}" for t in times[name])
        print(f"{name:<30} {med:>9.2f} {base / med:>9.2f}  {runs:<24} {same[name]}", flush=True)
    per = [statistics.median(c[j] for c in busy) for j in range(len(procs))]
    walls = times["running 2 workers (tcp://)"]
    share = statistics.median(sum(c[1:]) / ((len(procs) - 1) * w) for c, w in zip(busy, walls))
    print(f"running 2 workers, CPU s a curve (medians): calling process {per[0]:.3f}, workers "
          f"{', '.join(f'{v:.3f}' for v in per[1:])} (busy {share:.3f} of the wall); idle, CPU s a second: "
          f"calling process {idle[0]:.3f}, workers {', '.join(f'{v:.3f}' for v in idle[1:])}")
    if shared is not None:
        serial_s, cluster_s, ok = shared
        print(f"{concurrent} curves: one after another serially {statistics.median(serial_s):.2f} s, sent at once "
              f"to the running 2 workers {statistics.median(cluster_s):.2f} s: "
              f"{statistics.median(serial_s) / statistics.median(cluster_s):.2f}x the serial throughput "
              f"(medians of {len(serial_s)}; same documents: {ok})", flush=True)


def concurrent_curves(cfg: dict, kw: dict, address: str, k: int, repeats: int, ref: str):
    """``k`` serial curves one after another against ``k`` curves sent at once (one thread each) to the cluster,
    taken in turn ``repeats`` times: (serial seconds, cluster seconds, every document equal to the serial one)."""
    from concurrent.futures import ThreadPoolExecutor
    serial_s, cluster_s, ok = [], [], True
    with ThreadPoolExecutor(k) as pool:
        for _ in range(repeats):
            t0 = time.perf_counter()
            docs = [api.learning_curve_document(cfg, scheduler="serial", **kw) for _ in range(k)]
            serial_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            docs += list(pool.map(lambda _: api.learning_curve_document(cfg, scheduler=address, **kw), range(k)))
            cluster_s.append(time.perf_counter() - t0)
            ok = ok and all(strip(d) == ref for d in docs)
    return serial_s, cluster_s, ok


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-hessian", action="store_true")
    ap.add_argument("--skip-sweeps", action="store_true")
    ap.add_argument("--concurrent", type=int, default=4, metavar="K",
                    help="curves sent at once to the running cluster in the throughput row (0 or 1: no such row)")
    args = ap.parse_args(argv)
    if not 0 <= args.concurrent <= 16 or args.repeats < 1:
        ap.error("--concurrent takes 0 to 16 curves and --repeats at least 1")
    if not args.skip_hessian:
        hessian_table(args.repeats)
    if not args.skip_sweeps:
        sweep_table(args.repeats, args.concurrent)


if __name__ == "__main__":
    main()
