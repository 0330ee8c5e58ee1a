"""The presenter layout (issue 13) in a real browser: geometry by bounding boxes, model-specific text, the prior."""

import pytest

from app.harness import canvas_xy, column, wait_for_app, wait_until

pytestmark = pytest.mark.ui

JS_BOX = """(name) => { for (const d of Bokeh.documents) { const m = d.get_model_by_name(name);
  if (m) { const v = Bokeh.index.find_one(m); if (!v) return null; const r = v.el.getBoundingClientRect();
  return [r.left, r.top, r.width, r.height]; } } return null; }"""


def box(page, name):
    return page.evaluate(JS_BOX, name)


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
    left, _, w, _ = box(page, "bft-canvas")
    assert w >= min(300, width - 20)
    assert left >= 0 and left + w <= width  # inside the window, not clipped by the page's overflow-x: hidden
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
    title = page.evaluate("""() => { for (const d of Bokeh.documents) { const m = d.get_model_by_name('bft-canvas');
      if (m) return [m.title.text, m.y_range.start, m.y_range.end]; } }""")
    assert title[0].startswith("regression h(x)")
    assert title[2] < 8  # fitted to the data (1-2.5) and the templates, not the density's 0-15


def test_prior_samples_change_with_lambda_and_slice_follows_cursor(page):
    page.locator("select:has(option[value='fig27'])").select_option("fig27")
    wait_until(lambda: len(column(page, "bft-points-source", "x")) == 50)
    # the tabs are rendered when opened (a preset load lays out the visible page only)
    page.get_by_text("Prior", exact=True).first.click()
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
    page.get_by_text("Live fit").first.click()
    xs = []
    for x in (2.0, 8.0):
        sx, sy = wait_until(lambda: canvas_xy(page, x, 7.0))  # the live tab drawn again
        page.mouse.move(sx, sy)
        wait_until(lambda: page.evaluate("""() => { for (const d of Bokeh.documents) {
          const m = d.get_model_by_name('bft-slice-source'); if (m) return m.tags[0]; } }""") == pytest.approx(x))
        xs.append(x)
    assert len(column(page, "bft-slice-source", "p_true")) == 15


def test_png_export_at_projector_resolution(page, tmp_path):
    """The button downloads the fit's figure, drawn by the server from the declaration the CLI's --png draws."""
    import io

    import numpy as np
    from PIL import Image

    from bftcore.outputs import figures
    with page.expect_download() as dl:
        page.get_by_role("button", name="PNG").click()
    path = tmp_path / "x.png"
    dl.value.save_as(path)
    img = Image.open(io.BytesIO(path.read_bytes()))
    assert img.format == "PNG" and img.size == figures.PROJECTOR_SIZE
    # a heatmap in the colour map: its top and bottom colours are both there
    pixels = np.asarray(img.convert("RGB")).reshape(-1, 3)
    for t in (0.0, 1.0):
        assert np.all(pixels == figures.colormap(t), axis=1).sum() > 100


JS_RENDERER_VISIBLE = """(source) => { for (const d of Bokeh.documents) for (const m of d._all_models.values()) {
  if (m.data_source && m.data_source.name === source) return m.visible; } return null; }"""


def rgb(text):
    """The channels of a CSS colour 'rgb(r, g, b)' / 'rgba(r, g, b, a)'."""
    return [float(v) for v in text[text.index("(") + 1:text.index(")")].split(",")[:3]]


def test_dark_theme_darkens_page_and_plots_and_lightens_text(page):
    page.get_by_role("button", name="Dark high-contrast theme").click()
    wait_until(lambda: page.evaluate("() => document.body.classList.contains('bft-dark')"))
    assert max(rgb(page.evaluate("() => getComputedStyle(document.body).backgroundColor"))) < 60
    assert min(rgb(page.evaluate("() => getComputedStyle(document.body).color"))) > 200
    # every plot of the page is recoloured by the server: the canvas' background dark, its title and axes light
    fig = wait_until(lambda: page.evaluate("""() => { for (const d of Bokeh.documents) {
      const m = d.get_model_by_name('bft-canvas'); if (m && m.background_fill_color === '#000000')
      return [m.border_fill_color, m.title.text_color]; } return null; }"""))
    assert fig[0] == "#000000" and fig[1] == "#ffffff"
    # the header text as drawn is light on the dark page
    header = page.get_by_text("bftcore · Bayesian field theory").first
    assert min(rgb(header.evaluate("(e) => getComputedStyle(e).color"))) > 200
    # the "What this shows" cards: their header rows (a Bokeh Row in the card's button) dark, their titles light
    rows = wait_until(lambda: page.evaluate("""() => { const out = []; const walk = (root) => {
      for (const el of root.querySelectorAll('*')) { if (el.classList && el.classList.contains('card-header-row')) {
        out.push([getComputedStyle(el).backgroundColor, getComputedStyle(el).color]); }
        if (el.shadowRoot) walk(el.shadowRoot); } }; walk(document);
      return out.length && out.every(([bg]) => bg.startsWith('rgb(34')) ? out : null; }"""))
    assert len(rows) >= 3 and all(max(rgb(bg)) < 60 and min(rgb(fg)) > 200 for bg, fg in rows), rows
    page.get_by_role("button", name="Dark high-contrast theme").click()
    wait_until(lambda: not page.evaluate("() => document.body.classList.contains('bft-dark')"))
    assert page.errors == []


def test_held_out_points_toggle(page):
    assert page.evaluate(JS_RENDERER_VISIBLE, "bft-heldout-source") is False
    page.get_by_label("Show 50 held-out test points from the true density").check()
    wait_until(lambda: len(column(page, "bft-heldout-source", "x") or []) == 50)
    wait_until(lambda: page.evaluate(JS_RENDERER_VISIBLE, "bft-heldout-source") is True)
    xs, ys = column(page, "bft-heldout-source", "x"), column(page, "bft-heldout-source", "y")
    assert all(0.5 <= x <= 10.5 for x in xs) and all(0.5 <= y <= 15.5 for y in ys)
    page.get_by_label("Show 50 held-out test points from the true density").uncheck()
    wait_until(lambda: page.evaluate(JS_RENDERER_VISIBLE, "bft-heldout-source") is False)


def points_count(page):
    return len(column(page, "bft-points-source", "x"))


#: Found by these tests, not fixed: the first press of "Add point" after the x/y fields were edited adds the point on
#: the server (session.data, the rings' count) but the browser's points source does not receive it (the stream is
#: lost); the next press shows both.  Canvas clicks are not affected.  Remove the marks once it is fixed.
# A known bug, open: the point reaches session.data but, intermittently, not the browser until the next press (CI saw
# it pass once, so strict=True failed the run as XPASS). Not strict until it is fixed; the note says so.

JS_FOCUSED = """() => { let e = document.activeElement;
  while (e && e.shadowRoot && e.shadowRoot.activeElement) e = e.shadowRoot.activeElement;
  return e && e.getAttribute('aria-label'); }"""


def test_keyboard_adds_a_point(page):
    """Focus the x field, type; Tab to y, type; Tab to "Add point" and press Space: one more point, at (x, y).
    The press arrives while the typed y is still being processed: Panel then runs the click without Bokeh's document
    lock, and until app.transport.user_action the point stayed on the server (about one run in three)."""
    n = points_count(page)
    page.get_by_label("x of a point to add").focus()
    page.keyboard.press("Control+A")
    page.keyboard.type("9")
    page.keyboard.press("Tab")
    assert page.evaluate(JS_FOCUSED) == "y of a point to add"
    page.keyboard.press("Control+A")
    page.keyboard.type("13")
    page.keyboard.press("Tab")
    assert page.evaluate(JS_FOCUSED) == "Add the point (x, y) to the data"
    page.keyboard.press("Space")
    wait_until(lambda: points_count(page) == n + 1)
    assert [column(page, "bft-points-source", "x")[-1], column(page, "bft-points-source", "y")[-1]] == [9.0, 13.0]


def test_repeated_point_is_ringed_with_its_count(page):
    assert column(page, "bft-duplicates-source", "x") == []
    n = points_count(page)
    page.get_by_label("x of a point to add").fill("6")
    page.get_by_label("y of a point to add").fill("5")
    for k in range(3):  # the same point three times (two canvas clicks in a row would make a double tap)
        page.get_by_role("button", name="Add the point (x, y) to the data").click()
        wait_until(lambda: points_count(page) == n + k + 1)
    wait_until(lambda: column(page, "bft-duplicates-source", "label") == ["×3"])
    assert column(page, "bft-duplicates-source", "x") == [6.0] and column(page, "bft-duplicates-source", "y") == [5.0]
    assert page.evaluate(JS_RENDERER_VISIBLE, "bft-duplicates-source") is True


def test_main_controls_have_accessible_names(page):
    from app.views.common import ARIA  # noqa: PLC0415 - the labels the page must carry
    for label in ARIA.values():
        wait_until(lambda: page.get_by_label(label).count() >= 1)
    assert page.get_by_role("button", name="Download the figure of the fit as a PNG").count() == 1
    assert page.get_by_role("img", name="The learned density").count() == 1


def test_no_validation_warnings_in_the_server_log(page, server):
    """Bokeh's validation (W-1005 fixed sizing without a size, and the others) says nothing about the page."""
    # the page's session is in the log (written by the server process: wait for it, not for a fixed pause)
    def session_logged():
        text = open(server[1]).read()
        return text if "ServerConnection created" in text else None
    log = wait_until(session_logged)
    assert " W-1" not in log and " E-1" not in log, [line for line in log.splitlines() if " W-1" in line or " E-1" in line]


JS_PLOT_BOXES = """(names) => { const out = {}; for (const d of Bokeh.documents) for (const name of names) {
  const m = d.get_model_by_name(name); if (!m) continue; const v = Bokeh.index.find_one(m);
  if (v && v.el) { const r = v.el.getBoundingClientRect(); out[name] = [r.top, r.bottom, r.left, r.right]; } }
  return out; }"""


def test_mixing_traces_and_the_overfitting_mark_are_on_screen_at_1280x720(page):
    """Issue 13: beside the hero, the mixing bars, the a_j trace, the energy and the errors with the overfitting mark
    all lie within the 1280×720 projector page without scrolling (the errors were under the fold)."""
    page.locator("select:has(option[value='fig27'])").select_option("fig27")
    wait_until(lambda: len(column(page, "bft-overfit-source", "x")) == 1)
    names = ["bft-canvas", "bft-mixing-bars", "bft-mixing-trace", "bft-energy", "bft-errors"]
    boxes = wait_until(lambda: (lambda b: b if len(b) == len(names) else None)(page.evaluate(JS_PLOT_BOXES, names)))
    assert page.evaluate("() => window.scrollY") == 0
    for name, (top, bottom, left, right) in boxes.items():
        assert 0 <= top < bottom <= 720 and 0 <= left < right <= 1280, (name, boxes[name])
    # the mark itself: its data point mapped to the screen lies inside the errors plot's frame
    x, y = column(page, "bft-overfit-source", "x")[0], column(page, "bft-overfit-source", "y")[0]
    sy = page.evaluate("""([x, y]) => { for (const d of Bokeh.documents) { const m = d.get_model_by_name('bft-errors');
      if (!m) continue; const v = Bokeh.index.find_one(m); const f = v.frame;
      return v.el.getBoundingClientRect().top + f.bbox.top + f.y_scale.compute(y); } }""", [x, y])
    assert boxes["bft-errors"][0] < sy < min(boxes["bft-errors"][1], 720)
