"""Your own data and the learning curve in a real browser: a CSV file uploaded through the page's file input becomes
the points on the canvas with a grid fitted to them (or a message saying what was wrong); the learning curve of the
Fig 21 preset fills in live with its progress and completes; a change of the problem cancels it."""
import re
import time

import pytest

from app.harness import column, image_sum, wait_until

pytestmark = pytest.mark.ui

#: Where the screenshot of the finished learning curve goes (looked at by eye: it must read on a projector).
SCREENSHOT = "/tmp/learning_curve.png"
JS_RANGE = """([name, axis]) => { for (const d of Bokeh.documents) { const m = d.get_model_by_name(name);
  if (m) { const r = m[axis]; return [r.start, r.end]; } } return null; }"""
JS_PROGRESS = """() => { for (const d of Bokeh.documents) for (const m of d._all_models.values())
  if ((m.css_classes || []).includes('bft-learning-progress')) return [m.value, m.max]; return null; }"""
#: Twenty points of two clouds, x in [2, 8] and y in [3, 11]: the fitted grid spans [1.4, 8.6] x [2.2, 11.8].
POINTS = [(round(2.0 + 0.3 * k, 3), 3.0 + (k % 5) * 0.5 if k < 10 else 11.0 - (k % 5) * 0.5) for k in range(20)] + [(8.0, 7.0)]
CSV = ("x,y\n" + "".join(f"{x:g},{y:g}\n" for x, y in POINTS)).encode()


def shows(page, text) -> bool:
    loc = page.get_by_text(text, exact=False)
    return loc.count() > 0 and loc.first.is_visible()


def upload(page, name, data: bytes, mime="text/csv"):
    page.locator("input[type=file]").set_input_files(files=[{"name": name, "mimeType": mime, "buffer": data}])


def points(page):
    return sorted(zip(column(page, "bft-points-source", "x") or [], column(page, "bft-points-source", "y") or []))


def finite_count(values) -> int:
    return sum(1 for v in values or [] if v == v)


def test_a_csv_upload_puts_the_points_on_a_grid_fitted_to_them_and_a_bad_one_is_refused(page):
    upload(page, "clouds.csv", CSV)
    wait_until(lambda: shows(page, f"Loaded {len(POINTS)} points from clouds.csv"))
    wait_until(lambda: points(page) == sorted(POINTS))
    # the heatmap is the solution on the fitted 30 x 40 grid, and the canvas spans it (one cell beyond each node)
    wait_until(lambda: (image_sum(page) or [0, 0, 0])[2] == 30 * 40)
    x0, x1 = page.evaluate(JS_RANGE, ["bft-canvas", "x_range"])
    y0, y1 = page.evaluate(JS_RANGE, ["bft-canvas", "y_range"])
    hx, hy = 7.2 / 29, 9.6 / 39
    assert x0 == pytest.approx(1.4 - hx / 2) and x1 == pytest.approx(8.6 + hx / 2)
    assert y0 == pytest.approx(2.2 - hy / 2) and y1 == pytest.approx(11.8 + hy / 2)
    page.screenshot(path="/tmp/learning_upload.png")
    # a table with a word in the middle: refused with the line and the fix, and the points stay
    upload(page, "broken.csv", b"x,y\n1,2\nthree,4\n")
    wait_until(lambda: shows(page, "Refused: broken.csv, line 3: 'three' is not a number"))
    assert points(page) == sorted(POINTS) and image_sum(page)[2] == 30 * 40
    assert page.errors == []


def open_learning_tab(page):
    page.locator("select:has(option[value='fig21'])").select_option("fig21")
    wait_until(lambda: shows(page, "Loaded preset 'fig21'"))
    page.get_by_text("Learning curve", exact=True).first.click()  # the tab (drawn when first opened)
    button = page.get_by_role("button", name="Learning curve", exact=True)
    button.wait_for()
    return button


def test_the_learning_curve_of_fig21_fills_in_live_and_completes(page):
    button = open_learning_tab(page)
    button.click()
    progress, filled = set(), set()

    def watch():
        value = page.evaluate(JS_PROGRESS)
        if value is not None:
            progress.add(value[0])
        filled.add(finite_count(column(page, "bft-learning-curve-0", "test")))
        return value == [160, 160] and shows(page, "Done: 800 fits")
    # the progress bar moves, the curves fill in, from the smallest n up
    wait_until(lambda: button.is_disabled() or watch())  # the button is disabled while the curve is computed
    wait_until(watch, timeout=180, step=0.2)
    assert any(0 < v < 160 for v in progress), progress
    assert any(0 < k < 8 for k in filled), filled
    assert shows(page, "160 of 160 data sets")
    for j in range(5):  # one curve per lambda, a mean at every n
        assert finite_count(column(page, f"bft-learning-curve-{j}", "test")) == 8
        assert finite_count(column(page, f"bft-learning-curve-{j}", "train")) == 8
    assert column(page, "bft-learning-curve-0", "n") == [5, 8, 14, 24, 41, 70, 118, 200]
    assert len(column(page, "bft-learning-best", "n")) == 8
    assert not button.is_disabled()
    time.sleep(0.5)  # the last repaint
    page.screenshot(path=SCREENSHOT)
    assert page.errors == []


def test_a_change_of_the_problem_cancels_the_running_curve(page):
    button = open_learning_tab(page)
    resamples = page.locator(".bft-learning-resamples input")
    resamples.fill("100")  # 800 data sets: the curve is still running when the problem changes
    resamples.press("Enter")
    button.click()
    wait_until(lambda: (page.evaluate(JS_PROGRESS) or [0, 0])[1] == 800, step=0.05)
    wait_until(lambda: (page.evaluate(JS_PROGRESS) or [0])[0] > 0, step=0.05)
    handle = page.locator(".noUi-handle").first  # λ, in the sidebar beside the tab
    handle.focus()
    page.keyboard.press("ArrowRight")
    wait_until(lambda: shows(page, "Cancelled: the problem changed"))
    assert re.fullmatch(r"\d+ of 800 data sets, stopped",
                        page.get_by_text(re.compile("data sets, stopped")).first.inner_text().strip())
    assert finite_count(column(page, "bft-learning-curve-0", "test")) == 0
    wait_until(lambda: not button.is_disabled())  # once the worker has stopped, a new curve can start
    assert page.errors == []


#: The message line's own text (its shadow root holds stylesheets beside it), or "".
JS_MESSAGE = """() => {
  const find = (root) => {
    for (const el of root.querySelectorAll("*")) {
      if (el.classList.contains("bft-message")) return Array.from((el.shadowRoot || el).childNodes)
        .filter((n) => !["STYLE", "LINK"].includes(n.nodeName)).map((n) => n.textContent).join("");
      if (el.shadowRoot) { const t = find(el.shadowRoot); if (t !== null) return t; }
    }
    return null;
  };
  return find(document) || "";
}"""


def message(page) -> str:
    return page.evaluate(JS_MESSAGE).strip()


def test_an_oversized_or_empty_upload_gets_a_message_and_the_session_lives_on(page):
    """A file over the limit is refused by the page before anything is sent (17 MB, base64-encoded, is past the
    transport's 20 MiB: the connection closed and the session was lost without a word); an empty file is named; a
    file at the limit goes through.  After each, the same session answers: its points are intact and a click adds
    one."""
    from app.harness import canvas_xy
    from app.views.share import MAX_UPLOAD_BYTES
    upload(page, "clouds.csv", CSV)
    wait_until(lambda: message(page).startswith(f"Loaded {len(POINTS)} points from clouds.csv"))
    upload(page, "huge.csv", CSV + b"\n" * (17 * 1000 * 1000))
    wait_until(lambda: message(page).startswith("Refused huge.csv: 16.2 MiB is over the upload limit of 10 MiB."))
    assert points(page) == sorted(POINTS)
    upload(page, "empty.json", b"", mime="application/json")
    wait_until(lambda: message(page).startswith("Refused empty.json: the file is empty."))
    assert points(page) == sorted(POINTS)
    # a file of exactly the limit travels (4/3 of it in base64, inside the transport's 20 MiB) and is read
    at_limit = b"x,y\n4,5\n6,7\n"
    upload(page, "at-limit.csv", at_limit + b"\n" * (MAX_UPLOAD_BYTES - len(at_limit)))
    wait_until(lambda: message(page).startswith("Loaded 2 points from at-limit.csv"), timeout=120)
    wait_until(lambda: points(page) == [(4.0, 5.0), (6.0, 7.0)])
    # the same session, still connected: a click adds a point
    page.mouse.click(*canvas_xy(page, 5.0, 6.0))
    wait_until(lambda: len(points(page)) == 3)
    assert page.errors == []


JS_AXIS_LABELS = """() => { for (const d of Bokeh.documents) { const m = d.get_model_by_name('bft-canvas');
  if (m) { const t = (a) => { const l = a.axis_label; return l == null ? null : (l.text ?? l); };
    return [t(m.below[0]), t(m.left[0])]; } } return null; }"""


def test_real_data_and_an_upload_in_other_units_show_their_own_axes_and_lambda(page):
    # the preset on real data: 272 eruptions, lambda by the evidence as it loads, the CSV's names on the axes
    page.locator("select:has(option[value='fig21'])").select_option("old_faithful")
    wait_until(lambda: shows(page, "Loaded preset 'old_faithful'"))
    wait_until(lambda: len(column(page, "bft-points-source", "x") or []) == 272)
    assert shows(page, "Chosen by the evidence: λ =")
    wait_until(lambda: page.evaluate(JS_AXIS_LABELS) == ["eruptions (min)", "waiting (min)"])
    page.screenshot(path="/tmp/old_faithful.png")
    # the same kind of table in seconds and with markup in its header: the names are text, lambda is the data's own
    rows = "".join(f"{60 * x:g},{60 * y:g}\n" for x, y in POINTS)
    upload(page, "seconds.csv", f"<b>duration</b> (s),wait (s)\n{rows}".encode())
    wait_until(lambda: shows(page, f"Loaded {len(POINTS)} points from seconds.csv"))
    assert shows(page, "chosen by the evidence: λ =")
    wait_until(lambda: page.evaluate(JS_AXIS_LABELS) == ["<b>duration</b> (s)", "wait (s)"])
    assert page.locator("b", has_text="duration").count() == 0  # never markup
    assert page.errors == []
