"""What the prior means: its templates drawn beside their weights, random fields drawn from it, and a column slice
p(y|x0) of the learned density against the true one under the cursor."""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.events import MouseMove
from bokeh.models import ColumnDataSource, CustomJS, CustomJSTickFormatter, Label, LinearColorMapper
from bokeh.plotting import figure

from bftcore import api
from bftcore.foundations.templates import paper_true_density, template_values

from ..session import BFTSession
from .common import PALETTE, SERIES, make_figure, markdown_text

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


def _thumb(name: str, w: int = 76, h: int = 56):
    f = figure(width=w, height=h, toolbar_location=None, tools="", name=name, min_border=2)
    f.axis.visible = False
    f.grid.visible = False
    f.title.text_font_size = "11px"
    f.outline_line_color = None
    return f


class PriorView(pn.viewable.Viewer):
    """Template thumbnails (beside the mixing bars), prior samples, and the column slice under the cursor."""

    session = param.ClassSelector(class_=BFTSession)
    canvas = param.Parameter(doc="The app.views.canvas.DataCanvas whose heatmap the slice reads.")

    def __init__(self, **params):
        super().__init__(**params)
        s = self.session
        self.mapper = LinearColorMapper(palette=PALETTE, low=0, high=1)
        self.thumbs, self.thumb_sources, self.thumb_lines = [], [], []
        for j in range(MAX_THUMBS):
            f = _thumb(f"bft-thumb-{j}")
            src = ColumnDataSource(dict(image=[], x=[], y=[], dw=[], dh=[]))
            line = ColumnDataSource(dict(x=[], y=[]))
            f.image(image="image", x="x", y="y", dw="dw", dh="dh", source=src,
                    color_mapper=LinearColorMapper(palette=PALETTE))
            f.line("x", "y", source=line, color=SERIES[(3 + j) % 10], line_width=2)
            f.visible = False
            self.thumbs.append(f)
            self.thumb_sources.append(src)
            self.thumb_lines.append(line)
        self.samples, self.sample_sources = [], []
        for k in range(N_SAMPLES):
            f = _thumb(f"bft-prior-sample-{k}", w=230, h=210)  # the tab has the room: readable on a projector
            src = ColumnDataSource(dict(image=[], x=[], y=[], dw=[], dh=[]), name=f"bft-prior-sample-source-{k}")
            f.image(image="image", x="x", y="y", dw="dw", dh="dh", source=src,
                    color_mapper=LinearColorMapper(palette=PALETTE))
            self.samples.append(f)
            self.sample_sources.append(src)
        self.samples_note = pn.pane.Markdown("", styles={"font-size": "12px"}, margin=(0, 10))
        # the slice
        fig = make_figure("column slice p(y | x0)  (hover on the density)", "y", "p(y|x0)", height=200,
                          tools="save", name="bft-slice")
        fig.yaxis.formatter = CustomJSTickFormatter(code=FIXED_WIDTH_TICKS_JS)
        self.slice_where = Label(x=8, y=8, x_units="screen", y_units="screen", text="", text_font_size="13px",
                                 name="bft-slice-x0")
        fig.add_layout(self.slice_where)
        fig.sizing_mode = "stretch_width"
        self.slice = ColumnDataSource(dict(y=[], p=[], p_true=[]), name="bft-slice-source")
        fig.line("y", "p", source=self.slice, color=SERIES[1], line_width=3, legend_label="learned")
        fig.scatter("y", "p", source=self.slice, color=SERIES[1], size=6)
        self.truth_line = fig.line("y", "p_true", source=self.slice, color="black", line_dash="dashed",
                                   line_width=2, legend_label="true")
        fig.legend.location = "top_right"
        fig.legend.label_text_font_size = "11px"
        fig.legend.background_fill_alpha = 0.5
        self.slice_fig = fig
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
        if s.is_regression or s.truth != "paper":
            self.truth.data = dict(image=[])
            self.truth_line.visible = False
            return
        self.truth.data = dict(image=[np.ascontiguousarray(paper_true_density(s.grid).T)])
        self.truth_line.visible = True

    def _update_thumbs(self, *_):
        s, g = self.session, self.session.grid
        specs = s.template_specs()[0][:MAX_THUMBS]
        labels = s.template_labels()
        placement = dict(x=[g.x.min - g.hx / 2], y=[g.y.min - g.hy / 2], dw=[max(g.x.n * g.hx, 1e-9)],
                         dh=[max(g.y.n * g.hy, 1e-9)])
        for j, f in enumerate(self.thumbs):
            if j >= len(specs):
                if f.visible:
                    f.visible = False
                continue
            spec = specs[j]
            f.title.text = f"t{j + 1} {labels[j]}"[:18]
            try:
                if s.is_regression:
                    y = np.asarray(template_values(spec, g.x.nodes), float)
                    x = g.x.nodes if g.x.n > 1 else np.array([g.x.min - 1.0, g.x.max + 1.0])
                    self.thumb_lines[j].data = dict(x=x, y=y if len(y) == len(x) else np.full(len(x), y[0]))
                    self.thumb_sources[j].data = dict(image=[], x=[], y=[], dw=[], dh=[])
                else:
                    P = np.asarray(api.template_density(spec, g), float)
                    self.thumb_sources[j].data = dict(image=[np.ascontiguousarray(P.T)], **placement)
                    self.thumb_lines[j].data = dict(x=[], y=[])
            except (ValueError, KeyError, TypeError):
                pass
            if not f.visible:
                f.visible = True

    def _update_samples(self, *_):
        s = self.session
        for src in self.sample_sources:
            src.tags = []
        if s.is_regression:
            self.samples_note.object = "Prior samples are drawn for the density models."
            for src in self.sample_sources:
                src.data = dict(image=[], x=[], y=[], dw=[], dh=[])
            return
        try:
            cfg = api.validate_config(s.to_config())
            problem = api.build_density(cfg)
            dens, comp = api.prior_samples(problem, N_SAMPLES, np.random.default_rng(SAMPLE_SEED))
        except Exception as e:  # noqa: BLE001 - a prior that cannot be sampled is named, the page goes on
            self.samples_note.object = f"No prior samples: {markdown_text(' '.join(str(e).split())[:160])}"
            return
        g = problem.grid if hasattr(problem, "grid") else s.grid
        placement = dict(x=[g.x.min - g.hx / 2], y=[g.y.min - g.hy / 2], dw=[g.x.n * g.hx], dh=[g.y.n * g.hy])
        for k, (src, f) in enumerate(zip(self.sample_sources, self.samples)):
            src.data = dict(image=[np.ascontiguousarray(np.asarray(dens[k], float).T)], **placement)
            f.title.text = f"sample {k + 1}" + (f" (t{int(comp[k]) + 1})" if len(s.template_labels()) > 1 else "")
        self.samples_note.object = (f"Random fields p(y|x) drawn from the prior (λ = {s.lam:g}, {s.order}): what it "
                                    "believes before any data. A larger λ gives smoother fields.")

    def thumbnails(self):
        """The template thumbnails, one per template (placed beside the mixing bars)."""
        return pn.Row(*[pn.pane.Bokeh(f, margin=0) for f in self.thumbs], margin=(0, 0, 0, 40), height=58,
                      css_classes=["bft-thumbs"])

    def samples_panel(self):
        return pn.Column(pn.pane.Markdown("**Random fields from the prior**", margin=(0, 10)),
                         pn.FlexBox(*[pn.pane.Bokeh(f, margin=2) for f in self.samples], flex_wrap="wrap"),
                         self.samples_note,
                         css_classes=["bft-prior-samples"])

    def slice_panel(self):
        return pn.pane.Bokeh(self.slice_fig, sizing_mode="stretch_width")

    def __panel__(self):
        return pn.Column(self.samples_panel(), self.slice_panel(), sizing_mode="stretch_width")
