"""Robust regression as a document and a problem kind (bftcore.foundations.config._robust, bftcore.models.robust's
RobustRegressionKind, registered in bftcore.models.problems): the gate's checks and messages, the kind's claims, the
Gaussian limit against plain regression through the whole route, the units of every parameter end to end, the CLI,
and the preset robust_prior against the demo it comes from."""
import copy
import json

import numpy as np
import pytest

from bftcore import api
from bftcore.__main__ import main
from bftcore.foundations.config import ConfigError, validate_config
from bftcore.models import presets, problems, robust


def doc(**extra) -> dict:
    """A small regression document: 41 nodes on [0, 2], a bump, an outlier at x = 1."""
    rng = np.random.default_rng(3)
    x = np.linspace(0.0, 2.0, 41)[::2]
    y = np.sin(2 * x) + 0.1 * rng.standard_normal(x.size)
    data = np.column_stack([x, y]).tolist() + [[1.0, 2.5]]
    out = {"model": "regression", "grid": {"x": {"min": 0.0, "max": 2.0, "n": 41, "boundary": "neumann"}},
           "data": data, "prior": {"lambda": 0.05, "l2": 1.0}, "templates": [{"kind": "constant", "value": 0.2}],
           "beta": 100.0}
    for key, value in extra.items():
        if key == "potential":
            out["prior"] = {**out["prior"], "potential": value}
        else:
            out[key] = value
    return out


# ------------------------------------------------------------------------------------------------------ the gate
def test_the_gate_completes_a_robust_document_and_round_trips_it():
    cfg = validate_config(doc(potential={"name": "cusp"}, data_term={"name": "mixture11"}))
    assert cfg["prior"]["potential"] == {"name": "cusp", "a": 1.0, "b": 2.0, "gamma": 0.7, "s0": 0.0}
    assert cfg["data_term"] == {"name": "mixture11", "mu": 1.0}
    assert cfg["solver"]["method"] == "irls" and cfg["solver"]["max_iter"] == 500
    assert validate_config(json.loads(json.dumps(cfg))) == cfg
    inv = validate_config(doc(potential={"name": "inverted_cup"}))
    assert inv["prior"]["potential"]["a"] == -1.0 and inv["data_term"] == {"name": "gaussian"}
    assert validate_config(doc(data_term={"name": "insensitive", "eps": 0.5}))["prior"]["potential"] == {
        "name": "quadratic", "s0": 0.0}
    assert validate_config(doc(solver={"max_iter": 20}))["solver"]["method"] == "newton"  # plain stays plain
    assert "data_term" not in validate_config(doc()) and "potential" not in validate_config(doc())["prior"]


@pytest.mark.parametrize("extra, message", [
    ({"potential": {"name": "tent"}}, r"prior.potential.name must be one of 'quadratic', 'cup'"),
    ({"data_term": {"name": "huber"}}, r"data_term.name must be one of 'gaussian', 'mixture2'"),
    ({"potential": {"name": "cup", "b": 0}}, r"prior.potential.b must be > 0, got 0"),
    ({"potential": {"name": "cup", "b": -1}}, r"prior.potential.b must be > 0"),
    ({"potential": {"name": "cup", "gamma": 0}}, r"prior.potential.gamma must be > 0"),
    ({"potential": {"name": "cup", "a": -1}}, r"a of the cup potential must be > 0.*use inverted_cup"),
    ({"potential": {"name": "inverted_cup", "a": 2}}, r"a of the inverted_cup potential must be < 0"),
    ({"potential": {"name": "cusp", "a": 0}}, r"a of the cusp potential must be > 0"),
    ({"potential": {"name": "cup", "b": float("nan")}}, r"prior.potential.b must be a finite number"),
    ({"potential": {"name": "cup", "b": "2"}}, r"prior.potential.b must be a number"),
    ({"potential": {"name": "quadratic", "b": 2}}, r"the quadratic potential takes s0 only, not b"),
    ({"potential": {"name": "cup", "width": 2}}, r"unknown key\(s\) 'width' in prior.potential"),
    ({"potential": "cup"}, r"prior.potential must be a JSON object"),
    ({"data_term": {"name": "insensitive", "eps": -0.1}}, r"data_term.eps must be >= 0"),
    ({"data_term": {"name": "mixture2", "mu": -1}}, r"data_term.mu must be >= 0"),
    ({"data_term": {"name": "mixture2", "eps": 1}}, r"the mixture2 data term takes mu, not eps"),
    ({"data_term": {"name": "gaussian", "mu": 1}}, r"the gaussian data term takes no parameter, not mu"),
    ({"data_term": {"name": "insensitive", "sigma": 0.1}}, r"data_term.sigma: .*beta = 1/sigma\^2.*set beta"),
    ({"data_term": {"name": "insensitive"}, "solver": {"method": "newton"}},
     r"solver.method 'newton': .* solved by IRLS; set solver.method to \"irls\""),
    ({"data_term": {"name": "insensitive"}, "templates": [{"kind": "constant", "value": 0},
                                                           {"kind": "constant", "value": 1}]},
     r"a robust regression takes one template .* got 2"),
    ({"potential": {"name": "cup"}, "choose": {"lambda": "evidence"}},
     r"choose: the evidence is not defined for a non-Gaussian prior potential"),
])
def test_the_gate_refuses_what_the_robust_solver_does_not_support_naming_the_key(extra, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(doc(**extra))


def test_a_density_takes_a_prior_potential_but_no_data_term():
    """A density's data term is its counts; its prior potential (and IRLS alone) is the robust_density kind's
    (tests/test_robust_density.py)."""
    with pytest.raises(ConfigError, match="a density's data term is its counts"):
        validate_config({"model": "density", "data_term": {"name": "insensitive"}})
    for good in ({"prior": {"potential": {"name": "cup"}}}, {"solver": {"method": "irls"}}):
        assert validate_config({"model": "density", **good}).kind is problems.ROBUST_DENSITY


# ------------------------------------------------------------------------------------------------------ the kind
def test_the_robust_kind_claims_robust_documents_and_not_plain_regression():
    for extra in ({"potential": {"name": "cup"}}, {"data_term": {"name": "insensitive"}},
                  {"solver": {"method": "irls"}}):
        assert validate_config(doc(**extra)).kind is problems.ROBUST_REGRESSION
    assert validate_config(doc()).kind is problems.REGRESSION
    assert validate_config(presets.regression_presets()["two_trends"]).kind is problems.REGRESSION


@pytest.mark.parametrize("extra", [{}, {"prior": {"lambda": 0.3, "l0": 0.2, "l2": 1.0}},
                                   {"prior": {"lambda": 2e-4, "l4": 1.0},
                                    "templates": [{"kind": "linear", "slope": 0.5, "intercept": -0.1}]}])
def test_the_quadratic_potential_with_the_gaussian_data_term_is_plain_regression_through_the_whole_route(extra):
    plain = {**doc(), **extra}
    robust_doc = copy.deepcopy(plain)
    robust_doc["prior"] = {**plain["prior"], "potential": {"name": "quadratic"}}
    robust_doc["data_term"] = {"name": "gaussian"}
    cfg = validate_config(robust_doc)
    assert cfg.kind is problems.ROBUST_REGRESSION
    fit, ref = api.run(cfg), api.run(plain)
    np.testing.assert_allclose(fit.h, ref.h, rtol=0, atol=1e-10 * np.max(np.abs(ref.h)))
    r, p = api.fit(cfg), api.fit(plain)
    assert r["energy"] == pytest.approx(p["energy"], rel=1e-10)
    assert r["train_error"] == pytest.approx(p["train_error"], rel=1e-10)
    assert r["converged"] and r["kind"] == "robust_regression" and "kind" not in p


def test_iterate_yields_one_record_per_irls_step_with_a_falling_energy():
    cfg = validate_config(doc(potential={"name": "cup"}, data_term={"name": "insensitive"}))
    records = list(api.iterate(cfg))
    fit = api.run(cfg)
    assert len(records) == fit.fit.iterations + 1 > 2 and records[0].method == "start"
    assert [r.iteration for r in records] == list(range(len(records)))
    E = np.array([r.energy for r in records])
    assert np.all(np.diff(E) <= 1e-12 * abs(E[0]))      # the line search never raises the energy
    np.testing.assert_array_equal(records[-1].h, fit.h)
    # the energy is the negative log posterior over beta, evaluated independently here
    pb = robust.problem_from_config(cfg)
    assert E[-1] == pytest.approx(pb.value(fit.h) / cfg["beta"], rel=1e-12)
    assert records[-1].converged and fit.to_document()["verdict"].startswith("converged")


def test_iterate_streams_the_records_while_irls_runs_and_they_are_solves(monkeypatch):
    """The dashboard animates a kind by consuming iterate one record at a time: the first record must come before the
    run ends.  Counted, not timed: the IRLS matrices built when the first record arrives against the whole run's."""
    cfg = validate_config(doc(potential={"name": "cup"}, data_term={"name": "insensitive"},
                              solver={"max_iter": 5000}))
    built = []
    matrix = robust.RobustRegression.irls_matrix
    monkeypatch.setattr(robust.RobustRegression, "irls_matrix", lambda self, h: built.append(1) or matrix(self, h))
    stream = problems.ROBUST_REGRESSION.iterate(cfg)
    first = next(stream)
    at_first = len(built)
    rest = list(stream)
    assert first.method == "start" and at_first <= 1 < len(built) and len(rest) > 2
    # the same records as solve_config's, completed alike; the last carries the verdict
    streamed = [first] + rest
    fit = robust.solve_config(cfg)
    assert len(streamed) == len(fit.history)
    for a, b in zip(streamed, fit.history):
        assert (a.iteration, a.method, a.converged, a.verdict) == (b.iteration, b.method, b.converged, b.verdict)
        assert (a.energy, a.train_error, a.test_error, a.residual, a.step) == (
            b.energy, b.train_error, b.test_error, b.residual, b.step)
        np.testing.assert_array_equal(a.h, b.h)
    assert [r.verdict for r in streamed[:-1]] == [None] * (len(streamed) - 1)
    assert streamed[-1].verdict == fit.fit.verdict and streamed[-1].converged == fit.converged


def test_irls_steps_hold_no_record_back_longer_than_one_step():
    """irls_steps yields record k by the time the solver has built the matrix of step k + 1 (a run that ends because
    no step lowers the energy learns that its last record is the last only by trying one more)."""
    cfg = validate_config(doc(potential={"name": "cup"}))
    problem = robust.problem_from_config(cfg)

    class Counting(robust.RobustRegression):
        built = 0

        def irls_matrix(self, h):
            Counting.built += 1
            return super().irls_matrix(h)

    counted = Counting.__new__(Counting)
    counted.__dict__.update(problem.__dict__)
    seen = []
    for rec in robust.irls_steps(counted, max_iter=5000):
        seen.append((rec.iteration, Counting.built))
    assert all(built <= it + 1 for it, built in seen) and len(seen) > 3


def test_evidence_and_posterior_draws_are_refused_clearly_and_nothing_is_exact():
    cfg = validate_config(doc(potential={"name": "cup"}))
    kind = cfg.kind
    with pytest.raises(ConfigError, match="evidence of a robust regression is not defined"):
        kind.evidence_path(cfg, "lambda", None)
    with pytest.raises(ConfigError, match="posterior draws of a robust regression are not implemented"):
        api.posterior_summary(cfg)
    assert kind.exact(cfg) is None and not kind.has_exact and kind.path_parameters == ()
    assert kind.nodes(cfg) == 41 and not kind.is_sparse_heavy(cfg)


def test_the_document_units_give_the_demos_absolute_parameters():
    """b = 2 in units of sigma / hx is the demo's slope 20 (sigma = 0.1, hx = 0.01); a = 1 with lambda = 0.01 is its
    lambda a = 200; eps = 1 is sigma: the preset reproduces the demo's insensitive_cup fit."""
    cfg = validate_config(presets.robust_prior_config())
    rho, psi, lam = robust.robust_terms(cfg)
    assert psi.b == pytest.approx(20.0) and lam * psi.a == pytest.approx(200.0)
    assert rho.sigma == pytest.approx(0.1) and rho.eps == pytest.approx(0.1)
    ref_rho, ref_psi, ref_lam = robust.step_cases()["insensitive_cup"]
    assert ref_psi.b == pytest.approx(psi.b) and ref_lam * ref_psi.a == pytest.approx(lam * psi.a)


# ---------------------------------------------------------------------------------------------------- any units
@pytest.mark.parametrize("alpha, shift_x, c, shift_y", [(1e-3, 5.0, 1e3, -40.0), (250.0, -3.0, 2e-2, 0.7)])
@pytest.mark.parametrize("potential, term", [({"name": "cup", "b": 1.5}, {"name": "insensitive", "eps": 0.8}),
                                             ({"name": "cusp", "a": 2.0}, {"name": "mixture2", "mu": 0.5}),
                                             ({"name": "quadratic"}, {"name": "mixture11", "mu": 1.2})])
def test_the_same_document_numbers_in_other_units_give_the_rescaled_fit(alpha, shift_x, c, shift_y, potential, term):
    """x -> alpha x + shift_x, y -> c y + shift_y: the potential's and the data term's numbers are the same; lambda
    (units x for the l2 prior) and beta (1/y^2) change as for a plain regression; the fit is c h + shift_y."""
    base = doc(potential=potential, data_term=term)
    moved = copy.deepcopy(base)
    g = moved["grid"]["x"]
    g["min"], g["max"] = alpha * g["min"] + shift_x, alpha * g["max"] + shift_x
    moved["data"] = [[alpha * x + shift_x, c * y + shift_y] for x, y in base["data"]]
    moved["templates"] = [{"kind": "constant", "value": c * 0.2 + shift_y}]
    moved["prior"]["lambda"] = base["prior"]["lambda"] * alpha
    moved["beta"] = base["beta"] / c ** 2
    ref, fit = api.fit(base), api.fit(moved)
    assert ref["converged"] and fit["converged"]
    np.testing.assert_allclose(fit["h"], c * np.array(ref["h"]) + shift_y, rtol=0, atol=1e-6 * c)
    assert fit["energy"] * fit["beta"] == pytest.approx(ref["energy"] * ref["beta"], rel=1e-6)  # nats: the same
    assert fit["potential"] == {**ref["potential"], "absolute": fit["potential"]["absolute"]}


# ------------------------------------------------------------------------------------------------------ the CLI
def test_the_cli_fits_a_robust_document_and_prints_its_result(tmp_path, capsys):
    path = tmp_path / "robust.json"
    path.write_text(json.dumps(doc(potential={"name": "cup"}, data_term={"name": "insensitive"})))
    assert main(["fit", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = api.fit(validate_config(json.loads(path.read_text())))
    assert out["kind"] == "robust_regression" and out["potential"]["name"] == "cup"
    assert out["data_term"]["name"] == "insensitive" and out["data_term"]["absolute"]["sigma"] == pytest.approx(0.1)
    assert out["iterations"] == ref["iterations"] == len(out["history"]) - 1
    np.testing.assert_allclose(out["h"], ref["h"], rtol=0, atol=1e-12)
    assert out["verdict"] == ref["verdict"] and out["notes"] == [out["verdict"]]
    assert main(["fit", str(path)]) == 0
    text = capsys.readouterr().out
    assert "note: converged" in text and "iterations" in text


@pytest.mark.parametrize("args, message", [(["evidence"], "evidence is not defined for a robust regression"),
                                           (["sweep", "--beta", "0.1:1:3"], "sweep is not defined"),
                                           (["basins"], "basins is not defined"),
                                           (["fit", "--png", "PNG"], "--png and --csv draw and tabulate the Gaussian")])
def test_the_cli_refuses_what_only_gaussian_regression_has(tmp_path, capsys, args, message):
    path = tmp_path / "robust.json"
    path.write_text(json.dumps(doc(potential={"name": "cup"})))
    args = [a.replace("PNG", str(tmp_path / "f.png")) for a in args]
    assert main([args[0], str(path), *args[1:]]) == 2
    assert message in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------------- the preset
def test_the_robust_prior_preset_ignores_the_outlier_and_is_the_demos_fit():
    cfg = validate_config(presets.robust_prior_config())
    assert cfg.kind is problems.ROBUST_REGRESSION and "robust_prior" in presets.DEMO_TEXT
    res = api.fit(cfg)
    assert res["converged"]
    h = np.array(res["h"])
    _, _, truth = robust.step_outlier_data()
    m = robust.step_measures(h, truth)
    demo = robust.step_demo(["insensitive_cup", "quadratic"])
    np.testing.assert_allclose(h, demo["insensitive_cup"]["h"], rtol=0, atol=1e-8)
    # the outlier y = 3 at x = 0.2 (the step is 0 there) moves the fit by little; the Gaussian fit follows it
    assert abs(m["h_020"]) < 0.25 < 1.0 < demo["quadratic"]["h_020"]
    assert m["rmse"] < 0.5 * demo["quadratic"]["rmse"] and m["jump"] > demo["quadratic"]["jump"]
    assert res["test_error"] == pytest.approx(0.5 * m["rmse"] ** 2, rel=1e-12)


def test_a_data_table_fits_with_a_robust_configuration_that_sets_lambda_and_beta(tmp_path, capsys):
    table = tmp_path / "step.csv"
    table.write_text("x,y\n0,0.1\n0.5,0.2\n1,0.1\n1.5,3\n2,1.1\n2.5,1.0\n3,0.9\n")
    config = tmp_path / "robust.json"
    base = {"model": "regression", "prior": {"potential": {"name": "cup"}},
            "templates": [{"kind": "constant", "value": 0}]}
    config.write_text(json.dumps({**base, "prior": {"lambda": 0.01, "potential": {"name": "cup"}}, "beta": 100}))
    assert main(["fit", str(table), "--config", str(config), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "robust_regression" and out["converged"]
    config.write_text(json.dumps(base))  # lambda and beta left to the evidence, which a robust fit does not have
    assert main(["fit", str(table), "--config", str(config)]) == 2
    assert "set prior.lambda and beta by hand" in capsys.readouterr().err


@pytest.mark.parametrize("call, message", [
    (lambda doc: api.evidence_document(doc, "lambda"), "evidence of a robust regression is not defined"),
    (lambda doc: api.sweep_document(doc, 0.1, 10.0, 3), "beta sweep or a basin search is not defined"),
    (lambda doc: api.learning_curve_document(doc, [5, 10]), "learning curve or a bootstrap is not defined"),
])
def test_the_gaussian_studies_refuse_a_robust_document_by_name(call, message):
    """The API's studies that need a Gaussian prior (the evidence, the beta sweep, the learning curve) say so for a
    robust document, instead of a KeyError or an empty list of parameters."""
    with pytest.raises(ValueError, match=message):
        call(presets.robust_prior_config())
    assert "lambda" in api.PATH_PARAMETERS["regression"]  # plain regression's, not the robust kind's empty list


def test_a_local_prior_and_a_robust_regression_are_not_combined():
    """Each has its own solver and kind: a document asking for both is refused by name, not solved by one of them
    while the other's keys are ignored."""
    doc = presets.robust_prior_config()
    doc["prior"] = {**doc["prior"], "cuts": [0.505]}
    with pytest.raises(ConfigError, match="cannot be combined"):
        validate_config(doc)
