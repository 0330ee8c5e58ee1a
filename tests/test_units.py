"""Any units (issue 27): a user's data in metres, millimetres or dollars fit the same.

Rescaled and shifted data, ``a y + b``, give the rescaled answer: the same grid in the new units, the same chosen
lambda in units-free form (lambda of a prior of order k times ``a^(2k-1)``), and ``ln p`` shifted by ``-ln a``.  The
gate's checks are units-free too: what it accepts or refuses does not depend on the units."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bftcore.estimator import BFTDensity
from bftcore.foundations.config import ConfigError, internal_scale, lambda_bounds, validate_config
from bftcore.models import presets

SAMPLE = np.random.default_rng(7).normal(0.0, 1.0, 200)
ORDERS = {"l2": 1, "l4": 2, "l6": 3}
#: How closely lambda (relative) and ln p (absolute) follow a change of units, by order.  l2 meets issue 27's 1e-6.
#: The stiffer priors are limited by floating point, not by units: the banded K of l4 and l6 has a condition number
#: of 1e7 and 1e10 on 200 nodes, so the rounding of its entries moves the log-determinant of the evidence by 1e-4
#: (l6) in any units, and the flat maximum moves with it (measured: l4 3e-5, l6 3e-3 in lambda).  Exact
#: equivariance for every order needs the solver in the grid's internal coordinates (issue 27, open).
TOLERANCE = {"l2": (1e-6, 1e-6), "l4": (1e-4, 1e-4), "l6": (1e-2, 3e-3)}
scales = st.floats(-6.0, 6.0).map(lambda e: 10.0 ** e)


def _fit(y, order):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an edge maximum warns; the comparison is the point here
        return BFTDensity(**{"l2": 0.0, order: 1.0}, lam="evidence").fit(y)


REFERENCE = {order: _fit(SAMPLE, order) for order in ORDERS}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=scales, shift=st.floats(-50.0, 50.0), order=st.sampled_from(sorted(ORDERS)))
def test_a_1d_density_by_evidence_is_equivariant_under_a_change_of_units(a, shift, order):
    ref = REFERENCE[order]
    b = a * shift
    fit = _fit(a * SAMPLE + b, order)
    k = ORDERS[order]
    np.testing.assert_allclose(fit.grid_.y.nodes, a * ref.grid_.y.nodes + b, rtol=1e-9, atol=1e-9 * a)
    rel, atol = TOLERANCE[order]
    assert fit.lam_ / a ** (2 * k - 1) == pytest.approx(ref.lam_, rel=rel)
    assert fit.evidence_edge_ == ref.evidence_edge_
    np.testing.assert_allclose(fit.log_density_, ref.log_density_ - math.log(a), rtol=0, atol=atol)
    assert fit.log_evidence_ + len(SAMPLE) * math.log(a) == pytest.approx(ref.log_evidence_, abs=10 * atol)


@pytest.mark.parametrize("a", [1e-6, 1e-3, 1.0, 1e3, 1e6])
def test_the_gate_accepts_and_refuses_the_same_document_in_any_units(a):
    """lambda and the masses rescaled with the grid: the same verdict and the same masses in internal units."""
    base = {"grid": {"y": {"min": -4.0, "max": 4.0, "n": 120, "boundary": "neumann"}},
            "data": [[0.0, v] for v in SAMPLE[:40].tolist()], "prior": {"l2": 0.0, "l6": 1.0}}

    def scaled(lam):
        d = {"grid": {"y": {"min": -4.0 * a, "max": 4.0 * a, "n": 120, "boundary": "neumann"}},
             "data": [[0.0, v * a] for v in SAMPLE[:40].tolist()],
             "prior": {"l2": 0.0, "l6": 1.0, "lambda": lam * a ** 5}}
        return d
    for lam, ok in ((1e-3, True), (1.0, True), (1e9, False), (1e-25, False)):
        if ok:
            ref = validate_config({**base, "prior": {**base["prior"], "lambda": lam}})
            cfg = validate_config(scaled(lam))
            assert cfg["solver"]["init_mass2"] / a ** -6 == pytest.approx(ref["solver"]["init_mass2"], rel=1e-9)
            lo, hi = lambda_bounds(cfg)
            rlo, rhi = lambda_bounds(ref)
            assert (lo / a ** 5, hi / a ** 5) == pytest.approx((rlo, rhi), rel=1e-9)
        else:
            with pytest.raises(ConfigError, match="too stiff" if lam > 1 else "too weak"):
                validate_config(scaled(lam))
            with pytest.raises(ConfigError, match="too stiff" if lam > 1 else "too weak"):
                validate_config({**base, "prior": {**base["prior"], "lambda": lam}})


def test_the_papers_grid_is_its_own_internal_grid():
    """Spacing 1: the masses are the paper's, so every preset keeps its numbers."""
    for name in ("fig14", "fig21", "fig23"):
        cfg = validate_config(presets.figure_config(name))
        assert internal_scale(cfg, __import__("bftcore").foundations.config.grid_from_config(cfg)) == 1.0
        raw = presets.figure_config(name).get("solver", {})
        assert cfg["solver"]["init_mass2"] == raw.get("init_mass2", 0.1)
        assert cfg["solver"]["mass2"] == raw.get("mass2", 0.01)
