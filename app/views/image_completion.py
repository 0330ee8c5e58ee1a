"""The "Image completion" tab: [001] Sect. 5, Fig 4, live, computed by :mod:`bftcore.models.image_completion`
(numpy/scipy, no session, no background work).

Four images (the observed pixels, the completion h, the deformed templates t_1(theta_1) and t_2(theta_2)), bars for
the mixing coefficients a_1, a_2, a slider for log10(beta / beta_c) and a deformations on/off toggle.  Every move
continues from the previous state (h, theta and a warm-started; the alternation stops at a tolerance of 1e-3 in a
and in theta), so sliding beta up across beta_c the ghost of both faces snaps to the deformed smiling face, and
sliding down again it returns.  The time of each update is shown and kept in :attr:`ImageCompletionView.last_update_s`.
The 90 x 120 problem and its cold start (about 5 s) are computed once per server process and shared by sessions.
"""
from __future__ import annotations

import time
from functools import lru_cache

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource, FactorRange, LinearColorMapper, Range1d

from bftcore.models import image_completion as ic

from ..transport import user_action
from .common import SERIES, LiveText, make_figure, teaching

#: The starting inverse temperature, 0.1 beta_c: the ghost of both faces.
START_LOG_BETA = -1.0
#: The tolerance of a live update (a and theta in px, degrees, hundredths of scale).
LIVE_TOL = 1e-3
GREYS = [f"#{v:02x}{v:02x}{v:02x}" for v in range(256)]

EQUATION = (r"$\begin{gathered}(K_T + K_0)\,h = K_T t_T + K_0 \textstyle\sum_j a_j\, t_j(\theta_j),\quad "
            r"a_j = \frac{e^{-\beta E_{0,j}}}{\sum_k e^{-\beta E_{0,k}}} \\ "
            r"E_{0,j} = \tfrac12 \big(h - t_j(\theta_j),\, K_0\,(h - t_j(\theta_j))\big)\end{gathered}$")
TEXT = """An image known at 1000 random pixels (noise σ = 0.05) is completed with a prior that expects one of two
faces, smiling or frowning, each free to move, scale and turn (θ_j: shift x, shift y, scale, angle). K_0 is the
negative Laplacian: h follows the data and, between them, the chosen template's shape. At high temperature (small β)
both templates count equally, a_1 ≈ a_2 ≈ ½, and h is a ghost of both faces. Slide β above β_c (the bifurcation of
the two-component mean-field equation, 001 eq. 45) and the completion becomes the deformed smiling face (a_1 → 1).
**Try**: switch the deformations off: the undeformed smile fits the shifted, turned original worse."""


@lru_cache(maxsize=2)
def _problem(deform: bool):
    """(model, original, cold state at 0.1 beta_c), once per server process and deformation switch."""
    templates, original, data = ic.synthetic_problem(ic.TEST_SHAPE)
    model = ic.ImageCompletion(templates, data, deform=deform)
    return model, original, model.complete(10 ** START_LOG_BETA * model.beta_c)


class ImageCompletionView(pn.viewable.Viewer):
    """The tab: ``log_beta`` (log10 of beta / beta_c) and ``deform`` drive :meth:`update`; :attr:`state` is the
    current :class:`~bftcore.models.image_completion.CompletionState`."""

    log_beta = param.Number(START_LOG_BETA, bounds=(-1.5, 1.0), step=0.05, label="log10 β / β_c")
    deform = param.Boolean(True, label="deformations")

    def __init__(self, **params):
        super().__init__(**params)
        self.model, self.original, self.state = _problem(self.deform)
        self.last_update_s = 0.0
        self._build()
        self._draw()
        self.param.watch(user_action(self.update), ["log_beta", "deform"])

    def _image_figure(self, title: str, name: str):
        rows, cols = self.model.shape
        # 2 screen px per image px: 180 x 240, four images and the bars in one row of a 1280 px presenter window
        fig = make_figure(title, "", "", height=2 * rows + 40, width=2 * cols + 10, x_range=Range1d(0, cols),
                          y_range=Range1d(rows, 0), tools="save", min_border_left=5,
                          min_border_right=5)
        fig.name = name
        fig.sizing_mode = "fixed"
        fig.toolbar_location = None
        fig.axis.visible = False
        fig.grid.grid_line_color = None
        source = ColumnDataSource(dict(image=[np.zeros((rows, cols))]), name=name + "-image")
        # y runs down the screen: the image's row 0 at y = 0, the top
        fig.image("image", x=0, y=0, dw=cols, dh=rows, source=source,
                  color_mapper=LinearColorMapper(palette=GREYS, low=0.0, high=1.0))
        return fig, source

    def _build(self):
        self.figures = {}
        self.sources = {}
        for key, title in (("data", "data: 1000 pixels"), ("h", "completion h"), ("t1", "t1(θ1): smile"),
                           ("t2", "t2(θ2): frown")):
            self.figures[key], self.sources[key] = self._image_figure(title, f"bft-ic-{key}")
        bars = make_figure("mixing a_j", "component", "a_j", x_range=FactorRange("a1 smile", "a2 frown"),
                           y_range=Range1d(0, 1.02), height=280, width=200, tools="save")
        bars.name = "bft-ic-bars"
        bars.sizing_mode = "fixed"
        bars.toolbar_location = None
        self.bar_source = ColumnDataSource(dict(j=["a1 smile", "a2 frown"], a=[0.5, 0.5],
                                                colour=[SERIES[0], SERIES[3]]), name="bft-ic-a")
        bars.vbar("j", top="a", width=0.6, source=self.bar_source, fill_color="colour", line_color="colour")
        bars.xgrid.grid_line_color = None
        self.bars = bars
        self.beta_widget = pn.widgets.FloatSlider.from_param(self.param.log_beta, width=320, throttled=True,
                                                             css_classes=["bft-ic-beta"])
        self.deform_widget = pn.widgets.Toggle.from_param(self.param.deform, width=140, margin=(22, 5, 0, 5),
                                                          css_classes=["bft-ic-deform"])
        self.status = LiveText(css_classes=["bft-ic-status"], margin=(0, 10), sizing_mode="stretch_width",
                               styles={"font-size": "18px", "font-weight": "600"})
        self.detail = LiveText(css_classes=["bft-ic-detail"], margin=(0, 10), sizing_mode="stretch_width",
                               styles={"font-size": "16px"})

    def update(self, *events) -> None:
        """Continue from the current state at the new beta (or with the deformations switched): warm-started
        alternation of the h and theta steps, then redraw.  A switch of ``deform`` starts from the current h with
        theta at the identity when switching off, from the current theta when switching on."""
        start = time.perf_counter()
        if any(e.name == "deform" for e in events):
            model, _, _ = _problem(self.deform)
            theta = self.state.theta if self.deform else np.tile(ic.THETA_IDENTITY, (2, 1))
            init = ic.CompletionState(self.state.h, self.state.a, theta, self.state.beta)
            self.model = model
        else:
            init = self.state
        self.state = self.model.complete(10 ** self.log_beta * self.model.beta_c, init=init, tol=LIVE_TOL)
        self.last_update_s = time.perf_counter() - start
        self._draw()

    def _draw(self):
        s, m = self.state, self.model
        data = np.where(m.data.mask(), self.original, 0.0)
        t1, t2 = (t.reshape(m.shape) for t in m.deformed(s.theta))
        for key, img in (("data", data), ("h", np.clip(s.h, 0, 1)), ("t1", t1), ("t2", t2)):
            self.sources[key].data = dict(image=[np.asarray(img, dtype=float)])
        self.bar_source.data = dict(self.bar_source.data, a=[float(s.a[0]), float(s.a[1])])
        rmse = float(np.sqrt(np.mean((s.h - self.original) ** 2)))
        self.status.set(f"β = {10 ** self.log_beta:.3g} β_c: a1 = {s.a[0]:.3f}, a2 = {s.a[1]:.3f}, "
                        f"RMSE {rmse:.3f}")
        th = s.theta[0]
        self.detail.set(f"θ1: shift ({th[0]:+.2f}, {th[1]:+.2f}) px, scale {th[2]:.3f}, {th[3]:+.2f}°"
                        f" (true +4, −3, 1.05, +6°); update {1000 * self.last_update_s:.0f} ms, "
                        f"{s.iterations} steps")

    def __panel__(self):
        images = pn.FlexBox(*(pn.pane.Bokeh(self.figures[k]) for k in ("data", "h", "t1", "t2")),
                            pn.pane.Bokeh(self.bars), flex_wrap="wrap", sizing_mode="stretch_width", margin=0)
        controls = pn.FlexBox(self.beta_widget, self.deform_widget, flex_wrap="wrap", sizing_mode="stretch_width",
                              margin=0)
        return pn.Column(pn.pane.Markdown("### Image completion with deformable templates (001 Fig 4)",
                                          margin=(0, 10)), controls, self.status, self.detail, images,
                         teaching(EQUATION, TEXT), sizing_mode="stretch_width", margin=0,
                         css_classes=["bft-ic"])
