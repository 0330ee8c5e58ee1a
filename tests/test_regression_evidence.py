"""Exact evidence of Gaussian regression with a mixture of GP priors: values, limits, gradients, maximum, posterior
draws, and the scikit-learn-like BFTRegressor ([001] eqs. (28)-(32), notes §2.3-2.6)."""
import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import multivariate_normal

from bftcore.estimator import BFTRegressor
from bftcore.foundations.config import ConfigError, validate_config
from bftcore.foundations.grid import Axis
from bftcore.foundations.operators import axis_operator
from bftcore.models import regression
from bftcore.models.regression import RegressionEvidence, RegressionModel

DISTINCT = [[0.5, 1.0], [1.5, 0.4], [2.0, -0.3], [3.5, 0.8]]
REPEATED = DISTINCT + [[1.5, 0.9], [1.5, 0.1], [3.5, 0.7]]


def config(data=REPEATED, boundary="neumann", l0=0.2, l2=1.0, l4=0.0, l6=0.0, lam=0.7, beta=2.0, n=9,
           weights=(0.4, 0.6), templates=None):
    return {"model": "regression", "grid": {"x": {"min": 0.0, "max": 4.0, "n": n, "boundary": boundary}},
            "data": data, "prior": {"lambda": lam, "l0": l0, "l2": l2, "l4": l4, "l6": l6},
            "templates": templates or [{"kind": "linear", "slope": 0.5, "intercept": -0.5},
                                       {"kind": "constant", "value": 1.2}],
            "weights": list(weights), "beta": beta}


def dense(model):
    """K_0 = lambda hx K_X and the data matrix H (one row per datum), dense."""
    K0 = model.lam * model.hx * axis_operator(model.axis, **model.coeffs).toarray()
    H = np.zeros((model.y.size, model.n))
    H[np.arange(model.y.size), model.ix] = 1.0
    return K0, H


def dense_log_evidences(model, beta):
    """ln N(y; H t_j, H C H^T + I/beta) with C = (beta K_0)^{-1}: the GP marginal likelihood, data space."""
    K0, H = dense(model)
    C = np.linalg.inv(beta * K0)
    cov = H @ C @ H.T + np.eye(model.y.size) / beta
    return np.array([multivariate_normal(H @ t, cov).logpdf(model.y) for t in model.templates])


def dense_restricted_log_evidences(model, beta):
    """l0 = 0: h = t + (range part, covariance (beta K_0)^+) + c u, u = 1/sqrt(n) the constant null vector, with a
    flat prior of unit density on c, integrated in closed form: a second, data-space route."""
    K0, H = dense(model)
    cov = H @ np.linalg.pinv(beta * K0, hermitian=True) @ H.T + np.eye(model.y.size) / beta
    P = np.linalg.inv(cov)
    g = H @ np.full(model.n, 1 / np.sqrt(model.n))
    out = []
    for t in model.templates:
        r = model.y - H @ t
        q = g @ P @ g
        out.append(multivariate_normal(np.zeros(model.y.size), cov).logpdf(r)
                   + 0.5 * (g @ P @ r) ** 2 / q + 0.5 * np.log(2 * np.pi / q))
    return np.array(out)


# ------------------------------------------------------------------------------------------------ values
@pytest.mark.parametrize("data", [DISTINCT, REPEATED], ids=["distinct", "repeated"])
@pytest.mark.parametrize("boundary, l2, l4, l6", [("neumann", 1.0, 0.0, 0.0), ("periodic", 0.5, 0.3, 0.0),
                                                  ("neumann", 0.0, 0.0, 0.2)])
@pytest.mark.parametrize("beta", [0.05, 2.0, 30.0])
def test_evidence_equals_the_dense_gaussian_marginal_likelihood(data, boundary, l2, l4, l6, beta):
    M = RegressionModel.from_config(config(data=data, boundary=boundary, l2=l2, l4=l4, l6=l6))
    ref = dense_log_evidences(M, beta)
    assert np.allclose(M.log_evidences(beta), ref, rtol=1e-9, atol=0)
    w = np.log(M.weights) + ref
    assert M.log_evidence(beta) == pytest.approx(logsumexp(w), rel=1e-9)
    b = np.exp(w - logsumexp(w))                                       # b_j = p_j ev_j / sum, eq. (28) [001]
    assert np.allclose(M.evidence.posterior_weights(beta), b, rtol=1e-9)
    assert np.allclose(M.exact_weights(beta), b, rtol=1e-9)


def test_raw_evidence_is_the_site_averaged_one_plus_the_closed_form_constant():
    """notes §2.3: raw = site-averaged (Lemm (486), data averaged per node) + a constant in lambda and l0 that
    carries the within-node spread and the counts, and depends on beta."""
    for lam in (0.1, 0.7, 5.0):
        M = RegressionModel.from_config(config(lam=lam))
        beta = 1.3
        K0, _ = dense(M)
        C = np.linalg.inv(beta * K0)
        D = np.flatnonzero(M.counts)
        nD = M.counts[D]
        cov = C[np.ix_(D, D)] + np.diag(1 / (beta * nD))
        averaged = np.array([multivariate_normal(t[D], cov).logpdf(M.t_T[D]) for t in M.templates])
        const = (np.sum(-0.5 * (nD - 1) * np.log(2 * np.pi / beta) - 0.5 * np.log(nD)) - beta * M.offset)
        assert np.allclose(M.log_evidences(beta), averaged + const, rtol=1e-10)


@pytest.mark.parametrize("data", [DISTINCT, REPEATED], ids=["distinct", "repeated"])
@pytest.mark.parametrize("boundary, l4", [("neumann", 0.0), ("periodic", 0.2)])
def test_improper_prior_gives_the_restricted_evidence_and_its_l0_limit(data, boundary, l4):
    beta = 1.7
    M0 = RegressionModel.from_config(config(data=data, boundary=boundary, l0=0.0, l4=l4))
    restricted = M0.log_evidences(beta)
    assert np.all(np.isfinite(restricted))
    assert np.allclose(restricted, dense_restricted_log_evidences(M0, beta), rtol=1e-9)
    # ln ev(l0) - (k/2) ln(beta lambda hx l0 / 2 pi) -> ln ev(0), k = 1 (the constants), with an O(l0) error
    gaps = []
    for l0 in (1e-3, 1e-5, 1e-7):
        M = RegressionModel.from_config(config(data=data, boundary=boundary, l0=l0, l4=l4))
        gaps.append(np.max(np.abs(M.log_evidences(beta) - 0.5 * np.log(beta * M.lam * M.hx * l0 / (2 * np.pi))
                                  - restricted)))
    assert gaps[-1] < 1e-5
    assert gaps[1] / gaps[0] == pytest.approx(1e-2, rel=0.05) and gaps[2] / gaps[1] == pytest.approx(1e-2, rel=0.05)
    # b_j of the restricted evidence: the same formula (28)
    assert np.allclose(M0.evidence.posterior_weights(beta), M0.exact_weights(beta), rtol=1e-10)


def test_improper_prior_without_data_is_refused_with_what_to_do():
    axis = Axis(0.0, 4.0, 9, "neumann")
    ev = RegressionEvidence(axis, [], [], np.zeros((1, 9)), l0=0.0, l2=1.0)
    with pytest.raises(ValueError, match=r"null space of K_X \(the constant functions\).*add data.*l0 > 0"):
        ev.log_evidence(1.0)
    assert np.isfinite(ev.log_evidence(1.0, l0=0.1))            # a proper prior needs no data
    assert ev.log_evidence(1.0, l0=0.1) == pytest.approx(0.0, abs=1e-12)   # no data: p(empty set) = 1
    with pytest.raises(ValueError, match="lambda > 0"):
        ev.log_evidence(1.0, lam=0.0)


def test_no_data_give_the_prior_weights_and_pinned_nodes_the_prior_density_ratio():
    """Without data b_j = p_j.  With ever more data on every node of a fixed grid h is pinned to h* = t_T and the
    Bayes factor tends to the prior density ratio at h* (it does not grow: the grid holds finitely many
    parameters), b_j -> p_j N(h*; t_j, (beta K_0)^{-1}) / sum."""
    M = RegressionModel.from_config(config(data=[], l0=0.3))
    assert np.allclose(M.evidence.posterior_weights(2.0), M.weights)
    nodes = np.linspace(0, 4, 9)
    h_star = 1.2 + 0.3 * np.sin(2 * nodes)
    beta, err = 3.0, []
    for reps in (30, 300, 3000):
        rng = np.random.default_rng(reps)
        x = np.repeat(nodes, reps)
        noise = rng.standard_normal((9, reps))
        noise -= noise.mean(axis=1, keepdims=True)                 # the node means are exactly h*
        data = np.column_stack([x, (h_star[:, None] + noise).ravel()]).tolist()
        M = RegressionModel.from_config(config(data=data))
        K0, _ = dense(M)
        d = h_star - M.templates
        w = np.log(M.weights) - 0.5 * beta * np.einsum("ji,ik,jk->j", d, K0, d)
        err.append(np.max(np.abs(M.evidence.posterior_weights(beta) - np.exp(w - logsumexp(w)))))
    assert err[2] < 1e-5 and err[2] < err[1] < err[0]
    assert 0.05 < M.evidence.posterior_weights(beta)[0] < 0.2      # far from p = (0.4, 0.6): the data decided


def test_the_null_space_is_the_constants_even_for_a_stiff_prior_on_a_fine_grid():
    """The smallest non-zero eigenvalue of an l6 prior is (pi/2n)^6 of the largest: not a null vector."""
    ev = RegressionEvidence(Axis(0.0, 10.0, 800, "neumann"), [3, 500], [1.0, 2.0], np.zeros((1, 800)),
                            l0=0.0, l2=0.0, l6=1.0)
    assert ev.null_dim == 1


# --------------------------------------------------------------------------------------------- gradients
def _fd(f, h=1e-5):
    return (f(h) - f(-h)) / (2 * h)


@pytest.mark.parametrize("data, l0, boundary, l4", [(REPEATED, 0.2, "neumann", 0.0), (DISTINCT, 0.05, "periodic", 0.3),
                                                    (REPEATED, 0.0, "neumann", 0.1)])
def test_gradients_equal_central_finite_differences(data, l0, boundary, l4):
    ev = RegressionEvidence.from_config(config(data=data, l0=l0, boundary=boundary, l4=l4))
    lam, beta, p = 0.7, 2.3, np.array([0.3, 0.7])
    g = ev.gradient(beta, lam, l0, p)
    fd = {"lambda": _fd(lambda e: ev.log_evidence(beta, lam * np.exp(e), l0, p)),
          "beta": _fd(lambda e: ev.log_evidence(beta * np.exp(e), lam, l0, p))}
    if l0 > 0:
        fd["l0"] = _fd(lambda e: ev.log_evidence(beta, lam, l0 * np.exp(e), p))
    else:
        assert "l0" not in g
    for k, v in fd.items():
        assert g[k] == pytest.approx(v, rel=1e-5, abs=1e-8), k
    w = np.log(p)
    for j in range(2):
        def shifted(e, j=j):
            ww = w + e * (np.arange(2) == j)
            return ev.log_evidence(beta, lam, l0, np.exp(ww) / np.exp(ww).sum())
        assert g["weights"][j] == pytest.approx(_fd(shifted), rel=1e-5, abs=1e-9)


# ------------------------------------------------------------------------------------ paths and maximum
def _smooth_data(n=40, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 10, n)
    return np.column_stack([x, np.sin(x) + 0.3 * rng.standard_normal(n)]).tolist()


def big_config(l0=0.0, templates=None, weights=None):
    return {"model": "regression", "grid": {"x": {"min": 0.0, "max": 10.0, "n": 200, "boundary": "neumann"}},
            "data": _smooth_data(), "prior": {"lambda": 1.0, "l0": l0, "l2": 1.0},
            "templates": templates or [{"kind": "constant", "value": 0.0}],
            "weights": weights or [], "beta": 1.0}


def test_evidence_path_and_surface_agree_with_pointwise_evaluation():
    cfg = validate_config(big_config(l0=0.05, templates=[{"kind": "constant", "value": 0.0},
                                                         {"kind": "linear", "slope": 0.1, "intercept": -0.5}]))
    ev = RegressionEvidence.from_config(cfg)
    lams = np.geomspace(1e-3, 1e3, 30)
    path = regression.evidence_path(cfg, "lambda", lams)
    assert set(path) >= {"lambda", "log_evidence", "best", "components", "b"}
    pointwise = [ev.log_evidence(1.0, lam=v) for v in lams]
    assert np.allclose(path["log_evidence"], pointwise, rtol=1e-12)
    k = int(np.argmax(pointwise))
    assert path["best"] == {"lambda": lams[k], "log_evidence": pytest.approx(pointwise[k], rel=1e-12)}
    assert np.allclose(path["b"].sum(axis=1), 1.0)
    betas = np.geomspace(0.1, 100, 7)
    bpath = regression.evidence_path(cfg, "beta", betas)
    assert np.allclose(bpath["log_evidence"], [ev.log_evidence(b) for b in betas], rtol=1e-12)
    l0s = [0.0, 1e-3, 0.1]
    lpath = regression.evidence_path(cfg, "l0", l0s)
    assert np.allclose(lpath["log_evidence"], [ev.log_evidence(1.0, l0=v) for v in l0s], rtol=1e-12)
    surf = regression.evidence_surface(cfg, ("lambda", lams[::5]), ("beta", betas))
    S = surf["log_evidence"]
    assert S.shape == (6, 7) and surf["axes"] == ("lambda", "beta")
    assert S[2, 3] == pytest.approx(ev.log_evidence(betas[3], lam=lams[10]), rel=1e-12)
    assert surf["best"]["log_evidence"] == pytest.approx(S.max())
    for bad, msg in [(("lambda", [1.0, -2.0]), "finite numbers > 0"), (("mass", [1.0]), "one of lambda, l0, beta")]:
        with pytest.raises(ValueError, match=msg):
            regression.evidence_path(cfg, bad[0], bad[1])
    with pytest.raises(ConfigError, match="exceed the limit"):
        regression.evidence_path(cfg, "lambda", np.geomspace(1, 2, 100_000))


@pytest.mark.parametrize("l0, params", [(0.0, ("lambda", "beta")), (0.05, ("lambda", "l0", "beta")),
                                        (0.05, ("lambda",))])
def test_optimiser_reaches_zero_gradient_and_beats_a_grid(l0, params):
    cfg = validate_config(big_config(l0=l0))
    res = regression.optimise_evidence(cfg, params=params)
    assert set(res) >= {"lambda", "l0", "beta", "weights", "log_evidence", "iterations", "converged", "gradient"}
    assert res["converged"] and not res["at_bound"]
    ev = RegressionEvidence.from_config(cfg)
    g = ev.gradient(res["beta"], res["lambda"], res["l0"])
    assert all(abs(g[q]) < 1e-6 for q in params)
    assert res["log_evidence"] == pytest.approx(ev.log_evidence(res["beta"], res["lambda"], res["l0"]), rel=1e-12)
    lams = np.geomspace(res["lambda"] / 30, res["lambda"] * 30, 25)
    if "beta" in params:
        betas = np.geomspace(res["beta"] / 30, res["beta"] * 30, 25)
        surf = ev.surface(("lambda", lams), ("beta", betas), beta=1.0, l0=res["l0"])
        assert res["log_evidence"] >= surf["best"]["log_evidence"] - 1e-9
    else:
        assert res["beta"] == cfg["beta"] and res["l0"] == l0
        assert res["log_evidence"] >= max(ev.log_evidence(1.0, lam=v, l0=l0) for v in lams) - 1e-9
    # the maximum also satisfies MacKay's fixed point for beta (notes §2.3): d ln p / d ln beta = 0 <=>
    # beta = (N - k) / (2 E_min), k = 1 for the restricted evidence
    if "beta" in params:
        t = ev.terms(res["lambda"], res["l0"])
        k = 1 if res["l0"] == 0 else 0
        assert res["beta"] == pytest.approx((ev.N - k) / (2 * (ev.offset + t.V[0])), rel=1e-8)


def test_optimiser_respects_bounds_and_a_given_start():
    cfg = validate_config(big_config(l0=0.0))
    free = regression.optimise_evidence(cfg, params=("lambda", "beta"))
    box = {"lambda": (free["lambda"] * 3, free["lambda"] * 100), "beta": (0.1, 1e3)}
    res = regression.optimise_evidence(cfg, params=("lambda", "beta"), bounds=box,
                                       start={"lambda": free["lambda"] * 10, "beta": 2.0})
    assert res["lambda"] == pytest.approx(box["lambda"][0], rel=1e-9) and res["at_bound"] == ["lambda"]
    assert res["log_evidence"] < free["log_evidence"] and res["converged"]
    assert abs(res["gradient"]["beta"]) < 1e-6 and res["gradient"]["lambda"] < 0   # it wants a smaller lambda
    with pytest.raises(ValueError, match="bounds"):
        regression.optimise_evidence(cfg, params=("lambda",), bounds={"lambda": (2.0, 1.0)})


def test_optimising_the_weights_goes_to_the_vertex_of_the_best_component():
    cfg = validate_config(big_config(l0=0.05, templates=[{"kind": "constant", "value": 0.0},
                                                         {"kind": "linear", "slope": 0.3, "intercept": -1.0}],
                                     weights=[0.5, 0.5]))
    res = regression.optimise_evidence(cfg, params=("weights", "lambda"))
    ev = RegressionEvidence.from_config(cfg)
    comps = ev.log_evidences(1.0, lam=res["lambda"])
    best = int(np.argmax(comps))
    assert res["weights"][best] > 1 - 1e-9
    assert res["log_evidence"] == pytest.approx(comps[best], abs=1e-8)
    assert abs(res["gradient"]["lambda"]) < 1e-6
    with pytest.raises(ValueError, match="distinct names among"):
        regression.optimise_evidence(cfg, params=("lambda", "mass"))


# ------------------------------------------------------------------------------------- posterior draws
@pytest.mark.parametrize("boundary", ["neumann", "periodic"])        # banded and dense Cholesky
def test_posterior_samples_match_the_exact_mixture_mean_and_covariance(boundary):
    M = RegressionModel.from_config(config(boundary=boundary, data=DISTINCT, l4=0.1))
    beta, n = 0.8, 40_000
    b = M.exact_weights(beta)
    assert 0.1 < b[0] < 0.9                                      # both components are drawn
    S = M.posterior_samples(beta, n, np.random.default_rng(3))
    assert S.shape == (n, M.n)
    ex = M.exact(beta)
    se = np.sqrt(ex["var"] / n)
    assert np.all(np.abs(S.mean(axis=0) - ex["mean"]) < 5 * se)
    K0, H = dense(M)
    Ainv = np.linalg.inv(H.T @ H + K0)
    d = M.component_solutions - ex["mean"]
    cov = Ainv / beta + (d.T * b) @ d                            # within-component plus spread of the t̄_j
    assert np.allclose(np.diag(cov), ex["var"])
    assert np.max(np.abs(np.cov(S.T) - cov)) < 0.05 * np.max(np.diag(cov))
    assert np.array_equal(S, M.posterior_samples(beta, n, 3))          # a seed is a Generator's seed


# ------------------------------------------------------------------------------------------ BFTRegressor
def test_regressor_round_trip_matches_the_module_functions():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 10, (50, 1))
    y = np.sin(X[:, 0]) + 0.2 * rng.standard_normal(50)
    est = BFTRegressor(lam="evidence", beta="evidence", n=150)
    assert est.get_params()["lam"] == "evidence" and not hasattr(est, "h_")
    assert est.fit(X, y) is est
    res = regression.optimise_evidence(est.to_config(X[:, 0], y, 1.0, 1.0, 0.0), params=("lambda", "beta"))
    assert est.lam_ == pytest.approx(res["lambda"], rel=1e-10) and est.beta_ == pytest.approx(res["beta"], rel=1e-10)
    doc = regression.evidence(est.config_)
    assert est.log_marginal_likelihood() == pytest.approx(doc["log_evidence"], rel=1e-12)
    assert est.log_marginal_likelihood_value_ == pytest.approx(res["log_evidence"], rel=1e-10)
    ex = est.model_.exact(est.beta_)
    at_nodes, sd_nodes = est.predict(est.x_[:7], return_std=True)      # at the nodes: the module's numbers
    assert np.allclose(at_nodes, ex["mean"][:7]) and np.allclose(sd_nodes, np.sqrt(ex["var"][:7]))
    mean, std = est.predict(X[:7], return_std=True)
    mean2, cov = est.predict(X[:7], return_cov=True)
    assert np.allclose(mean2, mean) and np.allclose(np.sqrt(np.diag(cov)), std)
    assert np.allclose(est.predict(X[:7].ravel()), mean)
    assert est.sample_y(X[:7], n_samples=3).shape == (7, 3)
    assert np.array_equal(est.sample_y(X[:7], 3, random_state=1), est.sample_y(X[:7], 3, random_state=1))
    assert est.score(X, y) > 0.9
    # theta = ln [lam, beta]: the evidence there, its gradient zero at the fitted (maximising) values
    value, grad = est.log_marginal_likelihood(est.theta_, eval_gradient=True)
    assert value == pytest.approx(est.log_marginal_likelihood_value_, rel=1e-12)
    assert np.all(np.abs(grad) < 1e-6)
    other = est.log_marginal_likelihood(np.log([1.0, 2.0]))
    fixed = BFTRegressor(lam=1.0, beta=2.0, n=150, x_min=est.x_[0], x_max=est.x_[-1]).fit(X, y)
    assert other == pytest.approx(fixed.log_marginal_likelihood_value_, rel=1e-12) and other < value
    c = BFTRegressor().set_params(**est.get_params())
    assert c.get_params() == est.get_params()


@pytest.mark.parametrize("params, X, y, msg", [
    ({"lam": "foo"}, [1.0, 2.0], [1.0, 2.0], r"'lam' must be a number or \"evidence\""),
    ({"lam": -1.0}, [1.0, 2.0], [1.0, 2.0], r"'lam' must be a finite number > 0"),
    ({"beta": float("nan")}, [1.0, 2.0], [1.0, 2.0], r"'beta' must be a finite number > 0"),
    ({"l0": -0.1}, [1.0, 2.0], [1.0, 2.0], r"'l0' must be a finite number >= 0"),
    ({"boundary": "open"}, [1.0, 2.0], [1.0, 2.0], r"parameter 'boundary'"),
    ({}, np.ones((3, 2)), np.ones(3), r"X must have shape \(n,\) or \(n, 1\)"),
    ({}, [1.0, float("nan")], [1.0, 2.0], r"X contains NaN"),
    ({}, [1.0, 2.0], [1.0, float("nan")], r"y contains NaN"),
    ({}, [1.0, 2.0, 3.0], [1.0, 2.0], r"y must have shape \(3,\)"),
    ({}, [], [], r"at least one data point"),
])
def test_regressor_refuses_bad_input_naming_it(params, X, y, msg):
    with pytest.raises(ValueError, match=msg):
        BFTRegressor(**params).fit(X, y)


def test_regressor_refuses_use_before_fit_and_points_far_beyond_the_grid():
    from bftcore.estimator import NotFittedError
    with pytest.raises(NotFittedError, match="not fitted"):
        BFTRegressor().predict([1.0])
    est = BFTRegressor(x_min=0.0, x_max=5.0, n=51).fit([1.0, 2.0, 4.0], [0.0, 1.0, 0.5])
    assert np.isfinite(est.predict([7.0, -3.0])).all()        # beyond the grid: the prior's continuation
    with pytest.raises(ValueError, match="2001 grid spacings beyond the fitted grid"):
        est.predict([5.0 + 0.1 * 2001])
    with pytest.raises(ValueError, match="at most one of return_std and return_cov"):
        est.predict([1.0], return_std=True, return_cov=True)
