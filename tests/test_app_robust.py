"""A robust prior in the dashboard without a browser (issue 29): the session keeps the document's prior.potential and
data_term and solves them by IRLS, the Robust prior controls edit them through the same document, the psi inset draws
the potential the document means, a data point can be dragged (and a drag the session refuses changes nothing), and
the explanation says what is drawn."""
import numpy as np
import pytest

from app.session import BFTSession
from app.views.canvas import EQUATION_ROBUST, TEXT_ROBUST, DataCanvas
from bftcore.foundations.config import IRLS, validate_config
from bftcore.models import presets, problems, robust


def loaded(name="robust_prior", **kw):
    s = BFTSession(**kw)
    assert s.load_preset(name), s.message
    return s


def test_the_session_writes_back_the_documents_potential_and_data_term():
    s = loaded()
    want = validate_config(presets.PRESETS["robust_prior"][0])
    doc = validate_config(s.to_config())
    assert doc["prior"]["potential"] == want["prior"]["potential"] and doc["data_term"] == want["data_term"]
    assert doc.kind is problems.ROBUST_REGRESSION and s.kind is problems.ROBUST_REGRESSION
    assert doc["solver"]["method"] == IRLS and s.method == "newton"  # the menu keeps its own choice for later
    # a loaded document's values round-trip exactly
    other = BFTSession(live=False)
    other.param.update(**other.params_from_config(doc))
    assert validate_config(other.to_config()) == doc


def test_the_preset_in_the_session_is_bftcores_irls_fit():
    """The session's run is the robust kind's own solve of the same document (an independent caller), and it ignores
    the outlier where the Gaussian prior and data term follow it."""
    s = loaded(live=False)
    s.solve()
    fit = robust.solve_config(s.to_config())
    np.testing.assert_allclose(s.record.h, fit.h, rtol=0, atol=1e-10)
    i = int(np.argmin(np.abs(np.asarray(s.grid.x.nodes) - 0.2)))
    s.set_potential("off")
    s.set_data_term("gaussian")
    assert s.robust_prior == {} and s.kind is problems.REGRESSION
    assert validate_config(s.to_config())["solver"]["method"] == "newton"
    s.start_run(warm=False, play=False)  # live=False: a change does not restart the run by itself
    s.solve()
    assert abs(fit.h[i]) < 0.3 < abs(s.record.h[i]) - 0.5  # robust: ~0.16; Gaussian: ~1.1 at the outlier


def test_each_control_writes_a_document_the_gate_accepts():
    s = loaded(live=False)
    for name in ("cup", "cusp", "inverted_cup", "quadratic", "off"):
        s.set_potential(name)
        doc = validate_config(s.to_config())
        want = "quadratic" if name == "off" else name  # the data term (insensitive) stays, with the quadratic prior
        assert doc["prior"]["potential"]["name"] == want and doc["data_term"]["name"] == "insensitive"
    s.set_potential("cusp")
    s.set_robust_value("b", 3.5)
    assert validate_config(s.to_config())["prior"]["potential"] == {"name": "cusp", "a": 1.0, "b": 3.5,
                                                                      "gamma": 0.7, "s0": 0.0}
    s.set_potential("inverted_cup")  # b stays; a takes the inverted cup's sign, gamma Fig 12's
    assert s.robust_prior["potential"] == {"name": "inverted_cup", "a": -1.0, "b": 3.5, "gamma": 2.0, "s0": 0.0}
    for term, key in (("mixture2", "mu"), ("mixture11", "mu"), ("insensitive", "eps")):
        s.set_data_term(term)
        s.set_robust_value(key, 2.5)
        assert validate_config(s.to_config())["data_term"] == {"name": term, key: 2.5}


def test_bad_choices_are_refused_with_a_message_and_change_nothing():
    s = loaded(live=False)
    before = s.to_config()
    s.set_potential("<b>cup</b>")
    assert "Unknown prior potential" in s.message and s.to_config() == before
    s.set_data_term("huber")
    assert "Unknown data term" in s.message and s.to_config() == before
    s.set_robust_value("gamma", 5.0)  # not a control's number: ignored
    assert s.to_config() == before
    with pytest.raises(ValueError):
        s.robust_prior = {"potential": {"name": "evil"}}
    assert s.to_config() == before


def test_a_local_prior_and_a_robust_prior_exclude_each_other_with_a_message():
    s = loaded(live=False)
    s.set_local_type("switch")
    assert s.robust_prior == {} and s.local_type() == "switch" and "robust prior is off" in s.message
    s.set_potential("cup")
    assert s.local_prior == {} and s.potential_name() == "cup" and "local prior is off" in s.message
    assert validate_config(s.to_config()).kind is problems.ROBUST_REGRESSION


def test_a_point_moves_to_its_node_with_undo_and_a_bad_drag_changes_nothing():
    s = loaded(live=False)
    k = next(i for i, p in enumerate(s.data) if p[1] > 2)
    before = [list(p) for p in s.data]
    assert s.move_point(k, 0.2049, -0.5)
    assert s.data[k] == [0.2, -0.5] and len(s.data) == len(before)
    assert s.undo() and s.data == before
    for bad in [(k, float("nan"), 1.0), (k, 0.2, float("inf")), (k, 0.2, 1e300), (len(s.data), 0.2, 1.0),
                (-1, 0.2, 1.0), (k, 7.0, 1.0)]:
        assert not s.move_point(*bad)
        assert s.message.startswith("Ignored the drag") and s.data == before
    assert not s.add_point(0.2, 1e300)  # a click far out on a zoomed-out plot: refused in words, not by a raise
    assert s.message.startswith("Ignored the click: a point must stay within") and s.data == before


def test_the_canvas_relay_moves_the_one_dragged_point_and_puts_back_anything_else():
    s = loaded(live=False)
    canvas = DataCanvas(session=s)
    pts = np.asarray(s.data, float)
    k = int(np.argmax(pts[:, 1]))
    x, y = pts[:, 0].copy(), pts[:, 1].copy()
    y[k] = -1.0
    canvas.drag_relay.data = dict(x=x.tolist(), y=y.tolist())  # what the page sends at the end of a drag
    assert s.data[k] == [0.2, -1.0]
    before = [list(p) for p in s.data]
    y2 = np.asarray(s.data, float)[:, 1].copy()
    y2[:2] += 1.0  # two points at once: no drag does that
    canvas.drag_relay.data = dict(x=np.asarray(s.data, float)[:, 0].tolist(), y=y2.tolist())
    assert s.data == before
    np.testing.assert_array_equal(canvas.points_source.data["y"], np.asarray(before)[:, 1])
    canvas.drag_relay.data = dict(x=["a"], y=[None])  # garbage from the page
    assert s.data == before


def test_the_explanation_says_what_is_drawn():
    s = loaded(live=False)
    canvas = DataCanvas(session=s)
    assert canvas.equation.object == EQUATION_ROBUST["regression"] and canvas.text.object == TEXT_ROBUST
    s.set_potential("off")
    s.set_data_term("gaussian")
    assert canvas.equation.object != EQUATION_ROBUST["regression"]


def _cup(s, a, b, gamma):
    """Fig 12's family written out here: psi(s) = a (1 - 1/(1 + (|s|/b)^gamma))."""
    return a * (1.0 - 1.0 / (1.0 + (np.abs(s) / b) ** gamma))


def test_the_inset_draws_the_documents_potential_and_its_derivative():
    from app.views.controls import Controls
    s = loaded(live=False)
    c = Controls(session=s)
    rc = c.robust
    assert rc.potential.value == "cup" and rc.data_term.value == "ε-insensitive" and rc.b.value == 2.0
    assert c.widgets["method"].disabled  # IRLS is the robust prior's solver
    for label, name in (("cusp", "cusp"), ("inv. cup", "inverted_cup"), ("cup", "cup")):
        rc.potential.value = label
        assert s.potential_name() == name
        p = s.robust_prior["potential"]
        sv, psi, dpsi = (np.asarray(rc.curves.data[k], float) for k in ("s", "psi", "dpsi"))
        # document units: a relative to b^2 / 2 (bftcore.foundations.config._robust)
        np.testing.assert_allclose(psi, _cup(sv, p["a"] * p["b"] ** 2 / 2, p["b"], p["gamma"]), rtol=1e-12,
                                   atol=1e-12)
        inner = np.abs(sv) > 0.05 * p["b"]  # away from the cusp's kink at 0
        d = 1e-6 * p["b"]
        a = p["a"] * p["b"] ** 2 / 2
        fd = (_cup(sv + d, a, p["b"], p["gamma"]) - _cup(sv - d, a, p["b"], p["gamma"])) / (2 * d)
        np.testing.assert_allclose(dpsi[inner], fd[inner], rtol=1e-6, atol=1e-9 * np.max(np.abs(dpsi)))
        assert rc.warning.visible == (name == "inverted_cup")
    rc.potential.value = "Gaussian"
    assert s.potential_name() == "quadratic"  # the insensitive data term alone: the quadratic prior
    sv, psi = (np.asarray(rc.curves.data[k], float) for k in ("s", "psi"))
    np.testing.assert_allclose(psi, sv ** 2 / 2, rtol=1e-12)
    rc.data_term.value = "Gaussian"
    assert s.robust_prior == {} and not c.widgets["method"].disabled


def test_a_density_takes_the_potential_without_a_data_term_and_warns_of_the_inverted_cups_patterns():
    from app.views.controls import Controls
    s = BFTSession(live=False)
    assert s.load_preset("fig21"), s.message
    c = Controls(session=s)
    s.set_data_term("insensitive")  # a density's data term is its counts
    assert "data term is its counts" in s.message and s.robust_prior == {}
    c.robust.potential.value = "inv. cup"
    doc = validate_config(s.to_config())
    assert doc.kind is problems.ROBUST_DENSITY and "data_term" not in doc and doc["solver"]["method"] == IRLS
    assert c.robust.warning.visible and c.robust.data_term.disabled
    assert "patterns" in c.robust.warning.object and c.robust.warning.styles.get("border")  # the alarm's look
    s.start_run(warm=False, play=False)  # live=False: a change does not restart the run by itself
    s.solve()
    fit = problems.ROBUST_DENSITY.solve(doc)
    np.testing.assert_allclose(s.record.field, fit.field, rtol=0, atol=1e-9)
    c.robust.potential.value = "Gaussian"
    assert s.robust_prior == {} and s.kind is problems.DENSITY
