"""Load test: N concurrent browser sessions on ONE `panel serve app` process, each adding a point every few
seconds; measures click-to-heatmap latency per click, the frames each session receives, the server's CPU time,
and scans the server log for errors.

    python scripts/loadtest.py [--sessions 30] [--duration 60] [--interval 3] [--viewport 1280x720] [--profile out.svg]
    python scripts/loadtest.py --classroom 2 [--sessions 30] ...   # through nginx to 2 workers (deploy/classroom.sh)

With ``--classroom N`` the same load goes through the classroom deployment instead: deploy/classroom.sh starts N
`panel serve` workers behind nginx on a free block of ports (127.0.0.1, a run directory of its own), the sessions
connect to nginx, the server CPU reported is the sum over the N workers, the workers' logs are scanned for
errors, and the deployment is stopped at the end (also after a failure).

Every session is a real Bokeh client: a Playwright browser context (its own cookies, websocket and server-side
session) in one headless Debian chromium, clicking the canvas with the mouse.  To leave the 2 cores of the
project's machine to the server as far as a real browser allows, the harness itself is kept cheap: the heatmap is
watched through BokehJS change signals instead of a polling timer (a click waits on a promise the change itself
resolves), and the pages ask for reduced motion.  The viewport is the 1280×720 of a projector (``--viewport``).
The clicks of the N sessions start at random offsets within one interval and then follow a fixed schedule, one
every interval ±20 % (a click falling due before the previous one's answer waits for it), so that runs of different
deployments are offered the same clicks.
Pages are opened a few at a time (the page load is not what is measured), and the measurement starts when all
are loaded.

A click counts as updated when the heatmap in that page changes within 15 s of the click.  `--profile` records
the server with py-spy (`pip install py-spy`) for the measured period.  The script also prints the server's CPU
share: on this machine the browsers, not the server, take most of the 2 cores.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
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
    VIEWPORT,
    Barrier,
    panel_server,
    viewport,
)

OPEN_AT_ONCE = 5
ROOT = Path(__file__).resolve().parent.parent
CLASSROOM = ROOT / "deploy" / "classroom.sh"


async def session(browser, url, k, duration, interval, out, gate, start_barrier):
    loaded = False
    async with gate:  # a few page loads at a time
        ctx = await browser.new_context(viewport=VIEWPORT, reduced_motion="reduce")
        page = await ctx.new_page()
        rng = random.Random(k)
        try:
            await page.goto(url, timeout=180000)
            await page.wait_for_function(JS_MODEL, arg="bft-image-source", timeout=180000)
            await page.wait_for_function(JS_TRACES_READY, timeout=180000)
            await page.evaluate(JS_WATCH_IMAGE_EVENTS)
            loaded = True
        except Exception as e:  # noqa: BLE001 - reported
            out["load_failures"].append(f"session {k}: page did not load ({type(e).__name__}: "
                                        f"{' '.join(str(e).split())[:200]})")
            await ctx.close()
    # The barrier is waited for outside the gate: a session whose page failed to load used to wait for it while
    # holding its place in the gate, and OPEN_AT_ONCE such failures left no place for the pages still to load, so
    # the whole run waited (idle) until the barrier's own time limit.
    if not loaded:
        await start_barrier.wait()
        return
    try:
        await start_barrier.wait()
        end = time.time() + duration
        # a fixed schedule: click k is due at start + offset + the sum of k intervals (each interval ±20 %),
        # whatever the answers took, so that every run offers the server the same clicks per second; a click whose
        # time has come while the previous one is still unanswered goes as soon as that answer arrives (its
        # latency would otherwise be ambiguous).  Waiting a full interval *after* each answer, as this script did
        # first, let a slower deployment receive fewer clicks: the one-worker runs got 213-260 clicks against the
        # two workers' 309-368, and their latencies were not compared at the same load.
        due = time.time() + rng.uniform(0, interval)
        await asyncio.sleep(max(0.0, due - time.time()))
        while time.time() < end:
            x, y = rng.randint(1, 10), rng.randint(1, 15)
            # one round trip for where to click, how many heatmap changes so far and the start time: t0 is taken
            # before the click is dispatched, so the latency includes the dispatch and errs on the long side
            (sx, sy), n, t0 = await page.evaluate(JS_CLICK_SETUP, [x, y])
            await page.mouse.click(sx, sy)
            try:  # t1 is the page's own timestamp of the change, whenever the driver hears of it
                t1 = await asyncio.wait_for(page.evaluate(JS_WAIT_IMAGE_CHANGE, n), 15)
                out["latencies"].append(t1 - t0)
            except Exception as e:  # noqa: BLE001
                out["failures"].append(f"session {k}: no heatmap update within 15 s of the click at ({x}, {y}) "
                                       f"({type(e).__name__})")
            due += interval * rng.uniform(0.8, 1.2)
            await asyncio.sleep(max(0.0, due - time.time()))
        # let the last run finish before counting frames and closing the page: a tab closed while its frames are
        # still being written leaves "connection was closed" errors in the server log (a real user closing a tab
        # mid-animation gets the same; see README), which would hide errors of the measured period among them
        try:
            await page.wait_for_function("""() => { const c = window.__bftImageChanges;
              return performance.now() - (c.length ? c[c.length - 1] : 0) > 1500; }""", timeout=30000, polling=250)
        except Exception:  # noqa: BLE001 - a page still busy after 30 s is closed anyway
            pass
        times = await page.evaluate("() => window.__bftImageChanges")
        out["frames"].append(times)
    finally:
        await ctx.close()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_pid(port: int) -> int | None:
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"panel" in cmd and b"serve" in cmd and str(port).encode() in cmd:
                return int(d.name)
    return None


def children(pids) -> list[int]:
    """The processes whose parent is one of ``pids`` (from /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid in pids:
                out.append(int(d.name))
    return out


def _free_block(n: int) -> int:
    """A port with the next ``n`` ports free too (nginx on it, the workers on the following ones)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        ok = base + n < 65535
        for k in range(1, n + 1):
            with socket.socket() as t:
                try:
                    t.bind(("127.0.0.1", base + k))
                except OSError:
                    ok = False
        if ok:
            return base
    raise RuntimeError("no free block of ports")


class Classroom:
    """deploy/classroom.sh with ``workers`` workers on a free port, in a run directory of its own; stopped on exit.
    ``pids``: the workers' process ids; ``logs``: their log files."""

    def __init__(self, workers: int, port: int | None = None, prefix: str = "bft-loadtest-classroom-"):
        self.workers = workers
        self.port = port or _free_block(workers)
        self.run_dir = Path(tempfile.mkdtemp(prefix=prefix))
        self.url = f"http://127.0.0.1:{self.port}/app"

    def _script(self, *args):
        env = {**os.environ, "PYTHON": sys.executable}
        return subprocess.run(["bash", str(CLASSROOM), *args, "--port", str(self.port), "--run-dir", str(self.run_dir)],
                              capture_output=True, text=True, env=env, timeout=300)

    def __enter__(self):
        out = self._script("--workers", str(self.workers), "--address", "127.0.0.1")
        if out.returncode != 0:
            self._script("--stop")
            raise RuntimeError(f"classroom.sh did not start:\n{out.stdout}\n{out.stderr}")
        self.pids = [int((self.run_dir / f"worker-{i}.pid").read_text()) for i in range(1, self.workers + 1)]
        self.logs = [self.run_dir / "logs" / f"worker-{i}.log" for i in range(1, self.workers + 1)]
        return self

    def nginx_pids(self) -> list[int]:
        """nginx's master and workers of this deployment (their command line names its run directory)."""
        out = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    cmd = (d / "cmdline").read_bytes()
                except OSError:
                    continue
                if b"nginx" in cmd and str(self.run_dir).encode() in cmd:
                    out.append(int(d.name))
        return out + children(out)  # the master and its workers

    def __exit__(self, *exc):
        self._script("--stop")


def renice(pids, nice: int) -> None:
    """Set the niceness of every thread of ``pids`` (Linux niceness is per thread; threads made later inherit it
    from their maker), for ``--server-nice``.  A negative value needs root."""
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            os.setpriority(os.PRIO_PROCESS, int(task.name), nice)


async def run(url, n, duration, interval, profile, pids=None):
    """The load on ``url``; the server CPU is that of ``pids`` (default: the `panel serve` of the URL's port)."""
    out = {"latencies": [], "failures": [], "load_failures": [], "frames": []}
    if pids is None:
        pid = server_pid(int(url.split(":")[2].split("/")[0]))
        pids = [pid] if pid else []
    pid = pids[0] if pids else None
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        barrier, gate = Barrier(n + 1), asyncio.Semaphore(OPEN_AT_ONCE)
        tasks = [asyncio.create_task(session(browser, url, k, duration, interval, out, gate, barrier))
                 for k in range(n)]
        await barrier.wait()
        t0, cpu0 = time.time(), sum(cpu_seconds(q) for q in pids)
        spy = None
        if profile and pid and shutil.which("py-spy"):
            spy = subprocess.Popen(["py-spy", "record", "-p", str(pid), "-o", profile, "-d", str(int(duration)),
                                    "-r", "50", "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        await asyncio.gather(*tasks)
        wall = time.time() - t0
        cpu = sum(cpu_seconds(q) for q in pids) - cpu0 if pids else float("nan")
        if spy is not None:
            spy.wait(60)
        await browser.close()
    return out, wall, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--interval", type=float, default=3.0)
    ap.add_argument("--profile", help="write a py-spy flame graph (SVG) of the server to this file")
    ap.add_argument("--viewport", type=viewport, default="1280x720", help="page size WIDTHxHEIGHT (default 1280x720)")
    ap.add_argument("--classroom", type=int, metavar="N", help="go through nginx to N workers of deploy/classroom.sh")
    ap.add_argument("--server-nice", type=int, default=0, metavar="N",
                    help="run the server's processes at niceness N (e.g. -10, as root): the server has the cores when "
                         "it needs them, as it would with the class's browsers on their own laptops (Chromium sets "
                         "its own processes' priorities, so niceness cannot be given to the browsers instead)")
    ap.add_argument("--json", metavar="FILE", help="also write each click's latency (ms) and the figures to FILE")
    a = ap.parse_args()
    VIEWPORT.update(a.viewport)
    log = Path(".panel-serve-loadtest.log").resolve()
    if a.classroom:
        with Classroom(a.classroom) as room:
            if a.server_nice:
                renice(room.pids + room.nginx_pids(), a.server_nice)
            out, wall, cpu = asyncio.run(run(room.url, a.sessions, a.duration, a.interval, a.profile, room.pids))
            text = "\n".join(f.read_text() for f in room.logs)
        log.write_text(text)
        log_path = log
    else:
        with panel_server(log_path=str(log)) as (url, log_path):
            pid = server_pid(int(url.split(":")[2].split("/")[0]))
            if a.server_nice and pid:
                renice([pid], a.server_nice)
            out, wall, cpu = asyncio.run(run(url, a.sessions, a.duration, a.interval, a.profile))
    text = Path(log_path).read_text()
    errors = [line for line in text.splitlines() if re.search(r"ERROR|Traceback|Exception", line)]
    lat = sorted(out["latencies"])
    clicks = len(lat) + len(out["failures"])
    p95 = lat[min(len(lat) - 1, int(round(0.95 * (len(lat) - 1))))] if lat else float("nan")
    frames = sum(len(times) for times in out["frames"])
    where = (f"through nginx to {a.classroom} worker{'s' if a.classroom > 1 else ''} (deploy/classroom.sh)"
             if a.classroom else "one panel serve")
    print(f"{where}  sessions={a.sessions}  duration={a.duration:.0f}s  interval={a.interval:.1f}s ±20%  "
          f"wall={wall:.0f}s  viewport={VIEWPORT['width']}x{VIEWPORT['height']}  server nice={a.server_nice}")
    print(f"{'clicks':>7} {'median_ms':>10} {'p95_ms':>8} {'max_ms':>8} {'failures':>9} {'log_errors':>10} "
          f"{'server_cpu':>11}")
    print(f"{clicks:>7} {statistics.median(lat) if lat else float('nan'):>10.1f} {p95:>8.1f} "
          f"{(lat[-1] if lat else float('nan')):>8.1f} {len(out['failures']):>9} {len(errors):>10} "
          f"{100 * cpu / wall:>10.0f}%")
    if clicks:
        print(f"heatmap updates received per click: {frames / clicks:.1f} (the animation of each run, coalesced "
              f"to at most ~10 frames/s)")
    for f in (out["load_failures"] + out["failures"])[:10]:
        print("  ", f)
    for e in errors[:10]:
        print("  log:", e)
    print("target: median < 1000 ms, every click updated, no errors in the server log")
    if a.json:
        Path(a.json).write_text(json.dumps({
            "workers": a.classroom or 0, "server_nice": a.server_nice, "sessions": a.sessions,
            "duration": a.duration, "interval": a.interval,
            "wall": wall, "clicks": clicks, "latencies_ms": lat, "failures": len(out["failures"]),
            "log_errors": len(errors), "server_cpu": cpu / wall, "frames_per_click": frames / clicks if clicks else 0}))
    if not errors:
        log.unlink(missing_ok=True)
    else:
        print(f"server log kept at {log}")


if __name__ == "__main__":
    main()
