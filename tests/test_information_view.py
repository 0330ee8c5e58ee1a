"""The "Information and hyperpriors" tab without a browser (app/views/information.py): the Step button's data give
the posterior and M(n) that bftcore.studies.small_figures computes for the same data; a factorial prior keeps M at
rounding; the joint posterior's marker is where the documents of Figs 6, 9 and 10 put the maximum."""
import math

import numpy as np
import pytest

from app.views.information import InformationView, correlated_prior, maximum_text, refined_maxima
from bftcore.studies import small_figures as sf


def test_the_default_correlation_is_the_modules_correlated_prior():
    assert correlated_prior(0.8) == pytest.approx(sf.CORRELATED_PRIOR, abs=1e-15)
    assert InformationView().prior == pytest.approx(sf.CORRELATED_PRIOR, abs=1e-15)


def test_steps_lower_M_and_agree_with_small_figures_for_the_same_data():
    view = InformationView()
    m0 = view.M[0]
    assert m0 == pytest.approx(sf.mutual_information(sf.CORRELATED_PRIOR), rel=1e-12) and m0 > 0.05
    for n in range(1, 6):
        view.step()
        assert len(view.x) == n and len(view.M) == n + 1
    # M falls as the posterior settles; not at every step: the second datum (y = -0.30 at x_a) favours the wrong
    # sign and raises it (as the paper's "unlucky" data do)
    assert view.M[3] < view.M[0] / 100 and view.M[5] < 1e-6, view.M
    assert view.M[2] > view.M[1]
    post = sf.sequential_posteriors(sf.CORRELATED_PRIOR, np.array(view.x), np.array(view.y))
    assert view.posteriors == pytest.approx(post, abs=1e-14)
    assert view.M == pytest.approx([sf.mutual_information(w) for w in post], rel=1e-10, abs=1e-16)
    # the data come from the true h = (+1, +1): the shown source is what was computed
    assert list(view.m_source.data["M"]) == view.M
    assert view.bar_source.data["posterior"] == pytest.approx(post[-1], abs=1e-14)
    assert "n = 5" in view.mi_text.text and f"y = {view.y[-1]:+.2f}" in view.datum_text.text


def test_reset_draws_the_same_data_again_and_a_new_prior_reuses_the_data():
    view = InformationView()
    view.step(4)
    first = (list(view.x), list(view.y))
    view.correlation = 0.3  # the same data from the new prior
    assert (view.x, view.y) == first
    assert view.posteriors[0] == pytest.approx(correlated_prior(0.3))
    assert view.M == pytest.approx([sf.mutual_information(w) for w in sf.sequential_posteriors(
        correlated_prior(0.3), np.array(view.x), np.array(view.y))], rel=1e-10, abs=1e-16)
    view.reset()
    assert view.x == [] and len(view.M) == 1
    view.step(4)
    assert (view.x, view.y) == first


def test_a_factorial_prior_keeps_M_at_rounding_whatever_the_data():
    view = InformationView(factorial=True)
    assert view.prior == pytest.approx(sf.FACTORIAL_PRIOR)
    view.step(20)
    assert max(view.M) < 1e-11
    assert view.correlation_widget.disabled
    # and the correlated prior's M with the same data is not at rounding
    view.factorial = False
    assert view.M[0] > 0.05 and not view.correlation_widget.disabled


def test_y_d_at_one_half_puts_the_marker_at_the_one_component_asymptote():
    view = InformationView(figure="mixture", hyperprior="uniform")
    view.y_d = 0.5
    # Fig 10's asymptote h* = (1 + y_D) / 2, beta* = 4 / (1 - y_D)^2, exact at y_D = 0.5
    assert list(view.max_source.data["h"]) == pytest.approx([0.75], abs=1e-5)
    assert list(view.max_source.data["t"]) == pytest.approx([math.log10(16.0)], abs=1e-5)
    assert list(view.edge_source.data["h"]) == []
    assert view.max_text.text == "maximum at h = 0.75, β = 16"
    before = view.max_text.text
    view.y_d = 0.3
    assert view.max_text.text != before


@pytest.mark.parametrize("name", ["fig6", "fig9", "fig10"])
def test_the_maxima_are_those_of_the_documents(name):
    """The view's vectorised climb (refined_maxima) against small_figures.grid_maxima (L-BFGS-B) in the documents."""
    doc = sf.SMALL_FIGURES[name].compute()
    view = InformationView()
    for panel in doc["panels"]:
        key = "gamma" if name == "fig6" else "beta"
        view.param.update(figure="fig6" if name == "fig6" else "mixture", hyperprior=panel["hyperprior"],
                          y_d=panel["y_D"] if name != "fig6" else view.y_d)
        assert len(view.maxima) == len(panel["maxima"]), panel["hyperprior"]
        expected = sorted(panel["maxima"], key=lambda m: m["h"])
        got = sorted(view.maxima, key=lambda m: m["h"])
        for m, g in zip(expected, got):
            assert g["edge"] == m.get("edge")
            assert g["h"] == pytest.approx(m["h"], abs=1e-5)
            assert math.log(g["s"]) == pytest.approx(math.log(m[key]), abs=1e-5)
        if panel["maxima"][0].get("edge"):
            symbol = "γ" if name == "fig6" else "β"
            limit = "∞" if panel["maxima"][0]["edge"] == "upper" else "0"
            assert view.max_text.text.startswith(f"maximum off the grid: {symbol} → {limit} (h = ")
            assert len(view.edge_source.data["h"]) == 1 and len(view.max_source.data["h"]) == 0


def test_a_saddle_is_not_reported_as_a_maximum():
    """Fig 9 at y_D = 0: the grid's node near h = 0, beta = 2 is a saddle between the two maxima."""
    h, s = np.linspace(-1.5, 1.5, sf.H_NODES), np.geomspace(*sf.LOG_RANGE, sf.LOG_NODES)
    maxima = refined_maxima(lambda a, b: sf.mixture_log_p(a, b, 0.0), h, s)
    assert sorted(round(m["h"], 4) for m in maxima) == [-0.4613, 0.4613]
    assert maximum_text(maxima, "β") == "2 equal maxima at h = -0.461, 0.461, β = 3.48"
