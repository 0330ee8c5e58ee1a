"""The learning-curve tab's table of d-dimensional inputs in a real browser (seed 002, issue 30 part 3): a small CSV
uploaded through the panel's own file input, a categorical column refused until it is one-hot encoded, then the
replica theory and the bootstrap simulation drawn for the whole table and its halves, with the progress counted, and
the theory of random subsets (Fig 2) as a band."""
import re
import time

import numpy as np
import pytest

from app.harness import column, wait_until
from bftcore.studies.learning import parse_sizes

pytestmark = pytest.mark.ui

SCREENSHOT = "assets/screenshots/replica-table.png"


def table_csv(N: int = 60) -> bytes:
    rng = np.random.default_rng(4)
    sex = rng.choice(["M", "F", "I"], N)
    a, b = rng.uniform(0, 1, N), rng.normal(0, 2, N)
    y = np.sin(3 * a) + 0.3 * b + 0.5 * (sex == "I") + 0.3 * rng.standard_normal(N)
    return ("sex,length,weight,rings\n" + "".join(f"{s},{p:.5f},{q:.5f},{r:.5f}\n"
                                                 for s, p, q, r in zip(sex, a, b, y))).encode()


#: The own text of the first element with a class (its shadow root holds stylesheets beside it), or "".
JS_TEXT = """(cls) => {
  const find = (root) => {
    for (const el of root.querySelectorAll("*")) {
      if (el.classList.contains(cls)) return Array.from((el.shadowRoot || el).childNodes)
        .filter((n) => !["STYLE", "LINK"].includes(n.nodeName)).map((n) => n.textContent).join("");
      if (el.shadowRoot) { const t = find(el.shadowRoot); if (t !== null) return t; }
    }
    return null;
  };
  return find(document) || "";
}"""


def text_of(page, cls: str) -> str:
    return re.sub(r"\s+", " ", page.evaluate(JS_TEXT, cls)).strip()


def note(page) -> str:
    return text_of(page, "bft-replica-note")


def finite(values) -> int:
    return sum(1 for v in values or [] if v == v)


def test_a_table_uploaded_in_the_learning_tab_gets_its_replica_curve(page):
    page.get_by_text("Learning curve", exact=True).first.click()   # the tab, drawn when first opened
    upload = page.locator(".bft-replica-upload input[type=file]")
    upload.wait_for(state="attached")
    upload.set_input_files(files=[{"name": "shells.csv", "mimeType": "text/csv", "buffer": b"a,b,y\n1,2,3\n1,2\n"}])
    wait_until(lambda: "Refused: shells.csv, line 3: 2 cells where the header names 3 columns" in note(page))
    upload.set_input_files(files=[{"name": "shells.csv", "mimeType": "text/csv", "buffer": table_csv()}])
    wait_until(lambda: "Loaded 60 rows and 4 columns from shells.csv; target rings" in note(page))
    start = page.get_by_role("button", name="Replica curve", exact=True)
    start.click()
    wait_until(lambda: "column 'sex' of shells.csv holds" in note(page) and "--one-hot sex" in note(page))
    # one-hot the sex, the Abalone settings (l2 = 10, v_i = var_i, sigma^2 = 0.1), a small curve
    page.locator(".bft-replica-onehot input").first.click()
    page.locator(".bft-replica-onehot .choices__list--dropdown .choices__item", has_text="sex").first.click()
    page.keyboard.press("Escape")
    for label, value in (("l²", "10"), ("σ²", "0.1"), ("m to", "240"), ("sizes", "5"), ("resamples", "6"),
                         ("subset rows (0: none)", "30"), ("subsets", "4")):
        box = page.locator(f".bk-input-group:has(label:text-is('{label}')) input").first
        box.fill(value)
        box.press("Enter")
    page.locator(".bk-input-group:has(label:text-is('scales v_i')) select").select_option("var")
    time.sleep(0.5)
    start.click()
    wait_until(lambda: "Done:" in note(page), timeout=120)
    assert "90 of 90 resamples" in text_of(page, "bft-replica-count")
    for key in ("variance", "error"):
        for part in ("all", "first-half", "second-half"):
            assert finite(column(page, f"bft-replica-{key}-theory-{part}", "v")) == 5
            assert finite(column(page, f"bft-replica-{key}-simulation-{part}", "v")) == 5
    assert column(page, "bft-replica-variance-theory-all", "m") == parse_sizes("10:240:5")
    # Fig 2's random subsets of 30 rows: their mean and the range over 4 subsets, a band around it
    lo, mid, hi = (column(page, "bft-replica-variance-theory-subset", c) for c in ("lo", "v", "hi"))
    assert finite(mid) == 5 and all(a <= b <= c for a, b, c in zip(lo, mid, hi)) and lo[0] < hi[0]
    theory = column(page, "bft-replica-variance-theory-all", "v")
    assert all(a > b for a, b in zip(theory, theory[1:]))   # the posterior variance falls with m
    page.locator(".bft-replica-note").first.scroll_into_view_if_needed()
    page.mouse.wheel(0, 300)
    time.sleep(0.5)
    page.screenshot(path=SCREENSHOT)
    assert page.errors == []
