"""What a click costs a real browser: the messages it receives and sends, and the BokehJS patches the app installs
(app/views/common.py).  These keep 30 sessions on one machine responsive; see the README's dashboard numbers."""
import json
import time

import pytest

from app.harness import canvas_xy, wait_for_app, wait_until

pytestmark = pytest.mark.ui

JS_ID = "(name) => { for (const d of Bokeh.documents) { const m = d.get_model_by_name(name); if (m) return m.id; } }"
JS_STATUS_FINISHED = """() => document.body.innerText.includes('finished')"""


def recorded_page(browser, server):
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    page = ctx.new_page()
    page.received, page.sent, page.errors = [], [], []
    page.on("pageerror", lambda e: page.errors.append(str(e)))

    def on_ws(ws):
        ws.on("framereceived", lambda f: page.received.append(f) if isinstance(f, str) else None)
        ws.on("framesent", lambda f: page.sent.append(f) if isinstance(f, str) else None)
    page.on("websocket", on_ws)
    page.goto(server[0])
    wait_for_app(page)
    return ctx, page


def events_of(frames):
    """The event lists of the PATCH-DOC contents among websocket text frames."""
    out = []
    for f in frames:
        if f.startswith('{"events"'):
            out.append(json.loads(f)["events"])
    return out


def status(page) -> str:
    return page.get_by_text("iteration ").first.inner_text()


def run_finished(page, before: str | None = None):
    """Wait until the page's run has finished: its status line says so and, after an action, differs from the line
    ``before`` it (until the new run's second frame the old run's line stays).  An event, not a quiet spell: on a
    loaded machine a run pauses longer than any quiet time one could choose.  (wait_until polls through page
    calls, which is when the sync Playwright API delivers the websocket events.)"""
    wait_until(lambda: "finished" in (s := status(page)) and s != before, timeout=120)
    return status(page)


def test_each_frame_is_one_message_and_a_click_is_not_echoed_back_more_than_once(browser, server):
    ctx, page = recorded_page(browser, server)
    try:
        image_id = page.evaluate(JS_ID, "bft-image-source")
        line = run_finished(page)
        page.received.clear()
        page.sent.clear()
        for x, y in ((4.0, 6.0), (7.0, 11.0)):
            sx, sy = canvas_xy(page, x, y)
            page.mouse.click(sx, sy)
            line = run_finished(page, line)
        frames = [evs for evs in events_of(page.received)
                  if any(e.get("model", {}).get("id") == image_id and e.get("attr") == "data" for e in evs)]
        assert len(frames) >= 2  # both clicks animated
        for evs in frames:  # the image travels with its frame serial (and the colour range) in ONE message
            assert any(e.get("model", {}).get("id") == image_id and e.get("attr") == "tags" for e in evs), evs
        sent = [e for evs in events_of(page.sent) for e in evs]
        href = [e for e in sent if e.get("attr") == "href"]
        ranges = [e for e in sent if e.get("attr") in ("start", "end")]
        taps = [e for e in sent if e.get("kind") == "MessageSent"]
        assert len(taps) == 2
        assert len(href) <= 2, href        # the address is written once per click, so echoed at most once
        assert ranges == []                # no range computed in the browser and sent back
        assert page.errors == []
    finally:
        ctx.close()


JS_PATCHED = """() => [Bokeh.require('core/dom').InlineStyleSheet.prototype.__bft_patched === true,
  Bokeh.require('models/annotations/legend').LegendView.prototype.__bft_patched === true,
  Bokeh.require('core/visuals/visual').VisualProperties.prototype.__bft_patched === true]"""

# the --bk-* CSS variables that could override a visual property, on the element of every plot view in the page
# (app.views.common answers "none" without asking the computed style: this checks that the answer is true)
JS_VISUAL_CSS_VARIABLES = """() => { const found = [], views = [];
  const walk = (v) => { views.push(v); for (const c of (v.child_views || [])) walk(c);
    if (v.renderer_views) for (const r of v.renderer_views.values()) views.push(r); };
  for (const root of Bokeh.index.roots || Object.values(Bokeh.index)) walk(root);
  for (const v of views) { if (!v.el) continue; const cs = getComputedStyle(v.el);
    for (let k = 0; k < cs.length; k++) { const name = cs[k];
      if (/^--bk-.*(line|fill|text|hatch)/.test(name)) found.push(name); } }
  return [views.length, found]; }"""

# the labels a figure's legend shows in the page, and those of its items visible in the model
JS_LEGEND = """(title) => { const shown = [], visible = [];
  for (const d of Bokeh.documents) for (const m of d.all_models) {
    if (m.type !== 'Figure' || !m.title || !String(m.title.text).startsWith(title)) continue;
    for (const a of m.center) { if (a.type !== 'Legend') continue; const v = Bokeh.index.find_one(a);
      for (const e of v.entries) if (e.el.isConnected) shown.push(e.label);
      for (const it of a.items) if (it.visible) visible.push(typeof it.label === 'object' ? it.label.value : it.label); } }
  return [shown.sort(), visible.sort()]; }"""


def legend(page):
    return page.evaluate(JS_LEGEND, "regression")


def test_browser_patches_are_installed_and_legends_follow_their_items(page):
    # the BokehJS methods the app patches exist in the installed Bokeh (else the page runs unpatched: slower)
    assert page.evaluate(JS_PATCHED) == [True, True, True]
    n_views, variables = page.evaluate(JS_VISUAL_CSS_VARIABLES)
    assert n_views > 100 and variables == []
    shown, visible = legend(page)
    assert shown == visible and "h(x)" in shown and "exact mean" not in shown  # density mode: no exact mean
    sx, sy = canvas_xy(page, 6.0, 9.0)  # a click streams data into the sources the legend items refer to
    line = status(page)
    page.mouse.click(sx, sy)
    line = run_finished(page, line)
    assert legend(page) == [shown, visible]
    page.locator("select:has(option[value='fig21'])").select_option("two_trends")  # regression: items appear
    wait_until(lambda: "exact mean" in legend(page)[0], timeout=120)
    run_finished(page, line)
    shown, visible = legend(page)
    assert shown == visible and "exact mean" in shown
    assert page.errors == []


def test_tabs_closed_while_their_runs_animate_leave_no_error_in_the_server_log(browser, server):
    pages = []
    for _ in range(3):  # slow animation (200 ms per iteration), so each tab closes in the middle of its run
        ctx = browser.new_context(viewport={"width": 1280, "height": 720})
        page = ctx.new_page()
        page.goto(server[0] + "?frame_ms=200")
        wait_for_app(page)
        pages.append((ctx, page))
    for k, (ctx, page) in enumerate(pages):
        for i in range(2):
            sx, sy = canvas_xy(page, 2.0 + k, 3.0 + i)
            page.mouse.click(sx, sy)
            page.wait_for_timeout(250)
    for ctx, _ in pages:
        ctx.close()
    time.sleep(4.0)  # the runs notice, the sockets close, Bokeh discards the sessions' pending writes
    log = open(server[1]).read()
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
