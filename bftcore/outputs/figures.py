"""Figures of results: one HoloViews declaration per figure, drawn to PNG by HoloViews' matplotlib backend.

Each figure is declared once, as a HoloViews object built from a result document (:mod:`bftcore.outputs.documents` reads
and checks it), and rendered at any size: the CLI's ``--png`` at :data:`FIGURE_SIZE`, the dashboard's *PNG (1920×1080)*
at :data:`PROJECTOR_SIZE` from the same declaration (:func:`fit_png` of the session's configuration and fit).

* :func:`fit_figure`, density: a heatmap of P over the grid (x across, y up, one cell per node, colour map viridis
  scaled from the smallest to the largest finite P, colour bar "P(y|x)"), the regression function h(x) as a white
  line outlined in black, h ± sd as thin white dashed lines, the data as red dots, a credible band when the
  document has ``bands``.  Regression: the exact posterior mean ± 2 sd as a shaded blue band, the mean dashed, the
  MAP h(x) solid, the data as dots, a credible band's edges as dotted lines when the document has ``bands``.
* :func:`learning_curve_figure`: test error (solid, with markers) and training error (dashed) means against n,
  each with its ± sd as a shaded band, one colour per curve (the top-level series too, in black, unless it repeats
  one of the curves); n on a log axis when it spans more than a factor 10; the best lambda per n as a black ring on
  that lambda's test curve; the replica prediction (if present) as a dotted line "replica theory (approx.)".
* :func:`bootstrap_figure`: the fit's h(x) (solid), the bootstrap mean (dashed) and the band [h_lo, h_hi]
  (shaded); density: over a heatmap of the bootstrap standard deviation P_sd (P_mean when the document has no
  P_sd), colour bar "sd of P(y|x) (bootstrap)".

* The small figures of :mod:`bftcore.studies.small_figures`, each at its own size (:data:`DRAWERS`):
  :func:`mutual_information_figure` (Fig 3: posterior and M(n) per panel), :func:`joint_posterior_figure` (Figs 6, 9,
  10: log p - max as a heatmap over h and log10 gamma or beta, maxima as stars, a maximum off the grid as a triangle
  at its edge), :func:`curves_figure` (any document of panels of named x/y curves).

Non-finite values are gaps, never drawn; values beyond 1e150 in magnitude count as non-finite (a diverged fit's
numbers would otherwise decide the axes).  The axis ranges are set from the finite values (:func:`_limits`).

:func:`render_png` returns the PNG (RGB on white) and the :class:`Axes` of its main plot, read from the rendered
matplotlib axes, so that a test can find a value's pixel; :func:`colormap` is the colour map's own table
(matplotlib's viridis), so that it can find the colour expected there.  Rendering holds a lock: HoloViews'
matplotlib backend keeps global state (rc parameters, pyplot's figure registry), and the dashboard may export
from several sessions at once.  HoloViews and matplotlib are imported on first use: ``import bftcore`` stays fast.
"""
from __future__ import annotations

import functools
import io
import math
import threading
from typing import Any, Callable, Sequence

import numpy as np

from .documents import bootstrap_arrays, data_of, fit_arrays, learning_curves

__all__ = ["fit_figure", "learning_curve_figure", "bootstrap_figure", "render_png", "fit_png",
           "learning_curve_png", "bootstrap_png", "fit_axes", "learning_curve_axes", "bootstrap_axes", "Axes",
           "colormap", "FIGURE_SIZE", "PROJECTOR_SIZE", "NAN_COLOUR", "mutual_information_figure",
           "joint_posterior_figure", "curves_figure", "DRAWERS", "small_figure_png"]

#: Width and height in pixels of the CLI's figures, and of the dashboard's export for a projector.
FIGURE_SIZE = (800, 560)
PROJECTOR_SIZE = (1920, 1080)
#: Colour of a heatmap cell with no finite value.
NAN_COLOUR = (200, 200, 200)
#: Line colours of curves (Okabe-Ito, without the yellow that vanishes on white).
PALETTE = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#56b4e9", "#e69f00", "#787878"]
_DATA = "#dc1e3c"
_GREY = "#5a5a5a"
#: Magnitudes beyond this are treated as non-finite (gaps).
_HUGE = 1e150
_LOCK = threading.Lock()
_MPL = "matplotlib"


# ============================================================================================ plotting library
@functools.lru_cache(maxsize=None)
def _hv():
    """HoloViews with its matplotlib backend loaded (once; the current backend of a running app is kept)."""
    import holoviews as hv
    import matplotlib
    matplotlib.use("Agg", force=False)  # no display: render to buffers only
    hv.renderer(_MPL)
    return hv


@functools.lru_cache(maxsize=1)
def _lut() -> np.ndarray:
    import matplotlib
    return matplotlib.colormaps["viridis"](np.linspace(0.0, 1.0, 256), bytes=True)[:, :3]


def colormap(values) -> np.ndarray:
    """viridis colours (uint8 RGB, shape ``values.shape + (3,)``) of values in [0, 1] (clipped; NaN ->
    :data:`NAN_COLOUR`), as matplotlib paints a cell of that normalised value: entry ``floor(t * 256)`` of its
    256-entry table (the last for t = 1)."""
    t = np.asarray(values, dtype=float)
    idx = np.clip(np.floor(np.clip(np.nan_to_num(t, nan=0.0), 0.0, 1.0) * 256), 0, 255).astype(int)
    out = _lut()[idx]
    out[~np.isfinite(t)] = NAN_COLOUR
    return out


class Axes:
    """Map data coordinates to pixel coordinates of a figure: ``box`` = (left, top, right, bottom) in pixels (the
    data limits sit on its edges; y grows upwards), ``xlim``/``ylim`` the data ranges, ``xlog``/``ylog`` base-10
    log scales.  Pixel (i, j) of the PNG covers [i, i+1) x [j, j+1) in these coordinates."""

    def __init__(self, box: tuple[float, float, float, float], xlim: tuple[float, float],
                 ylim: tuple[float, float], xlog: bool = False, ylog: bool = False):
        self.box, self.xlim, self.ylim, self.xlog, self.ylog = box, xlim, ylim, xlog, ylog

    @classmethod
    def of(cls, ax, height: int) -> "Axes":
        """The transform of a drawn matplotlib axes in a figure ``height`` pixels high."""
        bb = ax.get_window_extent()
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        return cls((bb.x0, height - bb.y1, bb.x1, height - bb.y0), (float(x0), float(x1)), (float(y0), float(y1)),
                   ax.get_xscale() == "log", ax.get_yscale() == "log")

    @staticmethod
    def _unit(v, lim, log) -> np.ndarray:
        v = np.asarray(v, dtype=float)
        lo, hi = lim
        if log:
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.where(v > 0, np.log10(np.where(v > 0, v, 1.0)), np.nan)
            lo, hi = math.log10(lo), math.log10(hi)
        return (v - lo) / (hi - lo)

    def to_pixel(self, x, y) -> tuple[np.ndarray, np.ndarray]:
        """Pixel coordinates (float) of data points; NaN where a value is not finite (or <= 0 on a log axis)."""
        left, top, right, bottom = self.box
        with np.errstate(over="ignore", invalid="ignore"):
            px = left + self._unit(x, self.xlim, self.xlog) * (right - left)
            py = bottom - self._unit(y, self.ylim, self.ylog) * (bottom - top)
        return np.where(np.isfinite(px), px, np.nan), np.where(np.isfinite(py), py, np.nan)


def _dpi(size: tuple[int, int]) -> int:
    """Dots per inch: 100 at :data:`FIGURE_SIZE`, more for a larger figure, so that text keeps its share of it."""
    return max(50, round(100 * min(size[0] / FIGURE_SIZE[0], size[1] / FIGURE_SIZE[1])))


def render_png(figure, size: tuple[int, int] = FIGURE_SIZE) -> tuple[bytes, Axes]:
    """Render a figure declaration to PNG bytes of exactly ``size`` pixels (RGB on white), and the transform of its
    main plot."""
    from PIL import Image
    hv = _hv()
    width, height = (int(v) for v in size)
    if not (100 <= width <= 8000 and 100 <= height <= 8000):
        raise ValueError(f"a figure is 100 to 8000 pixels wide and high, got {width} x {height}")
    dpi = _dpi((width, height))
    with _LOCK:
        import matplotlib.pyplot as plt
        fig = hv.render(figure.opts(fig_inches=(width / dpi, height / dpi), backend=_MPL, clone=True),
                        backend=_MPL, dpi=dpi)
        try:
            fig.set_size_inches(width / dpi, height / dpi)
            fig.set_dpi(dpi)
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=dpi, facecolor="white")
            fig.canvas.draw()
            axes = Axes.of(fig.axes[0], height)
        finally:
            plt.close(fig)
    img = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    if img.size != (width, height):  # inches x dpi rounded one pixel short: pad or crop, never scale
        canvas = Image.new("RGB", (width, height), "white")
        canvas.paste(img, (0, 0))
        img = canvas
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue(), axes


# ============================================================================================ helpers
def _clean(values) -> np.ndarray:
    """Finite values of sane magnitude; the rest NaN (gaps)."""
    a = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(a) & (np.abs(a) < _HUGE), a, np.nan)


def _limits(values: Sequence[np.ndarray], pad: float = 0.05, log: bool = False) -> tuple[float, float]:
    """A padded data range of the finite values (positive ones on a log axis); (0, 1) when there are none."""
    arrays = [_clean(v).ravel() for v in values]
    a = np.concatenate(arrays) if arrays else np.zeros(0)
    a = a[np.isfinite(a)]
    if log:
        a = a[a > 0]
        if a.size == 0:
            return 1.0, 10.0
        lo, hi = math.log10(float(a.min())), math.log10(float(a.max()))
        span = hi - lo if hi > lo else 1.0
        return 10 ** (lo - pad * span), 10 ** (hi + pad * span)
    if a.size == 0:
        return 0.0, 1.0
    lo, hi = float(a.min()), float(a.max())
    if hi <= lo:
        d = 0.5 if lo == 0 else 0.1 * abs(lo)
        return lo - d, hi + d
    return lo - pad * (hi - lo), hi + pad * (hi - lo)


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _outlined(width: float) -> Callable:
    """A plot hook (HoloViews' ``hooks`` option) that draws a line with a black outline: white on a heatmap."""
    def hook(plot, element) -> None:
        import matplotlib.patheffects as pe
        plot.handles["artist"].set_path_effects([pe.Stroke(linewidth=width + 2.5, foreground="black"), pe.Normal()])
    return hook


def _curve(hv, x, y, label: str = "", **style):
    return hv.Curve((np.asarray(x, dtype=float), _clean(y)), "x", "y", label=label).opts(backend=_MPL, **style)


def _band(hv, x, lo, hi, label: str = "", color: str = PALETTE[0], **style):
    # facecolor: HoloViews' matplotlib Area takes "color" from its colour cycle instead (HoloViews 1.23)
    return hv.Area((np.asarray(x, dtype=float), _clean(lo), _clean(hi)), "x", ["y", "y2"],
                   label=label).opts(backend=_MPL, linewidth=0, facecolor=color, show_legend=bool(label), **style)


def _points(hv, data: np.ndarray, label: str, **style):
    keep = np.all(np.isfinite(data), axis=1) if len(data) else np.zeros(0, bool)
    return hv.Points(data[keep] if len(data) else np.zeros((0, 2)), ["x", "y"], label=label).opts(backend=_MPL,
                                                                                                   **style)


def _heatmap(hv, grid, field: np.ndarray, label: str):
    """One cell per node, the colour map scaled from the smallest to the largest finite value; NaN cells grey.  A
    field whose values agree to 1e-6 of their size is drawn as constant (rounding is not structure).  Its colour
    bar is added by the overlay (:func:`_colorbar`)."""
    field = _clean(field)
    finite = field[np.isfinite(field)]
    clim = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if clim[1] - clim[0] <= 1e-6 * max(abs(clim[0]), abs(clim[1])):  # a constant field: the middle colour
        clim = (clim[0] - 0.5, clim[0] + 0.5) if clim[0] == 0 else (clim[0] - abs(clim[0]), clim[0] + abs(clim[0]))
    hx, hy = grid.hx, grid.hy
    bounds = (grid.x.min - hx / 2, grid.y.min - hy / 2, grid.x.max + hx / 2, grid.y.max + hy / 2)
    return hv.Image(np.flipud(field.T), ["x", "y"], [label], bounds=bounds).opts(
        backend=_MPL, cmap="viridis", clim=clim, interpolation="nearest",
        clipping_colors={"NaN": "#%02x%02x%02x" % NAN_COLOUR})


def _colorbar(label: str) -> Callable:
    """An overlay hook that gives the heatmap its colour bar through matplotlib's ``Figure.colorbar``, which takes
    the bar's room from the plot (HoloViews' own ``colorbar`` option placed it over the plot when the figure's size
    is set: seen with HoloViews 1.23, matplotlib 3.11)."""
    def hook(plot, element) -> None:
        ax = plot.handles["axis"]
        if ax.images:
            bar = ax.figure.colorbar(ax.images[0], ax=ax, fraction=0.05, pad=0.03)
            bar.set_label(label, fontsize=15)
            bar.ax.tick_params(labelsize=13)
    return hook


def _grid_limits(grid) -> dict[str, tuple[float, float]]:
    hx, hy = grid.hx, grid.hy
    return {"xlim": (grid.x.min - hx / 2, grid.x.max + hx / 2), "ylim": (grid.y.min - hy / 2, grid.y.max + hy / 2)}


def _one_node(a: dict, xlim: tuple[float, float], keys: Sequence[str]) -> dict:
    """A one-node x axis (a 1-D density, the 0-dimensional regression): its curves are constants, drawn as
    horizontal lines across the plot."""
    if len(a["x"]) != 1:
        return a
    a = dict(a, x=np.array(xlim, dtype=float))
    for k in keys:
        if a.get(k) is not None:
            a[k] = np.repeat(a[k], 2)
    return a


def _overlay(hv, layers: list, title: str, xlabel: str, ylabel: str, legend: str, colorbar: str | None = None,
             **options):
    """The figure: its layers, labels, the legend at ``legend`` (``"top"`` above a heatmap, whose title is lifted
    over it), a colour bar labelled ``colorbar`` for a heatmap, the grid's lines on a plot without one."""
    pad = {"fig_rcparams": {"axes.titlepad": 50}, "fig_bounds": (0.1, 0.12, 0.88 if colorbar else 0.95, 0.8)} \
        if legend == "top" else {}
    hooks = ([_colorbar(colorbar)] if colorbar else []) + list(options.pop("hooks", [])) + [_plain_text]
    return hv.Overlay(layers).opts(backend=_MPL, title=title, xlabel=xlabel, ylabel=ylabel, legend_position=legend,
                                   fontscale=1.25, show_grid=colorbar is None, legend_cols=2 if legend == "top" else 1,
                                   aspect="auto", hooks=hooks, **pad, **options)


def _plain_text(plot, element) -> None:
    """Titles and axis labels are text, never mathtext: a label from a CSV header such as ``cost ($) $x$`` is
    drawn as written."""
    ax = plot.handles["axis"]
    for text in (ax.title, ax.xaxis.label, ax.yaxis.label):
        text.set_parse_math(False)


# ============================================================================================ declarations
def _density_layers(hv, grid, field, label, data, x, h, lines: list, band=None) -> list:
    layers: list[Any] = [_heatmap(hv, grid, field, label)]
    if band is not None:
        (lo, hi), text = band
        layers.append(_band(hv, x, lo, hi, text, color="white", alpha=0.3))
    for y, text, width, dash in lines:
        layers.append(_curve(hv, x, y, text, color="white", linewidth=width, linestyle=dash,
                             hooks=[_outlined(width)]))
    layers.append(_curve(hv, x, h[0], h[1], color="white", linewidth=4.5, hooks=[_outlined(4.5)]))
    layers.append(_points(hv, data, _count(len(data), "data point"), color=_DATA, edgecolors="white", s=60,
                          linewidth=1.2))
    return layers


def _names(cfg: dict, regression: bool = False) -> tuple[str, str]:
    """The axes' names: the document's ``labels`` (a CSV header, in the user's words and units), else x and y (h(x)
    for a regression's values)."""
    labels = cfg.get("labels") or {}
    return labels.get("x", "x"), labels.get("y", "h(x)" if regression else "y")


def fit_figure(cfg: dict, doc: dict):
    """The declaration of a fit document's figure (module docstring)."""
    hv = _hv()
    a = fit_arrays(cfg, doc)
    data = data_of(cfg)
    grid = a["grid"]
    prior = cfg.get("prior")
    lam = prior.get("lambda") if isinstance(prior, dict) else None
    lam = ((doc.get("evidence") or {}).get("chosen") or {}).get("lambda", lam)  # the lambda the fit used
    lam_text = f", lambda = {lam:g}" if isinstance(lam, (int, float)) else ""
    xname, yname = _names(cfg, a["model"] == "regression")
    if a["model"] == "density" and grid.x.n == 1:
        return _density_1d_figure(hv, grid, a, data, lam_text, yname)
    if a["model"] == "density":
        lim = _grid_limits(grid)
        a = _one_node(a, lim["xlim"], ("h", "sd", "lo", "hi"))
        x, h, sd = a["x"], a["h"], a["sd"]
        band = ((a["lo"], a["hi"]), "credible band of h") if "lo" in a else None
        layers = _density_layers(hv, grid, a["P"], "P(y|x)", data, x, (h, "h(x) = E[y|x]"),
                                 [(h + sd, "h(x) ± sd(y|x)", 2.0, "--"), (h - sd, "", 2.0, "--")], band)
        return _overlay(hv, layers, f"MAP density P(y|x) ({_count(len(data), 'data point')}{lam_text})", xname,
                        yname, "top", "P(y|x)", **lim)
    xlim = (grid.x.min, grid.x.max) if grid.x.n > 1 else _limits([a["x"]])
    ys = [a["h"], a["mean"] + 2 * a["sd"], a["mean"] - 2 * a["sd"], data[:, 1]] + [a[k] for k in ("lo", "hi")
                                                                                     if k in a]
    a = _one_node(a, xlim, ("h", "sd", "mean", "lo", "hi"))
    x, mean, sd = a["x"], a["mean"], a["sd"]
    blue = PALETTE[0]
    layers = [] if np.all(np.isnan(mean)) else [  # no closed form (a local prior): the MAP h alone
        _band(hv, x, mean - 2 * sd, mean + 2 * sd, "exact mean ± 2 sd", color=blue, alpha=0.25),
        _curve(hv, x, mean, "exact posterior mean", color=blue, linewidth=3.0, linestyle="--")]
    if "lo" in a:
        layers += [_curve(hv, x, a["lo"], "credible band", color=_GREY, linewidth=2.5, linestyle=":"),
                   _curve(hv, x, a["hi"], "", color=_GREY, linewidth=2.5, linestyle=":")]
    layers.append(_curve(hv, x, a["h"], "MAP h(x)", color="black", linewidth=4.0))
    layers.append(_points(hv, data, _count(len(data), "data point"), color=PALETTE[1], edgecolors="black", s=70,
                          linewidth=1.2))
    beta = cfg.get("beta")
    beta_text = f", beta = {beta:g}" if isinstance(beta, (int, float)) else ""
    return _overlay(hv, layers, f"Regression h(x) ({_count(len(data), 'data point')}{lam_text}{beta_text})", xname,
                    yname, "best", xlim=xlim, ylim=_limits(ys, 0.06))


def _density_1d_figure(hv, grid, a: dict, data: np.ndarray, lam_text: str, yname: str = "y"):
    """A 1-D density (one x node): p(y) against y, the data as a rug on the y axis, the mean as a dashed line."""
    y, P = grid.y.nodes, np.asarray(a["P"], dtype=float)[0]
    top = float(np.nanmax(P)) if np.isfinite(P).any() else 1.0
    rug = np.column_stack([data[:, 1], np.zeros(len(data))]) if len(data) else np.zeros((0, 2))
    mean = float(np.asarray(a["h"], dtype=float)[0])
    layers = [_curve(hv, y, P, "MAP density p(y)", color="black", linewidth=3.0),
              _curve(hv, [mean, mean], [0.0, 1.05 * top], "mean E[y]", color=PALETTE[0], linewidth=2.0,
                     linestyle="--"),
              _points(hv, rug, _count(len(data), "data point"), color=PALETTE[1], marker="|", s=300, linewidth=2.0)]
    return _overlay(hv, layers, f"MAP density p(y) ({_count(len(data), 'data point')}{lam_text})", yname,
                    "p(y)" if yname == "y" else f"p(y), y = {yname}", "best", xlim=(grid.y.min, grid.y.max),
                    ylim=(0.0, 1.1 * top))


def _lc_series(lc: dict) -> list[dict]:
    """The curves drawn: every entry of ``curves``, and the top-level series unless it repeats one of them."""
    series = [dict(c) for c in lc["curves"]]
    main = lc["main"]

    def same(c):
        return (len(c["n"]) == len(main["n"]) and np.array_equal(c["n"], main["n"]) and
                np.allclose(c["test"][0], main["test"][0], equal_nan=True) and
                np.allclose(c["train"][0], main["train"][0], equal_nan=True))
    has_values = np.isfinite(main["test"][0]).any() or np.isfinite(main["train"][0]).any()
    if has_values and not any(same(c) for c in series):
        series.insert(0, {**main, "label": "all" if series else "fit", "colour": "black"})
    k = 0
    for c in series:
        if "colour" not in c:
            c["colour"] = PALETTE[k % len(PALETTE)]
            k += 1
    return series


def learning_curve_figure(doc: dict):
    """The declaration of a learning-curve document's figure (module docstring)."""
    hv = _hv()
    lc = learning_curves(doc)
    series = _lc_series(lc)
    ns, ys = [lc["n"]], []
    for c in series:
        ns.append(c["n"])
        for mean, sd in (c["train"], c["test"]):
            with np.errstate(over="ignore", invalid="ignore"):
                finite_sd = np.where(np.isfinite(sd), sd, 0.0)
                ys += [mean, mean + finite_sd, mean - finite_sd]
    if lc["replica"] is not None:
        ns.append(lc["replica"]["n"])
        ys.append(lc["replica"]["test"])
    nv = _clean(np.concatenate(ns))
    nv = nv[np.isfinite(nv)]
    xlog = bool(nv.size and nv.min() > 0 and nv.max() > 10 * nv.min())
    layers: list[Any] = []
    for c in series:  # bands first, so that no band hides a line
        for (mean, sd), alpha in ((c["test"], 0.22), (c["train"], 0.12)):
            with np.errstate(over="ignore", invalid="ignore"):
                layers.append(_band(hv, c["n"], mean - sd, mean + sd, color=c["colour"], alpha=alpha))
    for c in series:
        layers.append(_curve(hv, c["n"], c["train"][0], color=c["colour"], linewidth=3.0, linestyle="--"))
        layers.append(_curve(hv, c["n"], c["test"][0], c["label"], color=c["colour"], linewidth=4.0, marker="o",
                             ms=8))
    if lc["replica"] is not None:
        rep = lc["replica"]
        layers.append(_curve(hv, rep["n"], rep["test"], "replica theory (approx.)", color="black", linewidth=3.5,
                             linestyle=":"))
    rings = []
    if lc["best"] is not None:
        for nk, lam in zip(lc["n"], lc["best"]):
            if not np.isfinite(lam):
                continue
            for c in series:
                if c["lambda"] is None or not math.isclose(float(c["lambda"]), float(lam), rel_tol=1e-9):
                    continue
                hit = np.flatnonzero(c["n"] == nk)
                if hit.size and np.isfinite(_clean(c["test"][0][hit[0]])):
                    rings.append((nk, c["test"][0][hit[0]]))
    if rings:
        layers.append(hv.Points(rings, ["x", "y"], label="best lambda at n").opts(
            backend=_MPL, marker="o", s=240, facecolors="none", edgecolors="black", linewidth=2.5))
    empty = not any(np.isfinite(_clean(v)).any() for v in ys)
    xlim = _limits([nv], 0.04, xlog)
    ylim = _limits(ys, 0.06)
    if empty:
        layers.append(hv.Text(math.sqrt(xlim[0] * xlim[1]) if xlog else sum(xlim) / 2, sum(ylim) / 2,
                              "no finite error values to draw").opts(backend=_MPL, color=_GREY))
    what = ", ".join(str(v) for v in (doc.get("model"), doc.get("mode")) if isinstance(v, str))
    ticks: dict[str, Any] = {}
    if xlog:  # the sizes themselves as ticks, in plain numbers (at most 8 of them), and no labels between them
        sizes = np.unique(nv[nv > 0])
        ticks = {"xticks": [float(v) for v in sizes[np.linspace(0, len(sizes) - 1, min(8, len(sizes))).round()
                                                    .astype(int)]], "hooks": [_plain_log_ticks]}
    return _overlay(hv, layers, "Learning curve" + (f" ({what})" if what else "") + ": test solid, train dashed",
                    "n (number of data)" + (", log scale" if xlog else ""), "error", "top", logx=xlog, xlim=xlim,
                    ylim=ylim, **ticks)


def _plain_log_ticks(plot, element) -> None:
    """Ticks of a log axis as plain numbers (5, 12, 60 rather than 1.2 x 10^1), none between them."""
    from matplotlib.ticker import FormatStrFormatter, NullFormatter
    axis = plot.handles["axis"].xaxis
    axis.set_major_formatter(FormatStrFormatter("%g"))
    axis.set_minor_formatter(NullFormatter())


def bootstrap_figure(cfg: dict, doc: dict):
    """The declaration of a bootstrap document's figure (module docstring)."""
    hv = _hv()
    a = bootstrap_arrays(cfg, doc)
    data = data_of(cfg)
    grid = a["grid"]
    level = f"{a['level'] * 100:g}% band" if a["level"] is not None and 0 < a["level"] < 1 else "band"
    title = f"Bootstrap of h(x) ({_count(len(data), 'data point')})"
    if a["model"] == "density":
        field, label = (a["P_sd"], "sd of P(y|x) (bootstrap)") if a["P_sd"] is not None else \
            (a["P_mean"], "mean of P(y|x) (bootstrap)")
        if field is not None:
            title = f"Bootstrap of h(x) over the {label.split(' (')[0]} ({_count(len(data), 'data point')})"
        else:
            field = np.full(grid.shape, np.nan)
        lim = _grid_limits(grid)
        a = _one_node(a, lim["xlim"], ("h", "h_mean", "h_lo", "h_hi"))
        x = a["x"]
        layers = _density_layers(hv, grid, field, label, data, x, (a["h"], "h(x) of the fit"),
                                 [(a["h_mean"], "bootstrap mean", 2.5, "--"), (a["h_lo"], f"bootstrap {level}", 1.5,
                                                                                "-"), (a["h_hi"], "", 1.5, "-")],
                                 ((a["h_lo"], a["h_hi"]), ""))
        xname, yname = _names(cfg)
        return _overlay(hv, layers, title, xname, yname, "top", label, **lim)
    xlim = (grid.x.min, grid.x.max) if grid.x.n > 1 else _limits([a["x"]])
    ylim = _limits([a["h"], a["h_mean"], a["h_lo"], a["h_hi"], data[:, 1]], 0.06)
    a = _one_node(a, xlim, ("h", "h_mean", "h_lo", "h_hi"))
    x, blue = a["x"], PALETTE[0]
    layers = [_band(hv, x, a["h_lo"], a["h_hi"], f"bootstrap {level}", color=blue, alpha=0.25),
              _curve(hv, x, a["h_mean"], "bootstrap mean", color=blue, linewidth=3.0, linestyle="--"),
              _curve(hv, x, a["h"], "h(x), fit to all data", color="black", linewidth=4.0),
              _points(hv, data, _count(len(data), "data point"), color=PALETTE[1], edgecolors="black", s=70,
                      linewidth=1.2)]
    return _overlay(hv, layers, title, *_names(cfg, True), "best", xlim=xlim, ylim=ylim)


# ============================================================================================ PNG and axes
def _quiet(f):
    """Arithmetic on huge or missing values gives inf/NaN, which become gaps: no warnings about it."""
    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return f(*args, **kwargs)
    return wrapped


@_quiet
def fit_png(cfg: dict, doc: dict, size: tuple[int, int] = FIGURE_SIZE) -> bytes:
    """The figure of a fit document as PNG bytes (RGB, ``size``)."""
    return render_png(fit_figure(cfg, doc), size)[0]


@_quiet
def learning_curve_png(doc: dict, size: tuple[int, int] = FIGURE_SIZE) -> bytes:
    """The figure of a learning-curve document as PNG bytes (RGB, ``size``)."""
    return render_png(learning_curve_figure(doc), size)[0]


@_quiet
def bootstrap_png(cfg: dict, doc: dict, size: tuple[int, int] = FIGURE_SIZE) -> bytes:
    """The figure of a bootstrap document as PNG bytes (RGB, ``size``)."""
    return render_png(bootstrap_figure(cfg, doc), size)[0]


@_quiet
def fit_axes(cfg: dict, doc: dict, size: tuple[int, int] = FIGURE_SIZE) -> Axes:
    """The axis transform of :func:`fit_png` (density: grid cells centred on the nodes fill the plot)."""
    return render_png(fit_figure(cfg, doc), size)[1]


@_quiet
def learning_curve_axes(doc: dict, size: tuple[int, int] = FIGURE_SIZE) -> Axes:
    """The axis transform of :func:`learning_curve_png` (n on a log axis when it spans more than a factor 10)."""
    return render_png(learning_curve_figure(doc), size)[1]


@_quiet
def bootstrap_axes(cfg: dict, doc: dict, size: tuple[int, int] = FIGURE_SIZE) -> Axes:
    """The axis transform of :func:`bootstrap_png`."""
    return render_png(bootstrap_figure(cfg, doc), size)[1]


# ============================================================================================ the presenter screen
#: Where the parts of :func:`presenter_png` go, as fractions of its size: the header (title and alarms), the fit
#: (left) and the traces (right) below it.
PRESENTER_HEADER = 0.12
PRESENTER_SPLIT = 0.6


def _header_figure(hv, title: str, lines: Sequence[str]):
    """A strip of text: the title, then one line per alarm (dark red), on blank axes."""
    n = 1 + len(lines)
    texts = [hv.Text(0.0, 1.0 - 0.5 / n, str(title), halign="left", valign="center", fontsize=44)
             .opts(backend=_MPL, color="black")]
    for k, line in enumerate(lines):
        texts.append(hv.Text(0.0, 1.0 - (k + 1.5) / n, str(line), halign="left", valign="center", fontsize=32)
                     .opts(backend=_MPL, color="#8b0000"))
    return hv.Overlay(texts).opts(backend=_MPL, xaxis=None, yaxis=None, xlim=(0, 1), ylim=(0, 1), aspect="auto",
                                  show_frame=False, fig_bounds=(0.01, 0.0, 0.99, 1.0))


def traces_figure(traces: dict):
    """The traces of a run and, when given, the lambda curve, one above the other: ``traces`` has ``iteration``,
    ``energy``, ``train_error``, ``test_error`` (lists, None where unknown) and optionally ``scan`` (the lambda
    scan of :func:`bftcore.studies.diagnosis.lambda_scan`: ``lambda``, ``train``, ``held_out``, ``current``)."""
    hv = _hv()
    it = np.asarray(traces.get("iteration", []), dtype=float)

    def series(key):
        return np.array([np.nan if v is None else float(v) for v in traces.get(key, [])], dtype=float)

    opts = dict(backend=_MPL, aspect="auto", show_grid=True, fontscale=1.2, legend_position="top_right")
    plots = [hv.Overlay([_curve(hv, it, series("energy"), "energy E", color=PALETTE[0], linewidth=2.5)])
             .opts(title="energy", xlabel="iteration", ylabel="E", **opts)]
    errors = [_curve(hv, it, series("train_error"), "training error", color=PALETTE[1], linewidth=2.5)]
    if np.any(np.isfinite(series("test_error"))):
        errors.append(_curve(hv, it, series("test_error"), "test error", color=PALETTE[2], linewidth=2.5))
    plots.append(hv.Overlay(errors).opts(title="errors", xlabel="iteration", ylabel="error", **opts))
    scan = traces.get("scan")
    if scan:
        lam = np.asarray(scan["lambda"], dtype=float)
        layers = [_curve(hv, lam, scan["train"], "training", color=PALETTE[1], linewidth=2.5),
                  _curve(hv, lam, scan["held_out"], "held-out", color=PALETTE[2], linewidth=2.5),
                  hv.VLine(float(scan["current"])).opts(backend=_MPL, color="black", linestyle="--")]
        plots.append(hv.Overlay(layers).opts(title="error against lambda (dashed: now)", xlabel="lambda",
                                             ylabel="error", logx=True, **opts))
    return hv.Layout(plots).cols(1).opts(backend=_MPL, sublabel_format="", vspace=0.45)


@_quiet
def presenter_png(cfg: dict, doc: dict, traces: dict, title: str, alarms: Sequence[str] = (),
                  size: tuple[int, int] = PROJECTOR_SIZE) -> bytes:
    """The whole presenter screen as one PNG of exactly ``size``: the title and the alarms across the top, the fit's
    figure (:func:`fit_figure`) on the left, the traces and the lambda curve (:func:`traces_figure`) on the
    right.  Each part is drawn by :func:`render_png` at its own size and placed, never scaled."""
    from PIL import Image
    hv = _hv()
    width, height = (int(v) for v in size)
    head = max(100, round(height * PRESENTER_HEADER))
    left = round(width * PRESENTER_SPLIT)
    parts = [(_header_figure(hv, title, list(alarms)), (width, head), (0, 0)),
             (fit_figure(cfg, doc), (left, height - head), (0, head)),
             (traces_figure(traces), (width - left, height - head), (left, head))]
    canvas = Image.new("RGB", (width, height), "white")
    for figure, part, at in parts:
        png, _ = render_png(figure, part)
        canvas.paste(Image.open(io.BytesIO(png)).convert("RGB"), at)
    out = io.BytesIO()
    canvas.save(out, format="PNG")
    return out.getvalue()


# ============================================================================================ the small figures
# Documents of bftcore.studies.small_figures (and any document of panels of named curves), drawn by the declaration
# its registry entry names: DRAWERS[name](doc) -> (declaration, size in pixels).
_LOG_FLOOR = -10.0


def _small_bounds(size: tuple[int, int]) -> tuple[float, float, float, float]:
    """Room, in fractions of a small figure, for the axis labels (left, bottom) and a two-line title (top)."""
    width, height = size
    return (90 / width, 60 / height, 1 - 90 / width, 1 - 75 / height)


def _small_panel_opts(title: str, xlabel: str, ylabel: str, **options) -> dict:
    return dict(backend=_MPL, title=title, xlabel=xlabel, ylabel=ylabel, fontscale=1.0, aspect="auto",
                hooks=[_plain_text] + list(options.pop("hooks", [])), **options)


def mutual_information_figure(doc: dict):
    """Fig 3: one row per panel of the document: the posterior p(h_l | data) of each state (h_l(x_a), h_l(x_b))
    against n (the true state's thick), and the mutual information M(n), as the paper draws them (linear axes)."""
    hv = _hv()
    states, true_h = doc["states"], [float(v) for v in doc.get("true_h", [])]
    plots = []
    # one M axis for all panels, so that the factorial panel's rounding (1e-17) is drawn as the zero it is
    m_lim = _limits([_clean(p["M"]) for p in doc["panels"]] + [np.zeros(1)], 0.06)
    for panel in doc["panels"]:
        post = np.asarray(panel["posterior"], dtype=float)
        n = np.arange(len(post), dtype=float)
        lines = []
        for k, state in enumerate(states):
            sign = "".join("+" if v > 0 else "−" for v in state)
            true = [float(v) for v in state] == true_h
            lines.append(_curve(hv, n, post[:, k], f"({sign[0]},{sign[1]})" + (" true" if true else ""),
                                color=PALETTE[k], linewidth=4.0 if true else 1.8))
        plots.append(hv.Overlay(lines).opts(**_small_panel_opts(f"posterior: {panel.get('label', '')}",
                                                                "n (data)", "p(h_l | data)", ylim=(-0.02, 1.02),
                                                                legend_position="best", legend_cols=2,
                                                                show_grid=True)))
        m = _clean(panel["M"])
        plots.append(hv.Overlay([_curve(hv, n, m, "M(n)", color="black", linewidth=2.5)]).opts(
            **_small_panel_opts("mutual information M(Y_a; Y_b)", "n (data)", "M (nats)",
                                ylim=m_lim, show_legend=False, show_grid=True)))
    size = (1200, 380 * len(doc["panels"]))
    return hv.Layout(plots).cols(2).opts(backend=_MPL, sublabel_format="", vspace=0.5, hspace=0.35,
                                         fig_bounds=_small_bounds(size)), size


def _small_colorbar(plot, element) -> None:
    """The colour bar of a small figure's heatmap (the fit's :func:`_colorbar` with a smaller label)."""
    ax = plot.handles["axis"]
    if ax.images:
        bar = ax.figure.colorbar(ax.images[0], ax=ax, fraction=0.05, pad=0.03)
        bar.set_label("log p − max", fontsize=11)


def _parameter_key(panel: dict) -> str:
    return next(k for k in ("gamma", "beta") if k in panel)


def joint_posterior_figure(doc: dict):
    """Figs 6, 9, 10: per panel, log p(h, s) - max over the grid as a heatmap (clipped at -10) against h and
    log10 s (s = gamma or beta), the maxima as white stars, a maximum at the grid's edge as a triangle pointing off
    the grid; the title gives the largest maximum, or its limit when it runs off the grid."""
    hv = _hv()
    plots = []
    for panel in doc["panels"]:
        key = _parameter_key(panel)
        h, s = np.asarray(panel["h"], dtype=float), np.asarray(panel[key], dtype=float)
        z = _clean(panel["log_p"])
        z = np.maximum(z - np.nanmax(z), _LOG_FLOOR)
        t = np.log10(s)
        dh, dt = (h[-1] - h[0]) / (len(h) - 1), (t[-1] - t[0]) / (len(t) - 1)
        bounds = (h[0] - dh / 2, t[0] - dt / 2, h[-1] + dh / 2, t[-1] + dt / 2)
        layers: list[Any] = [hv.Image(np.flipud(z.T), ["h", "log10 s"], ["log p"], bounds=bounds).opts(
            backend=_MPL, cmap="viridis", clim=(_LOG_FLOOR, 0.0), interpolation="nearest")]
        inner = [(m["h"], math.log10(m[key])) for m in panel["maxima"] if not m.get("edge")]
        if inner:
            layers.append(hv.Points(inner, ["h", "log10 s"], label="maximum").opts(
                backend=_MPL, marker="*", s=500, color="white", edgecolors="black", linewidth=1.5))
        for edge, marker in (("upper", "^"), ("lower", "v")):
            off = [(m["h"], math.log10(m[key])) for m in panel["maxima"] if m.get("edge") == edge]
            if off:
                layers.append(hv.Points(off, ["h", "log10 s"], label=f"maximum beyond the {edge} edge").opts(
                    backend=_MPL, marker=marker, s=400, color="white", edgecolors="black", linewidth=1.5))
        yd = panel.get("y_D")
        title = f"{panel.get('hyperprior', '')} p({key})" + (f", y_D = {yd:g}" if isinstance(yd, (int, float)) else "")
        if panel["maxima"]:
            best, more = panel["maxima"][0], len(panel["maxima"]) - 1
            limit = {"upper": f"{key} → ∞", "lower": f"{key} → 0"}.get(best.get("edge", ""), "")
            title += (f"\nmaximum beyond the grid: {limit}" if limit else
                      f"\nmaximum h = {best['h']:.3g}, {key} = {best[key]:.3g}" + (f" (+{more} more)" if more else ""))
        plots.append(hv.Overlay(layers).opts(**_small_panel_opts(
            title, "h", f"log10 {key}", hooks=[_small_colorbar],
            xlim=(bounds[0], bounds[2]), ylim=(bounds[1], bounds[3]), show_legend=False, show_grid=False)))
    size = (1200, 520 * ((len(plots) + 1) // 2))
    return hv.Layout(plots).cols(2).opts(backend=_MPL, sublabel_format="", vspace=0.4, hspace=0.45,
                                         fig_bounds=_small_bounds(size)), size


def _named_curve(hv, c: dict, k: int):
    """One curve of :func:`curves_figure`: a line (``"style"`` absent, ``"solid"`` or ``"dashdot"``) or symbols
    (``"points"``), coloured by ``"colour"`` (an index into the palette) or by its position."""
    colour = PALETTE[int(c.get("colour", k)) % len(PALETTE)]
    # dimensions named apart from any label: HoloViews reads a style value that names a dimension (a curve labelled
    # "x") as that dimension's column
    data = (np.asarray(c["x"], dtype=float), _clean(c["y"]))
    label = str(c.get("label", ""))
    if c.get("style") == "points":
        return hv.Scatter(data, "abscissa", "ordinate", label=label).opts(backend=_MPL, color=colour, s=60,
                                                                          marker="o")
    dash = "-." if c.get("style") == "dashdot" else "-"
    return hv.Curve(data, "abscissa", "ordinate", label=label).opts(backend=_MPL, color=colour, linewidth=2.5,
                                                                    linestyle=dash)


def curves_figure(doc: dict):
    """Any document of panels of named curves: ``{"panels": [{"title", "xlabel", "ylabel", "curves": [{"label",
    "x", "y"}, ...]}, ...]}`` (``title``, ``xlabel``, ``ylabel`` optional; ``logx``, ``logy`` for log axes; a curve's
    ``style``, ``"points"`` or ``"dashdot"``, and ``colour``, see :func:`_named_curve`), one plot per panel, two a
    row."""
    hv = _hv()
    plots = []
    for panel in doc["panels"]:
        # dimensions named apart from any label: HoloViews reads a style value that names a dimension (a curve
        # labelled "x") as that dimension's column
        lines = [_named_curve(hv, c, k) for k, c in enumerate(panel["curves"])]
        plots.append(hv.Overlay(lines).opts(**_small_panel_opts(str(panel.get("title", "")),
                                                                str(panel.get("xlabel", "x")),
                                                                str(panel.get("ylabel", "y")),
                                                                legend_position="best", show_grid=True,
                                                                logx=bool(panel.get("logx")),
                                                                logy=bool(panel.get("logy")))))
    cols = min(2, max(1, len(plots)))
    rows = (len(plots) + cols - 1) // cols
    size = (600 * cols, 450 * rows)
    return hv.Layout(plots).cols(cols).opts(backend=_MPL, sublabel_format="", vspace=0.4, hspace=0.3,
                                            fig_bounds=_small_bounds(size)), size


def image_completion_figure(doc: dict):
    """[001] Fig 4: top row the data pixels (grey on black), the templates t_1, t_2; bottom row the original and
    the completions h at low and at high temperature (the document's ``_images``), all on one grey scale [0, 1]."""
    hv = _hv()
    im = doc["_images"]
    rows, cols = np.asarray(im["original"]).shape
    data = np.where(im["data_mask"], im["original"], 0.0)
    low, high = doc["temperatures"][0], doc["temperatures"][1]
    panels = [(data, f"data: {int(np.sum(im['data_mask']))} pixels"), (im["templates"][0], "template t1 (smile)"),
              (im["templates"][1], "template t2 (frown)"), (im["original"], "original"),
              (im[f"h_{low['beta_over_beta_c']:g}"], f"h at β = {low['beta_over_beta_c']:g} β_c\n"
               f"a1 = {low['a'][0]:.3f}, RMSE {low['rmse']:.3f}"),
              (im[f"h_{high['beta_over_beta_c']:g}"], f"h at β = {high['beta_over_beta_c']:g} β_c\n"
               f"a1 = {high['a'][0]:.3f}, RMSE {high['rmse']:.3f}")]
    plots = [hv.Image(np.asarray(img, dtype=float), bounds=(0, 0, cols, rows)).opts(
        backend=_MPL, cmap="gray", clim=(0.0, 1.0), title=title, xaxis=None, yaxis=None, aspect="equal",
        fontscale=1.2, hooks=[_plain_text]) for img, title in panels]
    size = (1200, 1000)
    return hv.Layout(plots).cols(3).opts(backend=_MPL, sublabel_format="", vspace=0.25, hspace=0.1,
                                         fig_bounds=(0.02, 0.02, 0.98, 0.95)), size


#: The declarations of the small figures, by the name a registry entry (bftcore.studies.small_figures) gives.
DRAWERS: dict[str, Callable] = {"mutual_information": mutual_information_figure,
                                "joint_posterior": joint_posterior_figure, "curves": curves_figure,
                                "image_completion": image_completion_figure}


@_quiet
def small_figure_png(drawer: str, doc: dict) -> bytes:
    """A small figure's document drawn by ``DRAWERS[drawer]`` as PNG bytes at the size the declaration asks."""
    figure, size = DRAWERS[drawer](doc)
    return render_png(figure, size)[0]
