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
    s.model = "density, prior on L"   # the local prior belongs to a regression: not written into a density
    assert "local" not in s.to_config()["prior"] and s.kind.name == "density"


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
