"""The classroom deployment (deploy/classroom.sh): two panel serve workers behind Debian's nginx, started and stopped
by the project's own script, used through nginx by real Chromium tabs."""
import ast
import http.server
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from playwright import sync_api

from app.harness import CHROMIUM, canvas_xy, image_sum, launch, longest_link, wait_for_app, wait_until
from app.views.share import MAX_QUERY_CHARS

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "deploy" / "classroom.sh"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)

#: The page's words when it loses its server, read from app/main.py (a script that builds a session when imported).
DISCONNECT_NOTIFICATION = next(
    node.value.value for node in ast.parse((ROOT / "app" / "main.py").read_text()).body
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
    and getattr(node.targets[0], "id", "") == "DISCONNECT_NOTIFICATION")

pytestmark = [pytest.mark.ui,
              pytest.mark.skipif(NGINX is None, reason="nginx is not installed (.ci/run installs Debian's package)"),
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no chromium at {CHROMIUM}")]


def _free_base_port(workers: int) -> int:
    """A port with the next ``workers`` ports free too."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + workers < 65535 and all(_free(base + k) for k in range(workers + 1)):
            return base
    raise RuntimeError("no free block of ports")


def _free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _script(*args, run_dir):
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(["bash", str(SCRIPT), *args, "--run-dir", str(run_dir)], capture_output=True, text=True,
                          env=env, timeout=180)


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("classroom")
    port = _free_base_port(2)
    out = _script("--workers", "2", "--port", str(port), "--address", "127.0.0.1", run_dir=run_dir)
    assert out.returncode == 0, out.stderr + out.stdout
    assert f":{port}/app" in out.stdout
    yield port, run_dir
    stop = _script("--port", str(port), "--stop", run_dir=run_dir)
    assert stop.returncode == 0, stop.stderr


def _worker_of(url, cookie=None):
    req = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.headers["X-BFT-Worker"], r.headers.get("Set-Cookie", "")


def test_sessions_spread_over_the_workers_and_stick_to_theirs(classroom):
    port, _ = classroom
    url = f"http://127.0.0.1:{port}/liveness"
    first = [_worker_of(url) for _ in range(12)]
    assert {w for w, _ in first} == {f"127.0.0.1:{port + 1}", f"127.0.0.1:{port + 2}"}  # both workers take sessions
    for worker, cookie in first[:4]:
        value = cookie.split(";")[0]
        assert value.startswith("bftworker=")
        assert {_worker_of(url, value)[0] for _ in range(5)} == {worker}  # a browser keeps its worker


def test_status_and_a_second_start_on_the_same_port(classroom):
    port, run_dir = classroom
    status = _script("--workers", "2", "--port", str(port), "--status", run_dir=run_dir)
    assert status.returncode == 0 and status.stdout.count(": up") == 3, status.stdout
    again = _script("--workers", "2", "--port", str(port), run_dir=run_dir)
    assert again.returncode == 2 and "already runs" in again.stderr


def test_dashboard_works_through_nginx_in_several_tabs(classroom):
    """Pages and websockets through the proxy: each tab's click reaches its own session and redraws its density."""
    port, _ = classroom
    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            pages, workers = [], set()
            for _ in range(4):
                ctx = browser.new_context(viewport={"width": 1280, "height": 720})  # a student's own cookie jar
                page = ctx.new_page()
                response = page.goto(f"http://127.0.0.1:{port}/app", timeout=120000)
                workers.add(response.headers["x-bft-worker"])
                wait_for_app(page, timeout=120000)
                pages.append(page)
            for page in pages:
                before = image_sum(page)[1]
                sx, sy = canvas_xy(page, 5.0, 8.0)
                page.mouse.click(sx, sy)
                deadline = time.monotonic() + 120  # bounds a failure only: a loaded machine is slower
                while image_sum(page)[1] == pytest.approx(before, rel=1e-9):
                    assert time.monotonic() < deadline, "the click did not come back through nginx"
                    page.wait_for_timeout(100)
        finally:
            browser.close()


def _course_page(embedded_url: str):
    """A course page of another origin (its own port on localhost) that shows ``embedded_url`` in an iframe; yields
    its address."""
    html = (f'<!DOCTYPE html><title>course</title><iframe src="{embedded_url}" width="900" height="600">'
            '</iframe>').encode()

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(html)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://localhost:{server.server_address[1]}/"


def _embed(course_url: str, allowed: bool) -> None:
    """Open the course page: with ``allowed``, the dashboard in its iframe comes up (its first solve reaches the
    traces); without, Chromium refuses the frame and says that frame-ancestors forbids it."""
    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            if allowed:
                page.goto(course_url, timeout=120000)
                wait_for_app(page.locator("iframe").element_handle().content_frame(), timeout=120000)
            else:
                with page.expect_console_message(lambda m: "frame-ancestors" in m.text, timeout=120000):
                    page.goto(course_url, timeout=120000)
                frame = page.locator("iframe").element_handle().content_frame()
                assert frame.evaluate("() => typeof Bokeh") == "undefined"
        finally:
            browser.close()


def test_stop_leaves_nothing_running_and_a_course_page_named_by_frame_ancestors_embeds_it(tmp_path):
    port = _free_base_port(1)
    course, course_url = _course_page(f"http://127.0.0.1:{port}/app")
    try:
        origin = course_url.rstrip("/")
        out = _script("--workers", "1", "--port", str(port), "--address", "127.0.0.1",
                      "--frame-ancestors", f"'self' {origin}", run_dir=tmp_path)
        assert out.returncode == 0, out.stderr
        pids = {f.name: int(f.read_text()) for f in tmp_path.glob("*.pid")}
        assert set(pids) == {"nginx.pid", "worker-1.pid", "supervisor-1.pid"}
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/liveness", timeout=30) as r:
            assert r.headers["Content-Security-Policy"] == f"frame-ancestors 'self' {origin}"
        _embed(course_url, allowed=True)
    finally:
        course.shutdown()
        stop = _script("--port", str(port), "--stop", run_dir=tmp_path)
    assert stop.returncode == 0
    for pid in pids.values():  # the supervisor included: nothing is left to start the worker again
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    assert _free(port) and _free(port + 1)


def test_bad_options_are_refused_with_a_message(tmp_path):
    for args, words in [(("--workers", "0"), "--workers"), (("--port", "80"), "--port"), (("--bogus",), "unknown"),
                        (("--frame-ancestors", "https://a.org; script-src *"), "--frame-ancestors"),
                        (("--frame-ancestors", '"https://a.org"'), "--frame-ancestors"),
                        (("--frame-ancestors", ""), "--frame-ancestors")]:
        out = _script(*args, run_dir=tmp_path)
        assert out.returncode == 2 and words in out.stderr, out.stderr
    assert not (tmp_path / "nginx.conf").exists()


# --- links as long as the app reads, and longer ------------------------------------------------------------------
def _get(url: str, headers=None):
    """(status, headers, text) of a GET, an HTTP error's included; (None, {}, reason) without an answer."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode(errors="replace")
    except (urllib.error.URLError, ConnectionError) as e:
        return None, {}, str(e)


def _secured(headers, ancestors="'self'") -> bool:
    """Whether a response's headers (any case of their names) hold the deployment's security headers."""
    h = {k.lower(): v for k, v in dict(headers).items()}
    return (h.get("x-content-type-options") == "nosniff" and h.get("referrer-policy") == "no-referrer"
            and h.get("content-security-policy") == f"frame-ancestors {ancestors}")


def test_the_longest_link_the_app_reads_opens_through_nginx(classroom):
    """The page and its websocket: Bokeh's client repeats the query in the websocket's address; the session token
    carried it again, compressed, and with both the handshake passed a worker's 64 KiB and the dashboard never came
    up (the token no longer holds it: app/app_hooks.py)."""
    port, _ = classroom
    query, n = longest_link(MAX_QUERY_CHARS)
    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            requests = []
            page.on("request", lambda r: requests.append(r))
            response = page.goto(f"http://127.0.0.1:{port}/app{query}", timeout=120000)
            assert response.status == 200 and _secured(response.all_headers())
            wait_for_app(page, timeout=120000)
            # every point of the link was read (a link the app does not read would show its defaults instead)
            page.get_by_text(f"{n} points", exact=True).first.wait_for(timeout=30000)
            # Referrer-Policy: no-referrer: the page's scripts and styles do not carry the link again as a Referer
            assert len(requests) > 10 and not [r.url for r in requests if r.headers.get("referer")]
        finally:
            browser.close()


def test_a_longer_link_gets_a_page_saying_to_share_the_setup_as_a_file(classroom):
    """Past what the workers take (MAX_QUERY_CHARS plus a path, and tornado's 64 KiB, where a worker alone closes
    the connection without an answer): nginx's 414 with a page of the deployment, and the same page for a header
    line too long (nginx's "Request Header Or Cookie Too Large")."""
    port, _ = classroom
    query, _ = longest_link(MAX_QUERY_CHARS)
    pages = [_get(f"http://127.0.0.1:{port}/app{query}{'0' * extra}") for extra in (2048, 70 * 1024)]
    pages.append(_get(f"http://127.0.0.1:{port}/app", {"Referer": f"http://127.0.0.1:{port}/app{query}" + "0" * 9000}))
    for (status, headers, text), expected in zip(pages, (414, 414, 400)):
        assert status == expected and _secured(headers), (status, dict(headers))
        assert "This link is too long" in text and "Download configuration (JSON)" in text
        assert "Upload a configuration" in text and "nginx" not in text
    with sync_api.sync_playwright() as p:  # what a student sees
        browser = launch(p)
        try:
            page = browser.new_page()
            response = page.goto(f"http://127.0.0.1:{port}/app{query}{'0' * 70 * 1024}")
            assert response.status == 414
            assert page.locator("h1").inner_text() == "This link is too long"
        finally:
            browser.close()


def test_every_response_carries_the_security_headers(classroom):
    port, _ = classroom
    base = f"http://127.0.0.1:{port}"
    status, _, page = _get(base + "/app")
    scripts = re.findall(r'src="/?(static/[^"]+\.js)[^"]*"', page)
    assert status == 200 and scripts
    for path in ("/app", "/liveness", "/favicon.ico", "/" + scripts[0], "/no-such-page"):
        status, headers, _ = _get(base + path)
        assert _secured(headers), (path, status, dict(headers))


def test_a_course_page_of_another_origin_cannot_embed_it_by_default(classroom):
    port, _ = classroom
    course, course_url = _course_page(f"http://127.0.0.1:{port}/app")
    try:
        _embed(course_url, allowed=False)
    finally:
        course.shutdown()


def _cookie_of_worker(port: int, worker: int) -> str:
    """A sticky cookie (bftworker=...) that nginx hashes to ``worker``."""
    for _ in range(200):
        status, headers, _ = _get(f"http://127.0.0.1:{port}/liveness")
        if headers["X-BFT-Worker"] == f"127.0.0.1:{port + worker}":
            return headers["Set-Cookie"].split(";")[0]
    raise AssertionError(f"no cookie of worker {worker} in 200 first requests")


def test_a_killed_worker_comes_back_and_its_pages_say_the_connection_was_lost(classroom):
    """SIGKILL to worker 1 under an open page: the page says that its connection was lost and how to get the setup
    back (a reload), the supervisor starts the worker again, and it answers on its port and through nginx to the
    browsers that nginx sends to it."""
    port, run_dir = classroom
    cookie = _cookie_of_worker(port, 1)
    old = int((run_dir / "worker-1.pid").read_text())
    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            ctx = browser.new_context(viewport={"width": 1280, "height": 720})
            name, value = cookie.split("=", 1)
            ctx.add_cookies([{"name": name, "value": value, "url": f"http://127.0.0.1:{port}/"}])
            page = ctx.new_page()
            response = page.goto(f"http://127.0.0.1:{port}/app", timeout=120000)
            assert response.headers["x-bft-worker"] == f"127.0.0.1:{port + 1}"
            wait_for_app(page, timeout=120000)
            os.kill(old, signal.SIGKILL)
            page.locator(".notyf__message", has_text=DISCONNECT_NOTIFICATION).wait_for(timeout=60000)
        finally:
            browser.close()
    wait_until(lambda: (run_dir / "worker-1.pid").read_text().strip() not in ("", str(old)), timeout=60)
    wait_until(lambda: _get(f"http://127.0.0.1:{port + 1}/liveness")[0] == 200, timeout=120)
    wait_until(lambda: _get(f"http://127.0.0.1:{port}/liveness", {"Cookie": cookie})[1].get("X-BFT-Worker")
               == f"127.0.0.1:{port + 1}", timeout=60)
    log = (run_dir / "logs" / "supervisor.log").read_text()
    assert re.search(rf"worker 1 \(port {port + 1}\) was killed by signal 9 after \d+ s; starting it again", log), log
    status = _script("--workers", "2", "--port", str(port), "--status", run_dir=run_dir)
    assert status.returncode == 0, status.stdout
    assert f"worker 1 (port {port + 1}): up, restarted 1 time (logs/supervisor.log)" in status.stdout
    assert f"worker 2 (port {port + 2}): up\n" in status.stdout


def test_an_upload_at_the_apps_limit_reaches_the_app_through_nginx(classroom):
    """An upload travels as one websocket message (base64: 4/3 of the file); nginx passes it on whole.  The file's
    last bytes name a key that the app's refusal quotes, so the message proves that all of it arrived; the session
    then still answers a click."""
    from app.views.share import MAX_UPLOAD_BYTES
    port, _ = classroom
    tail = b'"end_of_the_file": 1}'
    document = b"{" + b" " * (MAX_UPLOAD_BYTES - 1 - len(tail)) + tail
    assert len(document) == MAX_UPLOAD_BYTES
    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.goto(f"http://127.0.0.1:{port}/app", timeout=120000)
            wait_for_app(page, timeout=120000)
            count = page.get_by_text(re.compile(r"^\d+ points$")).first
            before = int(count.inner_text().split()[0])
            page.locator("input[type=file]").set_input_files(
                files=[{"name": "large.json", "mimeType": "application/json", "buffer": document}])
            page.get_by_text(re.compile("end_of_the_file")).first.wait_for(timeout=120000)
            page.mouse.click(*canvas_xy(page, 5.0, 8.0))
            page.get_by_text(f"{before + 1} points", exact=True).first.wait_for(timeout=60000)
        finally:
            browser.close()
