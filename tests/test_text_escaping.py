"""Text from outside is text (issue 25): what the browser gets from the message line (LiveText) and from a Markdown
pane holding :func:`app.views.common.markdown_text` shows the text itself, with no element, no link and no TeX for
MathJax.  The browser's side is modelled as Panel's own code does it (panel/models/html.ts): the model's text is
HTML-decoded once, then set as innerHTML (tests/ui/test_injection.py does the same in Chromium)."""
import html
import os
import sys
from html.parser import HTMLParser

import panel as pn
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from app.views.common import LiveText, html_text, markdown_text  # noqa: E402

PAYLOADS = ['<img src=x onerror="window.__pwn=1">', '<svg onload="window.__pwn=2">',
            "[click](javascript:window.__pwn=4)", "<script>window.__pwn=5</script>", "<b>BOLD</b>",
            "$$\\href{javascript:window.__pwn=6}{x}$$", "\\(x\\) \\[y\\]", "&lt;b&gt; &amp; &#60;", "*em* _u_ `c`",
            "# heading\n\n    code\n- item\n1. item\n> quote", "http://evil.example/x www.evil.example :smile:",
            "a | b\n--|--\n1 | 2", "![i](x)", "<!-- c -->", "\\<b>x</b>", "~~s~~", "[^1]", "<http://a.b>"]

#: Any text, with the characters that mean something in HTML, Markdown and TeX made frequent.
TEXTS = st.text(alphabet=st.sampled_from(list("<>&\"'$\\`*_[](){}#+-.!|~:/=;@ \n\tabx1") + ["é", "λ", "₁"]),
                max_size=60) | st.text(max_size=40) | st.sampled_from(PAYLOADS)


class _Page(HTMLParser):
    """What innerHTML makes of an HTML string: its elements (tag, attributes) and its text."""

    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.tags: list = []
        self.text = ""
        self.feed(source)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text += data

    def handle_comment(self, data):
        self.tags.append(("!--", {}))


def _no_tex(source: str):
    """The delimiters of Bokeh's MathJax ``find_tex`` (FindTeX's defaults: $$, \\( and \\[) are not in the HTML."""
    assert "$$" not in source and "\\(" not in source and "\\[" not in source, source


def _message_html(model) -> str:
    """The HTML the browser sets as innerHTML for the message line's model: its text decoded once."""
    return html.unescape(model.text)


@pytest.fixture(scope="module")
def message():
    line = LiveText("")
    model = line.pane.get_root()
    return line, model


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXTS)
def test_the_message_line_shows_any_text_as_itself(message, text):
    line, model = message
    line.set(text)
    assert line.text == text  # the session's text is kept as it is; only what is sent is escaped
    source = _message_html(model)
    assert source.startswith("<pre>") and source.endswith("</pre>")
    page = _Page(source)
    assert page.tags == [("pre", {})], source
    assert page.text == (text or " ")
    _no_tex(source)


def test_the_message_line_sends_its_text_alone(message):
    """LiveText's point (app/views/common.py): a new text changes the model's text and nothing else."""
    line, model = message
    line.set("first")
    changes = []
    model.on_change("text", lambda attr, old, new: changes.append(attr))
    stylesheets = list(model.stylesheets)
    line.set("<img src=x onerror=alert(1)>")
    assert changes == ["text"] and list(model.stylesheets) == stylesheets
    assert "<img" not in _message_html(model).replace("&lt;img", "")


@settings(max_examples=300, deadline=None)
@given(text=TEXTS)
def test_a_markdown_pane_shows_outside_text_as_itself(text):
    pane = pn.pane.Markdown("**From the file:** " + markdown_text(text) + " (read-only)")
    source = html.unescape(pane._transform_object(pane.object)["object"])  # as the browser has it
    page = _Page(source)
    # the trusted Markdown around it still renders; the outside text adds only the empty spans that keep "$" and
    # "\" from making TeX delimiters
    assert [t for t, _ in page.tags if t != "span"] == ["p", "strong"], source
    assert all(a == {} for t, a in page.tags if t == "span")
    shown = " ".join(text.split()).replace("\x00", "\ufffd")  # CommonMark shows a NUL as U+FFFD
    assert page.text == "From the file: " + shown + " (read-only)\n"
    _no_tex(source)


@given(text=TEXTS)
def test_html_text_is_decoded_back_to_the_text_with_no_element(text):
    page = _Page(html_text(text))
    assert page.tags == [] and page.text == text
    assert "$" not in html_text(text) and "\\" not in html_text(text)
