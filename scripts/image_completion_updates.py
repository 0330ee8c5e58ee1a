"""Time the Image completion tab's live updates (issue 30): the view's own update (warm-started from the previous
state, then the redraw of its Bokeh sources) for every step of the log-beta slider from 0.1 beta_c to 10 beta_c and
back, at 90x120, several rounds; prints a table of medians and maxima:
``python scripts/image_completion_updates.py``"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from app.views.image_completion import ImageCompletionView


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    t0 = time.perf_counter()
    view = ImageCompletionView()
    view.__panel__()
    first = time.perf_counter() - t0
    steps = np.round(np.concatenate([np.arange(-1.0, 1.0001, 0.1), np.arange(0.9, -1.0001, -0.1)]), 2)
    times = []
    for _ in range(args.rounds):
        for v in steps:
            view.log_beta = float(v)
            times.append(view.last_update_s)
    print("| what | value |\n|---|---|")
    print(f"| first opening (problem, cold state, figures) | {first:.2f} s |")
    print(f"| slider steps timed | {len(times)} ({args.rounds} rounds of 0.1 -> 10 -> 0.1 beta_c) |")
    print(f"| median update | {1000 * statistics.median(times):.0f} ms |")
    print(f"| largest update | {1000 * max(times):.0f} ms |")


if __name__ == "__main__":
    main()
