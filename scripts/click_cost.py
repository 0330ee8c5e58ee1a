"""What a click costs the machine, per process: N browser sessions click every few seconds while the CPU time of
every process is read from /proc before and after; printed as % of one core and as CPU milliseconds per click.

    python scripts/click_cost.py [--pages 5] [--duration 30] [--interval 3] [--viewport 1280x720]

Chromium's processes are told apart by their ``--type`` (renderer, gpu-process, utility, the browser itself).  With
``--interval 0`` the pages stay idle (what open pages cost without clicks).  Linux only (/proc)."""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
from pathlib import Path

from playwright.async_api import async_playwright

from app.harness import (
    CHROMIUM,
    CHROMIUM_ARGS,
    JS_CLICK_SETUP,
    JS_MODEL,
    JS_TRACES_READY,
    JS_WAIT_IMAGE_CHANGE,
    JS_WATCH_IMAGE_EVENTS,
    Barrier,
    panel_server,
    viewport,
)

TICK = os.sysconf("SC_CLK_TCK")


def process_times() -> dict:
    """{(pid, kind): CPU seconds} of every process on the machine."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ")
            stat = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if b"chromium" in cmd or b"chrome" in cmd:
            kind = "chromium browser"
            for a in cmd.split(b" "):
                if a.startswith(b"--type="):
                    kind = "chromium " + a[7:].decode()
                if a.startswith(b"--utility-sub-type="):
                    kind += " " + a.split(b".")[-1].decode()
        elif b"panel" in cmd and b"serve" in cmd:
            kind = "panel serve (the server)"
        elif b"node" in cmd and b"playwright" in cmd:
            kind = "playwright driver (harness)"
        elif d.name == str(os.getpid()):
            kind = "this script (harness)"
        else:
            kind = "other"
        out[(d.name, kind)] = (int(stat[11]) + int(stat[12])) / TICK
    return out


async def session(browser, url, k, a, viewport, clicks, latencies, start, stop, gate):
    async with gate:
        ctx = await browser.new_context(viewport=viewport, reduced_motion="reduce")
        page = await ctx.new_page()
        await page.goto(url, timeout=180000)
        await page.wait_for_function(JS_MODEL, arg="bft-image-source", timeout=180000)
        await page.wait_for_function(JS_TRACES_READY, timeout=180000)
        await page.evaluate(JS_WATCH_IMAGE_EVENTS)
    await start.wait()
    rng, end = random.Random(k), time.time() + a.duration
    if a.interval > 0:
        await asyncio.sleep(rng.uniform(0, a.interval))
        while time.time() < end:
            (sx, sy), n, t0 = await page.evaluate(JS_CLICK_SETUP, [rng.randint(1, 10), rng.randint(1, 15)])
            await page.mouse.click(sx, sy)
            clicks.append(1)
            try:
                latencies.append(await asyncio.wait_for(page.evaluate(JS_WAIT_IMAGE_CHANGE, n), 15) - t0)
            except Exception:  # noqa: BLE001 - counted as a click without a latency
                pass
            await asyncio.sleep(a.interval * rng.uniform(0.8, 1.2))
        await asyncio.sleep(3)  # the last run finishes inside the measured period
    else:
        await asyncio.sleep(a.duration)
    await stop.wait()
    await ctx.close()


async def run(a, viewport):
    with panel_server() as (url, _log):
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            clicks, latencies = [], []
            start, stop, gate = Barrier(a.pages + 1), Barrier(a.pages + 1), asyncio.Semaphore(5)
            tasks = [asyncio.create_task(session(browser, url, k, a, viewport, clicks, latencies, start, stop, gate))
                     for k in range(a.pages)]
            await start.wait()
            t0, before = time.time(), process_times()
            await stop.wait()
            wall, after = time.time() - t0, process_times()
            await asyncio.gather(*tasks)
            await browser.close()
    used = {}
    for key, v in after.items():
        used[key[1]] = used.get(key[1], 0.0) + v - before.get(key, 0.0)
    n = max(1, len(clicks))
    print(f"pages={a.pages}  interval={a.interval:g}s  measured={wall:.1f}s  clicks={len(clicks)}  "
          f"median latency={statistics.median(latencies) if latencies else float('nan'):.0f} ms")
    print(f"{'process':34s} {'% of a core':>11s} {'ms CPU per click':>17s}")
    for kind, v in sorted(used.items(), key=lambda kv: -kv[1]):
        if v > 0.05:
            print(f"{kind:34s} {100 * v / wall:11.1f} {1000 * v / n:17.1f}")
    total = sum(used.values())
    print(f"{'total':34s} {100 * total / wall:11.1f} {1000 * total / n:17.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=5)
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--interval", type=float, default=3.0)
    ap.add_argument("--viewport", type=viewport, default="1280x720", help="page size WIDTHxHEIGHT")
    a = ap.parse_args()
    asyncio.run(run(a, a.viewport))


if __name__ == "__main__":
    main()
