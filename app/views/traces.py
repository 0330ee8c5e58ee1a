"""Energy, training and test error against iteration, streamed while the solver runs."""
from __future__ import annotations

import math

import panel as pn
import param
from bokeh.models import BoxAnnotation, ColumnDataSource, Label, Range1d, Span

from bftcore.foundations import metrics, mixing

from ..session import BFTSession
from .common import SERIES, legend_outside, make_figure, teaching
from .common import set_changed as _set
from .playback import Playback

EQUATION = (r"training error $\varepsilon_{tr} = -\frac{1}{n}\sum_i L(x_i,y_i)$ (710), test error "
            r"$\varepsilon_{te} = -\frac{1}{n_x}\sum_{x}\int p_{true}(y|x)\,L(x,y)\,dy$ (711)")
TEXT = """The energy must fall at every accepted step. The training error is the negative mean log-likelihood of
the data; the test error compares with the true density and is only shown when the truth is known. A red ring on
the test-error curve marks the **early-stopping point**: the iteration where the test error is lowest, shown only
when the test error then rises a lot while the energy still falls (the rule of
bftcore.foundations.metrics.detect_overfitting). From there on the fit learns the noise of the sample
(overfitting); stopping there would generalise best. Shaded bands mark **plateaus**, long stretches where the
energy hardly changes: the solver sits near a saddle between mixture components (metastability) before escaping."""

N_PLATEAUS = 6
#: Room left of the trace frames (px), wider than the y-axis with its labels: every run has its own energy scale,
#: and an axis that outgrew the border would resize the frames and re-layout both plots.
TRACE_BORDER = 80


#: Smallest span of the energy axis, relative to the energy's size (at least 1e-6 absolute).  A warm start after
#: a slider move re-converges by 4e-7 on an energy of 123 (the solver's tolerance and rounding); scaled to the full
#: height that looked like learning (issue 28).  With this span it is drawn flat, while any change a lecturer would
#: point at (1e-3 of E and more) keeps most of the height.
ENERGY_MIN_SPAN = 1e-6
#: Ticks the traces ask Bokeh for: five labels on a 115 px axis overlapped ("2.2 2.15 2.1 2.05 2").
ENERGY_TICKS, ERROR_TICKS = 3, 4


def padded(values, pad=0.08, half_width=None, min_span=None):
    """(start, end) of an axis showing every finite value with a margin of ``pad`` of the span on each side; a
    single value is centred in ±``half_width`` (default 5 % of its size, or 1).  ``min_span``: values closer than
    this are centred in a span of that width (plus the margin), so that rounding is not drawn as a change."""
    v = [float(x) for x in values if x is not None and math.isfinite(x)]
    if not v:
        return 0.0, 1.0
    lo, hi = min(v), max(v)
    if min_span is not None and hi - lo < min_span:
        mid, half = 0.5 * (lo + hi), 0.5 * min_span * (1 + 2 * pad)
        return mid - half, mid + half
    if hi - lo <= 1e-12 * max(1.0, abs(hi)):
        w = half_width if half_width is not None else (0.05 * abs(hi) or 1.0)
        return lo - w, hi + w
    m = pad * (hi - lo)
    return lo - m, hi + m


def energy_span(energies) -> float:
    """The smallest span of an energy axis: :data:`ENERGY_MIN_SPAN` of the energies' size, at least 1e-6."""
    v = [abs(float(e)) for e in energies if e is not None and math.isfinite(e)]
    return ENERGY_MIN_SPAN * max(1.0, max(v, default=1.0))


#: Text beside the early-stopping marker.
OVERFIT_LABEL = "overfitting: test error lowest here"


def overfitting_onset(history):
    """The early-stopping point of the trace so far, ``(iteration, test error there)``, or None: the minimum of the
    test error when ``bftcore.foundations.metrics.detect_overfitting`` reports overfitting (only the presets fig27 and
    "overfitting" among the shipped ones).  No truth (no test error): None."""
    if not history or any(rec.test_error is None for rec in history):
        return None
    k = metrics.detect_overfitting([float(rec.energy) for rec in history], [float(rec.test_error) for rec in history])
    return None if k is None else (int(history[k].iteration), float(history[k].test_error))


def plateaus(history):
    """Plateaus of the energy trace as (first, last) iterations (bftcore.foundations.mixing.detect_plateaus)."""
    out = []
    for p in mixing.detect_plateaus(history) or []:
        out.append((float(p["start"]), float(p["end"])))
    return out


class TracesView(pn.viewable.Viewer):
    """Two stacked plots sharing the iteration axis: energy above, training/test error below; the playback row
    (:attr:`playback`: the pace of the animation and the history scrubber) is placed by the layout (app.main).

    The traces move with every frame of the heatmap (the runner updates ``history`` in the same frame and message,
    app.runner.SECONDARY_FRAME_S).  The early-stopping marker sits on the test-error curve only.  The legend of the
    errors stands above the plot, so it never covers the end of the curves."""

    session = param.ClassSelector(class_=BFTSession)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.session
        self.source = ColumnDataSource(dict(iteration=[], energy=[], train_error=[], test_error=[]),
                                       name="bft-traces-source")
        # Ranges set here, not DataRange1d: a browser that computes a data range sends it back to the server, three
        # messages per update of the traces for every session
        self.x_range, self.y_ranges = Range1d(0, 1), (Range1d(0, 1), Range1d(0, 1))
        top = make_figure("energy E", "iteration", "energy", height=110, min_border_left=TRACE_BORDER,
                          name="bft-energy", x_range=self.x_range, y_range=self.y_ranges[0])
        top.xaxis.axis_label = None
        top.yaxis.ticker.desired_num_ticks = ENERGY_TICKS
        top.line("iteration", "energy", source=self.source, color=SERIES[0], line_width=2.5)
        top.scatter("iteration", "energy", source=self.source, color=SERIES[0], size=5)
        bottom = make_figure(None, "iteration", "error", height=140, x_range=self.x_range, name="bft-errors",
                             y_range=self.y_ranges[1], min_border_left=TRACE_BORDER)
        bottom.line("iteration", "train_error", source=self.source, color=SERIES[1], line_width=2.5,
                    legend_label="training error")
        self.test_renderers = [
            bottom.line("iteration", "test_error", source=self.source, color=SERIES[2], line_width=2.5,
                        legend_label="test error"),
            bottom.scatter("iteration", "test_error", source=self.source, color=SERIES[2], size=5)]
        bottom.yaxis.ticker.desired_num_ticks = ERROR_TICKS
        legend_outside(bottom)
        legend = bottom.legend[0]
        legend.orientation = "horizontal"
        legend.location = "top_left"
        bottom.add_layout(legend, "above")  # outside the frame: it never covers the tail of a curve
        # the early-stopping point: a ring on the test-error curve and its label (never on the training error)
        self.overfit = ColumnDataSource(dict(x=[], y=[]), name="bft-overfit-source")
        bottom.scatter("x", "y", source=self.overfit, marker="circle", size=16, fill_alpha=0, line_color="crimson",
                       line_width=3)
        self.onset_label = Label(x=0, y=0, x_units="data", y_units="data", text=OVERFIT_LABEL, text_color="crimson",
                                 text_font_size="12px", visible=False, x_offset=10, y_offset=-22, text_align="left",
                                 background_fill_color="white", background_fill_alpha=0.7, name="bft-overfit-label")
        bottom.add_layout(self.onset_label)
        # the cursor of the history scrubber: the iteration on screen when it is not the latest
        self.cursor = [Span(dimension="height", line_color="black", line_width=2, line_dash="dotted", visible=False,
                            location=0, name=f"bft-cursor-{k}") for k in range(2)]
        self.boxes = []
        for f, span in zip((top, bottom), self.cursor):
            f.add_layout(span)
            for _ in range(N_PLATEAUS):
                box = BoxAnnotation(left=0, right=0, fill_color="gold", fill_alpha=0.25, visible=False)
                f.add_layout(box)
                self.boxes.append(box)
        self.top, self.bottom = top, bottom
        self._run_id = None
        self.playback = Playback(session=s)
        s.param.watch(self._update, ["history"])
        s.param.watch(self._update_cursor, ["record"])
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
        # no test error (regression, or a density without a truth): no curve and no empty legend entry
        has_test = any(rec.test_error is not None and math.isfinite(rec.test_error) for rec in hist)
        for r in self.test_renderers:
            _set(r, visible=has_test)
        for item in self.bottom.legend[0].items:
            if item.renderers and item.renderers[0] is self.test_renderers[0]:
                _set(item, visible=has_test)
        self._set_ranges(hist)
        self._mark(hist)
        self._update_cursor()

    def _update_cursor(self, *_):
        s = self.session
        rec, hist = s.record, s.history
        on = rec is not None and bool(hist) and not s.running and int(rec.iteration) < int(hist[-1].iteration)
        for span in self.cursor:
            _set(span, visible=on, **({"location": int(rec.iteration)} if on else {}))

    def _set_ranges(self, hist):
        its = [int(rec.iteration) for rec in hist]
        _set(self.x_range, **dict(zip(("start", "end"), padded(its, 0.03, 1.0))))
        energies = [float(rec.energy) for rec in hist]
        _set(self.y_ranges[0], **dict(zip(("start", "end"), padded(energies, min_span=energy_span(energies)))))
        errors = [getattr(rec, k) for rec in hist for k in ("train_error", "test_error")]
        _set(self.y_ranges[1], **dict(zip(("start", "end"), padded(errors))))

    def _mark(self, hist):
        onset = overfitting_onset(hist) if len(hist) > 2 else None
        shown = list(zip(self.overfit.data["x"], self.overfit.data["y"]))
        want = [] if onset is None else [onset]
        if shown != want:
            self.overfit.data = dict(x=[p[0] for p in want], y=[p[1] for p in want])
        _set(self.onset_label, visible=onset is not None,
             **({} if onset is None else {"x": onset[0], "y": onset[1]}))
        found = plateaus(hist) if len(hist) > 3 else []
        per_fig = len(self.boxes) // 2
        for k, box in enumerate(self.boxes):
            j = k % per_fig
            if j < len(found):
                _set(box, left=found[j][0], right=found[j][1], visible=True)
            else:
                _set(box, visible=False)

    def explanation(self):
        """The equation and the "What this shows" card (the presenter layout puts them below all live plots)."""
        return teaching(EQUATION, TEXT)

    def __panel__(self):
        return pn.Column(pn.pane.Bokeh(self.top, sizing_mode="stretch_width"),
                         pn.pane.Bokeh(self.bottom, sizing_mode="stretch_width"), sizing_mode="stretch_width")
