"""The regression function h(x) = ∫ y p(y|x) dy with a ±1 s.d. band; in regression mode MAP, exact mean, templates."""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource

from ..state import BFTSession, Y_RANGE
from .common import SERIES, legend_outside, make_figure, teaching

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


class RegressionView(pn.viewable.Viewer):
    session = param.ClassSelector(class_=BFTSession)

    def __init__(self, **params):
        super().__init__(**params)
        fig = make_figure("regression function h(x)", "x", "y = h(x)", y_range=(Y_RANGE[0] - 0.5, Y_RANGE[1] + 0.5))
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
        self.session.param.watch(self._update, ["record", "result", "truth", "model", "data", "grid_size",
                                                "templates", "const_value", "lin_slope", "lin_intercept"])
        self._update()

    def _update(self, *_):
        from bftcore.metrics import regression_function
        s, g = self.session, self.session.grid
        x = g.x.nodes
        rec = s.record
        pts = np.asarray(s.data, float).reshape(-1, 2)
        self.points.data = dict(x=pts[:, 0], y=pts[:, 1])
        truth = None
        if s.truth == "paper":
            from bftcore.presets import paper_true_density
            truth = regression_function(paper_true_density(g), g)[0]
        self.truth.data = dict(x=x if truth is not None else [], h=truth if truth is not None else [])
        for item in self.figure.legend.items:
            if item.renderers and item.renderers[0] in (self.exact_band, self.exact_line):
                item.visible = s.is_regression
            if item.renderers and item.renderers[0] is self.truth_line:
                item.visible = truth is not None
        if s.is_regression:
            self.figure.title.text = "regression: MAP h(x), exact predictive mean and templates"
            h = np.asarray(rec.h, float) if rec is not None and getattr(rec, "h", None) is not None and len(rec.h) == g.x.n else None
            self.curve.data = dict(x=x if h is not None else [], h=h if h is not None else [])
            self.band.data = dict(x=[], lo=[], hi=[])
            exact = (s.result or {}).get("exact") if s.result else None
            if exact and len(exact.get("mean", [])) == g.x.n:
                m, sd = np.asarray(exact["mean"], float), np.sqrt(np.maximum(np.asarray(exact["var"], float), 0))
                self.exact.data = dict(x=x, h=m, lo=m - sd, hi=m + sd)
            else:
                self.exact.data = dict(x=[], h=[], lo=[], hi=[])
            tmpl = [s._template_dict(k) for k in s.template_kinds()]
            ys = [np.full_like(x, t["value"]) if t["kind"] == "constant" else t["slope"] * x + t["intercept"]
                  for t in tmpl]
            self.templates.data = dict(xs=[x] * len(ys), ys=ys, color=[SERIES[3 + k] for k in range(len(ys))])
            self.caption.object = EQUATION_REGRESSION
        else:
            self.figure.title.text = "regression function h(x) = ∫ y p(y|x) dy"
            self.exact.data = dict(x=[], h=[], lo=[], hi=[])
            self.templates.data = dict(xs=[], ys=[], color=[])
            self.caption.object = EQUATION_DENSITY
            if rec is not None and getattr(rec, "P", None) is not None and np.shape(rec.P) == g.shape:
                h, sd = regression_function(np.asarray(rec.P, float), g)
                self.curve.data = dict(x=x, h=h)
                self.band.data = dict(x=x, lo=h - sd, hi=h + sd)
            else:
                self.curve.data = dict(x=[], h=[])
                self.band.data = dict(x=[], lo=[], hi=[])

    def __panel__(self):
        return pn.Column(pn.pane.Bokeh(self.figure, sizing_mode="stretch_width"),
                         pn.Column(self.caption, teaching("", TEXT)[1], margin=0), sizing_mode="stretch_width")
