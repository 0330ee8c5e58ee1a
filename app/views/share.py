"""Share and export: the state in the URL, the JSON configuration (download / upload) and the data as CSV."""
from __future__ import annotations

import io
import json
from urllib.parse import urlencode

import panel as pn
import param
from panel.io.state import set_curdoc

from ..state import BFTSession, URL_PARAMS, one_message


def url_query(session: BFTSession) -> str:
    """The URL query (``?...``) describing the whole state of ``session``: every URL parameter that is set."""
    query = {}
    for name in URL_PARAMS:
        value = getattr(session, name)
        if value is None:
            continue
        v = session.param[name].serialize(value)
        query[name] = v if isinstance(v, str) else json.dumps(v)
    return "?" + urlencode(query)


def read_url(session: BFTSession, query: dict) -> None:
    """Set the session from a link's parsed query (``Location.query_params``), as ``Location.sync`` reads one:
    each URL parameter present is deserialised by its parameter, and the changed ones are set together.  A query
    the session refuses (a value out of range, a foreign document) leaves the session on its defaults."""
    from panel.io.cache import is_equal
    changed = {}
    for name in URL_PARAMS:
        if name not in query:
            continue
        value = query[name]
        try:
            value = session.param[name].deserialize(value)
        except Exception:  # noqa: BLE001 - left as parsed, as Location.sync does
            pass
        try:
            equal = is_equal(value, getattr(session, name))
        except Exception:  # noqa: BLE001
            equal = False
        if not equal:
            changed[name] = value
    try:
        session.param.update(**changed)
    except Exception:  # noqa: BLE001 - a bad link opens the defaults
        pass


class SharePanel(pn.viewable.Viewer):
    session = param.ClassSelector(class_=BFTSession)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.session
        self.download = pn.widgets.FileDownload(callback=self._config_file, filename="bftcore-config.json",
                                                label="Download configuration (JSON)", button_type="primary",
                                                width=280)
        self.csv = pn.widgets.FileDownload(callback=lambda: io.StringIO(s.data_csv()), filename="bftcore-data.csv",
                                           label="Download data (CSV)", width=280)
        self.upload = pn.widgets.FileInput(accept=".json,application/json", width=280, name="upload")
        self.upload.param.watch(self._on_upload, "value")
        self.help = pn.pane.Markdown(
            "The address bar always holds the current state: copy it to hand out this exact setup. "
            "The JSON file reproduces the run on the command line: `python -m bftcore fit bftcore-config.json`. "
            "Each plot's toolbar has a save button for a PNG.", width=290, styles={"font-size": "12px"})

    def _config_file(self):
        return io.StringIO(json.dumps(self.session.export_config(), indent=2))

    def _on_upload(self, event):
        if event.new is None:
            return
        self.session.load_config(event.new)

    @staticmethod
    def sync_url(session: BFTSession):
        """Keep the whole state in the URL query (served sessions only).

        A link's query is read into the session once, when the page is built (:func:`read_url`).  Writing back
        is done here, once per burst of changes, in a next-tick callback of the session's document: the
        complete query of every URL parameter, not only the one that changed, so the address bar is a full
        description of the state.  ``Location.sync`` is not used: it also writes the query on every change, in
        its own form, so each click changed the address twice and the browser echoed it back twice; and alone,
        a change made from a Select sometimes reached the address bar only with the next event."""
        loc, doc = pn.state.location, pn.state.curdoc
        if loc is None or doc is None:
            return
        read_url(session, loc.query_params)
        pending = []

        def write():
            pending.clear()
            search = url_query(session)
            if loc.search != search:
                with set_curdoc(doc), one_message(doc):
                    loc.search = search

        def schedule(*_):
            if not pending:
                pending.append(True)
                doc.add_next_tick_callback(write)

        session.param.watch(schedule, list(URL_PARAMS))
        pn.state.onload(schedule)

    def __panel__(self):
        return pn.Column(self.download, self.csv, pn.pane.Markdown("**Upload a configuration**",
                                                                   margin=(5, 10, 0, 10)),
                         self.upload, self.help, width=300)
