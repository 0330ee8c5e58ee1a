"""Your own data: CSV and whitespace tables, the grid fitted to the data, and the CLI on a table."""
import json
import subprocess
import sys

import numpy as np
import pytest

from bftcore import api
from bftcore.foundations.config import FIT_PAD, LABEL_MAX_CHARS, ConfigError, validate_config
from bftcore.foundations.limits import Limits
from bftcore.foundations.tables import data_document, parse_labelled_table, parse_table


@pytest.mark.parametrize("text", ["x,y\n1,2\n3,4.5\n", "1;2\n3;4.5\n", "# comment\n\n1\t2\n3\t4.5\n",
                                  "x y\n  1   2\n3 4.5  \n", "\ufeffx, y\n1, 2\n3, 4.5\n",
                                  "Y;X\n2;1\n4.5;3\n", '"y"\t"x"\n2\t1\n4.5\t3\n'])
def test_tables_in_the_usual_shapes_parse_to_the_same_numbers(text):
    assert np.array_equal(parse_table(text), [[1, 2], [3, 4.5]])
    assert np.array_equal(parse_table(text.encode("utf-8")), [[1, 2], [3, 4.5]])


@pytest.mark.parametrize("text, message", [
    ("1,2\n3,four\n", "line 2: 'four' is not a number"),
    ("1,2\n3\n", "line 2: 1 columns where the first data line had 2"),
    ("1,2,3\n", "line 1: 3 columns"),
    ("1,2\nnan,3\n", "line 2: NaN or infinity"),
    ("1\ninf\n", "line 2: NaN or infinity"),
    ("# only a comment\n", "no data lines"),
    ("a,b\nc,d\n", "line 2: 'c' is not a number"),
])
def test_a_bad_table_says_which_line_and_what_is_wrong(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_table(text)


@pytest.mark.parametrize("text, names", [("time,x\n1,2\n", "'time', 'x'"), ("x,x\n1,2\n", "'x', 'x'"),
                                         ("Y,time\n1,2\n", "'Y', 'time'")])
def test_a_header_that_names_one_of_x_and_y_is_refused_with_the_names_it_has(text, names):
    # a header y,x was read by position, silently swapping the axes (issue 25); a header that names only one of
    # them is refused, quoting its names, rather than guessed
    with pytest.raises(ConfigError, match=f"line 1: the header names the columns {names}; name them x and y"):
        parse_table(text)


def test_other_header_names_are_read_by_position_and_become_the_axes_labels():
    table, labels = parse_labelled_table('eruptions (min),"waiting (min)"\n3.6,79\n1.8,54\n')
    assert table.tolist() == [[3.6, 79.0], [1.8, 54.0]]
    assert labels == {"x": "eruptions (min)", "y": "waiting (min)"}
    assert parse_labelled_table("<b>a</b>;b\x07c\n1;2\n")[1] == {"x": "<b>a</b>", "y": "bc"}  # text, no controls
    assert parse_labelled_table("income ($)\n1\n2\n")[1] == {"y": "income ($)"}
    assert parse_labelled_table("x,y\n1,2\n")[1] == {} and parse_labelled_table("1,2\n")[1] == {}
    doc = data_document(table, None, labels)
    assert validate_config(doc)["labels"] == labels
    long = "a" * 200
    assert len(parse_labelled_table(f"{long},b\n1,2\n")[1]["x"]) == LABEL_MAX_CHARS


@pytest.mark.parametrize("labels, message", [({"z": "a"}, "unknown key"), ({"x": 3}, "must be a string"),
                                             ({"x": "a" * 81}, "at most 80"), ({"y": "a\x00b"}, "control"),
                                             ("x", "must be a JSON object")])
def test_the_gate_checks_the_labels(labels, message):
    with pytest.raises(ConfigError, match=message):
        validate_config({"data": [[1, 2], [3, 4]], "grid": {"fit": True}, "labels": labels})


def test_columns_are_read_by_their_header_names_whatever_their_order():
    rng = np.random.default_rng(3)
    xy = rng.normal(size=(20, 2))
    forward = "x,y\n" + "\n".join(f"{a!r},{b!r}" for a, b in xy.tolist())
    backward = "y,x\n" + "\n".join(f"{b!r},{a!r}" for a, b in xy.tolist())
    assert np.array_equal(parse_table(forward), xy) and np.array_equal(parse_table(backward), xy)
    one = parse_table("height\n1\n2\n")                     # one column: its header may say anything
    assert one.shape == (2, 1)
    with pytest.raises(ConfigError, match="names 2 column.*data lines have 1"):
        parse_table("x,y\n1\n2\n")


def test_table_size_is_refused_at_the_door():
    with pytest.raises(ConfigError, match="over the limit"):
        parse_table(b"1\n" * 100, limits=Limits(max_document_bytes=50))
    with pytest.raises(ConfigError, match="more than 10 data lines"):
        parse_table("1\n" * 11, limits=Limits(max_points=10))
    with pytest.raises(ConfigError, match="not UTF-8"):
        parse_table(b"1\n\xff\xfe2\n")


def test_the_fitted_grid_follows_the_documented_rule():
    y = np.array([[-1.0], [0.5], [3.0]])
    cfg = validate_config(data_document(y))
    ax = cfg["grid"]["y"]
    assert (ax["min"], ax["max"], ax["n"], ax["boundary"]) == (-1 - 0.4, 3 + 0.4, 200, "free")  # DEFT's model
    assert cfg["grid"]["x"]["n"] == 1                                  # a one-dimensional density
    xy = np.array([[0.0, 1.0], [2.0, 5.0], [1.0, 3.0]])
    cfg = validate_config(data_document(xy))
    assert (cfg["grid"]["x"]["min"], cfg["grid"]["x"]["max"], cfg["grid"]["x"]["n"]) == (-0.2, 2.2, 30)
    assert (cfg["grid"]["y"]["min"], cfg["grid"]["y"]["max"], cfg["grid"]["y"]["n"]) == (0.6, 5.4, 40)
    assert (cfg["grid"]["x"]["boundary"], cfg["grid"]["y"]["boundary"]) == ("neumann", "free")
    reg = validate_config(data_document(xy, {"model": "regression", "templates": [{"kind": "constant", "value": 0.0}]}))
    assert reg["grid"]["x"]["min"] == pytest.approx(-FIT_PAD * 2) and reg["grid"]["x"]["n"] == 200
    # one value: a pad of 0.5; the axis's own n and boundary are kept
    one = validate_config({"grid": {"fit": True, "y": {"n": 50, "boundary": "neumann"}}, "data": [2.0, 2.0]})
    assert (one["grid"]["y"]["min"], one["grid"]["y"]["max"], one["grid"]["y"]["n"],
            one["grid"]["y"]["boundary"]) == (1.5, 2.5, 50, "neumann")
    # every datum lies inside, so the gate accepts them
    assert len(one["data"]) == 2


@pytest.mark.parametrize("doc, message", [
    ({"grid": {"fit": True}}, "has none"),
    ({"grid": {"fit": "yes"}, "data": [1.0]}, "grid.fit must be true"),
    ({"grid": {"fit": True, "y": {"min": 0}}, "data": [1.0]}, "give only n and boundary"),
    ({"grid": {"fit": True, "x": {"n": 3}}, "data": [1.0, 2.0]}, "no x axis"),
    ({"grid": {"fit": True}, "data": [[1.0, 2.0], 3.0]}, r"data\[1\] must be an \[x, y\] pair"),
])
def test_grid_fit_refusals(doc, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(doc)


def test_a_table_with_data_of_its_own_configuration_is_ambiguous():
    with pytest.raises(ConfigError, match="keep one of them"):
        data_document(np.array([[1.0]]), {"data": [0.5]})
    with pytest.raises(ConfigError, match="two columns"):
        data_document(np.array([[1.0]]), {"model": "regression"})


def cli(*args):
    return subprocess.run([sys.executable, "-m", "bftcore", *args], capture_output=True, text=True, timeout=300)


def test_the_cli_fits_a_csv_with_and_without_a_configuration(tmp_path):
    rng = np.random.default_rng(0)
    y = rng.normal(0, 1, 60)
    (tmp_path / "y.csv").write_text("value\n" + "\n".join(f"{v:.6f}" for v in y) + "\n")
    out = cli("fit", str(tmp_path / "y.csv"), "--json")
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert np.asarray(res["P"]).shape == (1, 200)
    # the same as the API on the same document
    # (lambda unset: the CLI's fit of a table chooses it by the evidence, issue 27)
    ref = api.fit({**data_document(parse_table((tmp_path / "y.csv").read_text())), "choose": {"lambda": "evidence"}})
    assert np.allclose(res["P"], ref["P"])
    # a configuration with a grid of its own: a point outside it is refused as for JSON data, naming the point
    (tmp_path / "c.json").write_text(json.dumps({"grid": {"y": {"min": -1, "max": 1, "n": 30,
                                                                "boundary": "neumann"}}}))
    out = cli("fit", str(tmp_path / "y.csv"), "--config", str(tmp_path / "c.json"))
    assert out.returncode == 2 and "outside" in out.stderr
    # a regression from two columns, and the evidence of a table
    x = rng.uniform(0, 5, 30)
    (tmp_path / "xy.txt").write_text("\n".join(f"{a} {np.sin(a):.5f}" for a in x))
    (tmp_path / "r.json").write_text(json.dumps({"model": "regression",
                                                 "templates": [{"kind": "constant", "value": 0.0}]}))
    out = cli("fit", str(tmp_path / "xy.txt"), "--config", str(tmp_path / "r.json"), "--json")
    assert out.returncode == 0, out.stderr
    out = cli("evidence", str(tmp_path / "y.csv"), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["best"]["lambda"] > 0
    # a table that is not one: the line and the problem, exit status 2
    (tmp_path / "bad.csv").write_text("1,2\n3,x\n")
    out = cli("fit", str(tmp_path / "bad.csv"))
    assert out.returncode == 2 and "line 2: 'x' is not a number" in out.stderr


def test_the_cli_summary_shows_the_grid_fitted_to_a_table(tmp_path):
    """A table's grid is chosen by the gate, so the plain summary says which one: the validated document's."""
    x = np.random.default_rng(3).uniform(-2.0, 7.0, 25)
    (tmp_path / "xy.csv").write_text("\n".join(f"{a:.4f},{np.cos(a):.4f}" for a in x))
    out = cli("fit", str(tmp_path / "xy.csv"))
    assert out.returncode == 0, out.stderr
    grid = validate_config(data_document(parse_table((tmp_path / "xy.csv").read_text())))["grid"]
    line = next(s for s in out.stdout.splitlines() if s.startswith("grid"))
    for name in ("x", "y"):
        ax = grid[name]
        assert f"{name} {ax['n']} nodes on [{ax['min']:.6g}, {ax['max']:.6g}], {ax['boundary']}" in line
