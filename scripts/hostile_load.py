"""Hostile load: three tabs of the most expensive links the server accepts, and a fourth session clicking.

    python scripts/hostile_load.py [--repeats 3] [--clicks 5] [--link NAME ...]

One `panel serve app` per repeat (sessions destroyed 2 s after their tab closes) and Debian chromium.  Each repeat
loads a session on the default problem, then three tabs of one link of ``app.harness.HOSTILE_LINKS`` (the node
limit, 128 x 128: field P by massive relaxation with as many iterations as the budget allows, field P by Newton,
field L with an l6 prior), clicks the canvas of the first session while they run, closes everything and waits for
the memory to come back.  Prints the server's RSS before, at its peak and after, and the click-to-heatmap latency
of the clicking session (median and max), per repeat and as medians per link.  Targets (issue 11): clicks under
1 s, RSS after within 300 MB of before.
"""
from __future__ import annotations

import argparse
import statistics
import sys

from playwright.sync_api import sync_playwright

from app.harness import HOSTILE_LINKS, hostile_scenario, launch, panel_server

SERVE_ARGS = ["--check-unused-sessions", "500", "--unused-session-lifetime", "2000"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clicks", type=int, default=5)
    ap.add_argument("--link", action="append", choices=list(HOSTILE_LINKS),
                    help="a link of the scenario (repeatable; default: all)")
    args = ap.parse_args()
    table = {}
    with sync_playwright() as p:
        browser = launch(p)
        for name in args.link or list(HOSTILE_LINKS):
            rows = table[name] = []
            for k in range(args.repeats):
                with panel_server(extra_args=SERVE_ARGS) as (url, log):
                    r = hostile_scenario(browser, url, clicks=args.clicks, link=HOSTILE_LINKS[name])
                    errors = sum(1 for line in open(log) if "Traceback" in line or "ERROR" in line)
                lat = r["latencies_ms"] or [float("nan")]
                rows.append((r["before"], r["peak"], r["after"], statistics.median(lat), max(lat)))
                print(f"{name}, run {k + 1}: RSS before {r['before']:.0f} MB, peak {r['peak']:.0f} MB, after "
                      f"{r['after']:.0f} MB (+{r['after'] - r['before']:.0f}); clicks {r['updated']}/{r['clicks']} "
                      f"updated, median {statistics.median(lat):.0f} ms, max {max(lat):.0f} ms; log errors {errors}",
                      flush=True)
        browser.close()
    print()
    print(f"{'medians of ' + str(args.repeats) + ' runs':<22}{'RSS before':>11}{'peak':>8}{'after':>8}"
          f"{'after-before':>14}{'click median':>14}{'click max':>11}")
    for name, rows in table.items():
        med = [statistics.median(c) for c in zip(*rows)]
        print(f"{name:<22}{med[0]:>9.0f}MB{med[1]:>6.0f}MB{med[2]:>6.0f}MB{med[2] - med[0]:>12.0f}MB"
              f"{med[3]:>12.0f}ms{med[4]:>9.0f}ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
