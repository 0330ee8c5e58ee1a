"""BYY mixture (k automatic): a side tile of the 1-D density mode (issue 30 part 2, seed 004).

The session's samples y_t (``session.data``'s y column) fitted by a 1-D Gaussian mixture from 6 components at the
quantiles, by Bayesian Ying-Yang harmony learning or by maximum likelihood (:func:`bftcore.models.byy.fit_mixture`,
the same function the CLI's ``reproduce byy`` and the tests call): the mixture's density over the data, and the
weights of the six starting components over the iterations, those of the rival components shrinking to zero under
harmony.  A toggle switches harmony / maximum likelihood; the line under it says how many components keep a weight
above 0.05.  Visible only while the problem is a 1-D density (``session.kind``); computed in numpy/scipy on the
server when the data, the kind or the toggle change, and only while visible.

Why an own tile and not an overlay on the canvas: the canvas belongs to another view (app/views/canvas.py), and the
weights over the iterations need a plot of their own anyway.  The density curve is drawn here on the same y axis
range as the canvas.
"""
from __future__ import annotations

import html

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource, Range1d

from bftcore.models import byy

from ..runner import RUN_COMPUTE_S
from ..session import BFTSession
from ..transport import user_action
from .common import SERIES, make_figure, replace_data, teaching

#: The toggle's labels and the objective each names.
OBJECTIVES = {"harmony": "harmony", "maximum likelihood": "ml"}
START = 6
#: Points below which there is no mixture to fit (each of 6 components needs data to mean anything).
MIN_POINTS = 12

EQUATION = (r"harmony $H = \frac{1}{N}\sum_t \sum_\ell p(\ell|y_t)\, L_{\ell t}$ (10)-(12); "
            r"likelihood $\frac{1}{N}\sum_t \ln \sum_\ell e^{L_{\ell t}} = H + \text{entropy of } p(\ell|y_t)$")
TEXT = """**Harmony drops the entropy, so it prunes.** With L_ℓt = ln α_ℓ + ln G(y_t | μ_ℓ, σ_ℓ²) and the
responsibilities p(ℓ|y) ∝ e^{L_ℓ} (Yang designed from Ying, γ = 1), maximum likelihood is harmony plus the entropy
of the responsibilities. Lemm's mixture energy −ln Σ_j e^{−E_j} is the same: an energy minus an entropy,
min_a [Σ_j a_j E_j − H(a)], and his mixing coefficients a_j are Laplace responsibilities of the same form as BYY's
p(ℓ|y). The entropy rewards sharing data between components, so maximum likelihood keeps every component.
Harmony has no entropy: along its gradient a component that fits a sample worse than average (δh < −1) is pushed
away from it ("rival penalised"), and the weights of components that only compete go to zero: the number of
components is chosen by the fit. BYY's γ and Lemm's β are the same knob: γ, β → ∞ is the hard cut (winner takes
all), small β the soft mixture."""


def samples_of(data) -> np.ndarray:
    """The y values of the session's data points [x, y]."""
    return np.array([float(p[1]) for p in data], dtype=float)


class BYYView(pn.viewable.Viewer):
    """The BYY mixture tile: the toggle, the count, the density over the data and the weights over the iterations."""
    session = param.ClassSelector(class_=BFTSession)

    def __init__(self, **params):
        super().__init__(**params)
        self.toggle = pn.widgets.RadioButtonGroup(options=list(OBJECTIVES), value="harmony", margin=(2, 10),
                                                  css_classes=["bft-byy-toggle"])
        self.count = pn.pane.HTML("", margin=(2, 10), css_classes=["bft-byy-count"])
        self.curve = ColumnDataSource(dict(y=[], p=[]), name="bft-byy-curve")
        self.rug = ColumnDataSource(dict(y=[], z=[]), name="bft-byy-rug")
        self.lines = ColumnDataSource(dict(xs=[], ys=[], color=[]), name="bft-byy-weights")
        self.kept_source = ColumnDataSource(dict(it=[], w=[]), name="bft-byy-final")
        # explicit ranges: auto ranges over empty sources log "could not set initial ranges" in the browser on every
        # page load (the tile is built, hidden, in every page's side tiles); update() sets them to the data's
        d = make_figure("BYY mixture (k automatic)", "y", "p(y)", height=200, name="bft-byy-density",
                        x_range=Range1d(0.0, 1.0), y_range=Range1d(0.0, 1.0))
        d.line("y", "p", source=self.curve, line_width=3, color=SERIES[0])
        d.scatter("y", "z", source=self.rug, marker="dash", angle=np.pi / 2, size=10, color="black", alpha=0.6)
        w = make_figure("weights α_ℓ over the iterations", "iteration", "α_ℓ", height=180,
                        x_range=Range1d(0.0, 1.0), y_range=Range1d(-0.02, 1.0), name="bft-byy-weights-plot")
        w.multi_line("xs", "ys", source=self.lines, line_color="color", line_width=2.5)
        w.scatter("it", "w", source=self.kept_source, size=7, color="black")
        self.density_plot, self.weights_plot = d, w
        self.fit: byy.MixtureFit | None = None
        self._key: tuple | None = None
        self.layout = pn.Column(self.toggle, self.count, pn.pane.Bokeh(d, sizing_mode="stretch_width"),
                                pn.pane.Bokeh(w, sizing_mode="stretch_width"), teaching(EQUATION, TEXT),
                                sizing_mode="stretch_width", margin=0, css_classes=["bft-byy"], visible=False)
        self.toggle.param.watch(user_action(self.update), "value")
        self.session.param.watch(self.update, ["data", "nx", "model", "method", "y_min", "y_max"])
        self.update()

    @property
    def objective(self) -> str:
        return OBJECTIVES[self.toggle.value]

    def update(self, *_):
        s = self.session
        shown = s.kind.name == "density_1d"
        if self.layout.visible != shown:
            self.layout.visible = shown
        if not shown:
            return
        y = samples_of(s.data)
        key = (self.objective, y.tobytes(), float(s.y_min), float(s.y_max))
        if key == self._key:
            return
        self._key = key
        grid = np.linspace(float(s.y_min), float(s.y_max), 241)
        self.density_plot.x_range.update(start=float(s.y_min), end=float(s.y_max))
        replace_data(self.rug, dict(y=y.tolist(), z=[0.0] * y.size))
        if y.size < MIN_POINTS or np.std(y) == 0:
            self.fit = None
            self.count.object = f"Add data: the mixture starts from {START} components and needs at least " \
                                f"{MIN_POINTS} points that differ (there are {y.size})."
            replace_data(self.curve, dict(y=[], p=[]))
            replace_data(self.lines, dict(xs=[], ys=[], color=[]))
            replace_data(self.kept_source, dict(it=[], w=[]))
            return
        # on the session's background lane (0.1-0.5 s of L-BFGS): a click in 1-D density mode must not wait for it;
        # the newest request wins (app.work), and its end is drawn on the session's next tick
        objective, label = self.objective, self.toggle.value
        s.work.start("byy", lambda _task: byy.fit_mixture(y, objective, k=START),
                     lambda _task, fit: self._draw(fit, grid, label, key), budget_s=RUN_COMPUTE_S)
        if not s.pump.served:  # a notebook or a test: drawn when the call returns
            s.work.wait("byy")

    def _draw(self, fit, grid, label: str, key) -> None:
        """The fit of the newest request on the plots (a fit that raised, or of an older request, changes nothing
        but the count line's words)."""
        if isinstance(fit, Exception):
            self.count.object = f"The BYY fit failed: {html.escape(str(fit))[:200]}"
            return
        if key != self._key:
            return
        self.fit = fit
        weights = np.array(fit.weights_history)
        steps = list(range(len(weights)))
        p = fit.mixture.density(grid)
        top = float(np.max(p)) if p.size and np.max(p) > 0 else 1.0
        self.density_plot.y_range.update(start=-0.05 * top, end=1.1 * top)  # the rug sits at 0
        self.weights_plot.x_range.update(start=0.0, end=float(max(steps[-1], 1)))
        replace_data(self.curve, dict(y=grid.tolist(), p=p.tolist()))
        replace_data(self.lines, dict(xs=[steps] * weights.shape[1], ys=[weights[:, j].tolist()
                                                                         for j in range(weights.shape[1])],
                                      color=[SERIES[j % len(SERIES)] for j in range(weights.shape[1])]))
        replace_data(self.kept_source, dict(it=[steps[-1]] * weights.shape[1], w=weights[-1].tolist()))
        self.count.object = (f'<span data-testid="byy-count" data-kept="{fit.kept}">{label}: '
                             f"<b>{fit.kept}</b> of {START} components keep a weight above {byy.KEEP}</span>")

    def __panel__(self):
        return self.layout
