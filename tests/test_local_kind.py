"""Regression documents with a local prior (prior.local, prior.cuts): the gate's keys and errors, the problem kinds
that claim them, the route document -> kind -> solver against the solver called directly and against the plain
regression (m = 1), equivariance in the user's units, and the CLI's output."""
import copy
import json
import subprocess
import sys

import numpy as np
import pytest

from bftcore import api
from bftcore.foundations.config import ConfigError, validate_config
from bftcore.foundations.grid import Axis
from bftcore.models import local_priors as lp
from bftcore.models import presets, problems
from bftcore.models.local_regression import LocalRecord, LocalRegressionFit


def step_doc(local=None, **prior):
    cfg = presets.local_switch_config("switch")
    if local is not None:
        cfg["prior"]["local"] = local
    cfg["prior"].update(prior)
    return cfg


def data_xy(cfg):
    pts = np.asarray(cfg["data"], dtype=float)
    return pts[:, 0], pts[:, 1]


# ------------------------------------------------------------------------------------------- the kinds
def test_a_local_document_finds_its_kind_and_a_plain_regression_does_not():
    plain = copy.deepcopy(presets.PRESETS["two_trends"][0])
    assert problems.kind_of(validate_config(plain)) is problems.REGRESSION
    assert validate_config(presets.PRESETS["local_switch"][0]).kind is problems.LOCAL_SWITCH
    assert validate_config(presets.PRESETS["local_hyperfield"][0]).kind is problems.LOCAL_HYPERFIELD
    # cuts alone: the document's Gaussian prior (a switch of one alternative) with edges removed
    cuts_only = step_doc()
    del cuts_only["prior"]["local"]
    cuts_only["prior"]["cuts"] = [0.505]
    cfg = validate_config(cuts_only)
    assert cfg["prior"]["local"] == {"type": "switch", "stiffness": [1.0], "pi": [1.0]}
    assert cfg.kind is problems.LOCAL_SWITCH
    # a plain document's prior is unchanged by the new keys (a saved document validates as before)
    assert set(validate_config(plain)["prior"]) == {"field", "lambda", "lambda_x", "lambda_y", "l0", "l2", "l4", "l6"}


def test_the_switch_kind_solves_what_the_solver_solves_on_the_digests_parameters():
    """beta = 100 = 1/sigma^2, lambda hx beta = 0.1 and r = (1, 0.001) are the digest's kappa = (0.1, 1e-4) at label
    temperature 1: the same a_k(e) and phi as local_mixture_fit called directly."""
    cfg = validate_config(presets.PRESETS["local_switch"][0])
    fit = api.run(cfg)
    assert isinstance(fit, LocalRegressionFit) and fit.converged
    x, y = data_xy(cfg)
    direct = lp.local_mixture_fit(x, y, Axis(0.0, 1.0, 101, "neumann"), 0.1, (0.1, 1e-4), (0.95, 0.05), 1.0)
    np.testing.assert_allclose(fit.h, direct.phi, atol=1e-8)
    np.testing.assert_allclose(fit.labels, direct.a, atol=1e-8)
    soft = fit.edge_x[fit.labels[1] > 0.5]
    assert soft.size and np.all(np.abs(soft - 0.5) < 0.02)        # within two cells of the step, and only there
    energies = [r.energy for r in fit.history]
    assert all(isinstance(r, LocalRecord) and r.local.shape == (2, 100) for r in fit.history)
    assert np.all(np.diff(energies) <= 1e-9 * abs(energies[0]))    # EM never raises the energy
    assert len(fit.history) == fit.last.iteration + 1


def test_the_hyperfield_kind_solves_what_the_solver_solves_and_reports_theta_relative_to_the_gaussian():
    cfg = validate_config(presets.PRESETS["local_hyperfield"][0])
    fit = api.run(cfg)
    x, y = data_xy(cfg)
    direct = lp.hyperfield_fit(x, y, Axis(0.0, 1.0, 101, "neumann"), 0.1, np.log(0.1), 1.0, 1.0, tol=1e-10)
    np.testing.assert_allclose(fit.h, direct.phi, atol=1e-8)
    np.testing.assert_allclose(fit.labels[0], direct.theta - np.log(0.1), atol=1e-8)
    assert fit.edge_x[np.argmin(fit.labels[0])] == pytest.approx(0.505)


@pytest.mark.parametrize("template, beta, lam, l2", [({"kind": "constant", "value": 0.0}, 100.0, 0.1, 1.0),
                                                     ({"kind": "linear", "slope": 0.7, "intercept": -0.2}, 3.0,
                                                      0.5, 2.0)])
def test_one_alternative_is_the_plain_regression_through_the_whole_route(template, beta, lam, l2):
    """m = 1 (r = 1, pi = 1) is the document's Gaussian prior: the same h as the regression kind, to round-off, with
    a template that the local prior acts about (the linear one: D t != 0) and other beta, lambda, l2."""
    local = step_doc({"type": "switch", "stiffness": [1.0], "pi": [1.0]}, **{"lambda": lam, "l2": l2})
    local["templates"], local["beta"] = [template], beta
    plain = copy.deepcopy(local)
    del plain["prior"]["local"], plain["prior"]["cuts"]
    a, b = validate_config(local), validate_config(plain)
    assert a.kind is problems.LOCAL_SWITCH and b.kind is problems.REGRESSION
    ha = api.run(a).h
    hb = b.kind.exact(b)["mean"]   # one template: the exact mean is the MAP h
    np.testing.assert_allclose(ha, hb, atol=1e-9 * (1 + np.max(np.abs(hb))))
    np.testing.assert_allclose(ha, api.run(b).h, atol=1e-6)


@pytest.mark.parametrize("local", [{"type": "switch", "stiffness": [1.0, 0.001], "pi": [0.95, 0.05]},
                                   {"type": "hyperfield", "theta0": 0.3, "gamma_theta": 1.0, "mu_theta": 1.0}])
def test_a_document_in_other_units_gives_the_rescaled_fit(local):
    """x -> a x + b, y -> c y + d; lambda (units of x for l2) -> a lambda, beta (1/y^2) -> beta / c^2, the template
    c t + d: h -> c h + d, and the labels (pure numbers) unchanged."""
    a, b, c, d = 3.0, -2.0, 0.2, 5.0
    one = step_doc(local, cuts=[0.255])
    two = copy.deepcopy(one)
    two["grid"]["x"].update(min=b, max=a + b)
    two["data"] = [[a * x + b, c * y + d] for x, y in one["data"]]
    two["prior"]["lambda"] = a * one["prior"]["lambda"]
    two["prior"]["cuts"] = [a * 0.255 + b]
    two["beta"] = one["beta"] / c ** 2
    two["templates"] = [{"kind": "constant", "value": d}]
    two["truth"] = [c * v + d for v in one["truth"]]
    f1, f2 = api.run(validate_config(one)), api.run(validate_config(two))
    np.testing.assert_allclose(f2.h, c * f1.h + d, atol=1e-7)
    np.testing.assert_allclose(f2.labels, f1.labels, atol=1e-7)
    np.testing.assert_allclose(f2.edge_x, a * f1.edge_x + b, atol=1e-12)


def test_a_cut_makes_the_fit_on_one_side_independent_of_the_data_on_the_other():
    one = step_doc(cuts=[0.505])
    two = copy.deepcopy(one)
    two["data"] = [[x, y + 3.0 if x > 0.505 else y] for x, y in one["data"]]
    f1, f2 = api.run(validate_config(one)), api.run(validate_config(two))
    left = np.asarray(validate_config(one)["grid"]["x"]["min"]) + 0.01 * np.arange(101) < 0.505
    np.testing.assert_allclose(f1.h[left], f2.h[left], atol=1e-9)
    assert 0.505 not in np.round(f1.edge_x, 6)


def test_the_other_answers_of_the_kind():
    cfg = validate_config(presets.PRESETS["local_switch"][0])
    kind = cfg.kind
    assert kind.exact(cfg) is None and not kind.has_exact and kind.nodes(cfg) == 101 and kind.drawn_as == "curve"
    with pytest.raises(ConfigError, match="evidence of a regression with a local prior .* not implemented"):
        kind.evidence_path(cfg, "lambda", [0.1, 1.0])
    with pytest.raises(ConfigError, match="evidence of a regression with a local prior .* not implemented"):
        api.evidence_document(cfg, "lambda", [0.1, 1.0])
    post = api.posterior_summary(cfg, n=7)
    draws = np.asarray(post["draws"])
    assert post["kind"] == "conditional" and draws.shape == (7, 101)
    # the draws scatter about the MAP h with the conditional Gaussian's spread (a few sigma/sqrt(n) at most)
    assert np.max(np.abs(draws.mean(axis=0) - api.run(cfg).h)) < 0.5


# ------------------------------------------------------------------------------------------- the gate's errors
def _refused(cfg, match):
    with pytest.raises(ConfigError, match=match):
        validate_config(cfg)


@pytest.mark.parametrize("change, match", [
    (lambda c: c["prior"]["local"].update(pi=[0.9, 0.05]), r"prior\.local\.pi must sum to 1 .*divide"),
    (lambda c: c["prior"]["local"].update(pi=[0.9]), r"one probability per alternative .* \(2\), got 1"),
    (lambda c: c["prior"]["local"].update(stiffness=[1.0, 0.0]), r"prior\.local\.stiffness\[1\]"),
    (lambda c: c["prior"]["local"].update(stiffness=[1.0, -1.0]), r"prior\.local\.stiffness\[1\]"),
    (lambda c: c["prior"]["local"].update(stiffness=[]), r"prior\.local\.stiffness must be a non-empty list"),
    (lambda c: c["prior"]["local"].update(type="mass"), r"prior\.local\.type must be one of 'switch', 'hyperfield'"),
    (lambda c: c["prior"]["local"].update(theta0=1.0), r"prior\.local \(type 'switch'\)"),
    (lambda c: c["prior"].update(local={"type": "hyperfield", "gamma_theta": 0.0}), r"prior\.local\.gamma_theta"),
    (lambda c: c["prior"].update(local={"type": "hyperfield", "mu_theta": -1}), r"prior\.local\.mu_theta"),
    (lambda c: c["prior"].update(local={"type": "hyperfield", "theta0": float("nan")}), r"prior\.local\.theta0"),
    (lambda c: c["prior"].update(local=[1, 2]), r"prior\.local must be an object"),
    (lambda c: c["prior"].update(cuts=[1.2]), r"cut at x = 1\.2 is outside the grid's interior"),
    (lambda c: c["prior"].update(cuts=[0.5]), r"cut at x = 0\.5 falls on a node; .*x = 0\.505"),
    (lambda c: c["prior"].update(cuts=[0.503, 0.507]), r"two cuts cross the same edge"),
    (lambda c: c["prior"].update(cuts=[0.905, 0.935]), r"block x in \[0\.91, 0\.93\] .* has no data"),
    (lambda c: c["prior"].update(cuts="0.5"), r"prior\.cuts must be a list"),
    (lambda c: c["grid"]["x"].update(boundary="periodic"), r"grid\.x\.boundary is \"periodic\""),
    (lambda c: c.update(templates=[{"kind": "constant", "value": 0}] * 2, weights=[0.5, 0.5]),
     r"one template .* got 2; a global mixture of templates and a local prior together is not supported"),
    (lambda c: c["prior"].update(l4=1.0), r"set l0, l4 and l6 to 0 and l2 > 0"),
    (lambda c: c["prior"].update(l0=0.1), r"set l0, l4 and l6 to 0"),
    (lambda c: c.update(choose={"lambda": "evidence"}), r"choose: the evidence of a local prior is not implemented"),
])
def test_the_gate_refuses_what_the_solver_cannot_do_and_says_what_to_do(change, match):
    cfg = step_doc()
    change(cfg)
    _refused(cfg, match)


def test_a_density_document_with_a_local_prior_on_a_periodic_grid_is_refused():
    """Density documents may carry a local prior (tests/test_local_density.py), on an open grid only."""
    cfg = copy.deepcopy(presets.PRESETS["fig14"][0])
    cfg["prior"]["local"] = {"type": "switch", "stiffness": [1.0], "pi": [1.0]}
    _refused(cfg, r"open grid, but grid.x or grid.y has boundary \"periodic\"")


def test_the_hyperfields_runaway_is_a_clear_error_through_the_route():
    cfg = step_doc({"type": "hyperfield", "gamma_theta": 1.0, "mu_theta": 0.01})
    with pytest.raises(lp.HyperpriorTooWeak, match="raise gamma_theta"):
        api.run(validate_config(cfg))


# ------------------------------------------------------------------------------------------- the CLI
def test_cli_fit_prints_the_responsibilities(tmp_path):
    path = tmp_path / "step.json"
    path.write_text(json.dumps(presets.PRESETS["local_switch"][0]))
    out = subprocess.run([sys.executable, "-m", "bftcore", "fit", str(path), "--json"], capture_output=True,
                         text=True, check=True).stdout
    doc = json.loads(out)
    local = doc["local"]
    a = np.asarray(local["responsibilities"])
    assert local["type"] == "switch" and a.shape == (2, 100) and len(local["edge_x"]) == 100
    np.testing.assert_allclose(a.sum(axis=0), 1.0, atol=1e-12)
    np.testing.assert_allclose(doc["h"], api.run(validate_config(presets.PRESETS["local_switch"][0])).h, atol=1e-12)
    assert "exact" not in doc and doc["converged"] and doc["history"][0]["iteration"] == 0
    text = subprocess.run([sys.executable, "-m", "bftcore", "fit", str(path)], capture_output=True, text=True,
                          check=True).stdout
    assert "local switch: edges won by alternative >= 2 (a_k > others): x = 0.495, 0.505, 0.515" in text


def test_a_warm_start_of_a_hyperfield_reaches_the_same_solution():
    """The dashboard restarts from the curve on screen: a hyperfield takes its theta from that h (one theta step
    from theta_0) and alternates to the same joint minimum as from theta_0 (the theta problem is convex per h)."""
    cfg = validate_config(presets.PRESETS["local_hyperfield"][0])
    cold = api.run(cfg)
    warm_from = api.run(validate_config(presets.PRESETS["local_switch"][0])).h
    warm = problems.LOCAL_HYPERFIELD.solve(cfg, init=warm_from)
    np.testing.assert_allclose(warm.h, cold.h, atol=1e-6)
    np.testing.assert_allclose(warm.labels, cold.labels, atol=1e-5)
    np.testing.assert_allclose(warm.history[0].h, warm_from, atol=0.2)  # iteration 0 is near the start given


def test_the_png_and_csv_exports_draw_the_map_curve_without_an_exact_posterior(tmp_path):
    """A local prior has no closed form: the figure and the table carry the MAP h, the exact columns stay empty."""
    path = tmp_path / "step.json"
    path.write_text(json.dumps(presets.PRESETS["local_switch"][0]))
    subprocess.run([sys.executable, "-m", "bftcore", "fit", str(path), "--png", str(tmp_path / "f.png"), "--csv",
                    str(tmp_path / "t")], capture_output=True, text=True, check=True)
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = (tmp_path / "t_h.csv").read_text().splitlines()
    assert rows[0] == "x,h,mean,sd" and len(rows) == 102 and rows[1].endswith(",,")


def test_as_beta_falls_the_labels_tend_to_pi_sqrt_r_and_the_jump_opens_only_as_it_grows():
    """ln Z_k = -1/2 ln kappa_k does not depend on beta: at small beta a_k -> pi_k sqrt(r_k) / sum, not pi_k (no edge
    goes soft); at the preset's beta only the step's edges are soft."""
    low = step_doc()
    low["beta"] = 1e-4
    a = api.run(validate_config(low)).labels[1]
    floor = 0.05 * np.sqrt(1e-3) / (0.95 + 0.05 * np.sqrt(1e-3))
    np.testing.assert_allclose(a, floor, rtol=1e-3)
    soft = api.run(validate_config(step_doc())).labels[1] > 0.5
    assert 1 <= soft.sum() <= 4


def test_a_sweep_of_a_local_prior_is_refused_clearly(tmp_path):
    path = tmp_path / "step.json"
    path.write_text(json.dumps(presets.PRESETS["local_switch"][0]))
    for args in (["sweep", str(path), "--beta", "1:100:3"], ["basins", str(path)], ["evidence", str(path)]):
        out = subprocess.run([sys.executable, "-m", "bftcore", *args], capture_output=True, text=True)
        assert out.returncode == 2 and "internal error" not in out.stderr, (args, out.stderr)
        assert "local prior" in out.stderr, (args, out.stderr)
