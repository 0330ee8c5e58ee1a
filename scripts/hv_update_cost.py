"""What one frame of the live heatmap costs the server, declared with HoloViews or with raw Bokeh (issue 26).

The dashboard's canvas receives a new field at every frame of a run.  Raw Bokeh replaces the image column of one
ColumnDataSource; HoloViews (the declared way: a DynamicMap of an Image over a Pipe stream) re-renders the element
and updates its plot.  This script times the server side of one such frame for both, on the paper's grid (10 x 15)
and on 64 x 64 and 128 x 128, as the median of several frames: the part of the click-to-heatmap latency that the
declaration decides (the browser's part is the same image in both).

    python scripts/hv_update_cost.py [--frames 200]
"""
from __future__ import annotations

import argparse
import statistics
import time

import holoviews as hv
import numpy as np
from bokeh.document import Document
from bokeh.models import ColumnDataSource
from bokeh.plotting import figure
from holoviews.streams import Pipe


def raw_bokeh(field: np.ndarray, frames: int) -> list[float]:
    doc = Document()
    fig = figure(width=600, height=450)
    source = ColumnDataSource(dict(image=[field], x=[0], y=[0], dw=[1], dh=[1]))
    fig.image(image="image", x="x", y="y", dw="dw", dh="dh", source=source, palette="Viridis256")
    doc.add_root(fig)
    rng = np.random.default_rng(0)
    times = []
    for _ in range(frames):
        new = field + 1e-3 * rng.standard_normal(field.shape)
        t0 = time.perf_counter()
        source.data = dict(source.data, image=[new])
        times.append(time.perf_counter() - t0)
    return times


def holoviews(field: np.ndarray, frames: int) -> list[float]:
    renderer = hv.renderer("bokeh")
    pipe = Pipe(data=field)
    dmap = hv.DynamicMap(lambda data: hv.Image(data, bounds=(0, 0, 1, 1)).opts(cmap="viridis", width=600,
                                                                                  height=450), streams=[pipe])
    doc = Document()
    plot = renderer.get_plot(dmap, doc=doc)
    doc.add_root(plot.state)
    rng = np.random.default_rng(0)
    times = []
    for _ in range(frames):
        new = field + 1e-3 * rng.standard_normal(field.shape)
        t0 = time.perf_counter()
        pipe.send(new)
        times.append(time.perf_counter() - t0)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=200)
    args = parser.parse_args()
    print(f"server time of one heatmap frame, median of {args.frames} frames (min-max), ms")
    print(f"{'grid':<10}{'raw Bokeh':>22}{'HoloViews DynamicMap':>26}{'ratio':>8}")
    for nx, ny in ((10, 15), (64, 64), (128, 128)):
        field = np.random.default_rng(1).random((ny, nx))
        rows = []
        for fn in (raw_bokeh, holoviews):
            t = fn(field, args.frames)[5:]  # the first frames warm caches
            rows.append((statistics.median(t) * 1e3, min(t) * 1e3, max(t) * 1e3))
        cells = [f"{m:.2f} ({lo:.2f}-{hi:.2f})" for m, lo, hi in rows]
        print(f"{f'{nx}x{ny}':<10}{cells[0]:>22}{cells[1]:>26}{rows[1][0] / rows[0][0]:>8.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
