"""The scikit-learn-like estimator is a thin layer over api.fit: same numbers, sklearn conventions."""
import numpy as np
import pytest

from bftcore import api
from bftcore.estimator import BFTDensity, NotFittedError
from bftcore.grid import Grid
from bftcore.presets import TWO_POINTS, figure_config


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
    from bftcore.config import ConfigError
    with pytest.raises(ConfigError) as exc:
        BFTDensity(**params).fit(TWO_POINTS)
    assert named in str(exc.value)


def test_bad_data_raise_a_config_error():
    from bftcore.config import ConfigError
    for X in ([[1, 2, 3]], "abc", [[np.nan, 3]], [[30, 3]]):
        with pytest.raises(ConfigError):
            BFTDensity().fit(X)
