"""The BYY mixture tile without a browser (app/views/byy.py): hidden unless the problem is a 1-D density; its counts,
curve and weights are those of bftcore.models.byy.fit_mixture on the session's samples; the toggle switches to ML."""
import numpy as np

from app.session import BFTSession
from app.views.byy import BYYView
from bftcore.models import byy
from bftcore.studies.byy_demo import samples


def test_the_tile_shows_harmony_pruning_on_a_one_dimensional_density_and_ml_keeping_more():
    s = BFTSession()
    view = BYYView(session=s)
    assert s.kind.name == "density" and not view.layout.visible
    y = (samples(7) + 8.0).round(2)
    s.param.update(nx=1, data=[[5.0, float(v)] for v in y])
    assert s.kind.name == "density_1d" and view.layout.visible
    expected = byy.fit_mixture(y, "harmony")
    assert view.fit.kept == expected.kept == 3 and 'data-kept="3"' in view.count.object
    grid = np.asarray(view.curve.data["y"])
    assert np.allclose(view.curve.data["p"], expected.mixture.density(grid))
    ends = [ys[-1] for ys in view.lines.data["ys"]]
    assert len(ends) == 6 and sorted(w > 0 for w in ends) == [False] * 3 + [True] * 3
    view.toggle.value = "maximum likelihood"
    assert view.fit.objective == "ml" and view.fit.kept == byy.fit_mixture(y, "ml").kept > 3
    s.param.update(nx=10)
    assert not view.layout.visible
