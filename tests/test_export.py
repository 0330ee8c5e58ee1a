"""bftcore.outputs.result_tables, bftcore.outputs.figures, bftcore.outputs.export: CSV tables round-trip the documents'
numbers; PNG figures decode, have the stated size, and show
the heatmap, the regression line and gaps where the axis transform and the colour map say they should."""
from __future__ import annotations

import copy
import csv
import io
import math

import numpy as np
import pytest
from PIL import Image

from bftcore import api
from bftcore.models import presets, regression
from bftcore.outputs import export, figures, result_tables


# ------------------------------------------------------------------------------------------------ documents
@pytest.fixture(scope="module")
def density():
    cfg = api.default_config("density")
    cfg["data"] = presets.paper_data_50().tolist()
    cfg["truth"] = "paper"
    cfg = api.validate_config(cfg)
    return cfg, api.fit(cfg)


@pytest.fixture(scope="module")
def reg():
    cfg = api.validate_config(regression.regression_presets()["two_trends"])
    return cfg, api.fit(cfg)


def _bootstrap(cfg, replicas=6, seed=0):
    """A bootstrap document from real refits to resampled data."""
    rng = np.random.default_rng(seed)
    fit = api.fit(cfg)
    data = np.array(cfg["data"])
    hs, Ps = [], []
    for _ in range(replicas):
        c = copy.deepcopy(cfg)
        c["data"] = data[rng.integers(0, len(data), len(data))].tolist()
        d = api.fit(c)
        hs.append(d["regression"]["h"] if cfg["model"] == "density" else d["h"])
        if cfg["model"] == "density":
            Ps.append(d["P"])
    hs = np.array(hs)
    h = fit["regression"]["h"] if cfg["model"] == "density" else fit["h"]
    doc = {"model": cfg["model"], "x": api.grid_from_config(cfg).x.nodes.tolist(), "h": h,
           "h_mean": hs.mean(0).tolist(), "h_sd": hs.std(0).tolist(), "h_lo": np.quantile(hs, 0.05, 0).tolist(),
           "h_hi": np.quantile(hs, 0.95, 0).tolist(), "level": 0.9, "h_bias": None}
    if cfg["model"] == "density":
        Ps = np.array(Ps)
        doc.update(y=api.grid_from_config(cfg).y.nodes.tolist(), P_mean=Ps.mean(0).tolist(), P_sd=Ps.std(0).tolist(),
                   P_bias=(Ps.mean(0) - np.array(fit["P"])).tolist())
        doc["h_bias"] = (hs.mean(0) - np.array(h)).tolist()
    return doc


@pytest.fixture(scope="module")
def learning():
    """A learning-curve document from real fits (teacher mode: data from the paper's density), with a failed point."""
    ns, lams = [5, 12, 60], [0.3, 3.0]
    curves = []
    for lam in lams:
        stats = {"train_error": ([], []), "test_error": ([], [])}
        for k, n in enumerate(ns):
            errs: dict = {"train_error": [], "test_error": []}
            for r in range(2):
                cfg = api.default_config("density")
                cfg["truth"], cfg["prior"]["lambda"] = "paper", lam
                cfg["data"] = presets.sample_paper_data(n, seed=100 * k + r).tolist()
                d = api.fit(cfg)
                for key in errs:
                    errs[key].append(d[key])
            for key, (m, s) in stats.items():
                m.append(float(np.mean(errs[key])))
                s.append(float(np.std(errs[key])))
        curves.append({"label": f"lambda={lam:g}", "lambda": lam, "n": ns,
                       **{key: {"mean": m, "sd": s} for key, (m, s) in stats.items()}})
    curves[0]["test_error"]["mean"][1] = None  # a failed fit
    curves[0]["test_error"]["sd"][1] = None
    best = [lams[int(np.argmin([c["test_error"]["mean"][k] if c["test_error"]["mean"][k] is not None else np.inf
                                for c in curves]))] for k in range(len(ns))]
    best[2] = None
    return {"model": "density", "mode": "teacher", "n": ns, "train_error": curves[1]["train_error"],
            "test_error": curves[1]["test_error"], "curves": curves, "best_lambda": best,
            "replica": {"n": ns, "posterior_variance": [1.0 / n for n in ns],
                        "test_error": [2.2 + 1.0 / n for n in ns]}}


def _rows(text):
    rows = list(csv.reader(io.StringIO(text)))
    return rows[0], rows[1:]


def _num(cell):
    return None if cell == "" else float(cell)


def _image(png) -> np.ndarray:
    img = Image.open(io.BytesIO(png))
    img.load()
    assert img.format == "PNG" and img.mode == "RGB" and img.size == figures.FIGURE_SIZE
    return np.asarray(img)


# ------------------------------------------------------------------------------------------------ tables
def test_density_tables_round_trip(density):
    cfg, doc = density
    tables = result_tables.fit_tables(cfg, doc)
    assert set(tables) == {"P", "h"}
    grid = api.grid_from_config(cfg)
    header, rows = _rows(tables["P"])
    assert header == ["x", "y", "P", "L"] and len(rows) == grid.size
    k = 0
    for i, x in enumerate(grid.x.nodes):  # x the outer loop, y the inner
        for j, y in enumerate(grid.y.nodes):
            assert [float(v) for v in rows[k]] == [x, y, doc["P"][i][j], doc["L"][i][j]]
            k += 1
    table = np.loadtxt(io.StringIO(tables["P"]), delimiter=",", skiprows=1)
    assert np.array_equal(table[:, 2].reshape(grid.shape), np.array(doc["P"]))
    header, rows = _rows(tables["h"])
    assert header == ["x", "h", "sd"] and len(rows) == grid.x.n
    assert [float(r[1]) for r in rows] == doc["regression"]["h"]
    assert [float(r[2]) for r in rows] == doc["regression"]["sd"]


def test_regression_table_and_bands(reg):
    cfg, doc = reg
    tables = result_tables.fit_tables(cfg, doc)
    assert set(tables) == {"h"}
    header, rows = _rows(tables["h"])
    assert header == ["x", "h", "mean", "sd"] and len(rows) == len(doc["x"])
    assert [float(r[0]) for r in rows] == doc["x"]
    assert [float(r[1]) for r in rows] == doc["h"]
    assert [float(r[2]) for r in rows] == doc["exact"]["mean"]
    assert [float(r[3]) for r in rows] == [math.sqrt(v) for v in doc["exact"]["var"]]
    banded = dict(doc, bands={"x": doc["x"], "lo": [v - 1 for v in doc["h"]], "hi": [v + 1 for v in doc["h"]],
                              "level": 0.9})
    header, rows = _rows(result_tables.fit_tables(cfg, banded)["h"])
    assert header == ["x", "h", "mean", "sd", "lo", "hi"]
    assert [float(r[4]) for r in rows] == banded["bands"]["lo"]
    assert [float(r[5]) for r in rows] == banded["bands"]["hi"]


def test_missing_values_are_empty_cells(density):
    cfg, doc = density
    doc = copy.deepcopy(doc)
    doc["P"][2][3], doc["L"][2][3] = None, None
    doc["regression"]["sd"][4] = None
    tables = result_tables.fit_tables(cfg, doc)
    _, rows = _rows(tables["P"])
    assert rows[2 * 15 + 3][2:] == ["", ""]
    _, rows = _rows(tables["h"])
    assert rows[4][2] == "" and rows[4][1] != ""


def test_learning_curve_table(learning):
    header, rows = _rows(result_tables.learning_curve_table(learning))
    assert header == ["curve", "lambda", "n", "train_mean", "train_sd", "test_mean", "test_sd"]
    ns = learning["n"]
    assert len(rows) == (1 + len(learning["curves"])) * len(ns) + len(learning["replica"]["n"])
    by_curve: dict = {}
    for r in rows:
        by_curve.setdefault(r[0], []).append(r)
    assert list(by_curve) == ["main", "lambda=0.3", "lambda=3", "replica"]
    for c in learning["curves"]:
        got = by_curve[c["label"]]
        assert [int(r[2]) for r in got] == ns and all(float(r[1]) == c["lambda"] for r in got)
        for col, (key, stat) in zip(range(3, 7), [("train_error", "mean"), ("train_error", "sd"),
                                                  ("test_error", "mean"), ("test_error", "sd")]):
            assert [_num(r[col]) for r in got] == c[key][stat]
    assert by_curve["lambda=0.3"][1][5:] == ["", ""]  # the failed fit
    assert [_num(r[5]) for r in by_curve["replica"]] == learning["replica"]["test_error"]
    assert all(r[1] == "" for r in by_curve["main"])


def test_bootstrap_tables(density, reg):
    cfg, _ = density
    doc = _bootstrap(cfg)
    tables = result_tables.bootstrap_tables(cfg, doc)
    header, rows = _rows(tables["h"])
    assert header == ["x", "h", "h_mean", "h_sd", "h_lo", "h_hi", "h_bias"] and len(rows) == 10
    for col, key in enumerate(header):
        assert [float(r[col]) for r in rows] == doc[key]
    header, rows = _rows(tables["P"])
    assert header == ["x", "y", "P_mean", "P_sd", "P_bias"] and len(rows) == 150
    assert np.array_equal(np.array([float(r[3]) for r in rows]).reshape(10, 15), np.array(doc["P_sd"]))
    rcfg, _ = reg
    rdoc = _bootstrap(rcfg)
    tables = result_tables.bootstrap_tables(rcfg, rdoc)
    assert set(tables) == {"h"}
    header, rows = _rows(tables["h"])
    assert header == ["x", "h", "h_mean", "h_sd", "h_lo", "h_hi"]
    assert [float(r[4]) for r in rows] == rdoc["h_lo"]


# ------------------------------------------------------------------------------------------------ figures
def _cell_pixels(img, ax, x, y, hx, hy, inset=3):
    """The pixels well inside the heatmap cell centred on node (x, y)."""
    (x0, x1), (y1, y0) = ax.to_pixel([x - hx / 2, x + hx / 2], [y - hy / 2, y + hy / 2])
    return img[int(math.ceil(y0)) + inset:int(y1) - inset, int(math.ceil(x0)) + inset:int(x1) - inset].reshape(-1, 3)


def test_density_heatmap_colours(density):
    cfg, doc = density
    img = _image(figures.fit_png(cfg, doc))
    ax = figures.fit_axes(cfg, doc)
    grid = api.grid_from_config(cfg)
    P = np.array(doc["P"])
    top, bottom = figures.colormap(1.0), figures.colormap(0.0)
    # viridis (its ends rounded from matplotlib's float table: 255 * 0.1439 gives 36 or 37)
    assert np.abs(top.astype(int) - (253, 231, 37)).max() <= 1 and np.abs(bottom.astype(int) - (68, 1, 84)).max() <= 1
    for index, colour in ((np.unravel_index(P.argmax(), P.shape), top), (np.unravel_index(P.argmin(), P.shape),
                                                                          bottom)):
        px = _cell_pixels(img, ax, grid.x.nodes[index[0]], grid.y.nodes[index[1]], grid.hx, grid.hy)
        share = np.mean(np.all(px == colour, axis=1))
        assert share > 0.6, (index, share)  # a data marker or a line may cover the rest
    # every cell: its commonest colour is the colour map's of (P - min) / (max - min)
    t = (P - P.min()) / (P.max() - P.min())
    wrong = 0
    for i, x in enumerate(grid.x.nodes):
        for j, y in enumerate(grid.y.nodes):
            px = _cell_pixels(img, ax, x, y, grid.hx, grid.hy)
            colours, counts = np.unique(px, axis=0, return_counts=True)
            wrong += not np.array_equal(colours[counts.argmax()], figures.colormap(t[i, j]))
    assert wrong == 0
    # origin bottom-left: the first y node is at the bottom, the first x node on the left
    assert ax.to_pixel(grid.x.min, grid.y.min)[1] > ax.to_pixel(grid.x.min, grid.y.max)[1]
    assert ax.to_pixel(grid.x.min, grid.y.min)[0] < ax.to_pixel(grid.x.max, grid.y.min)[0]


def test_density_regression_line_pixels(density):
    cfg, doc = density
    img = _image(figures.fit_png(cfg, doc)).astype(int)
    ax = figures.fit_axes(cfg, doc)
    x = api.grid_from_config(cfg).x.nodes
    h = np.array(doc["regression"]["h"])
    mid_x, mid_h = (x[1:] + x[:-1]) / 2, (h[1:] + h[:-1]) / 2  # between the nodes: no data marker there
    px, py = ax.to_pixel(mid_x, mid_h)
    for a, b in zip(px, py):
        assert np.all(img[int(b), int(a)] >= 235), (a, b, img[int(b), int(a)])  # the white line
        # a black outline on each side, within a few pixels
        assert img[int(b) - 6:int(b) - 1, int(a)].min() < 60 and img[int(b) + 2:int(b) + 7, int(a)].min() < 60


def test_regression_figure(reg):
    cfg, doc = reg
    img = _image(figures.fit_png(cfg, doc)).astype(int)
    ax = figures.fit_axes(cfg, doc)
    x, h = np.array(doc["x"]), np.array(doc["h"])
    data_x = np.array(cfg["data"])[:, 0]
    checked = 0
    for xk, hk in zip(x[5::10], h[5::10]):  # away from the data (at whole x)
        assert np.min(np.abs(data_x - xk)) >= 0.5
        px, py = ax.to_pixel(xk, hk)
        assert np.all(img[int(py), int(px)] < 60), (xk, img[int(py), int(px)])  # the black MAP line
        checked += 1
    assert checked == 10
    # the mean ± 2 sd band is shaded (bluish), and white beyond it
    mean, sd = np.array(doc["exact"]["mean"]), np.sqrt(doc["exact"]["var"])
    k = 50
    inside = img[int(ax.to_pixel(x[k], mean[k] + 1.5 * sd[k])[1]), int(ax.to_pixel(x[k], 0)[0])]
    assert inside[2] > inside[0] + 30
    lo, hi = ax.ylim
    if mean[k] + 2 * sd[k] < hi - 0.3 * (hi - lo) / 6:
        px, py = ax.to_pixel(x[k] + 0.05, (mean[k] + 2 * sd[k] + hi) / 2)
        assert np.all(img[int(py), int(px)] >= 220)


def test_learning_curve_png(learning):
    img = _image(figures.learning_curve_png(learning))
    assert img.std() > 0
    assert figures.learning_curve_axes(learning).xlog  # 5..60 spans more than a factor 10
    short = copy.deepcopy(learning)
    short["n"] = [5, 8, 12]
    for c in short["curves"]:
        c["n"] = short["n"]
    short["replica"]["n"] = short["n"]
    assert not figures.learning_curve_axes(short).xlog
    _image(figures.learning_curve_png(short))
    # a curve's test error drawn at its points: the marker's colour at the pixel of a finite value
    ax = figures.learning_curve_axes(learning)
    c = learning["curves"][1]  # at its last n: no ring of the best lambda is drawn near it (best_lambda is null)
    px, py = ax.to_pixel(c["n"][2], c["test_error"]["mean"][2])
    assert tuple(img[int(py), int(px)]) == (213, 94, 0)  # the second colour of the palette


def test_learning_curve_with_nulls_only():
    doc = {"model": "regression", "mode": "bootstrap", "n": [10, 20],
           "train_error": {"mean": [None, None], "sd": [None, None]},
           "test_error": {"mean": [None, 1.5], "sd": [None, None]},
           "curves": [], "best_lambda": [None, None],
           "unique_fraction": {"mean": [0.6, 0.63], "expected": [0.65, 0.64]}}
    _image(figures.learning_curve_png(doc))
    header, rows = _rows(result_tables.learning_curve_table(doc))
    assert rows == [["main", "", "10", "", "", "", ""], ["main", "", "20", "", "", "1.5", ""]]
    doc["test_error"]["mean"] = [None, None]
    _image(figures.learning_curve_png(doc))


def test_bootstrap_pngs(density, reg):
    for cfg, _ in (density, reg):
        doc = _bootstrap(cfg, replicas=4)
        img = _image(figures.bootstrap_png(cfg, doc))
        ax = figures.bootstrap_axes(cfg, doc)
        if cfg["model"] == "density":  # the heatmap is of P_sd
            P_sd = np.array(doc["P_sd"])
            i, j = np.unravel_index(P_sd.argmax(), P_sd.shape)
            grid = api.grid_from_config(cfg)
            px = _cell_pixels(img, ax, grid.x.nodes[i], grid.y.nodes[j], grid.hx, grid.hy)
            assert np.mean(np.all(px == figures.colormap(1.0), axis=1)) > 0.6


def test_non_finite_values_are_gaps_and_never_decide_the_axes(density, reg, learning):
    """NaN, None, inf and absurd magnitudes in every series: figures come out, a cell without a value is grey, and
    the axes are set by the finite values of sane magnitude."""
    cfg, doc = density
    bad = copy.deepcopy(doc)
    bad["P"][0] = [None] * 15
    bad["regression"]["h"][3] = None
    bad["regression"]["h"][4] = 1e300
    bad["regression"]["sd"][6] = float("inf")
    img = _image(figures.fit_png(cfg, bad))
    ax = figures.fit_axes(cfg, bad)
    grid = api.grid_from_config(cfg)
    cell = _cell_pixels(img, ax, grid.x.nodes[0], grid.y.nodes[-1], grid.hx, grid.hy)  # no data, no line there
    assert np.mean(np.all(cell == figures.NAN_COLOUR, axis=1)) > 0.9
    assert ax.ylim == pytest.approx((grid.y.min - grid.hy / 2, grid.y.max + grid.hy / 2))
    rcfg, rdoc = reg
    rbad = copy.deepcopy(rdoc)
    rbad["h"][10:20] = [float("nan")] * 10
    rbad["exact"]["var"][30] = -1.0
    rbad["exact"]["mean"][40] = 1e308
    _image(figures.fit_png(rcfg, rbad))
    sane = np.array(rdoc["h"] + [p[1] for p in rcfg["data"]])
    lo, hi = figures.fit_axes(rcfg, rbad).ylim
    assert np.isfinite([lo, hi]).all() and hi - lo < 100 * (sane.max() - sane.min())
    lbad = copy.deepcopy(learning)
    lbad["curves"][1]["train_error"]["mean"] = [1e308, float("inf"), -1e308]
    lbad["replica"]["test_error"][0] = None
    _image(figures.learning_curve_png(lbad))
    assert np.isfinite(figures.learning_curve_axes(lbad).ylim).all()


def test_one_declaration_at_projector_size(density):
    """The dashboard's PNG (1920x1080) is the CLI's figure at another size: the same cells in the same colours."""
    cfg, doc = density
    png = figures.fit_png(cfg, doc, figures.PROJECTOR_SIZE)
    img = Image.open(io.BytesIO(png))
    assert img.size == figures.PROJECTOR_SIZE and img.mode == "RGB"
    img = np.asarray(img)
    ax = figures.fit_axes(cfg, doc, figures.PROJECTOR_SIZE)
    grid = api.grid_from_config(cfg)
    P = np.array(doc["P"])
    i, j = np.unravel_index(P.argmax(), P.shape)
    px = _cell_pixels(img, ax, grid.x.nodes[i], grid.y.nodes[j], grid.hx, grid.hy)
    assert np.mean(np.all(px == figures.colormap(1.0), axis=1)) > 0.6
    with pytest.raises(ValueError, match="100 to 8000 pixels"):
        figures.fit_png(cfg, doc, (20000, 20000))


def test_wrong_documents(density, reg, learning):
    cfg, doc = density
    rcfg, rdoc = reg
    with pytest.raises(ValueError, match="regression.*density|density.*regression"):
        result_tables.fit_tables(cfg, rdoc)
    with pytest.raises(ValueError, match="model"):
        figures.fit_png(rcfg, doc)
    for key in ("P", "L", "regression"):
        broken = {k: v for k, v in doc.items() if k != key}
        with pytest.raises(ValueError, match=f"'{key}'"):
            result_tables.fit_tables(cfg, broken)
    with pytest.raises(ValueError, match="'exact'"):
        figures.fit_png(rcfg, {k: v for k, v in rdoc.items() if k != "exact"})
    small = copy.deepcopy(cfg)
    small["grid"]["x"]["n"] = 5
    with pytest.raises(ValueError, match="shape"):
        result_tables.fit_tables(small, doc)
    with pytest.raises(ValueError, match="'n'"):
        result_tables.learning_curve_table({k: v for k, v in learning.items() if k != "n"})
    broken_lc = copy.deepcopy(learning)
    del broken_lc["curves"][0]["test_error"]
    with pytest.raises(ValueError, match=r"curves\[0\].*test_error"):
        figures.learning_curve_png(broken_lc)
    with pytest.raises(ValueError, match="'train_error'"):
        result_tables.learning_curve_table({"n": [1, 2], "test_error": {"mean": [1, 2]}})
    with pytest.raises(ValueError, match="'h_lo'"):
        result_tables.bootstrap_tables(rcfg, {"model": "regression", "x": [0.0], "h": [1.0], "h_mean": [1.0],
                                       "h_sd": [0.1], "h_hi": [1.2]})
    with pytest.raises(ValueError, match="numbers"):
        result_tables.fit_tables(cfg, dict(doc, P="not a field"))


def test_write_outputs(tmp_path, density):
    cfg, doc = density
    tables, png = result_tables.fit_tables(cfg, doc), figures.fit_png(cfg, doc)
    prefix = tmp_path / "run1"
    paths = export.write_outputs(prefix, tables, png)
    assert paths == [f"{prefix}_P.csv", f"{prefix}_h.csv", f"{prefix}.png"]
    with open(paths[0], newline="") as fh:
        assert fh.read() == tables["P"]
    with open(paths[2], "rb") as fh:
        assert fh.read() == png
    single = export.write_outputs(str(tmp_path / "lc"), "a,b\n1,2\n", None)
    assert single == [str(tmp_path / "lc.csv")] and (tmp_path / "lc.csv").read_text() == "a,b\n1,2\n"
    missing = tmp_path / "no" / "such"
    with pytest.raises(ValueError, match="does not exist.*mkdir"):
        export.write_outputs(missing / "run", tables, png)
    assert not missing.exists()
    with pytest.raises(ValueError, match="file name"):
        export.write_outputs(prefix, {"../x": "a\n"}, None)


class _Huge:
    """An array-like that says its shape and fails if anything converts or reads it: a refusal by the budget must
    come from the shape alone (issue 25: outputs are budgeted like inputs, before any conversion)."""

    def __init__(self, *shape):
        self.shape = shape

    def __len__(self):
        return self.shape[0]

    def __array__(self, *a, **k):
        raise AssertionError("converted before the budget refused it")

    def __iter__(self):
        raise AssertionError("read before the budget refused it")

    def __getitem__(self, k):
        raise AssertionError("read before the budget refused it")


def test_exports_are_budgeted_before_anything_is_converted_or_drawn(density, reg, learning):
    from bftcore.foundations.limits import lifted, using

    cfg, doc = reg
    huge = dict(doc, h=_Huge(10**7))
    for make in (result_tables.fit_tables, figures.fit_png):
        with pytest.raises(ValueError, match=r"^h holds 10 000 000 numbers \(76.3 MiB of float64\), over the limit of "
                                             r"5 000 000 numbers of one result; export a result of a coarser grid"):
            make(cfg, huge)
    # the tables' cells are counted before a row is written: the density's P table is nodes x 4 cells
    dcfg, ddoc = density
    nodes = dcfg["grid"]["x"]["n"] * dcfg["grid"]["y"]["n"]
    with using(lifted(max_output_values=4 * nodes - 1)):
        with pytest.raises(ValueError, match=f"the P table of {nodes} rows x 4 columns holds {4 * nodes} cells"):
            result_tables.fit_tables(dcfg, ddoc)
        with pytest.raises(ValueError, match="over the limit"):
            result_tables.learning_curve_table(dict(learning, n=_Huge(4 * nodes)))
    with using(lifted(max_output_values=4 * nodes)):        # the bound is the count itself: at it, all is written
        assert len(_rows(result_tables.fit_tables(dcfg, ddoc)["P"])[1]) == nodes


def test_write_outputs_refuses_a_target_that_is_not_a_regular_file_before_writing_any(tmp_path):
    # open() for writing of a named pipe waits for a reader forever
    import os
    os.mkfifo(tmp_path / "run_h.csv")
    with pytest.raises(ValueError, match=r"run_h.csv is a named pipe \(FIFO\), not a regular file"):
        export.write_outputs(str(tmp_path / "run"), {"P": "x\n1\n", "h": "x\n2\n"}, None)
    assert not (tmp_path / "run_P.csv").exists()                   # checked before the first file is written
    (tmp_path / "lc.png").mkdir()
    with pytest.raises(ValueError, match="lc.png is a directory"):
        export.write_outputs(str(tmp_path / "lc"), None, b"\x89PNG")


def test_the_dashboard_exports_the_figure_of_the_record_on_screen():
    """The dashboard's PNG (1920x1080) holds the fit figure of the session's record: the same document the CLI draws
    (density: P, L, h, sd of the record; regression: h of the record and the exact posterior)."""
    import asyncio

    from app.session import BFTSession
    from bftcore.outputs.documents import record_document
    for model in ("density", "regression"):
        s = BFTSession(live=False)
        if model == "regression":
            s.load_preset("two_trends")
        s.solve()
        cfg = api.validate_config(s.to_config())
        png = asyncio.run(s.figure_png()).getvalue()
        img = Image.open(io.BytesIO(png))
        assert img.size == figures.PROJECTOR_SIZE and img.mode == "RGB"
        doc = api.fit(cfg)
        shown = record_document(cfg, s.record, doc.get("exact"))
        if model == "density":
            assert np.allclose(shown["P"], doc["P"], atol=1e-6)
            assert np.allclose(shown["regression"]["h"], doc["regression"]["h"], atol=1e-6)
        else:
            assert np.allclose(shown["h"], doc["h"], atol=1e-6)
        # issue 28: the whole presenter screen around that figure (title, alarms, traces, lambda curve)
        screen = s.screen()
        assert png == figures.presenter_png(cfg, shown, screen["traces"], screen["title"], screen["alarms"],
                                            figures.PROJECTOR_SIZE)
    s = BFTSession(live=False)
    s.record = None
    with pytest.raises(ValueError, match="nothing to export yet"):
        asyncio.run(s.figure_png())
    assert s.message.startswith("The PNG export failed: nothing to export yet")


def test_a_1d_density_is_drawn_as_p_of_y():
    """One x node: the figure is p(y) against y (its black line through the MAP at the nodes), not a one-column
    heatmap."""
    cfg = api.validate_config({"grid": {"y": {"min": -3, "max": 3, "n": 60, "boundary": "neumann"}},
                           "data": [-1.2, -1.0, 0.9, 1.1, 1.3], "prior": {"lambda": 2.0}})
    doc = api.fit(cfg)
    img = _image(figures.fit_png(cfg, doc)).astype(int)
    ax = figures.fit_axes(cfg, doc)
    y, P = api.grid_from_config(cfg).y.nodes, np.array(doc["P"])[0]
    assert ax.xlim == (-3.0, 3.0) and ax.ylim[0] == 0.0 and ax.ylim[1] >= P.max()
    checked = 0
    for yk, pk in zip(y[3::8], P[3::8]):
        px, py = ax.to_pixel(yk, pk)
        assert img[int(py) - 2:int(py) + 3, int(px)].min() < 60, (yk, pk)  # the black line
        checked += 1
    assert checked >= 6
