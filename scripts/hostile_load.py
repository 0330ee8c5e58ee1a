"""Hostile load: three tabs of the most expensive link the server accepts, and a fourth session clicking.

    python scripts/hostile_load.py [--repeats 3] [--clicks 5]

One `panel serve app` (sessions destroyed 2 s after their tab closes) and Debian chromium.  Each repeat opens a
fresh server, loads a session on the default problem, then three tabs of ``tests.ui.helpers.WORST_LINK`` (field P,
128 x 128, massive relaxation, 61 iterations), clicks the canvas of the first session while they run, closes
everything and waits for the memory to come back.  Prints the server's RSS before, at its peak and after, and the
click-to-heatmap latency of the clicking session (median and max), per repeat and as medians.  Targets (issue 11):
clicks under 1 s, RSS after within 300 MB of before.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.sync_api import sync_playwright  # noqa: E402

from tests.ui.helpers import hostile_scenario, launch, panel_server  # noqa: E402

SERVE_ARGS = ["--check-unused-sessions", "500", "--unused-session-lifetime", "2000"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clicks", type=int, default=5)
    args = ap.parse_args()
    rows = []
    with sync_playwright() as p:
        browser = launch(p)
        for k in range(args.repeats):
            with panel_server(extra_args=SERVE_ARGS) as (url, log):
                r = hostile_scenario(browser, url, clicks=args.clicks)
                errors = sum(1 for line in open(log) if "Traceback" in line or "ERROR" in line)
            lat = r["latencies_ms"] or [float("nan")]
            rows.append((r["before"], r["peak"], r["after"], statistics.median(lat), max(lat), r["updated"],
                         r["clicks"], errors))
            print(f"run {k + 1}: RSS before {r['before']:.0f} MB, peak {r['peak']:.0f} MB, after {r['after']:.0f} MB "
                  f"(+{r['after'] - r['before']:.0f}); clicks {r['updated']}/{r['clicks']} updated, median "
                  f"{statistics.median(lat):.0f} ms, max {max(lat):.0f} ms; log errors {errors}", flush=True)
        browser.close()
    print()
    print(f"{'median of':<10}{'RSS before':>12}{'peak':>8}{'after':>8}{'after-before':>14}{'click median':>14}"
          f"{'click max':>11}")
    cols = list(zip(*rows))
    med = [statistics.median(c) for c in cols[:5]]
    print(f"{len(rows):<10}{med[0]:>10.0f}MB{med[1]:>6.0f}MB{med[2]:>6.0f}MB{med[2] - med[0]:>12.0f}MB"
          f"{med[3]:>12.0f}ms{med[4]:>9.0f}ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
