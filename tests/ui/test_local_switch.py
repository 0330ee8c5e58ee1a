"""The local prior mixture in a real browser: ?preset=local_switch loads, the EM run finishes, and the strip under the
curve shows a_soft > 1/2 only at the step; the hyperfield toggle draws theta instead.  A screenshot is kept to be
looked at (it must read on a projector)."""
import os

import numpy as np
import pytest

from app.harness import column, wait_for_app, wait_until

pytestmark = pytest.mark.ui

#: Where the screenshot of the finished step demo goes (assets/screenshots of the repository).
SCREENSHOT = os.path.join(os.path.dirname(__file__), "..", "..", "assets", "screenshots", "local-switch.png")


def finished(page) -> bool:
    return "finished" in page.get_by_text("iteration ").first.inner_text()


def strip(page):
    left, right, v = (column(page, "bft-local-strip", c) for c in ("left", "right", "v"))
    return np.asarray(left or [], float), np.asarray(right or [], float), np.asarray(v or [], float)


def test_the_step_opens_only_where_the_data_ask(browser, server):
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    page = ctx.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server[0] + "?preset=local_switch")
    wait_for_app(page)
    wait_until(lambda: finished(page) and strip(page)[2].size == 100, timeout=180)
    left, right, a = strip(page)
    mid = 0.5 * (left + right)
    soft = mid[a > 0.5]
    assert soft.size >= 1 and np.all(np.abs(soft - 0.5) <= 0.02)   # within two cells of x = 0.5, and only there
    assert np.all((a >= 0) & (a <= 1))
    assert page.locator(".bft-local-strip").first.is_visible()
    page.screenshot(path=SCREENSHOT)
    assert errors == []
    log = open(server[1]).read()
    assert "Traceback" not in log and "ERROR" not in log
    ctx.close()


def test_the_toggle_draws_the_hyperfields_theta_and_the_sliders_are_named(page):
    page.goto(page.url.split("?")[0] + "?preset=local_switch")
    wait_for_app(page)
    wait_until(lambda: finished(page) and strip(page)[2].size == 100, timeout=180)
    handles = page.evaluate("""() => { const out = []; const walk = (r) => { for (const el of r.querySelectorAll('*')) {
      if (el.matches('.noUi-handle')) out.push(el.getAttribute('aria-label') || '');
      if (el.shadowRoot) walk(el.shadowRoot); } }; walk(document); return out; }""")
    assert "π_soft (prior probability of a soft edge)" in handles and all(handles)
    page.get_by_role("button", name="hyperfield", exact=True).click()

    def theta_at_the_end():  # the alternations play one frame each; the switch's run said "finished" before
        status = page.get_by_text("iteration ").first.inner_text()
        return len(column(page, "bft-local-theta", "v") or []) == 100 and "finished" in status and \
            "energy 150.1755" in status  # the hyperfield's joint energy (the switch's is 388.1397)
    wait_until(theta_at_the_end, timeout=240)
    theta = np.asarray(column(page, "bft-local-theta", "v"), float)
    x = np.asarray(column(page, "bft-local-theta", "x"), float)
    assert abs(x[np.argmin(theta)] - 0.505) < 1e-9 and strip(page)[2].size == 0
    assert page.errors == []
