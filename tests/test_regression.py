"""Gaussian regression with a mixture of Gaussian process priors ([001] Sects. 3-4)."""
import json

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from bftcore.foundations.operators import axis_operator
from bftcore.models.regression import RegressionModel, fit, regression_presets, template_values
from bftcore.studies.workflows import sweep_document


def small_config(boundary="neumann", l0=0.2, l4=0.0, data=None, templates=None, weights=(0.4, 0.6), n=9):
    return {"model": "regression", "grid": {"x": {"min": 0.0, "max": 4.0, "n": n, "boundary": boundary}},
            "data": data if data is not None else [[0.5, 1.0], [1.5, 0.4], [2.0, -0.3], [3.5, 0.8]],
            "prior": {"lambda": 0.7, "l0": l0, "l2": 1.0, "l4": l4},
            "templates": templates or [{"kind": "linear", "slope": 0.5, "intercept": -0.5},
                                       {"kind": "constant", "value": 1.2}],
            "weights": list(weights), "beta": 2.0}


def dense_parts(model):
    """K_0 = lambda hx K_X and the data matrix H, built densely for brute-force checks."""
    K0 = model.lam * model.hx * axis_operator(model.axis, **model.coeffs).toarray()
    H = np.zeros((model.y.size, model.n))
    H[np.arange(model.y.size), model.ix] = 1.0
    return K0, H


# ------------------------------------------------------------------------------------------ validation
@pytest.mark.parametrize("spec, msg", [({"kind": "paper_t1"}, "density"), ({"kind": "linear", "slope": 1}, "intercept"),
                                       ({"kind": "array", "values": [1, 2]}, "one value per x node"),
                                       ({"kind": "constant", "value": "a"}, "number"), ([1, 2], "dict")])
def test_template_errors_say_what_is_wrong(spec, msg):
    with pytest.raises(ValueError, match=msg):
        template_values(spec, np.arange(5.0))


def test_template_values():
    x = np.arange(4.0)
    assert template_values({"kind": "linear", "slope": 2, "intercept": 1}, x).tolist() == [1, 3, 5, 7]
    assert template_values({"kind": "constant", "value": -1}, x).tolist() == [-1] * 4
    assert template_values({"kind": "array", "values": [4, 3, 2, 1]}, x).tolist() == [4, 3, 2, 1]


def test_off_grid_data_are_named():
    cfg = small_config(data=[[0.5, 1.0], [7.25, 2.0]])
    with pytest.raises(ValueError, match=r"\(7.25, 2\)"):
        RegressionModel.from_config(cfg)


def test_singular_prior_without_data_is_explained():
    with pytest.raises(ValueError, match="l0 > 0"):
        RegressionModel.from_config(small_config(l0=0.0, data=[])).component_solutions


def test_weights_must_match_templates():
    with pytest.raises(ValueError, match="weights"):
        RegressionModel.from_config(small_config(weights=(1, 2, 3)))


# ------------------------------------------------------------------------------------------ derivatives
@pytest.mark.parametrize("boundary, l4, beta", [("neumann", 0.0, 0.3), ("periodic", 0.05, 5.0),
                                                ("neumann", 0.1, 40.0)])
def test_gradient_and_hessian_action_match_finite_differences(boundary, l4, beta):
    M = RegressionModel.from_config(small_config(boundary, l4=l4))
    E = M.energy(beta)
    rng = np.random.default_rng(3)
    h = M.complete_average() + 0.3 * rng.standard_normal(M.n)
    v = rng.standard_normal(M.n)
    eps = 1e-6
    fd = np.array([(E.value(h + eps * e) - E.value(h - eps * e)) / (2 * eps) for e in np.eye(M.n)])
    assert np.allclose(E.gradient(h), fd, atol=1e-7 * (1 + np.abs(fd).max()))
    fdh = (E.gradient(h + eps * v) - E.gradient(h - eps * v)) / (2 * eps)
    assert np.allclose(E.hessp(h, v), fdh, atol=1e-6 * (1 + np.abs(fdh).max()))
    Hd = E.hessian(h)
    assert np.allclose(Hd, Hd.T) and np.allclose(Hd @ v, E.hessp(h, v))


def test_massive_solve_inverts_the_massive_operator():
    M = RegressionModel.from_config(small_config())
    E = M.energy(1.0)
    r = np.random.default_rng(0).standard_normal(M.n)
    K0, _ = dense_parts(M)
    assert np.allclose((K0 + 0.3 * np.eye(M.n)) @ E.massive_solve(r, 0.3), r)


# ------------------------------------------------------------------------------------------ closed forms
def test_component_solutions_variances_and_B():
    M = RegressionModel.from_config(small_config(data=[[0.5, 1.0], [1.5, 0.4], [1.5, 0.9], [3.5, 0.8]]))
    K0, H = dense_parts(M)
    KT = H.T @ H
    A = KT + K0
    tT = M.t_T
    for j, t in enumerate(M.templates):
        tb = np.linalg.solve(A, KT @ tT + K0 @ t)                                   # (29)
        assert np.allclose(M.component_solutions[j], tb)
        V = 0.5 * (tT @ KT @ tT + t @ K0 @ t - tb @ A @ tb)                          # (40), difference form
        assert M.template_variances[j] == pytest.approx(V, rel=1e-10)
    # E_hj(h) = E_T(t_T) + V_j + (1/2) a^T B_j a for h = sum_k a_k t̄_k  (43)
    a = np.array([0.3, 0.7])
    h = M.field(a)
    expect = M.offset + M.template_variances + 0.5 * np.einsum("k,jkl,l->j", a, M.B, a)
    assert np.allclose(M.component_energies(h), expect)
    assert M.offset == pytest.approx(0.5 * (0.25 ** 2 * 2))   # repeated x = 1.5 with y = 0.4, 0.9


def _brute_force_log_marginals(M, beta):
    """ln p(y | j) = ln N(y; H t_j, beta^{-1} (I + H K_0^{-1} H^T)): prior h ~ N(t_j, (beta K_0)^{-1}) (7),
    likelihood y ~ N(H h, beta^{-1} I) (6), so y = H h + noise is Gaussian with that mean and covariance."""
    K0, H = dense_parts(M)
    C = (np.eye(M.y.size) + H @ np.linalg.solve(K0, H.T)) / beta
    return np.array([multivariate_normal(H @ t, C).logpdf(M.y) for t in M.templates])


@pytest.mark.parametrize("repeated", [False, True])
@pytest.mark.parametrize("beta", [0.05, 1.0, 7.0])
def test_exact_weights_equal_brute_force_evidence(beta, repeated):
    data = [[0.5, 1.0], [1.5, 0.4], [2.0, -0.3], [3.5, 0.8]] + ([[1.5, 0.9], [1.5, 0.1]] if repeated else [])
    M = RegressionModel.from_config(small_config(data=data))
    logev = _brute_force_log_marginals(M, beta)
    w = np.log(M.weights) + logev                                   # p_j p(y | j), (28)
    b = np.exp(w - w.max())
    b /= b.sum()
    assert np.allclose(M.exact_weights(beta), b, rtol=1e-10, atol=1e-14)
    # (30)-(32) in full, and with repeated x the raw-data evidence (issue 14: no longer refused)
    assert np.allclose(M.log_evidences(beta), logev, rtol=1e-10)


def test_exact_mean_and_variance_equal_the_dense_gaussian_mixture_posterior():
    M = RegressionModel.from_config(small_config(data=[[0.5, 1.0], [1.5, 0.4], [1.5, 0.9], [3.5, 0.8]]))
    beta = 1.7
    K0, H = dense_parts(M)
    Sigma = np.linalg.inv(beta * (H.T @ H + K0))                     # posterior covariance given j
    means = np.array([Sigma @ (beta * (H.T @ M.y + K0 @ t)) for t in M.templates])
    b = M.exact_weights(beta)
    mean = b @ means
    var = np.diag(Sigma) + b @ means ** 2 - mean ** 2
    ex = M.exact(beta)
    assert np.allclose(ex["mean"], mean) and np.allclose(ex["var"], var)


# ------------------------------------------------------------------------------------------ MAP routes agree
def _close_to_some(h, sols):
    return min(np.max(np.abs(h - s["h"])) for s in sols)


def _map_error_bounds(M, beta, h, tol):
    """What a converged run guarantees about its field h, from the residual r = max |gradient| at h.

    The iteration controller (bftcore.foundations.solvers.IterationController) stops with r <= sqrt(tol), or when the
    energy line search finds no decrease: then r is at the rounding floor sqrt(eps |E| |H|) (below it a step changes the
    energy by less than its rounding); the gate allows 10 times that floor.  To first order h - h* = H^{-1} g, so
    the stationary point h* is within |H^{-1}|_inf r (factor 2 for the change of H between h and h*); and
    h - sum_j a_j t̄_j = A^{-1} g exactly, with a = a(h).  A rounding allowance of 1000 eps |h| covers the
    reduced solutions' own evaluation."""
    E = M.energy(beta)
    H = E.hessian(h)
    r = float(np.max(np.abs(E.gradient(h))))
    floor = np.sqrt(np.finfo(float).eps * max(1.0, abs(E.value(h))) * np.abs(H).sum(axis=1).max())
    rounding = 1e3 * np.finfo(float).eps * (1.0 + np.abs(h).max())
    return {"residual": r, "residual_gate": max(np.sqrt(tol), 10 * floor),
            "field": 2 * np.abs(np.linalg.inv(H)).sum(axis=1).max() * r + rounding,
            "reduced_field": np.abs(np.linalg.inv(M.A.toarray())).sum(axis=1).max() * r + rounding}


@pytest.mark.parametrize("beta", [0.3, 1.0, 2.5, 5.0])
@pytest.mark.parametrize("init", ["template:0", "template:1", "kernel"])
def test_map_field_solution_equals_reduced_fixed_point(beta, init):
    cfg = {**regression_presets()["two_trends"], "beta": beta}
    cfg["solver"] = {**cfg["solver"], "init": init, "tol": 1e-12}
    res = fit(cfg)
    assert res["converged"] and res["stable"]
    M = RegressionModel.from_config(cfg)
    sols = [s for s in M.fixed_points(beta) if s["stable"]]
    for s in M.fixed_points(beta):   # the reduced energy is the full mixture energy at h = sum a_j t̄_j
        assert s["energy"] == pytest.approx(M.energy(beta).value(s["h"]), rel=1e-12)
    h = np.array(res["h"])
    bound = _map_error_bounds(M, beta, h, cfg["solver"]["tol"])
    assert bound["residual"] <= bound["residual_gate"], bound
    assert _close_to_some(h, sols) <= bound["field"], bound
    a = np.array(res["mixing"])
    assert np.max(np.abs(h - M.field(a))) <= bound["reduced_field"], bound    # h = sum a_j t̄_j, eq. (42)
    # the m = 2 mean-field form (44)-(46), with b and E~_j from B_j and V_j; exact at the fixed point a*, and at a:
    # |a_1 - a_1*| <= (beta/4) |K_0 (t_1 - t_2)|_1 |h - h*|_inf (a_1 a_2 <= 1/4), the form's slope <= beta b / 4
    b = M.B[0, 1, 1]
    e_diff = beta * (M.template_variances[1] - M.template_variances[0]) - np.log(M.weights[1] / M.weights[0])
    delta = beta / 4 * b * (2 * a[0] - 1) + e_diff / 2
    da = beta / 4 * np.abs(M.K0 @ (M.templates[0] - M.templates[1])).sum() * bound["field"]
    assert abs(a[0] - 0.5 * (np.tanh(delta) + 1)) <= (1 + beta * b / 4) * da
    tb = M.component_solutions
    form = (tb[0] + tb[1]) / 2 + np.tanh(delta) * (tb[0] - tb[1]) / 2
    assert np.max(np.abs(h - form)) <= bound["reduced_field"] + (1 + beta * b / 4) * da * np.abs(tb[0] - tb[1]).max()


def test_both_stable_branches_are_reached_from_the_templates():
    cfg = {**regression_presets()["two_trends"], "beta": 4.0}
    ends = []
    for init in ("template:0", "template:1"):
        ends.append(fit({**cfg, "solver": {**cfg["solver"], "init": init}})["mixing"][0])
    assert ends[0] > 0.99 and ends[1] < 0.01


def test_high_temperature_limit_is_the_complete_template_average():
    cfg = {**small_config(), "beta": 1e-6}
    M = RegressionModel.from_config(cfg)
    K0, H = dense_parts(M)
    tbar = np.linalg.solve(H.T @ H + K0, H.T @ M.y + K0 @ (M.weights @ M.templates))    # (35), a0 = p (34)
    res = fit(cfg)
    assert np.allclose(res["h"], tbar, atol=1e-5)
    assert np.allclose(res["mixing"], M.weights, atol=1e-5)
    assert np.allclose(M.complete_average(), tbar)                                       # (41)
    assert np.allclose(res["exact"]["b"], M.weights, atol=1e-5)


def test_low_temperature_limit_keeps_the_components_passing_the_stability_condition():
    # template 1 is far from the data: t̄_1 violates (38), t̄_0 passes
    cfg = small_config(templates=[{"kind": "constant", "value": 0.5}, {"kind": "constant", "value": 9.0}],
                       l0=1.0, weights=(0.5, 0.5))
    M = RegressionModel.from_config(cfg)
    low = M.low_temperature_solutions()
    V, B = M.template_variances, M.B
    assert low[0]["stable"] == (2 * V[0] < B[1, 0, 0] + 2 * V[1])
    assert low[1]["stable"] == (2 * V[1] < B[0, 1, 1] + 2 * V[0])
    assert [d["stable"] for d in low] == [True, False]
    beta = 1e6
    stable = [s for s in M.fixed_points(beta) if s["stable"]]
    assert len(stable) == 1 and np.allclose(stable[0]["h"], M.component_solutions[0], atol=1e-9)
    res = fit({**cfg, "beta": beta, "solver": {"init": "template:1", "max_iter": 200}})
    assert np.allclose(res["h"], M.component_solutions[0], atol=1e-6)
    # a case where both pass: each t̄_j is a zero-temperature solution
    two = RegressionModel.from_config(regression_presets()["two_trends"])
    assert all(d["stable"] for d in two.low_temperature_solutions())
    cold = [s for s in two.fixed_points(beta) if s["stable"]]
    assert len(cold) == 2
    for s, tb in zip(sorted(cold, key=lambda s: -s["mixing"][0]), two.component_solutions):
        assert np.allclose(s["h"], tb, atol=1e-9)


@pytest.mark.parametrize("beta", [1e-6, 1e6])
def test_extreme_betas_do_not_overflow(beta):
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        res = fit({**regression_presets()["two_trends"], "beta": beta})
    assert np.all(np.isfinite(res["h"])) and sum(res["mixing"]) == pytest.approx(1.0)
    assert sum(res["exact"]["b"]) == pytest.approx(1.0) and np.all(np.isfinite(res["exact"]["var"]))


def test_swapping_components_swaps_mixing_and_exact_weights():
    cfg = {**regression_presets()["two_trends"], "beta": 0.8}
    sw = {**cfg, "templates": cfg["templates"][::-1], "weights": cfg["weights"][::-1]}
    r1, r2 = fit(cfg), fit(sw)
    assert np.allclose(r1["mixing"], r2["mixing"][::-1], atol=1e-8)
    assert np.allclose(r1["exact"]["b"], r2["exact"]["b"][::-1], rtol=1e-12)
    assert np.allclose(r1["h"], r2["h"], atol=1e-8)


# ------------------------------------------------------------------------------------------ result document
def test_result_document():
    truth = {"kind": "linear", "slope": 0.1, "intercept": 1.0}
    cfg = {**regression_presets()["two_trends"], "truth": truth}
    res = fit(cfg)
    json.dumps(res)
    for key in ("energy", "train_error", "test_error", "iterations", "converged", "mixing", "h", "history",
                "elapsed_s", "exact"):
        assert key in res
    assert set(res["exact"]) == {"b", "mean", "var"}
    M = RegressionModel.from_config(cfg)
    h = np.array(res["h"])
    xs, ys = np.array(cfg["data"]).T
    hd = np.interp(xs, M.nodes, h)   # data sit on nodes of this grid
    assert res["train_error"] == pytest.approx(np.mean((hd - ys) ** 2) / 2)
    assert res["test_error"] == pytest.approx(np.mean((h - (0.1 * M.nodes + 1.0)) ** 2) / 2)
    assert res["energy"] == pytest.approx(M.energy(cfg["beta"]).value(h))
    rec = res["history"][-1]
    assert set(rec) >= {"energy", "train_error", "test_error", "mixing", "step"}
    energies = [r["energy"] for r in res["history"]]
    assert all(e2 <= e1 + 1e-12 for e1, e2 in zip(energies, energies[1:]))
    assert fit({k: v for k, v in cfg.items() if k != "truth"})["test_error"] is None


def test_two_trends_preset_shows_hysteresis_on_the_documented_interval():
    cfg = regression_presets()["two_trends"]
    doc = sweep_document(cfg, 0.05, 5.0, 100)
    assert len(doc["bifurcations"]) == 1 and doc["bifurcations"][0] == pytest.approx(1.376, abs=0.01)
    up = doc["branches"][0]
    downs = [b for b in doc["branches"] if b["direction"] == "down"]
    ends = sorted(b["mixing"][0][0] for b in downs)
    assert ends[0] < 1e-3 and ends[-1] > 0.999                      # two stable solutions at beta = 5
    other = next(b for b in downs if abs(b["mixing"][0][0] - up["mixing"][-1][0]) > 0.5)
    betas = np.array(other["beta"])
    gap = np.abs(np.array(other["mixing"])[:, 0] - np.array(up["mixing"])[::-1, 0])
    two = betas[gap > 1e-3]
    assert two.min() == pytest.approx(1.376, abs=0.06) and two.max() == pytest.approx(5.0)
    assert all(other["stable"]) and all(up["stable"])
    # the exact weights stay smooth across the bifurcation: no jump in b_1 along the up branch
    b1 = np.array(up["b"])[:, 0]
    assert np.max(np.abs(np.diff(b1))) < 0.02


def test_the_exact_posterior_without_a_solve_equals_the_fit_documents():
    """regression.exact_posterior (what the dashboard shows beside a run, no MAP solve) is the fit document's
    ``exact``: the same closed form, reached without the solver."""
    from bftcore import api
    from bftcore.models.regression import exact_posterior, regression_presets
    cfg = api.validate_config(regression_presets()["two_trends"])
    direct, doc = exact_posterior(cfg), api.fit(cfg)["exact"]
    for key in ("b", "mean", "var"):
        assert np.allclose(direct[key], doc[key], rtol=1e-12, atol=1e-14)
