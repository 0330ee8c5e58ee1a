"""The JSON document of CONVENTIONS.md §4: defaults, errors that name the problem, round trip; and the CLI
``python -m bftcore fit|reproduce`` with its result document and its handling of bad input (no tracebacks)."""
import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from bftcore import api
from bftcore.foundations import metrics
from bftcore.foundations.config import ConfigError, load_config, validate_config
from bftcore.models import presets

PAPER_GRID = {"x": {"min": 1.0, "max": 10.0, "n": 10, "boundary": "periodic"},
              "y": {"min": 1.0, "max": 15.0, "n": 15, "boundary": "periodic"}}
RESULT_KEYS = {"energy", "train_error", "test_error", "iterations", "converged", "max_P", "mixing", "P", "L",
               "history", "elapsed_s"}
HISTORY_KEYS = {"energy", "train_error", "test_error", "mixing", "step"}


# ------------------------------------------------------------------------------------------- defaults
def test_empty_document_gets_every_documented_default():
    cfg = validate_config({})
    assert cfg["model"] == "density"
    assert cfg["grid"] == PAPER_GRID
    assert cfg["data"] == []
    assert cfg["prior"] == {"field": "L", "lambda": 1.0, "lambda_x": 1.0, "lambda_y": 1.0,
                            "l0": 0.0, "l2": 1.0, "l4": 0.0, "l6": 0.0}
    assert cfg["templates"] == [] and cfg["weights"] == []
    assert cfg["beta"] == 1.0
    assert cfg["solver"] == {"method": "newton", "mass2": 0.01, "init": "kernel", "init_mass2": 0.1,
                             "min_iter": 4, "max_iter": 50, "tol": 1e-8}
    assert cfg["truth"] is None


def test_default_documents_of_both_models_validate_and_fit():
    """default_config gives a document the gate accepts and the solver fits, for either model: a regression
    without data gets the zero template and a small mass (the model is singular without one), so h = 0."""
    dens = api.default_config("density")
    assert dens == validate_config({})
    reg = api.default_config("regression")
    assert reg == validate_config(reg)
    assert reg["templates"] == [{"kind": "constant", "value": 0.0}]
    assert reg["prior"]["l0"] == 0.01 and reg["prior"]["l2"] == 1.0
    out = api.fit(reg)
    assert np.allclose(out["h"], 0.0)
    with pytest.raises(ConfigError, match="prior mass"):
        validate_config(dict(reg, prior=dict(reg["prior"], l0=0.0)))
    with pytest.raises(ConfigError, match="model"):
        api.default_config("histogram")


def test_partial_documents_keep_given_values_and_fill_the_rest():
    cfg = validate_config({"prior": {"l6": 0.01}, "grid": {"x": {"boundary": "neumann"}},
                           "templates": [{"kind": "paper_t1"}, {"kind": "paper_t2"}, {"kind": "uniform"}],
                           "solver": {"method": "massive"}})
    assert cfg["prior"]["l6"] == 0.01 and cfg["prior"]["l2"] == 0.0  # l2 = 1 only when no l_k is given
    assert cfg["grid"]["x"] == {**PAPER_GRID["x"], "boundary": "neumann"}
    assert cfg["grid"]["y"] == PAPER_GRID["y"]
    assert cfg["weights"] == pytest.approx([1 / 3] * 3)
    assert cfg["solver"]["method"] == "massive" and cfg["solver"]["mass2"] == 0.01


def test_validate_does_not_modify_its_input():
    doc = {"prior": {"lambda": 2}, "data": [[3, 3]]}
    before = copy.deepcopy(doc)
    validate_config(doc)
    assert doc == before


@pytest.mark.parametrize("doc", [
    {},
    presets.figure_config("fig14"),
    presets.figure_config("fig23"),
    {"model": "regression", "data": [[2, 1.5], [5, -0.3]],
     "templates": [{"kind": "constant", "value": 0.5}, {"kind": "linear", "slope": 0.1, "intercept": 0}]},
    {"prior": {"field": "P", "l4": 0.2}, "beta": 3.5, "weights": [1, 3],
     "templates": [{"kind": "gaussian", "mu": 7, "sigma": 2}, {"kind": "paper_t2"}],
     "solver": {"init": "template:1", "tol": 1e-6}},
])
def test_round_trip(doc):
    once = validate_config(doc)
    assert validate_config(once) == once
    assert validate_config(json.loads(json.dumps(once))) == once


# ------------------------------------------------------------------------------------------- errors
BAD_DOCS = [
    ({"colour": "red"}, "colour"),
    ({"prior": {"lamda": 1.0}}, "lamda"),
    ({"solver": {"method": "newton", "maxiter": 3}}, "maxiter"),
    ({"grid": {"x": {"min": 1, "max": 10, "n": 10, "boundary": "periodic", "h": 1}}}, "'h'"),
    ({"model": "classification"}, "classification"),
    ({"prior": {"field": "Q"}}, "prior.field"),
    ({"templates": [{"kind": "banana"}]}, "banana"),
    ({"templates": [{"kind": "gaussian", "mu": 3}]}, "sigma"),
    ({"model": "regression", "templates": [{"kind": "paper_t1"}]}, "paper_t1"),
    ({"grid": {"x": {"boundary": "dirichlet"}}}, "dirichlet"),
    ({"solver": {"method": "bfgs"}}, "bfgs"),
    ({"solver": {"init": "magic"}}, "magic"),
    ({"solver": {"init": "template:2"}, "templates": [{"kind": "paper_t1"}]}, "template:2"),
    ({"data": [[3, 3], [12, 3]]}, "(12, 3)"),
    ({"data": [[3, 3], [5, 0.2]]}, "(5, 0.2)"),
    ({"data": [[3, 3, 1]]}, "data[0]"),
    ({"data": [[3, "y"]]}, "data[0][1]"),
    ({"prior": {"lambda": 0}}, "prior.lambda"),
    ({"prior": {"lambda": -1.0}}, "prior.lambda"),
    ({"prior": {"lambda": float("nan")}}, "prior.lambda"),
    ({"prior": {"l2": float("inf")}}, "prior.l2"),
    ({"prior": {"l0": 0, "l2": 0, "l4": 0, "l6": 0}}, "l2"),
    ({"prior": {"l2": -0.5}}, "prior.l2"),
    ({"data": [[3, float("nan")]]}, "data[0][1]"),
    ({"beta": 0}, "beta"),
    ({"beta": float("nan")}, "beta"),
    ({"weights": [0.5]}, "weights"),
    ({"templates": [{"kind": "paper_t1"}], "weights": [0.0]}, "weights"),
    ({"solver": {"method": "massive", "mass2": 0}}, "mass2"),
    ({"solver": {"max_iter": 2.5}}, "solver.max_iter"),
    ({"grid": {"x": {"n": 0}}}, "grid.x.n"),
    ({"grid": {"x": {"min": 5, "max": 1}}}, "grid.x"),
    ({"truth": "oracle"}, "truth"),
    ([1, 2, 3], "JSON object"),
]


@pytest.mark.parametrize("doc, named", BAD_DOCS, ids=[str(i) for i in range(len(BAD_DOCS))])
def test_bad_documents_raise_config_error_naming_the_problem(doc, named):
    with pytest.raises(ConfigError) as exc:
        validate_config(doc)
    assert named in str(exc.value)
    assert isinstance(exc.value, ValueError)


def test_all_axis_strengths_zero_is_an_empty_prior():
    with pytest.raises(ConfigError, match="lambda_"):
        validate_config({"prior": {"lambda_x": 0, "lambda_y": 0}, "data": [[3, 3]]})
    # one axis strength 0 is a legitimate prior (smoothing along the other axis only)
    assert validate_config({"prior": {"lambda_x": 0}})["prior"]["lambda_x"] == 0.0


def test_load_config_errors_name_the_file_and_the_problem(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"prior": {"lambda": 1.0}, "data": [[3, 3]],}')
    with pytest.raises(ConfigError) as exc:
        load_config(bad)
    assert "bad.json" in str(exc.value) and "JSON" in str(exc.value) and "line 1" in str(exc.value)
    with pytest.raises(ConfigError, match="no such"):
        load_config(tmp_path / "missing.json")
    nan = tmp_path / "nan.json"
    nan.write_text('{"prior": {"lambda": NaN}}')
    with pytest.raises(ConfigError, match="prior.lambda"):
        load_config(nan)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(presets.figure_config("fig15")))
    assert load_config(good) == validate_config(presets.figure_config("fig15"))


# ------------------------------------------------------------------------------------------------ CLI
def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "bftcore", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def strict_json(text):
    def no_constants(c):
        raise ValueError(f"non-standard JSON constant {c}")
    return json.loads(text, parse_constant=no_constants)


def check_result_document(doc, cfg):
    assert RESULT_KEYS <= set(doc)
    nx, ny = cfg["grid"]["x"]["n"], cfg["grid"]["y"]["n"]
    P, L = np.array(doc["P"], dtype=float), np.array(doc["L"], dtype=float)
    assert P.shape == (nx, ny) and L.shape == (nx, ny)
    assert np.allclose(P.sum(axis=1), 1.0, atol=1e-12)          # hy = 1 on these meshes
    assert np.allclose(np.exp(L), P, rtol=1e-12, atol=1e-300)
    assert doc["max_P"] == pytest.approx(P.max(), rel=1e-15)
    assert doc["iterations"] == len(doc["history"]) - 1
    assert isinstance(doc["converged"], bool)
    assert doc["elapsed_s"] >= 0
    for rec in doc["history"]:
        assert HISTORY_KEYS <= set(rec)
    assert doc["history"][-1]["energy"] == doc["energy"]
    assert doc["mixing"] == doc["history"][-1]["mixing"]
    assert sum(doc["mixing"]) == pytest.approx(1.0, abs=1e-12)
    # the errors recomputed from the printed field with the metric formulas
    problem = api.build_density(cfg)
    assert doc["train_error"] == pytest.approx(metrics.training_error(L, problem.N), rel=1e-12)
    if cfg.get("truth") == "paper":
        assert doc["test_error"] == pytest.approx(metrics.test_error(L, problem.P_true, problem.grid), rel=1e-12)
    else:
        assert doc["test_error"] is None
    assert problem.energy.at(L).value == pytest.approx(doc["energy"], rel=1e-12)


def test_cli_fit_json(tmp_path):
    cfg = presets.figure_config("fig23")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(cfg))
    out = cli("fit", path, "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = strict_json(out.stdout)
    check_result_document(doc, cfg)
    assert doc["energy"] == pytest.approx(api.fit(cfg)["energy"], rel=1e-12)
    assert len(doc["mixing"]) == 2


def test_cli_fit_without_truth_and_human_summary(tmp_path):
    cfg = {"data": [[3, 3], [7, 12], [7, 11]], "prior": {"l2": 0.1}}
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(cfg))
    out = cli("fit", path, "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    check_result_document(strict_json(out.stdout), validate_config(cfg))
    human = cli("fit", path, cwd=tmp_path)
    assert human.returncode == 0, human.stderr
    assert "energy" in human.stdout
    with pytest.raises(ValueError):
        json.loads(human.stdout)


def test_cli_reproduce_fig14_json(tmp_path):
    out = cli("reproduce", "fig14", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = strict_json(out.stdout)
    cfg = presets.figure_config("fig14")
    check_result_document(doc, cfg)
    assert doc["converged"]
    assert 0.55 <= doc["max_P"] <= 0.65
    assert doc["energy"] == pytest.approx(api.fit(cfg)["energy"], rel=1e-12)


BAD_FILES = [
    ("malformed", '{"prior": {"lambda": 1.0}, "data": [[3, 3]],}', ["JSON", "line 1"]),
    ("unknown-key", '{"prior": {"lambda": 1.0, "lamda": 2.0}}', ["lamda"]),
    ("off-grid", '{"data": [[3, 3], [12, 3]]}', ["(12, 3)"]),
    ("lambda-zero", '{"prior": {"lambda": 0}}', ["prior.lambda"]),
    ("nan", '{"data": [[3, 3]], "prior": {"lambda": NaN}}', ["prior.lambda", "nan"]),
    ("empty-prior", '{"data": [[3, 3]], "prior": {"lambda_x": 0, "lambda_y": 0}}', ["lambda_x", "lambda_y"]),
    ("unknown-kind", '{"templates": [{"kind": "banana"}]}', ["banana"]),
    ("bad-array-template", '{"templates": [{"kind": "array", "values": [[1, 2], [3, 4]]}]}', ["array"]),
]


@pytest.mark.parametrize("name, text, named", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_cli_bad_input_exits_nonzero_without_traceback(tmp_path, name, text, named):
    path = tmp_path / f"{name}.json"
    path.write_text(text)
    out = cli("fit", path, "--json", cwd=tmp_path)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert out.stdout.strip() == ""
    for word in named:
        assert word in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) <= 3


def test_cli_missing_file_and_unknown_figure(tmp_path):
    out = cli("fit", tmp_path / "nowhere.json", cwd=tmp_path)
    assert out.returncode != 0 and "Traceback" not in out.stderr and "nowhere.json" in out.stderr
    out = cli("reproduce", "fig99", "--json", cwd=tmp_path)
    assert out.returncode != 0 and "Traceback" not in out.stderr and "fig99" in out.stderr


# ------------------------------------------------------------------------------------------------ the doors (issue 25)
@pytest.mark.parametrize("command, option, value, named", [
    ("bootstrap", "--seed", "-1", "argument --seed: expected a whole number >= 0, got -1"),
    ("learning-curve", "--seed", "-1", "argument --seed: expected a whole number >= 0, got -1"),
    ("bootstrap", "--resamples", "1", "argument --resamples: expected a whole number >= 2, got 1"),
    ("learning-curve", "--resamples", "0", "argument --resamples: expected a whole number >= 1, got 0"),
    ("bootstrap", "--level", "1.5", "argument --level: expected a number between 0 and 1"),
    ("bootstrap", "--level", "nan", "argument --level: expected a number between 0 and 1"),
])
def test_cli_arguments_are_checked_at_the_door_naming_the_option(command, option, value, named, tmp_path,
                                                                 monkeypatch, capsys):
    # --seed=-1 reached three Dask workers and came back as their tracebacks, then "expected non-negative integer"
    # without naming --seed: now argparse refuses it before anything runs (a run would fail this test)
    from bftcore import __main__ as cli_main
    for name in ("learning_curve_document", "bootstrap_document"):
        monkeypatch.setattr(api, name, lambda *a, **k: pytest.fail("the command ran"))
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"data": [[2, 3], [5, 8], [7, 12]]}))
    extra = ["--n", "2:3:2"] if command == "learning-curve" else []
    with pytest.raises(SystemExit) as stop:
        cli_main.main([command, str(path), *extra, f"{option}={value}"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and named in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("make, kind", [(os.mkfifo, "a named pipe (FIFO)"), (None, "a device")])
@pytest.mark.parametrize("suffix, with_config", [(".json", False), (".csv", False), (".json", True)])
def test_cli_refuses_a_file_that_is_not_regular_before_opening_it(tmp_path, make, kind, suffix, with_config):
    # open() of a FIFO waits for a writer forever: the command used to hang; a device never ends
    if make is None:
        path = "/dev/zero"
        if not os.path.exists(path):
            pytest.skip("no /dev/zero here")
    else:
        path = str(tmp_path / f"pipe{suffix}")
        make(path)
    table = tmp_path / "data.csv"
    table.write_text("x,y\n2,3\n5,8\n")
    args = ["fit", table, "--config", path] if with_config else ["fit", path]
    out = cli(*args, cwd=tmp_path)
    assert out.returncode == 2 and f"{path} is {kind}, not a regular file" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_cli_reads_a_table_by_its_header_names(tmp_path):
    # header y,x was read by position: the axes silently swapped
    rows = [(2.0, 30.0), (5.0, 80.0), (7.0, 120.0)]
    (tmp_path / "xy.csv").write_text("x,y\n" + "".join(f"{x},{y}\n" for x, y in rows))
    (tmp_path / "yx.csv").write_text("y,x\n" + "".join(f"{y},{x}\n" for x, y in rows))
    docs = [strict_json(cli("fit", tmp_path / name, "--json", cwd=tmp_path).stdout) for name in ("xy.csv", "yx.csv")]
    assert docs[0]["P"] == docs[1]["P"]
    out = cli("fit", tmp_path / "xy.csv", cwd=tmp_path)
    assert "x 30 nodes on [1.5, 7.5]" in out.stdout, out.stdout          # x spans 2..7 padded by 10 %
    (tmp_path / "tx.csv").write_text("time,x\n1,2\n")
    out = cli("fit", tmp_path / "tx.csv", cwd=tmp_path)
    assert out.returncode == 2 and "the header names the columns 'time', 'x'" in out.stderr


def test_cli_refuses_a_png_target_that_is_a_pipe_before_the_fit(tmp_path, monkeypatch, capsys):
    from bftcore import __main__ as cli_main
    monkeypatch.setattr(api, "fit", lambda *a, **k: pytest.fail("the fit ran"))
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"data": [[2, 3], [5, 8]]}))
    os.mkfifo(tmp_path / "out.png")
    assert cli_main.main(["fit", str(cfg), "--png", str(tmp_path / "out.png")]) == 2
    assert "out.png is a named pipe (FIFO), not a regular file" in capsys.readouterr().err
