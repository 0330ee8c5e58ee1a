"""Stability of density solutions (used by beta sweeps and basins): minima pass, a point between two basins of a
prior mixture, where the mixing flips, has negative curvature and fails."""
import numpy as np
import pytest
from scipy.optimize import brentq

from bftcore import api
from bftcore.models.density import normalise_log
from bftcore.models.presets import figure_config


@pytest.fixture(scope="module")
def two_basins():
    cfg = figure_config("fig28")          # lambda = 1.2, two templates: both basins are minima at beta = 1
    cfg["solver"].update(method="newton", max_iter=200)
    problem = api.build_density(cfg)
    L1 = np.array(api.fit({**cfg, "solver": {**cfg["solver"], "init": "template:0"}})["L"])
    L2 = np.array(api.fit({**cfg, "solver": {**cfg["solver"], "init": "template:1"}})["L"])
    return problem, L1, L2


def test_both_minima_are_stable_and_distinct(two_basins):
    problem, L1, L2 = two_basins
    a1 = problem.energy.at(L1).mixing
    a2 = problem.energy.at(L2).mixing
    assert a1[0] > 0.99 and a2[1] > 0.99                  # one solution in each basin
    assert api.is_local_minimum(problem, L1) and api.is_local_minimum(problem, L2)


def test_the_point_where_the_mixing_flips_is_not_a_minimum(two_basins):
    problem, L1, L2 = two_basins
    E = problem.energy
    path = lambda s: normalise_log((1 - s) * L1 + s * L2, problem.grid.hy)  # noqa: E731
    s_half = brentq(lambda s: E.at(path(s)).mixing[0] - 0.5, 0.0, 1.0)
    mid = path(s_half)
    # independent route: the energy along the line is concave there (second difference < 0)
    h = 1e-3
    e = [E.at(path(s_half + k * h)).value for k in (-1, 0, 1)]
    assert e[0] - 2 * e[1] + e[2] < 0
    assert not api.is_local_minimum(problem, mid)
