"""Timings of the mixture tools (printed by ``python scripts/bench.py``): median wall time of several runs."""
from __future__ import annotations

import time

import numpy as np

from bftcore.models.regression import RegressionModel, regression_presets
from bftcore.studies.workflows import sweep_document


def _two_trends(n_nodes: int, n_data: int = 5, seed: int = 0) -> dict:
    cfg = regression_presets()["two_trends"]
    cfg = {**cfg, "grid": {"x": {**cfg["grid"]["x"], "n": n_nodes}}}
    if n_data != len(cfg["data"]):
        rng = np.random.default_rng(seed)
        x = rng.uniform(0.0, 10.0, n_data)
        y = np.where(x < 5, 0.5 * x, 5 - 0.5 * x) + 0.3 * rng.standard_normal(n_data)
        cfg["data"] = np.column_stack([x, y]).tolist()
    return cfg


def _median_ms(fn, repeats: int) -> float:
    fn()  # warm-up (imports, caches of scipy)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - t0))
    return float(np.median(times))


def bench_rows(repeats: int = 5) -> list[tuple[str, float, float]]:
    """Rows (name, median_ms, target_ms).

    * a 200-point beta sweep (up, down from every stable solution at beta_max, bifurcations by bisection) of the
      two-component ``two_trends`` regression on 200 x nodes, from the config (model set-up included);
    * the exact b_j (28), predictive mean (27) and posterior variance for 200 nodes and 50 data, from the config
      (the sparse factorisation, t̄_j, V_j and diag(A^{-1}) included: nothing cached between runs).
    """

    sweep_cfg = _two_trends(200)
    exact_cfg = _two_trends(200, n_data=50)

    def sweep():
        sweep_document(sweep_cfg, 0.05, 5.0, 200)

    def exact():
        RegressionModel.from_config(exact_cfg).exact(2.0)

    return [("mixture regression: 200-point beta sweep, 200 nodes", _median_ms(sweep, repeats), 1000.0),
            ("mixture regression: exact b_j + variance, 200 nodes, 50 data", _median_ms(exact, repeats), 20.0)]


if __name__ == "__main__":
    for name, ms, target in bench_rows():
        print(f"{name:64s} {ms:9.2f} ms  (target < {target:g} ms)")
