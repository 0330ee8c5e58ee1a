"""The regression posterior at any x (bftcore.models.regression_query): between the nodes, beyond the grid, draws,
each against an independent route (a longer grid, a dense conditional Gaussian, Monte Carlo)."""
import numpy as np
import pytest

from bftcore.estimator import BFTRegressor
from bftcore.foundations.grid import Axis
from bftcore.foundations.operators import axis_operator
from bftcore.models.regression import RegressionModel
from bftcore.models.regression_query import posterior_at, samples_at

H = 0.25
TEMPLATES = {"zero": [{"kind": "constant", "value": 0.0}],
             "mixture": [{"kind": "linear", "slope": 0.3, "intercept": 1.0}, {"kind": "constant", "value": 2.0}]}


def _data(seed=0, n=15):
    rng = np.random.default_rng(seed)
    x = np.round(rng.uniform(0, 5, n) / H) * H
    return np.column_stack([x, np.sin(x) + 0.1 * rng.normal(size=n)])


@pytest.mark.parametrize("order", ["l2", "l4", "l6"])
@pytest.mark.parametrize("templates", sorted(TEMPLATES))
def test_beyond_a_free_grid_the_answer_is_the_same_model_on_a_longer_grid(order, templates):
    # one order, free boundary: integrating a longer chain's extra nodes out gives the prior on the grid back, so
    # the continuation must agree with a fit on the longer grid (same spacing, no data out there) at every query
    coeffs = {"l2": 0.0, order: 1.0}
    short = RegressionModel(Axis(0, 5, 21, "free"), _data(), TEMPLATES[templates], lam=0.7, **coeffs)
    long = RegressionModel(Axis(-2.5, 7.5, 41, "free"), _data(), TEMPLATES[templates], lam=0.7, **coeffs)
    beta = 3.0
    q = np.array([-2.5, -1.3, -0.1, 0.0, 0.3, 2.6, 4.9, 5.0, 5.2, 6.0, 7.5])
    b_short, b_long = short.exact_weights(beta), long.exact_weights(beta)
    assert b_short == pytest.approx(b_long, abs=1e-9)
    mean, cov = posterior_at(short, q, beta, b_short, full=True)
    mean_l, cov_l = posterior_at(long, q, beta, b_long, full=True)
    assert mean == pytest.approx(mean_l, abs=1e-8)
    assert np.abs(cov - cov_l).max() <= 1e-8 * np.abs(cov_l).max()
    _, var = posterior_at(short, q, beta, b_short)
    assert var == pytest.approx(np.diag(cov), rel=1e-10)


def test_with_several_orders_the_continuation_is_the_dense_conditional_of_the_free_chain():
    # l2 + l6 + l0 on a neumann grid: beyond it, h_e | h is the conditional of the free chain's Gaussian prior;
    # checked against the dense route: the precision of the whole chain (grid + 12 extra nodes), conditioned
    coeffs = {"l0": 0.1, "l2": 0.5, "l4": 0.0, "l6": 1.0}
    model = RegressionModel(Axis(0, 5, 21, "neumann"), _data(1), TEMPLATES["zero"], lam=0.7, **coeffs)
    beta, m = 2.0, 12
    q = 5.0 + H * np.arange(1, m + 1)                                  # the extra nodes themselves
    mean, cov = posterior_at(model, q, beta, np.ones(1), full=True)
    Q = beta * model.lam * H * axis_operator(Axis(0, H * (20 + m), 21 + m, "free"), **coeffs).toarray()
    e, i = np.arange(21, 21 + m), np.arange(21)
    Me = -np.linalg.solve(Q[np.ix_(e, e)], Q[np.ix_(e, i)])
    post = model.exact(beta)
    inner = np.linalg.inv(model.A.toarray()) / beta                    # the posterior covariance on the grid
    assert mean == pytest.approx(Me @ post["mean"], abs=1e-10)
    dense = Me @ inner @ Me.T + np.linalg.inv(Q[np.ix_(e, e)])
    assert np.abs(cov - dense).max() <= 1e-9 * np.abs(dense).max()


def test_between_nodes_the_answer_is_the_linear_reading_of_the_node_posterior():
    model = RegressionModel(Axis(0, 5, 21, "neumann"), _data(2), TEMPLATES["mixture"], lam=0.4, l2=1.0)
    beta = 1.5
    b = model.exact_weights(beta)
    post = model.exact(beta)
    mean, var = posterior_at(model, model.nodes, beta, b)
    assert mean == pytest.approx(post["mean"], abs=1e-12) and var == pytest.approx(post["var"], rel=1e-10)
    x = np.array([0.1, 1.37, 4.99])
    i = np.floor(x / H).astype(int)
    t = x / H - i
    # the dense route: the mixture's covariance on the nodes, read by the two weights
    inner = np.linalg.inv(model.A.toarray()) / beta
    comp = model.component_solutions
    full = inner + ((comp - post["mean"]).T * b) @ (comp - post["mean"])
    Wq = np.zeros((x.size, model.n))
    Wq[np.arange(x.size), i], Wq[np.arange(x.size), i + 1] = 1 - t, t
    mean_q, cov_q = posterior_at(model, x, beta, b, full=True)
    assert mean_q == pytest.approx(Wq @ post["mean"], abs=1e-12)
    assert np.abs(cov_q - Wq @ full @ Wq.T).max() <= 1e-10 * np.abs(full).max()


def test_a_periodic_axis_wraps_its_queries():
    model = RegressionModel(Axis(0, 5, 21, "periodic"), _data(3), TEMPLATES["zero"], lam=0.4, l2=1.0)
    period = 21 * H
    x = np.array([0.3, 2.2, 5.1])                                      # 5.1: between the last node and the first
    mean, var = posterior_at(model, x, 1.0, np.ones(1))
    mean2, var2 = posterior_at(model, x + 3 * period, 1.0, np.ones(1))
    assert mean2 == pytest.approx(mean, abs=1e-10) and var2 == pytest.approx(var, rel=1e-9)
    t = (5.1 - 5.0) / H
    nodes = model.exact(1.0)["mean"]
    assert mean[2] == pytest.approx((1 - t) * nodes[-1] + t * nodes[0], abs=1e-12)


def test_draws_at_any_x_have_the_posterior_mean_and_variance():
    model = RegressionModel(Axis(0, 5, 21, "free"), _data(4), TEMPLATES["mixture"], lam=0.7, l2=0.0, l4=1.0)
    beta = 3.0
    q = np.array([-1.0, 0.6, 2.37, 5.4, 6.5])
    mean, var = posterior_at(model, q, beta, model.exact_weights(beta))
    draws = samples_at(model, q, beta, 40_000, 7)
    assert np.abs(draws.mean(axis=0) - mean).max() < 5 * np.sqrt(var.max() / 40_000)
    assert draws.var(axis=0) == pytest.approx(var, rel=0.05)


def test_the_regressor_predicts_smoothly_between_nodes_and_extrapolates_with_growing_uncertainty():
    rng = np.random.default_rng(5)
    x = np.sort(rng.uniform(0, 10, 40))
    y = np.sin(x) + 0.1 * rng.normal(size=40)
    est = BFTRegressor(lam="evidence", beta="evidence", boundary="free", l2=0, l6=1, n=50).fit(x, y)
    fine = np.linspace(x.min(), x.max(), 1001)
    mean = est.predict(fine)
    # no staircase: the steps of the curve are as small as its slope times the query spacing
    assert np.abs(np.diff(mean)).max() < 2.5 * (fine[1] - fine[0])
    span = x.max() - x.min()
    out = np.array([x.max() + 0.05 * span, x.max() + 0.2 * span, x.max() + 0.5 * span])
    m_out, sd_out = est.predict(out, return_std=True)
    assert np.isfinite(m_out).all() and np.all(np.diff(sd_out) > 0)   # std grows away from the data
    _, sd_in = est.predict(fine, return_std=True)
    assert sd_out[0] > np.median(sd_in)
    left = np.array([x.min() - 0.05 * span, x.min() - 0.3 * span])
    _, sd_left = est.predict(left, return_std=True)
    assert sd_left[1] > sd_left[0] > np.median(sd_in)
    assert est.sample_y(out, 3).shape == (3, 3)
