"""The browser/server harness used by the UI tests and the load scripts.

A `panel serve` of this installed app on a free port (:func:`panel_server`), the chromium launch of this machine
(:func:`launch`, :data:`CHROMIUM_ARGS`), JavaScript probes into the page's Bokeh document (``JS_*``), waiting for the
app (:func:`wait_for_app`), canvas coordinates (:func:`canvas_xy`), the server's memory (:func:`rss_mb`) and the
hostile-links scenario (:data:`HOSTILE_LINKS`, :func:`hostile_scenario`).  Playwright (the test extras) is not
imported here: callers pass in their own Playwright objects.  Nothing of the dashboard imports this module.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

#: The app's own folder, what `panel serve` is given (served at /app).
APP_DIR = Path(__file__).resolve().parent
#: The projector size the layout is made for.
VIEWPORT = {"width": 1280, "height": 720}
CHROMIUM = os.environ.get("BFT_CHROMIUM", "/usr/bin/chromium")
#: How long a browser test waits for a diagnosis to appear (the overfitting alarm and its lambda scan, the
#: metastability branches, the plots that come with them): a failure deadline, not a measurement.  They appear
#: 9-12 s after the page on this 2-core machine (2026-11-29); in one whole-suite run that day two of these waits
#: missed a 90 s deadline and passed on the rerun (37 s for the two).
DIAGNOSIS_WAIT_S = 180.0
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


#: Process id of each running `panel serve` of :func:`panel_server`, by its app URL (to read its memory).
SERVER_PIDS: dict[str, int] = {}
#: Log file of each running `panel serve` of :func:`panel_server`, by its app URL (to wait for its events).
SERVER_LOGS: dict[str, str] = {}
#: When each running `panel serve` of :func:`panel_server` was started (``time.time()``), by its app URL.
SERVER_STARTED: dict[str, float] = {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def panel_server(port: int | None = None, log_path: str | None = None, extra_args=(), poll_s: float = 0.3):
    """`panel serve` of the installed app (:data:`APP_DIR`) bound to 127.0.0.1, run from an empty directory of its own
    (so it imports ``app``, ``bftcore`` and the standard library as installed: ``python -m`` puts its working
    directory first on the path, and a stray ``grp.py`` in the shared temporary directory once broke every server
    of a CI run); yields (url, log file path,
    by default in the temporary directory); stops the server afterwards.  Start-up is detected by polling the
    server's ``/liveness`` endpoint (``--liveness``, every ``poll_s`` seconds), which creates no session.  The
    process's start time (``time.time()`` just before it was started) is in :data:`SERVER_STARTED`."""
    port = port or free_port()
    log_path = log_path or str(Path(tempfile.gettempdir()) / f"bft-panel-serve-{port}.log")
    cmd = [sys.executable, "-m", "panel", "serve", str(APP_DIR), "--port", str(port), "--address", "127.0.0.1",
           "--allow-websocket-origin", f"127.0.0.1:{port}", "--liveness", *extra_args]
    started = time.time()
    workdir = tempfile.TemporaryDirectory(prefix="bft-panel-serve-")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=workdir.name, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/app"
    try:
        deadline = time.time() + 60
        while True:
            try:
                # /liveness answers without building an app session (polling / made one session per poll)
                urllib.request.urlopen(f"http://127.0.0.1:{port}/liveness", timeout=2)
                break
            except Exception:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"panel serve did not start; log:\n{Path(log_path).read_text()}")
                time.sleep(poll_s)
        SERVER_PIDS[url], SERVER_LOGS[url], SERVER_STARTED[url] = proc.pid, log_path, started
        yield url, log_path
    finally:
        SERVER_PIDS.pop(url, None)
        SERVER_LOGS.pop(url, None)
        SERVER_STARTED.pop(url, None)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        workdir.cleanup()


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


# JavaScript probes -----------------------------------------------------------------------------------------
JS_MODEL = """(name) => { for (const d of Bokeh.documents) { const m = d.get_model_by_name(name);
  if (m) return true; } return false; }"""

JS_IMAGE_SUM = """() => { for (const d of Bokeh.documents) { const m = d.get_model_by_name('bft-image-source');
  if (m) { const a = m.data.image[0]; let s = 0, w = 0; const f = a.flat ? a.flat(Infinity) : a;
           for (let k = 0; k < f.length; k++) { s += f[k]; w += f[k] * ((k % 7) + 1); } return [s, w, f.length]; } }
  return null; }"""

JS_IMAGE = """() => { for (const d of Bokeh.documents) { const m = d.get_model_by_name('bft-image-source');
  if (m) { const a = m.data.image[0]; return Array.from(a.flat ? a.flat(Infinity) : a); } } return null; }"""

JS_COLUMN = """([name, col]) => { for (const d of Bokeh.documents) { const m = d.get_model_by_name(name);
  if (m) { return Array.from(m.data[col]); } } return null; }"""

JS_CANVAS_XY = """([x, y]) => { for (const d of Bokeh.documents) { const fig = d.get_model_by_name('bft-canvas');
  if (!fig) continue; const view = Bokeh.index.find_one(fig); if (!view) return null;
  const sx = view.frame.x_scale.compute(x), sy = view.frame.y_scale.compute(y);
  let r = view.canvas_view.el.getBoundingClientRect();
  if (r.top < 0 || r.bottom > window.innerHeight) { view.canvas_view.el.scrollIntoView({block: "center"});
    r = view.canvas_view.el.getBoundingClientRect(); }
  return [r.left + sx, r.top + sy]; } return null; }"""

# Records performance.now() whenever the heatmap data changes to something new (for latency measurements):
# polls the image signature every 5 ms, which bounds the measurement error.
JS_WATCH_IMAGE = """() => { for (const d of Bokeh.documents) { const m = d.get_model_by_name('bft-image-source');
  if (!m) continue; window.__bftImageChanges = []; const sig = () => { const a = m.data.image[0];
  const f = (a.flat && !ArrayBuffer.isView(a)) ? a.flat(Infinity) : a; let w = 0;
  for (let k = 0; k < f.length; k++) w += f[k] * ((k % 7) + 1); return w; };
  window.__bftSig = sig(); if (window.__bftTimer) clearInterval(window.__bftTimer);
  window.__bftTimer = setInterval(() => { const s = sig(); if (s !== window.__bftSig) {
  window.__bftSig = s; window.__bftImageChanges.push(performance.now()); } }, 5); return true; } return false; }"""


# The same without polling: listens to the image source's change signals (BokehJS emits them for every update
# that arrives from the server).  Cheaper for many pages at once (the load test), exact to the event.
JS_WATCH_IMAGE_EVENTS = """() => { for (const d of Bokeh.documents) { const m = d.get_model_by_name('bft-image-source');
  if (!m) continue; window.__bftImageChanges = []; const sig = () => { const a = m.data.image[0];
  const f = (a.flat && !ArrayBuffer.isView(a)) ? a.flat(Infinity) : a; let w = 0;
  for (let k = 0; k < f.length; k++) w += f[k] * ((k % 7) + 1); return w; };
  window.__bftSig = sig(); window.__bftWaiters = []; const check = () => { const s = sig(); if (s !== window.__bftSig) {
  window.__bftSig = s; window.__bftImageChanges.push(performance.now());
  for (const w of window.__bftWaiters.splice(0)) w(); } };
  m.change.connect(check); m.properties.data.change.connect(check);
  if (m.patching) m.patching.connect(check); if (m.streaming) m.streaming.connect(check); return true; }
  return false; }"""


# Resolves once the heatmap has changed more than n times (after JS_WATCH_IMAGE_EVENTS), woken by the change
# itself: no polling timer in the page while it waits, which with 30 pages would cost CPU the pages need.
JS_WAIT_IMAGE_CHANGE = """(n) => new Promise((resolve) => { const done = () => {
  if (window.__bftImageChanges.length > n) { resolve(window.__bftImageChanges[n]); return true; } return false; };
  if (!done()) { const w = () => { if (!done()) window.__bftWaiters.push(w); }; window.__bftWaiters.push(w); } })"""


# An init script (Playwright's ``add_init_script``): records when the page first shows a heatmap of the solver (the
# image source holds more than the placeholder of zeros the page is built with, and the canvas' view has finished
# drawing), in the page's clock (``__bftFirstHeatmap``, ms since the navigation started) and in the epoch
# (``__bftFirstHeatmapEpoch``, ms, to compare with a clock outside the browser).  Polls every 5 ms, which bounds the
# error.
JS_FIRST_HEATMAP = """(() => { const poll = setInterval(() => { if (!window.Bokeh || !Bokeh.documents) return;
  for (const d of Bokeh.documents) { const m = d.get_model_by_name('bft-image-source'); if (!m) continue;
    const fig = d.get_model_by_name('bft-canvas'); const v = fig && Bokeh.index.find_one(fig);
    if (!v || !v.has_finished()) continue;
    const a = m.data.image && m.data.image[0]; if (!a) continue;
    const f = (a.flat && !ArrayBuffer.isView(a)) ? a.flat(Infinity) : a;
    for (let k = 0; k < f.length; k++) if (f[k] !== 0) { const t = performance.now(); window.__bftFirstHeatmap = t;
      window.__bftFirstHeatmapEpoch = performance.timeOrigin + t; clearInterval(poll); return; } } }, 5); })();"""

# The traces hold more than the start: the first solve, which runs on load, has shown its iterations.
JS_TRACES_READY = """() => { for (const d of Bokeh.documents) { const m = d.get_model_by_name('bft-traces-source');
  if (m && m.data.iteration.length > 1) return true; } return false; }"""

# Where to click, how many heatmap changes so far and the page's time, in one round trip (after
# JS_WATCH_IMAGE_EVENTS): t0 is taken before the click is dispatched, so a latency errs on the long side.
JS_CLICK_SETUP = f"""(xy) => [({JS_CANVAS_XY})(xy), window.__bftImageChanges.length, performance.now()]"""


def wait_for_app(page, timeout=120000):
    """Wait until the page's heatmap exists and the first solve, which runs on load, has reached the traces."""
    page.wait_for_function(JS_MODEL, arg="bft-image-source", timeout=timeout)
    page.wait_for_function(JS_TRACES_READY, timeout=timeout)


def wait_until(fn, timeout=60.0, step=0.1):
    """Poll ``fn()`` every ``step`` seconds until it returns something true (returned), or fail after
    ``timeout`` seconds."""
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(step)
    raise AssertionError("condition not met in time")


def canvas_xy(page, x, y):
    return page.evaluate(JS_CANVAS_XY, [x, y])


def image_sum(page):
    return page.evaluate(JS_IMAGE_SUM)


def column(page, source, col):
    return page.evaluate(JS_COLUMN, [source, col])


def rss_mb(pid: int) -> float:
    """Resident memory of a process, MB (VmRSS of /proc)."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


#: The most expensive problem a link can ask of the server within the budget of bftcore.foundations.limits: field P on
#: the largest grid (128 x 128 = 16 384 nodes) by massive relaxation, as many iterations as nodes x iterations allows.
WORST_LINK = ("?nx=128&ny=128&model=density%2C+prior+on+P&method=massive&solver_mass2=1&max_iter=61&min_iter=61"
              "&tol=0&grid_size=as+loaded+%28custom%29")
#: Field P at the node limit by Newton: a new sparse factorisation of the KKT matrix every iteration.
NEWTON_P_LINK = WORST_LINK.replace("method=massive&solver_mass2=1", "method=newton")
#: The node limit with field L (the field of the issue's three 1024 x 1024 tabs) and the widest prior, l6.
NODE_LIMIT_LINK = ("?nx=128&ny=128&order=l6&order_coef=0.1&max_iter=61&min_iter=61&tol=0"
                   "&grid_size=as+loaded+%28custom%29")
#: The links of the hostile-load scenario, by name.
HOSTILE_LINKS = {"field P, massive": WORST_LINK, "field P, newton": NEWTON_P_LINK, "field L, l6": NODE_LIMIT_LINK}


def released_sessions(url: str) -> int:
    """How many sessions the server of :func:`panel_server` at ``url`` has released (its log's
    :data:`app.runner.SESSION_RELEASED` lines)."""
    from app.runner import SESSION_RELEASED
    return Path(SERVER_LOGS[url]).read_text(errors="replace").count(SESSION_RELEASED)


def hostile_scenario(browser, url: str, clicks: int = 5, heavy_tabs: int = 3, settle_s: float = 8.0,
                     link: str = WORST_LINK, bound_s: float = 300.0) -> dict:
    """Three tabs of ``link`` (by default :data:`WORST_LINK`) on one server of :func:`panel_server` while a fourth
    session on the default problem clicks the canvas; then the four close.  Returns the server's RSS (MB) before,
    at its peak and after the sessions are released, the click-to-heatmap latencies (ms) of the fourth session,
    and how many of its clicks updated.
    Every step waits for its event (a heatmap change, traces with iterations, the server's log line that a session
    is released), never for a time window: ``bound_s`` only bounds a failure, so a loaded machine makes the
    scenario slower, not different.  The server must run with short ``--unused-session-lifetime`` /
    ``--check-unused-sessions`` for "after"."""
    pid = SERVER_PIDS[url]
    released = released_sessions(url)
    victim_ctx = browser.new_context(viewport=VIEWPORT)
    victim = victim_ctx.new_page()
    victim.goto(url)
    wait_for_app(victim)
    time.sleep(1.0)
    before = rss_mb(pid)
    peak = [before]
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_mb(pid))
            time.sleep(0.1)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        return _hostile_rounds(browser, url, victim, victim_ctx, clicks, heavy_tabs, settle_s, link, bound_s,
                               released, before, peak)
    finally:
        stop.set()
        watcher.join()


def _hostile_rounds(browser, url, victim, victim_ctx, clicks, heavy_tabs, settle_s, link, bound_s, released,
                    before, peak) -> dict:
    pid = SERVER_PIDS[url]
    heavy = []
    for _ in range(heavy_tabs):
        ctx = browser.new_context(viewport=VIEWPORT)
        pg = ctx.new_page()
        pg.goto(url + link, timeout=bound_s * 1000)
        pg.wait_for_function(JS_MODEL, arg="bft-image-source", timeout=bound_s * 1000)
        heavy.append((ctx, pg))
    victim.evaluate(JS_WATCH_IMAGE_EVENTS)
    latencies, updated = [], 0
    for k in range(clicks):
        x, y = 2.0 + k, 3.0 + 2 * k
        n = victim.evaluate("() => window.__bftImageChanges.length")
        sx, sy = canvas_xy(victim, x, y)
        t0 = victim.evaluate("() => performance.now()")
        victim.mouse.click(sx, sy)
        try:
            t1 = victim.evaluate(f"(n) => Promise.race([({JS_WAIT_IMAGE_CHANGE})(n), new Promise((_, no) => "
                                 f"setTimeout(() => no('no change'), {int(bound_s * 1000)}))])", n)
            latencies.append(t1 - t0)
            updated += 1
        except Exception:  # noqa: BLE001 - counted as not updated
            pass
        time.sleep(1.0)
    time.sleep(settle_s)  # let the heavy runs go on (or finish) before they are closed
    ran = 0
    for _ctx, pg in heavy:  # the heavy problem was accepted and really iterated: its traces show iterations
        try:
            pg.wait_for_function(JS_TRACES_READY, timeout=bound_s * 1000)
            ran += 1
        except Exception:  # noqa: BLE001 - counted, the caller asserts
            pass
    for ctx, _pg in heavy:
        ctx.close()
    victim_ctx.close()
    # the four sessions are destroyed (Bokeh's unused-session check) and their runs closed on the worker threads,
    # each behind the iteration it was computing: the server logs each one
    wait_until(lambda: released_sessions(url) >= released + heavy_tabs + 1, timeout=bound_s, step=0.5)
    after = rss_mb(pid)
    deadline = time.time() + 30  # what is left is the server thread's own clean-up (Bokeh drops the documents)
    while time.time() < deadline and after - before > 50:
        time.sleep(1.0)
        after = rss_mb(pid)
    return {"before": before, "peak": peak[0], "after": after, "latencies_ms": latencies, "updated": updated,
            "clicks": clicks, "ran": ran, "heavy_tabs": heavy_tabs}


def viewport(text: str) -> dict:
    """``WIDTHxHEIGHT`` (the --viewport option of the measurement scripts) as Playwright's viewport."""
    w, h = (int(v) for v in text.lower().split("x"))
    return {"width": w, "height": h}


class Barrier:
    """All of ``n`` asyncio tasks wait here until the last arrives (at most 900 s): the pages of a load test start
    measuring together."""

    def __init__(self, n):
        self.n, self.count, self.event = n, 0, asyncio.Event()

    async def wait(self):
        self.count += 1
        if self.count >= self.n:
            self.event.set()
        await asyncio.wait_for(self.event.wait(), 900)


def longest_link(chars: int) -> tuple[str, int]:
    """A share link's query (with its "?") of exactly ``chars`` characters, and its number of points: as many data
    points as fit, with twelve random decimals each (the worst case for compression, which Bokeh's session token
    applied to the query), the last coordinate padded with zeros to the exact length (a decimal's trailing zeros do
    not change it)."""
    rng = random.Random(25)
    points: list[list[float]] = []
    query = ""
    while True:
        point = [round(rng.uniform(1.5, 9.5), 12), round(rng.uniform(1.5, 14.5), 12)]
        trial = "?" + urlencode({"data": json.dumps(points + [point])})
        if len(trial) > chars - 40:
            break
        points.append(point)
        query = trial
    text = json.dumps(points)
    query = "?" + urlencode({"data": text[:-2] + "0" * (chars - len(query)) + "]]"})
    assert len(query) == chars and "." in text[-20:]
    return query, len(points)
