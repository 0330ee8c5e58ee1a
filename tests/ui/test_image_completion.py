"""The "Image completion" tab in a real browser: drawn when first opened, at 0.1 beta_c a ghost of both faces
(a_1 near 1/2); the beta slider moved by keys across beta_c to 5 beta_c gives a_1 > 0.99 (the deformed smiling
face); the deformations toggle puts the templates at the identity and back; down to 0.1 beta_c returns a_1 near
1/2; no console error, no server Traceback.  Leaves the
screenshot of the tab at 1280x720 in assets/screenshots/image-completion.png."""
import time
from pathlib import Path

import pytest

from app.harness import column, wait_until

pytestmark = pytest.mark.ui

SCREENSHOT = Path(__file__).resolve().parents[2] / "assets" / "screenshots" / "image-completion.png"


JS_TEXT = """(cls) => { for (const d of Bokeh.documents) for (const m of d._all_models.values())
  if ((m.css_classes || []).includes(cls) && typeof m.text === "string") return m.text; return null; }"""


def text(page, cls):
    """The text a LiveText of that css class sends."""
    return page.evaluate(JS_TEXT, cls) or ""


def a1(page):
    values = column(page, "bft-ic-a", "a")
    return None if values is None else values[0]


def test_beta_slider_snaps_the_completion_across_beta_c(page, server):
    assert a1(page) is None  # not built before the tab is opened
    page.get_by_text("Image completion", exact=True).first.click()
    wait_until(lambda: a1(page) is not None, timeout=120)
    assert abs(a1(page) - 0.5) < 0.05
    handle = page.get_by_label("log10 β / β_c")
    handle.focus()
    for _ in range(34):  # steps of 0.05: from -1 to +0.7, beta from 0.1 to 5 beta_c
        page.keyboard.press("ArrowRight")
    wait_until(lambda: a1(page) > 0.99, timeout=120)
    time.sleep(1.0)  # the last repaint
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT))
    # deformations off: the templates at the identity (the undeformed smile), still a_1 > 0.99
    page.get_by_role("button", name="Deformations of the templates").click()
    wait_until(lambda: "shift (+0.00, +0.00) px, scale 1.000" in text(page, "bft-ic-detail"), timeout=120)
    assert a1(page) > 0.99
    page.get_by_role("button", name="Deformations of the templates").click()
    wait_until(lambda: "shift (+0.00, +0.00)" not in text(page, "bft-ic-detail"), timeout=120)
    handle.focus()
    for _ in range(34):
        page.keyboard.press("ArrowLeft")
    wait_until(lambda: abs(a1(page) - 0.5) < 0.05, timeout=120)
    assert page.errors == []
    log = open(server[1]).read()
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
