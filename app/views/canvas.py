"""The data canvas: p(y|x) as a heatmap over the grid with the training points; click to add or remove.

Raw Bokeh, not HoloViews (issue 26 asked for HoloViews wherever it holds the click-to-heatmap latency, a median under
50 ms at 1280x720): a frame of a run replaces the image column of one ColumnDataSource, 0.06-0.12 ms of server time
per frame; the same heatmap declared with HoloViews (a DynamicMap of an Image over a Pipe stream, the declared way to
stream) spends 24-27 ms of server time per frame re-rendering the element, on 10x15 to 128x128 (median of 100 frames,
``python scripts/hv_update_cost.py``; measured while a test run used the other core).  With the traces, the mixing
bars and the slice updated in the same frame, that alone would pass the 50 ms, and a worker serves a class.  The
static figures (the CLI's ``--png``, the *PNG (1920×1080)* button) are HoloViews: :mod:`bftcore.outputs.figures`.
"""
from __future__ import annotations

import math

import numpy as np
import panel as pn
import param
from bokeh.events import DoubleTap, Tap
from bokeh.models import (
    ColorBar,
    ColumnDataSource,
    CustomJS,
    CustomJSTickFormatter,
    LabelSet,
    LinearColorMapper,
    PointDrawTool,
)

from bftcore.api import empirical_density
from bftcore.foundations.templates import paper_true_density, template_values
from bftcore.models.presets import sample_paper_data

from ..configuration import X_RANGE, Y_RANGE, robust_of
from ..session import BFTSession
from ..transport import user_action
from .common import FONT, PALETTE, SERIES, label_axes, make_figure, replace_data
from .common import set_changed as _set
from .local import EMPTY_EDGES, soft_edges

GRID_PARAMS = ["x_min", "x_max", "nx", "y_min", "y_max", "ny"]
#: Number of held-out test points drawn from the paper's true density, and their seed (no preset uses it).
HELD_OUT_N, HELD_OUT_SEED = 50, 20_241_113

EQUATION = (r"$p(y|x) = e^{L(x,y)}$, with $\int e^{L(x,y)}\,dy = 1$ for every $x$;"
            r" the MAP field minimises $E_L = -\sum_i L(x_i,y_i) + \frac{\lambda}{2}(L-t, K(L-t))$")
EQUATION_REGRESSION = (r"$h(x) = \sum_j a_j\,\bar t_j(x)$ at the fixed point, $a_j \propto p_j e^{-\beta E_{h,j}}$;"
                       r" $E_{h,j} = \frac{1}{2}\sum_i (h(x_i)-y_i)^2 + \frac{\lambda}{2}(h-t_j, K(h-t_j))$")
TEXT_REGRESSION = """The orange curve is the MAP regression function h(x) of the mixture of Gaussian process priors, the
white dots the data and the dotted lines the templates t_j(x) the prior components are centred on. **Click** to
add a point at the nearest x node. With a single x node (fig. 7) the curve is one value, drawn as a diamond with
its number."""
#: A regression with a local prior (app.views.local draws its labels under the curve), per type.
EQUATION_LOCAL = {
    "switch": (r"$E(h) = \frac{\beta}{2}\sum_i (h(x_i)-y_i)^2 - \sum_e \ln \sum_k \pi_k\,\sqrt{r_k}\,"
               r"e^{-\frac{\beta}{2} r_k \kappa_0 (Dh)_e^2}$ (583), "
               r"$a_k(e) \propto \pi_k \sqrt{r_k}\, e^{-\frac{\beta}{2} r_k \kappa_0 (Dh)_e^2}$ (588)"),
    "hyperfield": (r"$E(h,\theta) = \frac{\beta}{2}\sum_i (h(x_i)-y_i)^2 + \frac{\kappa_0}{2}\sum_e e^{\theta_e}"
                   r"(Dh)_e^2 + \frac{1}{2}(\theta-\theta_0, K_\theta(\theta-\theta_0)) - \frac{1}{2}\sum_e"
                   r" \theta_e$ (456)"),
}
TEXT_LOCAL = {
    "switch": """Each edge between neighbouring x nodes has its own label: the Gaussian prior's stiffness
κ₀ = βλh (r = 1) or a soft one (r ≪ 1), with prior probabilities π_k. The strip under the curve is a_soft, the posterior
probability that an edge is soft. EM alternates: the labels from the curve, then the curve from the labels (one frame
each; the energy never rises). As β grows the jump opens only where the data ask for it; at small β no edge opens,
since a_soft tends to π_soft√r_soft / Σ_k π_k√r_k, not to π_soft.""",
    "hyperfield": """Each edge has a log-stiffness θ (relative to the Gaussian prior's κ₀ = βλh), tied to its
neighbours by the hyperprior K_θ = γ_θ(−Δ + μ_θ). The strip shows θ: it dips where the data jump and rises towards
1/(2γ_θμ_θ) where the curve is flat. The solver alternates the curve and θ; the joint energy never rises.""",
}
#: A density with a local prior on its grid's edges (bftcore.models.local_density), per type.
EQUATION_LOCAL_DENSITY = {
    "switch": (r"$E(L) = -\sum_i L(x_i,y_i) + (e^L, \Lambda_X) - \sum_e \ln \sum_k \pi_k\,\sqrt{r_k}\,"
               r"e^{-\frac{\beta}{2} r_k \kappa_0 (G(L-t))_e^2}$ over the x and y edges (583), (588)"),
    "hyperfield": (r"$E(L,\theta) = -\sum_i L(x_i,y_i) + (e^L, \Lambda_X) + \frac{\kappa_0}{2}\sum_e e^{\theta_e}"
                   r"(G(L-t))_e^2 + \frac{1}{2}(\theta-\theta_0, K_\theta(\theta-\theta_0)) - \frac{1}{2}\sum_e"
                   r" \theta_e$ (456)"),
}
TEXT_LOCAL_DENSITY = """A **local prior on the density**: every edge between neighbouring grid nodes, in x and in y, has
its own label (a switch between the Gaussian prior's stiffness and a soft one) or its own log-stiffness θ (a
hyperfield). Where the data jump, edges go soft and p(y|x) keeps a sharp step; elsewhere it is smoothed as by the
Gaussian prior. On a 2-D grid ln Z (switch) and ln det (hyperfield) are taken edge by edge, an approximation that is
exact only on a chain (bftcore.models.local_density says how far off it is). The labels are not drawn on the
density; the result file holds them (python -m bftcore fit)."""
#: A robust prior (app.views.robust), for a regression and for a density.
EQUATION_ROBUST = {
    "regression": (r"$E(h) = \sum_i \rho\big(h(x_i)-y_i\big) + \beta\lambda h_x \sum_e \psi\big((W(h-t))_e\big)$,"
                   r" $\psi(s) = a\big(1 - 1/(1 + (|s - s_0|/b)^\gamma)\big)$ (589)-(600), IRLS"),
    "density": (r"$E(L) = -\sum_i L(x_i,y_i) + (e^L, \Lambda_X) + \lambda h_x h_y \sum_e \psi\big((W(L-t))_e\big)$,"
                r" $\psi(s) = a\big(1 - 1/(1 + (|s - s_0|/b)^\gamma)\big)$ (589)-(600), IRLS"),
}
TEXT_ROBUST = """A **robust prior** (Sect. 6.5) replaces the Gaussian prior's ½s² on each difference s between
neighbouring nodes by a potential ψ of Fig 12 (the inset under *Robust prior*): the **cup** smooths small differences
like the Gaussian prior but costs at most a fixed amount, so a large jump stays sharp; the **cusp** (γ < 1) does so
more strongly; the **inverted cup** rewards large differences. A regression may also take a **robust data term**
(Sect. 3.7.4, Fig 5): with the ε-insensitive error or a mixture of Gaussians, an outlier pulls with a bounded force.
**Drag a point** (the outlier) and watch the fit ignore it. IRLS solves it: each step is a Gaussian problem with
weights ψ′(s)/s per edge and ρ′(e)/e per datum, and a line search on the true energy, which never rises."""
TEXT = """The colour is the learned conditional density p(y|x) on the grid; every column (fixed x) integrates to 1.
White dots are the training data. **Click** to add a point (it snaps to the nearest node), switch the click
mode to *remove* to delete the nearest point. The solver restarts from the current field after every change,
so you see it move rather than jump. *ln P* shows the field L itself; *true density* is the paper's
mixture of two Gaussians (708); *empirical density* is the normalised histogram of the data."""


NICE = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)


def nice_ceil(v: float) -> float:
    """The smallest number of the form n·10^k, n in :data:`NICE`, that is >= v > 0."""
    k = np.floor(np.log10(v))
    m = v / 10.0 ** k
    return float(f"{next(n for n in NICE if m <= n * (1 + 1e-12)):g}e{int(k)}")  # decimal: 0.6, not 0.6000000000000001


def nice_floor(v: float) -> float:
    """The largest number of the form n·10^k, n in :data:`NICE`, that is <= v > 0."""
    k = np.floor(np.log10(v))
    m = v / 10.0 ** k
    return float(f"{next(n for n in reversed(NICE) if n <= m * (1 + 1e-12)):g}e{int(k)}")


#: The colour bar's labels: the tick times ``scale`` (a power of ten the title names), rounded to what the float
#: holds (0.0008 reads "8", not "8.000e-4").
COLOUR_TICKS_JS = "return String(Number((tick * scale).toPrecision(6)));"


def colour_exponent(lo: float, hi: float) -> int:
    """The power of ten the colour bar's title takes out of its labels: 0 while the largest magnitude of the scale
    is from 0.01 to 10 000 (labels such as 0.25 or 1500 read as they are), else that magnitude's exponent, so that
    a density in user units (1e-3 per minute, 1e6 per dollar) reads "0.2, 0.4 ... ×10⁻³"."""
    top = max(abs(float(lo)), abs(float(hi)))
    if not math.isfinite(top) or top == 0.0 or 1e-2 <= top < 1e4:
        return 0
    return int(math.floor(math.log10(top)))


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def colour_title(label: str, exponent: int) -> str:
    """The colour bar's title: its label and, when the labels are scaled, the factor (``P ×10⁻³``)."""
    return label if exponent == 0 else f"{label} ×10{str(exponent).translate(_SUPERSCRIPT)}"


def colour_range(arr) -> tuple[float, float]:
    """The colour scale of the heatmap: rounded outward to the steps of :data:`NICE`, from 0 for a density.

    A density (no negative value) is shown from 0, so colours compare across frames and displays. The bounds are
    rounded so that a run's frames keep one scale until the field leaves it: the colours then show the learning
    rather than a rescaling, and the browser does not re-lay out the colour bar on every frame (its tick labels
    change width with the bounds)."""
    lo, hi = float(np.nanmin(arr)), float(np.nanmax(arr))

    def up(v):
        return nice_ceil(v) if v > 0 else (-nice_floor(-v) if v < 0 else 0.0)

    def down(v):
        return -up(-v)

    low = 0.0 if lo >= 0 else down(lo)
    high = up(hi)
    if high <= low:  # a constant field (0, or exactly a nice number)
        high = low + (abs(low) or 1.0) * 0.2
    return low, high


class DataCanvas(pn.viewable.Viewer):
    """Heatmap of P (or ln P, the truth, the empirical density) with the data on top; clicks edit the data."""

    session = param.ClassSelector(class_=BFTSession)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.session
        fig = make_figure("posterior density p(y|x)", "x", "y", name="bft-canvas",
                          x_range=(X_RANGE[0] - 0.5, X_RANGE[1] + 0.5),
                          y_range=(Y_RANGE[0] - 0.5, Y_RANGE[1] + 0.5), tools="pan,wheel_zoom,reset,save")
        self.mapper = LinearColorMapper(palette=PALETTE, low=0, high=1)
        self.image_source = ColumnDataSource(dict(image=[np.zeros((2, 2))], x=[0.0], y=[0.0], dw=[1.0], dh=[1.0]),
                                             name="bft-image-source")
        self.image = fig.image(image="image", x="x", y="y", dw="dw", dh="dh", source=self.image_source,
                               color_mapper=self.mapper)
        self.colour_labels = CustomJSTickFormatter(code=COLOUR_TICKS_JS, args=dict(scale=1.0))
        self.colorbar = ColorBar(color_mapper=self.mapper, width=10, title="P", title_text_font_size=FONT,
                                 major_label_text_font_size=FONT, formatter=self.colour_labels)
        fig.add_layout(self.colorbar, "right")
        self.curve_source = ColumnDataSource(dict(x=[], h=[]), name="bft-curve-source")
        self.curve = fig.line("x", "h", source=self.curve_source, color="orange", line_width=3, visible=False,
                              legend_label="MAP h(x)")
        # regression: the templates t_j(x) the prior components are centred on, and the curve of a one-node
        # problem (fig. 7), which a line cannot draw: a diamond with its value
        self.templates_source = ColumnDataSource(dict(xs=[], ys=[], color=[]), name="bft-canvas-templates")
        self.template_lines = fig.multi_line("xs", "ys", source=self.templates_source, color="color", line_width=2,
                                             line_dash="dotted", legend_label="templates t_j(x)", visible=False)
        self.marker_source = ColumnDataSource(dict(x=[], h=[], label=[]), name="bft-curve-marker")
        fig.scatter("x", "h", source=self.marker_source, marker="diamond", size=22, color="orange",
                    line_color="black")
        fig.add_layout(LabelSet(x="x", y="h", text="label", source=self.marker_source, x_offset=14, y_offset=-8,
                                text_font_size="16px", text_color="orange"))
        # a density's local prior: its soft edges as walls between the cells, as opaque as they are soft
        self.edges_source = ColumnDataSource(dict(EMPTY_EDGES), name="bft-local-edges")
        fig.segment("x0", "y0", "x1", "y1", source=self.edges_source, line_alpha="alpha", color="#ff4040",
                    line_width=3)
        # the held-out test data: points of the paper's true density, drawn with another seed than any preset's
        self.heldout_source = ColumnDataSource(dict(x=[], y=[]), name="bft-heldout-source")
        self.heldout = fig.scatter("x", "y", source=self.heldout_source, size=7, marker="x", color="#dddddd",
                                   alpha=0.7, line_width=2, legend_label="held-out test data", visible=False)
        self.points_source = ColumnDataSource(dict(x=[], y=[]), name="bft-points-source")
        self.points = fig.scatter("x", "y", source=self.points_source, size=10, fill_color="white",
                                  line_color="black", line_width=1.5, legend_label="data",
                                  selection_fill_color="white", nonselection_fill_alpha=1.0,
                                  nonselection_line_alpha=1.0)
        # drag a point to move it (the outlier of the robust preset): Bokeh's point-draw tool, without adding points
        # (a click adds one through the Tap event, snapped by the session), is the plot's drag tool, so a drag on a
        # point moves it in the browser.  The tool does not send the source it edits to the server (Bokeh 3.9: no
        # Python data change arrives), so at the end of every drag the page copies the points into a relay source
        # of their own, which it does send (_on_drag)
        self.drag = PointDrawTool(renderers=[self.points], add=False, drag=True,
                                  description="Drag a data point to move it")
        fig.add_tools(self.drag)
        fig.toolbar.active_drag = self.drag
        self.drag_relay = ColumnDataSource(dict(x=[], y=[]), name="bft-drag-relay")
        fig.js_on_event("panend", CustomJS(args=dict(src=self.points_source, relay=self.drag_relay),
                                           code="relay.data = {x: Array.from(src.data.x), y: Array.from(src.data.y)}"))
        self.drag_relay.on_change("data", self._on_drag)
        # repeated points: a ring whose size grows with the count, and the count beside it
        self.duplicates_source = ColumnDataSource(dict(x=[], y=[], n=[], size=[], label=[]),
                                                  name="bft-duplicates-source")
        fig.scatter("x", "y", source=self.duplicates_source, size="size", fill_alpha=0, line_color="white",
                    line_width=2.5)
        fig.add_layout(LabelSet(x="x", y="y", text="label", source=self.duplicates_source, x_offset=9, y_offset=4,
                                text_font_size="13px", text_color="white", text_font_style="bold"))
        fig.grid.visible = False  # under the image anyway; each renderer costs the browser a restyle per frame
        # the legend above the plot, in one line: inside, it covered the top-right nodes (a click at (10, 15) hit
        # the legend, not the canvas) and the data under it
        legend = fig.legend[0]
        fig.center.remove(legend)
        legend.update(orientation="horizontal", location="top_left", label_text_font_size=FONT,
                      background_fill_alpha=0, border_line_color=None, padding=0, margin=2, spacing=12)
        fig.add_layout(legend, "above")
        # Tap events reach the server without a TapTool; the tool would also hit-test and select glyphs on every
        # click (one more round of rendering and a selection message), which the canvas does not use.
        fig.on_event(Tap, self._on_tap)
        # BokehJS reads a second click within 300 ms of the last one, anywhere on the plot, as a double tap
        # (UIGestures.doubletap_threshold), not a tap: a student placing two points quickly lost the second.  Every
        # click is one point, so a double tap is a click too.
        fig.on_event(DoubleTap, self._on_tap)
        # Frame acknowledgement: each frame carries its serial in the image source's tags; the browser echoes it once
        # the frame is applied, and the runner holds further frames while the browser is behind (ACK_TIMEOUT_S).
        self.ack_source = ColumnDataSource(dict(), name="bft-frame-ack")
        self.image_source.js_on_change("tags", CustomJS(args=dict(ack=self.ack_source),
                                                        code="ack.tags = cb_obj.tags"))
        self.ack_source.on_change("tags", lambda attr, old, new: new and s.pump.ack_frame(int(new[0])))
        self.figure = fig
        fig.sizing_mode = "stretch_both"
        fig.min_width = 260
        # as tall as the layout makes it (CSS variable --bft-plot-min of app.main: the presenter gives it the window,
        # the workbench at least 260 px)
        fig.styles = {"min-height": "var(--bft-plot-min, 260px)"}
        self.pane = pn.pane.Bokeh(fig, sizing_mode="stretch_both", min_height=260)
        self._shown = {}  # what the browser already has, so that a frame sends only what changed
        self.show_heldout = pn.widgets.Checkbox(label=f"show {HELD_OUT_N} held-out test points (true density)",
                                                value=False, margin=(0, 10), css_classes=["bft-heldout-toggle"])
        self.show_heldout.param.watch(self._update_heldout, "value")
        #: More toggles of the hero's form row, placed by the layout (app.main: the posterior band and draws).
        self.extras: list = []
        #: What the layout puts right under the plot (app.main: a local prior's labels per edge, app.views.local).
        self.below: list = []
        s.param.watch(self._update_image, ["record", "display", "truth", "model"] + GRID_PARAMS)
        s.param.watch(self._update_points, ["data"])
        s.param.watch(self._update_ranges, ["model", "data", "templates", "file_templates", "const_value",
                                            "lin_slope", "lin_intercept"] + GRID_PARAMS)
        s.param.watch(self._update_templates, ["model", "templates", "file_templates", "const_value", "lin_slope",
                                               "lin_intercept", "x_min", "x_max", "nx"])
        s.param.watch(self._update_heldout, ["model", "truth"] + GRID_PARAMS)
        self.equation = pn.pane.LaTeX(EQUATION, styles={"font-size": "13px", "flex": "1 1 260px", "min-width": "0"},
                                      margin=(0, 10))
        self.text = pn.pane.Markdown(TEXT, margin=(0, 8), styles={"font-size": "13px"})
        self.card = pn.Card(self.text, title="What this shows", collapsed=True, margin=(0, 10), width=200,
                            header_background="#f3f3f3")
        # the keyboard way to add a point: type x and y, press the button (or Enter in a field, then the button)
        self.x_in = pn.widgets.FloatInput(label="x", value=5.0, width=90, margin=(0, 5),
                                          description="x of a point to add (keyboard)", css_classes=["bft-x-in"])
        self.y_in = pn.widgets.FloatInput(label="y", value=8.0, width=90, margin=(0, 5),
                                          description="y of a point to add (keyboard)", css_classes=["bft-y-in"])
        # no description: its tooltip took the first press of the button after the fields were edited (the point
        # was added only on the second press); the accessible name comes from app.views.common.ARIA
        self.add_button = pn.widgets.Button(label="Add point", width=100, margin=(18, 5, 0, 5),
                                            css_classes=["bft-add-point"])
        self.add_button.on_click(self._add_typed)
        s.param.watch(self._update_text, ["model", "local_prior", "robust_prior"])
        s.param.watch(self._update_edges, ["record", "local_prior", "lam_x", "lam_y", "model"] + GRID_PARAMS)
        self._update_text()  # a canvas built over a session that already holds a problem says what it draws
        s.param.watch(self._update_labels, ["labels"])
        self._update_labels()
        self._update_templates()
        self._update_heldout()
        self._update_ranges()
        self._update_points()
        self._update_image()
        self._update_edges()

    def _update_labels(self, *_):
        label_axes(self.figure, self.session.labels)

    @user_action  # the point, the count, the link and the first frame of its run: one message
    def _on_tap(self, event):
        self.session.click(event.x, event.y)

    @user_action  # the moved point, its run's first frame and the link: one message
    def _on_drag(self, attr, old, new):
        """The points as the browser has them after a drag (the relay): the one point that moved goes to the session
        (snapped to its node, with undo); anything else the browser did to the source (the tool's Delete key on a
        selected point) is put back from the session's data."""
        s = self.session
        try:
            xs, ys = np.asarray(new["x"], dtype=float), np.asarray(new["y"], dtype=float)
        except (KeyError, TypeError, ValueError):
            xs = ys = np.zeros(0)
        pts = np.asarray(s.data, dtype=float).reshape(-1, 2)
        if xs.shape == ys.shape == (len(pts),):
            moved = np.flatnonzero((xs != pts[:, 0]) | (ys != pts[:, 1]))
            if not len(moved):
                return  # the session's own data (a frame, a click), or a drag that ended where it began
            if len(moved) == 1 and s.move_point(int(moved[0]), float(xs[moved[0]]), float(ys[moved[0]])):
                return
        self.points_source.data = dict(x=pts[:, 0], y=pts[:, 1])  # refused or not a move: the session's points

    def _x_span(self):
        g = self.session.grid
        if g.x.n == 1 or not g.hx > 0:  # one x node (fig. 7): a unit either side of it
            return g.x.min - 1.0, g.x.max + 1.0
        return g.x.min - g.hx / 2, g.x.max + g.hx / 2

    def _update_ranges(self, *events):
        s, g = self.session, self.session.grid
        x0, x1 = self._x_span()
        if not s.kind.y_on_grid:  # y is real-valued: the data, the templates and the curve, not the density's y grid
            ys = [p[1] for p in s.data]
            for v in self.templates_source.data["ys"]:
                ys += [float(np.min(v)), float(np.max(v))]
            ys += [float(v) for v in self.curve_source.data["h"]] + [float(v) for v in self.marker_source.data["h"]]
            ys = [v for v in ys if np.isfinite(v)] or [0.0, 1.0]
            pad = max(0.1, 0.08 * (max(ys) - min(ys)))
            y0, y1 = min(ys) - pad, max(ys) + pad
            if events and all(e.name in ("data", "record") for e in events) and \
                    self.figure.y_range.start <= y0 and y1 <= self.figure.y_range.end:
                return  # a click inside the view, a frame inside the view: the axes stay
        else:
            if events and all(e.name == "data" for e in events):
                return
            y0, y1 = g.y.min - g.hy / 2, g.y.max + g.hy / 2
        _set(self.figure.x_range, start=x0, end=x1)
        _set(self.figure.y_range, start=y0, end=y1)

    def _update_templates(self, *_):
        s, g = self.session, self.session.grid
        ys = []
        if not s.kind.y_on_grid:
            for spec in s.template_specs()[0]:
                try:
                    ys.append(np.asarray(template_values(spec, g.x.nodes), float))
                except ValueError:
                    pass
        xs = g.x.nodes if g.x.n > 1 else np.array([g.x.min - 1.0, g.x.max + 1.0])
        ys = [v if len(v) == len(xs) else np.full(len(xs), float(v[0])) for v in ys]
        data = dict(xs=[xs] * len(ys), ys=ys, color=[SERIES[(3 + k) % 10] for k in range(len(ys))])
        self.templates_source.data = data
        _set(self.template_lines, visible=bool(ys))
        self._legend_follows()
        self._update_ranges()

    def _update_heldout(self, *_):
        s, g = self.session, self.session.grid
        paper = s.kind.y_on_grid and s.truth == "paper" and (g.x.min, g.x.max, g.y.min, g.y.max) == (
            X_RANGE[0], X_RANGE[1], Y_RANGE[0], Y_RANGE[1])
        self.show_heldout.visible = paper
        on = paper and self.show_heldout.value
        if on and not len(self.heldout_source.data["x"]):
            pts = sample_paper_data(HELD_OUT_N, HELD_OUT_SEED)
            self.heldout_source.data = dict(x=pts[:, 0], y=pts[:, 1])
        _set(self.heldout, visible=on)
        self._legend_follows()

    def _legend_follows(self):
        """A legend entry only for what is drawn (an empty "MAP h(x)" in density mode said nothing)."""
        for item in self.figure.legend.items:
            if item.renderers:
                _set(item, visible=bool(item.renderers[0].visible))

    def _update_text(self, *_):
        s = self.session
        regression = not s.kind.y_on_grid
        local = (s.local_prior or {}).get("local", {}).get("type") if regression else None
        if robust_of(s, s.kind.model):
            self.equation.object = EQUATION_ROBUST["regression" if regression else "density"]
            self.text.object = TEXT_ROBUST
            return
        if local:
            self.equation.object, self.text.object = EQUATION_LOCAL[local], TEXT_LOCAL[local]
            return
        local = (s.local_prior or {}).get("local", {}).get("type")
        if not regression and local:
            self.equation.object, self.text.object = EQUATION_LOCAL_DENSITY[local], TEXT_LOCAL_DENSITY
            return
        self.equation.object = EQUATION_REGRESSION if regression else EQUATION
        self.text.object = TEXT_REGRESSION if regression else TEXT

    def _update_points(self, event=None):
        data = self.session.data
        old = event.old if event is not None else None
        if old is not None and len(data) == len(old) + 1 and data[:-1] == old and \
                len(self.points_source.data["x"]) == len(old):
            self.points_source.stream(dict(x=[data[-1][0]], y=[data[-1][1]]))  # a click: send one point
            if data[-1] in data[:-1] or len(self.duplicates_source.data["x"]):
                self._update_duplicates()
            return
        pts = np.asarray(data, float).reshape(-1, 2)
        self.points_source.data = dict(x=pts[:, 0], y=pts[:, 1])
        self._update_duplicates()

    def _update_duplicates(self):
        """A ring and a count at every point given more than once (they would hide under each other)."""
        pts = np.asarray(self.session.data, float).reshape(-1, 2)
        uniq, counts = (np.unique(pts, axis=0, return_counts=True) if len(pts) else (np.zeros((0, 2)), np.zeros(0)))
        rep = counts > 1
        n = counts[rep].astype(int)
        data = dict(x=uniq[rep, 0], y=uniq[rep, 1], n=n, size=10 + 5 * np.minimum(n, 6),
                    label=[f"×{k}" for k in n])
        if len(n) or len(self.duplicates_source.data["x"]):
            self.duplicates_source.data = data

    def title_text(self, label: str = "") -> str:
        """What the canvas shows, in words (the title of the plot and of its PNG export).  Short enough for the
        hero at 1280×720 with a preset's name (the longer form ran past the plot for metastable_mixture)."""
        s = self.session
        assert s is not None  # a view is built with its session (param types the parameter as optional)
        g = s.grid
        where = f" · {s.preset}" if s.preset else ""
        if not s.kind.y_on_grid:
            # short: at 1280×720 the longer title ran past the plot; the legend names the data and the templates
            return f"regression h(x){where} · {len(s.data)} points"
        names = {"P": "posterior p(y|x)", "ln P": "log density L = ln p(y|x)",
                 "P_true": "true density p_true(y|x)", "P_emp": "empirical density"}
        return f"{names.get(label or 'P', label)}, {g.x.n}×{g.y.n} grid{where} · {len(s.data)} points"

    def field_shown(self):
        """The array on screen, shape (nx, ny), and its colour-bar title."""
        s, g = self.session, self.session.grid
        if s.display == "true density":
            return paper_true_density(g), "P_true"
        if s.display == "empirical density":
            N = g.counts(np.asarray(s.data, float).reshape(-1, 2))
            return empirical_density(N, g), "P_emp"
        rec = s.record
        if rec is None or not s.kind.y_on_grid or getattr(rec, "P", None) is None or np.shape(rec.P) != g.shape:
            return None, ""
        P = np.asarray(rec.P, float)
        if s.display == "ln P":
            return np.log(np.maximum(P, max(P.max(), 1e-300) * 1e-8)), "ln P"
        return P, "P"

    def _update_edges(self, *_):
        s = self.session
        edges = EMPTY_EDGES
        if s.kind.drawn_as == "heatmap" and s.local_prior:
            edges = soft_edges(s.record, s.grid, s.local_prior, s.lam_x, s.lam_y)
        if len(edges["x0"]) or len(self.edges_source.data["x0"]):
            replace_data(self.edges_source, edges)

    def _update_image(self, *_):
        s, g = self.session, self.session.grid
        arr, label = self.field_shown()
        regression = not s.kind.y_on_grid
        _set(self.curve, visible=regression)
        self._legend_follows()
        rec = s.record
        h = None
        if regression and rec is not None and getattr(rec, "h", None) is not None and len(rec.h) == g.x.n:
            h = np.asarray(rec.h, float)
        if regression and g.x.n == 1:  # one node: a diamond and its value instead of a line
            self.marker_source.data = dict(x=g.x.nodes, h=h, label=[f"h = {h[0]:.3g}"]) if h is not None else \
                dict(x=[], h=[], label=[])
            if len(self.curve_source.data["x"]):
                self.curve_source.data = dict(x=[], h=[])
        else:
            if h is not None:
                self.curve_source.data = dict(x=g.x.nodes, h=h)
            elif len(self.curve_source.data["x"]):
                self.curve_source.data = dict(x=[], h=[])
            if len(self.marker_source.data["x"]):
                self.marker_source.data = dict(x=[], h=[], label=[])
        if regression and h is not None:
            lo, hi = float(np.min(h)), float(np.max(h))
            if not (self.figure.y_range.start <= lo and hi <= self.figure.y_range.end):
                self._update_ranges()
        _set(self.figure.title, text=self.title_text(label))
        _set(self.image_source, tags=[s.pump.frame_serial])  # the browser echoes it: see ack_source
        if arr is None:
            _set(self.image, visible=False)
            _set(self.colorbar, visible=False)  # regression mode: no density, so no colour scale either
            return
        _set(self.image, visible=True)
        _set(self.colorbar, visible=True)
        lo, hi = colour_range(arr)
        _set(self.mapper, low=lo, high=hi)
        k = colour_exponent(lo, hi)
        if self.colour_labels.args.get("scale") != 10.0 ** -k:
            self.colour_labels.args = dict(scale=10.0 ** -k)
        _set(self.colorbar, title=colour_title(label, k))
        placement = (g.x.min - g.hx / 2, g.y.min - g.hy / 2, g.x.n * g.hx, g.y.n * g.hy)
        image = np.ascontiguousarray(arr.T)
        if self._shown.get("placement") == placement:
            self.image_source.data.update(image=[image])  # only the image column travels
        else:
            self.image_source.data = dict(image=[image], x=[placement[0]], y=[placement[1]], dw=[placement[2]],
                                          dh=[placement[3]])
            self._shown["placement"] = placement

    @user_action
    def _add_typed(self, *_):
        self.session.add_point(self.x_in.value, self.y_in.value)

    def __panel__(self):
        """The hero of the presenter layout: the plot fills what its container gives it; under it the equation,
        the keyboard form and the held-out toggle (one line each, fixed heights: nothing below moves)."""
        # a flex box that wraps: one line from 640 px up; on a phone the toggle goes below the form instead of
        # widening the hero past the window (as Rows, the form and the equation beside its card made the hero 480 px
        # wide at 390 and the canvas was clipped)
        form = pn.FlexBox(self.x_in, self.y_in, self.add_button, self.show_heldout, *self.extras, flex_wrap="wrap",
                          align_items="flex-start", sizing_mode="stretch_width", margin=0,
                          styles={"min-width": "0", "min-height": "40px"}, css_classes=["bft-add-form"])
        explain = pn.FlexBox(self.equation, self.card, flex_wrap="wrap", align_items="flex-start", margin=0,
                             sizing_mode="stretch_width", styles={"min-width": "0"})
        return pn.Column(self.pane, *self.below, explain, form,
                         sizing_mode="stretch_both", margin=0, css_classes=["bft-hero"])
