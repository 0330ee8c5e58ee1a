"""How the reading of seed 002's Boston settings decides Fig 1's claims: ``python scripts/replica_readings.py``.

For each normalisation of the inputs (``raw``, ``standard``, ``range``) and each cut into halves (the table's order,
random), with the paper's l^2 = 147.1, v_i = sqrt(var_i), sigma^2 = 0.01: the replica theory's posterior variance
over the simulation's (20 resamples a size) for the whole table, and each half's simulated posterior variance over
the whole table's, at m = N/2 .. 5 N.  The table this prints is quoted in docs/replica.md.
"""
from __future__ import annotations

from bftcore.models.replica_tables import BOSTON_SETTINGS, INPUTS, SPLITS, boston_table, replica_rows

SIZES = [253, 506, 1012, 2530]


def main() -> None:
    s, table = BOSTON_SETTINGS, boston_table()
    print(f"{'inputs':9} {'halves':7} {'m':>5}  {'theory/sim (all)':>16}  {'first/all':>9}  {'second/all':>10}")
    for inputs in reversed(INPUTS):
        for split in SPLITS:
            doc = replica_rows(table, s.l2, s.noise, SIZES, scales=s.scales, halves=True, resamples=20, seed=0,
                               inputs=inputs, split=split)
            by = {p: {r["m"]: r for r in doc["rows"] if r["part"] == p} for p in ("all", "first half", "second half")}
            for m in SIZES:
                a = by["all"][m]
                print(f"{inputs:9} {split:7} {m:5d}  {a['theory_variance'] / a['simulated_variance']:16.3f}  "
                      f"{by['first half'][m]['simulated_variance'] / a['simulated_variance']:9.3f}  "
                      f"{by['second half'][m]['simulated_variance'] / a['simulated_variance']:10.3f}")


if __name__ == "__main__":
    main()
