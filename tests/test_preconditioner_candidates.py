"""scripts/preconditioner_candidates.py's two-level candidate (issue 31): its coarse basis, its exactness when the
coarse space is everything, its symmetry (CG needs it), and fewer CG iterations than the separable form alone on
the benchmark's l6 problem.  No assertion on time."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from bftcore.foundations.limits import UNLIMITED, using
from bftcore.models.density import SeparablePreconditioner

_path = Path(__file__).resolve().parents[1] / "scripts" / "preconditioner_candidates.py"
_spec = importlib.util.spec_from_file_location("preconditioner_candidates", _path)
pc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pc)


@pytest.fixture(scope="module")
def point16():
    with using(UNLIMITED):
        return pc.converged_point(16)


def _tangent(point, seed):
    x = np.random.default_rng(seed).standard_normal(point.P.shape)
    return x - np.sum(point.P * point.energy.grid.hy * x, axis=1, keepdims=True)


@pytest.mark.parametrize("periodic", [True, False])
def test_spline_basis(periodic):
    assert np.array_equal(pc.spline_basis(7, 1, 0, periodic).toarray(), np.eye(7))
    B = pc.spline_basis(32, 4, 3, periodic).toarray()
    assert B.shape == (32, 8 if periodic else 8) and B.max() == pytest.approx(1.0)
    assert np.all(B.sum(axis=1) > 0)  # every node covered
    if periodic:  # shifted copies of one spline, so their sum is constant
        assert np.ptp(B.sum(axis=1)) < 1e-12 * B.sum(axis=1).max()
        assert np.allclose(np.roll(B[:, 0], 4), B[:, 1])


def test_two_level_is_exact_with_the_whole_space_as_coarse(point16):
    """Knots at every node with degree 0: Z = I, the coarse solve is H's pseudo-inverse and the balancing form
    returns it; CG converges in one iteration."""
    P = pc.SplineTwoLevel(point16, 1, 0)
    b = point16.hessp(_tangent(point16, 0), convexified=True)
    z = P(b)
    assert np.allclose(point16.hessp(z, convexified=True), b, atol=1e-8 * np.abs(b).max())
    assert pc.pcg_count(point16, b, P) == 1


@pytest.mark.parametrize("additive", [False, True])
def test_two_level_is_symmetric(point16, additive):
    P = pc.SplineTwoLevel(point16, 4, 3, additive=additive)
    r1 = point16.hessp(_tangent(point16, 1), convexified=True)
    r2 = point16.hessp(_tangent(point16, 2), convexified=True)
    a, b = np.vdot(r1, P(r2)), np.vdot(r2, P(r1))
    assert a == pytest.approx(b, rel=1e-8)
    assert np.vdot(r1, P(r1)) > 0


def test_additive_two_level_is_the_sum_of_its_parts(point16):
    """The additive form adds the separable smoother and the coarse solve (no Hessian product)."""
    P = pc.SplineTwoLevel(point16, 4, 3, additive=True)
    r = point16.hessp(_tangent(point16, 3), convexified=True)
    np.testing.assert_allclose(P(r), P.smoother(r) + P.coarse_solve(r), rtol=1e-12, atol=1e-14 * np.abs(P(r)).max())
    assert not np.allclose(P(r), pc.SplineTwoLevel(point16, 4, 3)(r))


def test_two_level_needs_fewer_cg_iterations_than_the_separable_form():
    with using(UNLIMITED):
        point = pc.converged_point(32)
    b = point.hessp(_tangent(point, 3), convexified=True)
    separable = pc.pcg_count(point, b, SeparablePreconditioner(point, True, {}))
    two_level = pc.pcg_count(point, b, pc.SplineTwoLevel(point, 4, 3))
    assert two_level < separable / 1.5


def test_two_level_newton_reaches_the_solver_minimum():
    cfg = pc.bench_config((24, 24), "l6")
    with using(UNLIMITED):
        _, e_solver, _, _ = pc.newton_run(cfg)
        _, e_two, cg, _ = pc.newton_run(cfg, pc.TwoLevelNewton)
    assert e_two == pytest.approx(e_solver, rel=1e-10) and sum(cg) > 0


def test_newton_mode_refuses_a_bad_spacing(capsys):
    with pytest.raises(SystemExit):
        pc.main(["--newton", "1"])
    assert "knot spacing" in capsys.readouterr().err
