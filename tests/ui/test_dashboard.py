"""Real-browser tests of the dashboard: `panel serve app` + Debian chromium (see conftest.py)."""
import json
import re
import time

import pytest

from .helpers import canvas_xy, column, image_sum

pytestmark = pytest.mark.ui


def points_count(page) -> int:
    text = page.get_by_text(re.compile(r"^\d+ points$")).first.inner_text()
    return int(text.split()[0])


def shows(page, text: str) -> bool:
    """True when some element of the page (shadow DOM included) contains the text and is visible."""
    loc = page.get_by_text(text, exact=False)
    return loc.count() > 0 and loc.first.is_visible()


def wait_until(fn, timeout=15.0, interval=0.1):
    end = time.time() + timeout
    while time.time() < end:
        value = fn()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def test_page_loads_without_console_errors(page, server):
    assert page.locator("text=Bayesian field theory").first.is_visible()
    time.sleep(1.0)
    assert page.errors == []
    log = open(server[1]).read()
    assert "Traceback" not in log and "ERROR" not in log


def test_click_on_canvas_adds_a_point_and_changes_the_density(page):
    before_pts, before_img = points_count(page), image_sum(page)
    sx, sy = canvas_xy(page, 5.0, 8.0)
    page.mouse.click(sx, sy)
    wait_until(lambda: points_count(page) == before_pts + 1)
    wait_until(lambda: [5.0, 8.0] in [[x, y] for x, y in zip(column(page, "bft-points-source", "x"),
                                                                column(page, "bft-points-source", "y"))])
    wait_until(lambda: image_sum(page)[1] != pytest.approx(before_img[1], rel=1e-9))
    assert image_sum(page)[0] == pytest.approx(before_img[0], rel=1e-3)  # still normalised per column
    assert page.errors == []


def test_slider_change_changes_the_traces(page):
    energy_before = column(page, "bft-traces-source", "energy")
    handle = page.locator(".noUi-handle").first  # λ, the first slider of the "Model and prior" section
    handle.focus()
    for _ in range(5):
        page.keyboard.press("ArrowRight")
    wait_until(lambda: (column(page, "bft-traces-source", "energy") or [None])[-1] != energy_before[-1]
               and len(column(page, "bft-traces-source", "energy")) > 1)
    assert page.errors == []


def test_preset_loads(page):
    page.locator("select:has(option[value='fig21'])").select_option("fig21")
    wait_until(lambda: points_count(page) == 50)
    wait_until(lambda: shows(page, "50 data from the true density"))
    wait_until(lambda: shows(page, "Loaded preset 'fig21'"))
    assert "fig21" in page.url
    assert page.errors == []


def test_bad_upload_is_refused(page):
    before = points_count(page), column(page, "bft-points-source", "x")
    page.locator("input[type=file]").set_input_files(
        files=[{"name": "bad.json", "mimeType": "application/json",
                "buffer": json.dumps({"model": "density", "prior": {"lambda": -1}}).encode()}])
    wait_until(lambda: shows(page, "Refused the configuration"))
    assert shows(page, "prior.lambda")
    assert (points_count(page), column(page, "bft-points-source", "x")) == before
    assert page.errors == []


def test_url_round_trips_the_state(page, browser):
    # Known limitation: a change made from a Select reaches the address bar with the next event, so the
    # model is changed first and the canvas click (which updates the URL at once) comes last.
    page.locator("select:has(option[value='regression'])").select_option("density, prior on P")
    time.sleep(1.0)
    sx, sy = canvas_xy(page, 8.0, 4.0)
    page.mouse.click(sx, sy)
    wait_until(lambda: points_count(page) == 3)
    wait_until(lambda: "8.0" in page.url)
    if "prior+on+P" not in page.url:  # the Select change is still pending: one more event flushes it
        page.locator("select:has(option[value='regression'])").focus()
        page.keyboard.press("Tab")
    wait_until(lambda: "prior+on+P" in page.url)
    url = page.url
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    other = ctx.new_page()
    other.goto(url)
    from .helpers import wait_for_app
    wait_for_app(other)
    wait_until(lambda: points_count(other) == 3)
    pts = lambda pg: sorted(zip(column(pg, "bft-points-source", "x"), column(pg, "bft-points-source", "y")))  # noqa: E731
    wait_until(lambda: pts(other) == pts(page))
    assert other.locator("select:has(option[value='regression'])").input_value() == "density, prior on P"
    ctx.close()
