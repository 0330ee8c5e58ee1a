"""The "Information and hyperpriors" tab: the paper's small figures 3, 6, 9 and 10 ([000], §2.1.5, §5.3.6, §6.3) as
two live panels, computed by :mod:`bftcore.studies.small_figures` (pure numpy, no solver, no background work).

* **Mutual information** (Fig 3): four states h_l with (h_l(x_a), h_l(x_b)) in {+-1}^2, a prior over them (a
  correlation slider, or the factorial prior of the module), and a *Step* button that adds one datum drawn from the
  true h = (+1, +1) by a seeded generator of the view; the posterior bars and M(n), eq. (32), of the predictive
  density (39) after each Bayes update (40).
* **Joint posteriors** (Figs 6, 9, 10): log p(h, gamma) or log p(h, beta) of the prior mixture as a heatmap over h and
  log10 of the hyperparameter, for the uniform or the compensating hyperprior, with y_D on a slider for the mixture,
  and a marker at the maximum (a triangle on the edge when it runs off the grid).

Why not :func:`~bftcore.studies.small_figures.grid_maxima` for the marker: it refines each maximum by L-BFGS-B and
rejects saddles by eight more climbs, 0.2-0.8 s for an interior maximum of the mixture (measured here), too slow to
follow a slider.  :func:`refined_maxima` takes the same grid's local maxima and climbs by vectorised zooms of the
grid (a 21 x 21 window, moved to its best node, narrowed while that node is inside): a saddle is left along its
ascent and found again as the maximum it leads to.  tests/test_information_view.py checks it against the documents.

Raw Bokeh (as :mod:`app.views.learning`): each update replaces a few small sources, no HoloViews element is drawn.
"""
from __future__ import annotations

import math

import numpy as np
import panel as pn
import param
from bokeh.models import ColorBar, ColumnDataSource, FactorRange, LinearColorMapper, Range1d
from scipy.ndimage import maximum_filter

from bftcore.studies import small_figures as sf

from ..transport import user_action
from .common import PALETTE, SERIES, LiveText, make_figure, teaching

#: The states' labels on the bars, in the order of :data:`bftcore.studies.small_figures.STATES`.
STATE_LABELS = ["(+,+)", "(+,−)", "(−,+)", "(−,−)"]
#: The correlation c of the prior ((1+c)/4, (1-c)/4, (1-c)/4, (1+c)/4): 0.8 is the module's correlated prior.
DEFAULT_CORRELATION = 0.8
#: Data a session can add: the paper's 50 (a move of the prior computes M again at each n, 1.7 ms each).
MAX_STEPS = sf.FIG3_DATA
#: The heatmap's floor: log p - max clipped here, as the figures of ``reproduce`` draw it.
LOG_FLOOR = -10.0
#: The h range of each joint posterior, as the documents of Figs 6 and 9/10 take it.
H_RANGE = {"fig6": (-0.5, 1.5), "mixture": (-1.5, 1.5)}
SYMBOL = {"fig6": "γ", "mixture": "β"}
FIGURES = {"Fig 6: h and γ": "fig6", "Figs 9–10: h and β of the prior mixture": "mixture"}
HYPERPRIORS = {"uniform": "uniform", "compensating": "compensating"}

EQUATION_MI = (r"$\begin{gathered}M = \int dy_a\,dy_b\;p(y_a,y_b|f)\,\ln\frac{p(y_a,y_b|f)}{p(y_a|f)\,p(y_b|f)}"
               r" \\ p(h_l|D_{n}) \propto p(y_n|x_n,h_l)\,p(h_l|D_{n-1})\end{gathered}$")
TEXT_MI = """Four possible truths h_l, each a pair of signs (h(x_a), h(x_b)). The prior says how strongly the two
signs go together: with correlation c the states (+,+) and (−,−) have weight (1+c)/4 each. Because of that
correlation a datum at x_a also tells you about x_b: the predictive density couples y_a and y_b, and the mutual
information M (eq. 32) measures how much. Each **Step** adds one datum y = h(x) + noise (σ = 1) at x_a or x_b,
drawn from the true h = (+,+), and updates the posterior by Bayes' rule (40). As the posterior settles on one
state, the coupling disappears and M falls towards 0: learning uses up the prior's "information between points".
**Try**: c = 0 or the *factorial* prior, where p(h) = p(h(x_a)) p(h(x_b)): M stays 0 whatever the data (eq. 37).
Move c with data already drawn: the same data are used again from the new prior."""
EQUATION_JOINT = (r"$\begin{gathered}\ln p(h,\gamma) = -\tfrac{h^2}{2} - \tfrac{\gamma}{2}(h-1)^2 + \tfrac12\ln\gamma"
                  r" + \ln p(\gamma) \\ \ln p(h,\beta) = \ln\beta - \tfrac{\beta}{2}(h-y_D)^2"
                  r" + \ln\sum_\pm e^{-\frac{\beta}{2}(h\mp1)^2} + \ln p(\beta)\end{gathered}$")
TEXT_JOINT = """A zero-dimensional field h (one number) with one datum, and a hyperparameter learned with it. Fig 6:
the prior's strength γ pulls h towards 1, the datum y_D = 0 pulls it to 0. With a uniform hyperprior the prior's
normalisation √γ makes a large γ always win: the maximum runs off the grid, γ → ∞, h → 1. The compensating
hyperprior p(γ) ∝ 1/√γ cancels that factor and the maximum runs off the other way: γ → 0, h → 0. Figs 9–10: a
mixture of two templates ±1 with a common inverse temperature β. At y_D = 0 two symmetric maxima; move y_D up and
one template wins: the maximum tends to h = (1+y_D)/2, β = 4/(1−y_D)² (h = 0.75, β = 16 at y_D = 0.5). With the
compensating p(β) ∝ 1/β the maximum is at β → 0 for every y_D. The colour is log p minus its maximum on the grid,
clipped at −10; the star marks the maximum, a triangle on the edge a maximum beyond the grid."""


def correlated_prior(c: float) -> np.ndarray:
    """The prior of correlation ``c`` in [0, 1] over :data:`STATES`: ((1+c)/4, (1-c)/4, (1-c)/4, (1+c)/4); c = 0.8 is
    :data:`bftcore.studies.small_figures.CORRELATED_PRIOR`, c = 0 the uniform (factorial) prior."""
    return np.array([1 + c, 1 - c, 1 - c, 1 + c]) / 4.0


def refined_maxima(log_p, h: np.ndarray, s: np.ndarray, tol: float = 1e-7) -> list[dict]:
    """The maxima of ``log_p(h, s)`` on the grid h x s (s log-spaced), as
    :func:`~bftcore.studies.small_figures.grid_maxima` returns them (``h``, ``s``, ``log_p``, ``edge``: "lower",
    "upper" or None; largest first) but refined by vectorised zooms instead of L-BFGS-B (see the module's docstring):
    from each node above its eight neighbours, :func:`_zoom_climb`.  A climb that reaches the first or last s is a
    maximum beyond the grid, reported there with h maximised along that row.  A climb that ends on a saddle (a point
    of its ring of radius 0.05 in (h, ln s) is higher) goes on from that ring point."""
    u = np.linspace(-1.0, 1.0, 21)
    t = np.log(s)
    lo, hi = np.array([h[0], t[0]]), np.array([h[-1], t[-1]])
    H, T = np.meshgrid(h, t, indexing="ij")
    z = log_p(H, np.exp(T))
    # above the neighbours before (in reading order) and at least as high as those after: one node per flat top
    before = np.zeros((3, 3), bool)
    before[0, :], before[1, 0] = True, True
    peaks = np.argwhere((z > maximum_filter(z, footprint=before, mode="constant", cval=-np.inf))
                        & (z >= maximum_filter(z, size=3, mode="constant", cval=-np.inf)))
    found: list[dict] = []
    cell = np.array([h[1] - h[0], t[1] - t[0]])
    ring = 0.05 * np.array([[math.cos(a), math.sin(a)] for a in np.linspace(0, 2 * math.pi, 16, endpoint=False)])
    for i, j in peaks:
        centre = np.array([h[i], t[j]])
        for _ in range(4):  # a climb, and again from the ring of a saddle it ended on
            centre = _zoom_climb(log_p, centre, cell, lo, hi, tol)
            around = np.clip(centre + ring, lo, hi)
            values = log_p(around[:, 0], np.exp(around[:, 1]))
            if values.max() <= log_p(centre[0], math.exp(centre[1])) + 1e-12:
                break
            centre = around[int(np.argmax(values))]
        edge = "lower" if centre[1] <= lo[1] else "upper" if centre[1] >= hi[1] else None
        if edge is not None:  # h maximised along the edge's row by the same zooms in one dimension
            row, span = np.exp(centre[1]), h[1] - h[0]
            while span > tol:
                a = np.clip(centre[0] + span * u, lo[0], hi[0])
                centre[0] = a[int(np.argmax(log_p(a, row)))]
                span /= 5.0
        hv, sv = float(centre[0]), float(math.exp(centre[1]))
        if any(abs(f["h"] - hv) < 1e-5 and abs(math.log(f["s"] / sv)) < 1e-5 for f in found):
            continue
        found.append({"h": hv, "s": sv, "log_p": float(log_p(hv, sv)), "edge": edge})
    return sorted(found, key=lambda f: -f["log_p"])


def _zoom_climb(log_p, centre, cell, lo, hi, tol):
    """Uphill from ``centre`` = (h, ln s): a window of +-``cell`` moves to its best of 21 x 21 nodes, doubling while
    that node is on its border and narrowing five-fold while it is inside, until it is ``tol`` wide."""
    u = np.linspace(-1.0, 1.0, 21)
    half = cell.copy()
    for _ in range(400):
        a = np.clip(centre[0] + half[0] * u, lo[0], hi[0])
        b = np.clip(centre[1] + half[1] * u, lo[1], hi[1])
        A, B = np.meshgrid(a, b, indexing="ij")
        k, m = np.unravel_index(np.argmax(log_p(A, np.exp(B))), A.shape)
        # a node on the window's border is inside when the border is the grid's
        inside = (0 < k < 20 or a[k] in (lo[0], hi[0])) and (0 < m < 20 or b[m] in (lo[1], hi[1]))
        centre = np.array([a[k], b[m]])
        if not inside:
            half = np.minimum(half * 2.0, hi - lo)
        elif max(half) < tol:
            break
        else:
            half = half / 5.0
    return centre


def joint_log_p(figure: str, hyperprior: str, y_d: float):
    """The log density of the chosen joint posterior as a function of (h, s): Fig 6's, or the mixture's at ``y_d``."""
    if figure == "fig6":
        return lambda a, b: sf.fig6_log_p(a, b, hyperprior)
    return lambda a, b: sf.mixture_log_p(a, b, y_d, hyperprior)


def maximum_text(maxima: list[dict], symbol: str) -> str:
    """Where the maximum is, in words: "maximum at h = 0.75, β = 16", or where it runs off the grid: "maximum off
    the grid: γ → ∞ (h = 0.999)" (h the maximum along the grid's edge)."""
    if not maxima:
        return "no maximum on the grid"
    best = maxima[0]
    if best["edge"] is not None:
        limit = "∞" if best["edge"] == "upper" else "0"
        # short: one line of the panel at 16 px (about 45 characters)
        return f"maximum off the grid: {symbol} → {limit} (h = {best['h']:.3g})"
    twins = [m for m in maxima[1:] if m["edge"] is None and abs(m["log_p"] - best["log_p"]) < 1e-9]
    if twins:
        hs = ", ".join(f"{m['h']:.3g}" for m in sorted([best] + twins, key=lambda m: m["h"]))
        return f"{len(twins) + 1} equal maxima at h = {hs}, {symbol} = {best['s']:.3g}"
    return f"maximum at h = {best['h']:.3g}, {symbol} = {best['s']:.3g}"


class InformationView(pn.viewable.Viewer):
    """The tab: the Fig 3 panel (:meth:`step`, :meth:`reset`, the prior's parameters) and the joint-posterior panel
    (``figure``, ``hyperprior``, ``y_d``).  Needs no session: its state is its own, and every update is numpy."""

    correlation = param.Number(DEFAULT_CORRELATION, bounds=(0.0, 1.0), step=0.05, label="prior correlation c")
    factorial = param.Boolean(False, label="factorial prior")
    seed = param.Integer(sf.FIG3_SEED, bounds=(0, None), label="seed")
    figure: param.Selector = param.Selector(objects=list(FIGURES.values()), default="mixture")
    hyperprior: param.Selector = param.Selector(objects=list(HYPERPRIORS.values()), default="uniform")
    y_d = param.Number(0.3, bounds=(0.0, 0.5), step=0.05, label="y_D (the datum)")

    def __init__(self, **params):
        super().__init__(**params)
        self.x: list[int] = []
        self.y: list[float] = []
        self.rng = np.random.default_rng(self.seed)
        self.posteriors = np.empty((0, 4))
        self.M: list[float] = []
        self.maxima: list[dict] = []
        self._build_information()
        self._build_joint()
        self._prior_changed()
        self._joint_changed()

    # --------------------------------------------------------------------------------------- Fig 3
    @property
    def prior(self) -> np.ndarray:
        return np.asarray(sf.FACTORIAL_PRIOR) if self.factorial else correlated_prior(self.correlation)

    def _build_information(self):
        bars = make_figure("posterior p(h_l | data), the true h in blue", "state (h(x_a), h(x_b))", "probability",
                           x_range=FactorRange(*STATE_LABELS), y_range=Range1d(0, 1.02), height=210)
        bars.name = "bft-info-bars"
        self.bar_source = ColumnDataSource(dict(state=STATE_LABELS, posterior=[0.0] * 4, prior=[0.0] * 4,
                                                colour=[SERIES[0]] + [SERIES[7]] * 3), name="bft-info-posterior")
        bars.vbar("state", top="posterior", width=0.6, source=self.bar_source, fill_color="colour",
                  line_color="colour", legend_label="posterior")
        bars.scatter("state", "prior", source=self.bar_source, marker="dash", size=40, line_width=3,
                     color="#000000", legend_label="prior")
        bars.legend.update(location="top_right", label_text_font_size="14px", background_fill_alpha=0.6,
                           padding=2, spacing=0)
        bars.xgrid.grid_line_color = None
        mfig = make_figure("mutual information M(n)", "n (data)", "M (nats)", height=210,
                           x_range=Range1d(0, 10), y_range=Range1d(-0.005, 0.2))
        mfig.name = "bft-info-m-plot"
        self.m_source = ColumnDataSource(dict(n=[], M=[]), name="bft-info-m")
        mfig.line("n", "M", source=self.m_source, color=SERIES[3], line_width=3)
        mfig.scatter("n", "M", source=self.m_source, color=SERIES[3], size=7)
        self.bars_figure, self.m_figure = bars, mfig
        self.step_button = pn.widgets.Button(label="Step", color="primary", width=80,
                                             css_classes=["bft-info-step"])
        self.step_button.on_click(user_action(lambda _: self.step()))
        self.reset_button = pn.widgets.Button(label="Reset", width=80, css_classes=["bft-info-reset"])
        self.reset_button.on_click(user_action(lambda _: self.reset()))
        # the released value only: with 50 data a new prior costs about 85 ms (M again at every n)
        self.correlation_widget = pn.widgets.FloatSlider.from_param(self.param.correlation, width=200,
                                                                    css_classes=["bft-info-correlation"],
                                                                    throttled=True)
        self.factorial_widget = pn.widgets.Toggle.from_param(self.param.factorial, width=130, margin=(22, 5, 0, 5),
                                                             css_classes=["bft-info-factorial"])
        self.mi_text = LiveText(css_classes=["bft-info-m-text"], margin=(0, 10), sizing_mode="stretch_width",
                                styles={"font-size": "16px"})
        self.datum_text = LiveText(css_classes=["bft-info-datum"], margin=(0, 10), sizing_mode="stretch_width",
                                   styles={"font-size": "16px"})
        self.param.watch(user_action(self._prior_changed), ["correlation", "factorial"])

    def step(self, count: int = 1) -> None:
        """Add ``count`` data, each at x_a or x_b (probability 1/2) with y = h(x) + sigma * noise from the true h, and
        update the posterior and M by one Bayes step each."""
        for _ in range(count):
            if len(self.x) >= MAX_STEPS:
                break
            xi = int(self.rng.random() >= 0.5)
            yi = float(sf.FIG3_TRUE[xi] + sf.FIG3_SIGMA * self.rng.standard_normal())
            self.x.append(xi)
            self.y.append(yi)
            post = sf.sequential_posteriors(self.posteriors[-1], np.array([xi]), np.array([yi]))[-1]
            self.posteriors = np.vstack([self.posteriors, post])
            self.M.append(sf.mutual_information(post))
        self._draw_information()

    def reset(self) -> None:
        """No data again, and the generator from its seed: the same data come again with the same steps."""
        self.x, self.y = [], []
        self.rng = np.random.default_rng(self.seed)
        self._prior_changed()

    def _prior_changed(self, *_):
        """A new prior: the data so far updated again from it (the posterior and M at every n)."""
        self.posteriors = sf.sequential_posteriors(self.prior, np.array(self.x, int), np.array(self.y))
        self.M = [sf.mutual_information(w) for w in self.posteriors]
        self._draw_information()

    def _draw_information(self):
        post, n = self.posteriors[-1], len(self.M)
        self.bar_source.data = dict(self.bar_source.data, posterior=post.tolist(),
                                    prior=self.posteriors[0].tolist())
        self.m_source.data = dict(n=list(range(n)), M=list(self.M))
        self.m_figure.x_range.update(start=-0.3, end=max(10, n - 1) + 0.3)
        self.m_figure.y_range.update(start=-0.005, end=max(0.05, 1.1 * max(self.M)))
        self.step_button.disabled = len(self.x) >= MAX_STEPS
        m = self.M[-1]
        self.mi_text.set(f"n = {n - 1}: M = {m:.2g} nats, p(+,+) = {post[0]:.3f}")
        self.datum_text.set(f"last datum: y = {self.y[-1]:+.2f} at x_{'ab'[self.x[-1]]}" if self.x else
                            "no data yet: press Step")
        self.correlation_widget.disabled = self.factorial

    # --------------------------------------------------------------------------------------- Figs 6, 9, 10
    def _build_joint(self):
        s = np.geomspace(*sf.LOG_RANGE, sf.LOG_NODES)
        self.s_grid = s
        t = np.log10(s)
        dt = (t[-1] - t[0]) / (len(t) - 1)
        fig = make_figure("log p(h, β) − max", "h", "log10 β", height=330,
                          y_range=Range1d(t[0] - dt / 2, t[-1] + dt / 2), x_range=Range1d(-1.5, 1.5))
        fig.name = "bft-info-joint"
        self.image_source = ColumnDataSource(dict(image=[np.zeros((2, 2))], x=[0.0], y=[0.0], dw=[1.0], dh=[1.0]),
                                             name="bft-info-image")
        mapper = LinearColorMapper(palette=PALETTE, low=LOG_FLOOR, high=0.0)
        fig.image("image", x="x", y="y", dw="dw", dh="dh", source=self.image_source, color_mapper=mapper)
        fig.add_layout(ColorBar(color_mapper=mapper, width=12, major_label_text_font_size="14px"), "right")
        self.max_source = ColumnDataSource(dict(h=[], t=[]), name="bft-info-maximum")
        self.edge_source = ColumnDataSource(dict(h=[], t=[], angle=[]), name="bft-info-edge")
        fig.scatter("h", "t", source=self.max_source, marker="star", size=26, fill_color="#ffffff",
                    line_color="#000000", line_width=2)
        fig.scatter("h", "t", source=self.edge_source, marker="triangle", angle="angle", size=24,
                    fill_color="#ffffff", line_color="#000000", line_width=2)
        fig.xgrid.grid_line_color = fig.ygrid.grid_line_color = None
        self.joint_figure = fig
        self.max_text = LiveText(css_classes=["bft-info-max-text"], margin=(0, 10), sizing_mode="stretch_width",
                                 styles={"font-size": "16px", "font-weight": "600"})
        self.figure_widget = pn.widgets.Select.from_param(self.param.figure, options=FIGURES, width=330, name="",
                                                          css_classes=["bft-info-figure"])
        self.hyperprior_widget = pn.widgets.RadioButtonGroup.from_param(
            self.param.hyperprior, options=HYPERPRIORS, width=230, name="", css_classes=["bft-info-hyperprior"],
            color="primary", variant="outline")
        self.y_d_widget = pn.widgets.FloatSlider.from_param(self.param.y_d, width=200, css_classes=["bft-info-yd"])
        self.param.watch(user_action(self._joint_changed), ["figure", "hyperprior", "y_d"])

    def _joint_changed(self, *_):
        h = np.linspace(*H_RANGE[self.figure], sf.H_NODES)
        s, symbol = self.s_grid, SYMBOL[self.figure]
        log_p = joint_log_p(self.figure, self.hyperprior, self.y_d)
        z = log_p(*np.meshgrid(h, s, indexing="ij"))
        self.maxima = refined_maxima(log_p, h, s)
        t = np.log10(s)
        dh, dt = (h[-1] - h[0]) / (len(h) - 1), (t[-1] - t[0]) / (len(t) - 1)
        # Bokeh's image is indexed [row = y, column = x]: the transpose of z[h, s]
        self.image_source.data = dict(image=[np.maximum(z - z.max(), LOG_FLOOR).T], x=[h[0] - dh / 2],
                                      y=[t[0] - dt / 2], dw=[h[-1] - h[0] + dh], dh=[t[-1] - t[0] + dt])
        inner = [m for m in self.maxima if m["edge"] is None]
        edges = [m for m in self.maxima if m["edge"] is not None]
        self.max_source.data = dict(h=[m["h"] for m in inner], t=[math.log10(m["s"]) for m in inner])
        self.edge_source.data = dict(h=[m["h"] for m in edges], t=[math.log10(m["s"]) for m in edges],
                                     angle=[0.0 if m["edge"] == "upper" else math.pi for m in edges])
        self.joint_figure.x_range.update(start=h[0] - dh / 2, end=h[-1] + dh / 2)
        name = "γ" if self.figure == "fig6" else "β"
        self.joint_figure.title.text = f"log p(h, {name}) − max, {self.hyperprior} p({name})"
        self.joint_figure.yaxis[0].axis_label = f"log10 {name}"
        self.max_text.set(maximum_text(self.maxima, symbol))
        self.y_d_widget.disabled = self.figure != "mixture"

    # --------------------------------------------------------------------------------------- layout
    def __panel__(self):
        mi_controls = pn.FlexBox(self.correlation_widget, self.factorial_widget,
                                 pn.Column(pn.Spacer(height=14), pn.Row(self.step_button, self.reset_button, margin=0),
                                           margin=0), flex_wrap="wrap", sizing_mode="stretch_width", margin=0)
        mi_panel = pn.Column(pn.pane.Markdown("### Mutual information (Fig 3)", margin=(0, 10)), mi_controls,
                             self.mi_text, self.datum_text,
                             pn.pane.Bokeh(self.bars_figure, sizing_mode="stretch_width"),
                             pn.pane.Bokeh(self.m_figure, sizing_mode="stretch_width"),
                             teaching(EQUATION_MI, TEXT_MI), css_classes=["bft-info-mi"],
                             styles={"flex": "1 1 420px", "min-width": "0"}, margin=0)
        joint_panel = pn.Column(pn.pane.Markdown("### Joint posteriors (Figs 6, 9, 10)", margin=(0, 10)),
                                pn.FlexBox(self.figure_widget, self.hyperprior_widget, self.y_d_widget,
                                           flex_wrap="wrap", sizing_mode="stretch_width", margin=0),
                                self.max_text, pn.pane.Bokeh(self.joint_figure, sizing_mode="stretch_width"),
                                teaching(EQUATION_JOINT, TEXT_JOINT), css_classes=["bft-info-joint"],
                                styles={"flex": "1 1 420px", "min-width": "0"}, margin=0)
        return pn.FlexBox(mi_panel, joint_panel, flex_wrap="wrap", sizing_mode="stretch_width", margin=0,
                          css_classes=["bft-info"])
