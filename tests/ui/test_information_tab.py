"""The "Information and hyperpriors" tab in a real browser: drawn when first opened; Step adds a datum (the M(n)
curve's source grows, and M falls below its prior value), Reset clears it and the same steps give the same M(n);
the y_D slider moves the maximum of the mixture's joint posterior (the text beside the heatmap and the marker
follow); no console error, no server Traceback.  Leaves the screenshot of the tab at 1280x720 in assets/screenshots/information-tab.png."""
import time
from pathlib import Path

import pytest

from app.harness import column, wait_until

pytestmark = pytest.mark.ui

SCREENSHOT = Path(__file__).resolve().parents[2] / "assets" / "screenshots" / "information-tab.png"
JS_TEXT = """(cls) => { for (const d of Bokeh.documents) for (const m of d._all_models.values())
  if ((m.css_classes || []).includes(cls) && typeof m.text === "string") return m.text; return null; }"""


def text(page, cls):
    """The text a LiveText of that css class sends (escaped, in a <pre>)."""
    return page.evaluate(JS_TEXT, cls) or ""


def test_step_reset_and_y_d_in_the_information_tab(page, server):
    assert column(page, "bft-info-m", "M") is None  # not built before the tab is opened
    page.get_by_text("Information and hyperpriors", exact=True).first.click()
    step = page.get_by_role("button", name="Step: add one datum")  # the sidebar has a solver Step
    step.wait_for()
    wait_until(lambda: column(page, "bft-info-m", "M") is not None)
    m0 = column(page, "bft-info-m", "M")
    assert len(m0) == 1 and m0[0] > 0.05  # the correlated prior's M before any datum
    for n in (2, 3, 4):
        step.click()
        wait_until(lambda n=n: len(column(page, "bft-info-m", "M")) == n)
    m = column(page, "bft-info-m", "M")
    assert m[-1] < m[0] / 100, m  # the seeded data of the view: 0.104, 0.006, 0.009, 0.0005
    assert "n = 3: M = " in text(page, "bft-info-m-text") and "last datum: y = " in text(page, "bft-info-datum")
    page.get_by_role("button", name="Reset: no data").click()
    wait_until(lambda: len(column(page, "bft-info-m", "M")) == 1)
    # the mixture at y_D = 0.3 (Fig 10), then the slider by keys: 0.5, the one-component asymptote
    assert "maximum at h = 0.65, β = 8.16" in text(page, "bft-info-max-text")
    handle = page.get_by_label("y_D (the datum)")
    handle.focus()
    for _ in range(4):  # steps of 0.05
        page.keyboard.press("ArrowRight")
    wait_until(lambda: "maximum at h = 0.75, β = 16&lt;" in text(page, "bft-info-max-text"))
    assert column(page, "bft-info-maximum", "h") == pytest.approx([0.75], abs=1e-4)
    # Reset restarted the generator from its seed: three steps give the same M(n) again
    for n in (2, 3, 4):
        step.click()
        wait_until(lambda n=n: len(column(page, "bft-info-m", "M")) == n)
    assert column(page, "bft-info-m", "M") == pytest.approx(m, rel=1e-12)
    time.sleep(0.5)  # the last repaint
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT))
    assert page.errors == []
    log = open(server[1]).read()
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
