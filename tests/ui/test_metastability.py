"""Issue 28, metastability you can watch, in a real browser: the alarm (``data-testid="metastability-alarm"``) on a
run that ends on the wrong template, its jump, the branch diagram beside the heatmap filling in, and the dot that
jumps when beta moves past the end of its branch."""
import pytest

from app.harness import DIAGNOSIS_WAIT_S, column, wait_until

from .test_lecture_traces import load_preset

pytestmark = pytest.mark.ui

ALARM = "[data-testid=metastability-alarm]"

#: Set the beta slider as a drag ending at ``index`` would (the log slider's position: 10**-3 at 0, 90 a decade).
JS_BETA = """(index) => { for (const d of Bokeh.documents) for (const m of d._all_models.values()) {
  if (m.properties && m.properties.value_throttled && String(m.title || "").startsWith("β (mixture")) {
    m.value = index; m.value_throttled = index; return true; } } return false; }"""


def alarm_text(page) -> str | None:
    loc = page.locator(ALARM)
    return loc.first.inner_text() if loc.count() else None


def branches_complete(page, n=3, points=13) -> bool:
    ys = column(page, "bft-branches", "ys") or []
    return len(ys) == n and all(len(y) == points for y in ys)


def dot(page) -> float:
    return column(page, "bft-branch-dot", "a")[0]


def test_the_alarm_fires_when_the_run_ends_on_the_wrong_template_and_a_click_jumps(page):
    load_preset(page, "fig28")  # the paper's Fig 28: the run stays near t_2
    wait_until(lambda: alarm_text(page) is not None, timeout=DIAGNOSIS_WAIT_S)
    text = alarm_text(page)
    assert text.startswith("metastable: a solution with energy lower by") and "(from " in text
    assert page.locator(ALARM).first.is_visible()
    wait_until(lambda: branches_complete(page), timeout=DIAGNOSIS_WAIT_S)
    ys = column(page, "bft-branches", "ys")
    assert min(ys[1]) < 0.05 and max(ys[1]) > 0.95  # the t_2 branch: a_1 near 0, then it ends and jumps to t_1
    assert dot(page) < 0.05
    page.get_by_role("button", name="Jump there").click()
    wait_until(lambda: dot(page) > 0.99, timeout=60)
    wait_until(lambda: alarm_text(page) is None, timeout=60)


def test_no_alarm_on_the_lowest_solution(page):
    load_preset(page, "metastable_mixture")
    wait_until(lambda: branches_complete(page), timeout=DIAGNOSIS_WAIT_S)
    wait_until(lambda: dot(page) > 0.99, timeout=60)
    assert alarm_text(page) is None


def test_moving_beta_past_the_end_of_the_branch_shows_the_jump(page):
    load_preset(page, "fig28")
    wait_until(lambda: branches_complete(page), timeout=DIAGNOSIS_WAIT_S)
    assert dot(page) < 0.05
    assert page.evaluate(JS_BETA, 200)  # beta = 0.3, below the fold (about 0.32) where the t_2 branch ends
    wait_until(lambda: abs(column(page, "bft-branch-dot", "beta")[0] - 0.3) < 1e-9, timeout=60)
    wait_until(lambda: dot(page) > 0.99, timeout=60)
