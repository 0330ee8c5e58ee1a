"""Issue 28, the overfitting alarm in a real browser: ``data-testid="overfitting-alarm"`` is on the page exactly
while the diagnosis at the converged solution fires (held-out error against the best over a lambda scan)."""
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from app.harness import DIAGNOSIS_WAIT_S, canvas_xy, column, wait_for_app, wait_until

from .test_dashboard import points_count
from .test_lecture_traces import fresh, load_preset

pytestmark = pytest.mark.ui

ALARM = "[data-testid=overfitting-alarm]"


def alarm_text(page) -> str | None:
    loc = page.locator(ALARM)
    return loc.first.inner_text() if loc.count() else None


def test_the_alarm_fires_on_the_overfitting_link_with_a_small_lambda(browser, server):
    ctx, pg = fresh(browser, server[0] + "?preset=overfitting&lam=0.01")
    try:
        wait_until(lambda: alarm_text(pg) is not None, timeout=DIAGNOSIS_WAIT_S)
        text = alarm_text(pg)
        assert text.startswith("overfitting (true density): held-out error") and "raise lambda" in text
        assert pg.locator(ALARM).first.is_visible()
        assert pg.errors == []
    finally:
        ctx.close()


def test_the_alarm_fires_on_seven_clicked_points_at_a_small_lambda(page):
    page.get_by_role("button", name="Clear points").click()
    wait_until(lambda: points_count(page) == 0)
    for k, (x, y) in enumerate([(2, 4), (3, 5), (5, 8), (6, 9), (7, 7), (8, 12), (9, 10)]):
        sx, sy = canvas_xy(page, float(x), float(y))
        page.mouse.click(sx, sy)
        wait_until(lambda k=k: points_count(page) == k + 1)
    # lambda = 0.01 through the share link's state: the address bar carries it (a slider drag is not needed)
    parts = urlsplit(page.evaluate("() => window.location.href"))
    query = dict(parse_qsl(parts.query), lam="0.01")
    page.goto(urlunsplit(parts._replace(query=urlencode(query))))
    wait_for_app(page)
    wait_until(lambda: len(column(page, "bft-points-source", "x") or []) == 7, timeout=DIAGNOSIS_WAIT_S)
    wait_until(lambda: alarm_text(page) is not None, timeout=DIAGNOSIS_WAIT_S)
    assert "overfitting" in alarm_text(page) and "raise lambda" in alarm_text(page)
    assert dict(parse_qsl(urlsplit(page.evaluate("() => window.location.href")).query))["lam"] == "0.01"


@pytest.mark.parametrize("name", ["fig21", "fig23", "fig26", "fig28", "metastable_mixture"])
def test_no_alarm_at_the_presets_own_lambda(page, name):
    load_preset(page, name)
    # the diagnosis is computed once the run has converged: its curve appears, and no alarm with it
    wait_until(lambda: page.locator(".bft-overfitting .bk-Canvas, .bft-overfitting canvas").count() > 0
               or page.evaluate("""() => { for (const d of Bokeh.documents) { const s =
                 d.get_model_by_name('bft-overfit-scan'); if (s) return s.data.lam.length > 0; } return false; }"""),
               timeout=DIAGNOSIS_WAIT_S)
    wait_until(lambda: page.evaluate("""() => { for (const d of Bokeh.documents) { const s =
                 d.get_model_by_name('bft-overfit-scan'); if (s) return s.data.lam.length > 0; } return false; }"""),
               timeout=DIAGNOSIS_WAIT_S)
    assert alarm_text(page) is None
