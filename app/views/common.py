"""Shared look of the plots: sizes readable on a 1280×720 projector, one perceptually uniform palette."""
from __future__ import annotations

import re

import panel as pn
from bokeh.models import CustomJS
from bokeh.palettes import Category10_10, Cividis256, Viridis256
from bokeh.plotting import figure

from ..transport import BOKEH_TESTED

PALETTE = Viridis256          # heatmaps: perceptually uniform
SERIES = Category10_10        # line series: distinct hues
FONT = "13px"
PLOT_HEIGHT = 250
TOOLS = "pan,wheel_zoom,box_zoom,reset,save"


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
#: (:data:`app.transport.BOKEH_TESTED`) they are not installed.
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


#: Accessible names of the main controls (screen readers, keyboard users, and tests that find them by label): by the
#: css class each control carries, since Panel makes their Bokeh models per page.  Set once the page is ready, on
#: the element that takes the focus (the button or the input) and, for the plot, on the plot with role "img".
ARIA = {"bft-export": "Download the main plot as a PNG at projector resolution",
        "bft-theme": "Dark high-contrast theme",
        "bft-preset": "Choose a preset: a figure of the paper or a teaching demonstration",
        "bft-x-in": "x of a point to add", "bft-y-in": "y of a point to add",
        "bft-add-point": "Add the point (x, y) to the data",
        "bft-heldout-toggle": "Show 50 held-out test points from the true density",
        "bft-canvas-plot": "The learned density p(y|x) with the data; click to add a point"}
ARIA_JS = """
for (const d of Bokeh.documents) for (const m of d._all_models.values()) {
  const classes = m.css_classes || [];
  const name = m.name === "bft-canvas" ? "bft-canvas-plot" : classes.find((c) => c in labels);
  if (!name || !(name in labels)) continue;
  const v = Bokeh.index.find_one(m);
  if (!v) continue;
  const el = name === "bft-canvas-plot" ? v.el
    : (v.button_el || (v.shadow_el && v.shadow_el.querySelector("input, select, button")) || v.el);
  el.setAttribute("aria-label", labels[name]);
  // the spinner's arrow buttons out of the Tab order: Tab goes x -> y -> "Add point" (the arrow keys still step)
  if (v.shadow_el) for (const b of v.shadow_el.querySelectorAll(".bk-spin-btn")) b.setAttribute("tabindex", "-1");
  if (name === "bft-canvas-plot") el.setAttribute("role", "img");
}
"""


def install_browser_patches(doc) -> None:
    """Attach :data:`BROWSER_PATCHES_JS` to the document's ``document_ready`` event (served pages of the tested
    Bokeh only)."""
    if doc is not None and BOKEH_TESTED:
        doc.js_on_event("document_ready", CustomJS(code=BROWSER_PATCHES_JS))


def make_figure(title: str, x_label: str, y_label: str, **kw):
    """A Bokeh figure with labelled axes, the save tool (PNG export) and projector-sized fonts."""
    kw.setdefault("tools", TOOLS)
    kw.setdefault("height", PLOT_HEIGHT)
    kw.setdefault("min_border_left", 50)
    fig = figure(title=title, x_axis_label=x_label, y_axis_label=y_label, sizing_mode="stretch_width",
                 toolbar_location="right", **kw)
    if fig.title is not None:
        fig.title.text_font_size = "14px"
    for ax in (fig.xaxis, fig.yaxis):
        ax.axis_label_text_font_size = FONT
        ax.major_label_text_font_size = "12px"
        ax.axis_label_text_font_style = "normal"
    fig.toolbar.logo = None
    fig.toolbar.active_scroll = None  # the mouse wheel scrolls the page; zoom by picking the wheel tool
    return fig


def set_changed(obj, **props):
    """Assign only the properties whose value differs: keeps per-frame updates to what really changed."""
    changed = {k: v for k, v in props.items() if getattr(obj, k) != v}
    if changed:
        obj.update(**changed)


def legend_outside(fig):
    if fig.legend:
        fig.legend.location = "top_left"
        fig.legend.label_text_font_size = "11px"
        fig.legend.background_fill_alpha = 0.6
        fig.legend.click_policy = "hide"
        fig.legend.spacing = 0
        fig.legend.padding = 4


def teaching(equation: str, text: str) -> pn.Column:
    """The short explanation beside a plot: one rendered equation and a collapsible paragraph."""
    return pn.Column(
        pn.pane.LaTeX(equation, styles={"font-size": "14px"}, margin=(0, 10)),
        pn.Card(pn.pane.Markdown(text, margin=(0, 8), styles={"font-size": "13px"}), title="What this shows",
                collapsed=True, header_background="#f3f3f3", margin=(0, 10), sizing_mode="stretch_width"),
        sizing_mode="stretch_width", margin=0)


__all__ = ["ARIA", "ARIA_JS", "install_browser_patches", "PALETTE", "SERIES", "Cividis256", "make_figure",
           "legend_outside", "html_text", "markdown_text",
           "set_changed", "teaching"]


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


class _TextOnlyStr(pn.pane.Str):
    """``pn.pane.Str`` whose new text goes to its Bokeh model alone (see :class:`LiveText`), as text: Panel's
    ``Str`` puts its object into HTML unescaped (``<pre>`` + object + ``</pre>``), and the browser sets that as
    innerHTML, so a message quoting a link's ``<img onerror=...>`` ran it.  The object is escaped first
    (:func:`html_text`): the one place where the message line and every other :class:`LiveText` are rendered."""

    def _transform_object(self, obj):
        return super()._transform_object(None if obj is None else html_text(obj))

    def _update(self, ref, model):  # Panel's hook for an object change; the pin of pyproject.toml covers it
        text = self._get_properties(model.document).get("text")
        if text is not None and model.text != text:
            model.text = text


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
