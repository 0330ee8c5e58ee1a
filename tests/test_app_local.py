"""A local prior in the dashboard without a browser: the session keeps the document's prior.local and prior.cuts,
the strip under the curve follows each frame, the explanation card says what is drawn, and the controls edit pi_soft,
the type and the cuts through the same document."""
import numpy as np

from app.session import BFTSession
from app.views.canvas import EQUATION_LOCAL, EQUATION_REGRESSION, DataCanvas
from app.views.local import LocalStrip
from bftcore.foundations.config import validate_config
from bftcore.models import presets


def loaded(name="local_switch"):
    s = BFTSession()
    assert s.load_preset(name), s.message
    return s


def test_the_session_writes_back_the_documents_local_prior():
    s = loaded()
    doc = validate_config(s.to_config())
    want = validate_config(presets.PRESETS["local_switch"][0])
    assert doc["prior"]["local"] == want["prior"]["local"] and doc["prior"]["cuts"] == []
    assert doc.kind is want.kind and s.kind is want.kind
    s.model = "density, prior on L"   # its data lie outside the density's y grid: that is what the message says
    assert s.message.startswith("Cannot solve: data point(s)") and s.local_prior
    s.param.update(data=[[0.2, 3.0], [0.7, 9.0]])   # inside: the density's grid is periodic in y, the prior goes
    s.model = "regression"
    s.model = "density, prior on L"
    assert "local" not in s.to_config()["prior"] and s.kind.name == "density" and s.local_prior == {}
    assert "The local prior does not fit the density: it is off." in s.message


def test_the_strip_follows_the_frames_and_shows_a_soft_at_the_step():
    s = loaded()
    canvas = DataCanvas(session=s)
    strip = LocalStrip(session=s, hero=canvas.figure)
    assert canvas.equation.object == EQUATION_LOCAL["switch"]
    s.solve()
    left, right, a = (np.asarray(strip.source.data[c]) for c in ("left", "right", "v"))
    assert strip.pane.visible and a.size == 100
    np.testing.assert_allclose(a, s.record.local[-1])
    assert np.all(np.abs(0.5 * (left + right)[a > 0.5] - 0.5) <= 0.02)
    assert "min-height" in canvas.figure.styles and "max(200px" in canvas.figure.styles["min-height"]
    s.local_prior = {}               # back to the plain regression: the strip goes, the plot gets its height back
    assert not strip.pane.visible and canvas.equation.object == EQUATION_REGRESSION
    assert "max(200px" not in canvas.figure.styles.get("min-height", "")


def test_the_hyperfield_strip_is_theta_per_edge():
    s = loaded("local_hyperfield")
    strip = LocalStrip(session=s)
    s.solve()
    theta = np.asarray(strip.theta.data["v"])
    assert theta.size == 100 and len(strip.source.data["v"]) == 0
    assert np.asarray(strip.theta.data["x"])[np.argmin(theta)] == np.float64(0.505)


def test_the_controls_edit_pi_soft_the_type_and_the_cuts_through_the_document():
    from app.views.controls import Controls
    s = loaded()
    c = Controls(session=s)
    lc = c.local
    assert lc.type.value == "binary switch" and lc.pi_soft.visible and lc.pi_soft.value == 0.05
    s.set_local_value("pi_soft", 0.2)                       # what the slider's release calls
    assert validate_config(s.to_config())["prior"]["local"]["pi"] == [0.8, 0.2] and lc.pi_soft.value == 0.2
    lc.type.value = "hyperfield"                            # the toggle
    doc = validate_config(s.to_config())
    assert doc["prior"]["local"]["type"] == "hyperfield" and doc.kind.name == "regression-local-hyperfield"
    assert lc.gamma.visible and not lc.pi_soft.visible
    lc.cuts.value = "0.505"
    assert validate_config(s.to_config())["prior"]["cuts"] == [0.505]
    lc.type.value = "off"                                   # the cuts stay, on the document's Gaussian prior
    doc = validate_config(s.to_config())
    assert doc["prior"]["local"] == {"type": "switch", "stiffness": [1.0], "pi": [1.0]}
    assert doc["prior"]["cuts"] == [0.505]
    lc.cuts.value = ""
    assert "local" not in s.to_config()["prior"] and s.kind.name == "regression"
    lc.cuts.value = "a, b"
    assert "Cuts must be x positions" in s.message


def test_a_runaway_hyperfield_says_where_and_what_to_raise():
    s = loaded("local_hyperfield")
    s.solve()
    s.set_local_value("gamma_theta", 0.01)   # gamma_theta mu_theta = 0.01: theta would reach theta0 + 50
    s.solve()
    assert "hyperprior is too weak" in s.message and "raise gamma_theta" in s.message


def test_a_density_takes_a_local_prior_on_an_open_grid_and_a_refused_one_changes_nothing():
    """The density's local priors (bftcore.models.local_density) through the same controls; what the gate refuses
    (a periodic axis) is refused before it is set, with the gate's words."""
    from app.views.canvas import EQUATION_LOCAL_DENSITY
    from bftcore.models import problems
    s = BFTSession(live=False)
    assert s.load_preset("fig21"), s.message
    canvas = DataCanvas(session=s)
    before = s.to_config()
    s.set_local_type("switch")  # fig 21's y axis is periodic
    assert s.message.startswith("Refused: ") and "periodic" in s.message and s.to_config() == before
    s.boundary_y = "neumann"
    s.set_local_type("switch")
    s.set_local_value("pi_soft", 0.6)   # some edges soft, to be drawn
    doc = validate_config(s.to_config())
    assert doc.kind is problems.DENSITY_LOCAL_SWITCH and canvas.equation.object == EQUATION_LOCAL_DENSITY["switch"]
    s.start_run(warm=False, play=False)  # live=False: a change does not restart the run by itself
    s.solve()
    fit = problems.DENSITY_LOCAL_SWITCH.solve(doc)
    np.testing.assert_allclose(s.record.field, fit.field, rtol=0, atol=1e-9)
    # the soft edges are walls on the heatmap, one per edge with a_soft >= 0.05, at the place the result document
    # gives its edge (the midpoint of its two nodes), as opaque as it is soft
    local = fit.to_document()["local"]
    a_soft = np.asarray(local["responsibilities"][-1])
    shown = np.flatnonzero(a_soft >= 0.05)
    edges = canvas.edges_source.data
    assert len(edges["x0"]) == shown.size > 0
    np.testing.assert_allclose(edges["alpha"], a_soft[shown], atol=1e-9)
    mid_x = (np.asarray(edges["x0"]) + np.asarray(edges["x1"])) / 2
    mid_y = (np.asarray(edges["y0"]) + np.asarray(edges["y1"])) / 2
    vertical = np.asarray(edges["x0"]) == np.asarray(edges["x1"])
    np.testing.assert_allclose(mid_x, np.asarray(local["edge_x"])[shown])
    np.testing.assert_allclose(mid_y, np.asarray(local["edge_y"])[shown])
    assert np.array_equal(vertical, np.asarray(local["edge_direction"])[shown] == 0)
    length = np.hypot(np.subtract(edges["x1"], edges["x0"]), np.subtract(edges["y1"], edges["y0"]))
    np.testing.assert_allclose(length, np.where(vertical, s.grid.hy, s.grid.hx))
    s.set_local_type("off")
    assert len(canvas.edges_source.data["x0"]) == 0


def test_every_edge_goes_soft_as_pi_soft_goes_to_one_and_none_opens_at_small_beta():
    """What the student sees with the sliders (the decision on (588)'s exact ln Z_k = -1/2 ln kappa_k): at the top of
    the pi_soft slider (0.999) every edge is soft (a_soft > 0.9); at small beta no edge opens, a_soft tends to
    pi_soft sqrt(r_soft) / sum_k pi_k sqrt(r_k), computed here from the document."""
    from app.views.controls import Controls
    s = loaded()
    s.live = False
    c = Controls(session=s)
    assert c.local.pi_soft.end == 0.999
    s.set_local_value("pi_soft", c.local.pi_soft.end)
    s.start_run(warm=False, play=False)
    s.solve()
    assert np.all(s.record.local[-1] > 0.9)
    s.set_local_value("pi_soft", 0.05)
    s.beta = 0.01
    s.start_run(warm=False, play=False)
    s.solve()
    r, pi = np.asarray(s.local_prior["local"]["stiffness"]), np.asarray(s.local_prior["local"]["pi"])
    floor = pi[1] * np.sqrt(r[1]) / np.sum(pi * np.sqrt(r))
    np.testing.assert_allclose(s.record.local[-1], floor, rtol=1e-3)
