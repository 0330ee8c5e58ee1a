"""The classroom deployment (deploy/classroom.sh): two panel serve workers behind Debian's nginx, started and stopped
by the project's own script, used through nginx by real Chromium tabs."""
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright import sync_api

from app.harness import CHROMIUM, canvas_xy, image_sum, launch, wait_for_app

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "deploy" / "classroom.sh"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)

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
                response = page.goto(f"http://127.0.0.1:{port}/app")
                workers.add(response.headers["x-bft-worker"])
                wait_for_app(page, timeout=60000)
                pages.append(page)
            for page in pages:
                before = image_sum(page)[1]
                sx, sy = canvas_xy(page, 5.0, 8.0)
                page.mouse.click(sx, sy)
                deadline = time.monotonic() + 30
                while image_sum(page)[1] == pytest.approx(before, rel=1e-9):
                    assert time.monotonic() < deadline, "the click did not come back through nginx"
                    page.wait_for_timeout(100)
        finally:
            browser.close()


def test_stop_leaves_nothing_running(tmp_path):
    port = _free_base_port(1)
    out = _script("--workers", "1", "--port", str(port), "--address", "127.0.0.1", run_dir=tmp_path)
    assert out.returncode == 0, out.stderr
    pids = [int(f.read_text()) for f in tmp_path.glob("*.pid")]
    assert len(pids) == 2
    assert _script("--port", str(port), "--stop", run_dir=tmp_path).returncode == 0
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    assert _free(port) and _free(port + 1)


def test_bad_options_are_refused_with_a_message(tmp_path):
    for args, words in [(("--workers", "0"), "--workers"), (("--port", "80"), "--port"), (("--bogus",), "unknown")]:
        out = _script(*args, run_dir=tmp_path)
        assert out.returncode == 2 and words in out.stderr, out.stderr
