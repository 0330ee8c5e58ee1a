"""The learning curve: train and test error against the number of data points n, by real resampling
(:func:`bftcore.api.learning_curve_document`), filling in live while the data sets are fitted.

Teacher mode (the problem has a truth, e.g. the paper's presets): every data set is n fresh points drawn from the
truth, and the test error is measured against the truth.  Bootstrap mode (your own data, no truth): every data set
is n points drawn with replacement from the N points on the canvas, and the test error is the out-of-bag error on
the points that were not drawn.

How it runs: the learning curve is a task of the session's background work (:mod:`app.work`), started and
cancelled by the session (:meth:`app.session.BFTSession.start_learning`, ``cancel_learning``), on the server's
learning lane (at most :data:`app.work.LONG_SLOTS` curves at once in the whole server; a session whose turn has not
come says that it waits) within :data:`app.session.LEARNING_SECONDS`.  Its state lives in the session
(``learning``, ``learning_state``, ``learning_progress``, ...); this view only draws it.

A session has at most one learning curve running (the button is disabled meanwhile, and a second click does
nothing).  Any change of the problem (a click, a slider, a preset, an upload: a change of one of
:data:`app.configuration.CONFIG_PARAMS`, the parameters the solver's runs restart on) cancels it: its curves are
cleared and the view says so; the Cancel button does the same.

Why raw Bokeh stays (issue 26 asked for HoloViews wherever it holds the click-to-heatmap latency, a median under
50 ms at 1280x720): the curve declared with HoloViews (a DynamicMap over a Pipe stream, the declaration in
``scripts/hv_static_cost.py``: 31 elements, the bands, lines and points of six λ and the stars, without the replica
line and the λ plot beside it) costs the server 162.5 ms per partial document against 1.17 ms here, and clearing it
582.4 ms against 0.72 ms (median of 30, ``python scripts/hv_static_cost.py``).  A click on the canvas clears a
running curve in the click's own handler (the change of the problem cancels it), so that click would wait more than
half a second for its heatmap; and the partial documents arrive every 0.25 s
(:data:`bftcore.studies.learning.UPDATE_SECONDS`), so a curve filling in would hold the event loop that serves every
session of the worker about two thirds of the time, also after the tab was left (Panel keeps a tab rendered once
opened).
"""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.core.property.vectorization import value
from bokeh.models import ColumnDataSource, FixedTicker, Legend, LegendItem, Range1d

from bftcore.studies.learning import LAMBDA_FACTORS

from ..configuration import MAX_POINTS
from ..session import CANCELLED_BY_CHANGE, CANCELLED_BY_USER, BFTSession
from ..transport import user_action
from .common import SERIES, LiveText, make_figure, markdown_text, teaching
from .replica_table import ReplicaTableView

#: Curves drawn at most: one per lambda of the document's default list (bftcore.studies.learning.LAMBDA_FACTORS) and the
#: evidence-chosen lambda.
MAX_CURVES = len(LAMBDA_FACTORS) + 1
__all__ = ["CANCELLED_BY_CHANGE", "CANCELLED_BY_USER", "LearningView"]
#: Colours that read on the light and on the dark high-contrast theme (app.main.apply_theme recolours the plots'
#: frames, not their lines): the evidence-chosen lambda's curves, the line-style key and the replica theory, and the
#: line through the stars of the lowest test error.
EVIDENCE_COLOUR = SERIES[6]
NEUTRAL = "#8c8c8c"
STAR_LINE = "#c89b00"
#: Paragraphs of the view's text lines without Markdown's blank line around them.
TIGHT = "p { margin: 2px 0; }"
#: The columns of a curve's source: n, the mean of the test and train errors, and their mean ± sd.
CURVE_COLUMNS = ("n", "test", "test_lo", "test_hi", "train", "train_lo", "train_hi")

#: The note before the first learning curve.
START_NOTE = "Press **Learning curve** to draw the error against the number of data points."

EQUATION = (r"$\bar\varepsilon(n) = \frac{1}{R}\sum_{r=1}^{R} \varepsilon\big(p^*_{D_r}\big),\quad |D_r| = n$"
            r"$\quad$ (R data sets of n points each; one fit per data set and λ)")
TEXT = """How the error falls as the data grow. For each size n, R data sets of n points are drawn and the problem is
solved for each of them, at each λ in the legend (the current λ times 1/4, 1/2, 1, 2 and 4). Dashed: the training
error, on the data set itself; solid: the test error. With a truth (the paper's presets) the data sets are fresh
draws from the true density and the test error is measured against it. With your own data (no truth) they are
bootstrap resamples, n points drawn with replacement from your N points, and the test error is out-of-bag: on the
points a resample did not draw. The bands are ± one standard deviation over the data sets. The gap between the two
curves is the overfitting; it closes as n grows. The stars mark, at each n, the λ with the lowest mean test error,
and the plot beside it follows that λ as n grows. "Evidence-chosen λ" adds a curve where each data set takes the λ
that maximises its own evidence, with no test data at all (its mean and sd are drawn beside the stars)."""


def _array(values) -> np.ndarray:
    """A list of numbers or None (nothing finished yet) as floats, None -> NaN (a gap in the line)."""
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)


def _empty_curve() -> dict:
    return {c: [] for c in CURVE_COLUMNS}


def _curve_data(curve: dict, size: int) -> dict:
    """The columns of one curve's source (:data:`CURVE_COLUMNS`) from a curve of the document."""
    out = {"n": np.asarray(curve["n"], dtype=float)}
    for key, col in (("test_error", "test"), ("train_error", "train")):
        err = curve.get(key) or {}
        mean = _array(err.get("mean", [None] * size))
        sd = np.nan_to_num(_array(err.get("sd", [None] * size)), nan=0.0)
        out[col], out[f"{col}_lo"], out[f"{col}_hi"] = mean, mean - sd, mean + sd
    return out


def _relabel(item: LegendItem, label: str) -> None:
    """Set a legend entry's label when it differs (it is a value spec: a Value when made, the text once set)."""
    if getattr(item.label, "value", item.label) != label:
        item.label = value(label)  # a plain string would name a column of the source


def _reason(text: str) -> str:
    """The reason of a failure for the note, a Markdown pane: as text, since it may quote outside text."""
    text = " ".join(str(text).split()).rstrip(".")
    return markdown_text(text[:400]) if text else "no reason was given"


class LearningView(pn.viewable.Viewer):
    session = param.ClassSelector(class_=BFTSession)
    resamples = param.Integer(20, bounds=(2, 100), label="resamples per n")
    n_from = param.Integer(5, bounds=(1, MAX_POINTS), label="n from")
    n_to = param.Integer(200, bounds=(1, MAX_POINTS), label="n to")
    n_sizes = param.Integer(8, bounds=(2, 20), label="sizes (log-spaced)")
    evidence = param.Boolean(False, label="evidence-chosen λ")

    def __init__(self, **params):
        super().__init__(**params)
        self.shown: dict | None = None  # the document on screen (partial while it runs)
        self._build_figures()
        self.button = pn.widgets.Button(label="Learning curve", color="primary", width=140,
                                        css_classes=["bft-learning-start"])
        self.button.on_click(user_action(lambda _: self.start()))
        self.cancel_button = pn.widgets.Button(label="Cancel", width=80, disabled=True,
                                               css_classes=["bft-learning-cancel"])
        self.cancel_button.on_click(user_action(lambda _: self.cancel(CANCELLED_BY_USER)))
        self.progress = pn.indicators.Progress(value=0, max=1, width=220, height=20, margin=(14, 10, 0, 10),
                                               css_classes=["bft-learning-progress"], bar_color="primary")
        self.progress_text = LiveText("", width=300, margin=(12, 10, 0, 0), css_classes=["bft-learning-count"],
                                      styles={"font-size": "15px"})
        self.note = pn.pane.Markdown(START_NOTE, css_classes=["bft-learning-note"], sizing_mode="stretch_width",
                                     margin=(0, 10), styles={"font-size": "15px"}, stylesheets=[TIGHT])
        # bootstrap: the unique fraction of the points in a bag, measured and expected, per n
        self.bag = pn.pane.Markdown("", css_classes=["bft-learning-bag"], sizing_mode="stretch_width",
                                    margin=(0, 10), styles={"font-size": "14px"}, stylesheets=[TIGHT], visible=False)
        s = self.session
        assert s is not None  # a view is built with its session (param types the parameter as optional)
        # a table of d-dimensional inputs beside the session's 1-D problem: replica theory and bootstrap (seed 002)
        self.replica_table = ReplicaTableView(session=s)
        s.param.watch(self._on_curve, ["learning", "learning_request"])  # a new request sets the axes at once
        s.param.watch(self._on_progress, ["learning_progress"])
        s.param.watch(self._on_state, ["learning_state", "learning_busy", "learning_stale", "learning_error"])
        self._on_curve()
        self._on_progress()
        self._on_state()

    # ----------------------------------------------------------------------------------------------- figures
    def _build_figures(self):
        # sized for a projector: thick lines, 14-15 px labels, a legend below the plot instead of over the curves
        fig = make_figure("Learning curve: error against the number of data points n", "n (data points, log scale)",
                          "error (mean ± sd over the data sets)", x_axis_type="log", height=420,
                          x_range=Range1d(4, 250))
        fig.name = "bft-learning"
        fig.title.text_font_size = "16px"
        for ax in (fig.xaxis, fig.yaxis):
            ax.axis_label_text_font_size = "15px"
            ax.major_label_text_font_size = "14px"
        self.curves, items = [], []
        for j in range(MAX_CURVES):
            src = ColumnDataSource(_empty_curve(), name=f"bft-learning-curve-{j}")
            colour = SERIES[j] if j < len(LAMBDA_FACTORS) else EVIDENCE_COLOUR
            renderers = [
                fig.varea("n", "test_lo", "test_hi", source=src, fill_color=colour, fill_alpha=0.13),
                fig.varea("n", "train_lo", "train_hi", source=src, fill_color=colour, fill_alpha=0.07),
                fig.line("n", "test", source=src, color=colour, line_width=3),
                fig.scatter("n", "test", source=src, color=colour, size=7),
                fig.line("n", "train", source=src, color=colour, line_width=2.5, line_dash="dashed"),
            ]
            self.curves.append(src)
            items.append(LegendItem(label=f"curve {j + 1}", renderers=renderers, visible=False))
        self.best = ColumnDataSource(dict(n=[], err=[], lam=[]), name="bft-learning-best")
        star = fig.scatter("n", "err", source=self.best, marker="star", size=20, fill_color="#ffd700",
                           line_color="#000000", line_width=1.5)
        self.replica = ColumnDataSource(dict(n=[], test=[]), name="bft-learning-replica")
        replica = fig.line("n", "test", source=self.replica, color=NEUTRAL, line_width=4, line_dash="dotted")
        # the key to the line styles: grey samples of a solid and a dashed line, with one point that is not drawn
        # (BokehJS leaves the legend glyph of a renderer without data blank)
        key = ColumnDataSource(dict(n=[np.nan], y=[np.nan]))
        solid = fig.line("n", "y", source=key, color=NEUTRAL, line_width=3)
        dashed = fig.line("n", "y", source=key, color=NEUTRAL, line_width=2.5, line_dash="dashed")
        self.key_items = [LegendItem(label="test error (solid)", renderers=[solid]),
                          LegendItem(label="train error (dashed)", renderers=[dashed])]
        self.best_item = LegendItem(label="lowest test error at this n", renderers=[star], visible=False)
        self.replica_item = LegendItem(label="replica theory (approx.)", renderers=[replica], visible=False)
        self.curve_items = items
        legend = Legend(items=self.key_items + items + [self.best_item, self.replica_item], location="center",
                        orientation="horizontal", ncols=3, label_text_font_size="14px", click_policy="hide",
                        spacing=8, padding=2, margin=2, border_line_color=None, glyph_width=34)
        fig.add_layout(legend, "below")  # below the plot: the curves keep the whole width
        self.figure = fig
        self.n_ticks = fig.xaxis[0].ticker = FixedTicker(ticks=[5, 10, 20, 50, 100, 200], minor_ticks=[])
        # the lambda of the lowest mean test error against n (and the evidence-chosen lambda's mean and sd)
        lam_fig = make_figure("λ of the lowest test error", "n (log scale)", "λ (log scale)", x_axis_type="log",
                              y_axis_type="log", height=420, x_range=fig.x_range, y_range=Range1d(0.05, 10))
        lam_fig.update(sizing_mode="fixed", width=300)
        lam_fig.name = "bft-learning-lambda"
        lam_fig.title.text_font_size = "15px"
        for ax in (lam_fig.xaxis, lam_fig.yaxis):
            ax.axis_label_text_font_size = "14px"
            ax.major_label_text_font_size = "13px"
        self.best_lambda = ColumnDataSource(dict(n=[], lam=[]), name="bft-learning-best-lambda")
        lam_fig.line("n", "lam", source=self.best_lambda, color=STAR_LINE, line_width=3,
                     legend_label="lowest test error")
        lam_fig.scatter("n", "lam", source=self.best_lambda, marker="star", size=18, fill_color="#ffd700",
                        line_color="#000000")
        self.chosen = ColumnDataSource(dict(n=[], lam=[], lo=[], hi=[]), name="bft-learning-evidence-lambda")
        lam_fig.varea("n", "lo", "hi", source=self.chosen, fill_color=EVIDENCE_COLOUR, fill_alpha=0.15)
        lam_fig.line("n", "lam", source=self.chosen, color=EVIDENCE_COLOUR, line_width=3, line_dash="dashed",
                     legend_label="evidence (mean)")
        self.lambda_ticks = lam_fig.yaxis[0].ticker = FixedTicker(ticks=[], minor_ticks=[])
        lam_fig.xaxis[0].ticker = self.n_ticks
        # a legend only with the evidence's curve beside the stars (the title says what the stars are); the lambda
        # of the best fit grows with n and the evidence-chosen one is largest at small n: the top right stays free
        self.chosen_item = lam_fig.legend.items[-1]
        lam_fig.legend.update(visible=False, location="top_right")
        lam_fig.legend.label_text_font_size = "13px"
        lam_fig.legend.background_fill_alpha = 0.7
        self.lambda_figure = lam_fig

    def _lambda_axis(self, lam0: float, chosen: list[float]):
        """The lambda axis: the lambdas compared (a tick at each) and the evidence-chosen ones, with a margin."""
        lams = [lam0 * f for f in LAMBDA_FACTORS]
        lo, hi = min(lams + chosen) / 2, max(lams + chosen) * 2
        decades = [10.0 ** k for k in range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)]
        ticks = sorted(set(lams) | {d for d in decades if lo <= d <= hi and all(abs(np.log(d / v)) > 0.4
                                                                               for v in lams)})
        if self.lambda_ticks.ticks != ticks:
            self.lambda_ticks.ticks = ticks
        self.lambda_figure.y_range.update(start=lo, end=hi)

    def _clear(self):
        for src in self.curves:
            src.data = _empty_curve()
        for item in self.curve_items:
            item.visible = False
        self.best.data = dict(n=[], err=[], lam=[])
        self.replica.data = dict(n=[], test=[])
        self.best_lambda.data = dict(n=[], lam=[])
        self.chosen.data = dict(n=[], lam=[], lo=[], hi=[])
        self.lambda_figure.legend.visible = False
        self.best_item.visible = self.replica_item.visible = False
        self._show_bag(None)
        self.shown = None

    def _draw(self, doc: dict, lam0: float):
        """Put a learning-curve document (partial or complete) of a problem whose lambda is ``lam0`` on the plots."""
        self.shown = doc
        size = len(doc["n"])
        curves = doc["curves"][:MAX_CURVES]
        bootstrap = doc.get("mode") == "bootstrap"
        for j, src in enumerate(self.curves):
            item = self.curve_items[j]
            if j >= len(curves):
                if len(src.data["n"]):
                    src.data = _empty_curve()
                item.visible = False
                continue
            c = curves[j]
            src.data = _curve_data(c, size)
            if c["lambda"] is None:
                label = "evidence-chosen λ"
            else:
                label = f"λ = {c['lambda']:.3g}" + (" (current)" if abs(c["lambda"] - lam0) <= 1e-12 * lam0 else "")
            _relabel(item, label)
            item.visible = True
        _relabel(self.key_items[0], "out-of-bag error (solid)" if bootstrap else "test error (solid)")
        _relabel(self.key_items[1], "in-bag error (dashed)" if bootstrap else "train error (dashed)")
        # the lambda of the lowest mean test error at each n, marked on that lambda's test curve
        by_lambda = {c["lambda"]: c for c in curves if c["lambda"] is not None}
        bn, be, bl = [], [], []
        for i, lam in enumerate(doc.get("best_lambda") or []):
            c = by_lambda.get(lam)
            mean = None if c is None else (c.get("test_error") or {}).get("mean", [None] * size)[i]
            if mean is not None:
                bn.append(float(doc["n"][i]))
                be.append(float(mean))
                bl.append(float(lam))
        self.best.data = dict(n=bn, err=be, lam=bl)
        self.best_lambda.data = dict(n=bn, lam=bl)
        self.best_item.visible = bool(bn)
        self._show_bag(doc)
        ev = next((c for c in curves if c["lambda"] is None and "chosen_lambda" in c), None)
        if ev is not None:
            mean = _array(ev["chosen_lambda"]["mean"])
            sd = np.nan_to_num(_array(ev["chosen_lambda"]["sd"]), nan=0.0)
            self.chosen.data = dict(n=np.asarray(doc["n"], float), lam=mean, lo=np.maximum(mean - sd, mean / 10),
                                    hi=mean + sd)
            self.lambda_figure.legend.visible = True
            self._lambda_axis(lam0, [v for v in mean.tolist() if np.isfinite(v)])
        rep = doc.get("replica")
        if rep:
            self.replica.data = dict(n=np.asarray(rep["n"], float), test=_array(rep["test_error"]))
            label = rep.get("label", "replica theory (approx.)")
            _relabel(self.replica_item, label + (", error on all N points" if bootstrap else ""))
            self.replica_item.visible = True

    # --------------------------------------------------------------------------------- the session's curve
    def start(self) -> bool:
        """Start the learning curve of the current problem with this view's inputs (the button); see
        :meth:`app.session.BFTSession.start_learning`."""
        assert self.session is not None
        return self.session.start_learning(int(self.n_from), int(self.n_to), int(self.n_sizes),
                                           int(self.resamples), bool(self.evidence))

    def cancel(self, reason: str = CANCELLED_BY_USER) -> bool:
        """Cancel the running learning curve (the Cancel button); False when none runs."""
        assert self.session is not None
        return self.session.cancel_learning(reason)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the learning curve's worker thread to end (tests, scripts); True when it has."""
        assert self.session is not None
        return self.session.work.wait("learning", timeout)

    def _on_curve(self, *_):
        s = self.session
        assert s is not None
        doc, request = s.learning, s.learning_request
        if doc is None or request is None or s.learning_state == "cancelled":
            self._clear()
            if request is not None:
                sizes = request["sizes"]
                self.figure.x_range.update(start=sizes[0] / 1.25, end=sizes[-1] * 1.25)
                self.n_ticks.ticks = sizes  # a tick at each size n of the curve
                self._lambda_axis(request["lambda"], [])
            return
        self._draw(doc, request["lambda"])

    def _on_progress(self, *_):
        s = self.session
        assert s is not None
        done, total = s.learning_progress
        self.progress.max = max(1, int(total))
        self.progress.value = int(min(done, total))
        stopped = ", stopped" if s.learning_state == "cancelled" else ""
        self.progress_text.set(f"{done} of {total} data sets{stopped}" if total else "")

    def _on_state(self, *_):
        s = self.session
        assert s is not None
        self.button.disabled = s.learning_busy
        self.cancel_button.disabled = not s.learning_busy or s.learning_state == "cancelled"
        if s.learning_state == "cancelled" and self.shown is not None:
            self._on_curve()  # a cancelled curve is cleared, whatever reached the session before the cancel
        self._on_progress()
        self._say(self._note())

    def _note(self) -> str:
        """What the view says: the state of the session's learning curve in words (outside text escaped)."""
        s = self.session
        assert s is not None
        state, request = s.learning_state, s.learning_request or {}
        if state == "refused":
            return f"Cannot compute a learning curve: {_reason(s.learning_error)}."
        if state == "waiting":
            return "Waiting for a free worker: other sessions are computing learning curves…"
        if state == "running":
            sizes = request["sizes"]
            return (f"Computing: {len(sizes)} sizes n from {sizes[0]} to {sizes[-1]}, {request['resamples']} data "
                    f"sets each" + (", each also at its evidence-chosen λ" if request["evidence"] else "") + "…")
        if state == "cancelled":
            reason = s.learning_cancel_reason or CANCELLED_BY_USER
            return f"{reason[:1].upper()}{reason[1:]}. Press **Learning curve** to start again."
        if state == "failed":
            return f"The learning curve could not be computed: {_reason(s.learning_error)}."
        if state == "complete" and s.learning is not None:
            if s.learning_stale:
                return ("These curves are for the problem before your last change; press **Learning curve** to "
                        "compute them for the current one.")
            return self._summary(s.learning)
        return START_NOTE

    def _summary(self, doc: dict) -> str:
        fits = doc.get("fits", 0)
        failed = sum(sum(c.get("failed", [])) for c in doc["curves"])
        unconverged = sum(sum(c.get("unconverged", [])) for c in doc["curves"])
        parts = [f"Done: {fits} fits in {doc.get('elapsed_s', 0.0):.1f} s."]
        if doc.get("mode") == "bootstrap":
            uf = doc.get("unique_fraction") or {}
            parts.append(f"Bootstrap of your {uf.get('N', '?')} points (no truth): the test error is out-of-bag, "
                         f"on the points a data set did not draw.")
            if any(m is None for c in doc["curves"] for m in (c.get("test_error") or {}).get("mean", [])):
                parts.append("None is left where every data set drew all the points.")
        else:
            parts.append("Teacher mode: every data set is drawn fresh from the truth, and the test error is measured "
                         "against the truth.")
        if failed or unconverged:
            parts.append(f"{failed} fits failed and {unconverged} stopped before converging (left out of the means).")
        return " ".join(parts)

    def _show_bag(self, doc: dict | None):
        """The text line of a bootstrap: the fraction of the N points in a data set of n draws, measured and the
        expectation 1 - (1 - 1/N)^n."""
        uf = (doc or {}).get("unique_fraction")
        text = ""
        if uf:
            pairs = " · ".join(f"{n}: {'—' if m is None else f'{m:.2f}'} ({e:.2f})"
                               for n, m, e in zip((doc or {})["n"], uf.get("mean", []), uf.get("expected", [])))
            text = f"Unique points in a data set / N, measured (expected), by n: {pairs}"
        if self.bag.object != text:
            self.bag.object = text
        self.bag.visible = bool(text)

    def _say(self, text: str):
        if self.note.object != text:
            self.note.object = text

    def __panel__(self):
        # one row of controls within the tab's width at 1280 x 720 (the start and cancel buttons side by side)
        inputs = [pn.widgets.IntInput.from_param(self.param.resamples, width=120,
                                                 css_classes=["bft-learning-resamples"]),
                  pn.widgets.IntInput.from_param(self.param.n_from, width=80),
                  pn.widgets.IntInput.from_param(self.param.n_to, width=80),
                  pn.widgets.IntInput.from_param(self.param.n_sizes, width=120)]
        controls = pn.Row(pn.Column(pn.Spacer(height=18), pn.Row(self.button, self.cancel_button, margin=0)),
                          *inputs, pn.Column(pn.Spacer(height=24),
                                             pn.widgets.Checkbox.from_param(self.param.evidence, width=150,
                                                                             css_classes=["bft-learning-evidence"])),
                          sizing_mode="stretch_width")
        status = pn.Row(self.progress, self.progress_text, sizing_mode="stretch_width", height=36)
        plots = pn.Row(pn.pane.Bokeh(self.figure, sizing_mode="stretch_width"),
                       pn.pane.Bokeh(self.lambda_figure, width=300), sizing_mode="stretch_width")
        return pn.Column(controls, status, self.note, self.bag, plots, teaching(EQUATION, TEXT), self.replica_table,
                         sizing_mode="stretch_width")
