"""The scikit-learn-like estimator is a thin layer over api.fit: same numbers, sklearn conventions."""
import numpy as np
import pytest

from bftcore import api
from bftcore.estimator import BFTDensity, NotFittedError
from bftcore.foundations.config import ConfigError
from bftcore.foundations.grid import Grid
from bftcore.models.presets import TWO_POINTS, figure_config


def test_fit_matches_the_cli_route_and_follows_sklearn_conventions():
    est = BFTDensity(grid=Grid.paper("periodic"), l2=0.025, method="newton", init="kernel", init_mass2=0.1)
    assert not hasattr(est, "density_")                     # the constructor stores, fit learns
    assert est.fit(TWO_POINTS) is est
    doc = api.fit(figure_config("fig14"))
    assert est.energy_ == pytest.approx(doc["energy"], rel=1e-12)
    assert np.allclose(est.density_, np.array(doc["P"]))
    assert np.allclose(est.density_.sum(axis=1), 1.0)      # hy = 1 on the paper mesh
    assert est.energy_history_[0] >= est.energy_history_[-1]
    # score is the mean log-density of the given points, i.e. minus the training error (710) on them
    assert est.score(TWO_POINTS) == pytest.approx(-doc["train_error"], rel=1e-12)
    assert np.allclose(est.predict_proba([[7, 12]]), est.density_[6, 11])


def test_x_and_y_may_be_given_separately_and_params_round_trip():
    a = BFTDensity(grid=Grid.paper("periodic"), l2=0.025).fit([3, 7], [3, 12])
    b = BFTDensity(grid=Grid.paper("periodic"), l2=0.025).fit(TWO_POINTS)
    assert a.energy_ == pytest.approx(b.energy_, rel=1e-12)
    p = a.get_params()
    c = BFTDensity().set_params(**p)
    assert c.get_params() == p
    with pytest.raises(ValueError, match="unknown parameter"):
        c.set_params(lamda=1.0)


def test_warm_start_continues_from_the_previous_solution():
    est = BFTDensity(grid=Grid.paper("periodic"), l2=0.025, warm_start=True, min_iter=0).fit(TWO_POINTS)
    first = est.energy_
    est.fit(TWO_POINTS)
    assert est.n_iter_ <= 2 and est.energy_ == pytest.approx(first, abs=1e-10)


def test_bad_input_is_refused_with_a_message_and_keeps_the_fitted_state():
    est = BFTDensity(grid=Grid.paper("periodic"), l2=0.025).fit(TWO_POINTS)
    before = est.density_.copy()
    with pytest.raises(ValueError, match="outside"):
        est.fit([[30, 3]])
    with pytest.raises(ValueError, match="lambda"):
        BFTDensity(lam=0.0).fit(TWO_POINTS)
    assert np.array_equal(est.density_, before)
    with pytest.raises(NotFittedError, match="not fitted"):
        BFTDensity().score(TWO_POINTS)


def test_numpy_scalars_and_arrays_are_accepted_as_in_a_grid_search():
    """Issue 11: np.float32 / np.int64 hyperparameters and array weights were refused."""
    tpl = [{"kind": "paper_t1"}, {"kind": "paper_t2"}]
    ref = BFTDensity(lam=0.5, max_iter=7, weights=[0.25, 0.75], templates=tpl, beta=2.0).fit(TWO_POINTS)
    est = BFTDensity(lam=np.float32(0.5), max_iter=np.int64(7), weights=np.array([0.25, 0.75]), templates=tpl,
                     beta=np.float64(2.0)).fit(np.array(TWO_POINTS, dtype=np.float32))
    assert est.energy_ == pytest.approx(ref.energy_, rel=1e-12)
    assert est.n_iter_ == ref.n_iter_


@pytest.mark.parametrize("name, boundary", [("paper", "periodic"), ("paper-periodic", "periodic"),
                                            ("paper-neumann", "neumann")])
def test_grid_names(name, boundary):
    est = BFTDensity(grid=name, l2=0.025).fit(TWO_POINTS)
    assert est.grid_ == Grid.paper(boundary)


@pytest.mark.parametrize("params, named", [({"lam": "abc"}, "'lam'"), ({"l2": -1}, "'l2'"), ({"grid": "foo"}, "'grid'"),
                                           ({"lambda_x": np.nan}, "'lambda_x'"), ({"max_iter": 10 ** 9}, "'max_iter'"),
                                           ({"weights": np.array([1.0])}, "'weights'")])
def test_bad_hyperparameters_raise_a_config_error_naming_the_parameter(params, named):
    from bftcore.foundations.config import ConfigError
    with pytest.raises(ConfigError) as exc:
        BFTDensity(**params).fit(TWO_POINTS)
    assert named in str(exc.value)


def test_bad_data_raise_a_config_error():
    from bftcore.foundations.config import ConfigError
    for X in ([[1, 2, 3]], "abc", [[np.nan, 3]]):
        with pytest.raises(ConfigError):
            BFTDensity().fit(X)
    with pytest.raises(ConfigError, match="outside"):  # off a grid that is given
        BFTDensity(grid="paper").fit([[30, 3]])


def test_two_dimensional_data_without_a_grid_get_one_fitted_to_them_in_their_own_units():
    """Issue 27: no grid given, the axes span the data (padded 10 %), so data in any units are taken; the paper's
    mesh is grid="paper"."""
    rng = np.random.default_rng(4)
    X = np.column_stack([rng.uniform(0.0, 0.01, 80), rng.normal(3e4, 5e3, 80)])   # metres and dollars
    est = BFTDensity(lam="evidence").fit(X)
    g = est.grid_
    assert (g.x.n, g.y.n) == (30, 40)
    span = np.ptp(X, axis=0)
    assert g.x.min == pytest.approx(X[:, 0].min() - 0.1 * span[0]) and g.y.max == pytest.approx(
        X[:, 1].max() + 0.1 * span[1])
    assert np.all(np.isfinite(est.score_samples(X)))
    assert BFTDensity(grid="paper").fit([[3, 3]]).grid_.shape == (10, 15)


# ------------------------------------------------------------------------------------------------ the doors (issue 25)
class _Table:
    """A pandas-like table without pandas: ``.columns`` and column access by name (duck typing is the contract)."""

    def __init__(self, **columns):
        self._data = {k: np.asarray(v) for k, v in columns.items()}
        self.columns = list(columns)

    def __getitem__(self, name):
        return self._data[name]

    def __len__(self):
        return len(next(iter(self._data.values())))


def test_named_columns_are_read_by_name_in_any_order():
    pts = np.array([[3.0, 3.0], [7.0, 12.0], [5.0, 8.0]])
    by_array = BFTDensity(grid="paper", l2=0.025).fit(pts)
    for table in (_Table(x=pts[:, 0], y=pts[:, 1]), _Table(y=pts[:, 1], x=pts[:, 0]),
                  _Table(Y=pts[:, 1], X=pts[:, 0])):
        est = BFTDensity(grid="paper", l2=0.025).fit(table)
        assert np.array_equal(est.density_, by_array.density_)
        assert np.array_equal(est.score_samples(table), by_array.score_samples(pts))
    with pytest.raises(ConfigError, match=r"X has the columns 'a', 'b'; a conditional density reads two columns "
                                          r"named x and y"):
        BFTDensity(grid="paper").fit(_Table(a=pts[:, 0], b=pts[:, 1]))
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"y": pts[:, 1], "x": pts[:, 0]})
    assert np.array_equal(BFTDensity(grid="paper", l2=0.025).fit(frame).density_, by_array.density_)
    # columns that are positions (a frame made from an array) are read by position
    assert np.array_equal(BFTDensity(grid="paper", l2=0.025).fit(pd.DataFrame(pts)).density_, by_array.density_)


@pytest.mark.parametrize("bad, match", [
    (np.array([[3 + 1j, 3], [7, 12]]), "holds complex numbers"),
    ([[3 + 0j, 3.0], [7.0, 12.0]], "holds complex numbers"),
    (np.ma.masked_array([[3.0, 3.0], [7.0, 12.0]], mask=[[False, True], [False, False]]),
     r"is a masked array with 1 masked value\(s\)"),
    (np.empty((0, 2)), r"X is empty \(shape \(0, 2\)\)"),
    (np.empty(0), r"X is empty"),
    ([["a", "b"]], "must be real numbers"),
])
def test_complex_masked_empty_and_text_data_are_refused(bad, match):
    # complex values lost their imaginary part, a mask was ignored, and empty 2-D data fitted the flat prior
    with pytest.raises(ConfigError, match=match):
        BFTDensity(grid="paper").fit(bad)
    from bftcore.estimator import BFTRegressor
    if np.ndim(bad) == 2 and np.shape(bad)[0]:
        with pytest.raises(ConfigError, match=match):
            BFTRegressor().fit(np.asarray(bad)[:, :1] if not np.ma.isMaskedArray(bad) else bad[:, 1:], [1.0, 2.0])


def test_a_masked_array_without_masked_values_is_its_data():
    pts = np.array([[3.0, 3.0], [7.0, 12.0]])
    plain = BFTDensity(grid="paper", l2=0.025).fit(pts)
    masked = BFTDensity(grid="paper", l2=0.025).fit(np.ma.masked_array(pts, mask=False))
    assert np.array_equal(plain.density_, masked.density_)


def test_not_fitted_error_is_scikit_learns_when_installed():
    from bftcore.estimator import BFTRegressor
    for est, call in ((BFTDensity(), lambda e: e.score([[3, 3]])), (BFTDensity(), lambda e: e.predict_proba([[3, 3]])),
                      (BFTDensity(), lambda e: e.regression()), (BFTRegressor(), lambda e: e.predict([1.0])),
                      (BFTRegressor(), lambda e: e.sample_y([1.0])), (BFTRegressor(), lambda e: e.score([1.0], [1.0])),
                      (BFTRegressor(), lambda e: e.log_marginal_likelihood())):
        with pytest.raises(NotFittedError, match=f"this {type(est).__name__} is not fitted yet") as info:
            call(est)
        assert isinstance(info.value, ValueError) and isinstance(info.value, AttributeError)   # as sklearn's
    sklearn_exceptions = pytest.importorskip("sklearn.exceptions")
    assert issubclass(NotFittedError, sklearn_exceptions.NotFittedError)


def test_a_one_dimensional_density_is_queried_by_y_values_or_by_points_on_its_node():
    y = np.array([0.2, 0.5, 0.4, 1.1, 0.9])
    est = BFTDensity(l2=1.0).fit(y)
    assert est.n_features_in_ == 1
    q = np.array([0.3, 0.8])
    by_values = est.score_samples(q)
    assert np.array_equal(by_values, est.score_samples(q[:, None]))
    assert np.array_equal(by_values, est.score_samples(np.column_stack([np.zeros(2), q])))   # x = 0, its node
    nodes = est.grid_.y.nodes
    np.testing.assert_allclose(by_values, np.interp(q, nodes, est.log_density_[0]), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="X has 3 features, but BFTDensity is expecting 1 features as input"):
        est.score_samples(np.zeros((2, 3)))
    two_d = BFTDensity(grid="paper", l2=0.025).fit([[3, 3], [7, 12]])
    with pytest.raises(ValueError, match="X has 1 features, but BFTDensity is expecting 2 features as input"):
        two_d.score_samples(np.array([[3.0], [4.0]]))


def test_a_one_dimensional_density_answers_between_its_nodes_and_is_zero_outside_its_support():
    """Issue 27: ln p per unit of y, linear between the nodes (exact at them), -inf outside the grid, as
    scikit-learn's KernelDensity answers far from its data; the probabilities integrate to 1 and samples follow p."""
    rng = np.random.default_rng(3)
    y = rng.normal(5.0, 2.0, 400)
    est = BFTDensity(l2=0.0, l6=1.0, lam="evidence").fit(y)
    g = est.grid_.y
    np.testing.assert_allclose(est.score_samples(g.nodes), est.log_density_[0], rtol=0, atol=1e-12)
    mid = (g.nodes[:-1] + g.nodes[1:]) / 2
    np.testing.assert_allclose(est.score_samples(mid), (est.log_density_[0, :-1] + est.log_density_[0, 1:]) / 2,
                               rtol=0, atol=1e-12)
    outside = est.score_samples([g.min - 1e-3 * g.h, g.max + 1.0, -1e6])
    assert np.all(outside == -np.inf) and np.all(est.predict_proba([g.max + 1.0]) == 0.0)
    assert est.score(np.append(y[:5], g.max + 1.0)) == -np.inf
    fine = np.linspace(g.min, g.max, 20001)
    assert np.trapezoid(est.predict_proba(fine), fine) == pytest.approx(1.0, abs=2e-3)
    draws = est.sample(20000, random_state=0)
    assert draws.shape == (20000,) and draws.min() >= g.min and draws.max() <= g.max
    assert np.mean(draws) == pytest.approx(np.trapezoid(fine * est.predict_proba(fine), fine), abs=0.05)
    assert np.array_equal(est.sample(5, random_state=1), est.sample(5, random_state=1))
    with pytest.raises(ValueError, match="finite"):
        est.score_samples([np.nan])
    with pytest.raises(ValueError, match="n_samples"):
        est.sample(0)
    two_d = BFTDensity(grid="paper", l2=0.025).fit([[3, 3], [7, 12]])
    with pytest.raises(ValueError, match="no p\\(x\\)"):
        two_d.sample(3)
    assert two_d.score_samples([[3.5, 3.0]])[0] == pytest.approx(
        (two_d.log_density_[2, 2] + two_d.log_density_[3, 2]) / 2, abs=1e-12)   # between x nodes too

