"""The dashboard's per-frame plumbing, without a browser: frames as one message, the heatmap colour scale, the
trace axes.  (What a real browser receives is tested in tests/ui/test_traffic.py.)"""
import weakref

import numpy as np
import pytest
from bokeh.document import Document
from bokeh.models import ColumnDataSource, LinearColorMapper
from bokeh.protocol import Protocol

from app.state import release_as_one_message  # noqa: E402
from app.views.canvas import NICE, colour_range, nice_ceil, nice_floor  # noqa: E402
from app.views.traces import padded  # noqa: E402


class _Socket:
    def __init__(self):
        self.sent = []

    def send_message(self, msg):
        self.sent.append(msg)
        return ("write", msg)


class _Connection:
    def __init__(self):
        self._socket, self.protocol = _Socket(), Protocol()


class _Session:
    """What release_as_one_message uses of Bokeh's ServerSession; its own writer sends one message per event."""

    def __init__(self, doc, n_connections=2):
        self._pending_writes, self._current_patch_connection, self.per_event = [], None, []
        self._subscribed_connections = {_Connection() for _ in range(n_connections)}
        doc.callbacks.on_change_dispatch_to(self)

    def _document_patched(self, event):
        self.per_event.append(event)


class _Context:
    def __init__(self, session):
        self.session = session


def served_document():
    doc = Document()
    src = ColumnDataSource(dict(image=[np.zeros((2, 2))]), tags=[0])
    mapper = LinearColorMapper(low=0, high=1)
    doc.add_root(src)
    doc.add_root(mapper)
    session = _Session(doc)
    ctx = _Context(session)
    doc._session_context = weakref.ref(ctx)
    return doc, src, mapper, session, ctx


def test_held_frame_goes_out_as_one_message_per_connection_with_every_change():
    doc, src, mapper, session, _ctx = served_document()
    seen = []
    mapper.on_change("high", lambda attr, old, new: seen.append(new))
    doc.hold("combine")
    src.tags = [1]
    mapper.update(low=0.1, high=0.6)
    src.data = dict(image=[np.ones((2, 2))])
    release_as_one_message(doc)
    assert session.per_event == []                     # Bokeh's per-event writer was not used
    assert seen == [0.6]                                # Python property callbacks still ran, once
    assert len(session._pending_writes) == 2            # one write per connection
    for conn in session._subscribed_connections:
        (msg,) = conn._socket.sent
        kinds = sorted((e["kind"], e.get("attr")) for e in msg.content["events"])
        assert kinds == [("ColumnDataChanged", "data"), ("ModelChanged", "high"), ("ModelChanged", "low"),
                         ("ModelChanged", "tags")]
    assert doc.callbacks.hold_value is None
    mapper.low = 0.2                                    # outside a hold, the session writes as Bokeh does
    assert len(session.per_event) == 1


def test_a_change_sent_by_a_browser_is_not_echoed_to_that_browser():
    doc, src, mapper, session, _ctx = served_document()
    origin = next(iter(session._subscribed_connections))
    session._current_patch_connection = origin
    doc.hold("combine")
    mapper.update(low=0.3)
    src.update(tags=[5])
    src.document.callbacks._held_events[-1].setter = session  # as if the browser had sent it
    release_as_one_message(doc)
    for conn in session._subscribed_connections:
        (msg,) = conn._socket.sent
        attrs = sorted(e["attr"] for e in msg.content["events"])
        assert attrs == (["low"] if conn is origin else ["low", "tags"])


def test_without_a_server_session_it_is_bokehs_unhold():
    doc = Document()
    mapper = LinearColorMapper(low=0, high=1)
    doc.add_root(mapper)
    seen = []
    mapper.on_change("low", lambda attr, old, new: seen.append(new))
    doc.hold("combine")
    mapper.low = 0.5
    release_as_one_message(doc)
    assert seen == [0.5] and doc.callbacks.hold_value is None


@pytest.mark.parametrize("v", [1e-7, 3.3e-5, 0.013, 0.5, 0.599, 0.6, 0.61, 1.0, 7.9, 8.1, 12345.0])
def test_nice_bounds_are_the_nearest_nice_numbers(v):
    up, down = nice_ceil(v), nice_floor(v)
    assert down <= v * (1 + 1e-12) and up >= v * (1 - 1e-12)
    for n in (up, down):
        mant = n / 10 ** np.floor(np.log10(n))
        assert any(abs(mant - m) < 1e-9 for m in NICE)
    # nothing nice strictly between: the next nice numbers beyond are outside [down, up]
    k = np.floor(np.log10(v))
    candidates = [m * 10.0 ** e for e in (k - 1, k, k + 1) for m in NICE]
    assert not any(down * (1 + 1e-9) < c < up * (1 - 1e-9) for c in candidates)


def test_colour_range_of_a_density_starts_at_zero_contains_the_data_and_holds_under_small_changes():
    rng = np.random.default_rng(0)
    P = rng.uniform(0.01, 0.57, (10, 15))
    lo, hi = colour_range(P)
    assert lo == 0.0 and hi >= P.max() and hi <= (4 / 3) * P.max()
    assert colour_range(P * 1.01) == (lo, hi)           # a frame that moves the field a little keeps the scale
    assert colour_range(P * 1.2)[1] > hi                # one that leaves the scale gets a new one


def test_colour_range_of_ln_p_and_of_constants():
    L = np.linspace(-18.3, -0.4, 20)
    assert colour_range(L) == (-20.0, -0.4)
    assert colour_range(np.linspace(-3.0, 0.3, 5)) == (-3.0, 0.3)
    for c in (0.0, 0.5, -3.0):
        lo, hi = colour_range(np.full(4, c))
        assert lo <= c <= hi and hi > lo


def test_trace_axes_show_every_value_with_a_margin():
    lo, hi = padded([3.0, 1.0, float("nan"), 2.0, None])
    assert lo < 1.0 and hi > 3.0 and hi - lo == pytest.approx(2.0 * 1.16)
    assert padded([5.0]) == (4.75, 5.25)
    assert padded([0], 0.03, 1.0) == (-1.0, 1.0)
    assert padded([]) == (0.0, 1.0)


def test_views_headless_colour_bar_follows_the_density_and_trace_axes_hold_the_history():
    from app.state import BFTSession
    from app.views.canvas import DataCanvas
    from app.views.traces import TracesView
    s = BFTSession()
    canvas, traces = DataCanvas(session=s), TracesView(session=s)
    s.solve()
    P = s.record.P
    assert canvas.colorbar.visible and canvas.mapper.low == 0.0
    assert P.max() <= canvas.mapper.high <= (4 / 3) * P.max()
    its = [h["iteration"] for h in s.history]
    energies = [h["energy"] for h in s.history]
    assert traces.x_range.start < min(its) and traces.x_range.end > max(its)
    assert traces.y_ranges[0].start < min(energies) and traces.y_ranges[0].end > max(energies)
    s.load_preset("two_trends")
    s.solve()
    assert s.is_regression and not canvas.colorbar.visible and not canvas.image.visible
