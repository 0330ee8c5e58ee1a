"""A setup too large for a link, in a real browser (issue 25): the address bar never holds a link longer than the
app reads (app.views.share.MAX_QUERY_CHARS); it holds ``?too_long=N`` and the share panel offers the configuration
file, which a fresh page takes back by upload to the same state."""
import json
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest

from app.harness import VIEWPORT, longest_link, wait_for_app, wait_until
from app.views.share import MAX_QUERY_CHARS, TOO_LONG_KEY

pytestmark = pytest.mark.ui

#: The text of the first element with ``cls`` among its classes, in the document or any shadow root (a Panel text
#: pane keeps its text in its own shadow root, beside its stylesheets), or null.
JS_TEXT_OF = """(cls) => {
  const text = (root) => Array.from(root.childNodes).filter((n) => !["STYLE", "LINK"].includes(n.nodeName))
    .map((n) => n.textContent).join("");
  const find = (root) => {
    for (const el of root.querySelectorAll("*")) {
      if (el.classList.contains(cls)) return text(el.shadowRoot || el);
      if (el.shadowRoot) { const t = find(el.shadowRoot); if (t !== null) return t; }
    }
    return null;
  };
  return find(document);
}"""


def text_of(page, cls) -> str:
    return (page.evaluate(JS_TEXT_OF, cls) or "").strip()


def long_document(nx=46, ny=71, seed=5) -> dict:
    """A density problem with an array template of nx x ny values of 12 significant digits: its link would be far
    longer than a link may be (each value about 14 characters and a percent-encoded comma)."""
    values = np.round(1.0 + np.random.default_rng(seed).random((nx, ny)), 12).tolist()
    return {"model": "density", "data": [[3, 3], [7, 12], [5, 8]],
            "grid": {"x": {"min": 1, "max": 10, "n": nx}, "y": {"min": 1, "max": 15, "n": ny}},
            "templates": [{"kind": "uniform"}, {"kind": "array", "values": values}], "weights": [0.5, 0.5]}


def upload(page, name, data: bytes):
    page.locator("input[type=file]").set_input_files(files=[{"name": name, "mimeType": "application/json",
                                                             "buffer": data}])


def query_of(page) -> str:
    return urlsplit(page.evaluate("() => location.href")).query


def download_config(page) -> dict:
    with page.expect_download() as info:
        page.get_by_text("Download configuration (JSON)", exact=True).click()
    return json.loads(open(info.value.path()).read())


def test_a_setup_too_large_for_a_link_travels_as_a_file_and_comes_back_the_same(page, browser, server):
    doc = long_document()
    upload(page, "long.json", json.dumps(doc).encode())
    wait_until(lambda: text_of(page, "bft-message").startswith("Loaded the configuration."))
    # the address bar: the short note with the length the link would have had, over the limit, never the link
    wait_until(lambda: TOO_LONG_KEY in query_of(page))
    query = dict(parse_qsl(query_of(page)))
    assert list(query) == [TOO_LONG_KEY] and int(query[TOO_LONG_KEY]) > MAX_QUERY_CHARS
    assert len(page.evaluate("() => location.href")) < 200
    note = text_of(page, "bft-link-note")
    assert "too large for a link" in note and f"{int(query[TOO_LONG_KEY]):,} characters" in note, note
    exported = download_config(page)
    assert exported["templates"][1]["values"] == doc["templates"][1]["values"]
    # a fresh page takes the file back: the same state, the same note
    ctx = browser.new_context(viewport=VIEWPORT)
    try:
        fresh = ctx.new_page()
        errors = []
        fresh.on("pageerror", lambda e: errors.append(str(e)))
        fresh.goto(server[0])
        wait_for_app(fresh)
        assert TOO_LONG_KEY not in query_of(fresh) and text_of(fresh, "bft-link-note") == ""
        upload(fresh, "bftcore-config.json", json.dumps(exported).encode())
        wait_until(lambda: text_of(fresh, "bft-message").startswith("Loaded the configuration."))
        wait_until(lambda: dict(parse_qsl(query_of(fresh))) == query)
        assert text_of(fresh, "bft-link-note") == note
        assert download_config(fresh) == exported
        # the note's link opened: the defaults, and a message that says where the setup is
        fresh.goto(server[0] + "?" + TOO_LONG_KEY + "=" + query[TOO_LONG_KEY])
        wait_for_app(fresh)
        wait_until(lambda: text_of(fresh, "bft-message").startswith("This link stands for a setup too large"))
        assert errors == []
    finally:
        ctx.close()
    assert page.errors == []


def test_the_longest_link_the_app_reads_opens_on_a_plain_panel_serve(browser, server):
    """``panel serve app`` alone, no proxy: a link of MAX_QUERY_CHARS characters of random decimals (the least
    compressible) opens with all its points.  Bokeh's session token used to carry the query again, compressed, in a
    header of the websocket request that repeats it in its address; from about 34 KiB on the two passed Tornado's
    64 KiB and the page stayed blank (measured: 32 KiB opened, 36 KiB did not).  app/app_hooks.py keeps the query out
    of the token."""
    url, _ = server
    query, n = longest_link(MAX_QUERY_CHARS)
    page = browser.new_page(viewport=VIEWPORT)
    try:
        page.goto(url + query)
        wait_for_app(page)
        page.get_by_text(f"{n} points", exact=False).first.wait_for()
    finally:
        page.close()
