"""Load test: N concurrent browser sessions on ONE `panel serve app` process, each adding a point every few
seconds; measures click-to-heatmap latency per click and scans the server log for errors.

    python scripts/loadtest.py [--sessions 30] [--duration 60] [--interval 3]

Sessions are Playwright browser contexts (real Bokeh clients) in one headless chromium.  Note that on a small
machine the browser competes with the server for the same cores, so the numbers are pessimistic.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.async_api import async_playwright  # noqa: E402

from tests.ui.helpers import CHROMIUM, CHROMIUM_ARGS, JS_CANVAS_XY, JS_MODEL, JS_WATCH_IMAGE, panel_server  # noqa: E402


async def session(browser, url, k, duration, interval, latencies, failures, start_barrier):
    ctx = await browser.new_context(viewport={"width": 1280, "height": 720})
    page = await ctx.new_page()
    rng = random.Random(k)
    try:
        await page.goto(url, timeout=120000)
        await page.wait_for_function(JS_MODEL, arg="bft-image-source", timeout=120000)
        await asyncio.sleep(2)
        await page.evaluate(JS_WATCH_IMAGE)
        await start_barrier.wait()
        end = time.time() + duration
        await asyncio.sleep(rng.uniform(0, interval))
        while time.time() < end:
            x, y = rng.randint(1, 10), rng.randint(1, 15)
            sx, sy = await page.evaluate(JS_CANVAS_XY, [x, y])
            n = await page.evaluate("() => window.__bftImageChanges.length")
            t0 = await page.evaluate("() => performance.now()")
            await page.mouse.click(sx, sy)
            try:
                await page.wait_for_function(f"() => window.__bftImageChanges.length > {n}", timeout=15000)
                t1 = await page.evaluate(f"() => window.__bftImageChanges[{n}]")
                latencies.append(t1 - t0)
            except Exception as e:  # noqa: BLE001
                failures.append(f"session {k}: no heatmap update within 15 s ({type(e).__name__})")
            await asyncio.sleep(interval * rng.uniform(0.8, 1.2))
    finally:
        await ctx.close()


class Barrier:
    def __init__(self, n):
        self.n, self.count, self.event = n, 0, asyncio.Event()

    async def wait(self):
        self.count += 1
        if self.count >= self.n:
            self.event.set()
        await asyncio.wait_for(self.event.wait(), 300)


async def run(url, n, duration, interval):
    latencies, failures = [], []
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        barrier = Barrier(n)
        t0 = time.time()
        await asyncio.gather(*(session(browser, url, k, duration, interval, latencies, failures, barrier)
                               for k in range(n)))
        wall = time.time() - t0
        await browser.close()
    return latencies, failures, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--interval", type=float, default=3.0)
    a = ap.parse_args()
    log = Path(".panel-serve-loadtest.log").resolve()
    with panel_server(log_path=str(log)) as (url, log_path):
        lat, failures, wall = asyncio.run(run(url, a.sessions, a.duration, a.interval))
    text = Path(log_path).read_text()
    errors = [line for line in text.splitlines() if re.search(r"ERROR|Traceback|Exception", line)]
    lat.sort()
    p95 = lat[min(len(lat) - 1, int(round(0.95 * (len(lat) - 1))))] if lat else float("nan")
    print(f"sessions={a.sessions}  duration={a.duration:.0f}s  interval≈{a.interval:.1f}s  wall={wall:.0f}s")
    print(f"{'clicks':>7} {'median_ms':>10} {'p95_ms':>8} {'max_ms':>8} {'failures':>9} {'log_errors':>10}")
    print(f"{len(lat):>7} {statistics.median(lat) if lat else float('nan'):>10.1f} {p95:>8.1f} "
          f"{(lat[-1] if lat else float('nan')):>8.1f} {len(failures):>9} {len(errors):>10}")
    for f in failures[:10]:
        print("  ", f)
    for e in errors[:10]:
        print("  log:", e)
    print("target: median < 1000 ms and no errors in the server log")
    if not errors:
        log.unlink(missing_ok=True)
    else:
        print(f"server log kept at {log}")


if __name__ == "__main__":
    main()
