"""The evidence: log p(D | λ) against λ with the current λ marked, "choose λ by evidence", and the posterior
uncertainty it implies, drawn over the heatmap (density) or the regression curve (regression).

Why HoloViews here (issue 26: HoloViews wherever it holds the click-to-heatmap latency, a median under 50 ms at
1280x720): the plot of the evidence is declared (:func:`evidence_plot`, a DynamicMap over two Pipe streams, the path
and the current λ, drawn in place) and is never drawn on a click.  A click starts a run; the path is recomputed at
the run's convergence and arrives in a message of its own, and ``evidence_busy`` changes the info line only
(:meth:`EvidenceView._draw`); with the card closed nothing is drawn at all (:class:`app.views.common.Shown`).
Measured with ``python scripts/hv_static_cost.py`` (median of 30): a new path costs the server 25.0 ms (raw Bokeh's
two sources: 0.19 ms), the λ marker moved alone 15.8 ms (0.04 ms); giving the pane a new element instead (``pn.bind``
returning an element) 97.6 ms, hence the streams; 0 plot updates in 3 clicks with the card open.  Click-to-heatmap
latency with the card open and the other tabs opened once, median of 20 clicks from the press
(``python scripts/click_latency.py --evidence --tabs``, two runs each): 32.7 and 32.8 ms with the raw Bokeh plot,
32.1 and 24.9 ms with this one.

Why raw Bokeh stays: the posterior band and draws (sources ``bft-posterior-band``, ``bft-posterior-draws``) are
renderers added to the heatmap and the regression curve, live plots that are raw Bokeh (app/views/canvas.py); a
frame of the heatmap declared with HoloViews cost 10.2-10.7 ms of server time against 0.03-0.04 ms raw, 10x15 to
128x128 (``python scripts/hv_update_cost.py --frames 100``, median of 100 frames, measured with this change)."""
from __future__ import annotations

import holoviews as hv
import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource
from holoviews.streams import Pipe

from ..configuration import CONFIG_PARAMS
from ..session import BFTSession
from ..transport import user_action
from .common import HV_OVERLAY, SERIES, Shown, hv_look, hv_name, hv_pane, markdown_text, teaching

LAM = hv.Dimension("lam", label="λ (log scale)")
LOGEV = hv.Dimension("logev", label="ln p(D | λ)")
#: What the plot draws of no path: no point (the columns of the path and of its maximum).
NO_PATH = (np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0))

EQUATION = (r"$\ln p(D\,|\,\lambda) \approx -E(L^*) - \tfrac12 \ln\det H_T + \tfrac12 \ln\det(\lambda K)_T"
            r" + \ldots$ (density, Laplace); exact for regression")
TEXT = """How probable the data are under the prior that λ defines, with the field integrated out. A very stiff
prior (large λ) cannot reach the data: the fit term loses. A very loose prior (small λ) spreads its probability over
countless wiggly fields, of which the data are one: the Occam term loses. The maximum is the λ the data themselves
prefer. For a density the integral is the Laplace approximation about the MAP on the space of normalised fields;
for regression it is exact. The band on the main plot is the 90% credible band of h(x) = ∫ y p(y|x) dy from
Laplace samples of the posterior, with h(x) of five of those samples (density), or five exact posterior draws of h
(regression)."""


def _edge_words(best: dict, lams: np.ndarray) -> str:
    """What a maximum at an end of the path means: the evidence may go on rising past it, so this λ is a bound."""
    if not best.get("at_edge") or lams.size == 0:
        return ""
    side = "larger" if best["lambda"] >= lams.max() else "smaller"
    return (f" That is the end of the range computed: the evidence still rises towards {side} λ, so the data do not "
            f"fix λ yet (add points).")


def path_element(data) -> hv.Overlay:
    """The declaration of the path: log evidence against λ, its points and its maximum, from ``data`` = (λ, ln p,
    λ of the maximum, ln p of the maximum).  The sources keep the names the page and its tests read."""
    lam, logev, best_lam, best_logev = data
    return (hv.Curve((lam, logev), LAM, LOGEV, label="log evidence").opts(
                backend="bokeh", framewise=True, color=SERIES[0], line_width=3, hooks=[hv_name("bft-evidence-path")])
            * hv.Scatter((lam, logev), LAM, LOGEV).opts(backend="bokeh", framewise=True, color=SERIES[0], size=5)
            * hv.Scatter((best_lam, best_logev), LAM, LOGEV, label="maximum").opts(
                backend="bokeh", framewise=True, color="black", size=12, marker="star",
                hooks=[hv_name("bft-evidence-best")]))


def current_element(data) -> hv.VLine:
    """The current λ: a vertical line (a Bokeh Span named for the page)."""
    return hv.VLine(float(data)).opts(backend="bokeh", color="crimson", line_width=2,
                                      hooks=[hv_name("bft-evidence-current", "glyph")])


def evidence_plot(path: Pipe, current: Pipe) -> hv.DynamicMap:
    """The plot: the path over ``path`` and the marker over ``current``, two streams so that a new λ redraws the
    marker alone."""
    return (hv.DynamicMap(path_element, streams=[path], cache_size=1)
            * hv.DynamicMap(current_element, streams=[current], cache_size=1)).opts(
        {"Overlay": dict(title="log evidence against λ", logx=True, height=330, padding=0.05,
                         hooks=[hv_look(_name_figure)], **HV_OVERLAY)}, backend="bokeh")


def _name_figure(fig):
    fig.name = "bft-evidence"


class EvidenceView(pn.viewable.Viewer):
    session = param.ClassSelector(class_=BFTSession)
    follow = param.Boolean(True, label="follow", doc="Recompute after every change of the data.")

    def __init__(self, canvas=None, regression=None, **params):
        super().__init__(**params)
        s = self.session
        # the plot is declared (HoloViews, see the module's docstring); the view sends it what it draws
        self.path = Pipe(data=NO_PATH)
        self.current = Pipe(data=float(s.lam))
        self.shown = Shown(False)  # the plot is drawn while the card is open
        self._path_of = None  # the evidence document whose path the plot shows
        self.plot = evidence_plot(self.path, self.current)
        self.choose = pn.widgets.Button(label="Choose λ by evidence", color="primary", width=190,
                                        css_classes=["bft-choose-lambda"])
        self.choose.on_click(user_action(lambda _: s.choose_lambda_by_evidence()))
        self.refresh = pn.widgets.Button(label="Recompute", width=110, css_classes=["bft-evidence-refresh"])
        self.refresh.on_click(user_action(lambda _: s.compute_evidence()))
        # a Markdown pane, not LiveText (preformatted, one line: cut at the column's edge); it changes only when a
        # path arrives or lambda moves, never per frame
        self.info = pn.pane.Markdown("", css_classes=["bft-evidence-info"], sizing_mode="stretch_width",
                                     margin=(0, 10), styles={"font-size": "13px"})
        self.active = False  # the evidence tab is open: only then does it follow the data
        # the posterior over the main plots: a band of h(x) on the heatmap, draws of h on the regression curve
        self.band = ColumnDataSource(dict(x=[], lo=[], hi=[], mid=[]), name="bft-posterior-band")
        self.draws = ColumnDataSource(dict(xs=[], ys=[]), name="bft-posterior-draws")
        self._canvas, self._regression, self._drawn = canvas, regression, False
        s.param.watch(self._show, ["evidence", "posterior", "evidence_busy"])
        s.param.watch(self._mark, ["lam"])
        s.param.watch(self._changed, list(CONFIG_PARAMS))
        s.param.watch(self._converged, ["converged"])
        self._show()

    def _draw_on_main_plots(self):
        """The band and the draws join the heatmap and the regression curve when the card is first opened: four
        renderers more on the canvas cost every click's repaint, also with nothing to draw (click latency,
        issue 13)."""
        if self._drawn:
            return
        self._drawn = True
        if self._canvas is not None:
            f = self._canvas.figure
            f.line("x", "lo", source=self.band, color="white", line_dash="dashed", line_width=2)
            f.line("x", "hi", source=self.band, color="white", line_dash="dashed", line_width=2)
            f.line("x", "mid", source=self.band, color="white", line_width=1.5, line_alpha=0.8)
            f.multi_line("xs", "ys", source=self.draws, color="white", line_alpha=0.6, line_width=1)
        if self._regression is not None:
            # unlabelled: a legend entry would stand there in density mode and with the card closed
            self._regression.figure.multi_line("xs", "ys", source=self.draws, color=SERIES[0], line_alpha=0.5,
                                               line_width=1)

    def set_active(self, active: bool):
        """The evidence card was opened (compute now) or closed (stop following, hide the band)."""
        self.active = bool(active)
        self.shown.show(self.active)
        if self.active:
            self._draw_on_main_plots()
            assert self.session is not None  # a view is built with its session (param types the parameter as optional)
            self.session.compute_evidence()
        else:
            self.band.data = dict(x=[], lo=[], hi=[], mid=[])
            self.draws.data = dict(xs=[], ys=[])

    def _changed(self, *_):
        if self.active and self.follow and not self.session.running:
            self.session.compute_evidence()

    def _converged(self, event):
        # the band belongs to the MAP: recomputed once the run has converged (the path does not need it)
        if self.active and self.follow and event.new:
            self.session.compute_evidence()

    def _mark(self, *_):
        self._send_lambda()
        self._show()  # the info line names the current lambda

    def _send_lambda(self) -> None:
        assert self.session is not None
        lam = float(self.session.lam)
        if self.current.data != lam:
            self.shown.send(self.current, lam)

    def _draw(self, ev: dict, data) -> None:
        """Send the plot a new path; nothing when the document on it is the same (``evidence_busy`` changes the
        info line alone: the plot is not drawn again on a click)."""
        if ev is not self._path_of:
            self._path_of = ev
            self.shown.send(self.path, data)

    def _show(self, *_):
        s = self.session
        ev = s.evidence or {}
        if "error" in ev:
            self._draw(ev, NO_PATH)
            self._say(markdown_text(ev["error"]))  # an exception's text: it may quote outside text
        elif "best" in ev:
            lam, logev = np.asarray(ev["lambda"], float), np.asarray(ev["log_evidence"], float)
            ok = np.isfinite(logev)
            b = ev["best"]
            self._draw(ev, (lam[ok], logev[ok], np.array([b["lambda"]], float), np.array([b["log_evidence"]], float)))
            how = "exact" if ev.get("method") == "exact" else "Laplace approximation"
            self._say(f"Maximum at λ = {b['lambda']:.3g} (ln p = {b['log_evidence']:.2f}, {how}); "
                      f"the current λ is {s.lam:.3g}." + _edge_words(b, lam[ok])
                      + (" Updating…" if s.evidence_busy else ""))
        else:
            self._say("Computing the evidence…" if s.evidence_busy else "Open this card to compute the evidence.")
        self.choose.disabled = "best" not in ev
        post = s.posterior if self.active else None
        if post and post.get("kind") == "laplace":
            self.band.data = dict(x=post["x"], lo=post["h_lo"], hi=post["h_hi"], mid=post["h_median"])
            draws = post.get("h_draws", [])
            self.draws.data = dict(xs=[post["x"]] * len(draws), ys=draws)
        elif post and post.get("kind") == "exact":
            x = post["x"]
            self.draws.data = dict(xs=[x] * len(post["draws"]), ys=post["draws"])
            self.band.data = dict(x=[], lo=[], hi=[], mid=[])
        else:
            self.band.data = dict(x=[], lo=[], hi=[], mid=[])
            self.draws.data = dict(xs=[], ys=[])

    def _say(self, text: str) -> None:
        if self.info.object != text:
            self.info.object = text

    def __panel__(self):
        controls = pn.Row(self.choose, self.refresh, pn.widgets.Checkbox.from_param(self.param.follow, width=80),
                          sizing_mode="stretch_width")
        return pn.Column(controls, self.info, hv_pane(self.plot),
                         teaching(EQUATION, TEXT), sizing_mode="stretch_width")
