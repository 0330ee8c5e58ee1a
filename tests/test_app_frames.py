"""The dashboard's per-frame plumbing, without a browser: frames as one message through a real Bokeh server
session, the heatmap colour scale, the trace axes.  (What a real browser receives is tested in
tests/ui/test_traffic.py.)"""
import asyncio
import logging
import pathlib
import re
import weakref

import bokeh
import numpy as np
import pytest
from bokeh.document import Document
from bokeh.models import ColumnDataSource, LinearColorMapper
from bokeh.protocol import Protocol
from bokeh.server.connection import ServerConnection
from bokeh.server.contexts import BokehSessionContext
from bokeh.server.session import ServerSession

from app import transport
from app.transport import one_message, release_as_one_message
from app.views.canvas import NICE, colour_range, nice_ceil, nice_floor
from app.views.traces import padded


class _Socket:
    """Stands in for Bokeh's WSHandler under a real ServerConnection: ``send_message`` returns the awaitable Bokeh
    awaits after releasing the document lock; a message counts as sent when it is awaited."""

    def __init__(self):
        self.sent = []

    def send_message(self, msg):
        async def write():
            self.sent.append(msg)
        return write()


def served_document(n_connections=2):
    """A real Bokeh ServerSession with a real Document, session context and connections, as Bokeh's
    ApplicationContext.create_session_if_needed builds them; only the websocket is stood in for."""
    doc = Document()
    src = ColumnDataSource(dict(image=[np.zeros((2, 2))]), tags=[0])
    mapper = LinearColorMapper(low=0, high=1)
    doc.add_root(src)
    doc.add_root(mapper)
    ctx = BokehSessionContext("test-session", None, doc)
    doc._session_context = weakref.ref(ctx)
    session = ServerSession("test-session", doc)
    ctx._set_session(session)
    sockets = [_Socket() for _ in range(n_connections)]
    conns = [ServerConnection(Protocol(), sock, None, session) for sock in sockets]
    return doc, src, mapper, session, ctx, conns


def locked(session, fn):
    """Run fn under the session's document lock exactly as Bokeh runs a callback: pending writes collected, then
    awaited (sent) once the lock is released."""
    asyncio.run(session.with_document_locked(fn))


def events_of(msg):
    assert msg.msgtype == "PATCH-DOC"
    return sorted((e["kind"], e.get("attr")) for e in msg.content["events"])


FRAME = [("ColumnDataChanged", "data"), ("ModelChanged", "high"), ("ModelChanged", "low"), ("ModelChanged", "tags")]


def change_a_frame(src, mapper):
    src.tags = [1]
    mapper.update(low=0.1, high=0.6)
    src.data = dict(image=[np.ones((2, 2))])


def test_the_transport_uses_only_what_a_real_server_session_has():
    """A Bokeh that renames or drops a private attribute the transport relies on fails here."""
    doc, _src, _mapper, session, ctx, conns = served_document()
    for name in transport.SESSION_ATTRIBUTES:
        assert hasattr(session, name), name
    assert callable(ServerSession._document_patched)
    assert session._pending_writes is None and session._current_patch_connection is None
    assert session._subscribed_connections == set(conns)
    for conn in conns:
        assert hasattr(conn._socket, "send_message") and isinstance(conn.protocol, Protocol)
    assert doc.session_context is ctx and ctx.session is session


def test_the_tested_bokeh_range_is_the_pin_of_pyproject():
    text = (pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    low, high = re.search(r'"bokeh>=([\d.]+),<([\d.]+)"', text).groups()
    assert transport.TESTED_BOKEH == (low, high)
    assert transport.BOKEH_TESTED == transport.bokeh_is_tested(bokeh.__version__)
    assert transport.bokeh_is_tested(low) and not transport.bokeh_is_tested(high)
    assert not transport.bokeh_is_tested("3.9.1") and not transport.bokeh_is_tested("not a version")


@pytest.mark.skipif(not transport.BOKEH_TESTED, reason="an untested Bokeh: the transport is Bokeh's own")
def test_a_held_frame_goes_out_as_one_patch_message_per_connection_with_every_change():
    doc, src, mapper, session, _ctx, conns = served_document()
    seen = []
    mapper.on_change("high", lambda attr, old, new: seen.append(new))

    def frame():
        with one_message(doc):
            change_a_frame(src, mapper)
        assert len(session._pending_writes) == len(conns)  # one write queued per connection, sent after the lock
    locked(session, frame)
    assert seen == [0.6]                                # Python property callbacks still ran, once
    for conn in conns:
        (msg,) = conn._socket.sent                      # exactly one message, carrying every event
        assert events_of(msg) == FRAME
    assert doc.callbacks.hold_value is None and "_document_patched" not in vars(session)

    def plain():                                        # outside a hold: one message per change, as Bokeh does
        mapper.low = 0.2
        mapper.high = 0.7
    locked(session, plain)
    for conn in conns:
        assert [events_of(m) for m in conn._socket.sent[1:]] == [[("ModelChanged", "low")], [("ModelChanged", "high")]]


@pytest.mark.skipif(not transport.BOKEH_TESTED, reason="an untested Bokeh: the transport is Bokeh's own")
def test_what_answers_a_user_action_goes_out_in_the_actions_message():
    """transport.at_release: a callback registered inside a one_message block runs at its end, inside the hold, so
    its changes travel in the same single message (a click, its link and its first frame); outside a block nothing
    is registered; a callback registered twice runs once; one registered by a callback still runs."""
    doc, src, mapper, session, _ctx, conns = served_document()
    calls = []

    def answer():
        calls.append("answer")
        mapper.high = 0.9
        assert transport.at_release(doc, link)      # registered while the block's callbacks run

    def link():
        calls.append("link")
        src.tags = [7]

    assert not transport.at_release(doc, answer)     # no block open: nothing scheduled
    assert calls == []

    def action():
        with one_message(doc):
            mapper.low = 0.1
            assert transport.at_release(doc, answer) and transport.at_release(doc, answer)
            assert calls == []                       # not yet: at the end of the block
        assert calls == ["answer", "link"]
    locked(session, action)
    for conn in conns:
        (msg,) = conn._socket.sent
        assert sorted(events_of(msg)) == [("ModelChanged", "high"), ("ModelChanged", "low"),
                                          ("ModelChanged", "tags")]
    assert not transport.at_release(doc, answer)     # the block is closed


@pytest.mark.skipif(not transport.BOKEH_TESTED, reason="an untested Bokeh: the transport is Bokeh's own")
def test_a_user_action_without_the_document_lock_waits_for_the_next_tick_which_has_it():
    """Panel runs a button's click without Bokeh's lock when another widget's change is still pending; changes made
    there to Bokeh models raised in the server session and never reached the page.  user_action moves the call to
    the document's next tick (run by Bokeh with the lock) and sends its changes as one message."""
    from panel.io.state import set_curdoc
    doc, src, mapper, session, _ctx, conns = served_document()
    ticks, calls = [], []
    doc.add_next_tick_callback = ticks.append           # what Bokeh would run later, under the lock

    @transport.user_action
    def press(value):
        calls.append(value)
        mapper.high = value
        mapper.low = value / 2

    assert session._pending_writes is None and not transport.holds_lock(doc)
    with set_curdoc(doc):
        press(0.8)                                      # as Panel's unlocked event callback would call it
    assert calls == [] and len(ticks) == 1              # nothing changed without the lock
    locked(session, ticks.pop())                        # the next tick, with the lock
    assert calls == [0.8]
    for conn in conns:
        (msg,) = conn._socket.sent
        assert sorted(events_of(msg)) == [("ModelChanged", "high"), ("ModelChanged", "low")]

    def under_lock():                                   # a Bokeh event (a tap) holds the lock: at once
        assert transport.holds_lock(doc)
        with set_curdoc(doc):
            press(0.6)
        assert calls == [0.8, 0.6] and ticks == []
    locked(session, under_lock)
    assert transport.holds_lock(Document())             # not served: always at once


@pytest.mark.skipif(not transport.BOKEH_TESTED, reason="an untested Bokeh: the transport is Bokeh's own")
def test_what_follows_a_user_action_goes_out_after_its_message_in_one_of_its_own():
    """transport.after_user_action: inside a user action the callback is moved to the next tick (the link and the
    playback row follow the heatmap that answers a click instead of delaying it); scheduled twice it runs once, and
    its changes go out as one message after the action's; outside a user action (a frame of a run) nothing is
    scheduled and the caller does the work itself."""
    from panel.io.state import set_curdoc
    doc, src, mapper, session, _ctx, conns = served_document()
    ticks, calls = [], []
    doc.add_next_tick_callback = ticks.append

    def follow():
        calls.append("follow")
        src.tags = [3]
        mapper.low = 0.2

    @transport.user_action
    def click():
        mapper.high = 0.7
        assert transport.after_user_action(doc, follow) and transport.after_user_action(doc, follow)
        assert calls == []

    assert not transport.after_user_action(doc, follow)   # no user action running
    with one_message(doc):                                  # a frame's block is not a user action either
        assert not transport.after_user_action(doc, follow)

    def under_lock():
        with set_curdoc(doc):
            click()
    locked(session, under_lock)
    assert calls == [] and len(ticks) == 1
    for conn in conns:
        (msg,) = conn._socket.sent
        assert events_of(msg) == [("ModelChanged", "high")]
    locked(session, ticks.pop())                            # the next tick: the follower, in a message of its own
    assert calls == ["follow"]
    for conn in conns:
        assert len(conn._socket.sent) == 2
        assert events_of(conn._socket.sent[1]) == [("ModelChanged", "low"), ("ModelChanged", "tags")]
    assert not transport.after_user_action(doc, follow)   # the action is over


@pytest.mark.skipif(not transport.BOKEH_TESTED, reason="an untested Bokeh: the transport is Bokeh's own")
def test_a_patch_that_arrives_after_its_page_closed_is_dropped_not_an_error(caplog):
    """Bokeh's PATCH-DOC handler asserted on a connection whose session on_close had detached (a message still
    being received when the page closed): an ERROR and a traceback in the server log per message."""
    from bokeh.protocol import Protocol as P
    doc, src, mapper, session, _ctx, conns = served_document()
    conn = conns[0]
    msg = P().create("PATCH-DOC", _one_event(doc, mapper))
    conn.detach_session()
    assert conn._session is None                       # the attribute the guard reads
    # through Bokeh's own protocol handler, which awaits the handler's result and logs any exception as an ERROR
    # (the first version of the guard returned None, and "await None" logged a TypeError instead)
    from bokeh.server.protocol_handler import ProtocolHandler
    with caplog.at_level(logging.DEBUG, logger="bokeh"):
        work = asyncio.run(ProtocolHandler().handle(msg, conn))
    assert work is None
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    with pytest.raises(AssertionError):
        conn.session                                   # what Bokeh itself would have hit


@pytest.mark.skipif(not transport.BOKEH_TESTED, reason="an untested Bokeh: the transport is Bokeh's own")
def test_a_socket_the_keep_alive_already_lost_closes_without_an_error():
    """Bokeh's keep-alive ping detaches the session of a socket it finds closed; Tornado's on_close came after and
    asserted on the detached session (an uncaught exception in the server log)."""
    from bokeh.server.views.ws import WSHandler
    doc, src, mapper, session, _ctx, conns = served_document(n_connections=2)
    conn = conns[0]
    lost = []

    class App:
        def client_lost(self, c):
            lost.append(c)
            c.detach_session()

    handler = WSHandler.__new__(WSHandler)  # on_close reads only these attributes
    handler.connection, handler.application, handler.close_code, handler.close_reason = conn, App(), None, None
    App().client_lost(conn)                  # what _keep_alive does on WebSocketClosedError
    WSHandler.on_close(handler)              # no AssertionError
    assert lost == [conn]
    # a connection with its session: Bokeh's own on_close runs (notify, then client_lost)
    other = conns[1]
    handler.connection = other
    WSHandler.on_close(handler)
    assert lost[-1] is other and other._session is None


def _one_event(doc, model):
    from bokeh.document.events import ModelChangedEvent
    return [ModelChangedEvent(doc, model, "high", 0.9)]


def test_bokehs_own_unhold_sends_one_message_per_change():
    """The reason for the transport, on the real session: Bokeh's unhold writes each held event on its own."""
    doc, src, mapper, session, _ctx, conns = served_document()

    def frame():
        doc.hold("combine")
        change_a_frame(src, mapper)
        doc.unhold()
    locked(session, frame)
    for conn in conns:
        assert sorted(e for m in conn._socket.sent for e in events_of(m)) == FRAME and len(conn._socket.sent) == 4


@pytest.mark.skipif(not transport.BOKEH_TESTED, reason="an untested Bokeh: the transport is Bokeh's own")
def test_a_change_sent_by_a_browser_is_not_echoed_to_that_browser():
    doc, src, mapper, session, _ctx, conns = served_document()
    origin = conns[0]

    def frame():
        session._current_patch_connection = origin     # as Bokeh's _handle_patch sets it while applying a patch
        try:
            with one_message(doc):
                mapper.update(low=0.3)
                src.set_from_json("tags", [5], setter=session)  # as a browser's PATCH-DOC applies it
        finally:
            session._current_patch_connection = None
    locked(session, frame)
    for conn in conns:
        (msg,) = conn._socket.sent
        assert events_of(msg) == ([("ModelChanged", "low")] if conn is origin else
                                  [("ModelChanged", "low"), ("ModelChanged", "tags")])


def test_an_untested_bokeh_gets_bokehs_public_unhold(monkeypatch):
    """Outside the tested range the transport touches no private attribute: Bokeh's unhold, one message each."""
    monkeypatch.setattr(transport, "BOKEH_TESTED", False)
    doc, src, mapper, session, _ctx, conns = served_document()

    def frame():
        with one_message(doc):
            change_a_frame(src, mapper)
    locked(session, frame)
    for conn in conns:  # Bokeh's per-event writer sent them: four messages, every change once
        assert len(conn._socket.sent) == 4 and sorted(e for m in conn._socket.sent for e in events_of(m)) == FRAME
    assert doc.callbacks.hold_value is None


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
    from app.session import BFTSession
    from app.views.canvas import DataCanvas
    from app.views.traces import TracesView
    s = BFTSession()
    canvas, traces = DataCanvas(session=s), TracesView(session=s)
    s.solve()
    P = s.record.P
    assert canvas.colorbar.visible and canvas.mapper.low == 0.0
    assert P.max() <= canvas.mapper.high <= (4 / 3) * P.max()
    its = [h.iteration for h in s.history]
    energies = [h.energy for h in s.history]
    assert traces.x_range.start < min(its) and traces.x_range.end > max(its)
    assert traces.y_ranges[0].start < min(energies) and traces.y_ranges[0].end > max(energies)
    s.load_preset("two_trends")
    s.solve()
    assert not s.kind.y_on_grid and not canvas.colorbar.visible and not canvas.image.visible


def test_a_tap_on_the_canvas_is_a_user_action():
    # the tap handler's decorator once slid onto a method inserted above it (review of issue 27's change): the tap
    # must run as a user action, its point and first frame in one message
    from app.views.canvas import DataCanvas
    assert getattr(DataCanvas._on_tap, "__wrapped__", None) is not None
    assert DataCanvas._on_tap.__code__ is not DataCanvas._on_tap.__wrapped__.__code__


def test_an_energy_that_moves_by_rounding_is_drawn_flat_and_a_real_drop_fills_the_axis():
    """Issue 28: after a warm start E went 123.2244447 -> 123.2244443 and the axis spanned exactly that, a
    full-height drop.  The energy axis now spans at least ENERGY_MIN_SPAN of |E|."""
    from types import SimpleNamespace

    from app.session import BFTSession
    from app.views.traces import ENERGY_MIN_SPAN, TracesView

    def records(energies):
        return [SimpleNamespace(iteration=k, energy=e, train_error=1.0, test_error=None)
                for k, e in enumerate(energies)]
    traces = TracesView(session=BFTSession())
    traces._set_ranges(records([123.2244447, 123.2244445, 123.2244443]))
    r = traces.y_ranges[0]
    assert r.end - r.start >= ENERGY_MIN_SPAN * 123.2 and r.start < 123.2244443 < 123.2244447 < r.end
    assert 4e-7 / (r.end - r.start) < 0.01                      # the change fills under 1 % of the height
    traces._set_ranges(records([130.26, 102.57, 98.34, 98.21]))  # Fig 27's first iterations: the whole axis
    r = traces.y_ranges[0]
    assert (130.26 - 98.21) / (r.end - r.start) > 0.8
    assert traces.top.yaxis[0].ticker.desired_num_ticks <= 3


def test_the_a_j_legend_names_only_the_traced_components():
    from app.session import BFTSession
    from app.views.mixing import MixingView
    s = BFTSession()
    view = MixingView(session=s)
    s.solve()
    legend = view.trace_fig.legend[0]
    assert not s.template_labels() and not legend.visible and not any(i.visible for i in legend.items)
    s.load_preset("metastable_mixture")
    s.solve()
    k = len(s.template_labels())
    assert k >= 2 and legend.visible and [i.visible for i in legend.items] == [j < k for j in range(len(legend.items))]
