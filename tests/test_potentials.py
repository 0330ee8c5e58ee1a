"""Prior potentials of Fig. 12 and robust data terms of Fig. 5 (bftcore.foundations.potentials)."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bftcore.foundations.potentials import (
    POTENTIAL_PRESETS,
    cup,
    cup_derivative,
    data_term,
    fig5_document,
    fig12_document,
    irls_weight,
    prior_potential,
    slope_from_grey_levels,
)

FAMILY = [name for name in POTENTIAL_PRESETS if name != "quadratic"]
DATA = ["gaussian", "mixture2", "mixture11", "insensitive"]


def central_difference(f, x, h):
    return (f(x + h) - f(x - h)) / (2 * h)


# ------------------------------------------------------------------------------------------ the Fig. 12 family
@settings(max_examples=60, deadline=None, derandomize=True)
@given(s=st.floats(-80, 80), name=st.sampled_from(FAMILY), s0=st.floats(-5, 5))
def test_potential_derivative_matches_finite_differences(s, name, s0):
    p = prior_potential(name, s0=s0)
    if abs(s - s0) < 1e-3 * p.b:  # the cusp has no derivative at s0; elsewhere psi is smooth
        s = s0 + 1e-3 * p.b
    h = 1e-6 * max(1.0, abs(s - s0))
    fd = central_difference(p.value, np.array(s), h)
    assert p.derivative(np.array(s)) == pytest.approx(fd, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("name", ["quadratic"] + FAMILY)
def test_potential_second_derivative_matches_finite_differences(name):
    p = prior_potential(name, s0=0.7)
    s = 0.7 + np.concatenate([np.linspace(-60, -0.5, 25), np.linspace(0.5, 60, 25)])
    fd = central_difference(p.derivative, s, 1e-5)
    assert np.allclose(p.second_derivative(s), fd, rtol=1e-6, atol=1e-9)
    if name == "cup":
        assert p.second_derivative(0.7) == pytest.approx(2 * p.a / p.b ** 2)  # the curvature the demo matches


@pytest.mark.parametrize("name", DATA)
def test_data_term_second_derivative_matches_finite_differences(name):
    rho = data_term(name, sigma=0.7, **({"mu": 0.9} if name.startswith("mixture") else {}))
    e = np.concatenate([np.linspace(-9, -1.3, 20), np.linspace(-0.8, 0.8, 9), np.linspace(1.3, 9, 20)])
    fd = central_difference(rho.derivative, e, 1e-5)
    assert np.allclose(rho.second_derivative(e), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", FAMILY)
def test_potential_landmarks_of_fig12(name):
    p = prior_potential(name)
    assert p.value(0.0) == 0.0
    assert p.value(p.b) == pytest.approx(p.a / 2, rel=1e-14)
    assert p.value(-p.b) == pytest.approx(p.a / 2, rel=1e-14)
    assert p.value(1e300) == pytest.approx(p.a, rel=1e-14)  # no overflow of (s/b)^gamma
    assert np.all(np.sign(p.value(np.linspace(-100, 100, 11))) * np.sign(p.a) >= 0)


def test_potential_closed_forms_and_centre():
    s = np.linspace(-20, 20, 41)
    a, b = 1.0, 3.0
    assert np.allclose(cup(s, a, b, 2.0), a * s ** 2 / (b ** 2 + s ** 2), rtol=1e-14)  # Geman-McClure
    assert np.allclose(cup_derivative(s, a, b, 2.0), 2 * a * b ** 2 * s / (b ** 2 + s ** 2) ** 2, rtol=1e-12)
    # the cusp: psi' grows without bound towards s0 (gamma < 1), the smooth cup's goes to 0
    cusp, smooth = prior_potential("cusp"), prior_potential("cup")
    assert cusp.is_cusp and not smooth.is_cusp
    assert cusp.derivative(1e-8) / cusp.derivative(1e-6) == pytest.approx(100 ** 0.3, rel=1e-4)  # ~ s^(gamma-1)
    assert smooth.derivative(1e-8) < 1e-8
    assert cusp.derivative(0.0) == 0.0 and smooth.derivative(0.0) == 0.0  # sgn(0) = 0


def test_quadratic_is_the_gaussian_member():
    p = prior_potential("quadratic", s0=0.5)
    s = np.linspace(-3, 3, 7)
    assert np.allclose(p.value(s), 0.5 * (s - 0.5) ** 2)
    assert np.allclose(p.derivative(s), s - 0.5)
    assert np.all(p.weight(s) == 1.0) and p.start_weight == 1.0


@pytest.mark.parametrize("name", FAMILY)
def test_irls_weight_reproduces_the_derivative(name):
    """w (s - s0) = psi'(s) away from the clip: the weighted quadratic has the potential's gradient."""
    p = prior_potential(name, s0=1.5)
    s = np.concatenate([np.linspace(-60, 60, 50), [1.5 + 1e-3, 1.5 - 1e-2]])
    assert np.allclose(p.weight(s) * (s - 1.5), p.derivative(s), rtol=1e-12, atol=1e-15)


def test_cusp_weight_is_clipped_finite():
    p = prior_potential("cusp")
    w = p.weight(np.array([0.0, 1e-12, p.clip, 10 * p.clip]))
    assert np.all(np.isfinite(w))
    assert w[0] == w[1] == w[2] > w[3]  # constant inside the clip, decreasing outside
    assert p.clip == pytest.approx(1e-6 * p.b)
    with pytest.raises(ValueError, match="clip"):
        irls_weight([1.0], np.sign, clip=0.0)


def test_grey_levels_to_slope():
    # b = 3 grey levels between neighbouring pixels, for data of range 1 sampled every 0.01: a slope of 3/2.55
    assert slope_from_grey_levels(3.0, 1.0, 0.01) == pytest.approx(3 / 2.55)


# ------------------------------------------------------------------------------------------ robust data terms
@settings(max_examples=60, deadline=None, derandomize=True)
@given(e=st.floats(-30, 30), name=st.sampled_from(DATA), sigma=st.floats(0.2, 3), mu=st.floats(0, 2),
       eps=st.floats(0, 2))
def test_data_term_derivative_matches_finite_differences(e, name, sigma, mu, eps):
    params = {"gaussian": {}, "mixture2": {"mu": mu}, "mixture11": {"mu": mu}, "insensitive": {"eps": eps}}[name]
    rho = data_term(name, sigma=sigma, **params)
    h = 1e-6 * max(1.0, abs(e))
    if name == "insensitive" and abs(abs(e) - eps) < 10 * h:  # the kinks of |e|_eps
        e = e + 20 * h
    fd = central_difference(rho.value, np.array(e), h)
    assert rho.derivative(np.array(e)) == pytest.approx(fd, rel=1e-5, abs=1e-7)
    assert rho.value(0.0) == pytest.approx(0.0, abs=1e-15)


def test_two_gaussian_mixture_closed_form():
    """-ln(N(e; 1, 1)/2 + N(e; -1, 1)/2) = e^2/2 - ln cosh e + c (c makes rho(0) = 0)."""
    e = np.linspace(-12, 12, 97)
    rho = data_term("mixture2")
    assert np.allclose(rho.value(e), e ** 2 / 2 - np.log(np.cosh(e)), rtol=1e-12, atol=1e-13)
    assert np.allclose(rho.derivative(e), e - np.tanh(e), rtol=1e-12, atol=1e-13)
    general = data_term("mixture2", sigma=2.0, mu=3.0)
    assert np.allclose(general.value(e), e ** 2 / 8 - np.log(np.cosh(3 * e / 4)), rtol=1e-12, atol=1e-13)
    small = np.array([1e-2, 2e-2])
    assert np.allclose(rho.value(small), small ** 4 / 12, rtol=1e-3)  # flat (quartic) at 0


def test_eleven_gaussian_mixture_is_nearly_flat_between_its_means():
    rho = data_term("mixture11")
    assert np.max(np.abs(rho.value(np.linspace(-2, 2, 41)))) < 1e-3
    assert np.max(np.abs(rho.value(np.linspace(-3, 3, 61)))) < 1e-2
    assert rho.value(10.0) > 5.0  # quadratic again beyond the outermost mean
    naive = -np.log(np.mean(np.exp(-0.5 * (np.array([2.3])[:, None] - np.arange(-5, 6)) ** 2), axis=1))
    naive0 = -np.log(np.mean(np.exp(-0.5 * np.arange(-5, 6) ** 2)))
    assert rho.value(2.3) == pytest.approx(naive[0] - naive0, rel=1e-12)


def test_insensitive_error():
    rho = data_term("insensitive", eps=0.5, sigma=2.0)
    inside = np.linspace(-0.5, 0.5, 11)
    assert np.all(rho.value(inside) == 0) and np.all(rho.derivative(inside) == 0) and np.all(rho.weight(inside) == 0)
    assert rho.value(np.array([-3.0, 3.0])) == pytest.approx([1.25, 1.25])
    assert rho.derivative(np.array([-3.0, 3.0])) == pytest.approx([-0.5, 0.5])


@pytest.mark.parametrize("name", DATA)
def test_data_weights_reproduce_the_derivative(name):
    rho = data_term(name)
    e = np.linspace(-7, 7, 30)
    assert np.allclose(rho.weight(e) * e, rho.derivative(e), rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("call, match", [
    (lambda: prior_potential("cup", b=0.0), "b must be > 0"),
    (lambda: prior_potential("cusp", b=-1.0), "b must be > 0"),
    (lambda: prior_potential("cup", gamma=0.0), "gamma must be > 0"),
    (lambda: prior_potential("cup", a=0.0), "a must be"),
    (lambda: prior_potential("cup", clip=-1.0), "clip"),
    (lambda: prior_potential("mexican_hat"), "unknown prior potential 'mexican_hat'"),
    (lambda: prior_potential("quadratic", b=2.0), "takes"),
    (lambda: data_term("insensitive", eps=-0.1), "eps must be >= 0"),
    (lambda: data_term("gaussian", sigma=0.0), "sigma must be > 0"),
    (lambda: data_term("mixture2", mu=-1.0), "mu must be >= 0"),
    (lambda: data_term("huber"), "unknown data term 'huber'"),
    (lambda: data_term("gaussian", eps=1.0), "takes"),
    (lambda: cup(1.0, b=0.0), "b must be > 0"),
])
def test_bad_parameters_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ------------------------------------------------------------------------------------------ small figures
def test_fig5_document():
    doc = json.loads(json.dumps(fig5_document()))
    assert [p["name"] for p in doc["panels"]] == ["mixture2", "mixture11", "insensitive"]
    for p in doc["panels"]:
        e, E = np.array(p["e"]), np.array(p["E"])
        assert e.shape == E.shape and np.min(E) == pytest.approx(0.0, abs=1e-12)
        assert np.allclose(E, E[::-1])  # symmetric errors
    e, E = np.array(doc["panels"][2]["e"]), np.array(doc["panels"][2]["E"])
    assert np.all(E[np.abs(e) <= 1] == 0) and np.allclose(E[e > 1], e[e > 1] - 1)


def test_fig12_document():
    doc = json.loads(json.dumps(fig12_document()))
    panels = {p["name"]: p for p in doc["panels"]}
    assert [p["name"] for p in doc["panels"]] == ["cusp", "cup", "inverted_cup"]
    assert [panels[n]["cusp"] for n in ("cusp", "cup", "inverted_cup")] == [True, False, False]
    assert (panels["cusp"]["a"], panels["cusp"]["b"], panels["cusp"]["gamma"]) == (5.0, 10.0, 0.7)
    inv = panels["inverted_cup"]
    assert max(inv["psi"]) == 0.0 and min(inv["psi"]) > -4.8
    for p in doc["panels"]:
        s, psi = np.array(p["s"]), np.array(p["psi"])
        assert np.interp(p["b"], s, psi) == pytest.approx(p["a"] / 2, rel=2e-2)
