"""Hostile share links in a real browser (issue 11): each page finishes loading, says what it refused and why,
keeps working, and the server log has no traceback."""
import json
import re
from urllib.parse import urlencode

import pytest

from app.harness import canvas_xy, image_sum, wait_for_app, wait_until

pytestmark = pytest.mark.ui

LINKS = [
    ({"init": "templatefoo"}, "init"),
    ({"data": "[[null,null]]"}, "data"),
    ({"extra_orders": '{"l4":null}'}, "extra_orders"),
    ({"nx": "5" * 5000}, "nx"),
    ({"lam": "-1"}, "lam"),
    ({"beta": "0"}, "beta"),
    ({"nx": "2000"}, "nx"),
    ({"nx": "1024", "ny": "1024"}, "nx"),
    ({"nx": "1024", "ny": "1024", "model": "density, prior on P", "method": "massive", "solver_mass2": "1"}, "nx"),
    ({"data": json.dumps([[5, 5]] * 2500)}, "data"),
    ({"data": "[" + ",".join(["[5, 5]"] * 3900) + "]"}, "too long"),  # 58 500 characters: over our limit,
                                                                         # under the HTTP server's
]


def points_count(page) -> int:
    return int(page.get_by_text(re.compile(r"^\d+ points$")).first.inner_text().split()[0])


def message(page) -> str:
    """The text of the message bar when it shows a refusal of the link."""
    loc = page.get_by_text(re.compile(r"^(From the link|This link)"))
    return loc.first.inner_text() if loc.count() and loc.first.is_visible() else ""


@pytest.mark.parametrize("query, named", LINKS, ids=[f"{n}-{i}" for i, (_, n) in enumerate(LINKS)])
def test_a_hostile_link_loads_says_what_it_refused_and_the_page_still_works(browser, server, query, named):
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(server[0] + "?" + urlencode(query))
        wait_for_app(page)
        text = wait_until(lambda: message(page))
        if named == "too long":
            assert "too long to load" in text
        else:
            assert f"ignored {named}=" in text, text
        before, img = points_count(page), image_sum(page)
        page.mouse.click(*canvas_xy(page, 5.0, 8.0))
        wait_until(lambda: points_count(page) == before + 1)
        wait_until(lambda: image_sum(page) != img)
        assert errors == []
    finally:
        ctx.close()
    log = open(server[1]).read()
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]


def test_a_link_over_the_http_servers_limit_is_dropped_before_the_app_and_the_server_goes_on(browser, server):
    """Tornado closes the connection of a request whose request line and headers pass 64 KiB (its max_header_size)
    without an answer: no code of the app runs, so it cannot explain anything, and Chromium shows its own page for
    an empty response.  What the app can do is in place: its own limit (app.views.share.MAX_QUERY_CHARS) is lower,
    so every link the server lets through gets a page and a message, and the refused request leaves nothing in the
    server's log and no harm to the next page."""
    from playwright.sync_api import Error as PlaywrightError

    from app.views.share import MAX_QUERY_CHARS
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    page = ctx.new_page()
    try:
        query = "?" + urlencode({"data": "[" + ",".join(["[5, 5]"] * 4800) + "]"})
        assert len(query) > 64 * 1024 > MAX_QUERY_CHARS
        with pytest.raises(PlaywrightError, match="ERR_EMPTY_RESPONSE"):
            page.goto(server[0] + query)
        page = ctx.new_page()  # the first one is still on its way to Chromium's error page
        page.goto(server[0])
        wait_for_app(page)
        before = points_count(page)
        page.mouse.click(*canvas_xy(page, 5.0, 8.0))
        wait_until(lambda: points_count(page) == before + 1)
    finally:
        ctx.close()
    log = open(server[1]).read()
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]


HEAVY_LINKS = ["field P, massive", "field P, newton", "field L, l6"]


@pytest.mark.parametrize("name", HEAVY_LINKS)
def test_three_tabs_of_a_worst_accepted_link_leave_other_sessions_working_and_memory_comes_back(browser, name):
    """Issue 11's acceptance scenario, twice on one server (the latencies are measured by scripts/hostile_load.py,
    not asserted).  The second round must end where the first did: what stays after the first (modules imported,
    worker threads and their heaps) is paid once, a session's arrays never.  A 128 x 128 massive-relaxation run
    whose generator was closed away from its worker thread left 130 MB per round (scipy's SuperLU), within the 300
    MB of the first round but not of the second."""
    from app.harness import HOSTILE_LINKS, hostile_scenario, panel_server
    with panel_server(extra_args=["--check-unused-sessions", "500", "--unused-session-lifetime", "2000"]) as (url, log):
        first = hostile_scenario(browser, url, clicks=3, link=HOSTILE_LINKS[name])
        second = hostile_scenario(browser, url, clicks=3, link=HOSTILE_LINKS[name])
        text = open(log).read()
    for r in (first, second):
        # the three problems were accepted and really ran (their traces show iterations; RSS is no proof since the
        # sessions share one prior matrix, bftcore.foundations.operators.MATRIX_CACHE_BYTES)
        assert r["ran"] == r["heavy_tabs"], r
        assert r["updated"] == r["clicks"], r   # the fourth session's clicks all reached its heatmap
    assert first["after"] - first["before"] < 300, first
    assert second["after"] - first["after"] < 60, (first, second)
    assert "Traceback" not in text and "ERROR" not in text, text[-3000:]


def test_a_closed_tab_ends_its_sessions_work_at_once(browser, server):
    """A tab closed in the middle of a long run: its session's run is closed within seconds, not when Bokeh
    discards the unused session (15 s after the last connection at the earliest, checked every 17 s on this
    server's defaults).  Until then the run played on and its diagnostics ran for no one, taking the CPU from the
    next tab's page (issue 28: app/main.py closes the session when its connection is lost)."""
    from app.harness import VIEWPORT, released_sessions
    url = server[0]
    before = released_sessions(url)
    ctx = browser.new_context(viewport=VIEWPORT)
    page = ctx.new_page()
    page.goto(url + "?frame_ms=1000&max_iter=200&tol=0&min_iter=200")  # 200 iterations at one per second
    wait_for_app(page)
    ctx.close()
    wait_until(lambda: released_sessions(url) > before, timeout=10, step=0.2)
