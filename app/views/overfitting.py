"""The overfitting diagnosis on the live screen (issue 28): the alarm and the training and held-out error against
lambda, the current lambda marked.

The diagnosis is the session's (``session.overfitting``, :meth:`app.session.BFTSession.check_overfitting`, computed
on the heavy lane once a run has converged): this view only draws it.  The alarm is the element with
``data-testid="overfitting-alarm"``, on the page exactly while the diagnosis fires; its words come from bftcore
and reach the page as text (escaped), never as markup.
"""
from __future__ import annotations

import math

import panel as pn
import param
from bokeh.models import ColumnDataSource, Range1d, Span

from ..session import BFTSession
from .common import SERIES, alarm_html, hidden_until_drawn, legend_outside, make_figure, replace_data, show_drawn
from .common import set_changed as _set


def alarm_html_of(verdict: dict | None) -> str:
    """The alarm's markup for a verdict (:func:`app.views.common.alarm_html`), or '' when there is none."""
    return alarm_html("overfitting-alarm", verdict)


class OverfittingView(pn.viewable.Viewer):
    """The alarm above a small plot of training and held-out error against lambda (log axis), the current lambda
    a dashed line and the best a dotted one.  Hidden for problems without a diagnosis."""

    session = param.ClassSelector(class_=BFTSession)

    def __init__(self, **params):
        super().__init__(**params)
        self.alarm = pn.pane.HTML("", sizing_mode="stretch_width", margin=(2, 5), css_classes=["bft-overfit-alarm"])
        self.source = ColumnDataSource(dict(lam=[], train=[], held=[]), name="bft-overfit-scan")
        # ranges set by the server (_update): an automatic range of no data logged "could not set initial ranges"
        # (and, on the log axis, two more warnings) at every page load
        f = make_figure("held-out error against λ", "λ", "error", height=140, x_axis_type="log",
                        x_range=Range1d(0.01, 10.0), y_range=Range1d(0.0, 1.0), name="bft-overfit-curve")
        f.yaxis.ticker.desired_num_ticks = 4
        f.line("lam", "train", source=self.source, color=SERIES[1], line_width=2, legend_label="training")
        f.scatter("lam", "held", source=self.source, color=SERIES[2], size=5)
        self.held_line = f.line("lam", "held", source=self.source, color=SERIES[2], line_width=2.5,
                                legend_label="held-out")
        legend_outside(f)
        self.current = Span(dimension="height", line_color="black", line_dash="dashed", line_width=2, location=1.0)
        self.best = Span(dimension="height", line_color="#2ca02c", line_dash="dotted", line_width=2, location=1.0,
                         visible=False)
        f.add_layout(self.current)
        f.add_layout(self.best)
        self.figure = f
        self.plot = hidden_until_drawn(f, sizing_mode="stretch_width")
        self.session.param.watch(self._update, ["overfitting", "lam"])
        self._update()

    def _update(self, *_):
        s = self.session
        diag = s.overfitting
        scan = diag["scan"] if diag else None
        verdict = diag["verdict"] if diag else None
        text = alarm_html_of(verdict)
        if self.alarm.object != text:
            self.alarm.object = text
        self.alarm.visible = bool(text)
        if scan is None:
            show_drawn(self.plot, False)
            return
        lams = [float(v) for v in scan["lambda"]]
        held = [float(v) for v in scan["held_out"]]
        train = [float(v) for v in scan["train"]]
        new = dict(lam=lams, train=train, held=held)
        replace_data(self.source, new)
        what = {"truth": f"λ curve ({scan.get('truth_name', 'true density')})", "cv": "λ curve (cross-validated)",
                "evidence": "λ curve (−ln evidence)"}[scan["kind"]]
        self.figure.title.text = what + (" …" if diag.get("partial") else "")
        for item in self.figure.legend[0].items:
            if item.renderers and item.renderers[0] is self.held_line:
                item.label = {"value": "held-out" if scan["kind"] != "evidence" else "−ln evidence / n"}
        _set(self.current, location=float(s.lam))
        xs = [v for v in lams + [float(s.lam)] if v > 0 and math.isfinite(v)]
        ys = [v for v in held + train if math.isfinite(v)]
        if xs:
            _set(self.figure.x_range, start=min(xs) / 1.3, end=max(xs) * 1.3)
        if ys:
            pad = 0.08 * (max(ys) - min(ys)) or 0.1 * (abs(max(ys)) or 1.0)
            _set(self.figure.y_range, start=min(ys) - pad, end=max(ys) + pad)
        finite = [(v, lam) for v, lam in zip(held, lams) if math.isfinite(v)]
        if finite and not diag.get("partial"):
            _set(self.best, location=min(finite)[1], visible=True)
        elif self.best.visible:
            self.best.visible = False
        show_drawn(self.plot, True)

    def __panel__(self):
        """The curve alone: the layout (app.main) puts the alarm (:attr:`alarm`) at the top of the live plots."""
        return pn.Column(self.plot, sizing_mode="stretch_width", css_classes=["bft-overfitting"])
