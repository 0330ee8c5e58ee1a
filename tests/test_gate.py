"""The input gate (issue 11): every document is either a problem the solver runs to a finite answer, or a clear
ConfigError; the cost budget is enforced before anything is allocated; files and the CLI never show a traceback."""
import json
import math
import os
import re
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bftcore import api
from bftcore.foundations.config import (
    ConfigError,
    load_config,
    parse_document,
    to_plain,
    validate_config,
    validate_sweep,
)
from bftcore.foundations.grid import Grid
from bftcore.foundations.limits import LIMITS, UNLIMITED, RunBudgetExceeded, deadline, lifted, using

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ------------------------------------------------------------------------------------------ property-based
ADVERSARIAL = [0, -1, 1, 2, 0.5, 1e-300, 1e-13, 1e13, 1e300, -1e308, 10 ** 400, -(10 ** 30), math.nan, math.inf,
               -math.inf, np.float32(2.0), np.int64(3), np.float64(0.1), True, False, "1", "", None, [], {}, [1, 2]]
numbers = st.one_of(st.sampled_from(ADVERSARIAL), st.floats(-20, 20), st.integers(-5, 30),
                    st.floats(allow_nan=True, allow_infinity=True))
junk = st.one_of(numbers, st.text(max_size=5), st.lists(numbers, max_size=3),
                 st.dictionaries(st.text(max_size=3), numbers, max_size=2))


def maybe(strategy, junk_too=True):
    """Either the key is absent (a default), or a value from ``strategy``, or (with ``junk_too``) junk."""
    return st.one_of(st.just(KeyError), strategy, junk) if junk_too else st.one_of(st.just(KeyError), strategy)


def obj(**fields):
    return st.fixed_dictionaries({}, optional=fields).map(lambda d: {k: v for k, v in d.items() if v is not KeyError})


def documents(junk_too: bool):
    """Configuration documents: with ``junk_too`` any key may hold junk; without, every value has the right type
    and the numbers range over the adversarial ones (0, 1e300, 10**400, NaN, ...) and ordinary ones."""
    def m(strategy):
        return maybe(strategy, junk_too)
    num = numbers if junk_too else st.one_of(st.floats(-20, 20), st.integers(-5, 30), st.floats(0.01, 5),
                                             st.sampled_from(ADVERSARIAL[:17]))
    axis = obj(min=m(num), max=m(num), n=m(st.integers(-2, 9)),
               boundary=m(st.sampled_from(["periodic", "neumann", "open"])))
    array_values = st.integers(1, 9).flatmap(lambda nx: st.integers(1, 9).flatmap(
        lambda ny: st.lists(st.lists(st.one_of(st.floats(-3, 3), st.sampled_from(ADVERSARIAL[:15])), min_size=ny,
                                     max_size=ny), min_size=nx, max_size=nx)))
    template = st.one_of(
        obj(kind=st.sampled_from(["uniform", "paper_t1", "paper_t2", "constant"])),
        obj(kind=st.just("gaussian"), mu=m(num), sigma=m(num)),
        obj(kind=st.just("array"), values=m(st.one_of(array_values, st.lists(st.floats(-3, 3), max_size=9)))),
        obj(kind=st.just("linear"), slope=m(num), intercept=m(num)),
        obj(kind=st.just("constant"), value=m(num)),
        *([obj(kind=junk)] if junk_too else []))
    return obj(
        model=m(st.sampled_from(["density", "regression"])),
        grid=m(obj(x=m(axis), y=m(axis))),
        data=m(st.lists(st.lists(st.one_of(st.floats(0, 16), num), min_size=2, max_size=2), max_size=6)),
        prior=m(obj(field=m(st.sampled_from(["L", "P"])),
                    **{k: m(num) for k in ("lambda", "lambda_x", "lambda_y", "l0", "l2", "l4", "l6")})),
        templates=m(st.lists(template, max_size=3)),
        weights=m(st.lists(num, max_size=3)),
        beta=m(num),
        solver=m(obj(method=m(st.sampled_from(["newton", "massive", "gradient"])),
                     init=m(st.sampled_from(["uniform", "kernel", "empirical", "template:0", "template:1",
                                             "template:x", "template:99"])),
                     mass2=m(num), init_mass2=m(num), min_iter=m(st.integers(0, 12)),
                     max_iter=m(st.integers(0, 12)), tol=m(num))),
        truth=m(st.one_of(st.just("paper"), template, st.lists(st.floats(-3, 3), max_size=9))))


@st.composite
def focused(draw):
    """Documents that mostly pass the gate: each model, field and method, small grids, adversarial magnitudes in
    the numbers that matter to the solver (strengths, masses, beta, template parameters)."""
    num = st.one_of(st.floats(0.001, 10), st.sampled_from([0, 1e-12, 1e-6, 1e3, 1e6, 1e9, 1e11]))
    model = draw(st.sampled_from(["density", "regression"]))
    nx, ny = draw(st.integers(1, 9)), draw(st.integers(2, 9))
    grid = {"x": {"min": 0, "max": draw(st.sampled_from([1, 10, 1e3, 1e-3])), "n": nx,
                  "boundary": draw(st.sampled_from(["periodic", "neumann"]))},
            "y": {"min": 0, "max": draw(st.sampled_from([1, 15, 1e3, 1e-3])), "n": ny,
                  "boundary": draw(st.sampled_from(["periodic", "neumann"]))}}
    xs = st.floats(0, grid["x"]["max"])
    ys = st.floats(0, grid["y"]["max"]) if model == "density" else st.floats(-1e6, 1e6)
    data = draw(st.lists(st.tuples(xs, ys).map(list), max_size=8))
    prior = {k: draw(num) for k in ("lambda", "lambda_x", "lambda_y", "l0", "l2", "l4", "l6")
             if draw(st.booleans())}
    if model == "density":
        prior["field"] = draw(st.sampled_from(["L", "P"]))
        kinds = st.one_of(st.sampled_from([{"kind": "uniform"}, {"kind": "paper_t1"}, {"kind": "paper_t2"}]),
                          st.builds(lambda mu, s: {"kind": "gaussian", "mu": mu, "sigma": s},
                                    st.floats(-20, 20), st.floats(0.01, 1e3)),
                          st.builds(lambda v: {"kind": "array", "values": [[v] * ny] * nx},
                                    st.floats(-50, 50) if prior["field"] == "L" else st.floats(0.001, 5)))
    else:
        kinds = st.one_of(st.builds(lambda v: {"kind": "constant", "value": v}, st.floats(-1e6, 1e6)),
                          st.builds(lambda a, b: {"kind": "linear", "slope": a, "intercept": b},
                                    st.floats(-1e3, 1e3), st.floats(-1e3, 1e3)),
                          st.builds(lambda v: {"kind": "array", "values": [v] * nx}, st.floats(-1e6, 1e6)))
    templates = draw(st.lists(kinds, min_size=1 if model == "regression" else 0, max_size=3))
    solver = {"method": draw(st.sampled_from(["newton", "massive", "gradient"])), "mass2": draw(num),
              "init": draw(st.sampled_from(["uniform", "kernel", "empirical", "coarse"]
                                           + [f"template:{j}" for j in range(len(templates))])),
              "init_mass2": draw(num), "max_iter": draw(st.integers(0, 12))}
    solver["min_iter"] = draw(st.integers(0, solver["max_iter"]))
    doc = {"model": model, "grid": grid, "data": data, "prior": prior, "templates": templates,
           "beta": draw(st.one_of(st.floats(0.01, 10), st.sampled_from([1e-12, 1e6, 1e12]))), "solver": solver}
    if templates and draw(st.booleans()):
        doc["weights"] = draw(st.lists(st.floats(0, 10), min_size=len(templates), max_size=len(templates)))
    return doc


def assert_clear(err: ConfigError):
    text = str(err)
    assert text and "\n" not in text and len(text) < 600, text
    assert "Traceback" not in text


@pytest.mark.filterwarnings("error::RuntimeWarning")  # an overflow or a NaN on the way is a failure too
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(documents(junk_too=False), documents(junk_too=True), focused()))
def test_every_document_is_a_solvable_problem_or_a_clear_config_error(doc):
    try:
        cfg = validate_config(doc)
    except ConfigError as e:
        assert_clear(e)
        return
    # accepted: the solver runs it to a finite answer (no exception, no NaN), the document round-trips
    assert validate_config(cfg) == cfg
    json.dumps(cfg, allow_nan=False)
    with deadline(60):
        res = api.fit(cfg)
    assert math.isfinite(res["energy"]), res["energy"]
    if cfg["model"] == "density":
        P = np.array(res["P"], dtype=float)
        assert np.all(np.isfinite(P)) and np.all(P >= 0)
        assert res["normalisation_error"] < 1e-6
    else:
        assert np.all(np.isfinite(res["h"]))


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.one_of(st.none(), st.booleans(), st.floats(allow_nan=True), st.integers(), st.text()),
                    lambda inner: st.one_of(st.lists(inner, max_size=4),
                                            st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                    max_leaves=20))
def test_random_json_never_escapes_the_gate(doc):
    try:
        validate_config(doc)
    except ConfigError as e:
        assert_clear(e)


# ------------------------------------------------------------------------------------------ the cases of issue 11
def paper(**over):
    doc = {"data": [[3, 3], [7, 12]]}
    doc.update(over)
    return doc


GRID_1024 = {"x": {"min": 1, "max": 10, "n": 1024}, "y": {"min": 1, "max": 15, "n": 1024}}


@pytest.mark.parametrize("doc, named", [
    (paper(grid=GRID_1024), ["1 048 576", "16 384", "coarser"]),
    (paper(grid=GRID_1024, prior={"field": "P"}, solver={"method": "massive", "mass2": 1}), ["16 384"]),
    (paper(grid={"x": {"min": 1, "max": 10, "n": 96}, "y": {"min": 1, "max": 15, "n": 64}},
           prior={"field": "P", "l6": 0.1}, solver={"method": "massive", "mass2": 1}),
     ["field P with an l4/l6 prior", "6 144", "4 096"]),
    (paper(prior={"lambda": 10 ** 400}), ["prior.lambda", "floating-point range"]),
    (paper(grid={"x": {"min": -1e308, "max": 10, "n": 10}}), ["grid.x.min", "magnitude"]),
    (paper(grid={"x": {"min": -1e300, "max": 1e300, "n": 10}}), ["grid.x.min"]),
    (paper(prior={"lambda": 1e300}, templates=[{"kind": "paper_t1"}, {"kind": "paper_t2"}]), ["prior.lambda"]),
    (paper(prior={"lambda": 1e11, "l2": 100}), ["too stiff"]),
    (paper(grid={"x": [1, 10, 10]}), ["grid.x", "object"]),
    (paper(templates=[{"kind": ["uniform"]}]), ["templates[0].kind"]),
    (paper(templates=[{"kind": {"a": 1}}]), ["templates[0].kind"]),
    (paper(templates=[{"kind": "array", "values": {"a": 1}}]), ["templates[0].values", "10 x 15"]),
    (paper(templates=[{"kind": "array", "values": [[(-1) ** (i + j) * 1e308 for j in range(15)]
                                                   for i in range(10)]}]), ["templates[0].values", "magnitude"]),
    (paper(templates=[{"kind": "array", "values": [[50.0] * 15 for _ in range(10)]}, {"kind": "uniform"}],
           weights=[1, 1]), None),  # a large but sensible log-density is accepted
    (paper(templates=[{"kind": "array", "values": [[2e4] * 15 for _ in range(10)]}]), ["templates[0]", "strays"]),
    (paper(prior={"field": "P"}, solver={"method": "massive", "mass2": 1},
           templates=[{"kind": "array", "values": [[-1.0] * 15 for _ in range(10)]}]), ["negative"]),
    (paper(prior={"field": "P"}, solver={"method": "massive", "mass2": 1},
           templates=[{"kind": "array", "values": [[0.0] * 15 for _ in range(10)]}]), ["zero at every y"]),
    (paper(prior={"field": "P"}, solver={"method": "massive", "mass2": 1},
           templates=[{"kind": "gaussian", "mu": 1e300, "sigma": 1}]), ["templates[0].mu"]),
    (paper(prior={"field": "P"}, solver={"method": "massive", "mass2": 1},
           templates=[{"kind": "gaussian", "mu": 1e6, "sigma": 1}]), ["zero at every y"]),
    (paper(templates=[{"kind": "gaussian", "mu": 1e6, "sigma": 1}]), ["templates[0]", "log"]),
    (paper(solver={"min_iter": 10, "max_iter": 5}), ["min_iter", "max_iter"]),
    (paper(solver={"max_iter": 100_001}), ["max_iter", "100 000"]),
    (paper(grid={"x": {"min": 1, "max": 10, "n": 128}, "y": {"min": 1, "max": 15, "n": 128}},
           solver={"max_iter": 1000}), ["node-iterations"]),
    (paper(solver={"method": "massive", "mass2": 1e-14}), ["solver.mass2", "too small"]),
    (paper(solver={"init_mass2": 1e-13}), ["solver.init_mass2", "too small"]),
    (paper(grid={"x": {"min": 1, "max": 10, "n": 1024}, "y": {"min": 1, "max": 15, "n": 16}},
           prior={"l6": 1.0}), ["too stiff"]),
    # a spacing is judged relative to the coordinates (any units): 1e-12 wide is fine in picometres, so the paper's
    # data fall outside it; a spacing below the coordinates' resolution is still refused
    (paper(grid={"x": {"min": 0, "max": 1e-12, "n": 10}}), ["outside", "widen the grid"]),
    (paper(grid={"x": {"min": 1e6, "max": 1e6 + 1e-6, "n": 10}}), ["spacing"]),
    (paper(data=[[1, 2]] * 100_001), ["100 001", "100 000"]),
    (paper(templates=[{"kind": "uniform"}] * 17), ["17 templates", "16"]),
    (paper(data=[[None, None]]), ["data[0][0]"]),
    (paper(solver={"init": "template:0"}), ["names no template"]),
    ({"model": "regression", "grid": {"x": {"min": 0, "max": 1, "n": 5}}, "data": [[0.5, 1.0]]}, ["template"]),
    ({"model": "regression", "grid": {"x": {"min": 0, "max": 1, "n": 5}}, "data": [[0.5, 1.0]],
      "prior": {"lambda": 1e300, "l0": 1}, "templates": [{"kind": "constant", "value": 0}]}, ["prior.lambda"]),
    ({"model": "regression", "grid": {"x": {"min": 0, "max": 1, "n": 5}}, "data": [[0.5, 1e300]],
      "templates": [{"kind": "constant", "value": 0}]}, ["data[0][1]"]),
])
def test_issue_cases_are_refused_with_a_message_naming_the_problem(doc, named):
    if named is None:
        api.fit(validate_config(doc))
        return
    with pytest.raises(ConfigError) as exc:
        validate_config(doc)
    assert_clear(exc.value)
    for word in named:
        assert word in str(exc.value), str(exc.value)


def test_numpy_scalars_and_arrays_are_accepted_wherever_numbers_and_lists_are():
    doc = {"data": np.array([[3.0, 3.0], [7.0, 12.0]]), "prior": {"lambda": np.float32(0.5), "l2": np.float64(1)},
           "templates": [{"kind": "paper_t1"}, {"kind": "array", "values": np.zeros((10, 15))}],
           "weights": np.array([0.5, 0.5]), "beta": np.int64(2), "solver": {"max_iter": np.int32(7)}}
    cfg = validate_config(doc)
    assert cfg["prior"]["lambda"] == 0.5 and cfg["beta"] == 2.0 and cfg["solver"]["max_iter"] == 7
    assert type(cfg["solver"]["max_iter"]) is int and cfg["weights"] == [0.5, 0.5]
    json.dumps(cfg, allow_nan=False)


def test_the_worst_accepted_problem_is_refused_one_node_further():
    """The budget's edges: exactly max_nodes is accepted, one more row is not; lifting the budget accepts it."""
    side = int(LIMITS.max_nodes ** 0.5)
    ok = paper(grid={"x": {"min": 1, "max": 10, "n": side}, "y": {"min": 1, "max": 15, "n": side}})
    validate_config(ok)
    over = paper(grid={"x": {"min": 1, "max": 10, "n": side + 1}, "y": {"min": 1, "max": 15, "n": side}})
    with pytest.raises(ConfigError, match="exceeds the limit"):
        validate_config(over)
    assert validate_config(over, limits=UNLIMITED)["grid"]["x"]["n"] == side + 1
    with using(UNLIMITED):
        validate_config(over)
    with pytest.raises(ConfigError):
        validate_config(over, limits=lifted(max_nodes=100))


def test_the_gate_refuses_a_huge_grid_without_allocating_it():
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError):
            validate_config(paper(grid=GRID_1024, prior={"field": "P"}, solver={"method": "massive", "mass2": 1}))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * 1024 * 1024  # a 1024 x 1024 field alone is 8 MB


def test_sweep_points_are_within_the_budget():
    cfg = validate_config(paper(templates=[{"kind": "paper_t1"}, {"kind": "paper_t2"}]))
    assert validate_sweep(cfg, 0.1, 2, 50) == (0.1, 2.0, 50)
    cap = str(LIMITS.max_sweep_points)
    for args, word in [((0.1, 2, 1_000_000), cap), ((0.1, 2, 10 ** 9), cap), ((2, 0.1, 5), "MIN < MAX"),
                       ((0, 2, 5), ">="), ((0.1, 2, 1), ">= 2"), ((0.1, 2, 2.5), "whole")]:
        with pytest.raises(ConfigError, match=word):
            validate_sweep(cfg, *args)
    big = validate_config(paper(grid={"x": {"min": 1, "max": 10, "n": 128}, "y": {"min": 1, "max": 15, "n": 128}},
                                templates=[{"kind": "paper_t1"}, {"kind": "paper_t2"}]))
    with pytest.raises(ConfigError, match="node-fits"):
        validate_sweep(big, 0.1, 2, 50)


@pytest.mark.parametrize("raw, word", [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"data": ' + "[" * 300 + "]" * 300 + "}", "nested"),
    ('{"prior": {"lambda": ' + "9" * 5000 + "}}", "prior.lambda"),
    ('{"prior": {"lambda": NaN}}', "prior.lambda"),
    ('{"beta": 1e999}', "beta"),
    (b"\xff\xfe\x00garbage", "UTF-8"),
    ('{"a": ', "not valid JSON"),
])
def test_documents_from_text_are_refused_clearly(raw, word):
    with pytest.raises(ConfigError) as exc:
        validate_config(parse_document(raw))
    assert_clear(exc.value)
    assert word in str(exc.value)


def test_a_document_over_the_size_limit_is_refused_before_parsing():
    with pytest.raises(ConfigError, match="over the limit"):
        parse_document(b" " * (LIMITS.max_document_bytes + 1))


def test_load_config_refuses_a_directory_and_an_oversized_file(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(LIMITS.max_document_bytes + 1)
    with pytest.raises(ConfigError, match="over the limit"):
        load_config(big)


def test_a_run_over_its_time_budget_is_stopped_with_a_message():
    """A problem past the budget (field P with an l6 prior by Newton on 64 x 64: about 30 s) is stopped early."""
    cfg = validate_config(paper(grid={"x": {"min": 1, "max": 10, "n": 64}, "y": {"min": 1, "max": 15, "n": 64}},
                                prior={"field": "P", "l6": 1.0}, solver={"method": "newton", "init": "uniform"}),
                          limits=UNLIMITED)
    with pytest.raises(RunBudgetExceeded, match="time budget"):
        with using(UNLIMITED), deadline(0.3):
            api.fit(cfg)


# ------------------------------------------------------------------------------------------ the CLI
def cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "bftcore", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


CLI_CASES = {
    "bigint": '{"prior": {"lambda": ' + "9" * 400 + "}}",
    "xmin": json.dumps({"grid": {"x": {"min": -1e308, "max": 10, "n": 10}}}),
    "gridlist": json.dumps({"grid": {"x": [1, 10, 10]}}),
    "kindlist": json.dumps({"templates": [{"kind": ["uniform"]}]}),
    "nested": "[" * 100_000 + "]" * 100_000,
    "regression": json.dumps({"model": "regression", "grid": {"x": {"min": 0, "max": 1, "n": 5}},
                              "data": [[0.5, 1]], "prior": {"lambda": 1e300, "l0": 1},
                              "templates": [{"kind": "constant", "value": 0}]}),
    "huge_template": json.dumps({"templates": [{"kind": "array", "values": [[1e308] * 15] * 10}]}),
    "big_grid": json.dumps({"grid": GRID_1024}),
    "binary": None,
}


@pytest.mark.parametrize("name", list(CLI_CASES))
def test_cli_refuses_every_bad_file_with_one_line_and_exit_2(tmp_path, name):
    path = tmp_path / f"{name}.json"
    if CLI_CASES[name] is None:
        path.write_bytes(bytes(range(256)) * 4)
    else:
        path.write_text(CLI_CASES[name])
    out = cli("fit", str(path))
    assert out.returncode == 2, out.stderr
    assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stderr.startswith("error: ") and "Traceback" not in out.stderr


@pytest.mark.parametrize("args, word", [
    (["fit", "."], "directory"),
    (["sweep", "{cfg}", "--beta", "0.1:2:1000000"], str(LIMITS.max_sweep_points)),
    (["sweep", "{cfg}", "--beta", "0.1:2:1000000000"], str(LIMITS.max_sweep_points)),
    (["sweep", "{cfg}", "--beta", "0.1:2:" + "9" * 5000], "--beta"),
    (["sweep", "{cfg}", "--beta", "nan:2:5"], "finite"),
    (["fit"], "config"),
    (["fit", "{cfg}", "--bogus"], "--bogus"),
])
def test_cli_bad_arguments_give_one_line_and_exit_2(tmp_path, args, word):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(paper(templates=[{"kind": "paper_t1"}, {"kind": "paper_t2"}])))
    out = cli(*[a.replace("{cfg}", str(cfg)) for a in args])
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and word in out.stderr, out.stderr


def test_cli_no_limits_lifts_the_budget_but_not_the_checks(tmp_path):
    over = tmp_path / "over.json"
    over.write_text(json.dumps(paper(grid={"x": {"min": 1, "max": 10, "n": 129},
                                           "y": {"min": 1, "max": 15, "n": 128}})))
    assert cli("fit", str(over)).returncode == 2
    out = cli("fit", str(over), "--no-limits", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["converged"]
    nan = tmp_path / "nan.json"
    nan.write_text('{"beta": NaN}')
    out = cli("fit", str(nan), "--no-limits")
    assert out.returncode == 2 and "beta" in out.stderr


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                  HealthCheck.function_scoped_fixture])
@given(doc=st.one_of(documents(junk_too=True), focused()), command=st.sampled_from(["fit", "basins", "sweep"]))
def test_cli_ends_every_document_in_exit_0_or_2_with_one_line(tmp_path, capsys, doc, command):
    """In process, so that many documents can be tried: the exit status is 0 (printed a result) or 2 (one line)."""
    from bftcore.__main__ import main
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(to_plain(doc)))
    args = [command, str(path)] + (["--beta", "0.5:2:3"] if command == "sweep" else [])
    code = main(args)
    out, err = capsys.readouterr()
    assert code in (0, 2), err
    if code == 2:
        assert out == "" and len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    else:
        assert out and err == ""


# ------------------------------------------------------------------------------- one-dimensional densities, choose
ONE_D_GRID = {"y": {"min": -4, "max": 4, "n": 50, "boundary": "neumann"}}


def test_a_density_grid_without_x_is_one_dimensional_and_takes_plain_y_values():
    """Issue 14: a document without grid.x is p(y) on one x node; its data may be the y values alone."""
    cfg = validate_config({"grid": ONE_D_GRID, "data": [0.5, -1.25, [0.0, 2.0]]})
    assert cfg["grid"]["x"] == {"min": 0.0, "max": 0.0, "n": 1, "boundary": "neumann"}
    assert cfg["data"] == [[0.0, 0.5], [0.0, -1.25], [0.0, 2.0]]
    res = api.fit(cfg)
    P = np.asarray(res["P"])
    assert P.shape == (1, 50) and abs(P.sum() * 8 / 49 - 1) < 1e-12 and res["converged"]
    # without any grid the document is still the paper mesh, and plain numbers are then refused with the reason
    assert validate_config({})["grid"]["x"]["n"] == 10
    with pytest.raises(ConfigError, match=r"data\[0\] must be an \[x, y\] pair.*plain y values"):
        validate_config({"data": [1.0]})
    with pytest.raises(ConfigError, match="outside"):
        validate_config({"grid": ONE_D_GRID, "data": [7.5]})


@pytest.mark.parametrize("choose, message", [
    ({"lambda": "cv"}, r"choose.lambda must be \"evidence\""),
    ({"beta": "evidence"}, "unknown key.*'beta' in choose"),
    ({"lambda": {"min": 10, "max": 1}}, "min .* must be smaller than max"),
    ({"lambda": {"n": 1000}}, "exceed the limit of 200"),
    ({"lambda": {"by": "cv"}}, "choose.lambda.by"),
    ("evidence", "choose must be an object"),
])
def test_choose_is_checked_at_the_gate(choose, message):
    with pytest.raises(ConfigError, match=message):
        validate_config({"grid": ONE_D_GRID, "choose": choose})


def test_choose_is_normalised_and_refused_where_the_evidence_is_not_defined():
    cfg = validate_config({"choose": {"lambda": "evidence"}})
    # a density's lambda has units: its range is the evidence's own, from the grid and the data (issue 27)
    assert cfg["choose"] == {"lambda": {"by": "evidence", "min": None, "max": None, "n": 30}}
    assert "choose" not in validate_config({})          # documents that do not ask are unchanged
    with pytest.raises(ConfigError, match="field L only"):
        validate_config({"prior": {"field": "P"}, "choose": {"lambda": "evidence"}})
    with pytest.raises(ConfigError, match="prior mixture"):
        validate_config({"templates": [{"kind": "paper_t1"}, {"kind": "paper_t2"}], "choose": {"lambda": "evidence"}})
    reg = validate_config({"model": "regression", "templates": [{"kind": "constant", "value": 0}],
                           "prior": {"l0": 0.1}, "choose": {"beta": {"min": 0.1, "max": 10, "n": 5}, "l0": "evidence"}})
    assert reg["choose"]["beta"] == {"by": "evidence", "min": 0.1, "max": 10.0, "n": 5}
    with pytest.raises(ConfigError, match="node-fits"):
        validate_config({"grid": {"x": {"n": 128}, "y": {"n": 128}}, "choose": {"lambda": {"n": 30}}})


# ------------------------------------------------------------------------------------------ posterior draws
def test_draw_counts_are_checked_before_anything_is_drawn(monkeypatch):
    """A billion posterior, Laplace or prior draws would be terabytes: each is refused by the budget with the batch
    size that fits, under a megabyte of allocation, and a posterior summary refuses before it fits the MAP."""
    from bftcore.estimator import BFTRegressor
    from bftcore.foundations.config import check_samples
    from bftcore.models import evidence, regression
    from bftcore.models.density import build_density, prior_samples

    rng = np.random.default_rng(0)
    x = rng.uniform(0, 10, 30)
    reg = BFTRegressor().fit(x, np.sin(x))
    dens_cfg = validate_config({"data": [[2, 3], [5, 8], [7, 12]]})
    problem = build_density(dens_cfg)
    L = api.run(dens_cfg).L
    calls = [lambda: reg.sample_y([1.0, 2.0], n_samples=10**9),
             lambda: reg.model_.posterior_samples(1.0, 10**9),
             lambda: evidence.laplace_samples(problem, L, 10**9, rng),
             lambda: prior_samples(problem, 10**9, rng)]
    for call in calls:
        tracemalloc.start()
        with pytest.raises(ConfigError, match=r"the limit of 5 000 000 numbers( of one result)?; draw fewer at a "
                                              r"time"):
            call()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 2**20
    monkeypatch.setattr(api, "run", lambda *a, **k: pytest.fail("the MAP was fitted before the refusal"))
    with pytest.raises(ConfigError, match="Laplace samples|posterior samples"):
        api.posterior_summary(dens_cfg, n=10**9)
    # the budget is the only reason: lifted, the count passes; the shape of the count is checked always
    with using(UNLIMITED):
        assert check_samples(10**9, 150) == 10**9
    for bad in (-1, 2.5, True, "3"):
        with pytest.raises(ConfigError, match="whole number >= 0"):
            check_samples(bad, 150)
    # within the budget the draws are what they were
    assert reg.sample_y([1.0, 2.0], n_samples=3).shape == (2, 3)
    assert regression.RegressionModel.posterior_samples(reg.model_, 1.0, 2).shape == (2, reg.model_.n)


# ------------------------------------------------------------------------------------------------ outputs (issue 25)
class _Huge:
    """An array-like that says its shape and fails if anything converts or reads it: a refusal that comes from the
    budget must come from the shape alone, before any conversion or allocation."""

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


def _peak(call, match: str) -> int:
    """The peak of Python allocations while ``call`` is refused with a ConfigError matching ``match``."""
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match=match):
            call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def regressor():
    from bftcore.estimator import BFTRegressor
    x = np.random.default_rng(1).uniform(1, 9, 30)
    return BFTRegressor().fit(x, np.sin(x))


def test_sample_y_counts_draws_times_query_points_before_allocating(regressor):
    # the door counted draws x nodes: 100 draws at 10^6 query points returned 800 MB, at 5 10^6 numpy was asked for
    # 3.7 GiB.  Now draws x query points are counted from X's length, before X is converted
    with pytest.raises(ConfigError, match=r"^BFTRegressor.sample_y: 100 draws at 10 000 000 query points are "
                                          r"1 000 000 000 numbers \(7.45 GiB of float64\), over the limit of 5 000 000 "
                                          r"numbers of one result; ask for at most 50 000 query points a call, "
                                          r"or lift"):
        regressor.sample_y(_Huge(10**7), n_samples=100)
    for n_query, draws, fix in ((10**7, 1, "ask for at most 5 000 000 query points a call"),
                                (10**6, 100, r"draw fewer at a time \(batches of at most 5 draws at these points\)")):
        q = np.linspace(1, 9, n_query)
        assert _peak(lambda: regressor.sample_y(q, n_samples=draws), "over the limit of 5 000 000 numbers of one "
                     "result; " + fix) < 2**20
    # within the budget the draws are there, one column a draw, at the nodes nearest to X
    q = np.linspace(1, 9, 1000)
    draws = regressor.sample_y(q, n_samples=5000)
    assert draws.shape == (1000, 5000)
    ix = regressor.model_.axis.snap(q)
    assert np.array_equal(draws[0], regressor.sample_y(q[:1], n_samples=5000)[0])      # the same seed, node ix[0]
    assert abs(draws.mean(axis=1) - regressor.h_[ix]).max() < 6 * regressor.std_[ix].max() / np.sqrt(5000)


def test_predictions_are_budgeted_from_the_query_shape(regressor):
    from bftcore.estimator import BFTDensity
    for call, match in [
        (lambda: regressor.predict(_Huge(10**7)), r"^BFTRegressor.predict: 10 000 000 query points are 10 000 000 "
                                                  r"numbers .* ask for at most 5 000 000 query points a call"),
        (lambda: regressor.predict(_Huge(3 * 10**6), return_std=True), r"3 000 000 query points \(2 numbers each\) "
                                                                       r"are 6 000 000 numbers"),
        (lambda: regressor.predict(_Huge(10**4), return_cov=True), r"the covariance of 10 000 query points is "
                                                                   r"100 000 000 numbers .* at most 2 236 points"),
        (lambda: regressor.score(_Huge(10**7), _Huge(10**7)), "BFTRegressor.score: 10 000 000 query points"),
    ]:
        assert _peak(call, match) < 2**20
    density = BFTDensity(grid=Grid.paper("periodic")).fit([[3, 3], [7, 12]])
    for call in (density.predict_proba, density.score_samples, density.score):
        assert _peak(lambda: call(_Huge(10**7, 2)), r"10 000 000 query points are 10 000 000 numbers") < 2**20
    # lifted, the same count is allowed through (the budget is the only reason)
    with using(lifted(max_output_values=None)):
        assert regressor.predict(np.linspace(1, 9, 10)).shape == (10,)


def test_data_are_counted_before_they_are_converted():
    # 10^6 points were turned into lists (+240 MB, 2-4 s) before the count refused them
    from bftcore.estimator import BFTDensity, BFTRegressor
    points = np.random.default_rng(0).uniform(2, 9, (10**6, 2))
    match = r"1 000 000 points.* 100 000"
    assert _peak(lambda: validate_config({"data": points}), match) < 2**20
    assert _peak(lambda: BFTDensity().fit(points), match) < 2**20
    assert _peak(lambda: BFTRegressor().fit(points[:, 0], points[:, 1]), match) < 2**20
    assert _peak(lambda: BFTDensity().fit(_Huge(10**6, 2)), match) < 2**20
    assert _peak(lambda: validate_config({"templates": [{"kind": "array", "values": _Huge(10**4, 10**4)}]}),
                 r"templates\[0\].values of 100 000 000 values exceeds the limit of 16 384") < 2**20


def test_documents_refuse_complex_and_masked_arrays_rather_than_converting_them():
    with pytest.raises(ConfigError, match="holds complex numbers; give real numbers"):
        validate_config({"data": np.array([[3 + 1j, 3], [7, 12]])})
    with pytest.raises(ConfigError, match=r"holds a masked array with 1 masked value\(s\)"):
        validate_config({"data": np.ma.masked_array([[3.0, 3.0], [7.0, 12.0]], mask=[[0, 1], [0, 0]])})
    unmasked = validate_config({"data": np.ma.masked_array([[3.0, 3.0], [7.0, 12.0]], mask=False)})
    assert unmasked["data"] == [[3.0, 3.0], [7.0, 12.0]]


@pytest.mark.parametrize("bad, where", [(float("nan"), "data[7][1] (y) must be a finite number"),
                                        (float("inf"), "data[7][1] (y) must be a finite number"),
                                        (1e300, "data[7][1] (y) = 1e+300 is an absurd magnitude")])
def test_the_gates_fast_path_for_float_data_refuses_what_the_point_by_point_checks_refuse(bad, where):
    """Float pairs (what numpy arrays become) are checked at once; a bad one falls back to the point-by-point
    checks, so the message names the point, and the accepted points equal the slow path's (ints take it)."""
    pts = np.column_stack([np.linspace(1.0, 10.0, 20), np.linspace(1.0, 15.0, 20)])
    fast = validate_config({"data": pts})
    slow = validate_config({"data": [[int(x) if x.is_integer() else x for x in p] for p in pts.tolist()]})
    assert fast["data"] == slow["data"] == pts.tolist()
    pts[7, 1] = bad
    with pytest.raises(ConfigError, match=re.escape(where)):
        validate_config({"data": pts})
    one_d = validate_config({"grid": {"y": {"min": 0.0, "max": 2.0, "n": 20}}, "data": [0.5, 1.5]})
    assert one_d["data"] == [[0.0, 0.5], [0.0, 1.5]]
    with pytest.raises(ConfigError, match=re.escape("data[1][1] (y) must be a finite number")):
        validate_config({"grid": {"y": {"min": 0.0, "max": 2.0, "n": 20}}, "data": [0.5, float("nan")]})
    with pytest.raises(ConfigError, match="must be a number"):  # a bool is not a coordinate on either path
        validate_config({"data": [[1.0, 2.0], [True, 3.0]]})


def test_a_valid_documents_copy_shares_nothing_with_it():
    from bftcore.foundations.config import Valid, copy_document
    cfg = validate_config({"data": [[1.0, 2.0], [3.0, 4.0]]})
    c = copy_document(cfg)
    assert isinstance(c, Valid) and c == cfg and list(c) == list(cfg)
    c["data"][0][0] = 9.0
    c["prior"]["lambda"] = 7.0
    assert cfg["data"][0][0] == 1.0 and cfg["prior"]["lambda"] == 1.0
    # any document: nested lists and objects are fresh at every level, other objects deep-copied
    doc = {"data": [[1.0, 2.0], 3.0], "templates": [{"kind": "array", "values": [[1.0, 2.0], [3.0, 4.0]]}],
           "other": {"a": [1, {"b": [2.0]}], "s": "text", "n": None, "t": True}, "arr": np.arange(3.0)}
    c = copy_document(doc)
    assert list(c) == list(doc) and c["other"] == doc["other"] and np.array_equal(c["arr"], doc["arr"])
    c["data"][0][1] = -1.0
    c["templates"][0]["values"][1][0] = -1.0
    c["other"]["a"][1]["b"].append(5.0)
    c["arr"][0] = -1.0
    assert doc["data"][0][1] == 2.0 and doc["templates"][0]["values"][1][0] == 3.0
    assert doc["other"]["a"][1]["b"] == [2.0] and doc["arr"][0] == 0.0


def test_the_gates_one_walk_over_float_pairs_equals_the_general_walk_and_shares_nothing():
    """Float pairs are read, copied and made an array in one walk (``_float_pair_list``); the same data as tuples take
    the general walk (``to_plain``): the valid documents are equal, and neither shares a pair with the caller's data,
    not even a pair the caller's list holds twice."""
    rng = np.random.default_rng(3)
    pair = [2.0, 3.0]
    data = rng.uniform(1.0, 10.0, (50, 2)).tolist() + [pair, pair]
    doc = {"grid": {"x": {"min": 1, "max": 10, "n": 10}, "y": {"min": 1, "max": 10, "n": 12}}, "data": data}
    one_walk = validate_config(doc)
    general = validate_config({**doc, "data": tuple(map(tuple, data))})
    assert one_walk == general and one_walk["data"] == data
    assert not any(p is q for p in one_walk["data"] for q in data)
    assert one_walk["data"][-1] is not one_walk["data"][-2]
    one_walk["data"][-1][0] = 9.0
    assert pair == [2.0, 3.0] and one_walk["data"][-2] == [2.0, 3.0]


def _plain_by_walk(obj):
    """The general route of ``to_plain``, written out independently: every element converted on its own."""
    if isinstance(obj, (list, tuple)):
        return [_plain_by_walk(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _plain_by_walk(v) for k, v in obj.items()}
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj)
    return obj


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.lists(st.sampled_from(ADVERSARIAL[:26]), max_size=3),
                          st.sampled_from([0, 1.5, True, np.float64(2.0), np.int64(3), None])), max_size=6))
def test_to_plains_fast_paths_give_what_the_element_walk_gives(values):
    """A list of plain numbers, and a list of such lists (data points), are copied at once; the result is the
    element-by-element conversion: types included (a bool stays a bool, numpy scalars become Python numbers), and a
    fresh list at every level, never the caller's."""
    values = [v for v in values if not isinstance(v, (str, dict)) and v is not None]
    out = to_plain(values)
    assert out == _plain_by_walk(values)
    assert [type(v) for v in out] == [type(v) for v in _plain_by_walk(values)]
    assert out is not values and all(o is not v for o, v in zip(out, values) if isinstance(o, list))
    pts = [[1.0, 2.0], [3, 4.5]]
    copied = to_plain(pts)
    assert copied == pts and copied[0] is not pts[0]


def test_the_depth_limit_still_counts_a_list_of_numbers():
    """The depth check skips walking data points but still counts their level: at a budget of 2 levels, a document
    with data points (3 levels) is refused, and the same at 3 passes."""
    from bftcore.foundations.limits import Limits
    doc = {"data": [[1.0, 2.0], [3.0, 4.0]]}
    with pytest.raises(ConfigError, match="nested 3 levels deep, over the limit of 2"):
        validate_config(doc, Limits(max_depth=2))
    assert validate_config(doc, Limits(max_depth=3))["data"] == doc["data"]
