"""The one home of the dashboard's private framework use: Bokeh's server session, BokehJS and param.

Each use is version-gated or feature-detected and has a test that fails when it no longer holds on the tested
versions: the transport below (tests/test_app_frames.py), the BokehJS patches of the page
(:data:`BROWSER_PATCHES_JS`, tests/ui/test_internals.py) and param's check of a value without setting it
(:func:`check_value`, tests/test_internals.py).  Where a public way exists it is used instead: ``pn.io.hold`` and
``doc.hold`` for batching (their release is what :func:`release_as_one_message` replaces), ``param.update`` for
setting values together.

Bokeh transport: how the dashboard's model changes reach the browser.

A frame of a run changes several Bokeh models (the image, the colour range, the frame serial, ...).  Bokeh's server
session writes one PATCH-DOC message per changed property, and the page repaints for each;
:func:`release_as_one_message` sends the held changes of a document as ONE message instead, and
:func:`one_message` wraps a block of changes in a hold released that way.

It does so through private attributes of Bokeh's ``ServerSession`` (its pending writes, its subscribed connections,
the connection of the patch being applied, its per-event writer), so it is version-gated: at import the installed
Bokeh must lie in :data:`TESTED_BOKEH`, the range pinned in pyproject.toml and exercised against a real
``ServerSession`` by tests/test_app_frames.py.  With any other Bokeh a warning is logged once and the transport is
Bokeh's public behaviour, ``doc.unhold()`` (one message per change: slower pages, same content), and no private
attribute is touched.  :data:`BOKEH_TESTED` says which; the BokehJS patches follow it too.
"""
from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable
from typing import Any

import bokeh
import panel as pn
from bokeh.document.events import DocumentPatchedEvent
from bokeh.models import CustomJS
from packaging.version import InvalidVersion, Version
from panel.io.state import set_curdoc, state

log = logging.getLogger(__name__)

#: The Bokeh versions the transport was tested with, [low, high): the pin of pyproject.toml.
TESTED_BOKEH = ("3.9.2", "3.10")
#: What :func:`release_as_one_message` uses of ``bokeh.server.session.ServerSession`` (besides its connections'
#: ``_socket.send_message`` and ``protocol``); tests/test_app_frames.py checks a real session has each.
SESSION_ATTRIBUTES = ("_pending_writes", "_subscribed_connections", "_current_patch_connection", "_document_patched")


def bokeh_is_tested(version: str) -> bool:
    """``version`` lies in :data:`TESTED_BOKEH` (a version that does not parse does not)."""
    try:
        return Version(TESTED_BOKEH[0]) <= Version(version) < Version(TESTED_BOKEH[1])
    except InvalidVersion:
        return False


#: The installed Bokeh is one the transport was tested with: only then are Bokeh's private attributes used.
BOKEH_TESTED = bokeh_is_tested(bokeh.__version__)
if not BOKEH_TESTED:
    log.warning("bokeh %s is outside the range the dashboard's transport was tested with (>=%s,<%s): every change "
                "goes out as Bokeh sends it, one message each, and the BokehJS patches are not installed",
                bokeh.__version__, *TESTED_BOKEH)


def _ignore_patches_after_close() -> None:
    """A browser's message that was still being received when its page closed reached Bokeh's PATCH-DOC handler
    after ``on_close`` had detached the connection's session: ``connection.session`` asserted, and Bokeh logged
    an ERROR with a traceback per message (45 in one load test closing 30 pages at once; the frame
    acknowledgements and the link's echo are such messages).  Such a message is now dropped (logged at debug): the
    page that sent it is gone.  Installed only for :data:`TESTED_BOKEH` (it wraps ``ServerSession.patch`` and reads
    ``ServerConnection._session``), checked by tests/test_app_frames.py."""
    from bokeh.server.session import ServerSession
    if getattr(ServerSession.patch, "_bft_after_close", False):
        return
    original = ServerSession.patch  # the classmethod, bound to the class

    async def dropped():  # Bokeh's ProtocolHandler awaits what the handler returns: an awaitable of no work
        return None

    def patch(cls, message, connection):
        if getattr(connection, "_session", None) is None:
            log.debug("a PATCH-DOC arrived after its connection closed; dropped")
            return dropped()
        return original(message, connection)
    patch._bft_after_close = True  # type: ignore[attr-defined]
    ServerSession.patch = classmethod(patch)


def _tolerate_lost_before_close() -> None:
    """Bokeh's keep-alive ping found a socket closed before Tornado called its ``on_close`` and already
    detached the connection's session (``client_lost``); ``on_close`` then asserted on ``connection.session``:
    an uncaught exception with a traceback in the server log (2 per load-test run closing 30 pages).  That
    ``on_close`` now only logs the close, as Bokeh does, the cleanup having been done.  Installed only for
    :data:`TESTED_BOKEH` (it reads ``ServerConnection._session``), checked by tests/test_app_frames.py."""
    from bokeh.server.views.ws import WSHandler
    if getattr(WSHandler.on_close, "_bft_lost", False):
        return
    original = WSHandler.on_close

    def on_close(self):
        conn = getattr(self, "connection", None)
        if conn is not None and getattr(conn, "_session", None) is None:
            log.info("WebSocket connection closed: code=%s, reason=%r (already cleaned up by the keep-alive)",
                     self.close_code, self.close_reason)
            return None
        return original(self)
    on_close._bft_lost = True  # type: ignore[attr-defined]
    WSHandler.on_close = on_close


if BOKEH_TESTED:
    _ignore_patches_after_close()
    _tolerate_lost_before_close()


def _server_session(doc) -> Any:
    """The Bokeh ``ServerSession`` serving ``doc``, or None (not served, or not yet connected)."""
    return getattr(getattr(doc, "session_context", None), "session", None)


def release_as_one_message(doc) -> None:
    """End the document's hold and send its held changes to each browser as ONE patch message.

    Bokeh's ``unhold`` replays the held events one by one and its server session writes one PATCH-DOC message per
    event: a frame (image, colour range, serial) went out as four messages, and the page repainted for each. Here
    the events are replayed exactly as ``unhold`` does (Python property callbacks and every other listener run),
    except that the server session's per-event writer is given the events to collect, and one message carrying all
    of them is then queued on the session's pending writes, which Bokeh awaits once the document lock is released.
    The write goes through Bokeh's ``send_message``, which logs a socket that closed meanwhile instead of raising.
    Without a server session (tests, a page not yet connected), or with a Bokeh outside :data:`TESTED_BOKEH`, it is
    Bokeh's ``unhold``."""
    session = _server_session(doc) if BOKEH_TESTED else None
    if (session is None or getattr(session, "_pending_writes", None) is None
            or not all(hasattr(session, a) for a in SESSION_ATTRIBUTES)):
        doc.unhold()  # not served, not under the lock, or not the tested Bokeh: one message per change
        return
    collected: list = []
    session._document_patched = collected.append  # shadows the bound method for the replay below only
    try:
        doc.unhold()  # replays every held event; those for the browser land in `collected`
    finally:
        del session._document_patched
    echo_of = session._current_patch_connection
    for conn in list(session._subscribed_connections):
        # as Bokeh does: a change the browser itself sent is not echoed back to that browser
        events = [e for e in collected if isinstance(e, DocumentPatchedEvent)
                  and not (e.setter is session and conn is echo_of)]
        if events:
            session._pending_writes.append(conn._socket.send_message(conn.protocol.create("PATCH-DOC", events)))


#: Callbacks to run at the end of the open :func:`one_message` block of a document (by ``id(doc)``).
_AT_RELEASE: dict[int, list] = {}


def at_release(doc, fn) -> bool:
    """Run ``fn()`` once at the end of the :func:`one_message` block open on ``doc``, before its changes are
    released, so what ``fn`` changes travels in the same message; False (and nothing scheduled) when no such block
    is open.  A user action (a click, a key, a preset) thus goes out with what answers it: the link of the new
    state and the first frame of its run (:meth:`app.runner.FramePump.play`).  A callback registered twice in one
    block runs once."""
    pending = _AT_RELEASE.get(id(doc)) if doc is not None else None
    if pending is None:
        return False
    if fn not in pending:
        pending.append(fn)
    return True


@contextlib.contextmanager
def one_message(doc):
    """Hold the document's changes made inside and send them as one message (:func:`release_as_one_message`).

    Bokeh's own hold, not ``pn.io.hold``: a frame applied before the browser connected (a link with data in its
    query starts a run while the page is built) left the document held under ``pn.io.hold``, and every later frame
    of that session was collected and never sent.  Inside a hold that is already open this adds to it.  Callbacks
    registered with :func:`at_release` run at the end, in registration order, still inside the hold."""
    if doc is None or doc.callbacks.hold_value:
        yield
        return
    doc.hold("combine")
    pending = _AT_RELEASE[id(doc)] = []
    try:
        yield
        while pending:  # a callback may register another (the link after a frame that changed the state)
            pending.pop(0)()
    finally:
        _AT_RELEASE.pop(id(doc), None)
        release_as_one_message(doc)


def after_user_action(doc, fn) -> bool:
    """Run ``fn()`` just after the message of the :func:`user_action` running on ``doc`` has gone out, in a
    next-tick callback of the document (with Bokeh's lock, its changes as one message of their own); False (and
    nothing scheduled) outside a user action: a frame of a run keeps everything in its own message.  For what
    need not travel with a user action's answer and would only delay it: the
    playback row follows a click a few milliseconds after the heatmap that answers it.  A callback scheduled twice
    before it runs runs once."""
    if doc is None or id(doc) not in _IN_USER_ACTION:
        return False
    pending = _AFTER_MESSAGE.setdefault(id(doc), [])
    if fn in pending:
        return True
    pending.append(fn)

    def run():
        with set_curdoc(doc), one_message(doc):
            fn()
        if fn in pending:
            pending.remove(fn)
        if not pending:
            _AFTER_MESSAGE.pop(id(doc), None)
    doc.add_next_tick_callback(run)
    return True


#: Callbacks :func:`after_user_action` has scheduled and that have not run yet (by ``id(doc)``).
_AFTER_MESSAGE: dict[int, list] = {}
#: Documents (by ``id``) on which a :func:`user_action` is running now.
_IN_USER_ACTION: set[int] = set()


def holds_lock(doc) -> bool:
    """Changes to ``doc`` may be made here and now: it is not served, or Bokeh's document lock is held (the server
    session then has its pending writes).  With a Bokeh outside :data:`TESTED_BOKEH` this cannot be told: False."""
    session = _server_session(doc)
    if session is None:
        return True
    return BOKEH_TESTED and getattr(session, "_pending_writes", None) is not None


def user_action(fn):
    """Wrap the handler of a user action (a button, a click, a preset) so that it runs under Bokeh's document lock
    and its changes go out as one message (:func:`one_message`, with what :func:`at_release` adds).

    Panel runs a widget's event (a button's click) in a callback WITHOUT the document lock when a change of another
    widget is still being processed (a value typed, then Tab and Space at once).  Changes the dashboard makes to
    Bokeh models directly (a point streamed into the canvas) then reached Bokeh's server session with no lock; it
    raised, and the point stayed on the server and never reached the page (issue 13's intermittent keyboard form).
    Here such a call is moved to the document's next tick, which Bokeh runs with the lock; otherwise it runs at
    once.  Bokeh's own events (a tap on the canvas) always hold the lock."""
    @functools.wraps(fn)
    def handler(*args, **kwargs):
        doc = state.curdoc

        def run():
            outer = id(doc) in _IN_USER_ACTION
            _IN_USER_ACTION.add(id(doc))
            try:
                with set_curdoc(doc), one_message(doc):
                    fn(*args, **kwargs)
            finally:
                if not outer:
                    _IN_USER_ACTION.discard(id(doc))
        if doc is None or holds_lock(doc):
            run()
        else:
            doc.add_next_tick_callback(run)
    return handler


def without_debounce(widget, *attrs: str) -> None:
    """Let the browser's changes of ``attrs`` of ``widget`` reach the session at the next tick of the event loop,
    without Panel's debounce.

    Panel waits ``Syncable._debounce`` (50 ms) after a property change from the browser before it applies it, so
    that a burst of changes is applied once.  A slider's released value (``value_throttled``) is already one change
    per release or arrow key, and the run it starts waited those 50 ms before its first frame (issue 28: half of the
    λ slider's 71 ms).  Panel exempts the properties a widget lists in ``_priority_changes`` (its Tabulator's
    ``data``): ``attrs`` are added to that list of this widget.  Both are private; tests/test_internals.py fails when
    Panel no longer schedules such a change at once.  Every attribute that arrives with the released value (the
    slider's ``value``, sent in the same burst) must be listed: a change that waits takes the others with it."""
    widget._priority_changes = [*type(widget)._priority_changes, *attrs]


# --------------------------------------------------------------------------------------------------- param
def check_value(parameter, value) -> None:
    """Raise what ``parameter`` raises for ``value`` (bounds, type, the app's own rules of a Parameter subclass)
    without setting it: param's ``Parameter._validate``, the one check that runs before a value is set.  A link or
    an upload is judged as a whole before anything changes (a refused value leaves the state intact).  Param has no
    public form of it; tests/test_internals.py fails if it no longer refuses without setting."""
    parameter._validate(value)


def ruled(kind: type, rule: Callable[[Any], None], first: bool = False) -> type:
    """A Parameter class of ``kind`` (``param.List``, ``param.Dict``, ...) that also refuses every value for which
    ``rule(value)`` raises, before the value is set and by :func:`check_value` alike: ``rule`` runs in param's
    ``Parameter._validate`` (after the type's own checks, or before them when ``first``).  Param's public
    validation stops at the type, bounds and item types; the dashboard's rules (points within the gate's
    coordinates, known prior orders, ...) need this hook.  tests/test_internals.py fails if a ruled value is set
    anyway."""
    def _validate(self, val):
        if first:
            rule(val)
        kind._validate(self, val)
        if not first:
            rule(val)
    return type(f"Ruled{kind.__name__}", (kind,), {"_validate": _validate, "__doc__": rule.__doc__})


# --------------------------------------------------------------------------------------------------- BokehJS
#: Run in each page once its document is ready: two places where BokehJS redoes work whose result is unchanged,
#: each costing every session's browser a re-style of the page at every repaint.
#:
#: - BokehJS re-writes the position stylesheet of every renderer of a plot at every repaint, mostly the same text,
#:   and each write makes the browser re-style the page (the colour look-ups of the next paint wait for it).
#:   Text that does not differ is not written again.
#: - A legend rebuilds its items (elements and a small canvas each) on every change of anything its items refer
#:   to, the data sources included: every streamed trace point.  When the items, their labels and their
#:   visibility are unchanged, only their hidden-renderer styling is refreshed.
#:
#: - Every change of a layout property (a widget shown or hidden, a text of another size, a slider's range) makes
#:   BokehJS lay out and repaint the WHOLE page at once, inside the patch that carries it: a preset load changes about
#:   ten of them in one message and the page froze for 1-1.5 s (profile: ``invalidate_layout`` 0.94 s of 1.13 s).
#:   While a patch from the server is applied, the layout roots to redo are collected, and each is laid out once
#:   after the patch.  The same for ``compute_layout``, which a re-rendered widget calls on the whole page.
#: - A plot whose axis, title or colour bar changes size (new tick labels: every frame of the traces, the canvas'
#:   title with the number of points) lays out the whole page from its root in its next paint, although its own box
#:   is fixed by the page around it (width, height or stretch, never its content).  It lays out only itself.
#: - A button re-renders itself, and so lays out the whole page, when only its ``disabled`` changes (the playback
#:   buttons at the start and end of every run: three page layouts per click, each ~100 ms at 1280×720 with the
#:   presenter layout's fifteen plots, in the message before the click's first frame).  The disabled attribute is
#:   all that differs (BokehJS' ControlView sets it already), so only that is done.
#: - Every visual property a plot reads (a line colour, a text alpha: hundreds per paint and per layout) first asks
#:   the element's computed style for a ``--bk-*`` CSS variable that would override it, and each such read makes the
#:   browser re-style the page when anything changed since the last read.  Laying out the page after a preset load
#:   interleaves style writes and these reads: 200 ms of its 390 ms task (profile: ``getPropertyValue`` 802 of 1564
#:   samples), and they sat in every click's paint too.  No stylesheet of Bokeh, Panel or this app defines such a
#:   variable (a UI test checks every plot of the page), so the answer is always "none" and is given without asking.
#:
#: All are feature-detected: with a BokehJS that lacks the methods, the page runs unpatched.  They are repaint
#: work of the page, not transport, but they use private BokehJS methods: with a Bokeh outside the tested range
#: (:data:`BOKEH_TESTED`) they are not installed; tests/ui/test_internals.py fails when a patch of them
#: no longer finds what it replaces on the tested Bokeh.
BROWSER_PATCHES_JS = """
const need = (mod) => { try { return Bokeh.require(mod); } catch (e) { return null; } };
const dom = need("core/dom");
const sheet = dom && dom.InlineStyleSheet && dom.InlineStyleSheet.prototype;
if (sheet && typeof sheet._update === "function" && !sheet.__bft_patched) {
  const update = sheet._update;
  sheet._update = function (css) { if (this.el.textContent !== css) update.call(this, css); };
  sheet.__bft_patched = true;
}
const legend = need("models/annotations/legend");
const view = legend && legend.LegendView && legend.LegendView.prototype;
if (view && typeof view._render_items === "function" && "_should_rerender_items" in view && !view.__bft_patched) {
  const render_items = view._render_items;
  view._render_items = function () {
    const entries = this.entries;
    const same = entries != null && entries.length > 0 && !this._should_rerender_items &&
      entries.every((e) => e.el.isConnected && e.__bft_visible === e.item.visible);
    if (same) {
      for (const e of entries) this._toggle_inactive(e);
      return;
    }
    render_items.call(this);
    for (const e of this.entries || []) e.__bft_visible = e.item.visible;
  };
  view.__bft_patched = true;
}
const layout_mod = need("models/layouts/layout_dom");
const docs_mod = need("document/document") || need("document");
const layout = layout_mod && layout_mod.LayoutDOMView && layout_mod.LayoutDOMView.prototype;
const doc = docs_mod && docs_mod.Document && docs_mod.Document.prototype;
if (layout && doc && typeof layout.invalidate_layout === "function" && typeof layout.compute_layout === "function"
    && typeof doc.apply_json_patch === "function" && !layout.__bft_patched) {
  const LayoutDOMView = layout_mod.LayoutDOMView;
  const invalidate = layout.invalidate_layout;
  const compute = layout.compute_layout;
  let pending = null;  // root view -> true when its styles must be redone too (invalidate), false: compute only
  const defer = (view, restyle) => {
    let root = view;
    while (root.parent instanceof LayoutDOMView) root = root.parent;
    pending.set(root, restyle || pending.get(root) === true);
  };
  layout.invalidate_layout = function () {
    if (pending === null) return invalidate.call(this);
    defer(this, true);
  };
  layout.compute_layout = function () {
    if (this.__bft_local) {  // a plot's own side panels changed size: its box is its parent's business, not theirs
      this.measure_layout(); this.update_bbox(); this._compute_layout(); this.after_layout();
      this._layout_computed = true;
      return;
    }
    if (pending === null) return compute.call(this);
    defer(this, false);
  };
  const plot_mod = need("models/plots/plot");
  const plot = plot_mod && plot_mod.PlotView && plot_mod.PlotView.prototype;
  if (plot && typeof plot._invalidate_layout_if_needed === "function" && typeof layout.measure_layout === "function"
      && typeof layout.update_bbox === "function" && typeof layout._compute_layout === "function"
      && typeof layout.after_layout === "function") {
    const if_needed = plot._invalidate_layout_if_needed;
    plot._invalidate_layout_if_needed = function (...args) {
      this.__bft_local = this.parent instanceof LayoutDOMView;
      try { return if_needed.apply(this, args); } finally { this.__bft_local = false; }
    };
  }
  const apply = doc.apply_json_patch;
  doc.apply_json_patch = function (...args) {
    if (pending !== null) return apply.apply(this, args);
    pending = new Map();
    try {
      return apply.apply(this, args);
    } finally {
      const roots = pending;
      pending = null;
      for (const [root, restyle] of roots) (restyle ? invalidate : compute).call(root);
      if (window.__bftDark && window.__bftApplyDark && !window.__bftDarkTimer)  // new elements get the dark theme
        window.__bftDarkTimer = setTimeout(() => { window.__bftDarkTimer = null; window.__bftApplyDark(); }, 300);
      if (window.__bftApplyFont && !window.__bftFontTimer)  // ... and the font size (app.main.FONT_JS)
        window.__bftFontTimer = setTimeout(() => { window.__bftFontTimer = null; window.__bftApplyFont(); }, 300);
    }
  };
  layout.__bft_patched = true;
}
const button_mod = need("models/widgets/abstract_button");
const button = button_mod && button_mod.AbstractButtonView && button_mod.AbstractButtonView.prototype;
if (button && typeof button.render === "function" && typeof button.rerender === "function"
    && !Object.prototype.hasOwnProperty.call(button, "__bft_patched")) {  // own: LayoutDOMView, an ancestor, has one
  const render = button.render;
  const rerender = button.rerender;
  button.render = function (...args) {
    const out = render.apply(this, args);
    this.__bft_drawn = {label: this.label_view, icon: this.icon_view, type: this.model.button_type,
                        disabled: this.model.disabled};
    return out;
  };
  button.rerender = function (...args) {
    const d = this.__bft_drawn, m = this.model;
    if (d && this.button_el && d.label === this.label_view && d.icon === this.icon_view && d.type === m.button_type
        && d.disabled !== m.disabled) {
      d.disabled = m.disabled;
      this.button_el.disabled = m.disabled;  // ControlView toggles the attribute too: nothing else to redraw
      return;
    }
    return rerender.apply(this, args);
  };
  button.__bft_patched = true;
}
const visual = need("core/visuals/visual");
const vprops = visual && visual.VisualProperties && visual.VisualProperties.prototype;
if (vprops && typeof vprops._get_css_value === "function" && !vprops.__bft_patched) {
  vprops._get_css_value = function (name) { return ""; };  // no --bk-* visual variables on this page
  vprops.__bft_patched = true;
}
"""


def install_browser_patches(doc) -> None:
    """Attach :data:`BROWSER_PATCHES_JS` to the document's ``document_ready`` event (served pages of the tested
    Bokeh only)."""
    if doc is not None and BOKEH_TESTED:
        doc.js_on_event("document_ready", CustomJS(code=BROWSER_PATCHES_JS))


# --------------------------------------------------------------------------------------------------- Panel
class TextOnlyStr(pn.pane.Str):
    """``pn.pane.Str`` whose new text goes to its Bokeh model alone, as text (:class:`app.views.common.LiveText`).

    Panel's ``Str`` puts its object into HTML unescaped (``<pre>`` + object + ``</pre>``) and the browser sets that
    as innerHTML, so a message quoting a link's ``<img onerror=...>`` ran it: the object goes through ``escape``
    first (a subclass sets it).  And a new text re-assigns the pane's stylesheets, which makes Bokeh walk the whole
    page's models; here only ``text`` is sent.  Both through Panel's private hooks ``_transform_object``, ``_update``
    and ``_get_properties``; tests/test_internals.py fails if the model no longer gets the escaped text."""

    escape: Callable[[Any], str] = staticmethod(str)

    def _transform_object(self, obj):
        return super()._transform_object(None if obj is None else self.escape(obj))

    def _update(self, ref, model):  # Panel's hook for an object change; the pin of pyproject.toml covers it
        text = self._get_properties(model.document).get("text")
        if text is not None and model.text != text:
            model.text = text


#: Run once a page is ready: the accessible names of the main controls (``labels``: css class -> name) set on the
#: elements BokehJS made for their models, and every slider's handle (noUiSlider's ``.noUi-handle``, which has the
#: role "slider" and no name) named by its slider's title.  BokehJS has no public way from a model to its view's
#: element: this reads ``Bokeh.documents[..]._all_models`` and ``Bokeh.index.find_one``; tests/ui/test_presenter.py
#: and tests/ui/test_keyboard.py fail if a control loses its name.  Controls drawn later (a tab opened later, a
#: widget made visible, a slider drawn again) get their names too: the naming runs again after every patch from the
#: server (the views it adds are built asynchronously: once soon, once later) and when a slider's handles change.
ARIA_JS = """
if (!window.__bftAria) {
  const observer = new MutationObserver(() => window.__bftAriaSoon());
  const observed = new WeakSet();
  const set = (el, name, value) => { if (el.getAttribute(name) !== value) el.setAttribute(name, value); };
  window.__bftAria = () => {
    if (window.__bftOptionTitles) window.__bftOptionTitles();
    if (window.__bftMarkKeys) window.__bftMarkKeys();
    for (const d of Bokeh.documents) for (const m of d._all_models.values()) {
      const classes = m.css_classes || [];
      const name = m.name === "bft-canvas" ? "bft-canvas-plot" : classes.find((c) => c in labels);
      const slider = typeof m.title === "string" && "start" in m && "end" in m && "step" in m;
      const check = typeof m.label === "string" && "active" in m;   // a checkbox with its label beside it
      if (!slider && !check && !(name && name in labels)) continue;
      const v = Bokeh.index.find_one(m);
      if (!v) continue;
      if (name && name in labels) {
        const el = name === "bft-canvas-plot" ? v.el
          : (v.button_el || (v.shadow_el && v.shadow_el.querySelector("input, select, button")) || v.el);
        set(el, "aria-label", labels[name]);
        // the spinner's arrow buttons out of the Tab order: Tab goes x -> y -> "Add point" (arrow keys still step)
        if (v.shadow_el) for (const b of v.shadow_el.querySelectorAll(".bk-spin-btn")) set(b, "tabindex", "-1");
        if (name === "bft-canvas-plot") set(el, "role", "img");
      }
      if (check && v.shadow_el) {
        const box = v.shadow_el.querySelector("input[type=checkbox]");
        if (box && m.label && !box.getAttribute("aria-label")) set(box, "aria-label", m.label);
      }
      if (slider && v.shadow_el) {
        const title = (m.title || m.name || "value").replace(/[:\\s]+$/, "");
        const handles = v.shadow_el.querySelectorAll(".noUi-handle");
        handles.forEach((h, i) => set(h, "aria-label",
                                      handles.length > 1 ? `${title} (${i ? "upper" : "lower"} end)` : title));
        if (!observed.has(v.shadow_el)) { observed.add(v.shadow_el); observer.observe(v.shadow_el, {childList: true}); }
      }
      // a plot's focusable event layer (its tools' keyboard target) named by the plot's title
      if (m.title && typeof m.title.text === "string" && "renderers" in m) {
        const pv = Bokeh.index.find_one(m);
        let ev = pv && ((pv.canvas_view && pv.canvas_view.events_el) || (pv.canvas && pv.canvas.events_el));
        if (!ev && pv && pv.shadow_el) for (const host of pv.shadow_el.querySelectorAll("*")) {
          ev = host.shadowRoot && host.shadowRoot.querySelector(".bk-events");
          if (ev) break;
        }
        if (ev) set(ev, "aria-label", `plot: ${m.title.text || m.name || "figure"}`);
      }
    }
    // card and accordion headers by the text of their title (inside the title's own shadow root), and the
    // spinners' arrow buttons (out of the Tab order: the arrow keys step the focused number)
    const text = (el) => { let t = ""; for (const n of el.childNodes) t += n.nodeType === 3 ? n.textContent
      : (n.nodeType === 1 ? text(n) + (n.shadowRoot ? text(n.shadowRoot) : "") : ""); return t; };
    const walk = (root) => { for (const el of root.querySelectorAll("*")) {
      if (el.matches("button.card-header, button.accordion-header")) {
        const t = text(el).replace(/\\s+/g, " ").trim();
        if (t) set(el, "aria-label", t);
      } else if (el.matches("button.bk-spin-btn")) {
        set(el, "aria-label", el.classList.contains("bk-spin-btn-up") ? "increase" : "decrease");
        set(el, "tabindex", "-1");
      }
      if (el.shadowRoot) walk(el.shadowRoot);
    } };
    walk(document);
  };
  let timer = null;
  window.__bftAriaSoon = () => {
    if (timer === null) timer = setTimeout(() => { timer = null; window.__bftAria(); }, 50);
  };
  for (const d of Bokeh.documents) {
    const apply = d.apply_json_patch;
    d.apply_json_patch = function (...args) {
      try { return apply.apply(this, args); } finally {
        window.__bftAriaSoon(); setTimeout(() => window.__bftAria(), 1000);
      }
    };
  }
}
window.__bftAria();
"""

#: The text of the options, in the selects with a css class in ``classes``, whose value is a name (``titles``: value
#: -> text; app.views.presets: a preset's title for its name).  BokehJS writes each option's label as its HTML value,
#: so the server's labels are the names, which links and tests select by; here each option shows its title.  Run
#: again after every patch (with the accessible names).
OPTION_TITLES_JS = """
window.__bftOptionTitles = () => {
  for (const d of Bokeh.documents) for (const m of d._all_models.values()) {
    if (!(m.css_classes || []).some((c) => classes.includes(c))) continue;
    const v = Bokeh.index.find_one(m);
    if (!v || !v.shadow_el) continue;
    for (const o of v.shadow_el.querySelectorAll("option"))
      if (o.value in titles && o.textContent !== titles[o.value]) o.textContent = titles[o.value];
  }
};
window.__bftOptionTitles();
"""

#: Keyboard shortcuts (``keys``: key -> css class of the control it presses; app.views.controls.SHORTCUTS): a key
#: clicks the button (or the toggle's button) of the model with that class, when there is one.  Never while the focus
#: is in a text field, a menu or an editable element (the key is then typed there), and never with Alt or Meta (the
#: browser's own); Ctrl+Z is Undo.  Each such control says its key in ``aria-keyshortcuts``: set once the page is
#: ready, and again whenever the accessible names are (ARIA_JS: after every patch), since a control's view may be
#: drawn, or drawn again, after the page is ready.
SHORTCUTS_JS = """
const find = (cls) => {
  for (const d of Bokeh.documents) for (const m of d._all_models.values()) {
    if (!(m.css_classes || []).includes(cls)) continue;
    const v = Bokeh.index.find_one(m);
    if (!v) continue;
    return v.button_el || (v.shadow_el && v.shadow_el.querySelector("button, input")) || null;
  }
  return null;
};
const mark = () => {  // "U Control+Z": every key of a control, as aria-keyshortcuts writes them
  const by = {};
  for (const [key, cls] of Object.entries(keys))
    (by[cls] = by[cls] || []).push(key.replace(/(^|[+])([a-z])$/, (_, a, c) => a + c.toUpperCase()));
  for (const [cls, list] of Object.entries(by)) {
    const el = find(cls), value = list.join(" ");
    if (el && el.getAttribute("aria-keyshortcuts") !== value) el.setAttribute("aria-keyshortcuts", value);
  }
};
window.__bftMarkKeys = mark;  // run again with the accessible names, after every patch (ARIA_JS)
mark();
setTimeout(mark, 1000);
if (!window.__bftKeys) {
  window.__bftKeys = true;
  document.addEventListener("keydown", (e) => {
    if (e.defaultPrevented || e.altKey || e.metaKey || e.repeat || e.isComposing) return;
    const target = e.composedPath()[0];
    if (target && target.nodeType === 1 && (target.isContentEditable
        || target.matches("input:not([type=checkbox]):not([type=radio]):not([type=button]), select, textarea")))
      return;
    const key = (e.ctrlKey ? "Control+" : "") + (e.key.length === 1 ? e.key.toLowerCase() : e.key);
    const cls = keys[key];
    if (!cls) return;
    const el = find(cls);
    if (!el || el.disabled) return;
    e.preventDefault();
    el.click();
  });
}
"""
