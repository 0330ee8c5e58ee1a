"""Bokeh's hooks for the dashboard's directory (``panel serve app`` reads ``app_hooks.py`` beside
``main.py``): what goes into a session's token besides Bokeh's own fields.

A share link holds the whole state in its query, up to :data:`app.views.share.MAX_QUERY_CHARS` (56 KiB).  Bokeh
puts the page request's arguments into the session token by default, and the browser sends that token in a header
of the websocket request, whose address repeats the query as well: the link travelled twice, and from about 34 KiB
on the handshake passed Tornado's 64 KiB limit on a request's headers (measured: a 32 KiB link of random decimals
opened on a plain ``panel serve``, one of 36 KiB left a blank page).  Here the token carries no arguments (``None``
makes Bokeh read them from the request the session is made from: the page's own request, or the websocket's, which
holds the same query), so the link travels once.  Bokeh documents this hook ("request handler hooks",
``process_request``) as the place for the token's extra payload."""
from __future__ import annotations

from typing import Any


def process_request(request) -> dict[str, Any]:
    """The token's extra payload: no copy of the link's arguments (see the module's docstring)."""
    return {"arguments": None}


def on_server_loaded(server_context) -> None:
    """Warm what a preset on real data computes once per process (its lambda by the evidence, about 2.5 s each:
    :func:`app.session.preset_document`), so that the first class to pick *old_faithful* waits as long as for any
    other preset: in a child process at the lowest priority (:func:`app.work.at_low_priority`), not on the heavy
    lane, where its 5 s of CPU held the interpreter against the first pages of a cold start.  Bokeh documents this
    lifecycle hook beside ``process_request``."""
    from app.session import presets_to_choose, remember_chosen
    from app.work import at_low_priority
    from bftcore import api

    at_low_priority(api.choose_preset, presets_to_choose(), remember_chosen)
    # Bokeh validates each new session's document (every model's checks, about 0.1 s of a page's server time); the
    # page's models are the same for every session, and tests/test_app_document.py validates them: off here, unless
    # BOKEH_VALIDATE_DOC asks for it
    import os

    from bokeh.settings import settings
    if "BOKEH_VALIDATE_DOC" not in os.environ:
        settings.perform_document_validation.set_value(False)
    # A page builds about 600 Bokeh models and their properties (1 s of server time): Python's full garbage
    # collections, triggered by that many new objects, walked every object of the process each time (the imported
    # modules included) and took single builds from 1.0 to 1.4 s.  What is loaded now lives as long as the server:
    # moved out of the collector's reach (gc.freeze), and the oldest generation collected less often.
    import gc
    gc.collect()
    gc.freeze()
    gen0, gen1, _ = gc.get_threshold()
    gc.set_threshold(max(gen0, 5000), gen1, 50)
