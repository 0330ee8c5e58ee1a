"""What the worst problems the cost budget accepts cost: wall time and peak memory of each, median of N runs.

    python scripts/limits_cost.py [--repeats 3] [--quick]

Each case runs in a fresh Python process (so its peak RSS is its own) through the public API, validated under
the default budget ``bftcore.foundations.limits.LIMITS``: the table shows the edges of that budget, not typical
problems.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

import numpy as np

CHILD = r"""
import json, resource, sys, time
from bftcore import api
from bftcore.studies import workflows
from bftcore.foundations.config import validate_config, validate_sweep
case = json.loads(sys.stdin.read())
cfg = validate_config(case["config"])
t0 = time.perf_counter()
if "sweep" in case:
    lo, hi, n = validate_sweep(cfg, *case["sweep"])
    workflows.sweep_document(cfg, lo, hi, n)
    its = n
else:
    its = api.fit(cfg)["iterations"]
print(json.dumps({"s": time.perf_counter() - t0, "iterations": its,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def grid(nx, ny, x=(1, 10), y=(1, 15)):
    return {"x": {"min": x[0], "max": x[1], "n": nx}, "y": {"min": y[0], "max": y[1], "n": ny}}


def data(n=200, seed=0):
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.uniform(1, 10, n), np.clip(rng.normal(8, 3, n), 1, 15)]).tolist()


def cases(quick: bool):
    tpl2 = [{"kind": "paper_t1"}, {"kind": "paper_t2"}]
    out = [
        ("128x128 field L, l2, newton (max nodes)", {"grid": grid(128, 128), "data": data()}),
        ("128x128 field L, l6=0.1, newton", {"grid": grid(128, 128), "data": data(), "prior": {"l6": 0.1}}),
        ("128x128 field P, l2, newton", {"grid": grid(128, 128), "data": data(), "prior": {"field": "P"}}),
        ("128x128 field P, l2, massive, 61 its (max node-its)",
         {"grid": grid(128, 128), "data": data(), "prior": {"field": "P"},
          "solver": {"method": "massive", "mass2": 1.0, "max_iter": 61, "min_iter": 61, "tol": 0}}),
        ("64x64 field P, l6=0.1, massive (max P-wide)",
         {"grid": grid(64, 64), "data": data(), "prior": {"field": "P", "l6": 0.1},
          "solver": {"method": "massive", "mass2": 1.0}}),
        ("64x64 field P, l6=0.1, newton (max P-wide)",
         {"grid": grid(64, 64), "data": data(), "prior": {"field": "P", "l6": 0.1}}),
        ("90x90 field L, 16 templates (max template nodes)",
         {"grid": grid(90, 90), "data": data(),
          "templates": [{"kind": "gaussian", "mu": 2 + 0.7 * k, "sigma": 2} for k in range(16)]}),
        ("regression 1024 nodes, 16 templates",
         {"model": "regression", "grid": {"x": {"min": 0, "max": 1, "n": 1024}},
          "data": [[k / 99, 0.1 * k] for k in range(100)],
          "prior": {"l0": 0.1}, "templates": [{"kind": "constant", "value": k} for k in range(16)]}),
        ("paper grid, 100 000 points", {"data": data(100_000), "templates": tpl2}),
        ("paper grid fig28-like sweep, 100 betas (max sweep work)",
         {"data": data(50), "templates": tpl2, "prior": {"lambda": 1.2}}, (0.1, 10, 100)),
        ("64x64 sweep, 3 betas (max sweep work)",
         {"grid": grid(64, 64), "data": data(), "templates": tpl2}, (0.1, 10, 3)),
        ("fig7 regression sweep, 200 betas (max sweep points)",
         {"model": "regression", "grid": {"x": {"min": 0, "max": 0, "n": 1}}, "data": [[0, 0.1]],
          "prior": {"l0": 1.0}, "templates": [{"kind": "constant", "value": 1}, {"kind": "constant", "value": -1}]},
         (0.05, 4, 200)),
    ]
    return out[:4] if quick else out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    print(f"worst accepted problems: median of {args.repeats} runs, each in a fresh process")
    print(f"{'case':<56}{'seconds':>9}{'[min-max]':>15}{'peak RSS MB':>13}{'its':>6}")
    for case in cases(args.quick):
        name, cfg = case[0], case[1]
        payload = {"config": cfg}
        if len(case) > 2:
            payload["sweep"] = case[2]
        runs = []
        for _ in range(args.repeats):
            out = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(payload), capture_output=True,
                                 text=True)
            if out.returncode != 0:
                print(f"{name:<56} failed: {out.stderr.strip().splitlines()[-1]}")
                break
            runs.append(json.loads(out.stdout))
        if len(runs) == args.repeats:
            s = [r["s"] for r in runs]
            print(f"{name:<56}{statistics.median(s):>9.2f}{f'[{min(s):.2f}-{max(s):.2f}]':>15}"
                  f"{max(r['rss_mb'] for r in runs):>13.0f}{runs[0]['iterations']:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
