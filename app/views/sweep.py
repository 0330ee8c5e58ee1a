"""The beta sweep: stationary mixing coefficients a_1 against beta, followed upwards and downwards."""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource, Span

from ..session import BFTSession
from ..transport import user_action
from .common import SERIES, LiveText, legend_outside, make_figure, teaching

EQUATION = (r"$a_1(\beta)$ at the stationary points of $E = -\sum_i L(x_i,y_i) - \frac{1}{\beta}"
            r"\ln\sum_j p_j e^{-\beta\lambda E_{0j}}$")
TEXT = """The sweep solves the problem for a range of β (evenly spaced on the log axis), each time starting from the
previous solution: once with β increasing (solid) and once decreasing (dashed). Where the two branches differ the
problem has more than one stable solution — which one you get depends on where the solver starts (hysteresis).
Grey crosses are unstable points; the vertical markers are bifurcations, the red line is the β of the current
state."""


class SweepView(pn.viewable.Viewer):
    session = param.ClassSelector(class_=BFTSession)
    beta_min = param.Number(0.1, bounds=(1e-3, 1e3), label="β from")
    beta_max = param.Number(10.0, bounds=(1e-3, 1e3), label="β to")
    n = param.Integer(25, bounds=(3, 200), label="number of β values")

    def __init__(self, **params):
        super().__init__(**params)
        fig = make_figure("β sweep: a₁ against β", "β (log scale)", "a₁", x_axis_type="log", y_range=(-0.02, 1.02),
                          height=330)
        self.up = ColumnDataSource(dict(beta=[], a=[]))
        self.down = ColumnDataSource(dict(beta=[], a=[]))
        self.unstable = ColumnDataSource(dict(beta=[], a=[]))
        self.bif = ColumnDataSource(dict(beta=[], a=[]))
        fig.line("beta", "a", source=self.up, color=SERIES[0], line_width=3, legend_label="β increasing")
        fig.scatter("beta", "a", source=self.up, color=SERIES[0], size=6)
        fig.line("beta", "a", source=self.down, color=SERIES[1], line_width=3, line_dash="dashed",
                 legend_label="β decreasing")
        fig.scatter("beta", "a", source=self.down, color=SERIES[1], size=6, marker="triangle")
        fig.scatter("beta", "a", source=self.unstable, color="grey", size=10, marker="x", legend_label="unstable")
        fig.scatter("beta", "a", source=self.bif, color="black", size=12, marker="inverted_triangle",
                    legend_label="bifurcation")
        self.current = Span(dimension="height", line_color="crimson", line_width=2, location=1.0)
        fig.add_layout(self.current)
        legend_outside(fig)
        self.figure = fig
        self.button = pn.widgets.Button(label="Run β sweep", color="primary", width=140)
        self.button.on_click(user_action(lambda _: self.session.run_sweep(self.beta_min, self.beta_max, self.n)))
        self.info = pn.pane.Markdown("", styles={"font-size": "13px"})
        # progress of a running sweep (bftcore.api.sweep_document's progress callback), instead of a bare spinner
        self.progress = LiveText(css_classes=["bft-sweep-progress"], visible=False, name="bft-sweep-progress")
        self.session.param.watch(self._update, ["sweep", "beta", "sweeping"])
        self.session.param.watch(self._show_progress, ["sweep_progress"])
        self._update()

    def _show_progress(self, *_):
        text = self.session.sweep_progress
        self.progress.set(f"Sweeping: {text}" if text else "")
        self.progress.pane.visible = bool(text)

    def _update(self, *_):
        s = self.session
        self.current.location = s.beta
        self.button.disabled = s.sweeping
        self.button.label = "Sweeping…" if s.sweeping else "Run β sweep"
        doc = s.sweep
        if not doc:
            self.info.object = "Press **Run β sweep** (needs at least two templates)."
            return
        srcs = {"up": self.up, "down": self.down}
        ub, ua = [], []
        for br in doc.get("branches", []):
            beta = np.asarray(br["beta"], float)
            a1 = np.asarray([m[0] if len(m) else np.nan for m in br["mixing"]], float)
            stable = np.asarray(br.get("stable", [True] * len(beta)), bool)
            if br["direction"] in srcs:
                srcs[br["direction"]].data = dict(beta=beta, a=a1)
            ub += beta[~stable].tolist()
            ua += a1[~stable].tolist()
        self.unstable.data = dict(beta=ub, a=ua)
        bifs = [float(b) for b in doc.get("bifurcations", [])]
        self.bif.data = dict(beta=bifs, a=[0.0] * len(bifs))
        self.info.object = ("Bifurcations at β ≈ " + ", ".join(f"{b:.3g}" for b in bifs)) if bifs else \
            "No bifurcation in this range: one stable solution for every β."

    def __panel__(self):
        controls = pn.Row(pn.widgets.FloatInput.from_param(self.param.beta_min, width=110),
                          pn.widgets.FloatInput.from_param(self.param.beta_max, width=110),
                          pn.widgets.IntInput.from_param(self.param.n, width=130),
                          pn.Column(pn.Spacer(height=18), self.button), pn.Column(self.progress, self.info))
        return pn.Column(controls, pn.pane.Bokeh(self.figure, sizing_mode="stretch_width"),
                         teaching(EQUATION, TEXT), sizing_mode="stretch_width")
