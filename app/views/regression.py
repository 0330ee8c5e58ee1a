"""The regression function h(x) = ∫ y p(y|x) dy with a ±1 s.d. band; in regression mode MAP, exact mean, templates."""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource, Range1d

from bftcore.foundations.metrics import regression_function
from bftcore.foundations.templates import paper_true_density, template_values

from ..configuration import X_RANGE, Y_RANGE
from ..session import BFTSession
from .common import SERIES, label_axes, legend_outside, make_figure, replace_data, teaching

EQUATION_DENSITY = (r"$h(x) = \int y\,p(y|x)\,dy$ (709), band $h \pm \sigma(x)$, "
                    r"$\sigma^2(x) = \int (y-h(x))^2 p(y|x)\,dy$")
EQUATION_REGRESSION = (r"MAP: $h = \sum_j a_j \bar t_j$ with $a_j \propto p_j e^{-\beta E_{h,j}}$; exact: "
                       r"$\langle h\rangle = \sum_j b_j \bar t_j$ [001] (27)")
TEXT = """In density mode this is the mean of the learned p(y|x) in every column, with a band of one conditional
standard deviation; the dashed line is the same quantity for the true density. Note how a bimodal truth gives a
flat mean with a wide band: the mean alone hides the two branches.

In regression mode the orange line is the MAP solution of the mixture of Gaussian process priors, the blue line
the exact predictive mean (a mixture over components with weights b_j) with its variance band, and the thin
lines are the templates t_j the prior components are centred on."""


def _curve(spec, x):
    """A regression template (or a truth given as a list of node values) on the x nodes, by the solver's own
    :func:`bftcore.models.regression.template_values`; None for a shape that does not fit this grid."""
    try:
        return np.asarray(spec, float) if isinstance(spec, list) and len(spec) == len(x) else \
            template_values(spec, x)
    except ValueError:
        return None


class RegressionView(pn.viewable.Viewer):
    session = param.ClassSelector(class_=BFTSession)

    def __init__(self, **params):
        super().__init__(**params)
        # both ranges set by the server (from the grid, _update): an automatic x range of no data logged "could not
        # set initial ranges" at every page load
        fig = make_figure("regression function h(x)", "x", "y = h(x)", y_range=(Y_RANGE[0] - 0.5, Y_RANGE[1] + 0.5),
                          x_range=Range1d(X_RANGE[0] - 0.5, X_RANGE[1] + 0.5))
        self.band = ColumnDataSource(dict(x=[], lo=[], hi=[]))
        self.curve = ColumnDataSource(dict(x=[], h=[]), name="bft-regression-source")
        self.truth = ColumnDataSource(dict(x=[], h=[]))
        self.exact = ColumnDataSource(dict(x=[], h=[], lo=[], hi=[]))
        self.templates = ColumnDataSource(dict(xs=[], ys=[], color=[]))
        self.points = ColumnDataSource(dict(x=[], y=[]))
        fig.varea("x", "lo", "hi", source=self.band, fill_color=SERIES[1], fill_alpha=0.25, legend_label="± 1 s.d.")
        self.exact_band = fig.varea("x", "lo", "hi", source=self.exact, fill_color=SERIES[0], fill_alpha=0.2,
                                    legend_label="exact ± 1 s.d.")
        self.exact_line = fig.line("x", "h", source=self.exact, color=SERIES[0], line_width=2.5,
                                   legend_label="exact mean")
        fig.multi_line("xs", "ys", source=self.templates, color="color", line_width=1.5, line_dash="dotted")
        fig.line("x", "h", source=self.curve, color=SERIES[1], line_width=3, legend_label="h(x)")
        self.truth_line = fig.line("x", "h", source=self.truth, color="black", line_dash="dashed", line_width=2,
                                   legend_label="truth")
        fig.scatter("x", "y", source=self.points, size=7, color="black", alpha=0.6)
        legend_outside(fig)
        self.figure = fig
        self.caption = pn.pane.LaTeX(EQUATION_DENSITY)
        s = self.session
        self._points_stale = False
        s.param.watch(self._on_data, ["data", "running"])
        s.param.watch(self._update_static, ["truth", "model", "templates", "const_value", "lin_slope",
                                            "lin_intercept", "file_templates", "regression_truth", "x_min",
                                            "x_max", "nx", "y_min", "y_max", "ny"])
        s.param.watch(self._update_frame, ["history", "result"])  # history moves with the secondary frames
        s.param.watch(self._update_labels, ["labels"])
        self._update_labels()
        self._update_static()

    def _update_labels(self, *_):
        label_axes(self.figure, self.session.labels, y="y = h(x)")

    def _on_data(self, *events):
        """A click re-solves: its points join the curve they change in the next frame that updates this view, so the
        click itself repaints the canvas alone.  Without a run (not live, refused, stopped) they are shown at once."""
        if self.session.running:
            self._points_stale = True
        elif self._points_stale or any(e.name == "data" for e in events):
            self._update_static()

    def _update_static(self, *_):
        """What changes with the problem, not with the iterations: data, truth, templates, axes, captions."""
        self._points_stale = False
        s, g = self.session, self.session.grid
        x = g.x.nodes
        pts = np.asarray(s.data, float).reshape(-1, 2)
        replace_data(self.points, dict(x=pts[:, 0], y=pts[:, 1]))
        truth = None
        if not s.kind.y_on_grid and s.regression_truth is not None:
            truth = _curve(s.regression_truth, x)
        elif s.kind.y_on_grid and s.truth == "paper":
            truth = regression_function(paper_true_density(g), g)[0]
        replace_data(self.truth, dict(x=x if truth is not None else [], h=truth if truth is not None else []))
        for item in self.figure.legend.items:
            if item.renderers and item.renderers[0] in (self.exact_band, self.exact_line):
                item.visible = not s.kind.y_on_grid and s.kind.has_exact  # none for a local or robust prior
            if item.renderers and item.renderers[0] is self.truth_line:
                item.visible = truth is not None
        xpad = 0.5 * (g.hx if g.x.n > 1 else 1.0)
        self.figure.x_range.update(start=g.x.min - xpad, end=g.x.max + xpad)
        if not s.kind.y_on_grid:
            self.figure.title.text = ("regression: MAP h(x), exact predictive mean and templates" if s.kind.has_exact
                                      else "regression: MAP h(x) and templates")
            ys = [_curve(t, x) for t in s.template_specs()[0]]
            ys = [v for v in ys if v is not None]
            self.templates.data = dict(xs=[x] * len(ys), ys=ys, color=[SERIES[(3 + k) % 10] for k in range(len(ys))])
            self.caption.object = EQUATION_REGRESSION
            # the data's and the templates' y (the density's y grid, 1..15 on the paper domain, is not a
            # regression's: with it the robust preset's unit step was a flat line at the bottom of 0..15)
            lo = pts[:, 1].tolist() + [float(np.min(v)) for v in ys] or [0.0]
            hi = pts[:, 1].tolist() + [float(np.max(v)) for v in ys] or [1.0]
            pad = max(0.5, 0.05 * (max(hi) - min(lo)))
            self.figure.y_range.update(start=min(lo) - pad, end=max(hi) + pad)
        else:
            self.figure.title.text = "regression function h(x) = ∫ y p(y|x) dy"
            replace_data(self.templates, dict(xs=[], ys=[], color=[]))
            self.caption.object = EQUATION_DENSITY
            self.figure.y_range.update(start=g.y.min - 0.5, end=g.y.max + 0.5)
        self._update_frame()

    def _update_frame(self, *_):
        """The solver's current h (and the exact mean when the run is over): the only per-frame work."""
        s, g = self.session, self.session.grid
        if self._points_stale:
            self._update_static()  # ends with this method
            return
        x = g.x.nodes
        rec = s.record
        if not s.kind.y_on_grid:
            fits = rec is not None and getattr(rec, "h", None) is not None and len(rec.h) == g.x.n
            h = np.asarray(rec.h, float) if fits else None
            replace_data(self.curve, dict(x=x if h is not None else [], h=h if h is not None else []))
            if len(self.band.data["x"]):
                replace_data(self.band, dict(x=[], lo=[], hi=[]))
            exact = (s.result or {}).get("exact") if s.result else None
            if exact and len(exact.get("mean", [])) == g.x.n:
                m, sd = np.asarray(exact["mean"], float), np.sqrt(np.maximum(np.asarray(exact["var"], float), 0))
                replace_data(self.exact, dict(x=x, h=m, lo=m - sd, hi=m + sd))
            elif len(self.exact.data["x"]):
                replace_data(self.exact, dict(x=[], h=[], lo=[], hi=[]))
            return
        if len(self.exact.data["x"]):
            replace_data(self.exact, dict(x=[], h=[], lo=[], hi=[]))
        if rec is not None and getattr(rec, "P", None) is not None and np.shape(rec.P) == g.shape:
            h, sd = regression_function(np.asarray(rec.P, float), g)
            replace_data(self.curve, dict(x=x, h=h))
            replace_data(self.band, dict(x=x, lo=h - sd, hi=h + sd))
        elif len(self.curve.data["x"]):
            replace_data(self.curve, dict(x=[], h=[]))
            replace_data(self.band, dict(x=[], lo=[], hi=[]))

    def __panel__(self):
        return pn.Column(pn.pane.Bokeh(self.figure, sizing_mode="stretch_width"),
                         pn.Column(self.caption, teaching("", TEXT)[1], margin=0), sizing_mode="stretch_width")
