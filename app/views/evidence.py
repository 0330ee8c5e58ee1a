"""The evidence: log p(D | λ) against λ with the current λ marked, "choose λ by evidence", and the posterior
uncertainty it implies, drawn over the heatmap (density) or the regression curve (regression)."""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource, Span

from ..configuration import CONFIG_PARAMS
from ..session import BFTSession
from ..transport import user_action
from .common import SERIES, legend_outside, make_figure, markdown_text, teaching

EQUATION = (r"$\ln p(D\,|\,\lambda) \approx -E(L^*) - \tfrac12 \ln\det H_T + \tfrac12 \ln\det(\lambda K)_T"
            r" + \ldots$ (density, Laplace); exact for regression")
TEXT = """How probable the data are under the prior that λ defines, with the field integrated out. A very stiff
prior (large λ) cannot reach the data: the fit term loses. A very loose prior (small λ) spreads its probability over
countless wiggly fields, of which the data are one: the Occam term loses. The maximum is the λ the data themselves
prefer. For a density the integral is the Laplace approximation about the MAP on the space of normalised fields;
for regression it is exact. The band on the main plot is the 90% credible band of h(x) = ∫ y p(y|x) dy from
Laplace samples of the posterior (density), or five exact posterior draws of h (regression)."""


def _edge_words(best: dict, lams: np.ndarray) -> str:
    """What a maximum at an end of the path means: the evidence may go on rising past it, so this λ is a bound."""
    if not best.get("at_edge") or lams.size == 0:
        return ""
    side = "larger" if best["lambda"] >= lams.max() else "smaller"
    return (f" That is the end of the range computed: the evidence still rises towards {side} λ, so the data do not "
            f"fix λ yet (add points).")


class EvidenceView(pn.viewable.Viewer):
    session = param.ClassSelector(class_=BFTSession)
    follow = param.Boolean(True, label="follow", doc="Recompute after every change of the data.")

    def __init__(self, canvas=None, regression=None, **params):
        super().__init__(**params)
        s = self.session
        fig = make_figure("log evidence against λ", "λ (log scale)", "ln p(D | λ)", x_axis_type="log", height=330)
        fig.name = "bft-evidence"
        self.path = ColumnDataSource(dict(lam=[], logev=[]), name="bft-evidence-path")
        self.best = ColumnDataSource(dict(lam=[], logev=[]), name="bft-evidence-best")
        fig.line("lam", "logev", source=self.path, color=SERIES[0], line_width=3, legend_label="log evidence")
        fig.scatter("lam", "logev", source=self.path, color=SERIES[0], size=5)
        fig.scatter("lam", "logev", source=self.best, color="black", size=12, marker="star",
                    legend_label="maximum")
        self.current = Span(dimension="height", line_color="crimson", line_width=2, location=s.lam,
                            name="bft-evidence-current")
        fig.add_layout(self.current)
        legend_outside(fig)
        self.figure = fig
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
        self.current.location = self.session.lam
        self._show()  # the info line names the current lambda

    def _show(self, *_):
        s = self.session
        ev = s.evidence or {}
        if "error" in ev:
            self.path.data = dict(lam=[], logev=[])
            self.best.data = dict(lam=[], logev=[])
            self._say(markdown_text(ev["error"]))  # an exception's text: it may quote outside text
        elif "best" in ev:
            lam, logev = np.asarray(ev["lambda"], float), np.asarray(ev["log_evidence"], float)
            ok = np.isfinite(logev)
            self.path.data = dict(lam=lam[ok], logev=logev[ok])
            b = ev["best"]
            self.best.data = dict(lam=[b["lambda"]], logev=[b["log_evidence"]])
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
            self.draws.data = dict(xs=[], ys=[])
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
        return pn.Column(controls, self.info, pn.pane.Bokeh(self.figure, sizing_mode="stretch_width"),
                         teaching(EQUATION, TEXT), sizing_mode="stretch_width")
