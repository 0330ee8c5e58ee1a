"""Bokeh transport: how the dashboard's model changes reach the browser, and the one home of its private Bokeh use.

A frame of a run changes several Bokeh models (the image, the colour range, the frame serial, ...).  Bokeh's server
session writes one PATCH-DOC message per changed property, and the page repaints for each;
:func:`release_as_one_message` sends the held changes of a document as ONE message instead, and
:func:`one_message` wraps a block of changes in a hold released that way.

It does so through private attributes of Bokeh's ``ServerSession`` (its pending writes, its subscribed connections,
the connection of the patch being applied, its per-event writer), so it is version-gated: at import the installed
Bokeh must lie in :data:`TESTED_BOKEH`, the range pinned in pyproject.toml and exercised against a real
``ServerSession`` by tests/test_app_frames.py.  With any other Bokeh a warning is logged once and the transport is
Bokeh's public behaviour, ``doc.unhold()`` (one message per change: slower pages, same content), and no private
attribute is touched.  :data:`BOKEH_TESTED` says which; the BokehJS patches of :mod:`app.views.common` follow it too.
"""
from __future__ import annotations

import contextlib
import logging

import bokeh
from bokeh.document.events import DocumentPatchedEvent
from packaging.version import InvalidVersion, Version

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
    session = getattr(getattr(doc, "session_context", None), "session", None) if BOKEH_TESTED else None
    if (session is None or getattr(session, "_pending_writes", None) is None
            or not all(hasattr(session, a) for a in SESSION_ATTRIBUTES)):
        doc.unhold()  # not served, not under the lock, or not the tested Bokeh: one message per change
        return
    collected = []
    session._document_patched = collected.append  # shadows the bound method for the replay below only
    try:
        doc.unhold()  # replays every held event; those for the browser land in `collected`
    finally:
        del session._document_patched
    for conn in list(session._subscribed_connections):
        # as Bokeh does: a change the browser itself sent is not echoed back to that browser
        events = [e for e in collected if isinstance(e, DocumentPatchedEvent)
                  and not (e.setter is session and conn is session._current_patch_connection)]
        if events:
            session._pending_writes.append(conn._socket.send_message(conn.protocol.create("PATCH-DOC", events)))


@contextlib.contextmanager
def one_message(doc):
    """Hold the document's changes made inside and send them as one message (:func:`release_as_one_message`).

    Bokeh's own hold, not ``pn.io.hold``: a frame applied before the browser connected (a link with data in its
    query starts a run while the page is built) left the document held under ``pn.io.hold``, and every later frame
    of that session was collected and never sent.  Inside a hold that is already open this adds to it."""
    if doc is None or doc.callbacks.hold_value:
        yield
        return
    doc.hold("combine")
    try:
        yield
    finally:
        release_as_one_message(doc)
