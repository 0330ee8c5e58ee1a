"""Real-browser tests of the dashboard: `panel serve app` + Debian chromium (see conftest.py)."""
import json
import re

import pytest

from app.harness import canvas_xy, column, image_sum, wait_until

pytestmark = pytest.mark.ui


def points_count(page) -> int:
    text = page.get_by_text(re.compile(r"^\d+ points$")).first.inner_text()
    return int(text.split()[0])


def shows(page, text: str) -> bool:
    """True when some element of the page (shadow DOM included) contains the text and is visible."""
    loc = page.get_by_text(text, exact=False)
    return loc.count() > 0 and loc.first.is_visible()


def test_page_loads_without_console_errors(page, server):
    assert page.locator("text=Bayesian field theory").first.is_visible()
    # the first solve, which runs on load, to its end (an event; a fixed pause could end before a late error)
    wait_until(lambda: "finished" in page.get_by_text("iteration ").first.inner_text(), timeout=120)
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


def test_two_quick_clicks_add_two_points(page):
    """BokehJS reads a second click within 300 ms as a double tap; each click is still one point."""
    n = points_count(page)
    first, second = canvas_xy(page, 2.0, 4.0), canvas_xy(page, 8.0, 11.0)
    page.mouse.click(*first)
    page.mouse.click(*second)  # at once: well within BokehJS' 300 ms
    wait_until(lambda: points_count(page) == n + 2)
    xs, ys = column(page, "bft-points-source", "x"), column(page, "bft-points-source", "y")
    assert {(2.0, 4.0), (8.0, 11.0)} <= set(zip(xs, ys))


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
    wait_until(lambda: shows(page, "Fifty points sampled from the true density"))
    wait_until(lambda: shows(page, "Loaded preset 'fig21'"))
    wait_until(lambda: "preset=fig21" in address(page))
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


def open_card(page, title):
    """Open a collapsed section of the sidebar's accordion."""
    page.get_by_text(title, exact=True).first.click()


def new_page(browser, url):
    from app.harness import wait_for_app
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    other = ctx.new_page()
    other.goto(url)
    wait_for_app(other)
    return ctx, other


def points(page):
    return sorted(zip(column(page, "bft-points-source", "x"), column(page, "bft-points-source", "y")))


def address(page) -> str:
    """The address bar as the page has it.  (Playwright's page.url is only refreshed while a Playwright call
    is in flight, so polling it alone never sees a history.replaceState: that made the old test look as if the
    URL lagged one event behind.)"""
    return page.evaluate("() => window.location.href")


def test_url_round_trips_the_state_after_dropdown_changes(page, browser):
    """A change made from a Select reaches the address bar by itself (no later event needed), the address holds
    the whole state, and the link reproduces it; two dropdown changes in a row leave both in the URL."""
    page.locator("select:has(option[value='regression'])").select_option("density, prior on P")
    wait_until(lambda: "prior+on+P" in address(page))
    open_card(page, "Solver and grid")
    page.locator("select:has(option[value='19×29'])").select_option("19×29")
    wait_until(lambda: "nx=19" in address(page) and "ny=29" in address(page))
    url = address(page)
    assert "prior+on+P" in url and "lam=" in url and "data=" in url  # the whole state, not only what changed
    wait_until(lambda: image_sum(page)[2] == 19 * 29)
    ctx, other = new_page(browser, url)
    assert other.locator("select:has(option[value='regression'])").input_value() == "density, prior on P"
    wait_until(lambda: image_sum(other)[2] == 19 * 29)
    assert points(other) == points(page)
    ctx.close()
    assert page.errors == []


def test_url_round_trips_a_click(page, browser):
    sx, sy = canvas_xy(page, 8.0, 4.0)
    page.mouse.click(sx, sy)
    wait_until(lambda: points_count(page) == 3)
    wait_until(lambda: "8.0" in address(page))
    ctx, other = new_page(browser, address(page))
    wait_until(lambda: points(other) == points(page))
    ctx.close()


@pytest.mark.parametrize("x, y", [(1, 1), (10, 15), (1, 8), (10, 5)])
def test_clicks_on_edge_nodes_add_a_point_and_update_the_heatmap(page, x, y):
    n, before = points_count(page), image_sum(page)
    sx, sy = canvas_xy(page, x, y)
    page.mouse.click(sx, sy)
    wait_until(lambda: points_count(page) == n + 1)
    assert (float(x), float(y)) in points(page)
    wait_until(lambda: image_sum(page)[1] != pytest.approx(before[1], rel=1e-9))
    assert not shows(page, "Ignored the click")
    assert page.errors == []


@pytest.mark.parametrize("name, nx, n_data", [("fig7", 1, 1), ("two_trends", 101, 5)])
def test_regression_presets_load_on_their_own_grid(page, name, nx, n_data):
    page.locator("select:has(option[value='fig21'])").select_option(name)
    wait_until(lambda: shows(page, f"Loaded preset '{name}'"))
    assert shows(page, "kept as they are")  # repeated template kinds and the grid of the preset, read-only
    wait_until(lambda: points_count(page) == n_data)
    wait_until(lambda: len(column(page, "bft-regression-source", "h") or []) == nx)
    wait_until(lambda: f"preset={name}" in address(page))
    assert page.errors == []


def test_upload_with_two_prior_orders_is_accepted_and_exported_unchanged(page, tmp_path):
    doc = {"model": "density", "data": [[3, 3], [7, 12], [5, 8]],
           "prior": {"field": "L", "lambda": 1.0, "l2": 0.1, "l4": 0.05}}
    page.locator("input[type=file]").set_input_files(
        files=[{"name": "two-orders.json", "mimeType": "application/json", "buffer": json.dumps(doc).encode()}])
    wait_until(lambda: shows(page, "Loaded the configuration"))
    wait_until(lambda: points_count(page) == 3)
    assert shows(page, "l4 = 0.05")  # the order the slider does not show, read-only
    with page.expect_download() as info:
        page.get_by_text("Download configuration (JSON)").click()
    exported = json.loads(open(info.value.path()).read())
    assert exported["prior"]["l2"] == 0.1 and exported["prior"]["l4"] == 0.05
    assert page.errors == []


def test_warm_start_export_reproduces_what_the_browser_shows(page):
    import numpy as np

    from app.harness import JS_IMAGE
    from bftcore.api import fit
    open_card(page, "Solver and grid")
    page.locator("select:has(option[value='empirical'])").select_option("keep current")
    n = points_count(page)
    sx, sy = canvas_xy(page, 5.0, 2.0)
    page.mouse.click(sx, sy)
    wait_until(lambda: points_count(page) == n + 1)

    def exported_run_matches_the_screen():
        with page.expect_download() as info:
            page.get_by_text("Download configuration (JSON)").click()
        doc = json.loads(open(info.value.path()).read())
        if len(doc["data"]) != n + 1 or not doc["solver"]["init"].startswith("template:"):
            return False
        P = np.asarray(fit(doc)["P"])
        shown = np.asarray(page.evaluate(JS_IMAGE), float).reshape(P.shape[::-1]).T
        return np.allclose(P, shown, atol=1e-6)

    wait_until(exported_run_matches_the_screen, timeout=60, step=0.5)
    assert page.errors == []
