"""scikit-learn's common estimator checks (``sklearn.utils.estimator_checks``) on BFTRegressor and BFTDensity.

scikit-learn is a test dependency only (the ``test`` extra); bftcore does not need it at run time.  Every check runs;
those that cannot apply to these estimators are listed below with the reason, and are expected to fail (a listed
check that starts to pass is reported as XPASS, so the list can shrink).  What the checks found and what was fixed
for users (issue 25): NotFittedError before fit, pickling a fitted regressor (its sparse factorisation did not
pickle), messages for complex, sparse, empty and featureless input, y=None, NaN before a shape error.
"""
from __future__ import annotations

import warnings

import pytest

pytest.importorskip("sklearn")

from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from bftcore.estimator import BFTDensity, BFTRegressor  # noqa: E402

# the estimators follow the conventions without inheriting BaseEstimator (that would make scikit-learn a dependency)
pytestmark = pytest.mark.filterwarnings("ignore:Estimator .* does not inherit from `sklearn.base.BaseEstimator`")

#: BFTRegressor takes one input dimension (X of shape (n,) or (n, 1)), as its ``one_d_array`` tag says.  With that
#: tag scikit-learn hands it X[:, 0]; these checks then index the 1-D X as 2-D themselves, or need several features.
_ONE_D = "the check indexes X[:, 0] after scikit-learn made X one-dimensional for the one_d_array tag (its own error)"
REGRESSOR_EXCLUDED = {
    "check_dont_overwrite_parameters": _ONE_D,
    "check_dtype_object": _ONE_D,
    "check_f_contiguous_array_estimator": _ONE_D,
    "check_regressors_no_decision_function": _ONE_D,
    "check_methods_sample_order_invariance": _ONE_D,
    "check_methods_subset_invariance": _ONE_D,
    "check_fit2d_1sample": _ONE_D,
    "check_fit2d_1feature": _ONE_D,
    "check_dict_unchanged": _ONE_D,
    "check_fit2d_predict1d": _ONE_D,
    "check_n_features_in": "the check reads X.shape[1] of the one-dimensional X it made (one_d_array tag)",
    "check_n_features_in_after_fitting": "the check reads X.shape[1] of the one-dimensional X it made",
    "check_estimator_sparse_array": "scikit-learn cannot build the 1-d sparse array it means to pass (lil format)",
    "check_fit1d": "X of shape (n,) is BFTRegressor's documented input (one feature), not an error",
    "check_regressors_train": "the targets depend on one of ten features, not necessarily the first, which is all "
                              "a regression on one input sees; R^2 > 0.5 cannot be asked of it",
    "check_supervised_y_2d": "y of shape (n, 1) is one target and is taken without a warning (DataConversionWarning "
                             "is scikit-learn's own class, and scikit-learn is optional)",
}

#: BFTDensity.fit(X, y) reads y as the second coordinate of p(y|x) (x = X, y = y: its documented signature), not as
#: an ignored label; checks that pass a label vector y beside X of several features therefore give a density a
#: data set it cannot read (refused: "with y given, X holds the x values"), and X of one column is the y values of a
#: one-dimensional density (not an error).
_LABELS = "passes class labels as y beside X of several features; BFTDensity.fit(X, y) reads y as the coordinate y"
DENSITY_EXCLUDED = {name: _LABELS for name in (
    "check_fit_score_takes_y", "check_estimators_overwrite_params", "check_dont_overwrite_parameters",
    "check_estimators_fit_returns_self", "check_readonly_memmap_input", "check_n_features_in_after_fitting",
    "check_positive_only_tag_during_fit", "check_estimators_dtypes", "check_dtype_object",
    "check_estimators_empty_data_messages", "check_pipeline_consistency", "check_estimators_nan_inf",
    "check_estimators_pickle", "check_f_contiguous_array_estimator", "check_methods_sample_order_invariance",
    "check_methods_subset_invariance", "check_fit2d_1sample", "check_dict_unchanged", "check_fit_idempotent",
    "check_fit_check_is_fitted", "check_n_features_in", "check_fit2d_predict1d")}
DENSITY_EXCLUDED["check_fit1d"] = "X of shape (n,) is the y values of a one-dimensional density p(y), not an error"

#: Small grids: the checks fit many times.  The density's grid covers the checks' data (normal, uniform, blobs).
ESTIMATORS = [BFTRegressor(n=30),
              BFTDensity(grid={"x": {"min": -30, "max": 30, "n": 8, "boundary": "neumann"},
                               "y": {"min": -30, "max": 30, "n": 10, "boundary": "neumann"}}, max_iter=20)]


def _excluded(estimator) -> dict[str, str]:
    return REGRESSOR_EXCLUDED if isinstance(estimator, BFTRegressor) else DENSITY_EXCLUDED


with warnings.catch_warnings():  # collecting the checks warns too, before pytestmark applies
    warnings.filterwarnings("ignore", "Estimator .* does not inherit from `sklearn.base.BaseEstimator`")
    _CHECKS = parametrize_with_checks(ESTIMATORS, expected_failed_checks=_excluded)


@_CHECKS
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def test_the_exclusions_name_real_checks():
    # a renamed or retired check would leave a stale exclusion behind: every listed name must be one sklearn runs
    from sklearn.utils.estimator_checks import _yield_all_checks
    for estimator in ESTIMATORS:
        names = {getattr(c, "func", c).__name__ for c in _yield_all_checks(estimator, legacy=True)}
        assert set(_excluded(estimator)) <= names, set(_excluded(estimator)) - names
