"""Shared look of the plots: sizes readable on a 1280×720 projector, one perceptually uniform palette."""
from __future__ import annotations

import panel as pn
from bokeh.palettes import Cividis256, Viridis256, Category10_10
from bokeh.plotting import figure

PALETTE = Viridis256          # heatmaps: perceptually uniform
SERIES = Category10_10        # line series: distinct hues
FONT = "13px"
PLOT_HEIGHT = 250
TOOLS = "pan,wheel_zoom,box_zoom,reset,save"


def make_figure(title: str, x_label: str, y_label: str, **kw):
    """A Bokeh figure with labelled axes, the save tool (PNG export) and projector-sized fonts."""
    kw.setdefault("tools", TOOLS)
    kw.setdefault("height", PLOT_HEIGHT)
    kw.setdefault("min_border_left", 50)
    fig = figure(title=title, x_axis_label=x_label, y_axis_label=y_label, sizing_mode="stretch_width",
                 toolbar_location="right", **kw)
    fig.title.text_font_size = "14px"
    for ax in (fig.xaxis, fig.yaxis):
        ax.axis_label_text_font_size = FONT
        ax.major_label_text_font_size = "12px"
        ax.axis_label_text_font_style = "normal"
    fig.toolbar.logo = None
    return fig


def set_changed(obj, **props):
    """Assign only the properties whose value differs: keeps per-frame updates to what really changed."""
    changed = {k: v for k, v in props.items() if getattr(obj, k) != v}
    if changed:
        obj.update(**changed)


def legend_outside(fig):
    if fig.legend:
        fig.legend.location = "top_left"
        fig.legend.label_text_font_size = "11px"
        fig.legend.background_fill_alpha = 0.6
        fig.legend.click_policy = "hide"
        fig.legend.spacing = 0
        fig.legend.padding = 4


def teaching(equation: str, text: str) -> pn.Column:
    """The short explanation beside a plot: one rendered equation and a collapsible paragraph."""
    return pn.Column(
        pn.pane.LaTeX(equation, styles={"font-size": "14px"}, margin=(0, 10)),
        pn.Card(pn.pane.Markdown(text, margin=(0, 8), styles={"font-size": "13px"}), title="What this shows",
                collapsed=True, header_background="#f3f3f3", margin=(0, 10), sizing_mode="stretch_width"),
        sizing_mode="stretch_width", margin=0)


__all__ = ["PALETTE", "SERIES", "Cividis256", "make_figure", "legend_outside", "set_changed", "teaching"]
