"""Shared look of the plots: sizes readable on a 1280×720 projector, one perceptually uniform palette."""
from __future__ import annotations

import html
import re

import holoviews.plotting.bokeh  # noqa: F401 - the backend of the dashboard's HoloViews plots (the export's is matplotlib)
import numpy as np
import panel as pn
from bokeh.models import PlainText
from bokeh.palettes import Category10_10, Cividis256, Viridis256
from bokeh.plotting import figure

from ..transport import TextOnlyStr, after_user_action

PALETTE = Viridis256          # heatmaps: perceptually uniform
SERIES = Category10_10        # line series: distinct hues
#: Text of the plots: 16 px, what the back row of a lecture hall reads from a projector (issue 28); the size
#: control of the header changes every plot of a page (app.main.apply_fonts).
FONT = "16px"
PLOT_HEIGHT = 250
TOOLS = "pan,wheel_zoom,box_zoom,reset,save"
#: The legend of the line plots (HoloViews: ``legend_position="top_left", legend_opts=LEGEND``).
LEGEND = dict(label_text_font_size=FONT, background_fill_alpha=0.6, click_policy="hide", spacing=0, padding=4)


#: Accessible names of the main controls (screen readers, keyboard users, and tests that find them by label): by the
#: css class each control carries, since Panel makes their Bokeh models per page.  Set once the page is ready, on
#: the element that takes the focus (the button or the input) and, for the plot, on the plot with role "img".
ARIA = {"bft-export": "Download the figure of the fit as a PNG at projector resolution",
        "bft-theme": "Dark high-contrast theme",
        "bft-preset": "Choose a preset: a figure of the paper or a teaching demonstration",
        "bft-x-in": "x of a point to add", "bft-y-in": "y of a point to add",
        "bft-add-point": "Add the point (x, y) to the data",
        "bft-heldout-toggle": "Show 50 held-out test points from the true density",
        "bft-canvas-plot": "The learned density p(y|x) with the data; click to add a point"}
#: The names of the controls of tabs built when first opened (the "Information and hyperpriors" tab): named by the
#: same page script, once they exist (:data:`ARIA` holds the controls of every page from its first document).
LATER_ARIA = {"bft-info-step": "Step: add one datum drawn from the true h",
              "bft-info-reset": "Reset: no data, same seed",
              "bft-info-factorial": "factorial prior p(h) = p(h(x_a)) p(h(x_b))",
              "bft-info-figure": "Joint posterior to show: Fig 6 (h and γ) or Figs 9–10 (h and β of the prior "
                                 "mixture)",
              "bft-ic-deform": "Deformations of the templates: on or off"}



def make_figure(title: str, x_label: str, y_label: str, **kw):
    """A Bokeh figure with labelled axes, the save tool (PNG export) and projector-sized fonts."""
    kw.setdefault("tools", TOOLS)
    kw.setdefault("height", PLOT_HEIGHT)
    kw.setdefault("min_border_left", 50)
    fig = figure(title=title, x_axis_label=x_label, y_axis_label=y_label, sizing_mode="stretch_width",
                 toolbar_location="right", **kw)
    style_figure(fig)
    # three ticks along x: at 16 px, the default six ran into each other on a 220 px tile ("0 5101520")
    for ax in fig.xaxis:
        if hasattr(ax.ticker, "desired_num_ticks"):
            ax.ticker.desired_num_ticks = 3
    return fig


def label_axes(fig, labels: dict, x: str = "x", y: str = "y") -> None:
    """Name a figure's axes from a session's ``labels`` (a CSV header, in the user's units), else ``x`` and ``y``:
    as plain text (:class:`bokeh.models.PlainText`), so that a header such as ``$$\\int$$`` is shown as written
    and never typeset."""
    fig.xaxis[0].axis_label = PlainText(labels.get("x", x))
    fig.yaxis[0].axis_label = PlainText(labels.get("y", y))


def style_figure(fig) -> None:
    """The look of :func:`make_figure` on a Bokeh figure made elsewhere (by HoloViews: :func:`hv_look`)."""
    if fig.title is not None:
        fig.title.text_font_size = FONT
    for ax in (fig.xaxis, fig.yaxis):
        ax.axis_label_text_font_size = FONT
        ax.major_label_text_font_size = FONT
        ax.axis_label_text_font_style = "normal"
    fig.toolbar.logo = None
    fig.toolbar.active_scroll = None  # the mouse wheel scrolls the page; zoom by picking the wheel tool


# ------------------------------------------------------------------------------------------------ HoloViews
#: Options of a HoloViews overlay drawn like :func:`make_figure`: the same tools, the width of its column, the
#: axes' ranges following each new element (a DynamicMap otherwise keeps the ranges of its first one).
HV_OVERLAY = dict(tools=TOOLS.split(","), default_tools=[], active_tools=["pan"], toolbar="right", responsive=True,
                  framewise=True, show_grid=True, legend_position="top_left", legend_opts=LEGEND)


def hv_look(*after):
    """A HoloViews hook giving the Bokeh figure the look of :func:`make_figure` (fonts, toolbar, the wheel not
    zooming) and then running ``after(figure)``, once per plot: HoloViews runs hooks again at every update, and
    what is set once stays (HoloViews only re-sets a property whose declared value changed)."""
    def hook(plot, element):
        fig = plot.state
        if fig.min_border_left != 50:  # HoloViews sets its border again when the plot's size properties change
            fig.min_border_left = 50
        if getattr(plot, "_bft_looked", False):
            return
        plot._bft_looked = True
        style_figure(fig)
        for fn in after:
            fn(plot.state)
    return hook


def hv_name(name: str, handle: str = "source"):
    """A HoloViews hook naming one Bokeh model of an element's plot (its ColumnDataSource, or its ``glyph``: a
    VLine's Span): the page and the UI tests find it by that name, as they found the raw Bokeh source."""
    def hook(plot, element):
        model = plot.handles.get(handle)
        if model is not None and model.name != name:
            model.name = name
    return hook


class Shown:
    """Where a view's HoloViews plots are drawn: at once while they are shown, else when they are shown again.

    Panel keeps a plot rendered in a closed card or a tab left (its streams still draw it), so a plot nobody sees
    would be drawn again at every change (16-59 ms each, ``scripts/hv_static_cost.py``).  While hidden, the data
    are kept on the stream without an event and drawn when the plot is shown again: a fresh rendering of the plot
    would otherwise take HoloViews' cached element, drawn from the data before."""

    def __init__(self, shown: bool = True):
        self.shown = bool(shown)
        self._stale: list = []

    def send(self, pipe, data) -> None:
        if self.shown:
            pipe.send(data)
            return
        pipe.update(data=data)  # no event: nothing is drawn
        if not any(p is pipe for p in self._stale):
            self._stale.append(pipe)

    def show(self, shown: bool) -> None:
        self.shown = bool(shown)
        if self.shown:
            stale, self._stale = self._stale, []
            for pipe in stale:
                pipe.send(pipe.data)


def hv_pane(obj, **kw) -> pn.pane.HoloViews:
    """A HoloViews declaration drawn on the page by HoloViews' Bokeh backend (the export keeps matplotlib)."""
    kw.setdefault("sizing_mode", "stretch_width")
    return pn.pane.HoloViews(obj, backend="bokeh", **kw)


#: The alarms' looks (issue 28): amber for overfitting, purple for metastability; dark text on a pale ground, which
#: stays readable on the dark theme's black page as well.
ALARM_STYLES = {"overfitting-alarm": "background:#fff3cd;color:#5c3c00;border:2px solid #b35900",
                "metastability-alarm": "background:#f3e8ff;color:#3b0a66;border:2px solid #6a1b9a"}


def alarm_html(testid: str, verdict: dict | None) -> str:
    """An alarm's markup for a verdict, the element with ``data-testid=testid`` (its message escaped: the words
    reach the page as text, never as markup), or '' when there is none."""
    if not verdict:
        return ""
    style = f"{ALARM_STYLES[testid]};border-radius:6px;padding:6px 10px;font-size:16px;font-weight:600"
    return (f'<div data-testid="{testid}" role="alert" style="{style}">'
            f"{html.escape(str(verdict['message']))}</div>")


def _same(a, b) -> bool:
    """Whether two columns of a source hold the same values (text, numbers with NaN equal to NaN, or one array per
    line of a multi_line)."""
    if len(a) != len(b):
        return False
    if len(a) and isinstance(a[0], str):
        return list(a) == list(b)
    if len(a) and np.ndim(a[0]) > 0:  # multi_line columns: one array per line
        return all(_same(u, v) for u, v in zip(a, b))
    return np.array_equal(np.asarray(a, float), np.asarray(b, float), equal_nan=True)


def replace_data(source, data) -> None:
    """Send a source's columns only when they differ from what the browser has: a click changes the data points,
    not the truth or the templates, and every column sent costs the page a repaint."""
    old = source.data
    if set(old) != set(data) or not all(_same(old[k], v) for k, v in data.items()):
        source.data = data


def hidden_until_drawn(fig, **kw) -> pn.pane.Bokeh:
    """A pane for ``fig``, hidden with it until :func:`show_drawn` shows both: a Bokeh pane's figure is the model
    Panel sends, and it arrived visible (an empty plot) under a hidden pane."""
    fig.visible = False
    return pn.pane.Bokeh(fig, visible=False, **kw)


def show_drawn(pane: pn.pane.Bokeh, shown: bool) -> None:
    """Show or hide a pane of :func:`hidden_until_drawn` and its figure together."""
    set_changed(pane.object, visible=shown)
    if pane.visible != shown:
        pane.visible = shown


class BuiltWhenShown(pn.viewable.Viewer):
    """A view's place in a layout, the view built only once the session's problem first shows it.

    ``make()`` builds the view, ``shown(session)`` says whether the problem shows it, checked again when one of the
    session's parameters ``watch`` changes.  Until then the place holds a hidden spacer: the page does not pay the
    view's models (the BYY tile of a 1-D density is 94 of them, built in every page although only that kind shows
    it).  Built, the view stays and hides itself as before.  Within a user action (a preset, an upload) it is built
    after the action's message has gone out (:func:`app.transport.after_user_action`), as a redraw is."""

    def __init__(self, session, make, shown, watch):
        super().__init__()
        self.session, self._make, self._shown = session, make, shown
        self.view = None
        self.place = pn.Column(pn.Spacer(visible=False, margin=0), sizing_mode="stretch_width", margin=0)
        self._watcher = session.param.watch(self._check, list(watch))
        self._check()

    def _check(self, *_):
        if self.view is None and self._shown(self.session):
            if not after_user_action(self.session.pump.doc, self.build):
                self.build()

    def build(self):
        """Build the view now (once) and put it in its place."""
        if self.view is not None:
            return self.view
        self.session.param.unwatch(self._watcher)
        self.view = self._make()
        self.place.objects = [self.view]
        return self.view

    def __panel__(self):
        return self.place


def set_changed(obj, **props):
    """Assign only the properties whose value differs: keeps per-frame updates to what really changed."""
    changed = {k: v for k, v in props.items() if getattr(obj, k) != v}
    if changed:
        obj.update(**changed)


def legend_outside(fig):
    if fig.legend:
        fig.legend.location = "top_left"
        fig.legend.update(**LEGEND)


def teaching(equation: str, text: str) -> pn.Column:
    """The short explanation beside a plot: one rendered equation and a collapsible paragraph."""
    return pn.Column(
        pn.pane.LaTeX(equation, styles={"font-size": "14px"}, margin=(0, 10)),
        pn.Card(pn.pane.Markdown(text, margin=(0, 8), styles={"font-size": "13px"}), title="What this shows",
                collapsed=True, header_background="#f3f3f3", margin=(0, 10), sizing_mode="stretch_width"),
        sizing_mode="stretch_width", margin=0)


__all__ = ["ALARM_STYLES", "ARIA", "LATER_ARIA", "alarm_html", "HV_OVERLAY", "LEGEND", "PALETTE", "SERIES",
           "BuiltWhenShown", "Cividis256", "Shown", "hv_look",
           "hv_name", "hv_pane", "make_figure", "style_figure",
           "legend_outside", "html_text", "markdown_text",
           "set_changed", "teaching", "replace_data", "hidden_until_drawn", "show_drawn"]


# Text from outside (a link, an upload, a CSV header or cell, a file name, an error that quotes one) is shown as
# itself, never as markup.  Every text pane of Panel ends in the same browser code (panel/models/html.ts): the text
# is HTML-decoded once, given to MathJax when it holds a TeX delimiter ($$, \( or \[), then set as innerHTML with
# its <script> elements run.  So outside text needs HTML's &, <, > escaped, and no "$" or "\" left in the HTML.

#: Characters that stop being themselves in HTML that MathJax reads: the HTML metacharacters and TeX's delimiters.
_HTML_SPECIAL = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "$": "&#36;", "\\": "&#92;"}
_HTML_SPECIAL_RE = re.compile("[&<>$\\\\]")
#: ASCII punctuation, which CommonMark lets a backslash turn into the character itself; not the quotes, which
#: Panel's renderer leaves as they are (markdown-it without its typographer) and messages often hold.
_MARKDOWN_SPECIAL_RE = re.compile(r"[!#-&(-/:-@\[-`{-~]")


def html_text(text) -> str:
    """Outside text as HTML that shows exactly that text: &, <, > as entities, and "$", "\\" as entities too, so
    that MathJax finds no TeX delimiter in it.  Line breaks are kept (a ``Str`` pane shows them)."""
    return _HTML_SPECIAL_RE.sub(lambda m: _HTML_SPECIAL[m.group()], str(text))


def _markdown_char(m: re.Match) -> str:
    c = m.group()
    # "$" and "\\" leave the Markdown renderer as themselves (it only escapes &, <, >, "): an empty element after
    # each keeps two of them from making a TeX delimiter ($$, \(, \[) in the HTML that MathJax reads
    return f"\\{c}<span></span>" if c in "$\\" else f"\\{c}"


def markdown_text(text) -> str:
    """Outside text to put into a ``pn.pane.Markdown``, shown exactly as written on one line: the ASCII
    punctuation backslash-escaped (no tag, link, bare address, emphasis, entity, heading or list can start), whitespace
    runs (line breaks too) as one space (no block can start), and no TeX delimiter left for MathJax."""
    return _MARKDOWN_SPECIAL_RE.sub(_markdown_char, " ".join(str(text).split()))


class _TextOnlyStr(TextOnlyStr):
    """:class:`app.transport.TextOnlyStr` with the object escaped first (:func:`html_text`): the one place where the
    message line and every other :class:`LiveText` are rendered."""

    escape = staticmethod(html_text)


class LiveText:
    """A line of text the server changes often (the point count, the status line, the message line, the sweep's
    progress).

    Panel's text panes (``Str``, ``Markdown``, ``HTML``) assign their stylesheets again with every new text, and
    Bokeh takes a list of new stylesheet models for a change of the document's model graph: it walks all of the
    page's ~1000 models again each time (measured with a hook on ``doc.models.recompute``: one walk per text update,
    the largest part of a click on the server).  Here only the text is sent.  A plain Bokeh ``Div`` would avoid it
    too, but BokehJS lays the whole page out again whenever a Div's text changes (a click took twice as long)."""

    def __init__(self, text: str = "", *, styles=None, **kw):
        style = {"font-size": "13px", "white-space": "nowrap", "overflow": "hidden", "text-overflow": "ellipsis"}
        style.update(styles or {})
        self.pane = _TextOnlyStr(text, styles=style, **kw)

    @property
    def text(self) -> str:
        return self.pane.object

    def set(self, text: str) -> None:
        if self.pane.object != text:
            self.pane.object = text

    def follow(self, parameterized, name: str, fmt=str) -> "LiveText":
        """Show ``fmt(value)`` of the parameter ``name`` of ``parameterized``, now and whenever it changes."""
        self.set(fmt(getattr(parameterized, name)))
        parameterized.param.watch(lambda event: self.set(fmt(event.new)), name)
        return self

    def __panel__(self):
        return self.pane
