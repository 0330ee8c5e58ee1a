"""Text from outside is text, in a real browser (issue 25): a share link with HTML, SVG, Markdown-link, script and
bold payloads in every parameter the app reads, and uploads with hostile JSON keys and values, CSV cells and headers
and file names.  Each page must show the payload as text (the message line quotes it: the test would pass vacuously
otherwise), run none of it and hold none of its elements, searched in the whole DOM including every shadow root
(Bokeh and Panel render inside shadow DOM)."""
import json
from urllib.parse import urlencode

import pytest

from app.configuration import URL_PARAMS
from app.views.share import LINK_ALIASES

pytestmark = pytest.mark.ui

#: Each payload sets window.__pwn to its own number when it runs; each fits the 40 characters a message quotes of
#: a refused value (app.views.share._short).
PAYLOADS = {"html": '<img src=x onerror="window.__pwn=1">',
            "svg": '<svg onload="window.__pwn=2">',
            "markdown link": "[click](javascript:window.__pwn=4)",
            "script": "<script>window.__pwn=5</script>",
            "bold": "<b>BOLD</b>"}


def links() -> dict[str, dict]:
    """The links opened, by test id: every URL parameter in each link, the payloads rotated so that over the five
    links each parameter gets each payload (one page per payload, not per parameter and payload: every refused value
    is quoted on the message line, so one page checks them all); the old names of :data:`LINK_ALIASES` in links of
    their own (a link with both names drops the old one).  The names come from the app's own lists: a new parameter
    is tested the day it is added."""
    out = {}
    for group, names in (("parameters", list(URL_PARAMS)), ("old-names", list(LINK_ALIASES))):
        for i in range(len(PAYLOADS)):
            out[f"{group}-{i}"] = {n: list(PAYLOADS.values())[(j + i) % len(PAYLOADS)] for j, n in enumerate(names)}
    return out


LINKS = links()


#: Set in every page before its own scripts: each run of a payload is recorded (and dialogs are caught below).
GUARD = """
window.__pwnLog = [];
Object.defineProperty(window, "__pwn", {configurable: false, get() { return undefined; },
                                         set(v) { window.__pwnLog.push(v); }});
"""

#: Everything a payload could have made, in the document and in every shadow root; and the message line's text.
JS_INJECTED = """() => {
  const out = {img: [], handlers: [], bold: [], scripts: [], links: [], attributes: [], message: null};
  const visit = (root) => {
    for (const el of root.querySelectorAll("*")) {
      const tag = el.localName;
      if (tag === "img" && el.getAttribute("src") === "x") out.img.push(el.outerHTML);
      if (tag === "b" && el.textContent.includes("BOLD")) out.bold.push(el.outerHTML);
      if (tag === "script" && el.textContent.includes("__pwn")) out.scripts.push(el.outerHTML);
      if (tag === "a" && /^\\s*javascript:/i.test(el.getAttribute("href") || "")) out.links.push(el.outerHTML);
      for (const a of el.attributes) {
        if (a.name.startsWith("on") && a.value.includes("__pwn")) out.handlers.push(el.outerHTML);
        else if (a.value.includes("__pwn")) out.attributes.push(el.outerHTML);
      }
      if (el.classList.contains("bft-message")) out.message = (el.shadowRoot || el).textContent;
      if (el.shadowRoot) visit(el.shadowRoot);
    }
  };
  visit(document);
  return out;
}"""

#: True once the message line holds ``text``, or once something of a payload is found or has run: a wait on the
#: page, not on a clock, that ends on the unescaped page too (where the text became elements).
JS_SETTLED = f"""(text) => {{
  const found = ({JS_INJECTED})();
  const message = found.message;
  delete found.message;
  return (message !== null && message.includes(text)) || window.__pwnLog.length > 0
    || Object.values(found).some((list) => list.length > 0);
}}"""

#: An image of the payload's address, made after the message: once its error event has come, an injected
#: ``<img src=x>`` asked for the same address before it and has had its error event too.
JS_PROBE = """() => new Promise((resolve) => {
  const img = new Image(); img.onerror = img.onload = () => resolve(true); img.src = "x";
})"""


@pytest.fixture(scope="module")
def context(browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    ctx.add_init_script(GUARD)
    yield ctx
    ctx.close()


def open_page(context, url):
    page = context.new_page()
    page.dialogs = []
    page.errors = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(url)
    return page


def assert_nothing_ran_or_was_made(page, *expected: str):
    """Each of ``expected`` is on the message line as text; no payload ran and none made an element."""
    for text in expected:
        page.wait_for_function(JS_SETTLED, arg=text, timeout=60000)
    page.evaluate(JS_PROBE)
    found = page.evaluate(JS_INJECTED)
    message = found.pop("message")
    assert found == {k: [] for k in found}, found
    assert page.evaluate("() => window.__pwnLog") == []
    assert page.dialogs == []
    for text in expected:
        assert text in message, (text, message)


def test_the_links_give_every_parameter_every_payload_and_no_old_name_meets_its_new_one():
    pairs = {(n, p) for q in LINKS.values() for n, p in q.items()}
    assert pairs == {(n, p) for n in list(URL_PARAMS) + list(LINK_ALIASES) for p in PAYLOADS.values()}
    assert all(len(p) <= 40 for p in PAYLOADS.values())
    for q in LINKS.values():
        assert not any(old in q and new in q for old, new in LINK_ALIASES.items()), q


@pytest.mark.parametrize("name", list(LINKS))
def test_a_link_with_payloads_in_every_parameter_shows_them_as_text(context, server, name):
    query = LINKS[name]
    page = open_page(context, server[0] + "?" + urlencode(query))
    try:
        # each value is refused and quoted, under its current name ("ignored l0=..." for mass2=)
        assert_nothing_ran_or_was_made(page, "From the link",
                                       *(f"{LINK_ALIASES.get(n, n)}={p}" for n, p in query.items()))
        assert page.errors == []
    finally:
        page.close()
    log = open(server[1]).read()
    assert "Traceback" not in log, log[-3000:]


IMG, SVG, MD, SCRIPT, BOLD = PAYLOADS.values()
#: Uploads, in order on one page: (file name, content, text the message quotes).  JSON keys and values, CSV cells and
#: headers (a header of three names over two columns is refused with its names), and file names.
UPLOADS = [
    ("key.json", json.dumps({IMG: 1}), IMG),
    ("prior-key.json", json.dumps({"model": "density", "prior": {SCRIPT: 1}}), SCRIPT),
    ("model.json", json.dumps({"model": SVG}), SVG),
    ("template.json", json.dumps({"model": "density", "templates": [{"kind": MD}], "weights": [1]}), MD),
    ("method.json", json.dumps({"model": "density", "solver": {"method": BOLD}}), BOLD),
    ("data.json", json.dumps({"model": "density", "data": [[IMG, 1]]}), IMG),
    ("cell.csv", f"x,y\n3,4\n5,{SCRIPT}\n", SCRIPT),
    ("header.csv", "<svg/onload=window.__pwn=7>,<b>BOLD</b>,z\n3,4\n5,6\n", "<svg/onload=window.__pwn=7>"),
    ('<img src=x onerror="window.__pwn=8">.csv', "x,y\n3,4\n5,6\n", '<img src=x onerror="window.__pwn=8">.csv'),
    ("[a](javascript:window.__pwn=9).csv", "x,y\n3,4\n5,nope\n", "[a](javascript:window.__pwn=9).csv"),
    ("<b>BOLD</b>.txt", "<svg onload=window.__pwn=10>\n3\n4\n", "<b>BOLD</b>.txt"),
]


def test_uploads_with_hostile_keys_values_cells_headers_and_file_names_show_them_as_text(context, server):
    page = open_page(context, server[0])
    try:
        page.wait_for_function(JS_SETTLED, arg="", timeout=60000)  # the message line is there
        for name, content, quoted in UPLOADS:
            mime = "application/json" if name.endswith(".json") else "text/csv"
            page.locator("input[type=file]").set_input_files(
                files=[{"name": name, "mimeType": mime, "buffer": content.encode()}])
            assert_nothing_ran_or_was_made(page, quoted)
        assert page.errors == []
    finally:
        page.close()
    log = open(server[1]).read()
    assert "Traceback" not in log, log[-3000:]
