"""Issue 28, a screen made for a projector, in a real browser: the presenter layout at 1280x720 (the hero plot at
least 35 % of the screen, the traces, the lambda curve and the alarms on screen without scrolling), the layout,
theme and font size in the share link, and the layout control."""
from urllib.parse import parse_qsl, urlsplit

import pytest

from app.harness import DIAGNOSIS_WAIT_S, column, wait_for_app, wait_until

from .test_lecture_traces import fresh

pytestmark = pytest.mark.ui

#: Boxes (left, top, width, height) of named Bokeh models and of the alarms (found through the shadow roots).
JS_BOXES = """(names) => { const out = {};
  for (const d of Bokeh.documents) for (const n of names) { const m = d.get_model_by_name(n); if (!m) continue;
    const v = Bokeh.index.find_one(m); if (!v) continue; const r = v.el.getBoundingClientRect();
    out[n] = [r.left, r.top, r.width, r.height]; }
  const find = (root, sel) => { const e = root.querySelector(sel); if (e) return e;
    for (const el of root.querySelectorAll('*')) if (el.shadowRoot) { const f = find(el.shadowRoot, sel); if (f) return f; }
    return null; };
  for (const id of ['overfitting-alarm', 'metastability-alarm']) { const e = find(document, `[data-testid=${id}]`);
    if (e) { const r = e.getBoundingClientRect(); out[id] = [r.left, r.top, r.width, r.height]; } }
  return out; }"""
PLOTS = ["bft-canvas", "bft-energy", "bft-errors", "bft-overfit-curve"]


def boxes(page, names):
    return page.evaluate(JS_BOXES, names)


def query(page) -> dict:
    return dict(parse_qsl(urlsplit(page.evaluate("() => window.location.href")).query))


def test_presenter_at_1280x720_hero_and_diagnosis_on_screen(browser, server):
    ctx, pg = fresh(browser, server[0] + "?preset=overfitting&lam=0.01")
    try:
        assert pg.viewport_size == {"width": 1280, "height": 720}
        want = PLOTS + ["overfitting-alarm"]
        b = wait_until(lambda: (lambda b: b if all(k in b for k in want) else None)(boxes(pg, PLOTS)), timeout=DIAGNOSIS_WAIT_S)
        assert pg.evaluate("() => window.scrollY") == 0
        left, top, w, h = b["bft-canvas"]
        assert w * h >= 0.35 * 1280 * 720, (w, h)
        for name in want:
            x, y, bw, bh = b[name]
            assert 0 <= x and x + bw <= 1280 and 0 <= y and y + bh <= 720, (name, b[name])
        # the layout was chosen by the window: no class forced on <body>
        assert pg.evaluate("() => document.body.className.includes('bft-presenter')") is False
        assert query(pg)["layout"] == "auto"
    finally:
        ctx.close()


def test_the_workbench_from_the_link_and_the_layout_button(browser, server):
    ctx, pg = fresh(browser, server[0] + "?layout=workbench")
    try:
        assert pg.evaluate("() => document.body.classList.contains('bft-workbench')")
        small = boxes(pg, ["bft-canvas"])["bft-canvas"]
        assert small[2] * small[3] < 0.35 * 1280 * 720  # the workbench's narrower hero
        pg.locator(".bft-layout-toggle button").click()
        wait_until(lambda: query(pg).get("layout") == "presenter")
        assert pg.evaluate("() => document.body.classList.contains('bft-presenter')")
        wait_until(lambda: (lambda b: b[2] * b[3] >= 0.35 * 1280 * 720)(boxes(pg, ["bft-canvas"])["bft-canvas"]))
        pg.locator(".bft-layout-toggle button").click()
        wait_until(lambda: query(pg).get("layout") == "workbench")
        pg.locator("body").click(position={"x": 5, "y": 700})  # the focus on the page, not on a control
        pg.keyboard.press("l")  # the shortcut of the layout button
        wait_until(lambda: query(pg).get("layout") == "presenter")
    finally:
        ctx.close()


def test_theme_and_font_size_travel_in_the_link(browser, server):
    ctx, pg = fresh(browser, server[0] + "?theme=dark&font_size=20")
    try:
        assert pg.evaluate("() => document.body.classList.contains('bft-dark')")
        font = pg.evaluate("""() => { for (const d of Bokeh.documents) { const m = d.get_model_by_name('bft-energy');
          if (m) return [m.background_fill_color, m.left[0].major_label_text_font_size]; } }""")
        assert font == ["#000000", "20px"]
        assert pg.evaluate("() => getComputedStyle(document.body).getPropertyValue('--bft-font').trim()") == "20px"
        assert query(pg)["theme"] == "dark" and query(pg)["font_size"] == "20"
        pg.locator(".bft-theme button").click()
        wait_until(lambda: query(pg).get("theme") == "light")
        assert not pg.evaluate("() => document.body.classList.contains('bft-dark')")
    finally:
        ctx.close()


@pytest.mark.parametrize("size", [(1920, 1080)])
def test_presenter_at_1920x1080(browser, server, size):
    ctx = browser.new_context(viewport={"width": size[0], "height": size[1]})
    pg = ctx.new_page()
    try:
        pg.goto(server[0] + "?preset=overfitting&lam=0.01")
        wait_for_app(pg)
        want = PLOTS + ["overfitting-alarm"]
        b = wait_until(lambda: (lambda b: b if all(k in b for k in want) else None)(boxes(pg, PLOTS)), timeout=DIAGNOSIS_WAIT_S)
        w, h = b["bft-canvas"][2:]
        assert w * h >= 0.35 * size[0] * size[1]
        for name in want:
            x, y, bw, bh = b[name]
            assert x + bw <= size[0] and y + bh <= size[1], name
    finally:
        ctx.close()


def test_the_posterior_band_toggle_draws_on_the_hero(page):
    """On a density: the band of h(x) and h(x) of five posterior samples over the heatmap, while on."""
    def band():
        return len(column(page, "bft-posterior-band", "x") or [])

    def draws():
        return len(column(page, "bft-posterior-draws", "ys") or [])
    assert band() == 0 and draws() == 0
    page.locator(".bft-uncertainty input").check()
    wait_until(lambda: band() > 0 and draws() == 5, timeout=DIAGNOSIS_WAIT_S)
    page.locator(".bft-uncertainty input").uncheck()
    wait_until(lambda: band() == 0 and draws() == 0, timeout=30)


def test_colour_bar_reads_in_any_units(browser, server):
    """Data in thousands of units: the density is about 1e-4 per unit; the colour bar's title takes the power of
    ten out and its labels read 0.5, 1, 1.5 (was 1.000e-4, 5.000e-5)."""
    ctx, pg = fresh(browser, server[0] + "?y_min=0&y_max=15000&data=[[3,3000],[7,12000]]")
    try:
        def bar():
            return pg.evaluate("""() => { for (const d of Bokeh.documents) for (const m of d._all_models.values())
              if (m.type === 'ColorBar' || (m.constructor && m.constructor.name === 'ColorBar')) {
                const lo = m.color_mapper.low, hi = m.color_mapper.high;
                const ticks = [lo, (lo + hi) / 2, hi];
                return [m.title, m.formatter.doFormat(ticks, {loc: 0}), hi]; } return null; }""")
        wait_until(lambda: (bar() or ["P"])[0] != "P", timeout=60)
        title, labels, hi = bar()
        assert title.startswith("P ×10⁻") and 1e-6 < hi < 1e-2
        assert all(len(t) <= 4 and "e" not in t for t in labels), labels
        exponent = int(title.split("×10")[1].translate(str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")))
        assert float(labels[-1]) * 10.0 ** exponent == pytest.approx(hi)
    finally:
        ctx.close()


@pytest.mark.parametrize("link", ["", "?preset=fig27", "?preset=metastable_mixture", "?preset=motorcycle",
                                  "?preset=two_trends&layout=workbench&theme=dark"])
def test_no_console_warnings_on_load(browser, server, link):
    """Each page load logged 14-20 BokehJS warnings ("could not set initial ranges": plots of no data yet)."""
    import time
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    pg = ctx.new_page()
    logged = []
    # Chromium's own software-GL notes ("GL Driver Message ... GPU stall due to ReadPixels") are the headless
    # browser's, not the page's
    pg.on("console", lambda m: logged.append((m.type, m.text))
          if m.type in ("warning", "error") and "GL Driver Message" not in m.text else None)
    try:
        pg.goto(server[0] + link)
        wait_for_app(pg)
        wait_until(lambda: "iteration" in pg.get_by_text("iteration ").first.inner_text(), timeout=60)
        time.sleep(2)  # what the run's first frames log (a warning is logged when a plot is first drawn)
        assert logged == []
    finally:
        ctx.close()


def test_the_lambda_curve_and_the_branches_are_hidden_until_they_have_something_to_draw(page):
    js = """() => { const o = {}; for (const d of Bokeh.documents) for (const n of ['bft-overfit-curve',
      'bft-branch-plot']) { const m = d.get_model_by_name(n); if (m) o[n] = m.visible; } return o; }"""
    # 2 points, no mixture: the lambda curve is on the page, hidden; the branch diagram is not built yet (it is built
    # once the session has branches, app/views/metastability.py's BranchDiagram)
    assert page.evaluate(js) == {"bft-overfit-curve": False}
    from .test_lecture_traces import load_preset
    load_preset(page, "fig28")
    wait_until(lambda: page.evaluate(js) == {"bft-overfit-curve": True, "bft-branch-plot": True}, timeout=DIAGNOSIS_WAIT_S)
