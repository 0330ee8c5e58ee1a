"""Screenshots of the main views for the README (assets/screenshots/*.png); run with BFT_SCREENSHOTS=1."""
import os
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ui, pytest.mark.skipif(not os.environ.get("BFT_SCREENSHOTS"),
                                                 reason="set BFT_SCREENSHOTS=1 to refresh the screenshots")]
OUT = Path(__file__).resolve().parents[2] / "assets" / "screenshots"


def test_screenshots(page):
    OUT.mkdir(parents=True, exist_ok=True)
    time.sleep(2)
    page.screenshot(path=str(OUT / "live-fit-fig14.png"))
    page.locator("select:has(option[value='fig27'])").select_option("fig27")
    time.sleep(6)
    page.screenshot(path=str(OUT / "overfitting-fig27.png"))
    page.get_by_text("β sweep").first.click()
    page.get_by_role("button", name="Run β sweep").click()
    time.sleep(8)
    page.screenshot(path=str(OUT / "beta-sweep.png"))
    page.get_by_text("Live fit").first.click()
    page.locator("select:has(option[value='regression'])").select_option("regression")
    time.sleep(4)
    page.screenshot(path=str(OUT / "regression.png"))
    # each view drew something of its own, and nothing went wrong in the page while it did
    shots = [(OUT / n).read_bytes() for n in ("live-fit-fig14.png", "overfitting-fig27.png", "beta-sweep.png",
                                              "regression.png")]
    assert len(set(shots)) == len(shots)
    assert page.errors == []
