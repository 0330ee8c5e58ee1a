"""Mixing coefficients a_j of the prior mixture (and b_j in regression) with their trace over iterations."""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource, FactorRange, Range1d

from ..session import BFTSession
from .common import SERIES, legend_outside, make_figure, teaching
from .common import set_changed as _set

EQUATION = (r"$a_j = \frac{p_j\, e^{-\beta\lambda E_{0j}}}{\sum_k p_k\, e^{-\beta\lambda E_{0k}}}$, "
            r"$E_{0j} = \frac12 (L - t_j, K (L - t_j))$ (718)")
TEXT = """Each prior component j is a Gaussian process centred on a template t_j. The mixing coefficient a_j says how
much the current field trusts template j: the component whose template is closest to the field in the prior
metric wins. The inverse temperature β sharpens the competition: for small β all a_j tend to the prior
weights p_j, for large β the winner takes all. In regression mode the grey bars are the exact posterior
weights b_j of the components. The right plot traces a_j over the iterations: long flat stretches followed by a
switch are the signature of a metastable mixture."""


#: Mixing coefficients traced over the iterations (the bars show all of them).
N_TRACED = 4


def mixing_of(rec) -> list[float]:
    """The mixing coefficients a_j of a record (bftcore.foundations.records.Record) as a list of floats."""
    return [] if rec.mixing is None else [float(a) for a in np.atleast_1d(rec.mixing)]


class MixingView(pn.viewable.Viewer):
    session = param.ClassSelector(class_=BFTSession)
    thumbnails = param.Parameter(None, doc="A row drawn between the bars and the trace (the template thumbnails).")

    def __init__(self, **params):
        super().__init__(**params)
        self.bars = ColumnDataSource(dict(name=[], value=[], color=[]), name="bft-mixing-source")
        bar = make_figure("mixing coefficients", "component", "weight", x_range=FactorRange(factors=["–"]),
                          y_range=(0, 1.05), tools="save", height=110, name="bft-mixing-bars")
        bar.sizing_mode = "stretch_width"
        bar.vbar(x="name", top="value", width=0.7, color="color", source=self.bars)
        bar.xaxis.major_label_orientation = 0.5
        bar.xaxis.axis_label = None  # the tick labels name the components
        bar.xgrid.grid_line_color = None
        self.trace = ColumnDataSource(dict(iteration=[]))
        # the iteration axis is set by the server (_update_trace): without templates the trace has no data, and an
        # automatic range of no data logged "could not set initial ranges" at every page load
        tr = make_figure("a_j over the iterations", "iteration", "a_j", y_range=(-0.02, 1.02), height=115,
                         x_range=Range1d(0, 1), name="bft-mixing-trace")
        tr.xaxis.axis_label = None  # the traces below share the iteration axis and name it
        self.lines = [tr.line("iteration", f"a{j}", source=self.trace, color=SERIES[j], line_width=2.5,
                              legend_label=f"a{j + 1}", visible=False) for j in range(N_TRACED)]
        self.trace.data = {"iteration": [], **{f"a{j}": [] for j in range(N_TRACED)}}
        legend_outside(tr)
        tr.legend.location = "center_right"
        self.bar_fig, self.trace_fig = bar, tr
        self._run_id, self._labels = None, None
        self.session.param.watch(self._update, ["history", "result", "templates", "model", "file_templates",
                                                "file_weights"])
        self.session.param.watch(self._follow_scrubber, ["record"])
        self._update()

    def shown_mixing(self) -> list[float]:
        """The a_j of the iteration on screen: the latest of the run while it plays, the one the history scrubber
        chose after it (``session.record``, which carries its a_j)."""
        s = self.session
        assert s is not None  # a view is built with its session (param types the parameter as optional)
        rec = s.record
        if not s.running and rec is not None and rec.mixing is not None and s.history and \
                int(rec.iteration) <= int(s.history[-1].iteration):
            return mixing_of(rec)
        return mixing_of(s.history[-1]) if s.history else []

    def _follow_scrubber(self, *_):
        if not self.session.running:  # while a run plays, the bars move with the traces (history), not per frame
            self._update_bars()

    def _update(self, *_):
        labels = self._update_bars()
        self._update_trace(labels)

    def _update_bars(self):
        s = self.session
        labels = s.template_labels()
        k = len(labels)
        names = [f"a{j + 1} {lab}" for j, lab in enumerate(labels)]
        last = self.shown_mixing()
        values = list(last[:k]) + [0.0] * max(0, k - len(last))
        colors = [SERIES[j % 10] for j in range(k)]
        exact = (s.result or {}).get("exact") if not s.kind.y_on_grid and s.result else None
        if exact and exact.get("b") is not None and len(exact["b"]) == k:  # arrays: no truth value
            names += [f"b{j + 1} {lab}" for j, lab in enumerate(labels)]
            values += [float(b) for b in exact["b"]]
            colors += ["#7f7f7f"] * k   # grey: the orange of a_2 named them before
        if not names:
            names, values, colors = ["no templates"], [0.0], ["#cccccc"]
        if len(names) > 2:
            # a_j and b_j of each template: the long names, turned so as not to overlap, squeezed the bars to a
            # few pixels in the tile; the thumbnails under the bars name the templates t_j
            names = [n.split()[0] for n in names]
        if list(self.bar_fig.x_range.factors) != names:
            self.bar_fig.x_range.factors = names
        # two long names fit side by side; more are short
        orientation = "horizontal" if len(names) <= 2 or max(map(len, names)) <= 3 else 0.5
        axis = self.bar_fig.xaxis[0]
        if axis.major_label_orientation != orientation:
            axis.major_label_orientation = orientation
        new_bars = dict(name=names, value=values, color=colors)
        if {c: list(v) for c, v in self.bars.data.items()} != new_bars:
            self.bars.data = new_bars
        return labels

    def _update_trace(self, labels):
        s = self.session
        k = len(labels)
        hist = s.history
        n_shown = len(self.trace.data["iteration"])
        if k == 0:  # nothing to trace: send nothing per frame
            if n_shown:
                self.trace.data = {"iteration": [], **{f"a{j}": [] for j in range(N_TRACED)}}
        elif self._run_id != s.run_id or self._labels != labels or len(hist) < n_shown:
            self.trace.data = self._columns(hist, k)
        elif len(hist) > n_shown:
            self.trace.stream(self._columns(hist[n_shown:], k))
        self._run_id, self._labels = s.run_id, labels
        last = int(hist[-1].iteration) if (k and hist) else 0
        _set(self.trace_fig.x_range, start=0, end=max(1, last))
        for j, line in enumerate(self.lines):
            if line.visible != (j < k):
                line.visible = j < k
        # the legend names only the traced components: with no templates it listed a1..a4 greyed (issue 28)
        for j, item in enumerate(self.trace_fig.legend[0].items):
            if item.visible != (j < k):
                item.visible = j < k
        if self.trace_fig.legend[0].visible != (k > 0):
            self.trace_fig.legend[0].visible = k > 0

    @staticmethod
    def _columns(entries, k):
        cols = {"iteration": [int(rec.iteration) for rec in entries]}
        mixes = [mixing_of(rec) for rec in entries]
        for j in range(N_TRACED):
            cols[f"a{j}"] = [m[j] if len(m) > j and j < k else np.nan for m in mixes]
        return cols

    def __panel__(self):
        parts = [pn.pane.Bokeh(self.bar_fig, sizing_mode="stretch_width")]
        if self.thumbnails is not None:
            parts.append(self.thumbnails)
        parts.append(pn.pane.Bokeh(self.trace_fig, sizing_mode="stretch_width"))
        return pn.Column(*parts, sizing_mode="stretch_width", css_classes=["bft-mixing"])

    def explanation(self):
        """The equation and the "What this shows" card (the presenter layout puts them below all live plots)."""
        return teaching(EQUATION, TEXT)
