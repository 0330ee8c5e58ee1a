"""The presets selector: each paper figure and the teaching demonstrations, with an explanation for a class."""
from __future__ import annotations

import panel as pn
import param

from ..session import BFTSession, preset_catalogue
from ..transport import user_action


class PresetsView(pn.viewable.Viewer):
    session = param.ClassSelector(class_=BFTSession)

    def __init__(self, **params):
        super().__init__(**params)
        self._presets = preset_catalogue()
        self.select = pn.widgets.Select(label="Preset", options=["(choose a preset)"] + list(self._presets),
                                        width=280, css_classes=["bft-preset"])
        self.explain = pn.pane.Markdown("", width=290, styles={"font-size": "13px"})
        self._syncing = False
        self.select.param.watch(self._on_select, "value")
        self.session.param.watch(self._on_session_preset, ["preset", "edited"])
        self._on_session_preset()

    def _on_select(self, event):
        if self._syncing or event.new not in self._presets:
            return
        # One message for everything a preset changes (about 40 widget, pane and plot properties): sent one by
        # one, each visibility change made the browser lay out the whole page again (0.15-0.35 s each), and the
        # page froze for 1.5-4 s before the new problem appeared.
        user_action(self.session.load_preset)(event.new)

    def _on_session_preset(self, *_):
        name = self.session.preset
        self._syncing = True
        try:
            self.select.value = name if name in self._presets else "(choose a preset)"
        finally:
            self._syncing = False
        if name in self._presets:
            text = self._presets[name][1]
        elif self.session.edited:  # only once the user changed something: a fresh page is not "edited"
            text = "*Edited by hand. Pick a preset to set everything at once.*"
        else:
            text = "*The starting problem. Pick a preset to set everything at once.*"
        if self.explain.object != text:
            self.explain.object = text

    def __panel__(self):
        return pn.Column(self.select, self.explain, width=300)
