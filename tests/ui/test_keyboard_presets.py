"""Issue 28 in a real browser: presets named by what they show, grouped by chapter, read before loading; the line
under the preset menu true after the evidence and an upload; every slider handle named; keyboard shortcuts."""
import re
from urllib.parse import parse_qsl

import pytest

from app.harness import canvas_xy, wait_for_app, wait_until
from bftcore.models import presets

pytestmark = pytest.mark.ui

MENU = "select:has(option[value='fig21'])"


def text_shown(page, text) -> bool:
    loc = page.get_by_text(text, exact=False)  # (a title is also the text of an option: not "visible")
    return any(loc.nth(k).is_visible() for k in range(loc.count()))


def preset_in_link(page) -> str:
    return dict(parse_qsl(page.evaluate("() => window.location.search").lstrip("?"))).get("preset", "")


def points_count(page) -> int:
    return int(page.get_by_text(re.compile(r"^\d+ points$")).first.inner_text().split()[0])


def iteration(page) -> int:
    return int(re.search(r"iteration (\d+)", page.get_by_text("iteration ").first.inner_text()).group(1))


def test_the_menu_lists_titles_by_chapter_with_the_names_as_values(page):
    groups = page.locator(MENU).evaluate("""(s) => Array.from(s.querySelectorAll('optgroup')).map((g) =>
      [g.label, Array.from(g.querySelectorAll('option')).map((o) => [o.value, o.textContent])])""")
    shown = {label: options for label, options in groups}
    for chapter, names in presets.GROUPS.items():
        assert shown[chapter] == [[n, presets.TITLES[n]] for n in names]
    page.locator(MENU).select_option("fig27")  # by its value, as before
    wait_until(lambda: preset_in_link(page) == "fig27", timeout=120)
    assert page.locator(MENU).evaluate("(s) => s.selectedOptions[0].textContent") == presets.TITLES["fig27"]


def test_the_guide_shows_a_preset_before_it_is_loaded(page):
    page.get_by_text("Read first: what each example shows").first.click()
    guide = page.locator("select:has(option[value='about:metastable_mixture'])")
    guide.select_option("about:metastable_mixture")
    wait_until(lambda: text_shown(page, presets.TITLES["metastable_mixture"]))
    assert text_shown(page, "crawls along for about fifteen iterations")
    assert points_count(page) == 2 and preset_in_link(page) == ""  # read, not loaded
    page.get_by_role("button", name="Load the example shown").click()
    wait_until(lambda: preset_in_link(page) == "metastable_mixture", timeout=120)
    assert points_count(page) == 50


def test_the_line_under_the_menu_stays_true_after_the_evidence_and_an_upload(page):
    page.locator(MENU).select_option("fig21")
    wait_until(lambda: preset_in_link(page) == "fig21", timeout=120)
    page.get_by_text("Evidence: choose λ from the data").first.click()
    choose = page.get_by_role("button", name="Choose λ by evidence")
    wait_until(lambda: choose.is_enabled(), timeout=120)
    choose.click()
    wait_until(lambda: text_shown(page, f"{presets.TITLES['fig21']}, with λ chosen by the evidence (λ = "),
               timeout=120)
    assert not text_shown(page, "Fifty points sampled")  # fig21's own explanation (its λ) is no longer said
    name = "<b>my</b> $$x$$ data.csv"
    page.locator("input[type=file]").set_input_files(
        files=[{"name": name, "mimeType": "text/csv", "buffer": b"x,y\n1,2\n2,3\n3,5\n4,4\n5,6\n6,5\n"}])
    wait_until(lambda: text_shown(page, "Your data: " + name), timeout=120)
    assert not text_shown(page, "The starting problem")
    assert page.evaluate("""() => { let n = 0; const walk = (r) => { for (const el of r.querySelectorAll('b'))
      if (el.textContent === 'my') n++; for (const el of r.querySelectorAll('*')) if (el.shadowRoot) walk(el.shadowRoot); };
      walk(document); return n; }""") == 0


JS_HANDLES = """() => { const out = []; const walk = (r) => { for (const el of r.querySelectorAll('*')) {
  if (el.matches('.noUi-handle')) out.push(el.getAttribute('aria-label') || '');
  if (el.shadowRoot) walk(el.shadowRoot); } }; walk(document); return out; }"""


def test_every_slider_handle_has_a_name_also_when_drawn_later(page):
    names = page.evaluate(JS_HANDLES)
    assert len(names) > 10 and all(names) and "λ (prior strength)" in names
    for tab in ("Prior", "β sweep", "Learning curve"):  # drawn when first opened
        page.get_by_text(tab, exact=True).first.click()
        wait_until(lambda: all(page.evaluate(JS_HANDLES)), timeout=120)
    page.locator(MENU).select_option("two_trends")  # a regression: other sliders shown, others drawn again
    wait_until(lambda: preset_in_link(page) == "two_trends", timeout=120)
    wait_until(lambda: all(page.evaluate(JS_HANDLES)), timeout=120)


def test_keys_undo_step_run_and_pause_but_not_while_typing(browser, server):
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    pg = ctx.new_page()
    try:
        pg.goto(server[0] + "?frame_ms=1000&max_iter=200&tol=0&min_iter=200")
        wait_for_app(pg)

        def shortcuts():
            return pg.evaluate("""() => { const o = {}; const walk = (r) => { for (const el of r.querySelectorAll(
              '[aria-keyshortcuts]')) o[el.textContent.trim()] = el.getAttribute('aria-keyshortcuts');
              for (const el of r.querySelectorAll('*')) if (el.shadowRoot) walk(el.shadowRoot); }; walk(document);
              return o; }""")
        want = {"▶ Run": "R", "Step": "S", "❚❚ Pause": "P", "Undo": "U Control+Z", "⇆ layout": "L"}
        # the controls' views are drawn after the page is ready (slower on a loaded machine): wait for the marks
        wait_until(lambda: shortcuts() == want, timeout=60)
        assert shortcuts() == want
        pg.keyboard.press("p")  # the run started on load: paused
        pg.get_by_role("button", name="Reset").click()
        wait_until(lambda: iteration(pg) == 0, timeout=120)
        pg.locator("body").click(position={"x": 5, "y": 700})  # the focus on the page, not on a control
        pg.keyboard.press("s")
        wait_until(lambda: iteration(pg) == 1, timeout=120)
        pg.keyboard.press("s")
        wait_until(lambda: iteration(pg) == 2, timeout=120)
        pg.keyboard.press("r")
        wait_until(lambda: iteration(pg) >= 4, timeout=120)
        pg.keyboard.press("p")
        # paused: a step goes exactly one further
        seen = wait_until(lambda: iteration(pg), timeout=120)
        pg.keyboard.press("s")
        wait_until(lambda: iteration(pg) >= seen + 1, timeout=120)
        # a point added by a click, taken back by U, then by Ctrl+Z after another
        sx, sy = canvas_xy(pg, 5.0, 5.0)
        pg.mouse.click(sx, sy)
        wait_until(lambda: points_count(pg) == 3, timeout=120)
        pg.locator("body").click(position={"x": 5, "y": 700})
        pg.keyboard.press("u")
        wait_until(lambda: points_count(pg) == 2, timeout=120)
        pg.mouse.click(sx, sy)
        wait_until(lambda: points_count(pg) == 3, timeout=120)
        pg.locator("body").click(position={"x": 5, "y": 700})
        pg.keyboard.press("Control+z")
        wait_until(lambda: points_count(pg) == 2, timeout=120)
        # typed into a field, the letters are text, not shortcuts
        field = pg.locator(".bft-x-in input").first
        field.click()
        field.press_sequentially("u")
        # the field lies under the hero plot in the presenter layout: reaching it scrolled the plot, so find the
        # point on the canvas again
        sx, sy = canvas_xy(pg, 5.0, 5.0)
        pg.mouse.click(sx, sy)
        wait_until(lambda: points_count(pg) == 3, timeout=120)
        field.click()
        field.press_sequentially("u")
        assert points_count(pg) == 3
    finally:
        ctx.close()
