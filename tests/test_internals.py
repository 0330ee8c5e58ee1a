"""The private framework use of app.transport that is not the transport itself: param's check of a value without
setting it, and the dashboard's own rules in it (``ruled``).  It fails loudly on a param where
Parameter._validate no longer refuses, is no longer called before a value is set, or sets the value."""
import html

import param
import pytest

from app.session import BFTSession
from app.transport import check_value, ruled


def test_check_value_refuses_without_setting():
    class P(param.Parameterized):
        x = param.Number(1.0, bounds=(0, 2))
        names = param.List([], item_type=str)

    p = P()
    with pytest.raises(ValueError, match="at most 2"):
        check_value(p.param["x"], 3.0)
    with pytest.raises((ValueError, TypeError)):
        check_value(p.param["names"], [1])
    check_value(p.param["x"], 1.5)                 # accepted values pass
    assert p.x == 1.0 and p.names == []            # and nothing is set


def test_check_value_runs_the_dashboards_own_parameter_rules():
    s = BFTSession(live=False)
    before = list(s.data)
    with pytest.raises(ValueError):
        check_value(s.param["data"], [[1.0]])    # a point is a pair (app.session._Points)
    with pytest.raises(ValueError):
        check_value(s.param["lam"], -1.0)
    assert s.data == before


def test_a_ruled_parameter_refuses_before_the_value_is_set_and_in_check_value():
    def even(val):
        if val % 2:
            raise ValueError(f"{val} is odd")

    class P(param.Parameterized):
        n = ruled(param.Integer, even)(2, bounds=(0, 10))

    p = P()
    with pytest.raises(ValueError, match="odd"):
        p.n = 3
    with pytest.raises(ValueError, match="at most 10"):  # the type's own check still runs
        p.n = 12
    with pytest.raises(ValueError, match="odd"):
        check_value(p.param["n"], 5)
    p.n = 4
    assert p.n == 4
    with pytest.raises(ValueError, match="odd"):
        P(n=7)                                       # and at construction


def test_the_text_only_pane_sends_its_escaped_text_to_its_model_alone():
    """app.transport.TextOnlyStr rides on Panel's private pane hooks: the model must get the escaped text at first
    render and again after a change, or a message quoting a link could run its markup."""
    from app.views.common import LiveText

    def inner_html(model):  # Panel's HTML model carries its markup escaped once; the page unescapes it
        return html.unescape(model.text)

    line = LiveText()
    line.set("<img src=x onerror=alert(1)>")
    model = line.pane.get_root()
    assert "<img" not in inner_html(model) and "&lt;img src=x" in inner_html(model)
    line.set("a <b>second</b> message")
    assert "<b>" not in inner_html(model) and "a &lt;b&gt;second" in inner_html(model)


def test_without_debounce_applies_a_browser_change_at_once_and_others_after_panels_debounce(monkeypatch):
    """app.transport.without_debounce: Panel schedules the listed properties' changes from the browser at once (a
    task on the event loop) instead of after its debounce (a timeout callback); other widgets keep the debounce."""
    import panel as pn
    from bokeh.document import Document

    from app.transport import without_debounce

    class Served:  # what Panel asks of a served document's session context here: that there is one
        pass

    def change(widget):
        doc = Document()
        model = widget.get_root(doc)
        scheduled = []
        doc._session_context = lambda: Served()
        doc.add_timeout_callback = lambda cb, ms: scheduled.append(("after", ms))
        monkeypatch.setattr(param.parameterized, "async_executor", lambda cb: scheduled.append(("at once", None)))
        widget._server_change(doc, model.ref["id"], None, "value", 0, 3)
        widget._server_change(doc, model.ref["id"], None, "value_throttled", 0, 3)
        return scheduled

    quick = pn.widgets.IntSlider(start=0, end=10, value=0)
    without_debounce(quick, "value", "value_throttled")
    assert change(quick) == [("at once", None)]  # the second change joins the first one's pending batch
    plain = pn.widgets.IntSlider(start=0, end=10, value=0)
    assert change(plain) == [("after", type(plain)._debounce)]
