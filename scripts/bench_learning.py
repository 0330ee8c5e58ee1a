"""Learning-curve benchmark (issue 15): the teacher's button on the paper mesh, and a 64×64 learning curve on 1 and
2 local Dask workers.  Prints a table of medians over ``--repeats`` runs.

    python scripts/bench_learning.py [--repeats 3] [--quick]

1. Paper mesh (10×15, Fig 21's prior, ``"truth": "paper"``): 8 sizes n = 5 … 200, 20 resamples, the 5 default
   lambdas (800 fits), on each engine: ``serial`` (a plain loop, the default since issue 31), ``inprocess``,
   ``local:2``.  The time is the whole call, engine start-up included.  Target: under 10 s.
2. 64×64 grid on the same truth (x in [1, 10], y in [1, 15], l2 = 1, Newton, about 11 ms a fit): the issue's
   research-size curve, 20 sizes n = 10 … 1000 × 50 resamples × the 5 default lambdas (5 000 fits), on ``serial``,
   ``local:1`` and ``local:2``; the speed-up of 2 workers over 1 (cluster start-up included).
Each row also checks that the engine's document equals the serial one (``same``).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from bftcore import api
from bftcore.foundations.limits import UNLIMITED, using
from bftcore.models.presets import figure_config
from bftcore.studies.learning import parse_sizes


def paper_case() -> tuple[dict, dict]:
    return figure_config("fig21"), {"sizes": [5, 8, 14, 24, 42, 71, 119, 200], "resamples": 20}


def grid64_case() -> tuple[dict, dict]:
    cfg = figure_config("fig21")
    cfg["grid"] = {"x": {"min": 1, "max": 10, "n": 64, "boundary": "neumann"},
                   "y": {"min": 1, "max": 15, "n": 64, "boundary": "periodic"}}
    cfg["prior"] = {**cfg["prior"], "lambda": 1.0}
    cfg["templates"], cfg["weights"] = [], []
    return cfg, {"sizes": parse_sizes("10:1000:20"), "resamples": 50}


def strip(doc: dict) -> str:
    return json.dumps({k: v for k, v in doc.items() if k not in ("elapsed_s", "scheduler")}, sort_keys=True)


def measure(cfg: dict, kw: dict, scheduler: str, repeats: int, ref: str | None) -> tuple[float, list, bool]:
    times, same = [], True
    for _ in range(repeats):
        t0 = time.perf_counter()
        doc = api.learning_curve_document(cfg, scheduler=scheduler, **kw)
        times.append(time.perf_counter() - t0)
        same = same and (ref is None or strip(doc) == ref)
    return statistics.median(times), times, same


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="the paper mesh only")
    args = ap.parse_args()
    cases = [("paper 10x15, 800 fits", paper_case(), ["serial", "inprocess", "local:2"])]
    if not args.quick:
        cases.append(("64x64, 5000 fits", grid64_case(), ["serial", "local:1", "local:2"]))
    print(f"{'case':<24} {'engine':<10} {'median s':>9}  {'runs (s)':<26} {'same':<5} {'speed-up':>8}")
    with using(UNLIMITED):
        for name, (cfg, kw), engines in cases:
            ref_doc = api.learning_curve_document(cfg, scheduler="serial", **kw)
            ref = strip(ref_doc)
            medians = {}
            for engine in engines:
                med, runs, same = measure(cfg, kw, engine, args.repeats, ref)
                medians[engine] = med
                base = medians.get("local:1")
                speed = f"{base / med:.2f}" if engine == "local:2" and base else ""
                print(f"{name:<24} {engine:<10} {med:>9.2f}  {', '.join(f'{t:.2f}' for t in runs):<26} "
                      f"{str(same):<5} {speed:>8}", flush=True)


if __name__ == "__main__":
    main()
