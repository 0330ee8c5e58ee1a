"""What the prior means: its templates drawn beside their weights, random fields drawn from it, and a column slice
p(y|x0) of the learned density against the true one under the cursor.

Why HoloViews here (issue 26: HoloViews wherever it holds the click-to-heatmap latency, a median under 50 ms at
1280x720): the template thumbnails and the prior samples are declared (:func:`thumb_element`, :func:`sample_element`:
images of the field, or a template's line, each a DynamicMap over a Pipe stream) and are never drawn on a click: they
change with the prior (λ, the orders, the templates, the grid), not with the data.  Measured with
``python scripts/hv_static_cost.py`` (median of 30): four new samples cost the server 58.5 ms (raw Bokeh's four
sources: 0.34 ms), two thumbnails 58.4 ms (0.29 ms); 0 plot updates in 3 clicks.  So that this does not land on
what answers a change either: within a user action (a preset, an upload, a button) they are drawn after its message
has gone out (:func:`app.transport.after_user_action`), a thumbnail only when its template changed, and the samples
only while their tab is open (:class:`app.views.common.Shown`).  A λ slider's step with the prior tab open does pay
the samples' drawing, 58.5 ms of server time.

Why raw Bokeh stays for the slice: it is live, redrawn under the mouse and at every frame of a run, in the browser
(CustomJS on the heatmap's mouse moves and on its image source, :data:`SLICE_JS`): no server time at all.  Declared
with HoloViews it would be drawn by the server (a stream of the cursor's x and of the frames): 20.5 ms of server
time per frame or mouse move (median of 30, ``python scripts/hv_static_cost.py``), on top of each frame of the
heatmap that a click starts.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import holoviews as hv
import numpy as np
import panel as pn
import param
from bokeh.events import MouseMove
from bokeh.models import ColumnDataSource, CustomJS, CustomJSTickFormatter, Label
from holoviews.streams import Pipe

from bftcore import api
from bftcore.foundations.templates import paper_true_density, template_values

from ..session import BFTSession
from ..transport import after_user_action
from .common import FONT, PALETTE, SERIES, Shown, hv_name, hv_pane, make_figure, markdown_text

#: Templates drawn (a file may have more; the first ones are shown) and random fields drawn from the prior.
MAX_THUMBS, N_SAMPLES = 6, 4
#: Parameters whose change redraws the prior samples ("what the prior believes before data").
PRIOR_PARAMS = ["model", "lam", "lam_x", "lam_y", "l0", "order", "order_coef", "extra_orders", "templates",
                "w_uniform", "w_paper_t1", "w_paper_t2", "w_gaussian", "gauss_mu", "gauss_sigma", "file_templates",
                "file_weights", "beta", "x_min", "x_max", "nx", "y_min", "y_max", "ny", "boundary_x", "boundary_y"]
SAMPLE_SEED = 7

#: The slice p(y|x0) at the column under the cursor, computed in the browser from the heatmap it already has (no
#: round trip to the server per mouse move); redone when a new frame arrives, at the last x0.
#:
#: What it costs the page is kept off a click's path (issue 13: the click's own mouse move and its first frame each
#: repainted the slice, 20-30 ms apiece, mostly laying the plot out again, while the heatmap waited):
#: - it is redrawn SLICE_DEFER_MS after a mouse move or a new frame (one timer, coalesced, at the latest x0), so a
#:   click's own move and its first frame paint the heatmap first; the slice follows within a tenth of a second;
#: - a redraw within the column already drawn, of the same frame, does nothing;
#: - the plot's box never changes size: its title is fixed (x0 is a label inside the frame) and its tick labels are
#:   padded to one width with figure spaces, so new ranges repaint it without a layout.
SLICE_DEFER_MS = 100
SLICE_JS = """
const moved = cb_obj.x !== undefined && cb_obj.event_name === 'mousemove';
if (moved) slice.__bft_x = cb_obj.x;
if (slice.__bft_timer) return;  // one pending redraw, at the latest x0, whatever triggered it
slice.__bft_timer = setTimeout(() => {
  slice.__bft_timer = null;
  draw(slice.__bft_x === undefined ? null : slice.__bft_x);
}, %(defer)d);
function draw(x_moved) {
  const img_data = image.data.image;
  if (!img_data || !img_data.length) return;
  let x0 = x_moved !== null ? x_moved : (slice.tags.length ? slice.tags[0] : null);
  const a = img_data[0];
  const shape = a.shape || [a.length, (a[0] && a[0].length) || 1];
  const ny = shape[0], nx = shape[1];
  const left = image.data.x[0], width = image.data.dw[0], bottom = image.data.y[0], height = image.data.dh[0];
  if (x0 === null) x0 = left + width / 2;
  const i = Math.floor((x0 - left) / width * nx);
  if (!(i >= 0 && i < nx)) return;
  const xc = left + (i + 0.5) * width / nx;
  // the column already drawn, from the same frame: nothing to do
  if (slice.tags.length && slice.tags[0] === xc && slice.__bft_image === a && slice.data.y.length === ny) return;
  slice.__bft_image = a;
  const flat = (a.flat && !ArrayBuffer.isView(a)) ? a.flat(Infinity) : a;
  const ys = [], p = [], pt = [];
  const tdata = truth.data.image && truth.data.image.length ? truth.data.image[0] : null;
  const tflat = tdata ? ((tdata.flat && !ArrayBuffer.isView(tdata)) ? tdata.flat(Infinity) : tdata) : null;
  for (let r = 0; r < ny; r++) {
    ys.push(bottom + (r + 0.5) * height / ny);
    p.push(flat[r * nx + i]);
    pt.push(tflat && tflat.length === flat.length ? tflat[r * nx + i] : NaN);
  }
  slice.data = {y: ys, p: p, p_true: pt};
  slice.tags = [xc];
  const text = 'x0 = ' + xc.toPrecision(3);
  if (where.text !== text) where.text = text;
}
""" % {"defer": SLICE_DEFER_MS}
#: Tick labels of one width (padded with U+2007, a space as wide as a digit): new ranges never resize the axis.
FIXED_WIDTH_TICKS_JS = """
const a = Math.abs(tick);
const s = a === 0 ? '0' : (a >= 1e4 || a < 1e-3) ? tick.toExponential(1) : String(+tick.toPrecision(3));
return s.padStart(8, '\u2007');
"""


#: The image of no field (a regression has no density to show): one cell, its glyph hidden (:func:`_hide_blank`).
BLANK = np.zeros((1, 1))


def _hide_blank(plot, element) -> None:
    """HoloViews hook: the image of :data:`BLANK` is not drawn (a real field has more than one cell)."""
    renderer = plot.handles.get("glyph_renderer")
    shown = element.data.shape[:2] != BLANK.shape if hasattr(element.data, "shape") else True
    if renderer is not None and renderer.visible != shown:
        renderer.visible = shown


def _small(name: str, w: int, h: int, *hooks) -> dict:
    """Options of a small picture without axes or tools (a thumbnail, a prior sample), its figure named ``name``."""
    def look(plot, element):
        fig = plot.state
        if fig.name != name:
            fig.update(name=name, outline_line_color=None)
    # padding: a margin around the picture as the raw Bokeh figures had (a template's line is not cut at the frame)
    return dict(backend="bokeh", width=w, height=h, xaxis=None, yaxis=None, toolbar=None, default_tools=[],
                border=2, padding=0.05, fontsize={"title": "11px"}, title="{label}", hooks=[look, *hooks])


def field_image(field, bounds, label: str = "", **opts) -> hv.Image:
    """A field on the grid (``field[i, j]`` at x_i, y_j) as an image over ``bounds`` (left, bottom, right, top), in
    the heatmap's palette scaled to its own range (framewise: each new field its own scale); None draws nothing."""
    img = BLANK if field is None else np.flipud(np.asarray(field, float).T)  # rows from the top: HoloViews' order
    opts = {"backend": "bokeh", "cmap": list(PALETTE), "framewise": True, **opts}
    opts["hooks"] = [_hide_blank, *opts.get("hooks", [])]
    return hv.Image(img, bounds=bounds, kdims=["x", "y"], vdims=["p"], label=label).opts(**opts)


def sample_element(k: int, data: dict) -> hv.Image:
    """Prior sample ``k`` of ``data`` (``fields``, ``bounds``, ``titles``; nothing drawn past the fields given); its
    source is named ``bft-prior-sample-source-k`` for the page and its tests."""
    fields = data["fields"]
    return field_image(fields[k] if k < len(fields) else None, data["bounds"], data["titles"][k],
                       **_small(f"bft-prior-sample-{k}", 230, 210, hv_name(f"bft-prior-sample-source-{k}")))


def thumb_element(j: int, data: dict) -> hv.Overlay:
    """Template ``j`` from ``data`` (``field``: its density on the grid, or None; ``line``: its values (x, y) for a
    regression; ``bounds`` of the image and ``title``): the density as an image, or the curve."""
    x, y = data["line"]
    return (field_image(data["field"], data["bounds"])
            * hv.Curve((x, y), "x", "y").opts(backend="bokeh", color=SERIES[(3 + j) % 10], line_width=2,
                                              framewise=True)).opts(
        **_small(f"bft-thumb-{j}", 76, 56)).relabel(data["title"])


def _same(a: dict, b: dict) -> bool:
    """Two thumbnails' data draw the same picture."""
    def eq(u, v):
        if u is None or v is None:
            return u is v
        return np.array_equal(np.asarray(u), np.asarray(v), equal_nan=True)
    return (a["title"] == b["title"] and a["bounds"] == b["bounds"] and eq(a["field"], b["field"])
            and all(eq(u, v) for u, v in zip(a["line"], b["line"])))


class PriorView(pn.viewable.Viewer):
    """Template thumbnails (beside the mixing bars), prior samples, and the column slice under the cursor."""

    session = param.ClassSelector(class_=BFTSession)
    canvas = param.Parameter(doc="The app.views.canvas.DataCanvas whose heatmap the slice reads.")

    def __init__(self, **params):
        super().__init__(**params)
        s = self.session
        # the thumbnails and the samples are declared (HoloViews, see the module's docstring): one stream each, the
        # view sends them what they draw.  A thumbnail is built when a template first needs it (_grow_thumbs): the
        # six of them were 266 of a new page's 1345 models and 30 % of the server's time to build it, for a
        # problem without templates (the default) that never shows one.  Built, it stays (hidden when unused).
        self.thumb_data: list[Pipe] = []
        self.thumb_panes: list[pn.pane.HoloViews] = []
        # until then the row holds a spacer of a thumbnail's height (an empty layout is a warning of Bokeh's checks)
        self.thumb_row = pn.Row(pn.Spacer(width=0, height=56, margin=0), margin=(0, 0, 0, 40), height=58,
                                css_classes=["bft-thumbs"])
        self.sample_data = Pipe(data=dict(fields=[], bounds=(0, 0, 1, 1), titles=[""] * N_SAMPLES))
        self.sample_panes = [hv_pane(hv.DynamicMap(partial(sample_element, k), streams=[self.sample_data],
                                                   cache_size=1), sizing_mode="fixed", width=230, height=210, margin=2)
                             for k in range(N_SAMPLES)]
        self.samples_shown = Shown()  # the prior tab is open (app.main tells): the samples are drawn only then
        self.thumbs_shown = Shown()  # beside the mixing bars: always
        self.samples_note = pn.pane.Markdown("", styles={"font-size": "12px"}, margin=(0, 10))
        # the slice
        fig = make_figure("column slice p(y | x0)  (hover on the density)", "y", "p(y|x0)", height=200,
                          tools="save", name="bft-slice")
        fig.yaxis.formatter = CustomJSTickFormatter(code=FIXED_WIDTH_TICKS_JS)
        self.slice_where = Label(x=8, y=8, x_units="screen", y_units="screen", text="", text_font_size="13px",
                                 name="bft-slice-x0")
        fig.add_layout(self.slice_where)
        fig.sizing_mode = "stretch_width"
        # a flat start until the mouse hovers the density: an automatic range of no data logged "could not set
        # initial ranges" at every page load
        self.slice = ColumnDataSource(dict(y=[0.0, 1.0], p=[0.0, 0.0], p_true=[0.0, 0.0]), name="bft-slice-source")
        fig.line("y", "p", source=self.slice, color=SERIES[1], line_width=3, legend_label="learned")
        fig.scatter("y", "p", source=self.slice, color=SERIES[1], size=6)
        self.truth_line = fig.line("y", "p_true", source=self.slice, color="black", line_dash="dashed",
                                   line_width=2, legend_label="true")
        fig.legend.location = "top_right"
        fig.legend.label_text_font_size = FONT
        fig.legend.background_fill_alpha = 0.5
        self.slice_fig = fig
        # p(y | x0) is a column of a heatmap: a regression (y real-valued) or a 1-D density (no x) has none, so the
        # plot is put in the layout only beside a heatmap (hidden instead, it still logged "could not set initial
        # ranges" in the browser)
        self.slice_pane = pn.pane.Bokeh(fig, sizing_mode="stretch_width")
        self.slice_box = pn.Column(sizing_mode="stretch_width", margin=0)
        # computed in the browser and only shown there: not sent back to the server (each frame sent the slice, its
        # title and the auto ranges BokehJS recomputed from it back: 22 range changes for two clicks)
        for model in (self.slice, fig.x_range, fig.y_range, self.slice_where):
            model.syncable = False
        self.truth = ColumnDataSource(dict(image=[]), name="bft-truth-image")
        canvas = self.canvas
        if canvas is not None:
            cb = CustomJS(args=dict(image=canvas.image_source, truth=self.truth, slice=self.slice,
                                    where=self.slice_where), code=SLICE_JS)
            canvas.figure.js_on_event(MouseMove, cb)
            canvas.image_source.js_on_change("data", cb)
        s.param.watch(self._update_thumbs, ["model", "templates", "file_templates", "file_weights", "gauss_mu",
                                            "gauss_sigma", "const_value", "lin_slope", "lin_intercept",
                                            "x_min", "x_max", "nx", "y_min", "y_max", "ny"])
        s.param.watch(self._update_samples, PRIOR_PARAMS)
        s.param.watch(self._update_truth, ["model", "truth", "x_min", "x_max", "nx", "y_min", "y_max", "ny"])
        self._update_thumbs()
        self._update_samples()
        self._update_truth()

    def _update_truth(self, *_):
        s = self.session
        heatmap = s.kind.drawn_as == "heatmap"
        if bool(self.slice_box.objects) != heatmap:
            self.slice_box.objects = [self.slice_pane] if heatmap else []
        if not s.kind.y_on_grid or s.truth != "paper":
            self.truth.data = dict(image=[])
            self.truth_line.visible = False
            return
        self.truth.data = dict(image=[np.ascontiguousarray(paper_true_density(s.grid).T)])
        self.truth_line.visible = True

    def _thumb_data(self) -> list[dict]:
        """What the thumbnails draw, one dict per thumbnail (:data:`MAX_THUMBS`): for each template shown, its
        density on the grid or, for a regression, its values at the x nodes; the image's box and the title
        (``shown``: the thumbnail has a template)."""
        s = self.session
        assert s is not None
        g = s.grid
        specs = s.template_specs()[0][:MAX_THUMBS]
        labels = s.template_labels()
        box = (g.x.min - g.hx / 2, g.y.min - g.hy / 2, g.x.min - g.hx / 2 + max(g.x.n * g.hx, 1e-9),
               g.y.min - g.hy / 2 + max(g.y.n * g.hy, 1e-9))
        out = []
        for j in range(MAX_THUMBS):
            d: dict[str, Any] = dict(field=None, line=(np.zeros(0), np.zeros(0)), bounds=box, title="",
                                     shown=j < len(specs))
            out.append(d)
            if j >= len(specs):
                continue
            spec = specs[j]
            d["title"] = f"t{j + 1} {labels[j]}"[:18]
            try:
                if not s.kind.y_on_grid:
                    y = np.asarray(template_values(spec, g.x.nodes), float)
                    x = g.x.nodes if g.x.n > 1 else np.array([g.x.min - 1.0, g.x.max + 1.0])
                    y = y if len(y) == len(x) else np.full(len(x), y[0])
                    d["line"] = (np.asarray(x, float), y)
                    # the image draws nothing: its box within the curve's, so that the axes are the curve's
                    d["bounds"] = (float(x.min()), float(np.nanmin(y)), float(x.max()), float(np.nanmax(y)) + 1e-9)
                else:
                    d["field"] = np.asarray(api.template_density(spec, g), float)
            except (ValueError, KeyError, TypeError):
                pass
        return out

    def _update_thumbs(self, *_):
        datas = self._thumb_data()
        if sum(d["shown"] for d in datas) > len(self.thumb_panes):
            # within a user action (a preset, an upload) after its message has gone out, as a redraw is (_send)
            assert self.session is not None
            if not after_user_action(self.session.pump.doc, self._grow_thumbs):
                self._grow_thumbs()
        for pane, pipe, data in zip(self.thumb_panes, self.thumb_data, datas):
            if pane.visible != data["shown"]:
                pane.visible = data["shown"]
            # a template's slider redraws that template's thumbnail alone; a hidden one keeps what it drew
            if data["shown"] and not _same(pipe.data, data):
                self._send(self.thumbs_shown, pipe, data)

    def _grow_thumbs(self) -> None:
        """Build the thumbnails the templates now need and have not had yet (each drawn from its data at once), and
        put them in the row in one change."""
        datas = self._thumb_data()
        needed = sum(d["shown"] for d in datas)
        if needed <= len(self.thumb_panes):
            return
        for j in range(len(self.thumb_panes), needed):
            pipe = Pipe(data=datas[j])
            self.thumb_data.append(pipe)
            self.thumb_panes.append(hv_pane(hv.DynamicMap(partial(thumb_element, j), streams=[pipe], cache_size=1),
                                            sizing_mode="fixed", width=76, height=56, margin=0))
        self.thumb_row.objects = list(self.thumb_panes)

    def _send(self, shown: Shown, pipe: Pipe, data) -> None:
        """Send a plot what it draws: within a user action (a preset, a button) after the action's message has gone
        out, so that the heatmap answering it does not wait for the drawing
        (:func:`app.transport.after_user_action`)."""
        assert self.session is not None
        if not after_user_action(self.session.pump.doc, partial(shown.send, pipe, data)):
            shown.send(pipe, data)

    def show_samples(self, shown: bool) -> None:
        """The prior tab was opened (the samples that changed meanwhile are drawn) or closed."""
        self.samples_shown.show(shown)

    def _update_samples(self, *_):
        s = self.session
        if not s.kind.y_on_grid:
            self.samples_note.object = "Prior samples are drawn for the density models."
            self._send(self.samples_shown, self.sample_data,
                       dict(fields=[], bounds=(0, 0, 1, 1), titles=[""] * N_SAMPLES))
            return
        try:
            cfg = api.validate_config(s.to_config())
            problem = api.build_density(cfg)
            dens, comp = api.prior_samples(problem, N_SAMPLES, np.random.default_rng(SAMPLE_SEED))
        except Exception as e:  # noqa: BLE001 - a prior that cannot be sampled is named, the page goes on
            self.samples_note.object = f"No prior samples: {markdown_text(' '.join(str(e).split())[:160])}"
            return
        g = problem.grid if hasattr(problem, "grid") else s.grid
        left, bottom = g.x.min - g.hx / 2, g.y.min - g.hy / 2
        several = len(s.template_labels()) > 1
        self._send(self.samples_shown, self.sample_data, dict(
            fields=[np.asarray(dens[k], float) for k in range(N_SAMPLES)],
            bounds=(left, bottom, left + g.x.n * g.hx, bottom + g.y.n * g.hy),
            titles=[f"sample {k + 1}" + (f" (t{int(comp[k]) + 1})" if several else "") for k in range(N_SAMPLES)]))
        self.samples_note.object = (f"Random fields p(y|x) drawn from the prior (λ = {s.lam:g}, {s.order}): what it "
                                    "believes before any data. A larger λ gives smoother fields.")

    def thumbnails(self):
        """The template thumbnails, one per template (placed beside the mixing bars; empty, at its height, until a
        template needs one)."""
        return self.thumb_row

    def samples_panel(self):
        return pn.Column(pn.pane.Markdown("**Random fields from the prior**", margin=(0, 10)),
                         pn.FlexBox(*self.sample_panes, flex_wrap="wrap"),
                         self.samples_note,
                         css_classes=["bft-prior-samples"])

    def slice_panel(self):
        """The slice's place in a layout: the plot beside a heatmap, nothing otherwise."""
        return self.slice_box

    def __panel__(self):
        return pn.Column(self.samples_panel(), self.slice_panel(), sizing_mode="stretch_width")
