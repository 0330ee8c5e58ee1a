"""The beta sweep: stationary mixing coefficients a_1 against beta, followed upwards and downwards.

Why HoloViews here (issue 26: HoloViews wherever it holds the click-to-heatmap latency, a median under 50 ms at
1280x720): the plot is declared (:func:`sweep_plot`, a DynamicMap over two Pipe streams, the branches and the current
β, drawn in place) and is never drawn on a click: it changes when a sweep ends (its own message, from the sweep's
worker) and when β moves (the β slider), and only while its tab is open (:class:`app.views.common.Shown`; Panel keeps
a tab rendered once opened).  Measured with ``python scripts/hv_static_cost.py`` (median of 30): a new sweep of 25 β
costs the server 41.8 ms (raw Bokeh's four sources: 0.34 ms), the β marker moved alone 22.8 ms (0.05 ms); 0 plot
updates in 3 clicks.  The sources keep names for the page and its tests (``bft-sweep-up``, ``bft-sweep-down``,
``bft-sweep-unstable``, ``bft-sweep-bifurcations``, the marker ``bft-sweep-current``).
"""
from __future__ import annotations

import holoviews as hv
import numpy as np
import panel as pn
import param
from holoviews.streams import Pipe

from ..session import BFTSession
from ..transport import user_action
from .common import HV_OVERLAY, SERIES, LiveText, Shown, hv_look, hv_name, hv_pane, teaching

BETA = hv.Dimension("beta", label="β (log scale)")
A1 = hv.Dimension("a", label="a₁")
#: The β axis before the first sweep (a log axis needs a positive range to start from).
EMPTY_RANGE = (0.1, 10.0)


def _points(beta=(), a=()) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(beta, float), np.asarray(a, float)


#: What the plot draws of no sweep: the branches up and down, the unstable points, the bifurcations.
NO_SWEEP = {"up": _points(), "down": _points(), "unstable": _points(), "bifurcations": _points()}

EQUATION = (r"$a_1(\beta)$ at the stationary points of $E = -\sum_i L(x_i,y_i) - \frac{1}{\beta}"
            r"\ln\sum_j p_j e^{-\beta\lambda E_{0j}}$")
TEXT = """The sweep solves the problem for a range of β (evenly spaced on the log axis), each time starting from the
previous solution: once with β increasing (solid) and once decreasing (dashed). Where the two branches differ the
problem has more than one stable solution — which one you get depends on where the solver starts (hysteresis).
Grey crosses are unstable points; the vertical markers are bifurcations, the red line is the β of the current
state."""


def branches_element(data: dict) -> hv.Overlay:
    """The declaration of a sweep: the branches followed upwards (solid) and downwards (dashed), their unstable
    points and the bifurcations, from ``data`` (:data:`NO_SWEEP`'s keys, each a pair of arrays β, a₁).  The sources
    are named for the page and its tests: ``bft-sweep-up``, ``bft-sweep-down``, ``bft-sweep-unstable``,
    ``bft-sweep-bifurcations``."""
    def scatter(key, label="", **style):
        return hv.Scatter(data[key], BETA, A1, label=label).opts(backend="bokeh", framewise=True, **style)

    layers = (hv.Curve(data["up"], BETA, A1, label="β increasing").opts(
                  backend="bokeh", framewise=True, color=SERIES[0], line_width=3, hooks=[hv_name("bft-sweep-up")])
              * scatter("up", color=SERIES[0], size=6)
              * hv.Curve(data["down"], BETA, A1, label="β decreasing").opts(
                  backend="bokeh", framewise=True, color=SERIES[1], line_width=3, line_dash="dashed",
                  hooks=[hv_name("bft-sweep-down")])
              * scatter("down", color=SERIES[1], size=6, marker="triangle")
              * scatter("unstable", "unstable", color="grey", size=10, marker="x",
                        hooks=[hv_name("bft-sweep-unstable")])
              * scatter("bifurcations", "bifurcation", color="black", size=12, marker="inverted_triangle",
                        hooks=[hv_name("bft-sweep-bifurcations")]))
    if not any(len(b) for b, _ in data.values()):
        layers = layers.redim.range(beta=EMPTY_RANGE)
    return layers


def sweep_data(doc: dict) -> dict:
    """What the plot draws of a sweep document (``bftcore.api.sweep_document``): a₁ along each branch, the unstable
    points of both, the bifurcations (at a₁ = 0)."""
    data = dict(NO_SWEEP)
    ub, ua = [], []
    for br in doc.get("branches", []):
        beta = np.asarray(br["beta"], float)
        a1 = np.asarray([m[0] if len(m) else np.nan for m in br["mixing"]], float)
        stable = np.asarray(br.get("stable", [True] * len(beta)), bool)
        if br["direction"] in ("up", "down"):
            data[br["direction"]] = (beta, a1)
        ub += beta[~stable].tolist()
        ua += a1[~stable].tolist()
    bifs = [float(b) for b in doc.get("bifurcations", [])]
    data["unstable"] = _points(ub, ua)
    data["bifurcations"] = _points(bifs, [0.0] * len(bifs))
    return data


def current_element(data) -> hv.VLine:
    """The β of the current state: a vertical line (a Bokeh Span named ``bft-sweep-current``)."""
    return hv.VLine(float(data)).opts(backend="bokeh", color="crimson", line_width=2,
                                      hooks=[hv_name("bft-sweep-current", "glyph")])


def sweep_plot(branches: Pipe, current: Pipe) -> hv.DynamicMap:
    """The plot: the sweep over ``branches`` and the marker over ``current`` (a new β redraws the marker alone)."""
    return (hv.DynamicMap(branches_element, streams=[branches], cache_size=1)
            * hv.DynamicMap(current_element, streams=[current], cache_size=1)).opts(
        {"Overlay": dict(title="β sweep: a₁ against β", logx=True, ylim=(-0.02, 1.02), height=330, padding=0.05,
                         hooks=[hv_look(_name_figure)], **HV_OVERLAY)}, backend="bokeh")


def _name_figure(fig):
    fig.name = "bft-sweep"


class SweepView(pn.viewable.Viewer):
    session = param.ClassSelector(class_=BFTSession)
    beta_min = param.Number(0.1, bounds=(1e-3, 1e3), label="β from")
    beta_max = param.Number(10.0, bounds=(1e-3, 1e3), label="β to")
    n = param.Integer(25, bounds=(3, 200), label="number of β values")

    def __init__(self, **params):
        super().__init__(**params)
        # the plot is declared (HoloViews, see the module's docstring); the view sends it what it draws
        self.branches = Pipe(data=NO_SWEEP)
        self.current = Pipe(data=float(self.session.beta))
        self._drawn = None  # the sweep document on the plot
        self.shown = Shown()  # the tab is open (app.main tells): the plot is drawn only then
        self.plot = sweep_plot(self.branches, self.current)
        self.button = pn.widgets.Button(label="Run β sweep", color="primary", width=140)
        self.button.on_click(user_action(lambda _: self.session.run_sweep(self.beta_min, self.beta_max, self.n)))
        self.info = pn.pane.Markdown("", styles={"font-size": "13px"})
        # progress of a running sweep (bftcore.api.sweep_document's progress callback), instead of a bare spinner
        self.progress = LiveText(css_classes=["bft-sweep-progress"], visible=False, name="bft-sweep-progress")
        self.session.param.watch(self._update, ["sweep", "beta", "sweeping"])
        self.session.param.watch(self._show_progress, ["sweep_progress"])
        self._update()

    def show_tab(self, shown: bool) -> None:
        """The tab was opened (what changed while it was closed is drawn) or closed."""
        self.shown.show(shown)

    def _show_progress(self, *_):
        text = self.session.sweep_progress
        self.progress.set(f"Sweeping: {text}" if text else "")
        self.progress.pane.visible = bool(text)

    def _update(self, *_):
        s = self.session
        if self.current.data != float(s.beta):
            self.shown.send(self.current, float(s.beta))
        self.button.disabled = s.sweeping
        self.button.label = "Sweeping…" if s.sweeping else "Run β sweep"
        doc = s.sweep
        if not doc:
            self.info.object = "Press **Run β sweep** (needs at least two templates)."
            return
        bifs = [float(b) for b in doc.get("bifurcations", [])]
        if doc is not self._drawn:  # "beta" and "sweeping" change the marker and the button, not the branches
            self._drawn = doc
            self.shown.send(self.branches, sweep_data(doc))
        self.info.object = ("Bifurcations at β ≈ " + ", ".join(f"{b:.3g}" for b in bifs)) if bifs else \
            "No bifurcation in this range: one stable solution for every β."

    def __panel__(self):
        controls = pn.Row(pn.widgets.FloatInput.from_param(self.param.beta_min, width=110),
                          pn.widgets.FloatInput.from_param(self.param.beta_max, width=110),
                          pn.widgets.IntInput.from_param(self.param.n, width=130),
                          pn.Column(pn.Spacer(height=18), self.button), pn.Column(self.progress, self.info))
        return pn.Column(controls, hv_pane(self.plot),
                         teaching(EQUATION, TEXT), sizing_mode="stretch_width")
