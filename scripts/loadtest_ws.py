"""Load test without browsers: N simulated students, each a real Bokeh websocket session through the classroom's
nginx, clicking the canvas on a fixed schedule; measures the click-to-heatmap latency, the server's CPU and this
client's own CPU.

    python scripts/loadtest_ws.py --url http://127.0.0.1:8080/app [--sessions 30] [--duration 60] [--interval 3]
    python scripts/loadtest_ws.py --workers 2 [--port P] ...        # start deploy/classroom.sh, measure, stop it
    python scripts/loadtest_ws.py --series 1,2,1,2 ... --json out.json   # interleaved runs, a fresh deployment each

Why: scripts/loadtest.py drives 30 real Chromium pages, and on the project's 2-core machine those pages take most
of the CPU, so 1 and 2 workers could not be compared (docs/performance.md).  Here all the students are coroutines
of ONE Python process (asyncio, tornado's websocket client, Bokeh's own protocol classes), which costs a few per
cent of a core, and the server has the machine.

What a student does, as the browser does it (messages checked against a Chromium page's websocket traffic):
  1. GET the app page through nginx; keep the ``bftworker`` cookie nginx sets (the sticky routing) and the
     ``X-BFT-Worker`` header (which worker answered); read the session token from the page.
  2. Open the websocket ``<app>/ws`` with that cookie, an Origin header and the subprotocols ``["bokeh", token]``;
     wait for the server's ACK, send PULL-DOC-REQ, receive PULL-DOC-REPLY (the whole document: ~280 KB of JSON).
     The ids of the canvas figure (``bft-canvas``), the heatmap's source (``bft-image-source``), the data points'
     source (``bft-points-source``), the frame-acknowledgement source (``bft-frame-ack``) and Panel's Location
     are read from it.
  3. Send what the page sends once loaded: Panel's BrowserInfo values and the ``document_ready`` event (this runs
     the app's onload: the first solve and the link), each a PATCH-DOC as BokehJS sends it.  Not sent: the
     layout's measured sizes (``inner_width``...) and the auto-ranges' first values, which the page also reports
     at load; no click depends on them.
  4. While connected, answer what the page's JavaScript answers: every frame's serial (the image source's
     ``tags``) is echoed into ``bft-frame-ack.tags`` (the canvas's CustomJS; the runner throttles frames to a page
     that is behind), and every ``search`` the server sets on the Location is echoed as its ``href`` (Panel's
     Location view after ``history.pushState``).
  5. A click is the PATCH-DOC BokehJS sends for a tap on the figure: one ``MessageSent`` event, ``msg_type``
     ``bokeh_event``, whose data is the ``tap`` event (model = the figure, sx, sy, x, y, modifiers).  On the server
     that is Bokeh's event dispatch to ``DataCanvas._on_tap`` -> ``BFTSession.click``: the point is added, the
     run restarts and its first frame is computed and sent in the same message as the point (``answer_now``).

Latency: from just before the tap's message is written to the arrival (last fragment received and assembled) of
the message that updates the heatmap for that click: the first message changing the image source's data at or
after the message that carries the clicked point (``ColumnsStreamed`` on the points source, matched to the click
by its coordinates).  ``first_change`` is the definition of scripts/loadtest.py as well: the first heatmap change
of any kind after the click (a frame of the previous run's animation can come first, so it is never longer).
A click without an answer within ``--timeout`` (15 s) counts as unanswered.

Schedule: student k (random.Random(seed * 100003 + k)) clicks first at a uniform offset within one interval after
the common start, then every interval ±20 %, at node coordinates x in 1..10, y in 1..15 drawn from the same
generator; a click goes when it is due whatever the answers (they are told apart by their points), so every run
with the same seed, sessions, interval and duration is offered the same clicks at the same times.

Reported per run: clicks sent, answered, median / p90 / p99 / max latency, the workers' CPU (and nginx's), this
process's CPU, the event loop's lag (a 50 ms ticker: how late this client itself was), and which worker each
session landed on (the page's and the websocket's ``X-BFT-Worker``), with each worker's clicks and median.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import resource
import statistics
import sys
import time
import urllib.parse
from pathlib import Path

from bokeh.client.websocket import WebSocketClientConnectionWrapper
from bokeh.protocol import Protocol
from bokeh.protocol.messages.patch_doc import patch_doc
from bokeh.protocol.messages.pull_doc_req import pull_doc_req
from bokeh.protocol.receiver import Receiver
from bokeh.util.token import get_session_id
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import websocket_connect

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the browser load test's deployment helpers
import loadtest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
#: Sessions opened at a time (building a session's page is the server's largest single piece of work).
OPEN_AT_ONCE = 5
#: What Chromium's page reported through Panel's BrowserInfo (webdriver: a student's browser, not Playwright's).
BROWSER_INFO = [("dark_mode", False), ("device_pixel_ratio", 1), ("language", "en-US"), ("webdriver", False),
                ("timezone", "UTC"), ("timezone_offset", 0), ("webgl", True)]
#: Event kinds that change a ColumnDataSource's data.
DATA_KINDS = ("ColumnDataChanged", "ColumnsStreamed", "ColumnsPatched")
NAMES = {"figure": "bft-canvas", "image": "bft-image-source", "points": "bft-points-source", "ack": "bft-frame-ack"}


# --- messages -------------------------------------------------------------------------------------------------
def _walk_objects(tree):
    """Every model representation ``{"type": "object", "name": ..., "id": ..., "attributes": ...}`` in a document's
    JSON (later references to a model are ``{"id": ...}`` only)."""
    stack = [tree]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            if o.get("type") == "object" and "id" in o:
                yield o
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)


def model_ids(doc_json: dict) -> dict:
    """The ids the client needs, from a PULL-DOC-REPLY's ``doc``; also whether the figure subscribes to taps."""
    ids, subscribed = {}, []
    wanted = {v: k for k, v in NAMES.items()}
    for o in _walk_objects(doc_json):
        attrs = o.get("attributes") or {}
        key = wanted.get(attrs.get("name"))
        if key and key not in ids:
            ids[key] = o["id"]
            if key == "figure":
                ev = attrs.get("subscribed_events")
                subscribed = list(ev.get("entries", [])) if isinstance(ev, dict) else list(ev or [])
        if o.get("name", "").endswith("location.Location") and "location" not in ids:
            ids["location"] = o["id"]
            ids["location_href"] = attrs.get("href")
        if o.get("name", "").endswith("browser.BrowserInfo") and "browser_info" not in ids:
            ids["browser_info"] = o["id"]
    missing = [k for k in NAMES if k not in ids]
    if missing:
        raise RuntimeError(f"the document has no model named {', '.join(NAMES[k] for k in missing)}")
    ids["subscribed_events"] = subscribed
    return ids


def model_changed(model_id: str, attr: str, new) -> dict:
    return {"kind": "ModelChanged", "model": {"id": model_id}, "attr": attr, "new": new}


def bokeh_event(name: str, entries: list) -> dict:
    """A BokehJS UI event as the page sends it: a ``MessageSent`` of ``msg_type`` ``bokeh_event``."""
    return {"kind": "MessageSent", "msg_type": "bokeh_event",
            "msg_data": {"type": "event", "name": name, "values": {"type": "map", "entries": entries}}}


def tap_event(figure_id: str, x: float, y: float, sx: float, sy: float) -> dict:
    """The tap BokehJS sends for a click on the figure (bokeh.events.Tap: model, sx, sy, x, y, modifiers)."""
    mods = {"type": "map", "entries": [["shift", False], ["ctrl", False], ["alt", False]]}
    return bokeh_event("tap", [["model", {"id": figure_id}], ["sx", sx], ["sy", sy], ["x", x], ["y", y],
                               ["modifiers", mods]])


def _map(obj) -> dict:
    """A serialised ``{"type": "map", "entries": [[k, v], ...]}`` (or a plain dict) as a dict."""
    if isinstance(obj, dict) and obj.get("type") == "map":
        return {k: v for k, v in obj.get("entries", [])}
    return obj if isinstance(obj, dict) else {}


def percentile(values, q: float) -> float:
    """The q-quantile (0..1) by linear interpolation; nan for no values."""
    v = sorted(values)
    if not v:
        return float("nan")
    pos = q * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


# --- one student ----------------------------------------------------------------------------------------------
class Click:
    __slots__ = ("k", "x", "y", "t0", "first", "answer", "seen")

    def __init__(self, k, x, y, t0):
        self.k, self.x, self.y, self.t0 = k, x, y, t0
        self.first = self.answer = None  # arrival times (perf_counter)
        self.seen = False                # the message carrying this click's point has arrived


class Student:
    """One simulated student: a page GET and a Bokeh websocket session, the page's automatic answers, clicks."""

    def __init__(self, k: int, url: str, seed: int, timeout: float, trace: bool = False, origin: str | None = None):
        self.k, self.url, self.timeout, self.origin = k, url, timeout, origin
        self.rng = random.Random(seed * 100003 + k)
        self.protocol = Protocol()
        self.receiver = Receiver(self.protocol)
        self.clicks: list[Click] = []
        self.pending: list[Click] = []
        self.image_changes: list[float] = []
        self.changed = asyncio.Event()
        self.worker = self.ws_worker = self.cookie = self.session_id = None
        self.ws = self.conn = self.reader = None
        self.ids: dict = {}
        self.errors: list[str] = []
        self.replaced_points = 0  # points source replaced whole instead of streamed (not expected for a click)
        self.acks = self.hrefs = self.messages_in = self.bytes_in = 0
        self.trace = [] if trace else None
        self.closed = False

    # the connection ---------------------------------------------------------------------------------------
    async def open(self, http: AsyncHTTPClient, ready_timeout: float = 120.0):
        resp = await http.fetch(HTTPRequest(self.url, headers={"Accept": "text/html"}, request_timeout=180,
                                            follow_redirects=False))
        self.worker = resp.headers.get("X-BFT-Worker")
        for c in resp.headers.get_list("Set-Cookie"):
            if c.startswith("bftworker="):
                self.cookie = c.split(";")[0]
        page = resp.body.decode("utf-8", "replace")
        m = re.search(r'"token"\s*:\s*"([^"]+)"', page)
        if not m:
            raise RuntimeError("no session token in the page")
        token = m.group(1)
        self.session_id = get_session_id(token)
        u = urllib.parse.urlsplit(self.url)
        self.origin = self.origin or f"{u.scheme}://{u.netloc}"
        ws_url = urllib.parse.urlunsplit(("wss" if u.scheme == "https" else "ws", u.netloc,
                                          u.path.rstrip("/") + "/ws", "", ""))
        headers = {"Origin": self.origin}
        if self.cookie:
            headers["Cookie"] = self.cookie
        self.ws = await websocket_connect(HTTPRequest(ws_url, headers=headers, request_timeout=180),
                                          subprotocols=["bokeh", token], max_message_size=20 * 1024 * 1024)
        # TCP_NODELAY, as a browser's socket has it: with Nagle's algorithm on (tornado's websocket client leaves
        # it on) the tap's three small frames waited for the delayed ACK of the first, and every click took ~40 ms
        # longer (59 against 17 ms with 2 students on an idle worker)
        self.ws.protocol.set_nodelay(True)
        self.ws_worker = self.ws.headers.get("X-BFT-Worker")
        self.conn = WebSocketClientConnectionWrapper(self.ws)
        ack = await self._next_message()
        if ack is None or ack.msgtype != "ACK":
            raise RuntimeError(f"expected ACK, got {ack!r}")
        req = pull_doc_req.create()
        await req.send(self.conn)
        while True:
            reply = await self._next_message()
            if reply is None:
                raise RuntimeError("the connection closed before the document arrived")
            if reply.msgtype == "PULL-DOC-REPLY":
                break
        self.ids = model_ids(reply.content["doc"])
        self.href = self.ids.get("location_href") or self.url
        self.reader = asyncio.create_task(self._read_loop())
        # what the page reports once loaded, each in a message of its own as BokehJS sends them
        if "browser_info" in self.ids:
            for attr, value in BROWSER_INFO:
                await self._send([model_changed(self.ids["browser_info"], attr, value)])
        n = len(self.image_changes)
        await self._send([bokeh_event("document_ready", [])])
        # loaded: the first solve (run by document_ready's onload) has reached the heatmap
        await self.wait_changes(n + 1, ready_timeout)

    async def _next_message(self):
        while True:
            fragment = await self.ws.read_message()
            if fragment is None:
                return None
            self.bytes_in += len(fragment)
            msg = await self.receiver.consume(fragment)
            if msg is not None:
                self.messages_in += 1
                return msg

    async def _send(self, events: list) -> None:
        msg = patch_doc(patch_doc.create_header(), {}, {"events": events})
        await msg.send(self.conn)
        if self.trace is not None:
            self.trace.append(("sent", time.perf_counter(), "PATCH-DOC", _summary(events, self.ids)))

    async def wait_changes(self, n: int, timeout: float) -> None:
        """Until the heatmap has changed at least ``n`` times (raises on timeout or a closed connection)."""
        end = time.perf_counter() + timeout
        while len(self.image_changes) < n:
            if self.closed:
                raise RuntimeError("the connection closed")
            left = end - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no heatmap within {timeout:g} s")
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))
            except asyncio.TimeoutError:
                pass

    async def _read_loop(self):
        try:
            while True:
                msg = await self._next_message()
                if msg is None:
                    break
                now = time.perf_counter()
                if self.trace is not None:
                    self.trace.append(("recv", now, msg.msgtype,
                                       _summary(msg.content.get("events", []), self.ids)
                                       if msg.msgtype == "PATCH-DOC" else ""))
                if msg.msgtype == "PATCH-DOC":
                    await self._on_patch(msg.content.get("events", []), now)
                elif msg.msgtype == "ERROR":
                    self.errors.append(f"ERROR message: {msg.content.get('text', '')[:200]}")
        except Exception as e:  # noqa: BLE001 - reported
            if not self.closed:
                self.errors.append(f"reader: {type(e).__name__}: {e}")
        finally:
            self.closed = True
            self.changed.set()

    async def _on_patch(self, events: list, now: float):
        ids = self.ids
        image = False
        tags = search = None
        for ev in events:
            mid = (ev.get("model") or {}).get("id")
            kind = ev.get("kind")
            if mid == ids["image"]:
                if kind == "ModelChanged" and ev.get("attr") == "tags":
                    tags = ev.get("new")
                elif kind in DATA_KINDS or (kind == "ModelChanged" and ev.get("attr") == "data"):
                    image = True
            elif mid == ids["points"]:
                if kind == "ColumnsStreamed":
                    data = _map(ev.get("data"))
                    for px, py in zip(data.get("x") or [], data.get("y") or []):
                        self._point_arrived(px, py)
                elif kind in DATA_KINDS or (kind == "ModelChanged" and ev.get("attr") == "data"):
                    self.replaced_points += 1
                    self._point_arrived(None, None)
            elif mid == ids.get("location") and kind == "ModelChanged" and ev.get("attr") == "search":
                search = ev.get("new")
        if image:
            self.image_changes.append(now)
            still = []
            for c in self.pending:
                if c.first is None:
                    c.first = now
                if c.seen:
                    c.answer = now
                else:
                    still.append(c)
            self.pending = still
            self.changed.set()
        # the page's JavaScript answers: the frame's serial (CustomJS on the image source's tags) and the link
        if tags is not None:
            self.acks += 1
            await self._send([model_changed(ids["ack"], "tags", tags)])
        if search is not None and "location" in ids:
            u = urllib.parse.urlsplit(self.href)
            self.href = urllib.parse.urlunsplit((u.scheme, u.netloc, u.path, search.lstrip("?"), ""))
            self.hrefs += 1
            await self._send([model_changed(ids["location"], "href", self.href)])

    def _point_arrived(self, px, py):
        """The click whose point this is (the oldest unmatched one at these coordinates; any, if unknown)."""
        for c in self.pending:
            if not c.seen and (px is None or (abs(c.x - px) < 1e-6 and abs(c.y - py) < 1e-6)):
                c.seen = True
                return

    # the clicks --------------------------------------------------------------------------------------------
    async def click(self, x: int, y: int) -> Click:
        c = Click(len(self.clicks), float(x), float(y), 0.0)
        # pixel position of the node in a ~390 x 380 px frame (Bokeh's handler does not use it; sent as the page does)
        sx, sy = 20.0 + (x - 0.5) * 39.0, 380.0 - (y - 0.5) * 25.3
        self.clicks.append(c)
        self.pending.append(c)
        c.t0 = time.perf_counter()  # taken before the message is written: errs on the long side, as loadtest.py
        await self._send([tap_event(self.ids["figure"], c.x, c.y, sx, sy)])
        return c

    async def run_schedule(self, start: float, duration: float, interval: float):
        """Click at start + offset, then every interval ±20 %, whatever the answers; returns after the last click
        has been answered or timed out."""
        end = start + duration
        due = start + self.rng.uniform(0, interval)
        while due < end and not self.closed:
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            x, y = self.rng.randint(1, 10), self.rng.randint(1, 15)
            await self.click(x, y)
            due += interval * self.rng.uniform(0.8, 1.2)
        if self.clicks:  # wait for the last answers
            deadline = self.clicks[-1].t0 + self.timeout
            while self.pending and not self.closed and time.perf_counter() < deadline:
                self.changed.clear()
                try:
                    await asyncio.wait_for(self.changed.wait(), max(0.01, deadline - time.perf_counter()))
                except asyncio.TimeoutError:
                    pass

    async def quiet(self, quiet_s: float = 1.5, limit_s: float = 30.0):
        """Until the heatmap has not changed for ``quiet_s`` (the last run's animation is over), at most
        ``limit_s``: closing during a run's frames leaves 'connection closed' noise in the server log."""
        end = time.perf_counter() + limit_s
        while not self.closed and time.perf_counter() < end:
            last = self.image_changes[-1] if self.image_changes else 0.0
            if time.perf_counter() - last >= quiet_s:
                return
            await asyncio.sleep(0.25)

    async def close(self):
        self.closed = True
        if self.ws is not None:
            self.ws.close(1000, "done")
        if self.reader is not None:
            try:
                await asyncio.wait_for(self.reader, 5)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001
                self.reader.cancel()


def _summary(events: list, ids: dict) -> list:
    """A readable form of a patch's events (for --trace): kind, model by role, attribute."""
    roles = {v: k for k, v in ids.items() if isinstance(v, str)}
    out = []
    for ev in events:
        if ev.get("kind") == "MessageSent":
            out.append(f"MessageSent {ev.get('msg_data', {}).get('name')}")
            continue
        mid = (ev.get("model") or {}).get("id")
        out.append(f"{ev.get('kind')} {roles.get(mid, mid)}.{ev.get('attr')}")
    return out


# --- CPU ------------------------------------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def deployment_pids(run_dir: Path) -> tuple[list[int], list[int]]:
    """The workers' and nginx's (master and its workers) process ids of a classroom run directory."""
    workers = []
    for f in sorted(run_dir.glob("worker-*.pid"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 0)):
        try:
            pid = int(f.read_text())
        except (OSError, ValueError):
            continue
        if Path(f"/proc/{pid}").exists():
            workers.append(pid)
    nginx = []
    try:
        master = int((run_dir / "nginx.pid").read_text())
        if Path(f"/proc/{master}").exists():
            nginx = [master] + loadtest.children([master])
    except (OSError, ValueError):
        pass
    return workers, nginx


# --- the deployment -------------------------------------------------------------------------------------------
class Classroom(loadtest.Classroom):
    """deploy/classroom.sh with ``workers`` workers (127.0.0.1, a run directory of its own), stopped on exit: the
    browser load test's (``scripts/loadtest.py``), with this script's run-directory prefix."""

    def __init__(self, workers: int, port: int | None = None):
        super().__init__(workers, port, prefix="bft-loadtest-ws-")


# --- a run ----------------------------------------------------------------------------------------------------
async def _lag_monitor(stop: asyncio.Event, out: list, period: float = 0.05):
    """How late a 50 ms ticker of this process's event loop wakes up (the client's own queueing)."""
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(period)
        out.append(time.perf_counter() - t - period)


async def run_load(url: str, sessions: int, duration: float, interval: float, seed: int, timeout: float = 15.0,
                   settle: float = 3.0, run_dir: Path | None = None, trace: bool = False,
                   origin: str | None = None) -> dict:
    """One run against ``url``; the server's CPU is that of the classroom in ``run_dir`` (if given)."""
    AsyncHTTPClient.configure(None, max_clients=max(10, OPEN_AT_ONCE * 2))
    http = AsyncHTTPClient()
    students = [Student(k, url, seed, timeout, trace=trace and k == 0, origin=origin) for k in range(sessions)]
    gate = asyncio.Semaphore(OPEN_AT_ONCE)
    load_failures = []

    async def open_one(s):
        async with gate:
            try:
                await s.open(http)
                return True
            except Exception as e:  # noqa: BLE001 - reported
                load_failures.append(f"session {s.k}: did not load ({type(e).__name__}: "
                                     f"{' '.join(str(e).split())[:200]})")
                await s.close()
                return False

    t_open = time.perf_counter()
    ok = await asyncio.gather(*(open_one(s) for s in students))
    open_s = time.perf_counter() - t_open
    live = [s for s, good in zip(students, ok) if good]
    await asyncio.sleep(settle)  # the first runs of the last sessions opened play out

    workers, nginx = deployment_pids(run_dir) if run_dir else ([], [])
    stop, lags = asyncio.Event(), []
    lag_task = asyncio.create_task(_lag_monitor(stop, lags))
    w0 = {p: cpu_seconds(p) for p in workers}
    n0 = sum(cpu_seconds(p) for p in nginx)
    c0, t0 = self_cpu(), time.perf_counter()
    await asyncio.gather(*(s.run_schedule(t0, duration, interval) for s in live))
    wall = time.perf_counter() - t0
    client_cpu = self_cpu() - c0
    w1 = {p: cpu_seconds(p) for p in workers if Path(f"/proc/{p}").exists()}
    worker_cpu = {p: w1[p] - w0[p] for p in w1}
    nginx_cpu = sum(cpu_seconds(p) for p in nginx if Path(f"/proc/{p}").exists()) - n0 if nginx else float("nan")
    stop.set()
    await lag_task
    await asyncio.gather(*(s.quiet() for s in live))
    for s in live:
        await s.close()
    http.close()

    # the figures
    rows, per_worker = [], {}
    for s in live:
        for c in s.clicks:
            ans = (c.answer - c.t0) * 1000 if c.answer is not None else None
            first = (c.first - c.t0) * 1000 if c.first is not None else None
            if ans is not None and ans > timeout * 1000:
                ans = None
            rows.append({"session": s.k, "worker": s.worker, "x": c.x, "y": c.y, "t_ms": (c.t0 - t0) * 1000,
                         "latency_ms": ans, "first_change_ms": first})
    lat = [r["latency_ms"] for r in rows if r["latency_ms"] is not None]
    first = [r["first_change_ms"] for r in rows if r["first_change_ms"] is not None]
    for s in students:
        w = per_worker.setdefault(s.worker or "?", {"sessions": 0, "clicks": 0, "lat": []})
        w["sessions"] += 1
    for r in rows:
        w = per_worker[r["worker"] or "?"]
        w["clicks"] += 1
        if r["latency_ms"] is not None:
            w["lat"].append(r["latency_ms"])
    return {
        "url": url, "sessions": sessions, "loaded": len(live), "duration": duration, "interval": interval,
        "seed": seed, "wall": wall, "open_s": open_s,
        "clicks": len(rows), "answered": len(lat), "unanswered": len(rows) - len(lat),
        "median_ms": statistics.median(lat) if lat else float("nan"),
        "p90_ms": percentile(lat, 0.90), "p99_ms": percentile(lat, 0.99), "max_ms": max(lat) if lat else float("nan"),
        "first_change_median_ms": statistics.median(first) if first else float("nan"),
        "first_change_p90_ms": percentile(first, 0.90),
        "server_cpu_cores": sum(worker_cpu.values()) / wall if worker_cpu else float("nan"),
        "worker_cpu_cores": [v / wall for v in worker_cpu.values()],
        "nginx_cpu_cores": nginx_cpu / wall,
        "client_cpu_cores": client_cpu / wall,
        "loop_lag_p99_ms": percentile(lags, 0.99) * 1000, "loop_lag_max_ms": max(lags) * 1000 if lags else float("nan"),
        "sessions_by_worker": {w: v["sessions"] for w, v in per_worker.items()},
        "by_worker": {w: {"sessions": v["sessions"], "clicks": v["clicks"], "answered": len(v["lat"]),
                          "median_ms": statistics.median(v["lat"]) if v["lat"] else None}
                      for w, v in sorted(per_worker.items())},
        "ws_same_worker": all(s.ws_worker == s.worker for s in live),
        "session_workers": [s.worker for s in students],
        "frame_acks": sum(s.acks for s in live), "href_echoes": sum(s.hrefs for s in live),
        "points_replaced": sum(s.replaced_points for s in live),
        "messages_in": sum(s.messages_in for s in live), "bytes_in": sum(s.bytes_in for s in live),
        "tap_subscribed": all("tap" in s.ids.get("subscribed_events", []) for s in live),
        "errors": [f"session {s.k}: {e}" for s in students for e in s.errors][:50],
        "load_failures": load_failures,
        "trace": [(d, round((t - t0) * 1000, 2), m, ev) for d, t, m, ev in students[0].trace]
        if trace and students and students[0].trace is not None else None,
        "clicks_detail": rows,
    }


def scan_logs(paths) -> list[str]:
    lines = []
    for p in paths:
        try:
            text = Path(p).read_text(errors="replace")
        except OSError:
            continue
        lines += [f"{Path(p).name}: {line}" for line in text.splitlines()
                  if re.search(r"ERROR|Traceback|Exception", line)]
    return lines


def one_run(args, workers: int | None) -> dict:
    if workers:
        with Classroom(workers, args.port) as room:
            res = asyncio.run(run_load(room.url, args.sessions, args.duration, args.interval, args.seed,
                                       args.timeout, args.settle, room.run_dir, args.trace is not None))
            logs = room.logs
            res["log_errors"] = scan_logs(logs)
        res["workers"] = workers
    else:
        port = urllib.parse.urlsplit(args.url).port or 80
        run_dir = Path(args.run_dir or f"/tmp/bftcore-classroom-{port}")
        res = asyncio.run(run_load(args.url, args.sessions, args.duration, args.interval, args.seed, args.timeout,
                                   args.settle, run_dir if run_dir.exists() else None, args.trace is not None))
        res["workers"] = len(deployment_pids(run_dir)[0]) if run_dir.exists() else None
        res["log_errors"] = scan_logs(sorted((run_dir / "logs").glob("worker-*.log"))) if run_dir.exists() else []
    return res


HEAD = (f"{'workers':>7} {'clicks':>6} {'answered':>8} {'median':>7} {'p90':>7} {'p99':>7} {'max':>7} "
        f"{'1st chg':>7} {'server':>7} {'nginx':>6} {'client':>6} {'lag99':>6}  sessions per worker")


def line(r: dict) -> str:
    spread = " ".join(f"{w.rsplit(':', 1)[-1]}:{n}" for w, n in sorted(r["sessions_by_worker"].items()))
    return (f"{r['workers'] or '?':>7} {r['clicks']:>6} {r['answered']:>8} {r['median_ms']:>7.1f} {r['p90_ms']:>7.1f} "
            f"{r['p99_ms']:>7.1f} {r['max_ms']:>7.1f} {r['first_change_median_ms']:>7.1f} "
            f"{r['server_cpu_cores']:>7.2f} {r['nginx_cpu_cores']:>6.2f} {r['client_cpu_cores']:>6.2f} "
            f"{r['loop_lag_p99_ms']:>6.1f}  {spread}")


def report(r: dict) -> None:
    print(f"{r['url']}  sessions={r['sessions']} (loaded {r['loaded']}, in {r['open_s']:.0f} s)  "
          f"duration={r['duration']:.0f}s  interval={r['interval']:.1f}s ±20%  seed={r['seed']}  wall={r['wall']:.0f}s")
    print("latencies in ms (click -> the heatmap update answering it; '1st chg': the first heatmap change after "
          "the click, scripts/loadtest.py's definition); CPU in cores (CPU seconds per second; the machine has "
          f"{os.cpu_count()}); lag99: this client's event-loop lag, p99, ms")
    print(HEAD)
    print(line(r))
    for w, v in r["by_worker"].items():
        med = f"{v['median_ms']:.1f} ms" if v["median_ms"] is not None else "-"
        print(f"    worker {w}: {v['sessions']} sessions, {v['clicks']} clicks, {v['answered']} answered, median {med}")
    print(f"    websocket on the page's worker (sticky cookie): {'yes' if r['ws_same_worker'] else 'NO'};  frame acks "
          f"sent {r['frame_acks']}, link echoes {r['href_echoes']}; figure subscribes to tap: {r['tap_subscribed']}")
    for f in (r["load_failures"] + r["errors"])[:10]:
        print("   ", f)
    for e in r.get("log_errors", [])[:10]:
        print("    log:", e)


def summary(runs: list[dict]) -> None:
    print("\nsummary (medians of the runs' medians; pooled: all clicks of those runs together)")
    print(f"{'workers':>7} {'runs':>4} {'clicks':>6} {'answered':>8} {'median of medians':>17} "
          f"{'pooled median':>13} {'p90':>7} {'p99':>7} {'server':>6} {'client':>6}")
    for w in sorted({r["workers"] for r in runs}, key=lambda v: v or 0):
        rs = [r for r in runs if r["workers"] == w]
        lat = [c["latency_ms"] for r in rs for c in r["clicks_detail"] if c["latency_ms"] is not None]
        print(f"{w or '?':>7} {len(rs):>4} {sum(r['clicks'] for r in rs):>6} {sum(r['answered'] for r in rs):>8} "
              f"{statistics.median(r['median_ms'] for r in rs):>17.1f} "
              f"{statistics.median(lat) if lat else float('nan'):>13.1f} {percentile(lat, 0.9):>7.1f} "
              f"{percentile(lat, 0.99):>7.1f} {statistics.median(r['server_cpu_cores'] for r in rs):>6.2f} "
              f"{statistics.median(r['client_cpu_cores'] for r in rs):>6.2f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="the app through nginx, e.g. http://127.0.0.1:8080/app (a running classroom)")
    where.add_argument("--workers", type=int, metavar="N",
                       help="start deploy/classroom.sh with N workers for the run, stop it afterwards")
    where.add_argument("--series", metavar="N,N,...",
                       help="interleaved runs, a fresh classroom of that many workers each, e.g. 1,2,1,2,1,2")
    ap.add_argument("--port", type=int, help="with --workers/--series: nginx's port (default: a free block)")
    ap.add_argument("--run-dir", help="with --url: the classroom's run directory, for the workers' CPU and logs "
                                      "(default /tmp/bftcore-classroom-PORT, classroom.sh's own default)")
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--duration", type=float, default=60, help="seconds of clicking (default 60)")
    ap.add_argument("--interval", type=float, default=3.0, help="seconds between a student's clicks, ±20%% (3)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=15.0, help="a click unanswered after this many s fails (15)")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds between the last session loaded and the "
                                                              "first click (default 3)")
    ap.add_argument("--json", metavar="FILE", help="write the run(s), every click included, to FILE")
    ap.add_argument("--trace", metavar="FILE", help="write student 0's messages (kind, model role, attribute) to FILE")
    a = ap.parse_args(argv)
    runs = []
    plan = [int(v) for v in a.series.split(",")] if a.series else [a.workers]
    for i, w in enumerate(plan):
        if len(plan) > 1:
            print(f"\n=== run {i + 1}/{len(plan)}: {w} worker{'s' if w > 1 else ''} ===", flush=True)
        r = one_run(a, w)
        report(r)
        runs.append(r)
        if a.json:  # after every run: a series interrupted keeps what it measured
            Path(a.json).write_text(json.dumps(runs if a.series else runs[0]))
        if a.trace and r.get("trace") is not None:
            Path(a.trace).write_text("\n".join(f"{d:4} {t:10.2f} {m:14} {'; '.join(ev)}" for d, t, m, ev in r["trace"]))
    if len(runs) > 1:
        summary(runs)
    bad = any(r["unanswered"] or r["load_failures"] for r in runs)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
