"""The data canvas: p(y|x) as a heatmap over the grid with the training points; click to add or remove."""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.events import Tap
from bokeh.models import ColorBar, ColumnDataSource, CustomJS, LinearColorMapper

from bftcore.api import empirical_density
from bftcore.templates import paper_true_density

from ..configuration import X_RANGE, Y_RANGE
from ..session import BFTSession
from ..transport import one_message
from .common import PALETTE, make_figure, teaching
from .common import set_changed as _set

GRID_PARAMS = ["x_min", "x_max", "nx", "y_min", "y_max", "ny"]

EQUATION = (r"$p(y|x) = e^{L(x,y)}$, with $\int e^{L(x,y)}\,dy = 1$ for every $x$;"
            r" the MAP field minimises $E_L = -\sum_i L(x_i,y_i) + \frac{\lambda}{2}(L-t, K(L-t))$")
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
        self.colorbar = ColorBar(color_mapper=self.mapper, width=10, title="P", title_text_font_size="12px",
                                 major_label_text_font_size="11px")
        fig.add_layout(self.colorbar, "right")
        self.curve_source = ColumnDataSource(dict(x=[], h=[]))
        self.curve = fig.line("x", "h", source=self.curve_source, color="orange", line_width=3, visible=False,
                              legend_label="MAP h(x)")
        self.points_source = ColumnDataSource(dict(x=[], y=[]), name="bft-points-source")
        fig.scatter("x", "y", source=self.points_source, size=10, fill_color="white", line_color="black",
                    line_width=1.5, legend_label="data")
        fig.grid.visible = False  # under the image anyway; each renderer costs the browser a restyle per frame
        fig.legend.location = "top_right"
        fig.legend.label_text_font_size = "11px"
        fig.legend.background_fill_alpha = 0.5
        # Tap events reach the server without a TapTool; the tool would also hit-test and select glyphs on every
        # click (one more round of rendering and a selection message), which the canvas does not use.
        fig.on_event(Tap, self._on_tap)
        # Frame acknowledgement: each frame carries its serial in the image source's tags; the browser echoes it once
        # the frame is applied, and the runner holds further frames while the browser is behind (ACK_TIMEOUT_S).
        self.ack_source = ColumnDataSource(dict(), name="bft-frame-ack")
        self.image_source.js_on_change("tags", CustomJS(args=dict(ack=self.ack_source),
                                                        code="ack.tags = cb_obj.tags"))
        self.ack_source.on_change("tags", lambda attr, old, new: new and s.pump.ack_frame(int(new[0])))
        self.figure = fig
        self.pane = pn.pane.Bokeh(fig, sizing_mode="stretch_width")
        self._shown = {}  # what the browser already has, so that a frame sends only what changed
        s.param.watch(self._update_image, ["record", "display", "truth", "model"] + GRID_PARAMS)
        s.param.watch(self._update_points, ["data"])
        s.param.watch(self._update_ranges, ["model", "data"] + GRID_PARAMS)
        self._update_ranges()
        self._update_points()
        self._update_image()

    def _on_tap(self, event):
        with one_message(pn.state.curdoc):  # the point, the count, the regression plot and the URL: one message
            self.session.click(event.x, event.y)

    def _update_ranges(self, *events):
        s, g = self.session, self.session.grid
        x0, x1 = g.x.min - g.hx / 2, g.x.max + g.hx / 2
        if s.is_regression:  # y is real-valued: show the y axis and every datum, with a margin
            ys = [g.y.min, g.y.max] + [p[1] for p in s.data]
            pad = max(0.5, 0.05 * (max(ys) - min(ys)))
            y0, y1 = min(ys) - pad, max(ys) + pad
            if events and all(e.name == "data" for e in events) and \
                    self.figure.y_range.start <= y0 and y1 <= self.figure.y_range.end:
                return  # a click inside the view does not move the axes
        else:
            if events and all(e.name == "data" for e in events):
                return
            y0, y1 = g.y.min - g.hy / 2, g.y.max + g.hy / 2
        _set(self.figure.x_range, start=x0, end=x1)
        _set(self.figure.y_range, start=y0, end=y1)

    def _update_points(self, event=None):
        data = self.session.data
        old = event.old if event is not None else None
        if old is not None and len(data) == len(old) + 1 and data[:-1] == old and \
                len(self.points_source.data["x"]) == len(old):
            self.points_source.stream(dict(x=[data[-1][0]], y=[data[-1][1]]))  # a click: send one point
            return
        pts = np.asarray(data, float).reshape(-1, 2)
        self.points_source.data = dict(x=pts[:, 0], y=pts[:, 1])

    def field_shown(self):
        """The array on screen, shape (nx, ny), and its colour-bar title."""
        s, g = self.session, self.session.grid
        if s.display == "true density":
            return paper_true_density(g), "P_true"
        if s.display == "empirical density":
            N = g.counts(np.asarray(s.data, float).reshape(-1, 2))
            return empirical_density(N, g), "P_emp"
        rec = s.record
        if rec is None or s.is_regression or getattr(rec, "P", None) is None or np.shape(rec.P) != g.shape:
            return None, ""
        P = np.asarray(rec.P, float)
        if s.display == "ln P":
            return np.log(np.maximum(P, max(P.max(), 1e-300) * 1e-8)), "ln P"
        return P, "P"

    def _update_image(self, *_):
        s, g = self.session, self.session.grid
        arr, label = self.field_shown()
        regression = s.is_regression
        _set(self.curve, visible=regression)
        _set(self.figure.legend[0], visible=regression)
        rec = s.record
        if regression and rec is not None and getattr(rec, "h", None) is not None and len(rec.h) == g.x.n:
            self.curve_source.data = dict(x=g.x.nodes, h=np.asarray(rec.h, float))
        _set(self.figure.title, text="data and MAP regression h(x) — click to add points" if regression
                  else f"{label or 'P'} on the {g.x.n}×{g.y.n} grid — click to add points")
        _set(self.image_source, tags=[s.pump.frame_serial])  # the browser echoes it: see ack_source
        if arr is None:
            _set(self.image, visible=False)
            _set(self.colorbar, visible=False)  # regression mode: no density, so no colour scale either
            return
        _set(self.image, visible=True)
        _set(self.colorbar, visible=True)
        lo, hi = colour_range(arr)
        _set(self.mapper, low=lo, high=hi)
        _set(self.colorbar, title=label)
        placement = (g.x.min - g.hx / 2, g.y.min - g.hy / 2, g.x.n * g.hx, g.y.n * g.hy)
        image = np.ascontiguousarray(arr.T)
        if self._shown.get("placement") == placement:
            self.image_source.data.update(image=[image])  # only the image column travels
        else:
            self.image_source.data = dict(image=[image], x=[placement[0]], y=[placement[1]], dw=[placement[2]],
                                          dh=[placement[3]])
            self._shown["placement"] = placement

    def __panel__(self):
        return pn.Column(self.pane, teaching(EQUATION, TEXT), sizing_mode="stretch_width")
