"""Energy, training and test error against iteration, streamed while the solver runs."""
from __future__ import annotations

import math

import panel as pn
import param
from bokeh.models import BoxAnnotation, ColumnDataSource, Label, Range1d, Span

from bftcore import metrics, mixing

from ..session import BFTSession
from .common import SERIES, legend_outside, make_figure, teaching
from .common import set_changed as _set

EQUATION = (r"training error $\varepsilon_{tr} = -\frac{1}{n}\sum_i L(x_i,y_i)$ (710), test error "
            r"$\varepsilon_{te} = -\frac{1}{n_x}\sum_{x}\int p_{true}(y|x)\,L(x,y)\,dy$ (711)")
TEXT = """The energy must fall at every accepted step. The training error is the negative mean log-likelihood of
the data; the test error compares with the true density and is only shown when the truth is known. A red line
marks the iteration where the **test error starts rising while the energy still falls**: from there on the
fit learns the noise of the sample (overfitting). Shaded bands mark **plateaus**, long stretches where the energy
hardly changes: the solver sits near a saddle between mixture components (metastability) before escaping."""

N_PLATEAUS = 6
#: Room left of the trace frames (px), wider than the y-axis with its labels: every run has its own energy scale,
#: and an axis that outgrew the border would resize the frames and re-layout both plots.
TRACE_BORDER = 80


def padded(values, pad=0.08, half_width=None):
    """(start, end) of an axis showing every finite value with a margin of ``pad`` of the span on each side; a
    single value is centred in ±``half_width`` (default 5 % of its size, or 1)."""
    v = [float(x) for x in values if x is not None and math.isfinite(x)]
    if not v:
        return 0.0, 1.0
    lo, hi = min(v), max(v)
    if hi - lo <= 1e-12 * max(1.0, abs(hi)):
        w = half_width if half_width is not None else (0.05 * abs(hi) or 1.0)
        return lo - w, hi + w
    m = pad * (hi - lo)
    return lo - m, hi + m


def overfitting_onset(history):
    """Iteration where the test error starts rising while the energy falls (bftcore.metrics), or None."""
    if not history or any(rec.test_error is None for rec in history):
        return None
    k = metrics.detect_overfitting([float(rec.energy) for rec in history], [float(rec.test_error) for rec in history])
    return None if k is None else int(history[k].iteration)


def plateaus(history):
    """Plateaus of the energy trace as (first, last) iterations (bftcore.mixing.detect_plateaus)."""
    out = []
    for p in mixing.detect_plateaus(history) or []:
        out.append((float(p["start"]), float(p["end"])))
    return out


class TracesView(pn.viewable.Viewer):
    """Two stacked plots sharing the iteration axis: energy above, training/test error below."""

    session = param.ClassSelector(class_=BFTSession)

    def __init__(self, **params):
        super().__init__(**params)
        self.source = ColumnDataSource(dict(iteration=[], energy=[], train_error=[], test_error=[]),
                                       name="bft-traces-source")
        # Ranges set here, not DataRange1d: a browser that computes a data range sends it back to the server, three
        # messages per update of the traces for every session
        self.x_range, self.y_ranges = Range1d(0, 1), (Range1d(0, 1), Range1d(0, 1))
        top = make_figure("energy E", "iteration", "energy", height=150, min_border_left=TRACE_BORDER,
                          x_range=self.x_range, y_range=self.y_ranges[0])
        top.xaxis.axis_label = None
        top.line("iteration", "energy", source=self.source, color=SERIES[0], line_width=2.5, legend_label="energy")
        top.scatter("iteration", "energy", source=self.source, color=SERIES[0], size=5)
        bottom = make_figure("errors", "iteration", "error", height=170, x_range=self.x_range,
                             y_range=self.y_ranges[1], min_border_left=TRACE_BORDER)
        bottom.line("iteration", "train_error", source=self.source, color=SERIES[1], line_width=2.5,
                    legend_label="training error")
        bottom.line("iteration", "test_error", source=self.source, color=SERIES[2], line_width=2.5,
                    legend_label="test error")
        bottom.scatter("iteration", "test_error", source=self.source, color=SERIES[2], size=5)
        for f in (top, bottom):
            legend_outside(f)
            f.legend.location = "top_right"
        self.onset = [Span(dimension="height", line_color="crimson", line_width=2, line_dash="dashed",
                           visible=False, location=0) for _ in (top, bottom)]
        self.onset_label = Label(x=0, y=5, x_units="data", y_units="screen", text="overfitting starts",
                                 text_color="crimson", text_font_size="12px", visible=False)
        bottom.add_layout(self.onset_label)
        self.boxes = []
        for f, span in zip((top, bottom), self.onset):
            f.add_layout(span)
            for _ in range(N_PLATEAUS):
                box = BoxAnnotation(left=0, right=0, fill_color="gold", fill_alpha=0.25, visible=False)
                f.add_layout(box)
                self.boxes.append(box)
        self.top, self.bottom = top, bottom
        self._run_id = None
        self.session.param.watch(self._update, ["history"])
        self._update()

    def _columns(self, entries):
        nan = float("nan")
        return dict(iteration=[int(rec.iteration) for rec in entries], energy=[float(rec.energy) for rec in entries],
                    train_error=[float(rec.train_error) for rec in entries],
                    test_error=[nan if rec.test_error is None else float(rec.test_error) for rec in entries])

    def _update(self, *_):
        s = self.session
        hist = s.history
        n_shown = len(self.source.data["iteration"])
        if self._run_id != s.run_id or len(hist) < n_shown:
            self.source.data = self._columns(hist)
        elif len(hist) > n_shown:
            self.source.stream(self._columns(hist[n_shown:]))
        self._run_id = s.run_id
        self._set_ranges(hist)
        self._mark(hist)

    def _set_ranges(self, hist):
        its = [int(rec.iteration) for rec in hist]
        _set(self.x_range, **dict(zip(("start", "end"), padded(its, 0.03, 1.0))))
        _set(self.y_ranges[0], **dict(zip(("start", "end"), padded([float(rec.energy) for rec in hist]))))
        errors = [getattr(rec, k) for rec in hist for k in ("train_error", "test_error")]
        _set(self.y_ranges[1], **dict(zip(("start", "end"), padded(errors))))

    def _mark(self, hist):
        onset = overfitting_onset(hist) if len(hist) > 2 else None
        for span in self.onset:
            _set(span, visible=onset is not None, **({} if onset is None else {"location": onset}))
        _set(self.onset_label, visible=onset is not None, **({} if onset is None else {"x": onset}))
        found = plateaus(hist) if len(hist) > 3 else []
        per_fig = len(self.boxes) // 2
        for k, box in enumerate(self.boxes):
            j = k % per_fig
            if j < len(found):
                _set(box, left=found[j][0], right=found[j][1], visible=True)
            else:
                _set(box, visible=False)

    def __panel__(self):
        return pn.Column(pn.pane.Bokeh(self.top, sizing_mode="stretch_width"),
                         pn.pane.Bokeh(self.bottom, sizing_mode="stretch_width"),
                         teaching(EQUATION, TEXT), sizing_mode="stretch_width")
