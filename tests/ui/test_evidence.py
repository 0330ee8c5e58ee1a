"""The evidence card in a real browser (issue 14): the log evidence against λ with the current λ marked, the band of
h(x) over the heatmap, "Choose λ by evidence" moving λ, and the curve following the clicks."""
import re

import pytest

from app.harness import canvas_xy, column, wait_until

pytestmark = pytest.mark.ui

JS_PROP = """([name, prop]) => { for (const d of Bokeh.documents) { const m = d.get_model_by_name(name);
  if (m) return m[prop]; } return null; }"""


def path(page):
    return column(page, "bft-evidence-path", "lam"), column(page, "bft-evidence-path", "logev")


def test_the_evidence_card_draws_the_path_marks_lambda_and_chooses_it(page):
    # closed, it computes nothing
    assert len(column(page, "bft-evidence-path", "lam") or []) == 0
    page.get_by_text("Evidence: choose λ from the data").first.click()
    wait_until(lambda: len(column(page, "bft-evidence-path", "lam") or []) >= 20, timeout=180)
    lam, logev = path(page)
    assert all(a < b for a, b in zip(lam, lam[1:]))               # λ increasing, log-spaced
    best = column(page, "bft-evidence-best", "lam")[0]
    assert max(logev) <= column(page, "bft-evidence-best", "logev")[0] + 1e-9   # the maximum is marked
    assert page.evaluate(JS_PROP, ["bft-evidence-current", "location"]) == 1.0   # the page's λ, marked
    # the posterior band of h(x) lies over the heatmap: one value per x node, lower below upper
    lo = wait_until(lambda: column(page, "bft-posterior-band", "lo"))
    hi = column(page, "bft-posterior-band", "hi")
    assert len(lo) == 10 and all(a < b for a, b in zip(lo, hi))
    # choose λ: the marker of the current λ moves to the maximum, and the info line says so
    page.get_by_role("button", name="Choose λ by evidence").click()
    wait_until(lambda: abs(page.evaluate(JS_PROP, ["bft-evidence-current", "location"]) - best) < 1e-9 * best)
    info = wait_until(lambda: page.get_by_text(re.compile(r"^Maximum at λ")).first.inner_text())
    assert f"λ = {best:.3g}" in info and f"the current λ is {best:.3g}" in info
    # the curve follows the clicks (the card stays open beside the heatmap)
    before = column(page, "bft-evidence-best", "logev")[0]
    for xy in ((2.0, 4.0), (8.0, 11.0), (5.0, 7.0)):
        n = len(column(page, "bft-points-source", "x"))
        page.mouse.click(*canvas_xy(page, *xy))
        wait_until(lambda: len(column(page, "bft-points-source", "x")) == n + 1)  # each click landed
    # five points are less probable than two under any prior: the maximum drops
    wait_until(lambda: column(page, "bft-evidence-best", "logev")[0] < before - 1.0, timeout=180)
    assert not page.errors, page.errors
