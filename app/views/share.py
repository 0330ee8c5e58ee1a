"""Share and export: the state in the URL, the JSON configuration (download / upload) and the data as CSV."""
from __future__ import annotations

import io
import json

import panel as pn
import param

from ..state import BFTSession, URL_PARAMS


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
        return io.StringIO(json.dumps(self.session.to_config(), indent=2))

    def _on_upload(self, event):
        if event.new is None:
            return
        self.session.load_config(event.new)

    @staticmethod
    def sync_url(session: BFTSession):
        """Keep the session's problem parameters in the URL query (served sessions only)."""
        if pn.state.location is not None:
            pn.state.location.sync(session, {p: p for p in URL_PARAMS})

    def __panel__(self):
        return pn.Column(self.download, self.csv, pn.pane.Markdown("**Upload a configuration**",
                                                                   margin=(5, 10, 0, 10)),
                         self.upload, self.help, width=300)
