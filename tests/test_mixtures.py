"""Mixing coefficients, the 0-dimensional model of Fig 3 [001] / Fig 7, sweeps, basins and plateaus."""
import json

import numpy as np
import pytest
from scipy.optimize import brentq

from bftcore.foundations.mixing import (
    ReducedMixture,
    detect_plateaus,
    fig7_config,
    mean_field_rhs,
    mixing_coefficients,
    mixture_energy,
    zero_dimensional_model,
)
from bftcore.models.regression import RegressionModel
from bftcore.studies.workflows import (
    basins_document,
    beta_sweep,
    fig7_document,
    find_basins,
    regression_solver,
    sweep_document,
)


# ------------------------------------------------------------------------------------------ mixing coefficients
@pytest.mark.parametrize("beta", [1e-6, 1e-3, 1.0, 1e3, 1e6])
def test_mixing_sums_to_one_without_overflow(beta):
    E = np.array([1e3, -2e3, 5.0, 7e4])
    p = np.array([0.1, 0.2, 0.3, 0.4])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        a = mixing_coefficients(E, p, beta)
        F = mixture_energy(E, p, beta)
    assert np.all(np.isfinite(a)) and np.all(a >= 0)
    assert a.sum() == pytest.approx(1.0, abs=1e-14)
    assert np.isfinite(F)
    # -(1/beta) ln sum p exp(-beta E) lies between min E and the p-average of E (Jensen)
    assert E.min() - 1e-9 <= F <= p @ E + 1e-9 * abs(p @ E)


def test_mixing_matches_direct_formula_at_moderate_beta():
    E, p, beta = np.array([0.3, 1.1, -0.4]), np.array([0.5, 0.2, 0.3]), 1.7
    w = p * np.exp(-beta * E)
    assert np.allclose(mixing_coefficients(E, p, beta), w / w.sum(), rtol=1e-14)
    assert mixture_energy(E, p, beta) == pytest.approx(-np.log(w.sum()) / beta, rel=1e-14)


def test_mixing_limits():
    E, p = np.array([2.0, 1.0, 3.0]), np.array([0.2, 0.5, 0.3])
    assert np.allclose(mixing_coefficients(E, p, 1e-9), p, atol=1e-8)        # beta -> 0: a_j -> p_j
    assert np.allclose(mixing_coefficients(E, p, 1e6), [0, 1, 0], atol=1e-12)  # beta -> inf: winner takes all
    assert mixture_energy(E, p, 1e-9) == pytest.approx(p @ E, rel=1e-8)
    assert mixture_energy(E, p, 1e6) == pytest.approx(1.0 - np.log(0.5) / 1e6, rel=1e-12)


def test_mixing_symmetry_and_zero_weight():
    E, p = np.array([0.7, 0.2]), np.array([0.3, 0.7])
    a = mixing_coefficients(E, p, 2.0)
    assert np.allclose(mixing_coefficients(E[::-1], p[::-1], 2.0), a[::-1], rtol=1e-15)
    assert mixing_coefficients([0.0, 5.0], [0.0, 1.0], 3.0).tolist() == [0.0, 1.0]


@pytest.mark.parametrize("bad", [dict(E=[1, 2], p=[0.5]), dict(E=[1, 2], p=[-1, 2]), dict(E=[1, 2], p=[0, 0])])
def test_mixing_rejects_bad_input(bad):
    with pytest.raises(ValueError):
        mixing_coefficients(bad["E"], bad["p"], 1.0)
    with pytest.raises(ValueError, match="beta"):
        mixing_coefficients([1, 2], [0.5, 0.5], 0.0)


# ------------------------------------------------------------------------------------------ the Fig 7 model
def _tanh_rhs(a1, beta):
    """Right-hand side of (46) for b = 2, E~_2 - E~_1 = 0.1 beta, written out independently of the module."""
    return 0.5 * (np.tanh(beta / 4 * 2 * (2 * a1 - 1) + 0.05 * beta) + 1)


def _true_bifurcation():
    """Saddle node of a = F(a): F'(a) = (beta/2) sech^2(Delta) = 1 at Delta* = -arccosh(sqrt(beta/2)) on the
    lower branch, and Delta* = (beta/2) tanh(Delta*) + 0.05 beta there (2a - 1 = tanh Delta)."""
    def tangency(beta):
        d = -np.arccosh(np.sqrt(beta / 2))
        return d - beta / 2 * np.tanh(d) - 0.05 * beta
    return brentq(tangency, 2.0 + 1e-9, 4.0, xtol=1e-13)


def test_fig7_model_numbers():
    M = zero_dimensional_model()
    assert np.allclose(M.variances, [0.2025, 0.3025], atol=1e-15)
    b, e_diff = M.tanh_form(1.0)
    assert b == pytest.approx(2.0) and e_diff == pytest.approx(0.1)
    B = M.B
    assert B[0, 1, 1] == pytest.approx(2.0) and B[1, 0, 0] == pytest.approx(2.0)
    assert np.count_nonzero(np.abs(B) > 1e-14) == 2   # all other entries of B_j vanish for m = 2


def test_fig7_regression_config_is_the_zero_dimensional_model():
    R = RegressionModel.from_config(fig7_config())
    assert np.allclose(R.component_solutions[:, 0], [0.55, -0.45])
    assert np.allclose(R.template_variances, [0.2025, 0.3025])
    assert R.reduced.tanh_form(3.0) == pytest.approx(zero_dimensional_model().tanh_form(3.0))


def test_fig7_solutions_at_beta_2_and_4():
    M = zero_dimensional_model()
    s2 = M.fixed_points(2.0)
    assert len(s2) == 1 and s2[0]["stable"]
    s4 = M.fixed_points(4.0)
    assert len(s4) == 3
    assert [s["stable"] for s in s4] == [True, False, True]   # sorted by a_1: stable, unstable, stable
    for beta, sols in ((2.0, s2), (4.0, s4)):
        for s in sols:
            a1 = s["mixing"][0]
            assert a1 == pytest.approx(_tanh_rhs(a1, beta), abs=1e-12)            # eq. (46)
            assert a1 == pytest.approx(mean_field_rhs(a1, beta, 2.0, 0.1 * beta), abs=1e-12)
    # independent count of roots: sign changes of a - F(a) on a fine grid
    a = np.linspace(1e-9, 1 - 1e-9, 200001)
    for beta, sols in ((2.0, s2), (4.0, s4)):
        g = a - _tanh_rhs(a, beta)
        assert np.count_nonzero(np.diff(np.sign(g))) == len(sols)


def test_fig7_stability_agrees_with_slope_of_the_tanh_map():
    M = zero_dimensional_model()
    for s in M.fixed_points(4.0):
        a1 = s["mixing"][0]
        slope = (_tanh_rhs(a1 + 1e-7, 4.0) - _tanh_rhs(a1 - 1e-7, 4.0)) / 2e-7
        assert s["jacobian_max_eig"] == pytest.approx(slope, rel=1e-5)
        assert s["stable"] == (slope < 1)


def test_fig7_bifurcation_within_001():
    beta_c = _true_bifurcation()
    assert 2.0 < beta_c < 2.75
    doc = fig7_document()
    assert len(doc["bifurcations"]) == 1
    assert abs(doc["bifurcations"][0] - beta_c) < 0.01
    # the same fold found without counting solutions: from the jump of the continued branch
    M = RegressionModel.from_config(fig7_config())
    jump = beta_sweep(regression_solver(M), np.linspace(0.5, 4.0, 36), init="average",
                      starts=[("template:1", "template:1")])
    assert jump["bifurcation_method"] == "jump"
    assert len(jump["bifurcations"]) == 1 and abs(jump["bifurcations"][0] - beta_c) < 0.01


def test_fig7_sweep_has_both_branches_with_hysteresis():
    beta_c = _true_bifurcation()
    doc = fig7_document(0.05, 4.0, 80)
    json.dumps(doc)
    up = doc["branches"][0]
    assert up["direction"] == "up"
    downs = [b for b in doc["branches"] if b["direction"] == "down"]
    ends = sorted(b["mixing"][0][0] for b in downs)   # a_1 at beta = 4 of each down branch
    exact4 = sorted(s["mixing"][0] for s in zero_dimensional_model().fixed_points(4.0) if s["stable"])
    assert np.allclose(ends, exact4, atol=1e-9)
    assert up["mixing"][-1][0] == pytest.approx(exact4[1], abs=1e-9)
    low = next(b for b in downs if b["mixing"][0][0] < 0.5)
    betas = np.array(low["beta"])
    a_low, a_up = np.array(low["mixing"])[:, 0], np.array(up["mixing"])[::-1, 0]
    differ = betas[np.abs(a_low - a_up) > 1e-6]
    # two branches exactly on [beta_c, 4] (up to the beta spacing 0.05), one below
    assert differ.min() == pytest.approx(beta_c, abs=0.05) and differ.max() == pytest.approx(4.0)
    assert all(low["stable"]) and all(up["stable"])
    assert doc["stable_counts"][0] == 1 and doc["stable_counts"][-1] == 2


def test_fig7_limits():
    M = zero_dimensional_model()
    hot = M.fixed_points(1e-6)
    assert len(hot) == 1 and np.allclose(hot[0]["mixing"], [0.5, 0.5], atol=1e-6)
    cold = [s for s in M.fixed_points(1e6) if s["stable"]]
    assert len(cold) == 2
    assert np.allclose(sorted(s["mixing"][0] for s in cold), [0.0, 1.0], atol=1e-12)


def test_symmetry_swapping_components_swaps_solutions():
    M = zero_dimensional_model()
    tb = np.array([0.55, -0.45])
    d = tb - tb[1]
    S = ReducedMixture([0.5, 0.5], M.variances[::-1], 2.0 * np.outer(d[::-1], d[::-1]))
    for beta in (2.0, 3.0, 4.0):
        a = sorted(s["mixing"][0] for s in M.fixed_points(beta))
        b = sorted(s["mixing"][1] for s in S.fixed_points(beta))
        assert np.allclose(a, b, atol=1e-10)


def test_three_components_fixed_points_are_fixed_and_minimisation_lands_on_stable_ones():
    rng = np.random.default_rng(1)
    Y = rng.normal(size=(3, 2)) * 1.5
    Y -= Y[0]
    M = ReducedMixture([0.2, 0.5, 0.3], [0.1, 0.3, 0.2], Y @ Y.T)
    beta = 3.0
    sols = M.fixed_points(beta)
    for s in sols:
        a = M.mixing(s["y"], beta)
        assert np.allclose(s["y"], a @ M.centres, atol=1e-9)      # y = sum a_j Y_j, eq. (42)/(43)
    stable = [s for s in sols if s["stable"]]
    assert len(stable) >= 2
    for j in range(3):
        r = M.minimize(beta, M.centres[j])
        assert r["converged"] and r["stable"]
        assert any(np.allclose(r["y"], s["y"], atol=1e-7) for s in stable)


# ------------------------------------------------------------------------------------------ basins, plateaus
def test_basins_of_fig7_at_beta_4():
    R = RegressionModel.from_config(fig7_config())
    minima = find_basins(regression_solver(R), [("template:0", "template:0"), ("template:1", "template:1"),
                                                  ("average", "average")], 4.0)
    assert len(minima) == 2
    assert minima[0]["energy"] < minima[1]["energy"]
    assert "template:0" in minima[0]["starts"] and minima[0]["mixing"][0] > 0.9
    assert minima[1]["starts"] == ["template:1"] and minima[1]["mixing"][0] < 0.1
    doc = basins_document({**fig7_config(), "beta": 4.0})
    json.dumps(doc)
    assert len(doc["minima"]) == 2 and sum(len(m["starts"]) for m in doc["minima"]) == len(doc["starts"])


def _gradient_descent_history(M, beta, y0, eta=0.5, n=200):
    y, hist = np.array(y0, float), []
    for it in range(n):
        hist.append({"iteration": it, "energy": M.energy(y, beta), "mixing": M.mixing(y, beta).tolist()})
        y = y - eta * M.gradient(y, beta)
    return hist


def test_plateau_near_the_saddle_is_flagged():
    M = zero_dimensional_model()
    saddle = next(s for s in M.fixed_points(4.0) if not s["stable"])
    hist = _gradient_descent_history(M, 4.0, saddle["y"] + 1e-6)
    plateaus = detect_plateaus(hist)
    assert len(plateaus) == 1
    p = plateaus[0]
    assert p["start"] <= 3 and p["end"] > 10
    assert p["mixing"][0] == pytest.approx(saddle["mixing"][0], abs=1e-2)   # stalled at the saddle ...
    stable = [s["mixing"][0] for s in M.fixed_points(4.0) if s["stable"]]   # ... then decayed to a minimum
    assert min(abs(p["final_mixing"][0] - a) for a in stable) < 1e-6
    # a run from a template goes straight into its minimum: no plateau
    assert detect_plateaus(_gradient_descent_history(M, 4.0, M.centres[0])) == []


def test_density_documents_delegate_to_the_api():
    cfg = {"model": "density", "data": [[3, 3], [7, 12]], "prior": {"field": "L", "lambda": 0.3, "l2": 0.025},
           "templates": [{"kind": "paper_t1"}, {"kind": "paper_t2"}], "weights": [0.5, 0.5],
           "solver": {"method": "newton", "init": "kernel"}}
    doc = sweep_document(cfg, 0.2, 1.0, 3)
    json.dumps(doc)
    assert doc["bifurcation_method"] == "jump" and doc["branches"][0]["beta"] == pytest.approx([0.2, 0.6, 1.0])
    for br in doc["branches"]:
        assert np.allclose(np.sum(br["mixing"], axis=1), 1.0)
    # continuation: the up and down branches of a unique solution coincide
    assert np.allclose(doc["branches"][0]["mixing"], doc["branches"][1]["mixing"][::-1], atol=1e-6)
    with pytest.raises(ValueError):
        sweep_document({"model": "nonsense"}, 0.1, 1.0, 3)


def test_log_spaced_sweep_reports_progress_and_samples_evenly_in_log_beta():
    seen = []
    doc = sweep_document(fig7_config(), 0.05, 4.0, 9, spacing="log", progress=lambda k, b: seen.append((k, b)))
    up = doc["branches"][0]["beta"]
    assert np.allclose(np.diff(np.log(up)), np.log(4.0 / 0.05) / 8)
    assert doc["spacing"] == "log"
    assert [k for k, _ in seen] == list(range(1, len(seen) + 1)) and len(seen) >= 2 * 9
    assert {round(b, 12) for _, b in seen} >= {round(b, 12) for b in up}
    assert json.loads(json.dumps(doc)) == doc


def test_sweep_spacing_is_checked():
    with pytest.raises(ValueError, match="spacing"):
        sweep_document(fig7_config(), 0.05, 4.0, 9, spacing="cubic")
