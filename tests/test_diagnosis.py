"""The overfitting diagnosis at the solution (issue 28, bftcore.studies.diagnosis), checked against independent
routes: the test error of a cold fit at each lambda, and a cross-validation written out here."""
import copy

import numpy as np
import pytest

from bftcore import api
from bftcore.foundations import metrics
from bftcore.models import presets
from bftcore.studies import diagnosis


def preset(name, lam=None):
    cfg = copy.deepcopy(presets.PRESETS[name][0])
    if lam is not None:
        cfg["prior"]["lambda"] = lam
    cfg.pop("choose", None)
    return api.validate_config(cfg)


def test_the_truths_held_out_error_is_the_test_error_of_a_cold_fit_at_each_lambda():
    cfg = preset("overfitting", 0.01)
    scan = diagnosis.lambda_scan(cfg)
    assert scan["kind"] == "truth" and 0.01 in scan["lambda"]
    for lam, held, train in list(zip(scan["lambda"], scan["held_out"], scan["train"]))[::4]:
        fit = api.run(api.validate_config({**cfg, "prior": {**cfg["prior"], "lambda": lam},  # cold, to the MAP
                                           "solver": {**cfg["solver"], **diagnosis.MAP_SOLVER, "init": "kernel"}}))
        grid = fit.problem.grid
        assert held == pytest.approx(metrics.test_error(fit.L, fit.problem.P_true, grid), abs=1e-6)
        assert train == pytest.approx(fit.last.train_error, abs=1e-6)


def test_the_cross_validated_held_out_error_is_the_mean_loss_of_each_fold_refitted_cold():
    rng = np.random.default_rng(3)
    data = np.column_stack([rng.uniform(1, 10, 12), rng.uniform(1, 15, 12)]).round(3).tolist()
    cfg = api.validate_config({"data": data, "prior": {"lambda": 0.5}, "truth": None})
    lams = [0.05, 0.5, 5.0]
    scan = diagnosis.lambda_scan(cfg, lambdas=lams)
    assert scan["kind"] == "cv"
    pts = np.asarray(data)
    order = np.random.default_rng(0).permutation(len(pts))
    grid = api.grid_from_config(cfg)
    for k, lam in enumerate(lams):
        losses = np.empty(len(pts))
        for fold in range(diagnosis.CV_FOLDS):
            test = order[fold::diagnosis.CV_FOLDS]
            train = np.setdiff1d(order, test)
            fit = api.run(api.validate_config({**cfg, "data": pts[train].tolist(),
                                               "prior": {**cfg["prior"], "lambda": lam},
                                               "solver": {**cfg["solver"], **diagnosis.MAP_SOLVER}}))
            ix, iy = grid.snap(pts[test])
            losses[test] = -fit.L[ix, iy]
        assert scan["held_out"][k] == pytest.approx(losses.mean(), abs=1e-6)
        np.testing.assert_allclose(scan["units"][k], losses, atol=1e-6)


def test_the_verdict_says_which_way_and_what_to_do():
    over = diagnosis.diagnose(diagnosis.lambda_scan(preset("overfitting", 0.01)))
    assert over["verdict"] == "overfitting" and over["best"] > 0.01 and over["message"].endswith("raise lambda")
    assert over["message"].startswith("overfitting (true density): held-out error ")
    assert over["held_out"] - over["best_held_out"] > over["margin"] > 0
    under = diagnosis.diagnose(diagnosis.lambda_scan(preset("overfitting", 1e4)))
    assert under["verdict"] == "underfitting" and under["best"] < 1e4 and under["message"].endswith("lower lambda")
    best = diagnosis.lambda_scan(preset("overfitting", over["best"]))
    assert diagnosis.diagnose(best) is None


@pytest.mark.parametrize("name", ["fig21", "fig22", "fig23", "fig24", "fig25", "fig26", "fig28",
                                  "metastable_mixture"])
def test_no_alarm_at_the_presets_own_lambda(name):
    """Measured on every shipped preset: only the overfitting demonstrations (fig27, "overfitting") fire at their
    own lambda; the two-point figures (fig14, fig16) have too few data for a diagnosis."""
    cfg = preset(name)
    assert diagnosis.applies(cfg)
    assert diagnosis.diagnose(diagnosis.lambda_scan(cfg)) is None


def test_too_few_data_or_another_model_get_no_diagnosis():
    assert not diagnosis.applies(preset("fig14"))                       # two data
    assert diagnosis.applies(preset("two_trends"))                      # a regression with five data
    on_p = preset("fig21")
    on_p["prior"]["field"] = "P"
    assert not diagnosis.applies(on_p)                                  # a prior on P
    with pytest.raises(ValueError, match="at least"):
        diagnosis.lambda_scan(preset("fig14"))


def test_without_a_truth_on_a_large_grid_the_evidence_stands_in_and_says_so():
    cfg = preset("old_faithful", 1e-6)
    scan = diagnosis.lambda_scan(cfg)
    assert scan["kind"] == "evidence"
    verdict = diagnosis.diagnose(scan)
    assert verdict["verdict"] == "overfitting" and "(evidence, no held-out data)" in verdict["message"]


def test_the_alarm_shows_the_message_as_text():
    from app.views.overfitting import alarm_html_of as alarm_html
    html = alarm_html({"message": "<script>alert(1)</script> & more"})
    assert 'data-testid="overfitting-alarm"' in html and "<script>" not in html and "&lt;script&gt;" in html
    assert alarm_html(None) == ""


def test_the_scan_reports_its_curve_as_it_fills_in():
    from bftcore.models.presets import PRESETS
    seen = []
    doc = diagnosis.lambda_scan(PRESETS["overfitting"][0], progress=seen.append)
    assert len(seen) == len(doc["lambda"])  # one report per fit on all the data
    known = [sum(np.isfinite(s["held_out"])) for s in seen]
    assert known == list(range(1, len(seen) + 1))  # each report knows one more lambda, stiff end first
    assert np.allclose(seen[-1]["held_out"], doc["held_out"]) and np.allclose(seen[-1]["train"], doc["train"])
    assert np.isfinite(seen[0]["held_out"][-1])


def test_the_session_shows_the_partial_curve_before_the_verdict():
    from app.session import BFTSession
    s = BFTSession()
    s.load_preset("overfitting")
    s.lam = 0.01
    s.solve()
    states = []
    s.param.watch(lambda e: states.append(e.new), "overfitting")
    s.check_overfitting()
    assert states and states[-1].get("partial") is None and states[-1]["verdict"] is not None
    partial = [st for st in states[:-1] if st and st.get("partial")]
    assert partial and all(st["verdict"] is None for st in partial)


def _sine_regression(lam: float, n: int = 40, truth: bool = True) -> dict:
    """A regression of n noisy points of a sine on [0, 10] (one zero template), with the sine as its truth."""
    rng = np.random.default_rng(3)
    x = np.sort(rng.uniform(0.0, 10.0, n))
    y = np.sin(x) + 0.3 * rng.standard_normal(n)
    cfg = {"model": "regression", "grid": {"x": {"min": 0.0, "max": 10.0, "n": 101, "boundary": "neumann"}},
           "data": np.column_stack([x, y]).tolist(),
           "prior": {"lambda": lam, "l0": 0.0, "l2": 1.0, "l4": 0.0, "l6": 0.0},
           "templates": [{"kind": "constant", "value": 0.0}], "solver": {"method": "newton", "max_iter": 50}}
    if truth:
        cfg["truth"] = {"kind": "array", "values": np.sin(np.linspace(0.0, 10.0, 101)).tolist()}
    return cfg


def test_a_regression_with_a_truth_overfits_at_a_tiny_lambda_and_its_held_out_error_is_the_test_error():
    scan = diagnosis.lambda_scan(_sine_regression(1e-6))
    assert scan["kind"] == "truth"
    # a second route: each held-out error is the fit's own test error against the truth
    for lam, held in zip(scan["lambda"][::4], scan["held_out"][::4]):
        fit = api.run(diagnosis._with(_sine_regression(lam), lam))
        assert held == pytest.approx(float(fit.last.test_error), rel=1e-9)
    verdict = diagnosis.diagnose(scan)
    assert verdict["verdict"] == "overfitting" and verdict["message"].startswith("overfitting (true function)")


def test_a_regression_without_a_truth_is_cross_validated_by_an_explicit_loop():
    cfg = _sine_regression(1e-6, n=25, truth=False)
    scan = diagnosis.lambda_scan(cfg, lambdas=[1e-6, 1.0])
    assert scan["kind"] == "cv"
    pts = np.asarray(cfg["data"])
    order = np.random.default_rng(0).permutation(len(pts))
    losses = np.zeros(len(pts))
    nodes = np.linspace(0.0, 10.0, 101)
    for fold in range(diagnosis.CV_FOLDS):
        test = order[fold::diagnosis.CV_FOLDS]
        train = np.setdiff1d(order, test)
        fit = api.run(diagnosis._with(cfg, 1.0, pts[train].tolist()))
        ix = np.argmin(np.abs(nodes[None, :] - pts[test, :1]), axis=1)
        losses[test] = 0.5 * (np.asarray(fit.h)[ix] - pts[test, 1]) ** 2
    assert scan["held_out"][1] == pytest.approx(losses.mean(), rel=1e-9)


def test_no_alarm_between_neighbours_of_the_scan():
    scan = diagnosis.lambda_scan(preset("two_trends"))  # five points: lambda 0.88 against 1 "differs" at 2 se
    assert diagnosis.diagnose(scan) is None
