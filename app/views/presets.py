"""The presets selector: each paper figure and the teaching demonstrations, named by what they show and grouped by
chapter, with an explanation for a class; a guide to read a preset's explanation before loading it; and a line that
says truthfully where the problem on screen comes from (a preset, a file, the evidence, an edit by hand)."""
from __future__ import annotations

import panel as pn
import param
from bokeh.models import CustomJS

from bftcore.models import presets as catalogue

from ..session import BFTSession, preset_catalogue
from ..transport import OPTION_TITLES_JS, user_action
from .common import markdown_text

NO_PRESET = "(choose a preset)"
#: The guide's own option values: a page holds one select with ``option[value='fig27']`` (the menu), never two.
GUIDE_PREFIX = "about:"


def title(name: str) -> str:
    """A preset's title (what it shows), or its name for a preset without one."""
    return catalogue.TITLES.get(name, name)


def menu_groups(prefix: str = "") -> dict:
    """The presets as Select ``groups``: chapter -> {name: name} (``prefix`` before each), a preset of the catalogue
    in no chapter last, under "Other".  BokehJS writes an option's label as its HTML value, and links and tests
    select a preset by its name: the labels stay the names, and the page shows each option's title instead
    (:data:`app.transport.OPTION_TITLES_JS`, with :func:`option_titles`)."""
    known = preset_catalogue()
    groups = {group: {prefix + n: prefix + n for n in names if n in known} for group, names in catalogue.GROUPS.items()}
    placed = {n for names in catalogue.GROUPS.values() for n in names}
    other = {prefix + n: prefix + n for n in known if n not in placed}
    if other:
        groups["Other"] = other
    return {g: items for g, items in groups.items() if items}


def option_titles() -> dict:
    """Option value -> the text the page shows for it: each preset's title, in the menu and in the guide."""
    return {**{n: title(n) for n in preset_catalogue()},
            **{GUIDE_PREFIX + n: title(n) for n in preset_catalogue()}}


def origin_text(session: BFTSession) -> str:
    """The line under the preset menu (Markdown): the preset's explanation while the problem is that preset, else
    where it comes from: "Your data: <file>", "Fig 27: … with λ chosen by the evidence (λ = …)", "Edited by hand
    from …".  A file's name is outside text: shown as text (:func:`app.views.common.markdown_text`)."""
    presets = preset_catalogue()
    if session.preset in presets:
        return presets[session.preset][1]
    origin = session.origin or {}
    if origin.get("preset") in presets:
        base = title(origin["preset"])
    elif origin.get("file") is not None:
        base = "your data: " + markdown_text(origin["file"])
    else:
        base = "the starting problem"
    pick = " Pick a preset to set everything at once."
    if "evidence_lambda" in origin:
        lam = f"λ chosen by the evidence (λ = {float(origin['evidence_lambda']):.3g})"
        if origin.get("edited"):
            return f"*Edited by hand from {base}, then {lam}.{pick}*"
        return f"*{base[:1].upper()}{base[1:]}, with {lam}.{pick}*"
    if session.edited:  # only once the user changed something: a fresh page is not "edited"
        return f"*Edited by hand from {base}.{pick}*"
    return f"*{base[:1].upper()}{base[1:]}.{pick}*"


class PresetsView(pn.viewable.Viewer):
    session = param.ClassSelector(class_=BFTSession)

    def __init__(self, **params):
        super().__init__(**params)
        self._presets = preset_catalogue()
        # grouped by chapter and named by what they show; the options' values stay the presets' names (links, tests)
        self.select = pn.widgets.Select(label="Preset", groups={"No preset loaded": {NO_PRESET: NO_PRESET},
                                                                **menu_groups()},
                                        value=NO_PRESET, width=280, css_classes=["bft-preset"])
        self.explain = pn.pane.Markdown("", width=290, styles={"font-size": "13px"})
        self._syncing = False
        self.select.param.watch(self._on_select, "value")
        self.session.param.watch(self._on_session_preset, ["preset", "edited", "origin"])
        self._on_session_preset()
        self._build_guide()
        doc = pn.state.curdoc
        if doc is not None:  # served: the options show the titles (menu_groups)
            doc.js_on_event("document_ready", CustomJS(args=dict(
                titles=option_titles(), classes=["bft-preset", "bft-preset-guide-select"]), code=OPTION_TITLES_JS))

    def _build_guide(self):
        """Read a preset before loading it: a second menu that only shows the title and the explanation, and a
        button that loads what is shown."""
        groups = menu_groups(GUIDE_PREFIX)
        first = next(iter(next(iter(groups.values())).values()))
        self.guide_select = pn.widgets.Select(label="Read about", groups=groups, value=first, width=260,
                                              css_classes=["bft-preset-guide-select"])
        self.guide_text = pn.pane.Markdown("", width=270, styles={"font-size": "13px"},
                                           css_classes=["bft-preset-guide-text"])
        self.guide_load = pn.widgets.Button(label="Load the example shown", color="primary", width=150,
                                            css_classes=["bft-preset-guide-load"])
        self.guide_select.param.watch(lambda _e: self._show_guide(), "value")
        self.guide_load.on_click(lambda _e: self._load_guided())
        self._show_guide()
        # (no "preset" in its names: a button named "...preset..." is found by get_by_role(name="Reset") too)
        self.guide = pn.Card(self.guide_select, self.guide_text, self.guide_load,
                             title="Read first: what each example shows",
                             collapsed=True, width=290, header_background="#f3f3f3", margin=(5, 5),
                             css_classes=["bft-preset-guide"])

    def guided(self) -> str:
        """The preset the guide shows."""
        return str(self.guide_select.value or "").removeprefix(GUIDE_PREFIX)

    def _show_guide(self):
        name = self.guided()
        if name in self._presets:
            self.guide_text.object = f"**{title(name)}**\n\n{self._presets[name][1]}"

    def _load_guided(self):
        name = self.guided()
        if name in self._presets:
            user_action(self.session.load_preset)(name)

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
            self.select.value = name if name in self._presets else NO_PRESET
        finally:
            self._syncing = False
        text = origin_text(self.session)
        if self.explain.object != text:
            self.explain.object = text

    def __panel__(self):
        return pn.Column(self.select, self.explain, self.guide, width=300)
