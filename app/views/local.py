"""The labels of a local prior under the regression curve (:mod:`bftcore.models.local_regression`): a strip with one
cell per edge between neighbouring x nodes, coloured by a_soft(e), the posterior probability that the edge takes the
softest alternative of a local prior mixture (eq. (588)), or the log-stiffness theta(e) of a hyperfield (relative to
the document's Gaussian prior, eqs. (454)-(457)) as a curve.  It follows every frame of the run; it is hidden for a
problem without a local prior.

On a density (:mod:`bftcore.models.local_density`) the labels live on the edges of the (x, y) grid, so they are drawn
on the heatmap itself (:func:`soft_edges`): each soft edge is a wall between its two cells, as opaque as the edge is
soft.
"""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import ColorBar, ColumnDataSource, FixedTicker, LinearColorMapper, Range1d
from bokeh.palettes import Viridis256

from bftcore.foundations.grid import Grid
from bftcore.models.local_density import lattice

from ..session import BFTSession
from .common import make_figure, replace_data

#: The strip's height in pixels: a band under the hero's curve, not a second plot.
STRIP_HEIGHT = 120
#: Shown when a hyperfield's theta is flat: the range of the strip's y axis (theta relative to the Gaussian prior).
THETA_RANGE = (-1.0, 1.0)


def strip_values(rec, local_type: str) -> np.ndarray | None:
    """What the strip shows for a record: a_soft(e) (the last alternative's responsibilities: the softest, as the
    toggle and the presets order them) or theta(e) - ln kappa_0; None for a record without labels."""
    labels = getattr(rec, "local", None)
    if labels is None or getattr(rec, "local_type", "") != local_type:
        return None  # none, or a frame of the other type on its way out
    labels = np.asarray(labels, dtype=float)
    return labels[-1] if local_type == "switch" else labels[0]


#: Edges softer than this are not drawn (a wall of alpha 0.05 is not seen, and each one is data sent per frame).
SOFT_SHOWN = 0.05
EMPTY_EDGES: dict = dict(x0=[], y0=[], x1=[], y1=[], alpha=[])


def soft_edges(rec, grid: Grid, local_prior: dict | None, lam_x: float, lam_y: float) -> dict:
    """The walls to draw on a density's heatmap for a record of a local prior: columns ``x0, y0, x1, y1, alpha``
    of one segment per edge whose softness is at least :data:`SOFT_SHOWN`.  Softness: a_soft(e), the posterior
    probability of the softest alternative (a switch), or ``1 - min(e^theta(e), 1)`` (a hyperfield: how much of the
    Gaussian prior's stiffness the edge has lost).  An x-edge between the nodes (i, j) and (i+1, j) is the vertical
    wall between their cells, a y-edge the horizontal one; the edges are the lattice's
    (:func:`bftcore.models.local_density.lattice`: its directions and cuts, in its order).  Empty for a record of
    another grid or type (a frame on its way out) or without labels."""
    local = (local_prior or {}).get("local")
    if not local:
        return EMPTY_EDGES
    values = strip_values(rec, local["type"])
    if values is None:
        return EMPTY_EDGES
    try:
        lat = lattice(grid, 1.0, lam_x, lam_y, (local_prior or {}).get("cuts", []))
    except ValueError:  # a grid the local prior cannot take: nothing is drawn (the gate says why)
        return EMPTY_EDGES
    if lat.n_edges != values.size:
        return EMPTY_EDGES
    soft = values if local["type"] == "switch" else 1.0 - np.minimum(np.exp(values), 1.0)
    keep = soft >= SOFT_SHOWN
    xs, ys = grid.x.nodes[lat.i[keep]], grid.y.nodes[lat.j[keep]]
    along_x = lat.direction[keep] == 0
    hx, hy = grid.hx, grid.hy
    # an x-edge: a wall halfway between its two x nodes, across the cell's height; a y-edge: halfway between its
    # two y nodes, across the cell's width.  Both end at the cell's upper right corner (xs + hx/2, ys + hy/2).
    x0 = np.where(along_x, xs + hx / 2, xs - hx / 2)
    y0 = np.where(along_x, ys - hy / 2, ys + hy / 2)
    x1, y1 = xs + hx / 2, ys + hy / 2
    return dict(x0=x0, y0=y0, x1=x1, y1=y1, alpha=np.clip(soft[keep], 0.0, 1.0))


class LocalStrip(pn.viewable.Viewer):
    """a_soft(e) per edge (switch) or theta(e) (hyperfield) of the run on screen, under the hero's curve."""

    session = param.ClassSelector(class_=BFTSession)
    hero = param.Parameter(None, doc="The hero's Bokeh figure: the strip shares its x range (its cells sit under "
                                     "the nodes) and, while shown, takes its height from the figure's.")

    def __init__(self, **params):
        super().__init__(**params)
        fig = make_figure("a_soft per edge: the switch field", "x", "a_soft", height=STRIP_HEIGHT,
                          x_range=self.hero.x_range if self.hero is not None else Range1d(0, 1),
                          y_range=Range1d(0, 1), tools="")
        fig.toolbar_location = None
        self.mapper = LinearColorMapper(palette=Viridis256, low=0.0, high=1.0)
        self.source = ColumnDataSource(dict(left=[], right=[], v=[]), name="bft-local-strip")
        self.theta = ColumnDataSource(dict(x=[], v=[]), name="bft-local-theta")
        fig.quad(left="left", right="right", bottom=0, top=1, fill_color={"field": "v", "transform": self.mapper},
                 line_color=None, source=self.source)
        fig.line("x", "v", source=self.theta, color="black", line_width=2.5)
        self.colorbar = ColorBar(color_mapper=self.mapper, width=12, title=None, ticker=FixedTicker(ticks=[0, 0.5, 1]))
        fig.add_layout(self.colorbar, "right")
        fig.visible = False
        self.figure = fig
        self.pane = pn.pane.Bokeh(fig, sizing_mode="stretch_width", height=STRIP_HEIGHT, visible=False, margin=0,
                                  css_classes=["bft-local-strip"])
        self._hero_styles = dict(self.hero.styles) if self.hero is not None else {}
        self.session.param.watch(self._update, ["record", "local_prior", "model"])
        self._update()

    def _show(self, visible: bool) -> None:
        """Show or hide the strip; while shown, the hero's plot is shorter by the strip's height (but at least 200
        px), so that the strip is on screen in the presenter layout, whose plot fills the window's height."""
        if self.pane.visible == visible and self.figure.visible == visible:
            return
        # the figure too: with only the pane hidden, the browser still drew the strip's title under the plot of
        # every regression without a local prior
        self.pane.visible = self.figure.visible = visible
        if self.hero is not None:
            self.hero.styles = ({**self._hero_styles, "min-height": f"max(200px, calc(var(--bft-plot-min, 260px) - "
                                                                    f"{STRIP_HEIGHT + 10}px))"}
                                if visible else self._hero_styles)

    def _update(self, *_):
        s = self.session
        local = (s.local_prior or {}).get("local") if not s.kind.y_on_grid else None
        values = strip_values(s.record, local["type"]) if local else None
        g = s.grid
        if values is None or values.size == 0:
            self._show(bool(local))
            replace_data(self.source, dict(left=[], right=[], v=[]))
            replace_data(self.theta, dict(x=[], v=[]))
            return
        self._show(True)
        cuts = np.asarray((s.local_prior or {}).get("cuts", []), dtype=float)
        left = g.x.nodes[:-1]
        if cuts.size:  # the edges that cross a cut carry no label
            crossed = np.zeros(left.size, dtype=bool)
            for c in cuts:
                crossed |= (left < c) & (c < left + g.hx)
            left = left[~crossed]
        if left.size != values.size:
            return  # a frame of another grid, on its way out
        if local["type"] == "switch":
            self.figure.title.text = "a_soft per edge: the posterior probability that the edge is soft"
            self.figure.yaxis.axis_label = "a_soft"
            self.figure.y_range.update(start=0, end=1)
            self.figure.yaxis.visible = False  # the cells fill the strip; the colour bar reads a_soft
            self.colorbar.visible = True
            replace_data(self.source, dict(left=left, right=left + g.hx, v=values))
            replace_data(self.theta, dict(x=[], v=[]))
        else:
            self.figure.title.text = "θ per edge: log-stiffness relative to the Gaussian prior"
            self.figure.yaxis.axis_label = "θ"
            lo, hi = min(THETA_RANGE[0], float(values.min())), max(THETA_RANGE[1], float(values.max()))
            pad = 0.1 * (hi - lo)
            self.figure.y_range.update(start=lo - pad, end=hi + pad)
            self.figure.yaxis.ticker = [float(v) for v in np.arange(np.floor(lo), np.ceil(hi) + 1)]
            self.figure.yaxis.visible = True
            self.colorbar.visible = False
            replace_data(self.source, dict(left=[], right=[], v=[]))
            replace_data(self.theta, dict(x=left + 0.5 * g.hx, v=values))

    def __panel__(self):
        return self.pane
